//! Token counting: the [`TokenCounter`] trait and the counters shipped.

use crate::message::{Content, Message, Part};

#[cfg(feature = "tiktoken")]
mod ascii;
#[cfg(feature = "tiktoken")]
mod bpe;
#[cfg(feature = "tiktoken")]
mod table;
#[cfg(feature = "tiktoken")]
mod tiktoken;
#[cfg(feature = "tiktoken")]
pub use tiktoken::Tiktoken;

/// Tokens that frame every message (`<|start|>{role}<|message|>...<|end|>`).
pub(crate) const MESSAGE_OVERHEAD: usize = 3;
/// Extra token when a message carries a `name`.
const NAME_OVERHEAD: usize = 1;
/// Extra token for each tool call (as tiktoken-rs counts them).
const TOOL_CALL_OVERHEAD: usize = 1;
/// Tokens that prime the reply, once per list (`<|start|>assistant<|message|>`).
const REPLY_PRIMING: usize = 3;

/// Counts tokens.
///
/// One method is required, [`count`](TokenCounter::count); a closure
/// `|text: &str| -> usize` is a counter. The other methods apply OpenAI's
/// published chat accounting on top of it, and may be overridden for models
/// that frame messages differently.
///
/// # Examples
///
/// ```
/// use chatfold::{Message, TokenCounter};
///
/// let words = |text: &str| text.split_whitespace().count();
/// assert_eq!(words.count("three little words"), 3);
/// // 3 framing + 1 for the role "user" + 2 for the content
/// assert_eq!(words.count_message(&Message::user("hello there")), 6);
/// ```
pub trait TokenCounter {
    /// Tokens in `text`.
    fn count(&self, text: &str) -> usize;

    /// Tokens in one message: 3 that frame it + role + content (each text
    /// part) + name (and 1 more) + each tool call's id, name and arguments
    /// (and 1 more each) + `tool_call_id`.
    fn count_message(&self, message: &Message) -> usize {
        let mut total = MESSAGE_OVERHEAD.saturating_add(self.count(message.role.as_str()));
        if let Some(name) = &message.name {
            total = total
                .saturating_add(self.count(name))
                .saturating_add(NAME_OVERHEAD);
        }
        let calls = message.tool_calls.len().saturating_mul(TOOL_CALL_OVERHEAD);
        total = total.saturating_add(calls);
        if let Some(Content::Parts(parts)) = &message.content {
            // Anthropic's tool calls carry their arguments as a JSON object.
            let inputs = parts.iter().filter_map(Part::tool_input);
            total = inputs.fold(total, |sum, input| {
                sum.saturating_add(self.count(&input.to_string()))
            });
        }
        message
            .text_pieces()
            .fold(total, |sum, piece| sum.saturating_add(self.count(piece)))
    }

    /// A lower bound on [`count_message`](TokenCounter::count_message) that
    /// reads no text, only lengths; 0 when the counter knows none.
    ///
    /// It lets the compactor prove a long history is over budget without
    /// tokenizing it. `Tiktoken` answers the 3 framing tokens plus the
    /// bytes of the role, name and text divided by 128, rounded up: no token of its
    /// encodings is longer than 128 bytes.
    fn count_message_at_least(&self, message: &Message) -> usize {
        let _ = message;
        0
    }

    /// Tokens added once per list of messages, for the reply: 3
    /// (`<|start|>assistant<|message|>`).
    fn reply_priming(&self) -> usize {
        REPLY_PRIMING
    }

    /// This counter, shareable between threads, if it is: a compaction
    /// attaches it to its summarizer requests
    /// ([`SummaryRequest::count`](crate::SummaryRequest::count)) so that a
    /// summarizer measures its text as the compactor will. `None` unless
    /// implemented (a closure counter); the built-in counters give
    /// themselves.
    fn shared(&self) -> Option<&(dyn TokenCounter + Sync)> {
        None
    }

    /// Tokens in a whole list: the sum of [`count_message`](TokenCounter::count_message)
    /// plus [`reply_priming`](TokenCounter::reply_priming). What a budget is measured against.
    fn count_messages(&self, messages: &[Message]) -> usize {
        messages.iter().fold(self.reply_priming(), |sum, m| {
            sum.saturating_add(self.count_message(m))
        })
    }
}

