//! The instructions an LLM summarizer is given: templates with named slots.

use std::fmt::Write as _;

use crate::error::{ConfigError, Error, Result};
use crate::summarize::SummaryRequest;

/// What an LLM summarizer says to the model: a system prompt and a user
/// message, each a template with named slots.
///
/// | slot | becomes |
/// |---|---|
/// | `{allowance}` | the tokens the summary may take |
/// | `{words}` | about as many words (three quarters of the tokens) |
/// | `{previous}` | the running summary being extended, or `(none)` |
/// | `{transcript}` | the folded messages, one `role: text` line each (tool calls and call ids shown) |
/// | `{ledger}` | a note listing the identifiers the ledger already keeps verbatim, or nothing |
///
/// Slots are filled in one pass, so text inside the transcript that looks
/// like a slot stays as it is. A `{word}` that is not a slot is refused when
/// the prompt is built (it is most likely a typo); other braces, such as a
/// JSON example, are plain text.
///
/// The default asks for a summary within the allowance that keeps decisions,
/// open tasks, facts the user stated and identifiers verbatim, and folds the
/// previous summary in. The shipped HTTP summarizers use it unless given
/// another; a summarizer of your own can use it too.
///
/// # Examples
///
/// ```
/// use chatfold::summarize::Prompt;
/// use chatfold::{Message, SummaryRequest};
///
/// let prompt = Prompt::new(
///     "Summarize in at most {words} words.",
///     "Before: {previous}\n\n{transcript}",
/// )?;
/// let folded = [Message::user("Ship {v2} on Friday.")];
/// let request = SummaryRequest::new(Some("A release is planned."), &folded, 40);
/// let (system, user) = prompt.render(&request);
/// assert_eq!(system, "Summarize in at most 30 words.");
/// assert_eq!(user, "Before: A release is planned.\n\nuser: Ship {v2} on Friday.\n");
/// # Ok::<(), chatfold::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prompt {
    system: String,
    user: String,
}

/// The default system prompt.
const SYSTEM: &str = "\
You keep the running summary of a conversation between a user and an AI assistant. \
The oldest turns are leaving the assistant's context window; your summary replaces them, \
so whatever it leaves out is forgotten.

Write at most {allowance} tokens (about {words} words). Keep, in this order of importance:
- decisions made, and why;
- open tasks, questions and commitments;
- facts, constraints and preferences the user stated;
- identifiers exactly as written: file paths, URLs, IDs, version numbers, error codes, names, amounts.
Fold the previous summary in: keep what still holds, drop what was superseded. \
Write plain, dense sentences or short bullet points in the conversation's language. \
Do not address anyone, add no preamble and no closing remark: output the summary only.";

/// The default user message.
const USER: &str = "\
<previous_summary>
{previous}
</previous_summary>

<conversation>
{transcript}</conversation>
{ledger}
Write the updated summary now.";

/// The slots a template may use.
const SLOTS: [&str; 5] = ["allowance", "words", "previous", "transcript", "ledger"];

impl Default for Prompt {
    fn default() -> Self {
        Prompt {
            system: SYSTEM.to_owned(),
            user: USER.to_owned(),
        }
    }
}

impl Prompt {
    /// A prompt from a system template and a user template.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] when a template names a slot that does not
    /// exist, or when neither template has `{transcript}` (the model would
    /// never see the conversation).
    pub fn new(system: impl Into<String>, user: impl Into<String>) -> Result<Prompt> {
        let prompt = Prompt {
            system: system.into(),
            user: user.into(),
        };
        let mut has_transcript = false;
        for template in [&prompt.system, &prompt.user] {
            for piece in pieces(template) {
                match piece {
                    Piece::Slot("transcript") => has_transcript = true,
                    Piece::Slot(_) | Piece::Text(_) => {}
                    Piece::Unknown(name) => {
                        return Err(Error::InvalidConfig(ConfigError::UnknownSlot {
                            slot: name.trim_start_matches('{').trim_end_matches('}').to_owned(),
                        }));
                    }
                }
            }
        }
        if !has_transcript {
            return Err(Error::InvalidConfig(ConfigError::MissingSlot {
                slot: "transcript",
            }));
        }
        Ok(prompt)
    }

    /// The system template.
    pub fn system(&self) -> &str {
        &self.system
    }

    /// The user template.
    pub fn user(&self) -> &str {
        &self.user
    }

    /// The system prompt and the user message for `request`.
    pub fn render(&self, request: &SummaryRequest<'_>) -> (String, String) {
        (fill(&self.system, request), fill(&self.user, request))
    }
}

