//! A framework's summarization settings (a trigger, what to keep, a model's
//! window) as the compactor's budget and `keep_recent`, decided here once
//! for every binding's middleware.
//!
//! A framework counts tokens its own way (its token counter, the system
//! prompt and the tool schemas beside the messages), and its trigger is in
//! its units. The recipe scales the trigger into the compactor's units by
//! the caller's own measure of the request, keeps the turn in progress whole
//! where a summary still fits beside it, and, when the caller measures the
//! result still at its limit, says the smaller budget to try next.

use crate::count::TokenCounter;
use crate::error::{ConfigError, Error, Result};
use crate::fold::pins::{self, Past, Pin};
use crate::fold::units;
use crate::message::Message;

use super::Compactor;

/// A size as a framework states it: tokens, messages, or a share of the
/// model's window (LangChain's `("tokens", n)`, `("messages", n)`,
/// `("fraction", f)`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Measure {
    /// This many tokens, by the caller's count.
    Tokens(usize),
    /// This many messages.
    Messages(usize),
    /// This share of the model's window (0 to 1).
    Fraction(f64),
}

/// A framework's summarization settings: when it compacts and what it
/// keeps (see [`Compactor::aim`]).
///
/// # Examples
///
/// ```
/// use chatfold::{Compactor, Measure, Message, Recipe};
///
/// let history: Vec<Message> = (0..60).map(|i| Message::user(format!("turn {i} of the chat"))).collect();
/// let recipe = Recipe::new(Measure::Messages(20)).trigger(Measure::Tokens(300));
/// let counter = Compactor::new(1);
/// // The caller's counter finds 540 tokens, 40 of them the system prompt and tools.
/// let mut aim = counter.aim(&recipe, &history, (540, 40))?;
/// assert_eq!(aim.limit, Some(300));
/// assert!(aim.budget < 300 && aim.keep_recent > 0);
/// // The result measured at 310 by the caller: try a smaller budget.
/// let first = aim.budget;
/// assert!(aim.next(310).is_some_and(|b| b < first));
/// assert_eq!(aim.next(250), None); // under the limit: done
/// # Ok::<(), chatfold::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Recipe {
    /// The triggers, any of which compacts; the smallest token one (a
    /// fraction of the window is one) is the limit the result must end
    /// under, and the smallest message one folds to what is kept.
    pub triggers: Vec<Measure>,
    /// What is kept verbatim.
    pub keep: Measure,
    /// The model's window, in the caller's tokens, for fractions.
    pub window: Option<usize>,
    /// The most the summary may take; also its room when only a message
    /// count triggers (default [`Recipe::MESSAGES_ONLY_SUMMARY_TOKENS`]).
    pub max_summary_tokens: Option<usize>,
}

impl Recipe {
    /// The summary's room when only a message count triggers a compaction
    /// and no `max_summary_tokens` is set.
    pub const MESSAGES_ONLY_SUMMARY_TOKENS: usize = 1_000;

    /// How many compactions are run in all, each on a smaller budget,
    /// while the caller's measure finds the result at its limit.
    pub const TRIES: usize = 3;

    /// A recipe keeping `keep`, with no trigger yet.
    pub fn new(keep: Measure) -> Self {
        Recipe {
            triggers: Vec::new(),
            keep,
            window: None,
            max_summary_tokens: None,
        }
    }

    /// Also compact at `measure`.
    pub fn trigger(mut self, measure: Measure) -> Self {
        self.triggers.push(measure);
        self
    }

    /// The model's window, for fractions.
    pub fn window(mut self, tokens: usize) -> Self {
        self.window = Some(tokens);
        self
    }

    /// The most the summary may take.
    pub fn max_summary_tokens(mut self, tokens: usize) -> Self {
        self.max_summary_tokens = Some(tokens);
        self
    }

    /// `fraction` of the window, at least 1.
    fn share(&self, fraction: f64) -> Result<usize> {
        let valid = fraction > 0.0 && fraction <= 1.0;
        match (self.window, valid) {
            (Some(window), true) => Ok(((window as f64 * fraction) as usize).max(1)),
            (None, _) => Err(Error::InvalidConfig(ConfigError::Empty { setting: "window" })),
            (_, false) => Err(Error::InvalidConfig(ConfigError::NotAllowed {
                setting: "fraction",
                value: fraction.to_string(),
                why: "a share of the window is above 0 and at most 1",
            })),
        }
    }

    /// The smallest token trigger and the smallest message trigger.
    fn limits(&self) -> Result<(Option<usize>, Option<usize>)> {
        let (mut tokens, mut messages): (Option<usize>, Option<usize>) = (None, None);
        for &measure in &self.triggers {
            let (slot, n) = match measure {
                Measure::Tokens(n) => (&mut tokens, n),
                Measure::Fraction(f) => (&mut tokens, self.share(f)?),
                Measure::Messages(n) => (&mut messages, n),
            };
            *slot = Some(slot.map_or(n, |m| m.min(n)));
        }
        Ok((tokens, messages))
    }
}

