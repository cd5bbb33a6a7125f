//! The fold policy: everything about *the summary*, written once.

use std::borrow::Cow;

use crate::count::TokenCounter;
use crate::error::{Error, Result};
use crate::message::{Content, Message, Role};

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
    pub message: Message,
    /// Tokens of the whole message (framing included).
    pub tokens: usize,
    /// Whether the text was cut.
    pub truncated: bool,
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

    /// Whether `message` is a summary written under this policy (role and prefix).
    pub fn is_summary(&self, message: &Message) -> bool {
        message.role == self.summary_role
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
        Message::new(
            self.summary_role.clone(),
            format!("{}{text}", self.summary_prefix),
        )
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
        Ok(if trimmed.len() == text.len() {
            text
        } else {
            trimmed.to_owned()
        })
    }

    /// `text` cut at a word boundary to at most `tokens` tokens (and to
    /// [`max_summary_tokens`](Self::max_summary_tokens)), counted by
    /// `counter`; borrowed when it already fits.
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::{FoldPolicy, Heuristic};
    ///
    /// let policy = FoldPolicy::new();
    /// assert_eq!(policy.cut("Flight booked for May third.", 5, &Heuristic), "Flight booked for");
    /// assert_eq!(policy.cut("Short.", 5, &Heuristic), "Short.");
    /// ```
    pub fn cut<'t, C: TokenCounter + ?Sized>(
        &self,
        text: &'t str,
        tokens: usize,
        counter: &C,
    ) -> Cow<'t, str> {
        let limit = self.cap(tokens);
        if counter.count(text) <= limit {
            return Cow::Borrowed(text);
        }
        Cow::Borrowed(fitting_prefix(text, |t| counter.count(t) <= limit))
    }

    /// `tokens` lowered to the policy's cap, if it has one.
    pub(crate) fn cap(&self, tokens: usize) -> usize {
        self.max_summary_tokens.map_or(tokens, |max| max.min(tokens))
    }

    /// Tokens of a summary message holding only the prefix.
    pub(crate) fn overhead<C: TokenCounter + ?Sized>(&self, counter: &C) -> usize {
        counter.count_message(&self.summary_message(""))
    }

    /// The summary message for `text`, cut (at a word boundary) so that the
    /// whole message takes at most `limit` tokens and its text at most the
    /// policy's cap. When not even one character fits, the text is `…`.
    pub(crate) fn fit<C: TokenCounter + ?Sized>(&self, text: &str, limit: usize, counter: &C) -> Fitted {
        let limit = match self.max_summary_tokens {
            Some(max) => limit.min(self.overhead(counter).saturating_add(max)),
            None => limit,
        };
        let message = self.summary_message(text);
        let tokens = counter.count_message(&message);
        if tokens <= limit {
            return Fitted {
                message,
                tokens,
                truncated: false,
            };
        }
        let fits = |t: &str| counter.count_message(&self.summary_message(t)) <= limit;
        let fitting = fitting_prefix(text, fits);
        let message = self.summary_message(if fitting.is_empty() { "…" } else { fitting });
        Fitted {
            tokens: counter.count_message(&message),
            message,
            truncated: true,
        }
    }

    /// Checks the settings.
    pub(crate) fn validate(&self) -> Result<()> {
        if self.summary_prefix.trim().is_empty() {
            return Err(Error::config(
                "summary_prefix must not be empty: it marks the summary for the next compaction",
            ));
        }
        if matches!(self.summary_role, Role::Assistant | Role::Tool) {
            return Err(Error::config(format!(
                "summary_role cannot be {}: a summary must not open the history as a response",
                self.summary_role
            )));
        }
        Ok(())
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
mod tests {
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

    #[test]
    fn fit_respects_the_limit_and_the_cap() {
        let policy = FoldPolicy::new();
        let text = "word ".repeat(400);
        let fitted = policy.fit(&text, 100, &Heuristic);
        assert!(fitted.truncated && fitted.tokens <= 100);
        assert!(fitted.message.text().ends_with("word"));
        let capped = policy.clone().max_summary_tokens(10).fit(&text, 100, &Heuristic);
        assert!(capped.tokens <= policy.overhead(&Heuristic) + 10);
        let nothing = policy.fit(&text, 1, &Heuristic);
        assert!(nothing.truncated && nothing.message.text().ends_with('…'));
        let whole = policy.fit("short", 100, &Heuristic);
        assert!(!whole.truncated);
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
