//! The summary cut to its allowance: the ledger's share, the entries that
//! fit, the prose cut at a word, and the whole counted exactly.

use crate::count::TokenCounter;
use crate::fold::ledger::{self, Kept};

use super::FoldPolicy;

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
    /// The most tokens the ledger section may take of `allowance`.
    fn ledger_share(&self, allowance: usize) -> usize {
        allowance.saturating_mul(usize::from(self.ledger_percent.min(100))) / 100
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
        // A prose cut to nothing shows it was cut; an empty answer (when the
        // policy takes one) stays empty.
        let cut_out = prose.is_empty() && !text.is_empty();
        let shown = if cut_out { "…" } else { prose };
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
            truncated: shown.len() < text.len() || cut_out,
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
}

/// The longest prefix of `text` that `fits`, ending at a word boundary (before
/// whitespace, trailing whitespace dropped) when any such prefix fits, else at
/// a character boundary.
pub(super) fn fitting_prefix(text: &str, fits: impl Fn(&str) -> bool) -> &str {
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
