//! The rule oracle: DESIGN.md's rules checked on a result, written from the
//! rules themselves (not from the library's code), so that it can catch the
//! library's mistakes.

use std::borrow::Cow;
use std::fmt;

use crate::compact::{Compaction, Compactor};
use crate::count::TokenCounter;
use crate::fold::Pin;
use crate::memory::State;
use crate::message::{Message, Role};

/// A rule of DESIGN.md (and the report's arithmetic), as the checks name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Rule {
    /// 1. Under budget, the history comes back unchanged, borrowed, with no
    ///    summarizer call.
    UnderBudgetUnchanged,
    /// 2. System and developer messages are never folded: those before the
    ///    cut come first, verbatim and in order.
    PinnedKept,
    /// 3. The kept part is a verbatim suffix, cut at a unit boundary (a tool
    ///    call and its results are never split).
    UnitBoundary,
    /// 4. The kept part does not open with a response (assistant turn, tool
    ///    result) when a later user-led boundary exists.
    AlignedCut,
    /// 5. The latest unit is always kept.
    LatestUnitKept,
    /// 6. Within budget whenever the budget is reachable.
    Budget,
    /// 7. One summary message, recognisable as one.
    OneSummary,
    /// 8. Nothing lost: an error changes nothing; a memory loses no message.
    NothingLost,
    /// The summarizer was asked about exactly the folded turns, once, with
    /// the previous summary and an allowance of at least the minimum.
    SummarizerContract,
    /// The result's counts (`tokens_after`, `over_budget`) are exact.
    Counts,
    /// 11. A pinned message is in the output, verbatim; one from before the
    ///     cut right after the summary, in order.
    PinsKept,
}

impl Rule {
    /// The rule's number in DESIGN.md's list, for the numbered ones.
    pub fn number(self) -> Option<u8> {
        Some(match self {
            Rule::UnderBudgetUnchanged => 1,
            Rule::PinnedKept => 2,
            Rule::UnitBoundary => 3,
            Rule::AlignedCut => 4,
            Rule::LatestUnitKept => 5,
            Rule::Budget => 6,
            Rule::OneSummary => 7,
            Rule::NothingLost => 8,
            Rule::PinsKept => 11,
            Rule::SummarizerContract | Rule::Counts => return None,
        })
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Rule::UnderBudgetUnchanged => "under budget, unchanged",
            Rule::PinnedKept => "system messages are never folded",
            Rule::UnitBoundary => "kept part is a verbatim suffix cut at a unit boundary",
            Rule::AlignedCut => "aligned cut",
            Rule::LatestUnitKept => "the latest unit is kept",
            Rule::Budget => "within budget when reachable",
            Rule::OneSummary => "one summary message",
            Rule::NothingLost => "nothing lost",
            Rule::SummarizerContract => "the summarizer gets exactly the folded turns",
            Rule::Counts => "exact counts",
            Rule::PinsKept => "pinned messages stay",
        };
        match self.number() {
            Some(n) => write!(f, "rule {n} ({name})"),
            None => f.write_str(name),
        }
    }
}

/// One broken rule: which, the message indices involved (in the input
/// unless said otherwise), and what was seen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The rule broken.
    pub rule: Rule,
    /// The messages involved.
    pub indices: Vec<usize>,
    /// What was seen, in words.
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.rule)?;
        if !self.indices.is_empty() {
            write!(f, " at {:?}", self.indices)?;
        }
        write!(f, ": {}", self.detail)
    }
}

/// Every rule a result broke (never empty).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violations(pub Vec<Violation>);

impl Violations {
    /// Whether `rule` is among those broken.
    pub fn has(&self, rule: Rule) -> bool {
        self.0.iter().any(|v| v.rule == rule)
    }

    /// The rules broken, in the order they were found.
    pub fn rules(&self) -> Vec<Rule> {
        let mut rules: Vec<Rule> = Vec::new();
        for v in &self.0 {
            if !rules.contains(&v.rule) {
                rules.push(v.rule);
            }
        }
        rules
    }
}