/// A template filled for one request.
fn fill(template: &str, request: &SummaryRequest<'_>) -> String {
    let mut out = String::with_capacity(template.len());
    for piece in pieces(template) {
        match piece {
            Piece::Text(text) | Piece::Unknown(text) => out.push_str(text),
            Piece::Slot("allowance") => {
                let _ = write!(out, "{}", request.allowance());
            }
            Piece::Slot("words") => {
                let _ = write!(out, "{}", request.allowance().saturating_mul(3) / 4);
            }
            Piece::Slot("previous") => out.push_str(request.previous_summary().unwrap_or("(none)")),
            Piece::Slot("transcript") => {
                for m in request.messages() {
                    let _ = writeln!(out, "{m}");
                }
            }
            Piece::Slot(_ledger) => {
                if !request.ledger().is_empty() {
                    out.push_str(
                        "\nThese identifiers are already kept verbatim beside the summary; \
                         mention them only where the prose needs them:\n",
                    );
                    for entry in request.ledger() {
                        let _ = writeln!(out, "- {entry}");
                    }
                }
            }
        }
    }
    out
}

/// A piece of a template.
#[derive(Debug, PartialEq)]
enum Piece<'t> {
    Text(&'t str),
    /// One of [`SLOTS`].
    Slot(&'static str),
    /// `{name}` with a name that is not a slot: the text, braces included.
    Unknown(&'t str),
}

/// A template cut into text and `{name}` slots (a name is ASCII letters and
/// underscores; other braces are text).
fn pieces(template: &str) -> impl Iterator<Item = Piece<'_>> {
    let mut rest = template;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut from = 0;
        while let Some(open) = rest[from..].find('{').map(|i| from + i) {
            let name_len = rest[open + 1..]
                .bytes()
                .take_while(|b| b.is_ascii_alphabetic() || *b == b'_')
                .count();
            let close = open + 1 + name_len;
            if name_len > 0 && rest.as_bytes().get(close) == Some(&b'}') {
                if open > 0 {
                    let text = &rest[..open];
                    rest = &rest[open..];
                    return Some(Piece::Text(text));
                }
                let name = &rest[1..close];
                let whole = &rest[..=close];
                rest = &rest[close + 1..];
                return Some(match SLOTS.iter().find(|s| **s == name) {
                    Some(slot) => Piece::Slot(slot),
                    None => Piece::Unknown(whole),
                });
            }
            from = open + 1;
        }
        let text = rest;
        rest = "";
        Some(Piece::Text(text))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Message;

    #[test]
    fn templates_split_into_text_and_slots() {
        let all: Vec<Piece<'_>> = pieces("a {words} {\"k\": 1} {typo}{ledger}").collect();
        assert_eq!(
            all,
            [
                Piece::Text("a "),
                Piece::Slot("words"),
                Piece::Text(" {\"k\": 1} "),
                Piece::Unknown("{typo}"),
                Piece::Slot("ledger"),
            ]
        );
        assert_eq!(pieces("").count(), 0);
        assert_eq!(pieces("{").collect::<Vec<_>>(), [Piece::Text("{")]);
    }

    #[test]
    fn unknown_slots_and_missing_transcript_are_refused() {
        let err = Prompt::new("{transcrpt}", "x").unwrap_err();
        assert!(Prompt::new("{Transcript}", "{transcript}").is_err());
        assert!(err.to_string().contains("{transcrpt} is not a slot"), "{err}");
        let err = Prompt::new("sys", "no conversation").unwrap_err();
        assert!(err.to_string().contains("{transcript}"), "{err}");
        Prompt::new("{transcript}", "").unwrap();
    }

    #[test]
    fn the_default_names_the_allowance_and_lists_the_ledger() {
        let folded = [Message::user("see /srv/app/config.toml")];
        let request =
            SummaryRequest::new(None, &folded, 200).with_ledger(vec!["/srv/app/config.toml".into()].into());
        let (system, user) = Prompt::default().render(&request);
        assert!(
            system.contains("at most 200 tokens (about 150 words)"),
            "{system}"
        );
        assert!(
            user.contains("<previous_summary>\n(none)\n</previous_summary>"),
            "{user}"
        );
        assert!(user.contains("<conversation>\nuser: see /srv/app/config.toml\n</conversation>"));
        assert!(user.contains("already kept verbatim"), "{user}");
        assert!(user.contains("- /srv/app/config.toml\n"), "{user}");
        let plain = SummaryRequest::new(Some("before"), &folded, 200);
        let (_, user) = Prompt::default().render(&plain);
        assert!(!user.contains("already kept"), "{user}");
        assert!(user.contains("<previous_summary>\nbefore\n</previous_summary>"));
    }

    #[test]
    fn slot_lookalikes_in_the_conversation_stay_as_written() {
        let folded = [Message::user("{previous} {ledger} {transcript}")];
        let request = SummaryRequest::new(Some("P"), &folded, 10);
        let prompt = Prompt::new("", "{previous}|{transcript}").unwrap();
        assert_eq!(
            prompt.render(&request).1,
            "P|user: {previous} {ledger} {transcript}\n"
        );
    }
}
