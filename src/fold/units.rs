//! Atomic units and aligned cuts: where a history may be cut, written once.
//!
//! A *unit* is a run of messages that is kept or dropped whole:
//!
//! - a message that makes tool calls (OpenAI's `tool_calls`, or Anthropic's
//!   `tool_use` blocks), every message that answers one of them (a `tool`
//!   message, or a user message's `tool_result` blocks, which may answer
//!   several), and everything between them (interleaved messages, and other
//!   tool exchanges that overlap it, transitively);
//! - any other message on its own, including an *orphan* result (one whose
//!   call id no earlier call has);
//! - and with each, the Responses API `reasoning` items just before it
//!   ([`Message::leads_in`]): reasoning travels with the item it led to.
//!
//! A result answers the nearest earlier call with its id, so a reused id
//! starts a new exchange. A call nobody answers ends its unit at itself.
//!
//! A *cut* keeps a suffix of whole units. It is *aligned* when the first
//! message it keeps (looking past pinned ones where they are hoisted, see
//! [`Pinned`]) is not response-like ([`Message::is_response`]: an assistant
//! turn, or a tool result: a `tool` message, a `tool_call_id`, or
//! `tool_result` blocks):
//! Anthropic requires a user turn first, OpenAI rejects a tool result without
//! its call. When the suffix chosen by size opens with a response-like turn,
//! the cut moves forward to the next unit that does not, if there is one; if
//! every later head is response-like it stays put.
//!
//! Units are found walking back from the end ([`Backward`]), so a cut reads
//! only the messages it keeps and the list of messages that carry calls, or,
//! without a list, the messages back to each result's call: its cost follows
//! the kept part, not the history. The compactor and every memory
//! strategy cut through [`cut`].

use std::ops::Range;

use crate::message::Message;

/// Indices of the messages that carry tool calls, in order.
pub(crate) fn callers(messages: &[Message]) -> Vec<usize> {
    (0..messages.len())
        .filter(|&i| messages[i].makes_calls())
        .collect()
}

/// The units of `messages[floor..]`, newest first.
///
/// The messages that carry calls come from a list ([`Backward::new`]) or
/// are found by reading back from a result to its call, as far as it asks
/// ([`Backward::reading`]).
#[derive(Clone, Debug)]
pub(crate) struct Backward<'m> {
    messages: &'m [Message],
    callers: Callers<'m>,
    floor: usize,
    /// Start of the unit produced last: the end of the next one.
    end: usize,
}

/// Where [`Backward`] finds the messages that carry calls.
#[derive(Clone, Debug)]
enum Callers<'m> {
    /// Listed: (at least) every one at or after the floor, in order.
    Listed(&'m [usize]),
    /// Found so far, newest first: every one at or after `low` (which
    /// only falls, never below the floor).
    Read { newest_first: Vec<usize>, low: usize },
}

impl<'m> Backward<'m> {
    /// `callers` lists (at least) the indices at or after `floor` of the
    /// messages that carry tool calls, in order ([`callers`]). Calls before
    /// `floor` are ignored: a result answering one is an orphan here.
    pub(crate) fn new(messages: &'m [Message], callers: &'m [usize], floor: usize) -> Self {
        Backward {
            messages,
            callers: Callers::Listed(callers),
            floor,
            end: messages.len(),
        }
    }

    /// As [`Backward::new`], finding the messages that carry calls by
    /// reading back from each result to its call: the units read cost what
    /// they span, however long the history before them (an orphan result
    /// reads back to the floor, once).
    pub(crate) fn reading(messages: &'m [Message], floor: usize) -> Self {
        Backward {
            messages,
            callers: Callers::Read {
                newest_first: Vec::new(),
                low: messages.len(),
            },
            floor,
            end: messages.len(),
        }
    }

