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
    pub(crate) fn max_entries(&self, allowance: usize) -> usize {
        self.ledger_share(allowance) / 4 + 8
    }

    /// The allowance the summarizer is told: `allowance`, less the room the
    /// ledger section would take of its share (never below the minimum
    /// prose). The section may take more at the end, of what the prose
    /// leaves.
    ///
    /// `tokens` are the entries' counts, `(n, sum)` their number and sum:
    /// when every entry fits, the section is known without a pass over them.
    pub(crate) fn told_allowance<C: TokenCounter + ?Sized>(
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
    pub(crate) fn fit<C: TokenCounter + ?Sized>(
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
        self.fit_framed(text, texts, tokens, held, frame, counter, exact)
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

    /// [`fit`](Self::fit) in `frame`, found for `text`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn fit_framed<C: TokenCounter + ?Sized>(
        &self,
        text: &str,
        texts: &[&str],
        tokens: &[usize],
        held: &dyn Fn(usize) -> bool,
        frame: Frame,
        counter: &C,
        exact: bool,
    ) -> Fitted {
        // Which entries the kept turns hold, asked once each.
        let kept: Vec<bool> = (0..texts.len()).map(held).collect();
        let fitting = Fitting {
            policy: self,
            texts,
            tokens,
            kept: &kept,
            counter,
        };
        let Cut {
            prose,
            spoken,
            mut packed,
            section,
            mut closed,
            closed_for,
        } = fitting.cut_prose(text, frame);
        // A prose cut to nothing shows it was cut; an empty answer (when the
        // policy takes one) stays empty.
        let cut_out = prose.is_empty() && !text.is_empty();
        let shown = if cut_out { "…" } else { prose };
        let mut body = fitting.render(shown, &packed);
        let mut total = match (exact, prose.is_empty()) {
            (true, _) | (false, true) => fitting.message_tokens(&body),
            (false, false) => spoken.saturating_add(section),
        };
        // Exact at last: BPE is not additive.
        if exact {
            (body, total) = fitting.drop_oldest(shown, &mut packed, body, total, frame.limit);
        }
        if closed_for != shown {
            closed = fitting.closed_by(shown);
        }
        let dropped = fitting.dropped(&packed, &closed);
        Fitted {
            tokens: total,
            prose_len: shown.len(),
            body,
            truncated: shown.len() < text.len() || cut_out,
            listed: packed,
            dropped,
        }
    }

    /// [`fit`](Self::fit) with nothing held beside the summary, for a
    /// memory's fold, whose candidates are `fresh`, then `kept`'s entries
    /// less those at `again` (ascending indices): the same summary, the
    /// section copied from the one `kept` holds rendered, and only the
    /// loose entries looked up when the prose holds no word the patterns
    /// read. `None` when the prose must be cut to make room (or is blank),
    /// which [`fit_framed`](Self::fit_framed) does, in the same `frame`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn fit_kept<C: TokenCounter + ?Sized>(
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
        let joined = Joined::new(fresh, kept, again);
        let m = joined.m;
        let said = joined.said(text);
        let open = |i: usize| is_open(&said, i);
        let ledger_room = share.max(limit.saturating_sub(spoken));
        let (stop, section) = self.pack_joined(&joined, &said, ledger_room, counter);
        if spoken.saturating_add(section) > limit {
            return None;
        }
        let listed: Vec<usize> = match said.is_empty() {
            true => (0..stop).collect(),
            false => (0..stop).filter(|&i| open(i)).collect(),
        };
        let body = joined.render(text, &listed, &said);
        let total = match exact {
            true => self.message_tokens(&body, counter),
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

    /// Packs `joined`'s candidates not `said` into `room` tokens: all of
    /// them at once when none is said and all fit, else in turn. Where
    /// packing stopped and the section's tokens, as [`pack`](Self::pack)
    /// gives them.
    fn pack_joined<C: TokenCounter + ?Sized>(
        &self,
        joined: &Joined<'_>,
        said: &[bool],
        room: usize,
        counter: &C,
    ) -> (usize, usize) {
        let m = joined.m;
        let every = Self::all_fit(m, joined.total(), room, counter).filter(|_| said.is_empty());
        match (every, m) {
            (_, 0) => (0, 0),
            (Some(section), _) => (m, section),
            _ => self.pack(
                (0..m).map(|i| joined.tokens(i)),
                |i| is_open(said, i),
                room,
                counter,
                None,
            ),
        }
    }

    /// Tokens of the summary message whose text is `body`, framing and
    /// prefix included.
    fn message_tokens<C: TokenCounter + ?Sized>(&self, body: &str, counter: &C) -> usize {
        counter.count_message(&self.summary_message(body))
    }

    /// A stored summary text (prose and section) fitted into `limit` tokens
    /// for the whole message, its entries kept in their order.
    pub(crate) fn fit_stored<C: TokenCounter + ?Sized>(
        &self,
        body: &str,
        limit: usize,
        counter: &C,
    ) -> Fitted {
        let (prose, entries) = ledger::split(body);
        let tokens: Vec<usize> = entries.iter().map(|e| ledger::entry_tokens(e, counter)).collect();
        // Every stored entry may take the room: the share applied when it was made.
        let all = FoldPolicy {
            ledger_percent: 100,
            ..self.clone()
        };
        all.fit(prose, &entries, &tokens, &|_| false, limit, counter, true)
    }
}

/// A summary being fitted by [`FoldPolicy::fit_framed`]: the policy, the
/// candidates' texts and counts, which of them the kept turns hold, and the
/// counter.
struct Fitting<'a, C: ?Sized> {
    policy: &'a FoldPolicy,
    texts: &'a [&'a str],
    tokens: &'a [usize],
    kept: &'a [bool],
    counter: &'a C,
}

