//! Word rarity: how rare each word is in the span, and how much a sentence tells by it, per token.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use super::SENTENCES;
use super::text::sentences;
use super::words::{first_person, is_common, is_date_word, written_words};
use crate::quick::Quick;

/// How rare each content word is in the span summarized: how many of its
/// texts (each folded turn, each line of the previous summary) hold it.
/// Each form of a word met (lower-case) is looked at once, and then found
/// by one look-up.
#[derive(Default)]
pub(super) struct Rarity {
    /// Texts read.
    texts: u32,
    /// Each word met, lower-case → what it is.
    forms: HashMap<String, Form, BuildHasherDefault<Quick>>,
    /// Each content word's texts holding it, and the last text that did
    /// (from 1), by its number ([`Form::Content`]).
    held: Vec<(u32, u32)>,
    /// (A word lower-cased, reused.)
    scratch: String,
    /// The content words of each sentence of the turns read ([`code`]d),
    /// all in one list.
    codes: Vec<u32>,
    /// Each sentence of the turns read, in order.
    told: Vec<Told>,
    /// Where each turn's sentences start in `told`, by its index (and
    /// where the last ends).
    turns: Vec<u32>,
}

/// A sentence of a turn, as [`Rarity::read_turn`] read it.
#[derive(Clone, Copy, Debug)]
struct Told {
    /// Where its content words end in [`Rarity::codes`].
    end: u32,
    /// Its words in all.
    words: u32,
    /// Whether it speaks of the speaker.
    personal: bool,
    /// Its length in bytes.
    bytes: u32,
}

/// A content word of a sentence as [`Rarity`] keeps it: its number, and
/// whether it may be a name (capitalised, not opening the sentence), is a
/// date (a month or weekday written as one) and holds a digit.
fn code(id: u32, name: bool, date: bool, digit: bool) -> u32 {
    id << 3 | u32::from(name) << 2 | u32::from(date) << 1 | u32::from(digit)
}

/// What a word (lower-case) is to [`Rarity`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    /// Common ([`is_common`]), or too short to tell.
    Common,
    /// `I`, `my`, `we` ... ([`first_person`]).
    Personal,
    /// A content word, by number; whether it holds a digit, and whether it
    /// names a month or a weekday.
    Content { id: u32, digit: bool, date: bool },
}

/// Texts a span needs before a word in a tenth of them says nothing (a
/// speaker's name): in a short one, every word may be in many.
const FREQUENT_AMONG: u32 = 50;
/// Words of a sentence that tells only names, at most, for it to be small
/// talk that names whom it speaks to.
const ADDRESS_WORDS: usize = 5;
/// Words of a sentence weighed, at most.
const WORDS_WEIGHED: usize = 64;
/// How much more a name, a number or a date weighs than its rarity says.
const NAMED: f32 = 1.5;
/// How much a sentence that tells something gains for speaking of the
/// speaker (`I`, `my`, `we`: facts, plans, decisions of people's own),
/// about what one rare word tells: what people say of themselves is what
/// is asked about later.
const PERSONAL: f32 = 3.0;
/// How much a sentence that tells something gains for answering a question.
const REPLYING: f32 = 1.0;
/// Tokens a line costs beyond its words (its speaker, its newline), for
/// weighing information per token.
const LINE_TOKENS: f32 = 16.0;

/// `word` (as written) lower-cased into `into`.
fn lower_into<'b>(word: &str, into: &'b mut String) -> &'b str {
    into.clear();
    match word.is_ascii() {
        true => into.extend(word.bytes().map(|b| char::from(b.to_ascii_lowercase()))),
        false => into.extend(word.chars().flat_map(char::to_lowercase)),
    }
    into
}

/// The word (lower-case) that `low` stands for to [`Rarity`], if a content
/// word: without a short form after an apostrophe (`how're`, `pottery's`:
/// the word before it); `None` for a common word ([`is_common`]) or one of
/// fewer than three letters and no digit.
fn content(low: &str) -> Option<&str> {
    let low = match low.find(['\'', '’']) {
        Some(at) if !is_common(low) => &low[..at],
        _ => low,
    };
    let digit = low.bytes().any(|b| b.is_ascii_digit());
    (digit || (low.chars().count() >= 3 && !is_common(low))).then_some(low)
}

/// How much a sentence tells: see [`Rarity::weigh`].
#[derive(Clone, Copy, Debug)]
pub(super) struct Weight {
    /// Information per token, scaled to a line's score.
    pub(super) score: i32,
    /// It tells nothing: only common words (or words in most turns, as
    /// the speakers' names), no number, no date.
    pub(super) phatic: bool,
}

impl Rarity {
    /// What `low` (a word, lower-case) is, looked at and noted the first
    /// time it is met.
    fn form(&mut self, low: &str) -> Form {
        if let Some(&form) = self.forms.get(low) {
            return form;
        }
        let form = self.classify(low);
        self.forms.insert(low.to_owned(), form);
        form
    }

    /// What `low` is (see [`Rarity::form`]), looked at.
    fn classify(&mut self, low: &str) -> Form {
        if first_person(low) {
            return Form::Personal;
        }
        let Some(word) = content(low) else {
            return Form::Common;
        };
        if word != low {
            // The same number as the word it stands for.
            return match self.forms.get(word) {
                Some(&form) => form,
                None => {
                    let form = self.classify(word);
                    self.forms.insert(word.to_owned(), form);
                    form
                }
            };
        }
        self.held.push((0, 0));
        Form::Content {
            id: (self.held.len() - 1) as u32,
            digit: word.bytes().any(|b| b.is_ascii_digit()),
            date: is_date_word(word),
        }
    }

