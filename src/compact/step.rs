//! Folds recorded in the cache, for clients that resend their whole
//! transcript (rule 10): each fold's cut, its summary message as rendered
//! and the tool results it cleared, replayed on every later request that
//! extends the folded history, until the budget is passed again.

use serde_json::{Value, json};

use std::borrow::Cow;

use super::plan::Reuse;
use super::{Cache, Compactor, CutReason, Plan, Prefix, Tokens};
use crate::cache::Link;
use crate::count::TokenCounter;
use crate::fold::units;
use crate::message::Message;

/// A new fold to record: its cut, its summary message as rendered, the
/// summarizer's text, and the kept messages it cleared.
type NewFold = (usize, Option<Message>, Option<String>, Vec<(usize, Message)>);

/// A fold as the cache recorded it.
#[derive(Clone, Debug)]
pub(super) struct Recorded {
    /// The first kept message.
    pub(super) cut: usize,
    /// The summary message as it was rendered (none for a step that only
    /// cleared tool results).
    pub(super) message: Option<Message>,
    /// The summarizer's text, which the next fold extends.
    pub(super) summary: Option<String>,
    /// The kept messages the fold cleared, as they were sent.
    pub(super) cleared: Vec<(usize, Message)>,
}

impl Recorded {
    /// The record's value for a prefix of `anchor` messages, under `link`.
    pub(super) fn value(&self, link: &Link, anchor: usize) -> String {
        let cleared: Vec<Value> = (self.cleared.iter())
            .map(|(i, m)| json!([i, m.to_json()]))
            .collect();
        let step = json!({
            "cut": self.cut,
            "message": self.message.as_ref().map(Message::to_json),
            "summary": self.summary,
            "cleared": cleared,
        });
        link.value_with(anchor, step)
    }

    /// The record in `value`, if `link` wrote it for a prefix of `anchor`
    /// messages and it holds together (its indices within the prefix).
    fn read(link: &Link, anchor: usize, value: &str) -> Option<Recorded> {
        let step = link.read_with(anchor, value)?;
        let cut = usize::try_from(step.get("cut")?.as_u64()?).ok()?;
        let message = match step.get("message")? {
            Value::Null => None,
            m => Some(serde_json::from_value::<Message>(m.clone()).ok()?),
        };
        let summary = match step.get("summary") {
            Some(Value::String(s)) => Some(s.clone()),
            _ => None,
        };
        let mut cleared = Vec::new();
        for pair in step.get("cleared")?.as_array()? {
            let i = usize::try_from(pair.get(0)?.as_u64()?).ok()?;
            let m = serde_json::from_value::<Message>(pair.get(1)?.clone()).ok()?;
            cleared.push((i, m));
        }
        let within = cut <= anchor && cleared.iter().all(|&(i, _)| cut <= i && i < anchor);
        (within && (message.is_some() || !cleared.is_empty())).then_some(Recorded {
            cut,
            message,
            summary,
            cleared,
        })
    }
}

impl<C: TokenCounter> Compactor<C> {
    /// The newest fold the cache recorded for a prefix of `messages`, and
    /// the prefix's length (the record's anchor).
    ///
    /// A fold's anchor is where the messages it does not touch begin, so
    /// while replaying it fits the budget, those messages (the anchor's
    /// suffix) are within the budget too: only the unit boundaries whose
    /// suffix is are looked up, newest fold first, in one round trip. The
    /// cost is the budget's worth of counting and a hash of the prefix.
    /// `pins`: the pinned messages, which a record's prefix marks.
    pub(super) fn recorded(
        &self,
        messages: &[Message],
        (callers, pins): (&[usize], &[usize]),
        count: &mut dyn FnMut(usize) -> usize,
        cache: &Cache,
    ) -> Option<(usize, Recorded)> {
        let mut tail = self.counter.reply_priming();
        let mut wanted = Vec::new();
        for unit in units::Backward::new(messages, callers, 0) {
            tail = unit.clone().map(&mut *count).fold(tail, usize::saturating_add);
            if tail > self.budget || unit.start == 0 {
                break;
            }
            wanted.push(unit.start);
        }
        wanted.reverse();
        let &last = wanted.last()?;
        let links = self
            .chain_start(&cache.namespace)
            .links(&messages[..last], &wanted, pins);
        let keys: Vec<String> = links.iter().map(|(_, link)| link.step_key()).collect();
        let values = cache.store.get_many(&keys);
        (links.iter().zip(values).rev())
            .find_map(|(&(at, link), value)| Some((at, Recorded::read(&link, at, &value?)?)))
    }