/// The prose cut to make room for the section, and the entries packed
/// beside it.
struct Cut<'t> {
    /// The text, or the prefix it was cut to.
    prose: &'t str,
    /// Tokens of the summary message holding `prose` alone.
    spoken: usize,
    /// The packed entries' indices, newest first.
    packed: Vec<usize>,
    /// The section's tokens (0 when none is packed).
    section: usize,
    /// Which entries the kept turns or `closed_for` hold.
    closed: Vec<bool>,
    /// The prose `closed` was found for (the one before the last cut).
    closed_for: &'t str,
}

impl<C: TokenCounter + ?Sized> Fitting<'_, C> {
    /// Tokens of the summary message whose text is `body`.
    fn message_tokens(&self, body: &str) -> usize {
        self.policy.message_tokens(body, self.counter)
    }

    /// Which entries the kept turns or `prose` hold verbatim.
    fn closed_by(&self, prose: &str) -> Vec<bool> {
        // (No entries, nothing to look up: the prose is not read.)
        let said = ledger::Said::text(if self.texts.is_empty() { "" } else { prose });
        (self.texts.iter().zip(self.kept))
            .map(|(t, &k)| k || said.holds(t))
            .collect()
    }

    /// Packs the open entries into the room `text` leaves in `frame`, and
    /// cuts the prose at a word when the whole is over; twice at most,
    /// since cutting the prose can uncover entries it held.
    fn cut_prose<'t>(&self, text: &'t str, frame: Frame) -> Cut<'t> {
        let Frame {
            limit,
            share,
            mut spoken,
        } = frame;
        let mut prose = text;
        let mut packed: Vec<usize> = Vec::with_capacity(self.texts.len());
        let mut section = 0;
        // The answers and the prose they are for.
        let (mut closed, mut closed_for) = (Vec::new(), text);
        for _ in 0..2 {
            closed = self.closed_by(prose);
            closed_for = prose;
            let open = |i: usize| !closed[i];
            let ledger_room = share.max(limit.saturating_sub(spoken));
            packed.clear();
            section = self
                .policy
                .pack(
                    self.tokens.iter().copied(),
                    open,
                    ledger_room,
                    self.counter,
                    Some(&mut packed),
                )
                .1;
            if spoken.saturating_add(section) <= limit {
                break;
            }
            prose = fitting_prefix(text, |p| self.message_tokens(p).saturating_add(section) <= limit);
            spoken = self.message_tokens(prose);
        }
        Cut {
            prose,
            spoken,
            packed,
            section,
            closed,
            closed_for,
        }
    }

    /// The summary text: `shown`, then the section listing the `packed`
    /// entries.
    fn render(&self, shown: &str, packed: &[usize]) -> String {
        let listed: Vec<&str> = packed.iter().map(|&i| self.texts[i]).collect();
        ledger::render(shown, &listed)
    }

    /// `body` and its `total` tokens made exact: BPE is not additive, so
    /// the oldest `packed` entries are dropped while the whole is over
    /// `limit`, as many at a time as the excess asks, and the body
    /// rendered and counted again.
    fn drop_oldest(
        &self,
        shown: &str,
        packed: &mut Vec<usize>,
        mut body: String,
        mut total: usize,
        limit: usize,
    ) -> (String, usize) {
        while total > limit && !packed.is_empty() {
            let mut excess = total - limit;
            while excess > 0 {
                let Some(i) = packed.pop() else { break };
                excess = excess.saturating_sub(self.tokens[i]);
            }
            body = self.render(shown, packed);
            total = self.message_tokens(&body);
        }
        (body, total)
    }

    /// The entries neither `packed` nor `closed`: there was no room (their
    /// indices, in order).
    fn dropped(&self, packed: &[usize], closed: &[bool]) -> Vec<usize> {
        let mut listed = vec![false; self.texts.len()];
        packed.iter().for_each(|&i| listed[i] = true);
        (0..self.texts.len())
            .filter(|&i| !listed[i] && !closed[i])
            .collect()
    }
}

