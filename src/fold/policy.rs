//! The fold policy: everything about *the summary*, written once.

use std::borrow::Cow;

use crate::count::TokenCounter;
use crate::error::{ConfigError, Error, Result};
use crate::fold::engine::Fold;
use crate::fold::ledger::{self, Entries, Kept, LedgerPattern};
use crate::message::{Content, Message, Role, join_lines};

/// The prefix chatfold starts its summary message with, and recognises it by.
pub const DEFAULT_SUMMARY_PREFIX: &str = "Summary of earlier conversation:\n";

/// What a summary is and how it is made to fit: the one place that renders,
/// recognises, checks and cuts summary messages.
///
/// The [`Compactor`](crate::Compactor) and every memory hold one, so a
/// summary written by any of them is recognised by all that share the policy:
/// a compactor run over a memory's `messages()` folds the memory's summary as
/// its running summary instead of keeping it as a system message.
///
/// A summary message is a `summary_role` message whose text starts with
/// `summary_prefix`. Nothing else marks it (no extra field, which OpenAI would
/// reject), so it is recognised even after a client dropped every field but
/// `role` and `content`.
///
/// # The ledger
///
/// Summaries are lossy, and what they lose first is what agents need
/// verbatim. With [`ledger`](Self::ledger) on (the default), the identifiers
/// in the folded turns (UUIDs, URLs of any scheme, paths, hashes, cloud
/// resource names, emails, IP addresses, host names, ticket keys, CVEs,
/// versions, codes such as `conn_994a82` or `ORD-2024-00123`, and in JSON
/// the string values of keys that name identifiers, as `key: value`; never
/// a URL with a password or a key that begins as a service's secret keys
/// do, such as `sk-` or `ghp_`) that the
/// summarizer's text does not already hold verbatim are listed after it,
/// newest first, under the heading [`LEDGER_HEADING`](crate::LEDGER_HEADING),
/// one `- entry` a line, none that the prose or the turns kept beside it
/// already hold verbatim. The section takes the room the prose leaves, and
/// at least [`ledger_percent`](Self::ledger_percent) of the summary's room:
/// the prose keeps the rest as its floor, and the summarizer is told an
/// allowance less the section's share. The cut to the allowance shortens
/// the prose first and never cuts an entry in half. When the summary is
/// folded again, its ledger is read back and merged with the new entries
/// (reappearing ones move to the front, the oldest leave first when room
/// runs out), so identifiers survive any number of stateless compactions.
/// Finding them reads the folded text newest first, one pass, and stops
/// once it has as many entries as twice the share could list (8 tokens an
/// entry) or has read 8 bytes per token of allowance (about twice the text
/// the allowance holds), or, when it had found fewer than a quarter of
/// those entries by then, 64 bytes per token (a long history's opening
/// turns hold identifiers that turns of prose after them do not): the cost
/// follows the budget, not the history. A
/// memory reads its summary's ledger once and counts each entry once, when
/// it enters.
///
/// # Examples
///
/// ```
/// use chatfold::{FoldPolicy, Message, Role};
///
/// let policy = FoldPolicy::new();
/// assert_eq!(policy.summary_role, Role::System);
/// assert_eq!(policy.summary_prefix, "Summary of earlier conversation:\n");
/// assert_eq!(policy.min_summary_tokens, 16);
/// assert_eq!(policy.max_summary_tokens, None);
///
/// let message = policy.summary_message("The user booked a flight to Seoul.");
/// assert!(policy.is_summary(&message));
/// assert_eq!(policy.summary_text(&message).as_deref(), Some("The user booked a flight to Seoul."));
/// assert!(!policy.is_summary(&Message::system("You are terse.")));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct FoldPolicy {
    /// The role of the summary message.
    pub summary_role: Role,
    /// The text the summary message starts with; it marks the summary.
    pub summary_prefix: Cow<'static, str>,
    /// The fewest tokens of summary text worth sending: a budget that cannot
    /// leave this much room for the summary is unreachable.
    pub min_summary_tokens: usize,
    /// The most tokens of summary text to keep; a longer summary is cut at a
    /// word boundary. `None`: only the room left by the budget (compactor) or
    /// the memory's own default bounds it.
    pub max_summary_tokens: Option<usize>,
    /// Whether identifiers from the folded turns are kept verbatim in a
    /// ledger section after the summary's text.
    pub ledger: bool,
    /// The most the ledger section may take, in percent of the summary's
    /// allowance.
    pub ledger_percent: u8,
    /// More identifier patterns: every match is an entry.
    pub ledger_patterns: Vec<LedgerPattern>,
    /// Where the summary goes in the request it is sent in: always a
    /// `summary_role` message ([`Placement::Fixed`], the default), or as an
    /// Anthropic request needs it.
    pub placement: Placement,
}

/// Where a summary goes: what the request it is sent in allows.
///
/// Anthropic's Messages API takes system text only in a top-level `system`
/// field and wants the first message to be a user turn, so a summary that
/// sits in `system` must not be followed by an assistant turn or a tool
/// result. [`History::placement`](crate::History::placement) says which one
/// a request needs. A `summary_role` other than `system` always wins: the
/// summary is then that role's message wherever it goes.
///
/// # Examples
///
/// ```
/// use chatfold::{FoldPolicy, Message, Placement, Role};
///
/// let policy = FoldPolicy::new().placement(Placement::AnthropicBody);
/// let user_first = Message::user("Day two?");
/// let assistant_first = Message::assistant("Day two: the palace.");
/// assert_eq!(policy.summary_role_before(Some(&user_first)), Role::System); // into `system`
/// assert_eq!(policy.summary_role_before(Some(&assistant_first)), Role::User); // a leading user turn
/// assert_eq!(FoldPolicy::new().summary_role_before(Some(&assistant_first)), Role::System);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Placement {
    /// Always a `summary_role` message (OpenAI's Chat Completions, and any
    /// history that is not sent to Anthropic).
    #[default]
    Fixed,
    /// An Anthropic request body: a system message (written into the body's
    /// top-level `system`), unless the message after it is an assistant turn
    /// or a tool result; then a leading user turn.
    AnthropicBody,
    /// Anthropic messages with no `system` field to hold a system message (a
    /// bare array): always a leading user turn.
    AnthropicArray,
}

