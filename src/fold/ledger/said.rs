//! What kept turns or a summary say verbatim already.

use std::sync::Arc;

use super::memo::{LastSaid, RECALL, Recall, Seen, said_last};
use super::read::pieces;
use super::words::{Filter, Wide, Words};
use super::{covered, is_loose, key_of, value_of};
use crate::message::Message;

/// What messages say where identifiers are read (see [`pieces`]): entries
/// they hold verbatim need no line of their own. An entry that is one word
/// of those the ledger reads is looked up among such words of theirs
/// (each also without the punctuation around it), any other searched for
/// in their text. An entry found only inside a longer word is listed
/// still: a line spent, nothing lost.
/// inside a longer word is listed still: a line spent, nothing lost.
pub(crate) struct Said<'m> {
    pieces: Vec<&'m str>,
    /// The longest piece's length: a longer entry stands in none.
    longest: usize,
    /// Each piece's words (remembered with the piece when it is long
    /// enough to be).
    words: Vec<Arc<Words>>,
    /// The union of the pieces' filters: most entries are in no piece,
    /// and are known not to be at one look.
    filter: Filter,
    /// When that union is more than half full (many words, as in kept
    /// turns of code or logs), a filter of all the words sized to their
    /// number instead.
    wide: Option<Wide>,
}

impl<'m> Said<'m> {
    /// What `messages` say. Each piece's words are found once while the
    /// memo of texts remembers it (a stateless compactor's kept turns are
    /// the same turns request after request).
    pub(crate) fn new(messages: &'m [Message]) -> Self {
        // (Sized once: most messages are one piece.)
        let pieces: Vec<&str> = {
            let mut all = Vec::with_capacity(messages.len());
            all.extend(messages.iter().flat_map(pieces));
            all
        };
        // The pieces this thread's last `Said` held, in order: a stateless
        // compactor keeps the same turns again (with new ones after them,
        // or the oldest gone), and a piece met where it was, or the first
        // one anywhere among them, is compared whole instead of looked up.
        let LastSaid(mut last) = said_last(None);
        let mut next = Vec::with_capacity(pieces.len());
        let mut at = 0;
        let mut words = Vec::with_capacity(pieces.len());
        for &piece in &pieces {
            if piece.len() < Recall::MIN {
                words.push(Arc::new(Words::of(piece)));
                continue;
            }
            let is = |s: &Option<Arc<Seen>>| s.as_ref().is_some_and(|s| *s.text == *piece);
            let hit = match last.get(at).is_some_and(is) {
                true => Some(at),
                false if next.is_empty() => last.iter().position(is),
                false => None,
            };
            let seen = match hit.and_then(|i| last[i].take().map(|seen| (i, seen))) {
                Some((i, seen)) => {
                    at = i + 1;
                    seen
                }
                None => RECALL.shared(piece),
            };
            words.push(Arc::clone(seen.words.get_or_init(|| Arc::new(Words::of(piece)))));
            // (A piece too long for the memo has no text to compare: not
            // held.)
            next.push(Some(seen).filter(|seen| !seen.text.is_empty()));
        }
        drop(last);
        said_last(Some(LastSaid(next)));
        Said::of(pieces, words)
    }

    /// What `text` says.
    pub(crate) fn text(text: &'m str) -> Self {
        Said::of(vec![text], vec![Arc::new(Words::of(text))])
    }

    /// `pieces` with their `words`.
    fn of(pieces: Vec<&'m str>, words: Vec<Arc<Words>>) -> Self {
        let mut filter = Filter::default();
        words.iter().for_each(|w| filter.union(&w.filter));
        let wide = filter.crowded().then(|| {
            let n = words.iter().map(|w| w.hashes.len()).sum();
            Wide::of(words.iter().flat_map(|w| w.hashes.iter().copied()), n)
        });
        Said {
            longest: pieces.iter().map(|p| p.len()).max().unwrap_or(0),
            pieces,
            words,
            filter,
            wide,
        }
    }

    /// Whether a word whose [`word_hash`] is `hash` may be one of the
    /// pieces' words (is surely not when `false`).
    fn may_have(&self, hash: u64) -> bool {
        match &self.wide {
            Some(wide) => wide.may_hold(hash),
            None => self.filter.may_hold(Filter::bits(hash)),
        }
    }

    /// The pieces that hold `word`, whose [`word_hash`] is `hash`, among
    /// their words.
    fn with_word<'s>(&'s self, word: &'s str, hash: u64) -> impl Iterator<Item = &'m str> + 's {
        let bits = Filter::bits(hash);
        (self.pieces.iter().zip(&self.words))
            .filter(move |(piece, words)| {
                words.filter.may_hold(bits)
                    && (words.spans.iter().zip(&words.hashes))
                        .any(|(&(start, end), &h)| h == hash && piece.get(start..end) == Some(word))
            })
            .map(|(piece, _)| *piece)
    }

    /// Whether `entry` stands verbatim in what was said.
    pub(crate) fn holds(&self, entry: &str) -> bool {
        entry.len() <= self.longest && self.holds_keyed(entry, key_of(entry), is_loose(entry))
    }

    /// [`holds`](Self::holds), `key` the entry's [`key_of`] (the hash of
    /// its value, which is the entry when it is one word) and `loose`
    /// whether it is loose ([`is_loose`]): an entry that is not, most
    /// often in no piece, is known so by its key alone.
    pub(crate) fn holds_keyed(&self, entry: &str, key: u64, loose: bool) -> bool {
        debug_assert!(key == key_of(entry) && loose == is_loose(entry));
        if entry.len() > self.longest {
            return false;
        }
        if !loose {
            // Its value is one word: said among the words, or not at all
            // (a `key: value` entry not whole either, or only inside a
            // longer word).
            if !self.may_have(key) {
                return false;
            }
            let value = value_of(entry);
            if value.len() == entry.len() {
                return self.with_word(value, key).next().is_some();
            }
            // A `key: value` entry stands whole only where its value does.
            return self.with_word(value, key).any(|p| covered(entry, p));
        }
        self.pieces.iter().any(|p| covered(entry, p))
    }
}