impl fmt::Display for Violations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, v) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{v}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Violations {}

/// Collects violations.
#[derive(Default)]
pub(super) struct Found(pub(super) Vec<Violation>);

impl Found {
    /// Notes a violation of `rule` at `indices` unless `ok`.
    pub(super) fn check(
        &mut self,
        ok: bool,
        rule: Rule,
        indices: impl Into<Vec<usize>>,
        detail: impl FnOnce() -> String,
    ) {
        if !ok {
            self.0.push(Violation {
                rule,
                indices: indices.into(),
                detail: detail(),
            });
        }
    }

    /// The violations noted, if any.
    pub(super) fn done(self) -> Result<(), Violations> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(Violations(self.0))
        }
    }
}

/// Indices of the calls the message at `j` answers (a tool message's
/// `tool_call_id`, a user message's `tool_result` blocks): for each id, the
/// nearest earlier message making a call with it (`tool_calls`, or
/// `tool_use` blocks).
fn answered_calls(history: &[Message], j: usize) -> impl Iterator<Item = usize> + '_ {
    history[j]
        .answered_ids()
        .filter_map(move |id| (0..j).rev().find(|&i| history[i].call_ids().any(|c| c == id)))
}

/// Whether `b` is a unit boundary of `history`: no tool call before it has
/// a result at or after it, and no Responses `reasoning` item just before
/// it is cut from the item it led to.
pub fn is_boundary(history: &[Message], b: usize) -> bool {
    let reasoning = |m: &Message| m.item().is_some_and(|item| item.kind() == Some("reasoning"));
    let led = b > 0 && b < history.len() && reasoning(&history[b - 1]);
    !led && (b..history.len()).all(|j| answered_calls(history, j).all(|i| i >= b))
}

/// Where the last unit of `history` starts (0 for an empty history).
pub fn last_unit_start(history: &[Message]) -> usize {
    (0..history.len())
        .rev()
        .find(|&b| is_boundary(history, b))
        .unwrap_or(0)
}

pub(super) fn is_pinned(m: &Message) -> bool {
    matches!(m.role, Role::System | Role::Developer)
}

/// The first non-pinned message from `b` on is an assistant turn or a tool
/// result (a `tool` message, a `tool_call_id`, or `tool_result` blocks).
fn opens_with_response(history: &[Message], b: usize) -> bool {
    history[b..].iter().find(|m| !is_pinned(m)).is_some_and(|m| {
        matches!(m.role, Role::Assistant | Role::Tool)
            || m.tool_call_id.is_some()
            || m.answered_ids().next().is_some()
    })
}

fn total<C: TokenCounter>(counter: &C, messages: &[Message]) -> usize {
    messages.iter().fold(counter.reply_priming(), |t, m| {
        t.saturating_add(counter.count_message(m))
    })
}