impl<F> TokenCounter for F
where
    F: Fn(&str) -> usize,
{
    fn count(&self, text: &str) -> usize {
        self(text)
    }
}

/// An estimate with no dependency: one token per four characters, rounded up.
///
/// Close for English prose with OpenAI's tokenizers, low for code and for
/// languages written without spaces (Chinese, Japanese: about one token a
/// character). Use [`Tiktoken`] for exact counts.
///
/// # Examples
///
/// ```
/// use chatfold::{Heuristic, TokenCounter};
///
/// assert_eq!(Heuristic.count(""), 0);
/// assert_eq!(Heuristic.count("abcd"), 1);
/// assert_eq!(Heuristic.count("abcde"), 2);
/// assert_eq!(Heuristic.count("日本語"), 1); // characters, not bytes
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Heuristic;

impl TokenCounter for Heuristic {
    fn count(&self, text: &str) -> usize {
        // (Short texts, most of them ASCII, are checked a word at a time;
        // counting characters reads them a byte at a time.)
        let chars = match text.len() < 64 && text.is_ascii() {
            true => text.len(),
            false => text.chars().count(),
        };
        chars.div_ceil(4)
    }

    fn shared(&self) -> Option<&(dyn TokenCounter + Sync)> {
        Some(self)
    }
}

/// A counter chosen by name, as a config file or a command line gives it:
/// `heuristic`, `o200k_base`, `cl100k_base`, or an OpenAI model name
/// (`gpt-4o`, `o3` ...; these need the `tiktoken` feature).
///
/// # Examples
///
/// ```
/// use chatfold::{Compactor, NamedCounter, TokenCounter};
///
/// let counter: NamedCounter = "heuristic".parse()?;
/// assert_eq!(counter.count("abcdefgh"), 2);
/// assert_eq!(counter.to_string(), "heuristic");
/// # #[cfg(feature = "tiktoken")] {
/// let exact: NamedCounter = "gpt-4o".parse()?;
/// assert_eq!(exact.to_string(), "o200k_base");
/// let compactor = Compactor::new(8000).counter(exact);
/// # }
/// assert!("no-such-model".parse::<NamedCounter>().is_err());
/// # Ok::<(), chatfold::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum NamedCounter {
    /// `heuristic`: [`Heuristic`].
    Heuristic,
    /// An OpenAI encoding, by its name or a model's.
    #[cfg(feature = "tiktoken")]
    Tiktoken(Tiktoken),
}

impl std::str::FromStr for NamedCounter {
    type Err = crate::error::Error;

    /// # Errors
    ///
    /// [`Error::Tokenizer`](crate::Error::Tokenizer) for an unknown name, or
    /// an encoding without the `tiktoken` feature.
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        if name == "heuristic" {
            return Ok(NamedCounter::Heuristic);
        }
        #[cfg(feature = "tiktoken")]
        return Tiktoken::from_name(name).map(NamedCounter::Tiktoken);
        #[cfg(not(feature = "tiktoken"))]
        Err(crate::error::Error::Tokenizer(
            crate::error::TokenizerError::NeedsTiktoken {
                name: name.to_owned(),
            },
        ))
    }
}

impl std::fmt::Display for NamedCounter {
    /// The encoding's name: `heuristic`, `o200k_base`, `cl100k_base`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NamedCounter::Heuristic => f.write_str("heuristic"),
            #[cfg(feature = "tiktoken")]
            NamedCounter::Tiktoken(t) => f.write_str(t.name()),
        }
    }
}

impl TokenCounter for NamedCounter {
    fn shared(&self) -> Option<&(dyn TokenCounter + Sync)> {
        Some(self)
    }

    fn count(&self, text: &str) -> usize {
        match self {
            NamedCounter::Heuristic => Heuristic.count(text),
            #[cfg(feature = "tiktoken")]
            NamedCounter::Tiktoken(t) => t.count(text),
        }
    }

