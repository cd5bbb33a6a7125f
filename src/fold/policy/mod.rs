//! The fold policy: everything about *the summary*, written once: what it
//! is (rendered, recognised, checked) here, how it is cut to its allowance
//! in `fit`.

use std::borrow::Cow;

use crate::count::TokenCounter;
use crate::error::{ConfigError, Error, Result};
use crate::fold::ledger::{self, LedgerPattern};
use crate::message::{Content, Message, Role};

mod fit;

pub(crate) use fit::{Fitted, Listing};

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
/// under the heading [`LEDGER_HEADING`](crate::LEDGER_HEADING), one
/// `- entry` a line, none that the prose or the turns kept beside it
/// already hold verbatim.
///
/// Entries are ranked by who gave them, then by how sure their shape is,
/// then newest first: what the user stated ("Given by the user:"), what two
/// turns or more named ("Named again later:"), what the model wrote or
/// passed in a call ("Used by the assistant:"), what a tool's result held
/// ("From tool results:"). Each tier is listed under its own heading line,
/// so a later fold, in the same process or not, reads each entry's tier
/// back and ranks the carried entries with the new ones (a later mention
/// raises an entry); under pressure the tool-made ids of old turns leave
/// first, and a busy session's tool ids never push out what the user gave.
/// The section takes the room the prose leaves, and at least
/// [`ledger_percent`](Self::ledger_percent) of the summary's room: the
/// prose keeps the rest as its floor, except against what the user gave,
/// which may cut the prose down to
/// [`min_summary_tokens`](Self::min_summary_tokens). The summarizer is told
/// an allowance less the section's share. The cut to the allowance
/// shortens the prose first and never cuts an entry in half. A compactor
/// may let the section take the summary past its limit (see
/// [`Compactor::fold_to`](crate::Compactor::fold_to)), for the entries that
/// did not fit. When the summary is folded again, its ledger is read back
/// and merged with the new entries, so identifiers survive any number of
/// stateless compactions.
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
    /// Whether an empty (or blank) answer of the summarizer is a summary
    /// with no text, the fold landing (rollmem keeps one); `false` (the
    /// default): it is [`Error::EmptySummary`], and nothing changes.
    pub allow_empty_summary: bool,
    /// Whether the summary may be a response's role (`assistant`, `tool`),
    /// as chatcram allows; `false` (the default) refuses one, as a summary
    /// must not open the history as a response.
    pub allow_response_role: bool,
}

/// The policy every memory and compactor starts with.
pub(crate) static DEFAULT_POLICY: FoldPolicy = FoldPolicy::new();

impl Default for FoldPolicy {
    fn default() -> Self {
        FoldPolicy::new()
    }
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
            allow_empty_summary: false,
            allow_response_role: false,
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

    /// Take an empty answer as a summary with no text (see
    /// [`allow_empty_summary`](Self::allow_empty_summary)).
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::FoldPolicy;
    ///
    /// assert!(FoldPolicy::new().accept(" ".to_owned()).is_err());
    /// assert_eq!(FoldPolicy::new().allow_empty_summary(true).accept(" ".to_owned())?, "");
    /// # Ok::<(), chatfold::Error>(())
    /// ```
    pub fn allow_empty_summary(mut self, allow: bool) -> Self {
        self.allow_empty_summary = allow;
        self
    }

    /// Allow a response's role for the summary (see
    /// [`allow_response_role`](Self::allow_response_role)).
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::{Compactor, Extractive, FoldPolicy, Message};
    ///
    /// let history = [Message::user("Hello.")];
    /// let assistant = FoldPolicy::new().summary_role("assistant");
    /// let refused = Compactor::new(100).policy(assistant.clone()).compact(&history, &Extractive::new());
    /// assert!(refused.is_err());
    /// let allowed = Compactor::new(100).policy(assistant.allow_response_role(true));
    /// assert!(allowed.compact(&history, &Extractive::new()).is_ok());
    /// ```
    pub fn allow_response_role(mut self, allow: bool) -> Self {
        self.allow_response_role = allow;
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
    /// [`Error::EmptySummary`] when nothing is left (unless the policy
    /// [allows](Self::allow_empty_summary) an empty summary).
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
            return match self.allow_empty_summary {
                true => Ok(String::new()),
                false => Err(Error::EmptySummary),
            };
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

    /// Checks the settings.
    pub(crate) fn validate(&self) -> Result<()> {
        if self.summary_prefix.trim().is_empty() {
            // It marks the summary for the next compaction.
            return Err(Error::InvalidConfig(ConfigError::Empty {
                setting: "summary_prefix",
            }));
        }
        if self.summary_role.is_response() && !self.allow_response_role {
            return Err(Error::InvalidConfig(ConfigError::NotAllowed {
                setting: "summary_role",
                value: self.summary_role.to_string(),
                why: "a summary must not open the history as a response",
            }));
        }
        ConfigError::at_most("ledger_percent", usize::from(self.ledger_percent), 100, None)
    }
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

#[cfg(test)]
pub(crate) mod tests;