/// The candidates of a memory's fold: `fresh`'s entries, then `kept`'s
/// less those at `again` (ascending indices).
struct Joined<'a> {
    fresh: &'a Kept,
    kept: &'a Kept,
    again: &'a [usize],
    /// How many candidates are `fresh`'s.
    f: usize,
    /// How many candidates there are.
    m: usize,
}

impl<'a> Joined<'a> {
    /// `fresh`'s entries, then `kept`'s less those at `again`.
    fn new(fresh: &'a Kept, kept: &'a Kept, again: &'a [usize]) -> Self {
        let f = fresh.len();
        Joined {
            fresh,
            kept,
            again,
            f,
            m: f + kept.len() - again.len(),
        }
    }

    /// The index in `kept` of candidate `i` (one of `kept`'s).
    fn kept_at(&self, i: usize) -> usize {
        Kept::skipping(i - self.f, self.again)
    }

    /// Candidate `i`'s text.
    fn text(&self, i: usize) -> &'a str {
        match i < self.f {
            true => &self.fresh.entries.texts[i],
            false => &self.kept.entries.texts[self.kept_at(i)],
        }
    }

    /// Candidate `i`'s tokens.
    fn tokens(&self, i: usize) -> usize {
        match i < self.f {
            true => self.fresh.entries.tokens[i],
            false => self.kept.entries.tokens[self.kept_at(i)],
        }
    }

    /// Whether candidate `i` is loose.
    fn loose(&self, i: usize) -> bool {
        match i < self.f {
            true => self.fresh.entries.loose[i],
            false => self.kept.entries.loose[self.kept_at(i)],
        }
    }

    /// The candidates' tokens summed.
    fn total(&self) -> u128 {
        let again: u128 = self
            .again
            .iter()
            .map(|&j| self.kept.entries.tokens[j] as u128)
            .sum();
        self.fresh.total + self.kept.total - again
    }

    /// Which candidates the prose `text` holds verbatim; empty when none
    /// does, or none is looked up: only when the prose holds a word the
    /// patterns read, or for the loose entries.
    fn said(&self, text: &str) -> Vec<bool> {
        let hot = crate::fold::hot::has_ledger_word(text);
        let loose = self.kept.loose_count > 0 || self.fresh.loose_count > 0;
        let mut said = Vec::new();
        if self.m > 0 && (hot || loose) {
            let prose = ledger::Said::text(text);
            said = (0..self.m)
                .map(|i| (hot || self.loose(i)) && prose.holds(self.text(i)))
                .collect();
            // None held: as if none was asked (all may be listed at once).
            if !said.contains(&true) {
                said.clear();
            }
        }
        said
    }

    /// The summary text: `text`, then the section listing the `listed`
    /// candidates. With none `said`, those listed are the first ones, and
    /// their lines are copied from the rendered sections.
    fn render(&self, text: &str, listed: &[usize], said: &[bool]) -> String {
        let mut body =
            String::with_capacity(text.len() + ledger::SECTION_START.len() + self.kept.rendered.len() + 64);
        body.push_str(text);
        if !listed.is_empty() {
            body.push_str(ledger::SECTION_START);
            let from_fresh = listed.partition_point(|&i| i < self.f);
            let from_kept = listed.len() - from_fresh;
            match said.is_empty() {
                // The fold's entries listed, then the kept ones: the first
                // ones not found again.
                true => {
                    self.fresh.push_lines(&mut body, &[], from_fresh, true);
                    self.kept
                        .push_lines(&mut body, self.again, from_kept, from_fresh == 0);
                }
                false => {
                    let texts: Vec<&str> = listed.iter().map(|&i| self.text(i)).collect();
                    ledger::push_lines(&mut body, &texts);
                }
            }
        }
        body
    }
}

/// Whether candidate `i` is open: not among those `said` (none is when
/// `said` is empty).
fn is_open(said: &[bool], i: usize) -> bool {
    !said.get(i).copied().unwrap_or(false)
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