/// The input indices `c`'s pins name in `h` (rule 11), ascending: the
/// first and latest user turns (not tool results, not summaries), indices,
/// predicates; never a system message or a summary; a message of a tool
/// exchange with its whole unit.
pub(super) fn pinned<C>(c: &Compactor<C>, h: &[Message]) -> Vec<usize> {
    let eligible = |i: usize| !is_pinned(&h[i]) && !c.policy.is_summary(&h[i]);
    let user = |&i: &usize| eligible(i) && h[i].role == Role::User && !answers(&h[i]);
    let mut named: Vec<usize> = Vec::new();
    for pin in &c.pins {
        match pin {
            Pin::FirstUser => named.extend((0..h.len()).find(user)),
            Pin::LastUser => named.extend((0..h.len()).rev().find(user)),
            Pin::Index(i) => named.extend((*i < h.len()).then_some(*i)),
            Pin::Matching(f) => named.extend((0..h.len()).filter(|&i| f(i, &h[i]))),
        }
    }
    named.retain(|&i| eligible(i));
    let mut out: Vec<usize> = Vec::new();
    for i in named {
        // The unit around `i`: from the boundary at or before it to the next.
        let reasoning = h[i].item().is_some_and(|item| item.kind() == Some("reasoning"));
        let exchange = h[i].call_ids().next().is_some() || answers(&h[i]) || reasoning;
        let (from, to) = match exchange {
            true => (
                (0..=i).rev().find(|&b| is_boundary(h, b)).unwrap_or(0),
                (i + 1..h.len()).find(|&b| is_boundary(h, b)).unwrap_or(h.len()),
            ),
            false => (i, i + 1),
        };
        out.extend((from..to).filter(|&j| eligible(j)));
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Whether `m` answers a tool call.
fn answers(m: &Message) -> bool {
    matches!(m.role, Role::Tool) || m.answered_ids().next().is_some()
}

/// Where the region after the last previous summary starts.
fn after_summaries<C>(c: &Compactor<C>, h: &[Message]) -> usize {
    h.iter()
        .rposition(|m| c.policy.is_summary(m))
        .map_or(0, |i| i + 1)
}

/// Whether no compaction of `h` can meet the budget: pinned messages, the
/// latest unit and a minimal summary already exceed it.
pub(super) fn unreachable<C: TokenCounter>(c: &Compactor<C>, h: &[Message]) -> bool {
    let after = after_summaries(c, h);
    let pins = pinned(c, h);
    let fixed = |i: usize| (is_pinned(&h[i]) && !c.policy.is_summary(&h[i])) || pins.contains(&i);
    let pinned = (0..h.len())
        .filter(|&i| fixed(i))
        .fold(0usize, |t, i| t.saturating_add(c.counter.count_message(&h[i])));
    let latest = (after + last_unit_start(&h[after..])..h.len())
        .filter(|&i| !fixed(i))
        .fold(0usize, |t, i| t.saturating_add(c.counter.count_message(&h[i])));
    let empty = Message::new(c.policy.summary_role.clone(), &*c.policy.summary_prefix);
    let min_summary = c
        .counter
        .count_message(&empty)
        .saturating_add(c.policy.min_summary_tokens);
    c.counter
        .reply_priming()
        .saturating_add(pinned)
        .saturating_add(latest)
        .saturating_add(min_summary)
        > c.budget
}

/// Where the kept part may start in the input, for a summarized result
/// whose summary is at `s` in the output, and how many of `pins` (ascending
/// input indices) stand between them, ascending: every reading of what
/// follows the summary as those pins from before the cut, then a suffix of
/// the input. (A pinned message next to the cut reads either way: the
/// output is the same.)
pub(super) fn cuts_of(input: &[Message], out: &[Message], s: usize, pins: &[usize]) -> Vec<(usize, usize)> {
    let after = &out[s + 1..];
    (0..=pins.len().min(after.len()))
        .filter_map(|k| {
            let kept = &after[k..];
            let cut = input.len().checked_sub(kept.len())?;
            let placed = (pins[..k].iter().zip(&after[..k])).all(|(&i, m)| i < cut && input[i] == *m);
            let rest_kept = pins[k..].iter().all(|&i| i >= cut);
            (input.ends_with(kept) && placed && rest_kept).then_some((cut, k))
        })
        .collect()
}

/// Checks a compaction's result against every rule it can be judged on
/// from the outside: 1 to 7 and the counts.
///
/// `input` is what was compacted, `compactor` what compacted it (its
/// budget, counter, policy and strict flag are what the rules are measured
/// with).
///
/// # Errors
///
/// Every rule broken, with the indices involved.
///
/// # Examples
///
/// ```
/// use std::borrow::Cow;
/// use chatfold::testing::{Rule, check_compaction};
/// use chatfold::{Compactor, Extractive, Message};
///
/// let history: Vec<Message> = (0..30).map(|i| Message::user(format!("turn {i}"))).collect();
/// let compactor = Compactor::new(60).fold_to(60);
/// let mut result = compactor.compact(&history, &Extractive::new())?;
/// assert!(check_compaction(&history, &result, &compactor).is_ok());
///
/// // Drop the latest turn: rule 5 (and rule 3: no longer a suffix) is broken.
/// let mut broken = result.messages.to_vec();
/// broken.pop();
/// result.messages = Cow::Owned(broken);
/// let violations = check_compaction(&history, &result, &compactor).unwrap_err();
/// assert!(violations.has(Rule::UnitBoundary));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn check_compaction<C: TokenCounter>(
    input: &[Message],
    result: &Compaction<'_>,
    compactor: &Compactor<C>,
) -> Result<(), Violations> {
    let c = compactor;
    let mut check = Check {
        input,
        out: &result.messages,
        result,
        c,
        found: Found::default(),
    };
    let total_in = total(&c.counter, input);
    let total_out = total(&c.counter, check.out);
    check.counts(total_out);
    check.under_budget(total_in);
    check.budget(total_out);
    let Some(s) = check.one_summary() else {
        return check.found.done();
    };
    check.prefixed(s);
    // Rules 2 to 5 and 11 hold when they hold for one reading of the cut.
    let mut first: Option<Found> = None;
    for (cut, _) in check.cuts(s) {
        let mut reading = Check {
            found: Found::default(),
            ..check
        };
        reading.boundary(cut);
        reading.pinned(s, cut);
        reading.aligned(cut);
        reading.latest_kept(cut);
        if reading.found.0.is_empty() {
            return check.found.done();
        }
        first.get_or_insert(reading.found);
    }
    check.found.0.extend(first.map(|f| f.0).unwrap_or_default());
    check.found.done()
}

/// A compaction's result being checked: what was compacted, the result
/// and its messages, the compactor, and the violations found so far.
struct Check<'a, C> {
    input: &'a [Message],
    out: &'a [Message],
    result: &'a Compaction<'a>,
    c: &'a Compactor<C>,
    found: Found,
}