    fn count_message(&self, message: &Message) -> usize {
        match self {
            NamedCounter::Heuristic => Heuristic.count_message(message),
            #[cfg(feature = "tiktoken")]
            NamedCounter::Tiktoken(t) => t.count_message(message),
        }
    }

    fn count_message_at_least(&self, message: &Message) -> usize {
        match self {
            NamedCounter::Heuristic => Heuristic.count_message_at_least(message),
            #[cfg(feature = "tiktoken")]
            NamedCounter::Tiktoken(t) => t.count_message_at_least(message),
        }
    }

    fn reply_priming(&self) -> usize {
        match self {
            NamedCounter::Heuristic => Heuristic.reply_priming(),
            #[cfg(feature = "tiktoken")]
            NamedCounter::Tiktoken(t) => t.reply_priming(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Part, ToolCall};

    proptest::proptest! {
        /// The estimate is a quarter of the characters, rounded up, for
        /// short and long texts, ASCII or not.
        #[test]
        fn the_heuristic_counts_characters(text in "(\\PC|[a-z ]){0,100}") {
            proptest::prop_assert_eq!(Heuristic.count(&text), text.chars().count().div_ceil(4));
        }
    }

    #[test]
    fn message_accounting_adds_every_piece() {
        let one = |_: &str| 1;
        // framing 3 + role 1 + content 1
        assert_eq!(one.count_message(&Message::user("x")), 5);
        // + name 1 + name overhead 1
        assert_eq!(one.count_message(&Message::user("x").with_name("al")), 7);
        // framing 3 + role 1 + (id, name, args) 3 + call overhead 1, no content
        let call = Message::assistant_tool_calls(vec![ToolCall::new("c", "f", "{}")]);
        assert_eq!(one.count_message(&call), 8);
        // framing 3 + role 1 + content 1 + tool_call_id 1
        assert_eq!(one.count_message(&Message::tool("r", "c")), 6);
        // parts: only text parts count
        let image = Part::from_json(serde_json::json!({"type": "image_url", "image_url": {"url": "x"}}));
        let m = Message::user("").with_parts(vec![Part::text("a"), image, Part::text("b")]);
        assert_eq!(one.count_message(&m), 3 + 1 + 2);
    }

    #[test]
    fn anthropic_blocks_count_their_texts_and_tool_inputs() {
        let chars = |t: &str| t.chars().count();
        let block = |v: serde_json::Value| Part::from_json(v);
        let assistant = Message::assistant("").with_parts(vec![
            block(serde_json::json!({"type": "thinking", "thinking": "hmm", "signature": "SIG"})),
            block(serde_json::json!({"type": "text", "text": "ok"})),
            block(serde_json::json!({"type": "tool_use", "id": "t1", "name": "f", "input": {"q": 1}})),
        ]);
        // framing 3 + role 9 + thinking 3 + text 2 + id 2 + name 1 + input `{"q":1}` 7
        assert_eq!(chars.count_message(&assistant), 3 + 9 + 3 + 2 + 2 + 1 + 7);
        let results = Message::user("").with_parts(vec![
            block(serde_json::json!({"type": "tool_result", "tool_use_id": "t1", "content": "four"})),
            block(serde_json::json!({"type": "tool_result", "tool_use_id": "t2",
                "content": [{"type": "text", "text": "abc"}, {"type": "image", "source": {}}]})),
        ]);
        // framing 3 + role 4 + ids 2 + 2 + contents 4 + 3
        assert_eq!(chars.count_message(&results), 3 + 4 + 2 + 4 + 2 + 3);
    }

    #[test]
    fn list_adds_reply_priming_once() {
        let one = |_: &str| 1;
        let list = [Message::user("a"), Message::assistant("b")];
        assert_eq!(one.count_messages(&list), 3 + 5 + 5);
        assert_eq!(one.count_messages(&[]), 3);
    }

    #[test]
    fn huge_counts_saturate() {
        let huge = |_: &str| usize::MAX;
        assert_eq!(huge.count_message(&Message::user("x")), usize::MAX);
        assert_eq!(
            huge.count_messages(&[Message::user("x"), Message::user("y")]),
            usize::MAX
        );
    }
}