    /// Records a fold of `messages` (the caller's, before any clearing) in
    /// the cache: anchored at the cut, or past the last message it cleared
    /// after the cut, so that a later history is matched on every message
    /// the replay reads. Nothing is recorded when no unit boundary follows
    /// the last cleared message, nor when the fold neither summarized nor
    /// cleared anything. `fold`: its cut, its summary message as rendered,
    /// the summarizer's text and the kept messages it cleared; `pins`: the
    /// pinned messages.
    pub(super) fn record(&self, messages: &[Message], fold: NewFold, pins: &[usize]) {
        let Some(cache) = &self.cache else { return };
        let (cut, message, summary, cleared) = fold;
        if message.is_none() && cleared.is_empty() {
            return;
        }
        let step = &Recorded {
            cut,
            message,
            summary,
            cleared,
        };
        let anchor = match step.cleared.last() {
            None => Some(step.cut),
            Some(&(last, _)) => {
                let callers = units::callers(messages);
                (units::Backward::new(messages, &callers, 0))
                    .map(|unit| unit.start)
                    .take_while(|&start| start > last)
                    .last()
            }
        };
        let Some(anchor) = anchor.filter(|&a| a > 0 && a <= messages.len()) else {
            return;
        };
        let links = self
            .chain_start(&cache.namespace)
            .links(&messages[..anchor], &[anchor], pins);
        if let Some(&(at, link)) = links.first() {
            cache.store.put(&link.step_key(), step.value(&link, at));
        }
    }
}

impl<C: TokenCounter> Compactor<C> {
    /// The plan that replays `step` on `messages` (longer than the history
    /// it was recorded on): the system messages before its cut, its summary
    /// message as rendered, the pinned messages before its cut (the record's
    /// prefix marks them, so they are the fold's), then every message from
    /// the cut on, those it cleared as it cleared them. When that passes the
    /// budget, the summary the next fold extends instead (`Err`).
    pub(super) fn replay<'a, 'c>(
        &'c self,
        messages: &'a [Message],
        (pinned_at, callers, pins): (&[usize], &[usize], &[usize]),
        step: Recorded,
        before: Tokens,
        count: &mut dyn FnMut(usize) -> usize,
    ) -> Result<Plan<'a, 'c, C>, Option<Reuse>> {
        let Recorded {
            cut,
            message,
            summary,
            cleared,
        } = step;
        let prior = || summary.clone().map(|text| Reuse { at: cut, text });
        // A cut that opened on a response when it was made (no user turn
        // after it then) is replayed only while no user turn follows it
        // (rule 4).
        if message.is_some() && !units::is_aligned(messages, cut, units::Pinned::LookPast) {
            let later = units::Backward::new(messages, callers, cut).any(|unit| {
                unit.start > cut && units::is_aligned(messages, unit.start, units::Pinned::LookPast)
            });
            if later {
                return Err(prior());
            }
        }
        let hoisted: Vec<usize> = pinned_at.iter().copied().take_while(|&i| i < cut).collect();
        let pinned: Vec<usize> = pins.iter().copied().take_while(|&i| i < cut).collect();
        let summary_tokens = message.as_ref().map_or(0, |m| self.counter.count_message(m));
        let mut tokens = (hoisted.iter().chain(&pinned).map(|&i| count(i)))
            .fold(self.counter.reply_priming(), usize::saturating_add)
            .saturating_add(summary_tokens);
        let mut replaced = cleared.iter().peekable();
        for i in cut..messages.len() {
            let t = match replaced.next_if(|(at, _)| *at == i) {
                Some((_, m)) => self.counter.count_message(m),
                None => count(i),
            };
            tokens = tokens.saturating_add(t);
            if tokens > self.budget {
                return Err(prior());
            }
        }
        let mut plan = Plan::whole(messages, self, before, tokens.saturating_sub(summary_tokens));
        if !cleared.is_empty() {
            let mut copy = messages.to_vec();
            for (i, m) in cleared.iter() {
                copy[*i] = m.clone();
            }
            plan.messages = Cow::Owned(copy);
            plan.report.cleared = cleared.iter().map(|(i, _)| *i).collect();
        }
        plan.report.prefix = Prefix::Replayed;
        if let Some(message) = message {
            plan.report.cut = cut;
            plan.report.reason = CutReason::Reused;
            plan.report.reused = Some(cut);
            plan.report.hoisted = hoisted;
            plan.report.pinned = pinned;
            plan.summary_limit = summary_tokens;
            plan.frozen = Some(message);
        }
        Ok(plan)
    }
}