    /// Index of the earliest call message that the message at `j` answers
    /// (it may answer several calls), among the calls at or after the floor:
    /// for each id it answers, the nearest earlier call with that id.
    fn earliest_call_of(&mut self, j: usize) -> Option<usize> {
        let (messages, floor) = (self.messages, self.floor);
        let calls = |c: usize, id: &str| messages[c].call_ids().any(|call| call == id);
        match &mut self.callers {
            Callers::Listed(callers) => {
                let earlier = &callers[..callers.partition_point(|&c| c < j)];
                // No call between the floor and `j`: nothing `j` answers is here.
                if earlier.last().is_none_or(|&c| c < floor) {
                    return None;
                }
                (messages[j].answered_ids())
                    .filter_map(|id| {
                        (earlier.iter().rev().copied())
                            .take_while(|&c| c >= floor)
                            .find(|&c| calls(c, id))
                    })
                    .min()
            }
            Callers::Read { newest_first, low } => {
                let mut earliest: Option<usize> = None;
                for id in messages[j].answered_ids() {
                    let before = newest_first.partition_point(|&c| c >= j);
                    let mut found = newest_first[before..].iter().copied().find(|&c| calls(c, id));
                    // Read back from where reading stopped, to the call or the floor.
                    while found.is_none() && *low > floor {
                        *low -= 1;
                        if messages[*low].makes_calls() {
                            newest_first.push(*low);
                            found = (*low < j && calls(*low, id)).then_some(*low);
                        }
                    }
                    earliest = match (earliest, found) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                }
                earliest
            }
        }
    }
}

impl Iterator for Backward<'_> {
    type Item = Range<usize>;

    /// The unit ending where the previous one started: it reaches back to the
    /// call of every result in it. (A call whose result is in a later unit
    /// cannot be in this one: that unit would have reached back to it.)
    fn next(&mut self) -> Option<Range<usize>> {
        if self.end <= self.floor {
            return None;
        }
        let end = self.end;
        let mut start = end - 1;
        let mut k = end;
        while k > start {
            k -= 1;
            if let Some(call) = self.earliest_call_of(k) {
                start = start.min(call);
            }
        }
        // Reasoning goes with what it led to.
        while start > self.floor && self.messages[start - 1].leads_in() {
            start -= 1;
        }
        self.end = start;
        Some(start..end)
    }
}

/// The units of `messages`, in order, covering every index once.
#[cfg(test)]
pub(crate) fn units(messages: &[Message]) -> Vec<Range<usize>> {
    let callers = callers(messages);
    let mut units: Vec<Range<usize>> = Backward::new(messages, &callers, 0).collect();
    units.reverse();
    units
}

/// What a `system` or `developer` message is to alignment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pinned {
    /// Pinned messages are hoisted (the compactor): alignment looks past them
    /// to the first other message.
    LookPast,
    /// Nothing is hoisted (a memory's buffer): a pinned message is an
    /// ordinary opening, as in rollmem.
    Ordinary,
}

/// Whether keeping `messages[start..]` is an aligned cut.
pub(crate) fn is_aligned(messages: &[Message], start: usize, pinned: Pinned) -> bool {
    !opens_with_response(messages, start, pinned)
}

/// Whether keeping `messages[start..]` opens with a response-like turn.
fn opens_with_response(messages: &[Message], start: usize, pinned: Pinned) -> bool {
    messages[start..]
        .iter()
        .find(|m| pinned == Pinned::Ordinary || !m.role.is_pinned())
        .is_some_and(Message::is_response)
}

/// Why the cut stopped where it did, before alignment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// The next older unit did not fit the limit.
    Limit,
    /// Every unit is kept.
    Start,
}

/// How many messages at the front of `messages` must go so that the rest
/// costs at most `limit`: whole units, the latest always kept, aligned, with
/// nothing hoisted (a memory's buffer). `callers` lists the messages with tool
/// calls (see [`callers`]); `cost(i)` is message `i`'s cost. Reads only the
/// messages it keeps.
pub(crate) fn evict_count(
    messages: &[Message],
    callers: &[usize],
    cost: impl Fn(usize) -> usize,
    limit: usize,
) -> usize {
    let mut kept = 0usize;
    let units = Backward::new(messages, callers, 0);
    cut(messages, units, Pinned::Ordinary, |unit| {
        kept = unit.map(&cost).fold(kept, usize::saturating_add);
        kept <= limit
    })
    .start
}