    /// The content words of sentence `s`, [`code`]d, onto `codes`; its
    /// words in all, and whether it speaks of the speaker.
    fn code_sentence(&mut self, s: &str, codes: &mut Vec<u32>) -> (u32, bool) {
        let mut scratch = std::mem::take(&mut self.scratch);
        let (mut words, mut personal) = (0u32, false);
        for (at, w) in written_words(s).take(WORDS_WEIGHED).enumerate() {
            words += 1;
            match self.form(lower_into(w, &mut scratch)) {
                Form::Common => {}
                Form::Personal => personal = true,
                Form::Content { id, digit, date } => {
                    let capital = w.chars().next().is_some_and(char::is_uppercase);
                    // (`may` is no month but written `May`.)
                    let date = date && (capital || w.len() > 3);
                    codes.push(code(id, capital && at > 0, date, digit));
                }
            }
        }
        self.scratch = scratch;
        (words, personal)
    }

    /// Counts the content words of `text`, one more text of the span.
    pub(super) fn read(&mut self, text: &str) {
        let mut codes = Vec::new();
        for s in sentences(text).take(SENTENCES) {
            self.code_sentence(s, &mut codes);
        }
        self.count(&codes);
    }

    /// Counts the words `codes` as one more text's.
    fn count(&mut self, codes: &[u32]) {
        self.texts += 1;
        let text = self.texts;
        for &c in codes {
            let e = &mut self.held[(c >> 3) as usize];
            if e.1 != text {
                *e = (e.0 + 1, text);
            }
        }
    }

    /// Reads the next turn's `said` (its sentences, as `turn_line` reads
    /// them; `None` for a turn read as no text) and counts its words, as
    /// [`Rarity::read`]; [`Rarity::turn`] weighs them later.
    pub(super) fn read_turn<'s>(&mut self, said: Option<impl Iterator<Item = &'s str>>) {
        self.turns.push(self.told.len() as u32);
        let Some(said) = said else { return };
        let from = self.codes.len();
        let mut codes = std::mem::take(&mut self.codes);
        for s in said {
            let (words, personal) = self.code_sentence(s, &mut codes);
            self.told.push(Told {
                end: codes.len() as u32,
                words,
                personal,
                bytes: s.len() as u32,
            });
        }
        self.count(&codes[from..]);
        self.codes = codes;
    }

    /// The weights of turn `i`'s sentences read by [`Rarity::read_turn`]
    /// (`replying`: it answers a question); `None` when it was not read.
    pub(super) fn turn(&self, i: usize, replying: bool) -> Option<Vec<Weight>> {
        let (&from, &to) = (
            self.turns.get(i)?,
            self.turns.get(i + 1).or(Some(&(self.told.len() as u32)))?,
        );
        let mut start = match from {
            0 => 0,
            _ => self.told[from as usize - 1].end as usize,
        };
        let mut out = Vec::with_capacity((to - from) as usize);
        for t in &self.told[from as usize..to as usize] {
            let end = t.end as usize;
            out.push(self.weigh_codes(&self.codes[start..end], t.words, t.personal, replying, t.bytes));
            start = end;
        }
        Some(out)
    }

    /// How much sentence `s` tells, per token: see [`Rarity::weigh_codes`].
    pub(super) fn weigh(&mut self, s: &str, replying: bool) -> Weight {
        let mut codes = Vec::new();
        let (words, personal) = self.code_sentence(s, &mut codes);
        self.weigh_codes(&codes, words, personal, replying, s.len() as u32)
    }

    /// How much a sentence (its content words `codes`, its `words` in all,
    /// `personal` when it speaks of the speaker, `bytes` long) tells, per
    /// token: the rarity (inverse frequency among the span's texts) of each
    /// of its distinct content words, more for a name (a capitalised word
    /// that does not open it), a number or a date, more when it speaks of
    /// the speaker or (`replying`) answers a question; divided by its
    /// length in tokens (about four characters each) and a line's overhead.
    /// A sentence whose every word is common, or is in a tenth of the texts
    /// or more (the speakers' names, in a span of [`FREQUENT_AMONG`] texts
    /// or more), with no number or date, is small talk; so is a short one
    /// that tells only names ("Thanks, Caroline!").
    fn weigh_codes(&self, codes: &[u32], words: u32, personal: bool, replying: bool, bytes: u32) -> Weight {
        let texts = self.texts.max(1) as f32;
        let (mut info, mut telling, mut names) = (0f32, 0usize, 0usize);
        for (k, &c) in codes.iter().enumerate() {
            let id = c >> 3;
            if codes[..k].iter().any(|&o| o >> 3 == id) {
                continue;
            }
            let (name, date, digit) = (c & 4 != 0, c & 2 != 0, c & 1 != 0);
            let df = self.held[id as usize].0.max(1);
            let frequent = self.texts >= FREQUENT_AMONG && df >= 4 && df.saturating_mul(10) > self.texts;
            info += (1.0 + texts / df as f32).ln();
            if digit || date {
                info += NAMED;
                telling += 1;
            } else if !frequent {
                telling += 1;
                if name {
                    info += NAMED;
                    names += 1;
                }
            }
        }
        if telling > 0 {
            info += PERSONAL * f32::from(u8::from(personal)) + REPLYING * f32::from(u8::from(replying));
        }
        let tokens = bytes as f32 / 4.0;
        Weight {
            score: (info * 10.0 * LINE_TOKENS / (tokens + LINE_TOKENS)).round() as i32,
            // (A short one whose only telling words are names greets or
            // thanks someone: "Thanks, Caroline!")
            phatic: telling == 0 || (telling == names && words as usize <= ADDRESS_WORDS),
        }
    }
}
