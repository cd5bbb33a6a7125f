//! Exact OpenAI token counts: tiktoken's vocabularies, prepared at build
//! time, and a byte-pair counter of our own over them.

use std::fmt;
use std::sync::OnceLock;

use tiktoken_rs::tokenizer::{Tokenizer, get_tokenizer};

use super::bpe::{CL100K_SPLIT, Encoding, O200K_SPLIT, Vocab};
use super::{MESSAGE_OVERHEAD, TokenCounter};
use crate::error::{Error, Result, TokenizerError};
use crate::message::Message;

/// The longest token of `o200k_base` and `cl100k_base`, in bytes: no text
/// counts fewer tokens than its length over this.
const LONGEST_TOKEN: usize = 128;

/// The tables `build.rs` writes for an encoding.
macro_rules! vocab {
    ($name:literal) => {
        Vocab::new(
            include_bytes!(concat!(env!("OUT_DIR"), "/", $name, ".bytes")),
            include_bytes!(concat!(env!("OUT_DIR"), "/", $name, ".ends")),
            include_bytes!(concat!(env!("OUT_DIR"), "/", $name, ".slots")),
        )
    };
}

/// OpenAI's tokenizers, exact: `o200k_base` (GPT-4o, GPT-4.1, GPT-5, o-series)
/// and `cl100k_base` (GPT-4, GPT-3.5).
///
/// The counts are tiktoken's (`encode_ordinary(text).len()`), from the
/// vocabularies tiktoken-rs ships, which the build turns into tables read
/// in place: loading an encoding only compiles its pre-split regex, once
/// per process, on first use, and shares it: a `Tiktoken` is a reference to
/// it and is `Copy`. Text is counted as ordinary text: special-token
/// strings such as `<|endoftext|>` inside a message count as the text they
/// are, as the chat APIs treat them.
///
/// Each encoding remembers the counts of the texts of 16 bytes or more it
/// counted lately (by a 128-bit hash keyed at random per process, about
/// 64 Ki counts at most), so a server that compacts the same history on
/// every request counts each message once.
///
/// # Examples
///
/// ```
/// use chatfold::{Message, Tiktoken, TokenCounter};
///
/// let counter = Tiktoken::for_model("gpt-4o")?;
/// assert_eq!(counter.name(), "o200k_base");
/// assert_eq!(counter.count("hello world"), 2);
/// // OpenAI's chat accounting: 3 per message + role + content, + 3 for the reply
/// assert_eq!(counter.count_messages(&[Message::user("hello world")]), 3 + 1 + 2 + 3);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy)]
pub struct Tiktoken {
    bpe: &'static Encoding,
    name: &'static str,
}

impl Tiktoken {
    /// The `o200k_base` encoding.
    ///
    /// # Errors
    ///
    /// None: the vocabulary is built into the crate (the `Result` is
    /// [`Tiktoken::for_model`]'s, whose names may be unknown).
    pub fn o200k_base() -> Result<Self> {
        static CELL: OnceLock<Encoding> = OnceLock::new();
        Self::load(&CELL, "o200k_base", || vocab!("o200k_base"), O200K_SPLIT)
    }

    /// The `cl100k_base` encoding.
    ///
    /// # Errors
    ///
    /// None: the vocabulary is built into the crate (the `Result` is
    /// [`Tiktoken::for_model`]'s, whose names may be unknown).
    pub fn cl100k_base() -> Result<Self> {
        static CELL: OnceLock<Encoding> = OnceLock::new();
        Self::load(&CELL, "cl100k_base", || vocab!("cl100k_base"), CL100K_SPLIT)
    }

    /// The encoding of an OpenAI model (`gpt-4o`, `gpt-4.1`, `o3`, `gpt-4`,
    /// `gpt-3.5-turbo`, dated and fine-tuned names too).
    ///
    /// # Errors
    ///
    /// [`Error::Tokenizer`] for an unknown model, or one whose encoding is not
    /// a chat encoding.
    pub fn for_model(model: &str) -> Result<Self> {
        match get_tokenizer(model) {
            Some(Tokenizer::O200kBase | Tokenizer::O200kHarmony) => Self::o200k_base(),
            Some(Tokenizer::Cl100kBase) => Self::cl100k_base(),
            Some(other) => Err(Error::Tokenizer(TokenizerError::NotChat {
                model: model.to_owned(),
                encoding: format!("{other:?}"),
            })),
            None => Err(Error::Tokenizer(TokenizerError::Unknown {
                name: model.to_owned(),
            })),
        }
    }

    /// An encoding by name (`o200k_base`, `cl100k_base`) or a model name.
    ///
    /// # Errors
    ///
    /// As [`Tiktoken::for_model`].
    pub fn from_name(name: &str) -> Result<Self> {
        match name {
            "o200k_base" => Self::o200k_base(),
            "cl100k_base" => Self::cl100k_base(),
            model => Self::for_model(model),
        }
    }

    /// The encoding's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    fn load(
        cell: &'static OnceLock<Encoding>,
        name: &'static str,
        vocab: fn() -> Vocab,
        split: &'static str,
    ) -> Result<Self> {
        let bpe = cell.get_or_init(|| Encoding::new(vocab(), split));
        Ok(Tiktoken { bpe, name })
    }
}

impl TokenCounter for Tiktoken {
    fn shared(&self) -> Option<&(dyn TokenCounter + Sync)> {
        Some(self)
    }

    fn count(&self, text: &str) -> usize {
        self.bpe.count(text)
    }

    fn count_message_at_least(&self, message: &Message) -> usize {
        let name = message.name.as_deref().map_or(0, str::len);
        let bytes = message
            .text_pieces()
            .fold(message.role.as_str().len() + name, |sum, piece| {
                sum.saturating_add(piece.len())
            });
        MESSAGE_OVERHEAD.saturating_add(bytes.div_ceil(LONGEST_TOKEN))
    }
}

impl fmt::Debug for Tiktoken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tiktoken").field("name", &self.name).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lower_bound_never_exceeds_the_count() {
        let longest = [
            (Tiktoken::o200k_base().unwrap(), "o200k_base"),
            (Tiktoken::cl100k_base().unwrap(), "cl100k_base"),
        ];
        let texts = [
            "",
            "a",
            "hello world",
            &" ".repeat(5000),
            &"日本語".repeat(300),
            &"x".repeat(129),
        ];
        for (t, _) in longest {
            for text in texts {
                let m = Message::user(text).with_name("bob");
                assert!(t.count_message_at_least(&m) <= t.count_message(&m), "{text:?}");
            }
        }
    }

    #[test]
    fn unknown_models_are_errors() {
        assert!(Tiktoken::from_name("no-such-model").is_err());
        assert!(Tiktoken::from_name("text-davinci-003").is_err());
        assert_eq!(Tiktoken::from_name("gpt-4").unwrap().name(), "cl100k_base");
        assert_eq!(Tiktoken::from_name("gpt-4.1-mini").unwrap().name(), "o200k_base");
    }
}
