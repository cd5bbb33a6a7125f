//! Summary reuse: where a cache lets the cut be, and what it reuses.

use super::{Cache, Compactor, Reuse};
use crate::cache::{Chain, Link, Setting};
use crate::count::TokenCounter;
use crate::fold::units;
use crate::fold::{ClearInputs, ClearToolResults, FoldPolicy};
use crate::message::Message;

/// How many unit boundaries up to the cut are asked for a cached summary
/// of the prefix they end, newest first.
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
                clear_inputs,
            }) => {
                settings.extend([
                    Word(1),
                    Word(*keep_recent as u64),
                    Word(*min_tokens as u64),
                    Word(exclude.len() as u64),
                ]);
                settings.extend(exclude.iter().map(|tool| Text(tool)));
                // The inputs cleared, only when any are (older keys stand).
                match clear_inputs {
                    ClearInputs::None => {}
                    ClearInputs::All => settings.push(Text("clear all inputs")),
                    ClearInputs::Of(tools) => {
                        settings.push(Text("clear inputs of"));
                        settings.push(Word(tools.len() as u64));
                        settings.extend(tools.iter().map(|tool| Text(tool)));
                    }
                }
            }
        }
        settings.push(Maybe(self.max_fold_input_tokens));
        Chain::start(namespace, &settings)
    }
}

impl<C: TokenCounter> Compactor<C> {
    /// The cached summary the fold extends, and the links of the prefixes
    /// it looked up (the cut's among them), ascending: the newest of
    /// [`REUSE_PROBES`] unit boundaries up to the cut `start` whose prefix
    /// the cache has a summary of; `pins`: the pinned messages.
    pub(super) fn reuse(
        &self,
        messages: &[Message],
        (callers, pins): (&[usize], &[usize]),
        start: usize,
        cache: &Cache,
    ) -> (Option<Reuse>, Vec<(usize, Link)>) {
        let mut wanted: Vec<usize> = std::iter::once(start)
            .chain(
                units::Backward::new(messages, callers, 0)
                    .map(|unit| unit.start)
                    .skip_while(|&b| b >= start),
            )
            .filter(|&b| b > 0)
            .take(REUSE_PROBES)
            .collect();
        wanted.reverse();
        let links = self
            .chain_start(&cache.namespace)
            .links(&messages[..start], &wanted, pins);
        let keys: Vec<String> = links.iter().map(|(_, l)| l.key()).collect();
        let values = cache.store.get_many(&keys);
        let reuse = (links.iter().zip(values).rev()).find_map(|(&(at, l), value)| {
            let text = l.read(at, &value?)?;
            Some(Reuse { at, text })
        });
        (reuse, links)
    }
}