impl<C: TokenCounter> Check<'_, C> {
    /// The counts: `tokens_after` is the output's `total_out` tokens, and
    /// `over_budget` says whether they exceed the budget.
    fn counts(&mut self, total_out: usize) {
        let (result, c) = (self.result, self.c);
        self.found
            .check(result.tokens_after == total_out, Rule::Counts, [], || {
                format!(
                    "tokens_after is {}, the output takes {total_out}",
                    result.tokens_after
                )
            });
        self.found.check(
            result.over_budget == (total_out > c.budget),
            Rule::Counts,
            [],
            || {
                format!(
                    "over_budget is {} for {total_out} tokens against {}",
                    result.over_budget, c.budget
                )
            },
        );
    }

    /// Rule 1: an input of `total_in` tokens within the budget comes back
    /// unchanged, borrowed, and not summarized.
    fn under_budget(&mut self, total_in: usize) {
        let (result, c) = (self.result, self.c);
        if total_in > c.budget {
            return;
        }
        self.found
            .check(self.out == self.input, Rule::UnderBudgetUnchanged, [], || {
                format!(
                    "{total_in} tokens fit the budget of {} yet the history changed",
                    c.budget
                )
            });
        self.found.check(
            matches!(result.messages, Cow::Borrowed(_)),
            Rule::UnderBudgetUnchanged,
            [],
            || "an unchanged history was copied".to_owned(),
        );
        self.found
            .check(!result.summarized, Rule::UnderBudgetUnchanged, [], || {
                "summarized a history under budget".to_owned()
            });
    }

    /// Rule 6: an output of `total_out` tokens over the budget is not
    /// strict mode's, and the budget was unreachable.
    fn budget(&mut self, total_out: usize) {
        let c = self.c;
        if total_out <= c.budget {
            return;
        }
        self.found.check(!c.strict, Rule::Budget, [], || {
            "strict mode returned an over-budget result".to_owned()
        });
        self.found
            .check(unreachable(c, self.input), Rule::Budget, [], || {
                format!(
                    "{total_out} tokens over the budget of {} though it was reachable",
                    c.budget
                )
            });
    }

    /// Rule 7, its count: an output not summarized is the input; a
    /// summarized one holds exactly one summary. Where the first summary
    /// is in the output, when the result is summarized and has one.
    fn one_summary(&mut self) -> Option<usize> {
        let (out, c) = (self.out, self.c);
        let summaries: Vec<usize> = (0..out.len()).filter(|&i| c.policy.is_summary(&out[i])).collect();
        if !self.result.summarized {
            self.found.check(out == self.input, Rule::OneSummary, [], || {
                "not summarized, yet changed".to_owned()
            });
            return None;
        }
        self.found
            .check(summaries.len() == 1, Rule::OneSummary, summaries.clone(), || {
                format!(
                    "{} summary messages in the output (indices in the output)",
                    summaries.len()
                )
            });
        summaries.first().copied()
    }

    /// Rules 3 and 11: the messages after the summary at `s` are the
    /// pinned ones from before the cut, in order, then a suffix of the
    /// input. Where the cut may be in the input (none when they are not).
    fn cuts(&mut self, s: usize) -> Vec<(usize, usize)> {
        let pins = pinned(self.c, self.input);
        let cuts = cuts_of(self.input, self.out, s, &pins);
        let rule = match pins.is_empty() {
            true => Rule::UnitBoundary,
            false => Rule::PinsKept,
        };
        self.found.check(!cuts.is_empty(), rule, pins, || {
            "the messages after the summary are not the pinned ones, in order, then a suffix of the input"
                .to_owned()
        });
        cuts
    }

    /// Rule 3: the cut is at a unit boundary.
    fn boundary(&mut self, cut: usize) {
        self.found
            .check(is_boundary(self.input, cut), Rule::UnitBoundary, [cut], || {
                format!("the cut at {cut} separates a tool call from its result")
            });
    }

    /// Rule 2: the pinned messages before the `cut` (previous summaries
    /// aside) come before the summary at `s`, verbatim and in order.
    fn pinned(&mut self, s: usize, cut: usize) {
        let (input, c) = (self.input, self.c);
        let expected: Vec<&Message> = input[..cut]
            .iter()
            .filter(|m| is_pinned(m) && !c.policy.is_summary(m))
            .collect();
        let hoisted: Vec<&Message> = self.out[..s].iter().collect();
        if hoisted != expected {
            let lost: Vec<usize> = (0..cut)
                .filter(|&i| is_pinned(&input[i]) && !c.policy.is_summary(&input[i]))
                .filter(|&i| !hoisted.contains(&&input[i]))
                .collect();
            self.found.check(false, Rule::PinnedKept, lost, || {
                format!(
                    "{} pinned messages before the cut, {} before the summary, or not in order",
                    expected.len(),
                    hoisted.len()
                )
            });
        }
    }

    /// Rule 4: the kept part from `cut` opens with a response only when no
    /// later boundary opens with a user turn.
    fn aligned(&mut self, cut: usize) {
        let input = self.input;
        if !opens_with_response(input, cut) {
            return;
        }
        let better =
            (cut + 1..input.len()).find(|&b| is_boundary(input, b) && !opens_with_response(input, b));
        self.found.check(better.is_none(), Rule::AlignedCut, [cut], || {
            format!(
                "the kept part opens with a response at {cut} though {} opens with a user turn",
                better.unwrap_or_default()
            )
        });
    }

    /// Rule 5: the kept part from `cut` holds the latest unit after the
    /// previous summaries.
    fn latest_kept(&mut self, cut: usize) {
        let input = self.input;
        let after = after_summaries(self.c, input);
        if after < input.len() {
            let latest = after + last_unit_start(&input[after..]);
            self.found
                .check(cut <= latest, Rule::LatestUnitKept, [latest], || {
                    format!("the latest unit starts at {latest}, the kept part at {cut}")
                });
        }
    }

    /// Rule 7, its form: the summary at `s` starts with the policy's
    /// prefix.
    fn prefixed(&mut self, s: usize) {
        self.found.check(
            self.out[s].text().starts_with(&*self.c.policy.summary_prefix),
            Rule::OneSummary,
            [],
            || "the summary does not start with the policy's prefix".to_owned(),
        );
    }
}