/// The policy every memory and compactor starts with.
pub(crate) static DEFAULT_POLICY: FoldPolicy = FoldPolicy::new();

impl Default for FoldPolicy {
    fn default() -> Self {
        FoldPolicy::new()
    }
}

/// A summary message cut to its limit.
#[derive(Clone, Debug)]
pub(crate) struct Fitted {
    /// The message's text without the prefix: prose, then the ledger section.
    pub body: String,
    /// Bytes of `body` that are its prose (the section follows them).
    pub prose_len: usize,
    /// Tokens of the whole message (framing included).
    pub tokens: usize,
    /// Whether the prose was cut.
    pub truncated: bool,
    /// The candidates listed in the section (their indices), newest first.
    pub listed: Vec<usize>,
    /// The candidates neither listed nor held verbatim by the prose or the
    /// kept turns: there was no room (their indices, in order).
    pub dropped: Vec<usize>,
}

/// What a summary's text is fitted into: the whole message's limit (the
/// policy's cap applied), the ledger's share of the text's room, and the
/// tokens of the message holding the text alone. Found once a summary, by
/// [`FoldPolicy::frame`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Frame {
    pub limit: usize,
    pub share: usize,
    pub spoken: usize,
}

impl FoldPolicy {
    /// The default policy: a `system` message starting with
    /// [`DEFAULT_SUMMARY_PREFIX`], at least 16 tokens of text, no cap of its own.
    pub const fn new() -> Self {
        FoldPolicy {
            summary_role: Role::System,
            summary_prefix: Cow::Borrowed(DEFAULT_SUMMARY_PREFIX),
            min_summary_tokens: 16,
            max_summary_tokens: None,
            ledger: true,
            ledger_percent: 33,
            ledger_patterns: Vec::new(),
            placement: Placement::Fixed,
        }
    }

    /// Give the summary message this role.
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::{FoldPolicy, Role};
    ///
    /// assert_eq!(FoldPolicy::new().summary_role("developer").summary_role, Role::Developer);
    /// ```
    pub fn summary_role(mut self, role: impl Into<Role>) -> Self {
        self.summary_role = role.into();
        self
    }

    /// Start the summary message with `prefix`.
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::FoldPolicy;
    ///
    /// let policy = FoldPolicy::new().summary_prefix("[ARCHIVE]\n");
    /// assert_eq!(policy.summary_message("Met Ann.").text(), "[ARCHIVE]\nMet Ann.");
    /// ```
    pub fn summary_prefix(mut self, prefix: impl Into<Cow<'static, str>>) -> Self {
        self.summary_prefix = prefix.into();
        self
    }

    /// Treat a budget as unreachable unless `tokens` of summary text fit.
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::FoldPolicy;
    ///
    /// assert_eq!(FoldPolicy::new().min_summary_tokens(40).min_summary_tokens, 40);
    /// ```
    pub fn min_summary_tokens(mut self, tokens: usize) -> Self {
        self.min_summary_tokens = tokens;
        self
    }

    /// Keep at most `tokens` of summary text.
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::FoldPolicy;
    ///
    /// assert_eq!(FoldPolicy::new().max_summary_tokens(500).max_summary_tokens, Some(500));
    /// ```
    pub fn max_summary_tokens(mut self, tokens: usize) -> Self {
        self.max_summary_tokens = Some(tokens);
        self
    }

    /// Keep identifiers in a ledger section (`true`, the default) or not.
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::FoldPolicy;
    ///
    /// assert!(FoldPolicy::new().ledger);
    /// assert!(!FoldPolicy::new().ledger(false).ledger);
    /// ```
    pub fn ledger(mut self, on: bool) -> Self {
        self.ledger = on;
        self
    }

    /// Builds now what folding with this policy builds once per process on
    /// its first fold: the ledger's identifier patterns (a few milliseconds
    /// of compiling). A command or a server can call it on a thread of its
    /// own while it reads its input or starts, so that the first fold does
    /// not wait; calling it is never needed, and calling it again costs
    /// nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::FoldPolicy;
    ///
    /// let policy = FoldPolicy::new();
    /// std::thread::scope(|s| {
    ///     s.spawn(|| policy.prepare());
    ///     // ... read the history meanwhile ...
    /// });
    /// ```
    pub fn prepare(&self) {
        if self.ledger {
            ledger::prepare();
        }
    }

    /// Let the ledger take at most `percent` of the summary's allowance.
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::FoldPolicy;
    ///
    /// assert_eq!(FoldPolicy::new().ledger_percent, 33);
    /// assert_eq!(FoldPolicy::new().ledger_percent(50).ledger_percent, 50);
    /// ```
    pub fn ledger_percent(mut self, percent: u8) -> Self {
        self.ledger_percent = percent;
        self
    }