/// How many messages at the front of `messages` one fold takes (a chunk):
/// whole units from the front, at most `limits.0` messages and `limits.1`
/// tokens by `cost` (at least one unit), never the latest unit. Of the chunks
/// within the limits, the longest that leaves the rest aligned (nothing
/// hoisted); when none does, the longest, with the cut then aligned forward
/// as [`cut`] does. 0 when there is only one unit.
///
/// Reads every unit of `messages` once (they are found from the end).
pub(crate) fn chunk(
    messages: &[Message],
    callers: &[usize],
    cost: impl Fn(usize) -> usize,
    limits: (usize, usize),
) -> usize {
    let (max_messages, max_tokens) = limits;
    // Ends of the candidate chunks: the starts of every unit but the first,
    // ascending, the latest unit's start last.
    let mut ends: Vec<usize> = Backward::new(messages, callers, 0)
        .map(|unit| unit.start)
        .filter(|&start| start > 0)
        .collect();
    ends.reverse();
    let (mut tokens, mut within) = (0usize, 0usize);
    for (k, &end) in ends.iter().enumerate() {
        let from = k.checked_sub(1).map_or(0, |j| ends[j]);
        tokens = (from..end).map(&cost).fold(tokens, usize::saturating_add);
        if k > 0 && (end > max_messages || tokens > max_tokens) {
            break;
        }
        within = k + 1;
    }
    let candidates = &ends[..within];
    if let Some(&end) = candidates
        .iter()
        .rev()
        .find(|&&end| is_aligned(messages, end, Pinned::Ordinary))
    {
        return end;
    }
    let Some(&end) = candidates.last() else {
        return 0;
    };
    let units = Backward::new(messages, callers, 0);
    cut(messages, units, Pinned::Ordinary, |unit| unit.start >= end).start
}

/// A cut: keep `messages[start..]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Cut {
    /// First kept index.
    pub start: usize,
    /// Why the walk back stopped.
    pub stop: Stop,
    /// Where the cut was before alignment moved it forward, if it did.
    pub aligned_from: Option<usize>,
    /// The latest unit (empty when there are no units).
    pub latest: Range<usize>,
}

