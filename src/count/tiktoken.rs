//! Exact OpenAI token counts through tiktoken-rs.

use std::fmt;
use std::sync::OnceLock;

use tiktoken_rs::CoreBPE;
use tiktoken_rs::tokenizer::{Tokenizer, get_tokenizer};

use super::{MESSAGE_OVERHEAD, TokenCounter};
use crate::error::{Error, Result, TokenizerError};
use crate::message::Message;

/// Texts longer than this are counted in pieces cut where the tokenizer's
/// pre-split would cut them anyway, so counts stay exact and very long
/// texts never reach the regex engine's stack limit in one call.
const PIECE_BYTES: usize = 16 * 1024;

/// The longest token of `o200k_base` and `cl100k_base`, in bytes: no text
/// counts fewer tokens than its length over this.
const LONGEST_TOKEN: usize = 128;

/// OpenAI's tokenizers, exact: `o200k_base` (GPT-4o, GPT-4.1, GPT-5, o-series)
/// and `cl100k_base` (GPT-4, GPT-3.5).
///
/// Each encoder is built once per process, on first use, and shared: a
/// `Tiktoken` is a reference to it and is `Copy`. Text is counted as ordinary
/// text: special-token strings such as `<|endoftext|>` inside a message count
/// as the text they are, as the chat APIs treat them.
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
    bpe: &'static CoreBPE,
    name: &'static str,
}

impl Tiktoken {
    /// The `o200k_base` encoding.
    ///
    /// # Errors
    ///
    /// [`Error::Tokenizer`] if the bundled vocabulary cannot be loaded.
    pub fn o200k_base() -> Result<Self> {
        static CELL: OnceLock<std::result::Result<CoreBPE, String>> = OnceLock::new();
        Self::load(&CELL, "o200k_base", tiktoken_rs::o200k_base)
    }

    /// The `cl100k_base` encoding.
    ///
    /// # Errors
    ///
    /// [`Error::Tokenizer`] if the bundled vocabulary cannot be loaded.
    pub fn cl100k_base() -> Result<Self> {
        static CELL: OnceLock<std::result::Result<CoreBPE, String>> = OnceLock::new();
        Self::load(&CELL, "cl100k_base", tiktoken_rs::cl100k_base)
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

    fn load<E: fmt::Display>(
        cell: &'static OnceLock<std::result::Result<CoreBPE, String>>,
        name: &'static str,
        build: fn() -> std::result::Result<CoreBPE, E>,
    ) -> Result<Self> {
        match cell.get_or_init(|| build().map_err(|e| e.to_string())) {
            Ok(bpe) => Ok(Tiktoken { bpe, name }),
            Err(reason) => Err(Error::Tokenizer(TokenizerError::Load {
                name,
                reason: reason.clone(),
            })),
        }
    }
}

impl TokenCounter for Tiktoken {
    fn count(&self, text: &str) -> usize {
        let mut total = 0usize;
        let mut rest = text;
        while rest.len() > PIECE_BYTES {
            let cut = split_point(rest, PIECE_BYTES);
            total = total.saturating_add(self.bpe.count_ordinary(&rest[..cut]));
            rest = &rest[cut..];
        }
        total.saturating_add(self.bpe.count_ordinary(rest))
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

/// A byte index at or below `target` (and past half of it) where the text
/// can be cut without changing its token count: a single space between two
/// non-space characters. The OpenAI pre-split patterns never join the
/// character before such a space with the space, and look only forward, so
/// the pieces on either side tokenize as they would in the whole text.
/// Without such a space (a huge run of one character), any character boundary.
fn split_point(text: &str, target: usize) -> usize {
    let bytes = text.as_bytes();
    let low = (target / 2).max(1);
    for i in (low..target.min(bytes.len().saturating_sub(1))).rev() {
        if bytes[i] == b' '
            && text[..i].chars().next_back().is_some_and(|c| !c.is_whitespace())
            && text[i + 1..].chars().next().is_some_and(|c| !c.is_whitespace())
        {
            return i;
        }
    }
    let mut cut = target.min(text.len());
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    cut.max(1)
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
    fn split_points_are_char_boundaries_and_progress() {
        let text = "é".repeat(20_000);
        let cut = split_point(&text, PIECE_BYTES);
        assert!(text.is_char_boundary(cut) && cut > 0 && cut <= PIECE_BYTES);
        let spaced = "word ".repeat(10_000);
        let cut = split_point(&spaced, PIECE_BYTES);
        assert_eq!(&spaced[cut..cut + 1], " ");
    }

    #[test]
    fn long_text_counts_as_whole() {
        let t = Tiktoken::o200k_base().unwrap();
        let text = "The quick brown fox, jumps over 1234 lazy dogs!\n  ".repeat(2_000);
        assert!(text.len() > 4 * PIECE_BYTES);
        assert_eq!(t.count(&text), t.bpe.count_ordinary(&text));
    }

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
