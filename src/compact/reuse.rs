//! Summary reuse: where a cache lets the cut be, and what it reuses.

use std::ops::Range;

use super::{Cache, Compactor, Reuse};
use crate::cache::{Chain, Link};
use crate::count::TokenCounter;
use crate::fold::units;
use crate::message::Message;

/// How many unit boundaries before the cut are asked for a cached summary
/// of the prefix they end, newest first, when none is found at the cut.
const REUSE_PROBES: usize = 64;

impl<C: TokenCounter> Compactor<C> {
    /// Where a cache lets the cut be, the cached summary it reuses, and the
    /// links of the prefixes it looked up (the cut's among them), ascending.
    ///
    /// The cut may move back from `start` to a user-led unit boundary whose
    /// kept part stays within `keep_recent_max` and `room`, when the cache
    /// has a summary of exactly the prefix before it; otherwise it stays, and
    /// the newest of [`REUSE_PROBES`] boundaries before it with a cached
    /// summary is extended.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn reuse(
        &self,
        messages: &[Message],
        callers: &[usize],
        after: usize,
        start: usize,
        room: usize,
        count: &mut dyn FnMut(usize) -> usize,
        cache: &Cache,
    ) -> (usize, Option<Reuse>, Vec<(usize, Link)>) {
        // Cuts that keep more, up to keep_recent_max: the cut itself first.
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
        let links = Chain::start(self, &cache.namespace).links(&messages[..start], &wanted);
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
}