/// What a recipe makes of one request: the limit the caller's measure of
/// the result must end under, the compactor's budget and `keep_recent`, and
/// (through [`next`](Self::next)) the budgets to try when it does not.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Aim {
    /// The caller's limit: the smallest token trigger (`None` when only a
    /// message count triggers).
    pub limit: Option<usize>,
    /// The compactor's budget for this try (at least 1); fold to it.
    pub budget: usize,
    /// The compactor's `keep_recent` (at most the budget).
    pub keep_recent: usize,
    tries: usize,
}

impl Aim {
    /// The compactor for this try: `base`'s settings at [`budget`](Self::budget),
    /// folding to the budget itself (the framework's trigger already folds
    /// in steps), keeping [`keep_recent`](Self::keep_recent).
    pub fn compactor<C: Clone>(&self, base: &Compactor<C>) -> Compactor<C> {
        let mut c = base.clone();
        c.budget = self.budget;
        c.fold_to = Some(self.budget);
        c.keep_recent = Some(self.keep_recent);
        c
    }

    /// The next budget to try after a result the caller measured at
    /// `measured` tokens (the system prompt and tools included), or `None`
    /// when it is under the limit, the budget is 1 already, or the tries
    /// are spent ([`Recipe::TRIES`]).
    pub fn next(&mut self, measured: usize) -> Option<usize> {
        let limit = self.limit?;
        let over = (measured + 1).checked_sub(limit).filter(|&o| o > 0)?;
        self.tries += 1;
        if self.budget <= 1 || self.tries >= Recipe::TRIES {
            return None;
        }
        self.budget = self.budget.saturating_sub(over + self.budget / 20).max(1);
        self.keep_recent = self.keep_recent.min(self.budget);
        Some(self.budget)
    }
}

impl<C: TokenCounter> Compactor<C> {
    /// What `recipe` makes of a request of `messages`: the budget and
    /// `keep_recent` of the first compaction, and the limit the caller's
    /// measure must find the result under.
    ///
    /// `measured` is the caller's count of the request (its messages, system
    /// prompt and tools) and of the request with no messages. The trigger is
    /// scaled into this compactor's units by the ratio of the two counts of
    /// the messages. What `keep` names is counted by this compactor; the
    /// turn in progress (from the latest user turn, [`Pin::LastUser`]) is
    /// kept whole when a fifth of the budget still remains for the summary.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] for a fraction without a window, or outside
    /// (0, 1].
    pub fn aim(&self, recipe: &Recipe, messages: &[Message], measured: (usize, usize)) -> Result<Aim> {
        let (total, fixed) = measured;
        let (token_limit, message_limit) = recipe.limits()?;
        let n = messages.len();
        let counter = &self.counter;
        let tokens_from = |start: usize| -> usize {
            (messages[start.min(n)..].iter()).fold(counter.reply_priming(), |t, m| {
                t.saturating_add(counter.count_message(m))
            })
        };
        let whole = tokens_from(0);
        let mut keep = match recipe.keep {
            Measure::Messages(k) => {
                let k = match message_limit {
                    // Keep fewer than the count that triggers.
                    Some(limit) => k.min(limit.saturating_sub(2).max(1)),
                    None => k,
                };
                tokens_from(n.saturating_sub(k))
            }
            Measure::Tokens(t) => t,
            Measure::Fraction(f) => recipe.share(f)?,
        };
        let summary_room = recipe
            .max_summary_tokens
            .unwrap_or(Recipe::MESSAGES_ONLY_SUMMARY_TOKENS);
        let folded_room = keep.saturating_add(summary_room).min(whole.saturating_sub(1));
        let budget = match token_limit {
            // Only a message count triggers: fold whatever the tokens.
            None => folded_room,
            Some(limit) => {
                // The caller's limit, in this compactor's units.
                let ratio = (total.saturating_sub(fixed) as f64 / whole.max(1) as f64).max(1.0);
                let scaled = (limit.saturating_sub(fixed).saturating_sub(1) as f64 / ratio) as usize;
                match message_limit {
                    // A message count fired too: fold to the count as well.
                    Some(count) if n >= count => scaled.min(folded_room),
                    _ => scaled,
                }
            }
        };
        let budget = budget.max(1);
        // The turn in progress stays whole where a summary still fits beside it.
        let callers = units::callers(messages);
        let summary = |i: usize| self.policy.is_summary(&messages[i]);
        let turn = pins::resolve(messages, &[Pin::LastUser], &callers, summary, Past::Ignored)
            .map_err(Error::InvalidConfig)?;
        if let Some(&turn) = turn.first() {
            keep = keep.max(tokens_from(turn).min(budget - budget / 5));
        }
        Ok(Aim {
            limit: token_limit,
            budget,
            keep_recent: keep.min(budget),
            tries: 0,
        })
    }
}