/// Cuts `messages` by walking back over `units` (newest first).
///
/// Each unit is offered to `fits`, newest first, so the caller can add up
/// what is kept; the walk stops at the first older unit it refuses. The latest
/// unit is kept whatever `fits` answers. The cut is then aligned (see the
/// module docs), treating pinned messages as `pinned` says. Without units
/// nothing is kept.
pub(crate) fn cut(
    messages: &[Message],
    mut units: impl Iterator<Item = Range<usize>>,
    pinned: Pinned,
    mut fits: impl FnMut(Range<usize>) -> bool,
) -> Cut {
    let Some(latest) = units.next() else {
        let end = messages.len();
        return Cut {
            start: end,
            stop: Stop::Start,
            aligned_from: None,
            latest: end..end,
        };
    };
    fits(latest.clone());
    // Starts of the kept units, newest first.
    let mut starts = vec![latest.start];
    let mut stop = Stop::Start;
    for unit in units {
        if !fits(unit.clone()) {
            stop = Stop::Limit;
            break;
        }
        starts.push(unit.start);
    }
    let mut start = *starts.last().unwrap_or(&latest.start);
    let mut aligned_from = None;
    if opens_with_response(messages, start, pinned) {
        let later = starts.iter().rev().copied().filter(|&s| s > start);
        if let Some(better) = later
            .into_iter()
            .find(|&s| !opens_with_response(messages, s, pinned))
        {
            aligned_from = Some(start);
            start = better;
        }
    }
    Cut {
        start,
        stop,
        aligned_from,
        latest,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolCall;

    fn call(ids: &[&str]) -> Message {
        Message::assistant_tool_calls(ids.iter().map(|id| ToolCall::new(*id, "f", "{}")).collect())
    }

    fn ranges(messages: &[Message]) -> Vec<(usize, usize)> {
        units(messages).into_iter().map(|r| (r.start, r.end)).collect()
    }

    /// Anthropic's form: `tool_use` blocks in the assistant message,
    /// `tool_result` blocks in user messages.
    fn blocks(kind: &str, ids: &[&str]) -> Message {
        use crate::message::Part;
        let parts = ids
            .iter()
            .map(|id| {
                Part::from_json(match kind {
                    "tool_use" => serde_json::json!({"type": "tool_use", "id": id, "name": "f", "input": {}}),
                    _ => serde_json::json!({"type": "tool_result", "tool_use_id": id, "content": "ok"}),
                })
            })
            .collect();
        let role = if kind == "tool_use" { "assistant" } else { "user" };
        Message::new(role, "").with_parts(parts)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
        /// Reading back to the calls finds the units the listed callers give,
        /// in every form, from any floor (orphans, reused ids, interleaving).
        #[test]
        fn reading_back_finds_the_units_the_list_gives(
            (messages, floor) in proptest::prelude::Strategy::prop_flat_map(
                proptest::prop_oneof![
                    crate::testing::Histories::new().strategy(),
                    crate::testing::Histories::new().form(crate::testing::Form::Anthropic).strategy(),
                    crate::testing::Histories::new().form(crate::testing::Form::Responses).strategy(),
                ],
                |m| { let n = m.len(); (proptest::strategy::Just(m), 0..=n) },
            ),
        ) {
            let listed = callers(&messages);
            let by_list: Vec<Range<usize>> = Backward::new(&messages, &listed, floor).collect();
            let by_reading: Vec<Range<usize>> = Backward::reading(&messages, floor).collect();
            proptest::prop_assert_eq!(by_reading, by_list);
        }
    }

    #[test]
    fn tool_blocks_make_units_as_tool_calls_do() {
        let h = [
            Message::user("q"),
            blocks("tool_use", &["a", "b"]),
            blocks("tool_result", &["a"]),
            Message::user("meanwhile"),
            blocks("tool_result", &["b"]),
            Message::assistant("done"),
            blocks("tool_result", &["nobody"]),
        ];
        // The call, both results (one user message apart) and what is
        // between; an orphan result block is a unit of its own.
        assert_eq!(ranges(&h), [(0, 1), (1, 5), (5, 6), (6, 7)]);
        // A user message of results does not open a kept part.
        assert!(!is_aligned(&h, 2, Pinned::Ordinary));
        assert!(is_aligned(&h, 0, Pinned::Ordinary));
        let several = [
            Message::user("q"),
            blocks("tool_use", &["x", "y"]),
            blocks("tool_result", &["y", "x"]),
        ];
        assert_eq!(ranges(&several), [(0, 1), (1, 3)]);
    }

    #[test]
    fn plain_messages_are_single_units() {
        let h = [Message::user("a"), Message::assistant("b"), Message::user("c")];
        assert_eq!(ranges(&h), [(0, 1), (1, 2), (2, 3)]);
        assert!(units(&[]).is_empty());
    }

    #[test]
    fn call_with_several_results_is_one_unit() {
        let h = [
            Message::user("q"),
            call(&["a", "b", "c"]),
            Message::tool("1", "a"),
            Message::tool("2", "b"),
            Message::tool("3", "c"),
            Message::assistant("done"),
        ];
        assert_eq!(ranges(&h), [(0, 1), (1, 5), (5, 6)]);
    }

    #[test]
    fn interleaved_messages_join_the_unit() {
        let h = [
            call(&["a", "b"]),
            Message::tool("1", "a"),
            Message::system("note"),
            Message::user("hurry"),
            Message::tool("2", "b"),
            Message::user("next"),
        ];
        assert_eq!(ranges(&h), [(0, 5), (5, 6)]);
    }

    #[test]
    fn overlapping_exchanges_merge() {
        let h = [
            call(&["a"]),
            call(&["b"]),
            Message::tool("1", "a"),
            Message::tool("2", "b"),
            Message::user("x"),
        ];
        assert_eq!(ranges(&h), [(0, 4), (4, 5)]);
    }

    #[test]
    fn orphans_and_unanswered_calls_stand_alone() {
        let h = [
            Message::tool("lost", "zzz"),
            call(&["a"]),
            Message::user("never answered"),
            Message::tool("before its call", "b"),
            call(&["b"]),
        ];
        assert_eq!(ranges(&h), [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)]);
    }

    #[test]
    fn reused_id_answers_the_nearest_call() {
        let h = [
            call(&["x"]),
            Message::tool("1", "x"),
            Message::user("again"),
            call(&["x"]),
            Message::tool("2", "x"),
        ];
        assert_eq!(ranges(&h), [(0, 2), (2, 3), (3, 5)]);
    }

    fn cut_by_count(messages: &[Message], keep: usize) -> Cut {
        let callers = callers(messages);
        let mut kept = 0;
        cut(
            messages,
            Backward::new(messages, &callers, 0),
            Pinned::LookPast,
            |u| {
                kept += u.len();
                kept <= keep
            },
        )
    }

    #[test]
    fn calls_before_the_floor_make_orphans() {
        let h = [
            call(&["a"]),
            Message::user("summary was here"),
            Message::tool("r", "a"),
            Message::user("u"),
        ];
        let callers = callers(&h);
        let units: Vec<_> = Backward::new(&h, &callers, 2).collect();
        assert_eq!(units, [3..4, 2..3]);
        let units: Vec<_> = Backward::new(&h, &callers, 0).collect();
        assert_eq!(units, [3..4, 0..3]);
    }

    #[test]
    fn latest_unit_is_kept_even_over_the_limit() {
        let h = [Message::user("a"), call(&["a"]), Message::tool("r", "a")];
        let c = cut_by_count(&h, 0);
        assert_eq!(c.start, 1);
        assert_eq!(c.stop, Stop::Limit);
    }

    #[test]
    fn alignment_moves_past_response_like_heads() {
        let h = [
            Message::user("u1"),
            Message::assistant("a1"),
            Message::assistant("a2"),
            call(&["t"]),
            Message::tool("r", "t"),
            Message::user("u2"),
            Message::assistant("a3"),
        ];
        // By count the cut would keep from a2; alignment moves it to u2.
        let c = cut_by_count(&h, 5);
        assert_eq!((c.start, c.aligned_from), (5, Some(2)));
    }

    #[test]
    fn alignment_is_skipped_when_no_later_head_is_user_led() {
        let h = [
            Message::user("u1"),
            Message::assistant("a1"),
            Message::assistant("a2"),
            Message::assistant("a3"),
        ];
        let c = cut_by_count(&h, 2);
        assert_eq!((c.start, c.aligned_from), (2, None));
    }

    #[test]
    fn alignment_looks_past_pinned_messages() {
        let h = [
            Message::user("u1"),
            Message::system("s"),
            Message::assistant("a1"),
            Message::user("u2"),
            Message::assistant("a2"),
        ];
        let c = cut_by_count(&h, 4);
        assert_eq!((c.start, c.aligned_from), (3, Some(1)));
        // A pinned message followed by a user turn is a fine opening.
        let h = [Message::assistant("a"), Message::system("s"), Message::user("u")];
        assert_eq!(cut_by_count(&h, 2).start, 1);
    }

    #[test]
    fn in_a_buffer_a_system_message_is_an_ordinary_opening() {
        let h = [
            Message::user("u1"),
            Message::system("s"),
            Message::assistant("a1"),
            Message::user("u2"),
            Message::assistant("a2"),
        ];
        // Hoisted, the system message is looked past and the cut moves to u2;
        // in a buffer it opens the kept part as it is.
        assert_eq!(cut_by_count(&h, 4).start, 3);
        let callers = callers(&h);
        assert_eq!(evict_count(&h, &callers, |_| 1, 4), 1);
        assert_eq!(evict_count(&h, &callers, |_| 1, 3), 3);
    }

    #[test]
    fn chunks_are_whole_units_within_the_limits_and_aligned() {
        let h = [
            Message::user("u1"),
            call(&["a", "b"]),
            Message::tool("1", "a"),
            Message::tool("2", "b"),
            Message::assistant("a1"),
            Message::user("u2"),
            Message::assistant("a2"),
            Message::user("u3"),
        ];
        let callers = callers(&h);
        let one = |_| 1;
        // The first unit is taken whatever its size (here aligned forward).
        assert_eq!(chunk(&h, &callers, one, (0, 0)), 5);
        assert_eq!(chunk(&h[4..], &[], one, (0, 0)), 1);
        // Up to 5 messages: the longest chunk that leaves a user turn first.
        assert_eq!(chunk(&h, &callers, one, (5, usize::MAX)), 5);
        assert_eq!(chunk(&h, &callers, one, (6, usize::MAX)), 5);
        // Up to 4 messages, or 3 tokens: no end within the limits leaves a
        // user turn first (the call, then a1, would open the rest), so the
        // chunk grows to the next user turn, as a cut's alignment does.
        assert_eq!(chunk(&h, &callers, one, (4, usize::MAX)), 5);
        assert_eq!(chunk(&h, &callers, one, (100, 3)), 5);
        // Never the latest unit.
        assert_eq!(chunk(&h, &callers, one, (100, usize::MAX)), 7);
        assert_eq!(chunk(&h[..1], &callers[..0], one, (100, usize::MAX)), 0);
        // No aligned end within the limits: aligned forward, as a cut is.
        let h = [
            Message::user("u"),
            Message::assistant("a"),
            Message::assistant("b"),
            Message::user("v"),
        ];
        assert_eq!(chunk(&h, &[], one, (1, usize::MAX)), 3);
    }

    #[test]
    fn orphan_heads_are_aligned_away() {
        let h = [
            Message::user("u1"),
            Message::tool("orphan", "nope"),
            Message::user("u2"),
        ];
        let c = cut_by_count(&h, 2);
        assert_eq!((c.start, c.aligned_from), (2, Some(1)));
    }
}
