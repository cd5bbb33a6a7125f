//! The summary cut to its allowance: the ledger's share, the entries that
//! fit, the prose cut at a word, and the whole counted exactly.

use crate::count::TokenCounter;
use crate::fold::ledger::{self, Tier};

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
/// policy's cap applied), the ledger's share of the text's room, the
/// tokens of the message holding the text alone, and how far the
/// identifiers the user gave may take it. Found once a summary, by
/// [`FoldPolicy::frame`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Frame {
    pub limit: usize,
    pub share: usize,
    pub spoken: usize,
    /// The most the message may take when the ledger's entries need more
    /// than `limit` leaves them (the prose as `limit` leaves it).
    pub ceiling: usize,
    /// The message's tokens with the prose at its floor
    /// (`min_summary_tokens`), about.
    pub floor: usize,
}

/// The room a section may take: what the user gave, any other entry.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rooms {
    pub user: usize,
    pub rest: usize,
}

impl Rooms {
    /// The room an entry of `tier` packs in.
    fn of(self, tier: Tier) -> usize {
        match tier {
            Tier::User => self.user.max(self.rest),
            _ => self.rest,
        }
    }
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
    /// `tokens` and `tiers` are the entries' counts and tiers, `(n, sum)`
    /// their number and sum: when every entry fits, the section is known
    /// without a pass over them.
    pub(crate) fn told_allowance<C: TokenCounter + ?Sized>(
        &self,
        tokens: &[usize],
        tiers: &[Tier],
        (n, sum): (usize, u128),
        allowance: usize,
        counter: &C,
    ) -> usize {
        let share = self.ledger_share(allowance);
        let headings = Headings::new(counter);
        let rooms = Rooms {
            user: allowance.saturating_sub(self.min_summary_tokens),
            rest: share,
        };
        let section = match Self::all_fit(n, sum.saturating_add(headings.all(tiers)), share, counter) {
            Some(section) => section,
            None => {
                self.pack(tokens, tiers, &headings, |_| true, rooms, counter, None)
                    .1
            }
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

    /// Packs the leading entries (their `tokens`, of `tiers`) that `open`
    /// lets through whose section fits in `rooms` (their counts summed,
    /// with the heading's and each tier's; an entry the user gave in the
    /// room the prose's floor leaves, any other in the ledger's own room):
    /// where packing stopped
    /// (the open entries before it are packed, none from it on) and the
    /// section's tokens (0 when none is packed). The packed entries'
    /// indices go to `packed`, if given.
    #[allow(clippy::too_many_arguments)]
    fn pack<C: TokenCounter + ?Sized>(
        &self,
        tokens_of: &[usize],
        tiers: &[Tier],
        headings: &Headings,
        open: impl Fn(usize) -> bool,
        rooms: Rooms,
        counter: &C,
        mut packed_to: Option<&mut Vec<usize>>,
    ) -> (usize, usize) {
        // The heading's tokens and the packed entries', once one is open.
        let mut tokens = None;
        let (mut seen, mut packed) = (0, false);
        let mut last = None;
        for (i, (&t, &tier)) in tokens_of.iter().zip(tiers).enumerate() {
            seen = i + 1;
            if !open(i) {
                continue;
            }
            let so_far =
                *tokens.get_or_insert_with(|| counter.count(ledger::LEDGER_HEADING).saturating_add(2));
            let heading = if last == Some(tier) { 0 } else { headings.of(tier) };
            let more = so_far.saturating_add(t).saturating_add(heading);
            if more > rooms.of(tier) {
                return (i, if packed { so_far } else { 0 });
            }
            tokens = Some(more);
            (packed, last) = (true, Some(tier));
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
    /// entry's place) holds verbatim are not listed; the others are, in
    /// their order (highest tier first) under their tiers' headings, in the room
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
        entries: Listing<'_>,
        held: &dyn Fn(usize) -> bool,
        limits: (usize, usize),
        counter: &C,
        exact: bool,
    ) -> Fitted {
        let frame = self.frame(text, limits, counter);
        self.fit_framed(text, entries, held, frame, counter, exact)
    }

    /// The frame of a summary message for the summarizer's `text`, within
    /// `limits`: the whole message's limit, and the most it may take to
    /// list the entries that limit leaves out (at least the limit); each
    /// within the policy's cap for its text.
    pub(crate) fn frame<C: TokenCounter + ?Sized>(
        &self,
        text: &str,
        (limit, ceiling): (usize, usize),
        counter: &C,
    ) -> Frame {
        let overhead = self.overhead(counter);
        let cap = |limit: usize| match self.max_summary_tokens {
            Some(max) => limit.min(overhead.saturating_add(max)),
            None => limit,
        };
        let limit = cap(limit);
        Frame {
            limit,
            ceiling: cap(ceiling.max(limit)),
            floor: overhead.saturating_add(self.min_summary_tokens),
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
        entries: Listing<'_>,
        held: &dyn Fn(usize) -> bool,
        frame: Frame,
        counter: &C,
        exact: bool,
    ) -> Fitted {
        // Which entries the kept turns hold, asked once each.
        let kept: Vec<bool> = (0..entries.texts.len()).map(held).collect();
        let fitting = Fitting {
            policy: self,
            texts: entries.texts,
            tokens: entries.tokens,
            tiers: entries.tiers,
            headings: Headings::new(counter),
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
        // Past the limit, up to the ceiling: the entries it left out.
        let over = frame.ceiling > frame.limit
            && fitting.overflow(&mut packed, &closed, spoken, section, frame.ceiling);
        let section = match over {
            true => fitting.section_tokens(&packed),
            false => section,
        };
        let bound = if over { frame.ceiling } else { frame.limit };
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
            (body, total) = fitting.drop_oldest(shown, &mut packed, body, total, bound);
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
        let texts: Vec<&str> = entries.iter().map(|e| e.0).collect();
        let tiers: Vec<Tier> = entries.iter().map(|e| e.1).collect();
        let tokens: Vec<usize> = texts.iter().map(|e| ledger::entry_tokens(e, counter)).collect();
        // Every stored entry may take the room: the share applied when it was made.
        let all = FoldPolicy {
            ledger_percent: 100,
            ..self.clone()
        };
        let listing = Listing {
            texts: &texts,
            tokens: &tokens,
            tiers: &tiers,
        };
        all.fit(prose, listing, &|_| false, (limit, limit), counter, true)
    }
}

/// A ledger's candidate entries, in the order a section lists them
/// (highest tier first): their texts, tokens and tiers.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Listing<'a> {
    pub texts: &'a [&'a str],
    pub tokens: &'a [usize],
    pub tiers: &'a [Tier],
}

/// The tokens of each tier's heading line, counted once a fit.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Headings([usize; 4]);

impl Headings {
    pub(crate) fn new<C: TokenCounter + ?Sized>(counter: &C) -> Self {
        Headings([Tier::Tool, Tier::Call, Tier::Repeated, Tier::User].map(|t| t.heading_tokens(counter)))
    }

    /// `tier`'s heading's tokens.
    fn of(&self, tier: Tier) -> usize {
        self.0[tier as usize]
    }

    /// The headings' tokens for entries of `tiers` (in order) all listed.
    fn all(&self, tiers: &[Tier]) -> u128 {
        let mut last = None;
        let mut sum = 0u128;
        for &tier in tiers {
            if last != Some(tier) {
                sum += self.of(tier) as u128;
                last = Some(tier);
            }
        }
        sum
    }
}

/// A summary being fitted by [`FoldPolicy::fit_framed`]: the policy, the
/// candidates' texts, counts and tiers, which of them the kept turns hold,
/// and the counter.
struct Fitting<'a, C: ?Sized> {
    policy: &'a FoldPolicy,
    texts: &'a [&'a str],
    tokens: &'a [usize],
    tiers: &'a [Tier],
    headings: Headings,
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
            floor,
            ..
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
            // What the user gave may cut the prose to its floor.
            let rest = share.max(limit.saturating_sub(spoken));
            let rooms = Rooms {
                user: limit.saturating_sub(floor),
                rest,
            };
            packed.clear();
            section = self
                .policy
                .pack(
                    self.tokens,
                    self.tiers,
                    &self.headings,
                    open,
                    rooms,
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

    /// Adds to `packed` (sorted) the open entries it left out, in order,
    /// while the message stays within `ceiling`: the room past the limit
    /// is the ledger's. Whether any was added.
    fn overflow(
        &self,
        packed: &mut Vec<usize>,
        closed: &[bool],
        spoken: usize,
        section: usize,
        ceiling: usize,
    ) -> bool {
        let mut total = spoken.saturating_add(match section {
            0 => self.counter.count(ledger::LEDGER_HEADING) + 2,
            s => s,
        });
        let mut tiers: Vec<Tier> = packed.iter().map(|&i| self.tiers[i]).collect();
        let mut added = Vec::new();
        let mut listed = vec![false; self.texts.len()];
        packed.iter().for_each(|&i| listed[i] = true);
        for i in (0..self.texts.len()).filter(|&i| !listed[i] && !closed[i]) {
            let tier = self.tiers[i];
            let heading = if tiers.contains(&tier) {
                0
            } else {
                self.headings.of(tier)
            };
            let more = total.saturating_add(self.tokens[i]).saturating_add(heading);
            if more <= ceiling {
                total = more;
                tiers.push(tier);
                added.push(i);
            }
        }
        let any = !added.is_empty();
        packed.extend(added);
        packed.sort_unstable();
        any
    }

    /// The tokens of a section listing the `packed` entries, summed.
    fn section_tokens(&self, packed: &[usize]) -> usize {
        let tiers: Vec<Tier> = packed.iter().map(|&i| self.tiers[i]).collect();
        let entries = packed
            .iter()
            .fold(0usize, |sum, &i| sum.saturating_add(self.tokens[i]));
        match packed.is_empty() {
            true => 0,
            false => (self.counter.count(ledger::LEDGER_HEADING) + 2)
                .saturating_add(self.headings.all(&tiers) as usize)
                .saturating_add(entries),
        }
    }

    /// The summary text: `shown`, then the section listing the `packed`
    /// entries.
    fn render(&self, shown: &str, packed: &[usize]) -> String {
        let listed: Vec<&str> = packed.iter().map(|&i| self.texts[i]).collect();
        let tiers: Vec<Tier> = packed.iter().map(|&i| self.tiers[i]).collect();
        ledger::render(shown, &listed, &tiers)
    }

    /// `body` and its `total` tokens made exact: BPE is not additive, so
    /// the lowest-ranked `packed` entries are dropped while the whole is
    /// over `limit`, as many at a time as the excess asks, and the body
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
