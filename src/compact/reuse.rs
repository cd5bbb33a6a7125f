//! Summary reuse: where a cache lets the cut be, and what it reuses.

use std::ops::Range;

use super::{Cache, Compactor, Reuse};
use crate::cache::{Chain, Link, Setting};
use crate::count::TokenCounter;
use crate::fold::units;
use crate::fold::{ClearToolResults, FoldPolicy};
use crate::message::Message;

/// Where the planner's walk cut: the first message it could keep
/// (`after`: past the last previous summary), the cut (`start`), and the
/// room beside the pinned messages and the summary.
#[derive(Clone, Copy, Debug)]
pub(super) struct CutAt {
    pub(super) after: usize,
    pub(super) start: usize,
    pub(super) room: usize,
}

/// How many unit boundaries before the cut are asked for a cached summary
/// of the prefix they end, newest first, when none is found at the cut.
const REUSE_PROBES: usize = 64;

impl<C> Compactor<C> {
    /// The start of the cache's chain of hashes under `namespace`: everything
    /// besides the messages that decides the summary (the format, the fold
    /// policy, the clearing of tool results and chunking of large folds).
    ///
    /// Not in it: the budget and `keep_recent` (a cached summary is reused
    /// only where it fits) and the counter.
    pub(crate) fn chain_start(&self, namespace: &str) -> Chain {
        use Setting::{Maybe, Text, Word};
        // Every field named, so that a new one cannot be forgotten here.
        let FoldPolicy {
            summary_role,
            summary_prefix,
            min_summary_tokens,
            max_summary_tokens,
            ledger,
            ledger_percent,
            ledger_patterns,
            // Where the summary goes, whether a blank answer is an error,
            // and which roles are allowed: not what a summary says.
            placement: _,
            allow_empty_summary: _,
            allow_response_role: _,
        } = &self.policy;
        let mut settings = vec![
            Text(summary_role.as_str()),
            Text(summary_prefix),
            Word(*min_summary_tokens as u64),
            Maybe(*max_summary_tokens),
            Word(u64::from(*ledger)),
            Word(u64::from(*ledger_percent)),
            Word(ledger_patterns.len() as u64),
        ];
        settings.extend(ledger_patterns.iter().map(|p| Text(p.as_str())));
        match &self.clear_tool_results {
            None => settings.push(Word(0)),
            Some(ClearToolResults {
                keep_recent,
                min_tokens,
                exclude,
            }) => {
                settings.extend([
                    Word(1),
                    Word(*keep_recent as u64),
                    Word(*min_tokens as u64),
                    Word(exclude.len() as u64),
                ]);
                settings.extend(exclude.iter().map(|tool| Text(tool)));
            }
        }
        settings.push(Maybe(self.max_fold_input_tokens));
        Chain::start(namespace, &settings)
    }
}

impl<C: TokenCounter> Compactor<C> {
    /// Where a cache lets the cut be, the cached summary it reuses, and the
    /// links of the prefixes it looked up (the cut's among them), ascending.
    ///
    /// The cut may move back from `start` to a user-led unit boundary whose
    /// kept part stays within `keep_recent_max` and `room`, when the cache
    /// has a summary of exactly the prefix before it; otherwise it stays, and
    /// the newest of [`REUSE_PROBES`] boundaries before it with a cached
    /// summary is extended.
    pub(super) fn reuse(
        &self,
        messages: &[Message],
        callers: &[usize],
        cut: CutAt,
        count: &mut dyn FnMut(usize) -> usize,
        cache: &Cache,
    ) -> (usize, Option<Reuse>, Vec<(usize, Link)>) {
        let start = cut.start;
        let (steps, rooms) = self.steps_back(messages, callers, cut, count);
        // A step back is taken only when its cached summary fits beside the
        // longer kept part, uncut (at the cut itself, it is cut as any summary).
        let fits = |at: usize, text: &str| {
            let k = steps.iter().position(|&s| s == at).unwrap_or(0);
            self.counter.count(text) <= rooms[k]
        };
        // Else the newest cached prefix before the cut is extended.
        let probes: Vec<usize> = units::Backward::new(messages, callers, 0)
            .map(|unit| unit.start)
            .skip_while(|&b| b >= start)
            .take(REUSE_PROBES)
            .collect();
        // Every prefix looked up, hashed in one pass.
        let mut wanted: Vec<usize> = steps.iter().chain(&probes).copied().collect();
        wanted.sort_unstable();
        wanted.dedup();
        let links = self
            .chain_start(&cache.namespace)
            .links(&messages[..start], &wanted);
        let link = |at: usize| {
            links
                .binary_search_by_key(&at, |&(p, _)| p)
                .ok()
                .map(|i| links[i].1)
        };
        // The first of `cuts` the cache has a summary for that `fits` (one
        // round trip).
        let first_cached = |cuts: &[usize], fits: &dyn Fn(usize, &str) -> bool| {
            let cuts: Vec<(usize, Link)> = cuts.iter().filter_map(|&at| Some((at, link(at)?))).collect();
            let keys: Vec<String> = cuts.iter().map(|(_, l)| l.key()).collect();
            let values = cache.store.get_many(&keys);
            cuts.iter().zip(values).find_map(|(&(at, l), value)| {
                let text = l.read(at, &value?)?;
                fits(at, &text).then_some(Reuse { at, text })
            })
        };
        if let Some(reuse) = first_cached(&steps, &fits) {
            return (reuse.at, Some(reuse), links);
        }
        let reuse = first_cached(&probes, &|_, _| true);
        (start, reuse, links)
    }

    /// The cuts that keep more, up to `keep_recent_max` and `room`: the cut
    /// itself first, then each user-led unit boundary before it, with the
    /// room each leaves for the summary.
    fn steps_back(
        &self,
        messages: &[Message],
        callers: &[usize],
        cut: CutAt,
        count: &mut dyn FnMut(usize) -> usize,
    ) -> (Vec<usize>, Vec<usize>) {
        let CutAt { after, start, room } = cut;
        let limit = self.effective_keep_recent_max().max(self.effective_keep_recent());
        // Tokens of messages[range]: all of them, and the non-pinned ones.
        let mut tokens = |range: Range<usize>| {
            range.fold((0usize, 0usize), |(all, loose), i| {
                let t = count(i);
                let pinned = messages[i].role.is_pinned();
                (
                    all.saturating_add(t),
                    if pinned { loose } else { loose.saturating_add(t) },
                )
            })
        };
        let (mut all, mut loose) = tokens(start..messages.len());
        let mut steps = vec![start];
        // Room each step leaves for the summary.
        let mut rooms = vec![usize::MAX];
        let mut older = units::Backward::new(messages, callers, after)
            .map(|unit| unit.start)
            .skip_while(|&b| b >= start)
            .peekable();
        let mut end = start;
        while let Some(&b) = older.peek() {
            let (unit_all, unit_loose) = tokens(b..end);
            all = all.saturating_add(unit_all);
            loose = loose.saturating_add(unit_loose);
            if all > limit || loose > room {
                break;
            }
            if units::is_aligned(messages, b, units::Pinned::LookPast) {
                steps.push(b);
                rooms.push(
                    room.saturating_sub(loose)
                        .saturating_add(self.policy.min_summary_tokens),
                );
            }
            end = b;
            older.next();
        }
        (steps, rooms)
    }
}