/// Checks one add to a memory: `before` is its state before adding
/// `added`, `after` its state after, and `failed` whether the add
/// returned an error.
///
/// - After a failure, the memory holds the new message at the end of its
///   buffer and nothing else changed (rule 8).
/// - Otherwise no message is lost: the buffer is a suffix of the old
///   buffer and the new message, and the messages that left it left
///   whole units (rule 3); they went to the summary (summarizing
///   memories) or were dropped (windows), which the state alone cannot
///   tell apart.
///
/// System messages a memory keeps apart ([`State::system`]) are checked the
/// same way: nothing leaves them.
///
/// # Errors
///
/// Every rule broken, with indices into the old buffer followed by the new
/// message.
pub fn check_memory_step(
    before: &State,
    added: &Message,
    after: &State,
    failed: bool,
) -> Result<(), Violations> {
    let mut found = Found::default();
    let mut sequence: Vec<Message> = before.system.iter().chain(&before.buffer).cloned().collect();
    sequence.push(added.clone());
    let now: Vec<Message> = after.system.iter().chain(&after.buffer).cloned().collect();
    if failed {
        found.check(after.summary == before.summary, Rule::NothingLost, [], || {
            "a failed add changed the summary".to_owned()
        });
        found.check(now == sequence, Rule::NothingLost, [sequence.len() - 1], || {
            "a failed add did not keep exactly the old messages and the new one".to_owned()
        });
        return found.done();
    }
    found.check(
        before.system.iter().all(|m| after.system.contains(m)),
        Rule::NothingLost,
        [],
        || "a kept-apart system message was lost".to_owned(),
    );
    // What left: the messages of the sequence not in `now`, which must be
    // one leading run (a suffix is kept).
    let buffer_seq: Vec<Message> = before
        .buffer
        .iter()
        .chain(std::iter::once(added))
        .cloned()
        .collect();
    let moved_to_system: Vec<&Message> = after
        .system
        .iter()
        .filter(|m| !before.system.contains(m))
        .collect();
    let kept: Vec<&Message> = after.buffer.iter().collect();
    let expected_tail = buffer_seq.len().checked_sub(kept.len() + moved_to_system.len());
    match expected_tail {
        Some(_) => {
            let rest: Vec<&Message> = buffer_seq
                .iter()
                .filter(|m| !moved_to_system.contains(m))
                .collect();
            let ok = rest.ends_with(&kept);
            let missing: Vec<usize> = (0..buffer_seq.len())
                .filter(|&i| !kept.contains(&&buffer_seq[i]) && !moved_to_system.contains(&&buffer_seq[i]))
                .collect();
            found.check(ok, Rule::NothingLost, missing.clone(), || {
                "the buffer is not what remains of the old buffer and the new message".to_owned()
            });
            if ok {
                let cut = rest.len() - kept.len();
                let rest_owned: Vec<Message> = rest.into_iter().cloned().collect();
                found.check(is_boundary(&rest_owned, cut), Rule::UnitBoundary, [cut], || {
                    format!("the eviction at {cut} separates a tool call from its result")
                });
            }
        }
        None => found.check(false, Rule::NothingLost, [], || {
            "the buffer holds messages never added".to_owned()
        }),
    }
    found.done()
}