    /// Also keep every match of `pattern` (the `regex` crate's syntax).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] when the pattern does not compile.
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::{Compactor, FoldPolicy, Message};
    ///
    /// let policy = FoldPolicy::new().ledger_pattern(r"ORD#[0-9]+")?;
    /// let mut history: Vec<Message> = vec![Message::user("Where is order ORD#5521?")];
    /// history.extend((0..40).map(|i| Message::user(format!("later message {i}"))));
    /// let summarize = |_: &chatfold::SummaryRequest<'_>| Ok::<_, std::convert::Infallible>("Orders were discussed.".to_owned());
    /// let result = Compactor::new(200).policy(policy).compact(&history, &summarize)?;
    /// assert!(result.messages[0].text().contains("- ORD#5521"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn ledger_pattern(mut self, pattern: &str) -> Result<Self> {
        let compiled = LedgerPattern::new(pattern).map_err(|e| {
            Error::InvalidConfig(ConfigError::Invalid {
                setting: "ledger_pattern",
                value: pattern.to_owned(),
                source: Box::new(e),
            })
        })?;
        self.ledger_patterns.push(compiled);
        Ok(self)
    }

    /// Place the summary as a request of this kind needs it.
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::{FoldPolicy, Placement};
    ///
    /// assert_eq!(FoldPolicy::new().placement, Placement::Fixed);
    /// assert_eq!(FoldPolicy::new().placement(Placement::AnthropicArray).placement, Placement::AnthropicArray);
    /// ```
    pub fn placement(mut self, placement: Placement) -> Self {
        self.placement = placement;
        self
    }

    /// Whether the placement may make the summary a user turn instead of a
    /// `system` one: an Anthropic placement, with the role left `system`.
    pub(crate) fn may_lead_as_user(&self) -> bool {
        self.placement != Placement::Fixed && self.summary_role == Role::System
    }

    /// The summary's role when `next` is the message after it (`None`:
    /// nothing follows): `summary_role`, unless the [`placement`](Self::placement)
    /// needs a leading user turn there.
    pub fn summary_role_before(&self, next: Option<&Message>) -> Role {
        let user = self.may_lead_as_user()
            && match self.placement {
                Placement::AnthropicArray => true,
                _ => next.is_some_and(Message::is_response),
            };
        if user {
            Role::User
        } else {
            self.summary_role.clone()
        }
    }

    /// The summary message for `text` when `next` follows it: as
    /// [`summary_message`](Self::summary_message), in the role
    /// [`summary_role_before`](Self::summary_role_before) gives.
    pub fn summary_message_before(&self, text: &str, next: Option<&Message>) -> Message {
        let mut message = self.summary_message(text);
        message.role = self.summary_role_before(next);
        message
    }

    /// Whether `message` is a summary written under this policy: its prefix,
    /// in `summary_role` (or as a user turn, where the
    /// [`placement`](Self::placement) may put one there).
    pub fn is_summary(&self, message: &Message) -> bool {
        (message.role == self.summary_role || (message.role == Role::User && self.may_lead_as_user()))
            && match &message.content {
                Some(Content::Text(text)) => text.starts_with(&*self.summary_prefix),
                _ => message.text().starts_with(&*self.summary_prefix),
            }
    }

    /// The text of a summary message without its prefix, trimmed; `None` when
    /// `message` is not a summary under this policy.
    pub fn summary_text<'m>(&self, message: &'m Message) -> Option<Cow<'m, str>> {
        if !self.is_summary(message) {
            return None;
        }
        let prefix = &*self.summary_prefix;
        Some(match message.text() {
            Cow::Borrowed(t) => Cow::Borrowed(t.strip_prefix(prefix).unwrap_or(t).trim()),
            Cow::Owned(t) => Cow::Owned(t.strip_prefix(prefix).unwrap_or(&t).trim().to_owned()),
        })
    }

    /// The summary message for `text`: the prefix, then the text.
    pub fn summary_message(&self, text: &str) -> Message {
        // (Joined in one allocation of the exact size.)
        Message::new(self.summary_role.clone(), [&*self.summary_prefix, text].concat())
    }

    /// A summarizer's answer as summary text: trimmed, and
    /// [`Error::EmptySummary`] when nothing is left.
    ///
    /// # Errors
    ///
    /// [`Error::EmptySummary`] for an empty or blank text.
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::FoldPolicy;
    ///
    /// assert_eq!(FoldPolicy::new().accept("  Met Ann.\n".to_owned())?, "Met Ann.");
    /// assert!(FoldPolicy::new().accept(" \n ".to_owned()).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn accept(&self, text: String) -> Result<String> {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err(Error::EmptySummary);
        }
        let text = if trimmed.len() == text.len() {
            text
        } else {
            trimmed.to_owned()
        };
        Ok(ledger::neutralise(text))
    }

    /// `tokens` lowered to the policy's cap, if it has one.
    pub(crate) fn cap(&self, tokens: usize) -> usize {
        self.max_summary_tokens.map_or(tokens, |max| max.min(tokens))
    }

    /// Tokens of a summary message holding only the prefix.
    pub(crate) fn overhead<C: TokenCounter + ?Sized>(&self, counter: &C) -> usize {
        counter.count_message(&self.summary_message(""))
    }

    /// The most tokens the ledger section may take of `allowance`.
    fn ledger_share(&self, allowance: usize) -> usize {
        allowance.saturating_mul(usize::from(self.ledger_percent.min(100))) / 100
    }

    /// Starts a fold onto the summary texts `previous` (bodies: prose and
    /// ledger section, oldest first) of `folded`, with `allowance` tokens of
    /// summary text: the previous prose for the summarizer, the ledger's
    /// candidates (each counted once, here), and the allowance left to the
    /// summarizer's own text.
    pub(super) fn begin<'a, 'm, C: TokenCounter + ?Sized>(
        &self,
        previous: &[Cow<'a, str>],
        folded: impl DoubleEndedIterator<Item = &'m Message>,
        allowance: usize,
        counter: &C,
    ) -> Fold<'a> {
        if !self.ledger {
            return Fold {
                prose: join_lines(previous.iter().cloned()),
                entries: Entries::default(),
                allowance,
            };
        }
        let (mut proses, mut old) = (Vec::new(), Vec::new());
        for body in previous.iter().rev() {
            let (prose, entries) = match body {
                Cow::Borrowed(b) => {
                    let (p, e) = ledger::split(b);
                    (
                        Cow::Borrowed(p),
                        e.into_iter().map(Cow::Borrowed).collect::<Vec<_>>(),
                    )
                }
                Cow::Owned(b) => {
                    let (p, e) = ledger::split(b);
                    (
                        Cow::Owned(p.to_owned()),
                        e.into_iter().map(|e| Cow::Owned(e.to_owned())).collect(),
                    )
                }
            };
            proses.push(prose);
            old.extend(entries);
        }
        proses.reverse();
        let old: Vec<&str> = old.iter().map(|e| &**e).collect();
        let prose_text = join_lines(proses.iter().map(|p| &**p)).unwrap_or_default();
        let texts = ledger::candidates(
            folded,
            &prose_text,
            &old,
            &self.ledger_patterns,
            self.enough(allowance),
            allowance.saturating_mul(8),
            // A stateless compactor reads the same history again and again.
            true,
        );
        let entries = Entries::keyed(texts, counter);
        let sum = entries.tokens.iter().map(|&t| t as u128).sum();
        let told = self.told(
            entries.tokens.iter().copied(),
            (entries.len(), sum),
            allowance,
            counter,
        );
        Fold {
            prose: join_lines(proses),
            entries,
            allowance: told,
        }
    }

    /// How many entries a ledger holds at most for `allowance` tokens of
    /// summary text: as many as twice its share could list at 8 tokens an
    /// entry, so that the room a short prose leaves is used, while finding
    /// and carrying entries stays a cost of the share's size.
    pub(crate) fn enough(&self, allowance: usize) -> usize {
        self.ledger_share(allowance) / 4 + 8
    }

    /// The allowance the summarizer is told: `allowance`, less the room the
    /// ledger section would take of its share (never below the minimum
    /// prose). The section may take more at the end, of what the prose
    /// leaves.
    ///
    /// `tokens` are the entries' counts, `(n, sum)` their number and sum:
    /// when every entry fits, the section is known without a pass over them.
    pub(crate) fn told<C: TokenCounter + ?Sized>(
        &self,
        tokens: impl IntoIterator<Item = usize>,
        (n, sum): (usize, u128),
        allowance: usize,
        counter: &C,
    ) -> usize {
        let share = self.ledger_share(allowance);
        let section = match Self::all_fit(n, sum, share, counter) {
            Some(section) => section,
            None => self.pack(tokens, |_| true, share, counter, None).1,
        };
        let reserve = section.min(allowance.saturating_sub(self.min_summary_tokens));
        allowance.saturating_sub(reserve)
    }

    /// The section's tokens when all of `n` entries whose counts sum to
    /// `sum` fit in `room` (what [`pack`](Self::pack) gives them then), or
    /// `None`: none to list, or not all fit.
    fn all_fit<C: TokenCounter + ?Sized>(n: usize, sum: u128, room: usize, counter: &C) -> Option<usize> {
        (n > 0)
            .then(|| (counter.count(ledger::LEDGER_HEADING) as u128 + 2).saturating_add(sum))
            .filter(|&section| section <= room as u128)
            .map(|section| section as usize)
    }

    /// Packs the leading `entries` that `open` lets through whose section
    /// fits in `room` tokens (their counts summed, with the heading's):
    /// where packing stopped (the open entries before it are packed, none
    /// from it on) and the section's tokens (0 when none is packed). The
    /// packed entries' indices go to `packed`, if given.
    fn pack<C: TokenCounter + ?Sized>(
        &self,
        entries: impl IntoIterator<Item = usize>,
        open: impl Fn(usize) -> bool,
        room: usize,
        counter: &C,
        mut packed_to: Option<&mut Vec<usize>>,
    ) -> (usize, usize) {
        // The heading's tokens and the packed entries', once one is open.
        let mut tokens = None;
        let (mut seen, mut packed) = (0, false);
        for (i, t) in entries.into_iter().enumerate() {
            seen = i + 1;
            if !open(i) {
                continue;
            }
            let so_far =
                *tokens.get_or_insert_with(|| counter.count(ledger::LEDGER_HEADING).saturating_add(2));
            let more = so_far.saturating_add(t);
            if more > room {
                return (i, if packed { so_far } else { 0 });
            }
            tokens = Some(more);
            packed = true;
            if let Some(to) = packed_to.as_deref_mut() {
                to.push(i);
            }
        }
        (seen, if packed { tokens.unwrap_or(0) } else { 0 })
    }

    /// The summary message for the summarizer's `text` and the ledger's
    /// candidate `entries`, within `limit` tokens for the whole message (and
    /// the policy's cap for its text).
    ///
    /// Entries the prose (or `held`, the turns kept beside it, asked by an
    /// entry's place) holds verbatim are not listed; the others are, newest first, in the room
    /// the prose leaves, and at least in the ledger's share of the text's
    /// room: the prose is cut at a word boundary only to make that share,
    /// so it keeps the rest as its floor. `exact`: the whole message is
    /// counted, and the oldest entries dropped while it is over (BPE is not
    /// additive); otherwise its tokens are the prose's count plus the
    /// entries' (for a memory that folds on every add, where counting the
    /// whole section each time would cost more than the fold).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn finish<C: TokenCounter + ?Sized>(
        &self,
        text: &str,
        texts: &[&str],
        tokens: &[usize],
        held: &dyn Fn(usize) -> bool,
        limit: usize,
        counter: &C,
        exact: bool,
    ) -> Fitted {
        let frame = self.frame(text, limit, counter);
        self.finish_framed(text, texts, tokens, held, frame, counter, exact)
    }

    /// The frame of a summary message for the summarizer's `text`, within
    /// `limit` tokens for the whole message (and the policy's cap for its
    /// text).
    pub(crate) fn frame<C: TokenCounter + ?Sized>(&self, text: &str, limit: usize, counter: &C) -> Frame {
        let overhead = self.overhead(counter);
        let limit = match self.max_summary_tokens {
            Some(max) => limit.min(overhead.saturating_add(max)),
            None => limit,
        };
        Frame {
            limit,
            share: self.ledger_share(limit.saturating_sub(overhead)),
            // The summary message with the text alone, framing and prefix included.
            spoken: counter.count_message(&self.summary_message(text)),
        }
    }

    /// [`finish`](Self::finish) in `frame`, found for `text`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn finish_framed<C: TokenCounter + ?Sized>(
        &self,
        text: &str,
        texts: &[&str],
        tokens: &[usize],
        held: &dyn Fn(usize) -> bool,
        frame: Frame,
        counter: &C,
        exact: bool,
    ) -> Fitted {
        let Frame {
            limit,
            share,
            mut spoken,
        } = frame;
        let tokens_of = |body: &str| counter.count_message(&self.summary_message(body));
        let mut prose = text;
        let mut packed: Vec<usize> = Vec::with_capacity(texts.len());
        let mut section = 0;
        // Which entries the kept turns hold, asked once each; which the
        // prose holds, once a prose.
        let kept: Vec<bool> = (0..texts.len()).map(held).collect();
        let closed_by = |prose: &str| -> Vec<bool> {
            // (No entries, nothing to look up: the prose is not read.)
            let said = ledger::Said::text(if texts.is_empty() { "" } else { prose });
            (texts.iter().zip(&kept))
                .map(|(t, &k)| k || said.holds(t))
                .collect()
        };
        // The answers and the prose they are for.
        let (mut closed, mut closed_for) = (Vec::new(), None);
        // Twice at most: cutting the prose can uncover entries it held.
        for _ in 0..2 {
            closed = closed_by(prose);
            closed_for = Some(prose);
            let open = |i: usize| !closed[i];
            let ledger_room = share.max(limit.saturating_sub(spoken));
            packed.clear();
            section = self
                .pack(
                    tokens.iter().copied(),
                    open,
                    ledger_room,
                    counter,
                    Some(&mut packed),
                )
                .1;
            if spoken.saturating_add(section) <= limit {
                break;
            }
            prose = fitting_prefix(text, |p| tokens_of(p).saturating_add(section) <= limit);
            spoken = tokens_of(prose);
        }
        let shown = if prose.is_empty() { "…" } else { prose };
        let render = |packed: &[usize]| {
            let listed: Vec<&str> = packed.iter().map(|&i| texts[i]).collect();
            ledger::render(shown, &listed)
        };
        let mut body = render(&packed);
        let mut total = match (exact, prose.is_empty()) {
            (true, _) | (false, true) => tokens_of(&body),
            (false, false) => spoken.saturating_add(section),
        };
        // Exact at last: BPE is not additive, so drop the oldest entries while
        // the whole is over, as many at a time as the excess asks.
        while exact && total > limit && !packed.is_empty() {
            let mut excess = total - limit;
            while excess > 0 {
                let Some(i) = packed.pop() else { break };
                excess = excess.saturating_sub(tokens[i]);
            }
            body = render(&packed);
            total = tokens_of(&body);
        }
        let mut listed = vec![false; texts.len()];
        packed.iter().for_each(|&i| listed[i] = true);
        if closed_for != Some(shown) {
            closed = closed_by(shown);
        }
        let dropped = (0..texts.len()).filter(|&i| !listed[i] && !closed[i]).collect();
        let tokens = total;
        Fitted {
            tokens,
            prose_len: shown.len(),
            body,
            truncated: shown.len() < text.len() || prose.is_empty(),
            listed: packed,
            dropped,
        }
    }

    /// [`finish`](Self::finish) with nothing held beside the summary, for a
    /// memory's fold, whose candidates are `fresh`, then `kept`'s entries
    /// less those at `again` (ascending indices): the same summary, the
    /// section copied from the one `kept` holds rendered, and only the
    /// loose entries looked up when the prose holds no word the patterns
    /// read. `None` when the prose must be cut to make room (or is blank),
    /// which `finish` does, in the same `frame`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn finish_kept<C: TokenCounter + ?Sized>(
        &self,
        text: &str,
        fresh: &Kept,
        kept: &Kept,
        again: &[usize],
        frame: Frame,
        counter: &C,
        exact: bool,
    ) -> Option<Fitted> {
        if text.is_empty() {
            return None;
        }
        let Frame { limit, share, spoken } = frame;
        let tokens_of = |body: &str| counter.count_message(&self.summary_message(body));
        // The candidates: `fresh`'s, then the kept entries not at `again`.
        let f = fresh.len();
        let m = f + kept.len() - again.len();
        let kept_at = |i: usize| Kept::skipping(i - f, again);
        let text_of = |i: usize| match i < f {
            true => &*fresh.entries.texts[i],
            false => &*kept.entries.texts[kept_at(i)],
        };
        let token_of = |i: usize| match i < f {
            true => fresh.entries.tokens[i],
            false => kept.entries.tokens[kept_at(i)],
        };
        // Those the prose holds: none unless it holds a word the patterns
        // read, or an entry is loose.
        let hot = crate::fold::hot::has_ledger_word(text);
        let loose = kept.loose_count > 0 || fresh.loose_count > 0;
        let mut said = Vec::new();
        if m > 0 && (hot || loose) {
            let prose = ledger::Said::text(text);
            let loose = |i: usize| match i < f {
                true => fresh.entries.loose[i],
                false => kept.entries.loose[kept_at(i)],
            };
            said = (0..m)
                .map(|i| (hot || loose(i)) && prose.holds(text_of(i)))
                .collect();
            // None held: as if none was asked (all may be listed at once).
            if !said.contains(&true) {
                said.clear();
            }
        }
        let open = |i: usize| !said.get(i).copied().unwrap_or(false);
        let ledger_room = share.max(limit.saturating_sub(spoken));
        // All of them, when none is held and all fit; else packed in turn.
        let again_tokens: u128 = again.iter().map(|&j| kept.entries.tokens[j] as u128).sum();
        let all = fresh.total + kept.total - again_tokens;
        let every = Self::all_fit(m, all, ledger_room, counter).filter(|_| said.is_empty());
        let (stop, section) = match (every, m) {
            (_, 0) => (0, 0),
            (Some(section), _) => (m, section),
            _ => self.pack((0..m).map(token_of), open, ledger_room, counter, None),
        };
        if spoken.saturating_add(section) > limit {
            return None;
        }
        let listed: Vec<usize> = match said.is_empty() {
            true => (0..stop).collect(),
            false => (0..stop).filter(|&i| open(i)).collect(),
        };
        let mut body =
            String::with_capacity(text.len() + ledger::SECTION_START.len() + kept.rendered.len() + 64);
        body.push_str(text);
        if !listed.is_empty() {
            body.push_str(ledger::SECTION_START);
            let from_fresh = listed.partition_point(|&i| i < f);
            let from_kept = listed.len() - from_fresh;
            match said.is_empty() {
                // The fold's entries listed, then the kept ones: the first
                // ones not found again.
                true => {
                    fresh.push_lines(&mut body, &[], from_fresh, true);
                    kept.push_lines(&mut body, again, from_kept, from_fresh == 0);
                }
                false => {
                    let texts: Vec<&str> = listed.iter().map(|&i| text_of(i)).collect();
                    ledger::push_lines(&mut body, &texts);
                }
            }
        }
        let total = match exact {
            true => tokens_of(&body),
            false => spoken.saturating_add(section),
        };
        if total > limit {
            return None;
        }
        Some(Fitted {
            tokens: total,
            prose_len: text.len(),
            body,
            truncated: false,
            dropped: (stop..m).filter(|&i| open(i)).collect(),
            listed,
        })
    }

    /// A stored summary text (prose and section) fitted into `limit` tokens
    /// for the whole message, its entries kept in their order.
    pub(crate) fn refit<C: TokenCounter + ?Sized>(&self, body: &str, limit: usize, counter: &C) -> Fitted {
        let (prose, entries) = ledger::split(body);
        let tokens: Vec<usize> = entries.iter().map(|e| ledger::entry_tokens(e, counter)).collect();
        // Every stored entry may take the room: the share applied when it was made.
        let all = FoldPolicy {
            ledger_percent: 100,
            ..self.clone()
        };
        all.finish(prose, &entries, &tokens, &|_| false, limit, counter, true)
    }

    /// Checks the settings.
    pub(crate) fn validate(&self) -> Result<()> {
        if self.summary_prefix.trim().is_empty() {
            // It marks the summary for the next compaction.
            return Err(Error::InvalidConfig(ConfigError::Empty {
                setting: "summary_prefix",
            }));
        }
        if self.summary_role.is_response() {
            return Err(Error::InvalidConfig(ConfigError::NotAllowed {
                setting: "summary_role",
                value: self.summary_role.to_string(),
                why: "a summary must not open the history as a response",
            }));
        }
        ConfigError::at_most("ledger_percent", usize::from(self.ledger_percent), 100, None)
    }
}

