//! Chunked folds: the folded part cut into summarizer calls of whole units.

use std::ops::Range;

use super::Compactor;
use crate::count::TokenCounter;
use crate::fold::units;
use crate::message::Message;

impl<C: TokenCounter> Compactor<C> {
    /// The folded part `region` (less the `pinned` messages, ascending) in
    /// chunks of whole units, each at most
    /// `max_fold_input_tokens` with room for the previous summary
    /// (`allowance`); one chunk without that limit, none when empty. Chunk
    /// ends are chosen as the tiered memory's folds are ([`units::chunk`]).
    pub(super) fn chunks(
        &self,
        messages: &[Message],
        pinned: &[usize],
        region: Range<usize>,
        allowance: usize,
        count: &mut dyn FnMut(usize) -> usize,
    ) -> Vec<Range<usize>> {
        if region.is_empty() {
            return Vec::new();
        }
        let Some(max) = self.max_fold_input_tokens else {
            return vec![region];
        };
        // Room for the previous summary too, but never more than half the
        // window: a large allowance must not make every unit a call.
        let per_call = max.saturating_sub(allowance.min(max / 2)).max(1);
        let folded = |i: usize| {
            !messages[i].role.is_pinned()
                && !self.policy.is_summary(&messages[i])
                && pinned.binary_search(&i).is_err()
        };
        let cost: Vec<usize> = region
            .clone()
            .map(|i| if folded(i) { count(i) } else { 0 })
            .collect();
        // `sums[k]`: tokens of the region's first `k` messages.
        let sums: Vec<usize> = std::iter::once(0)
            .chain(cost.iter().scan(0usize, |sum, &t| {
                *sum = sum.saturating_add(t);
                Some(*sum)
            }))
            .collect();
        let tokens = |range: Range<usize>| sums[range.end] - sums[range.start];
        // Unit starts of the region, oldest first.
        let region_callers: Vec<usize> = units::callers(&messages[region.clone()]);
        let mut starts: Vec<usize> = units::Backward::new(&messages[region.clone()], &region_callers, 0)
            .map(|unit| unit.start)
            .collect();
        starts.reverse();
        let len = region.len();
        let mut ends = Vec::new();
        let mut lo = 0;
        while lo < len {
            if tokens(lo..len) <= per_call {
                ends.push(len);
                break;
            }
            // A window of whole units just past the limit: the chunk is
            // chosen among the units it can hold, at a cost bounded by it.
            let first = starts.partition_point(|&b| b <= lo);
            let over = starts[first..].iter().position(|&b| tokens(lo..b) > per_call);
            let hi = over
                .and_then(|k| starts.get(first + k + 1).copied())
                .unwrap_or(len);
            let window = &messages[region.start + lo..region.start + hi];
            let k = units::chunk(
                window,
                &units::callers(window),
                |i| cost[lo + i],
                (usize::MAX, per_call),
            );
            lo = if k == 0 { hi } else { lo + k };
            ends.push(lo);
        }
        // A chunk with nothing to fold (only pinned messages) joins the next
        // one, or the one before when it is last.
        let mut chunks: Vec<Range<usize>> = Vec::new();
        let mut from = 0;
        for end in ends {
            if tokens(from..end) == 0 && end < len {
                continue;
            }
            match chunks.last_mut() {
                Some(last) if tokens(from..end) == 0 => last.end = region.start + end,
                _ => chunks.push(region.start + from..region.start + end),
            }
            from = end;
        }
        chunks
    }
}
