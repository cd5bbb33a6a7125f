//! The view: the prompt within the hard limit, read off the tiers.

use super::{TieredSettings, Tiers};
use crate::count::TokenCounter;
use crate::message::Message;

/// What the view of the buffer is: where it starts, its tokens, and how the
/// summary is shown.
pub(super) struct View {
    pub(super) start: usize,
    pub(super) tokens: usize,
    pub(super) summary: Shown,
}

/// The summary in the view.
pub(super) enum Shown {
    /// No summary, or none fits beside the latest unit.
    Hidden,
    /// The summary as it is.
    Whole,
    /// Cut to what fits beside the latest unit.
    Cut(Message),
}

impl Tiers {
    /// The view within the hard limit. Reads only the messages it shows;
    /// renders the summary only when it must be cut to fit.
    pub(super) fn view<C: TokenCounter>(&self, settings: &TieredSettings<C>) -> View {
        let hard = settings.hard_limit_tokens;
        let fixed = settings
            .counter
            .reply_priming()
            .saturating_add(self.system_tokens);
        let full = fixed
            .saturating_add(self.summary_tokens)
            .saturating_add(self.tracked.total());
        let summary = &self.tracked.state.summary;
        let whole = if summary.is_empty() {
            Shown::Hidden
        } else {
            Shown::Whole
        };
        if full <= hard {
            return View {
                start: 0,
                tokens: full,
                summary: whole,
            };
        }
        let room = hard.saturating_sub(fixed).saturating_sub(self.summary_tokens);
        let start = self.tracked.evict_count_unpinned(room);
        let kept = self.tracked.tokens()[start..]
            .iter()
            .fold(0usize, |t, &x| t.saturating_add(x));
        let base = fixed.saturating_add(kept);
        if base.saturating_add(self.summary_tokens) <= hard {
            return View {
                start,
                tokens: base.saturating_add(self.summary_tokens),
                summary: whole,
            };
        }
        // The latest unit leaves less room than the summary takes: show as
        // much of the summary as fits beside it, or none.
        let left = hard.saturating_sub(base);
        let policy = &settings.policy;
        let fitted = (!summary.is_empty() && left > policy.overhead(&settings.counter))
            .then(|| policy.fit_stored(summary, left, &settings.counter))
            .filter(|fitted| fitted.tokens <= left);
        match fitted {
            Some(fitted) => View {
                start,
                tokens: base.saturating_add(fitted.tokens),
                summary: Shown::Cut(policy.summary_message(&fitted.body)),
            },
            None => View {
                start,
                tokens: base,
                summary: Shown::Hidden,
            },
        }
    }
}