/// The longest prefix of `text` that `fits`, ending at a word boundary (before
/// whitespace, trailing whitespace dropped) when any such prefix fits, else at
/// a character boundary.
fn fitting_prefix(text: &str, fits: impl Fn(&str) -> bool) -> &str {
    let words: Vec<usize> = text
        .char_indices()
        .filter(|&(i, c)| c.is_whitespace() && i > 0 && !text[..i].ends_with(char::is_whitespace))
        .map(|(i, _)| i)
        .chain([text.len()])
        .collect();
    let by_words = longest(text, &words, &fits).trim_end();
    if !by_words.is_empty() {
        return by_words;
    }
    let chars: Vec<usize> = text
        .char_indices()
        .map(|(i, _)| i)
        .skip(1)
        .chain([text.len()])
        .collect();
    longest(text, &chars, &fits).trim_end()
}

/// The longest `text[..end]`, for `end` in the ascending `ends`, that `fits`
/// ("" when none does). Binary search; counts are not monotonic under BPE, so
/// the result is checked and shortened until it fits.
fn longest<'t>(text: &'t str, ends: &[usize], fits: &impl Fn(&str) -> bool) -> &'t str {
    // `lo` counts the ends known to fit; `ends[lo - 1]` is the longest.
    let (mut lo, mut hi) = (0usize, ends.len());
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if fits(&text[..ends[mid - 1]]) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    while lo > 0 && !fits(&text[..ends[lo - 1]]) {
        lo -= 1;
    }
    if lo == 0 { "" } else { &text[..ends[lo - 1]] }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::count::Heuristic;

    #[test]
    fn cuts_at_word_boundaries() {
        let chars = |t: &str| t.chars().count();
        assert_eq!(
            fitting_prefix("héllo wörld again", |t| chars(t) <= 13),
            "héllo wörld"
        );
        assert_eq!(fitting_prefix("héllo  wörld", |t| chars(t) <= 8), "héllo");
        assert_eq!(fitting_prefix("héllo", |_| true), "héllo");
        // A first word longer than the limit is cut at a character.
        assert_eq!(fitting_prefix("abcdefgh ij", |t| chars(t) <= 3), "abc");
        assert_eq!(fitting_prefix("abc", |t| t.is_empty()), "");
        assert_eq!(fitting_prefix("", |_| false), "");
    }

    /// `policy.finish` over `entries`, counted with the heuristic, exact;
    /// and the entries it listed and dropped.
    fn fin(
        policy: &FoldPolicy,
        text: &str,
        entries: &[String],
        limit: usize,
    ) -> (Fitted, Vec<String>, Vec<String>) {
        let texts: Vec<&str> = entries.iter().map(String::as_str).collect();
        let tokens: Vec<usize> = texts
            .iter()
            .map(|t| ledger::entry_tokens(t, &Heuristic))
            .collect();
        let fitted = policy.finish(text, &texts, &tokens, &|_| false, limit, &Heuristic, true);
        let kept = fitted.listed.iter().map(|&i| entries[i].clone()).collect();
        let dropped = fitted.dropped.iter().map(|&i| entries[i].clone()).collect();
        (fitted, kept, dropped)
    }

    #[test]
    fn finish_respects_the_limit_and_the_cap() {
        let policy = FoldPolicy::new();
        let text = "word ".repeat(400);
        let text = text.trim();
        let (fitted, ..) = fin(&policy, text, &[], 100);
        assert!(fitted.truncated && fitted.tokens <= 100);
        assert!(fitted.body.ends_with("word"));
        let (capped, ..) = fin(&policy.clone().max_summary_tokens(10), text, &[], 100);
        assert!(capped.tokens <= policy.overhead(&Heuristic) + 10);
        let (nothing, ..) = fin(&policy, text, &[], 1);
        assert!(nothing.truncated && nothing.body.ends_with('…'));
        let (whole, ..) = fin(&policy, "short", &[], 100);
        assert!(!whole.truncated);
    }

    #[test]
    fn the_ledger_takes_its_share_and_the_prose_is_cut_first() {
        let policy = FoldPolicy::new();
        let entries: Vec<String> = (0..40).map(|i| format!("/srv/data/file-{i:03}.csv")).collect();
        let text = "The agent loaded many files and compared them. ".repeat(20);
        let (fitted, kept, dropped) = fin(&policy, text.trim(), &entries, 300);
        assert!(fitted.tokens <= 300);
        assert!(fitted.truncated);
        assert!(!kept.is_empty() && !dropped.is_empty());
        assert_eq!(kept[0], entries[0], "newest first");
        assert_eq!(kept.len() + dropped.len(), entries.len());
        let section: usize = kept.iter().map(|e| Heuristic.count(e) + 2).sum();
        assert!(
            section <= (300 - policy.overhead(&Heuristic)) / 3,
            "within a third: the prose keeps its floor"
        );
        // Every entry line whole.
        let (_, listed) = ledger::split(&fitted.body);
        assert_eq!(listed, kept);
        // Entries the prose holds are not listed again.
        let (_, held, dropped) = fin(&policy, "Loaded /srv/data/file-000.csv.", &entries[..2], 300);
        assert_eq!(held, [entries[1].clone()]);
        assert!(dropped.is_empty());
        // Off: no section.
        let off = policy.clone().ledger(false);
        let begun = off.begin(&[], [Message::user("see /srv/x.csv")].iter(), 100, &Heuristic);
        assert!(begun.entries.is_empty() && begun.allowance == 100);
    }

    #[test]
    fn the_ledger_takes_the_room_a_short_prose_leaves() {
        let policy = FoldPolicy::new();
        let entries: Vec<String> = (0..40).map(|i| format!("/srv/data/file-{i:03}.csv")).collect();
        let (fitted, kept, dropped) = fin(&policy, "Files were loaded.", &entries, 300);
        assert!(fitted.tokens <= 300 && !fitted.truncated);
        let section: usize = kept.iter().map(|e| Heuristic.count(e) + 2).sum();
        assert!(
            section > (300 - policy.overhead(&Heuristic)) / 2,
            "{section}: more than its share"
        );
        assert_eq!(kept[..], entries[..kept.len()], "newest first");
        assert_eq!(kept.len() + dropped.len(), entries.len());
    }

    /// Where counting the whole says more than the parts (as BPE can), the
    /// oldest entries leave until the whole fits, never the newest. A
    /// counter that charges long texts extra reaches that refit.
    #[test]
    fn the_refit_drops_the_oldest_entries_when_the_whole_counts_more() {
        let policy = FoldPolicy::new();
        let surcharged = |t: &str| t.len().div_ceil(4) + (t.len() / 100).pow(2);
        let entries: Vec<String> = (0..30).map(|i| format!("/srv/data/file-{i:03}.csv")).collect();
        let texts: Vec<&str> = entries.iter().map(String::as_str).collect();
        let tokens: Vec<usize> = texts
            .iter()
            .map(|t| ledger::entry_tokens(t, &surcharged))
            .collect();
        let limit = 260;
        let fitted = policy.finish("Loaded.", &texts, &tokens, &|_| false, limit, &surcharged, true);
        assert!(fitted.tokens <= limit, "{}", fitted.tokens);
        assert_eq!(
            fitted.tokens,
            surcharged.count_message(&policy.summary_message(&fitted.body))
        );
        // By the entries' own counts, more would have fitted than were listed.
        let overhead = policy.overhead(&surcharged);
        let room =
            limit - overhead - (surcharged.count_message(&policy.summary_message("Loaded.")) - overhead);
        let mut sum = surcharged.count(ledger::LEDGER_HEADING) + 2;
        let by_parts = tokens.iter().take_while(|&&t| {
            sum += t;
            sum <= room
        });
        let by_parts = by_parts.count();
        let listed = fitted.listed.clone();
        assert!(
            !listed.is_empty() && listed.len() < by_parts,
            "{} of {by_parts}",
            listed.len()
        );
        assert_eq!(
            listed,
            (0..listed.len()).collect::<Vec<_>>(),
            "the newest kept, the oldest dropped"
        );
    }

    /// Entries of every kind: words the patterns read, `key: value`, loose
    /// ones (spaces), non-ASCII, repeats.
    pub(crate) const POOL: &[&str] = &[
        "/srv/a.csv",
        "/srv/b.csv",
        "10.0.0.1",
        "PROJ-12",
        "v1.2.3",
        "run_id: r-77",
        "path: /tmp/x",
        "order 42",
        "deadbeef12",
        "https://x.io/p",
        "a@b.com",
        "C:\\x\\y.txt",
        "file-0.txt",
        "dataset: sales q3",
        "/données/été.csv",
        "https://例え.jp/パス",
        "名前: 東京-1.txt",
        "x:y",
    ];

    /// Prose words, some of them entries or entries in punctuation.
    const WORDS: &[&str] = &[
        "The",
        "agent",
        "read",
        "/srv/a.csv",
        "(/srv/b.csv)",
        "PROJ-12.",
        "order 42",
        "v1.2.3,",
        "été",
        "東京",
        "and",
        "then",
        "file-0.txt",
        "deadbeef12",
        "https://x.io/p",
        "sales q3",
        "a@b.com",
        "run_id: r-77",
        "/données/été.csv",
        "…",
        "x:y",
        "long-word-here",
    ];

    /// Counters: words, characters / 4, and words with a charge for long
    /// texts (not additive).
    pub(crate) fn counter(kind: u8) -> impl Fn(&str) -> usize + Copy {
        move |t: &str| match kind {
            0 => t.split_whitespace().count(),
            1 => t.chars().count().div_ceil(4),
            _ => t.split_whitespace().count() + if t.len() > 60 { 3 } else { 0 },
        }
    }

    /// What `Fitted::dropped` says, on a prose cut twice: the second cut
    /// uncovers `PROJ-12`, which the first cut still held, and it is
    /// dropped (not left neither listed, shown nor dropped).
    #[test]
    fn an_entry_the_second_cut_uncovers_is_dropped() {
        let counter = counter(1);
        let policy = FoldPolicy::new().ledger_percent(100);
        let entries = [
            "/srv/b.csv",
            "/srv/a.csv",
            "10.0.0.1",
            "10.0.0.1",
            "PROJ-12",
            "deadbeef12",
            "/srv/a.csv",
        ];
        let tokens: Vec<usize> = entries
            .iter()
            .map(|t| ledger::entry_tokens(t, &counter))
            .collect();
        let prose = "The The PROJ-12. The (/srv/b.csv) The The (/srv/b.csv) The deadbeef12";
        let fitted = policy.finish(prose, &entries, &tokens, &|_| false, 48, &counter, false);
        assert!(!fitted.body[..fitted.prose_len].contains("PROJ-12"));
        assert_eq!(fitted.dropped, [4, 6]);
    }

    proptest::proptest! {
        /// The allowance told from the entries' sum, when they all fit the
        /// share, is the one a pass over them gives.
        #[test]
        fn the_allowance_told_from_a_sum_is_the_one_counted(
            tokens in proptest::collection::vec(0usize..40, 0..30),
            allowance in 0usize..400,
            percent in proptest::sample::select(vec![0u8, 10, 33, 100]),
            min in 0usize..100,
        ) {
            let policy = FoldPolicy::new().ledger_percent(percent).min_summary_tokens(min);
            let sum = tokens.iter().map(|&t| t as u128).sum();
            let walked = policy.told(tokens.iter().copied(), (tokens.len(), u128::MAX), allowance, &Heuristic);
            let summed = policy.told(tokens.iter().copied(), (tokens.len(), sum), allowance, &Heuristic);
            proptest::prop_assert_eq!(summed, walked);
        }

        /// Every candidate `finish` is given is listed, held by the prose
        /// it shows or by the kept turns, or reported dropped: none is
        /// lost without a word, and none is both listed and dropped.
        #[test]
        fn every_entry_is_listed_held_or_dropped(
            entries in proptest::collection::vec(0usize..POOL.len(), 0..24),
            words in proptest::collection::vec(0usize..WORDS.len(), 1..60),
            held_mask in proptest::collection::vec(proptest::bool::weighted(0.2), 24),
            limit in 0usize..250,
            percent in proptest::sample::select(vec![0u8, 10, 33, 100]),
            exact in proptest::bool::ANY,
            max in proptest::option::of(0usize..120),
            kind in 0u8..3,
        ) {
            let counter = counter(kind);
            let mut policy = FoldPolicy::new().ledger_percent(percent);
            if let Some(max) = max {
                policy = policy.max_summary_tokens(max);
            }
            let texts: Vec<&str> = entries.iter().map(|&i| POOL[i]).collect();
            let tokens: Vec<usize> = texts.iter().map(|t| ledger::entry_tokens(t, &counter)).collect();
            let prose = words.iter().map(|&i| WORDS[i]).collect::<Vec<_>>().join(" ");
            let held_set: Vec<&str> = (texts.iter().zip(&held_mask)).filter(|(_, h)| **h).map(|(t, _)| *t).collect();
            let held = |e: &str| held_set.contains(&e);
            let fitted = policy.finish(&prose, &texts, &tokens, &|i| held(texts[i]), limit, &counter, exact);
            let shown = ledger::Said::text(&fitted.body[..fitted.prose_len]);
            for (i, e) in texts.iter().enumerate() {
                let (listed, dropped) = (fitted.listed.contains(&i), fitted.dropped.contains(&i));
                proptest::prop_assert!(!(listed && dropped), "{e:?} listed and dropped");
                proptest::prop_assert!(
                    listed || dropped || shown.holds(e) || held(e),
                    "{e:?}: not listed, not held by {:?}, not dropped",
                    &fitted.body[..fitted.prose_len]
                );
            }
        }
    }

    #[test]
    fn recognises_content_arrays_and_rejects_other_roles() {
        let policy = FoldPolicy::new();
        let mut m = policy.summary_message("x");
        m.content = Some(Content::Parts(vec![crate::message::Part::text(format!(
            "{DEFAULT_SUMMARY_PREFIX}x"
        ))]));
        assert_eq!(policy.summary_text(&m).as_deref(), Some("x"));
        let user = Message::user(format!("{DEFAULT_SUMMARY_PREFIX}x"));
        assert!(!policy.is_summary(&user));
    }
}
