//! The memory strategies' model-based property tests: nothing lost,
//! nothing duplicated, for rolling, async rolling, summary, window and
//! tiered memories.

mod common;

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use chatfold::memory::{
    AsyncRemember, AsyncRollingMemory, Memory, Remember, RollingMemory, Settings, State, SummaryMemory,
    WindowMemory,
};
use chatfold::{Message, SummaryRequest};
use common::memory::words;
use proptest::prelude::*;

/// One operation of the model-based test.
#[derive(Clone, Debug)]
enum Op {
    Add(common::Turn),
    Clear,
    SaveRestore,
    SetFailing(bool),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => common::item().prop_map(Op::Add),
        1 => Just(Op::Clear),
        2 => Just(Op::SaveRestore),
        2 => any::<bool>().prop_map(Op::SetFailing),
    ]
}

/// Messages carry a unique tag; the summary lists the tags folded, in order.
fn tag_all(items: Vec<Message>, next: &mut usize) -> Vec<Message> {
    items
        .into_iter()
        .map(|mut m| {
            *next += 1;
            m.id = Some(format!("m{next}"));
            m
        })
        .collect()
}

/// The summaries here list every folded tag: they must never be cut.
fn lossless<S, C>(settings: Settings<S, C>) -> Settings<S, C> {
    settings.policy(chatfold::FoldPolicy::new().max_summary_tokens(usize::MAX))
}

/// The tags a tagging summarizer listed: its prose, before any ledger section.
fn tags_in(summary: &str) -> Vec<String> {
    let prose = summary
        .split(&format!("\n\n{}", chatfold::LEDGER_HEADING))
        .next()
        .unwrap_or("");
    prose.split_whitespace().map(str::to_owned).collect()
}

fn tags(messages: &[Message]) -> Vec<String> {
    messages.iter().map(|m| m.id.clone().unwrap()).collect()
}

fn tagging_summarizer(
    failing: &Cell<bool>,
) -> impl Fn(&SummaryRequest<'_>) -> Result<String, &'static str> + '_ {
    move |r| {
        if failing.get() {
            return Err("down");
        }
        let mut out: Vec<String> = r.previous_summary().map(str::to_owned).into_iter().collect();
        out.extend(r.messages().map(|m| m.id.clone().unwrap()));
        Ok(out.join(" "))
    }
}

/// What was added since the last clear, and for each tool result whether the
/// call it answers was in the buffer when it arrived (if not, it arrived as an
/// orphan, and may stay one).
#[derive(Default)]
struct Added {
    all: Vec<Message>,
    joined: Vec<bool>,
}

impl Added {
    fn push(&mut self, m: &Message, buffer: &[Message]) {
        let joined = m
            .tool_call_id
            .as_deref()
            .is_some_and(|id| buffer.iter().any(|c| c.tool_calls.iter().any(|t| t.id == id)));
        self.all.push(m.clone());
        self.joined.push(joined);
    }

    fn clear(&mut self) {
        *self = Added::default();
    }

    /// Summary + buffer account for every message, once, in order (or, for a
    /// lossy memory, the buffer is a suffix); no result that joined its call
    /// is in the buffer without it.
    fn check(&self, summary: &str, buffer: &[Message], lossless: bool) {
        let mut seen = tags_in(summary);
        seen.extend(tags(buffer));
        if lossless {
            assert_eq!(
                seen,
                tags(&self.all),
                "summary + buffer must be every message since the last clear"
            );
        } else {
            assert!(
                tags(&self.all).ends_with(&tags(buffer)),
                "the buffer is a suffix of what was added"
            );
        }
        for (j, m) in buffer.iter().enumerate() {
            let Some(id) = m.tool_call_id.as_deref() else {
                continue;
            };
            let pos = self.all.iter().position(|a| a.id == m.id).unwrap();
            if self.joined[pos] {
                let has_call = buffer[..j]
                    .iter()
                    .any(|c| c.tool_calls.iter().any(|t| t.id == id));
                assert!(has_call, "result {id} kept without its call");
            }
        }
    }
}

proptest! {
    #![proptest_config(common::cases(128))]

    #[test]
    fn rolling_memory_loses_nothing(ops in prop::collection::vec(op(), 1..60), max in 5usize..80, low in 0usize..=100) {
        let failing = Cell::new(false);
        // A low-water mark (0: none, rollmem's behaviour) changes how much
        // one fold takes, never what is kept.
        let settings = |max: usize| match low {
            0 => Settings::new(max),
            pct => Settings::new(max).low_water((max * pct / 100).max(1)),
        };
        let new = |state: State| RollingMemory::from_state(state, lossless(settings(max).summarizer(tagging_summarizer(&failing)).counter(words))).unwrap();
        let mut memory = new(State::default());
        let (mut added, mut next) = (Added::default(), 0usize);
        for op in ops {
            let mut added_ok = false;
            match op {
                Op::Add(item) => {
                    for m in tag_all(common::render(&[item]), &mut next) {
                        let before = memory.to_state();
                        added.push(&m, &memory.buffer());
                        added_ok = memory.add_message(m).is_ok();
                        if !added_ok {
                            prop_assert!(failing.get());
                            prop_assert_eq!(&memory.summary(), &before.summary);
                            prop_assert_eq!(&memory.buffer()[..before.buffer.len()], &before.buffer[..]);
                        }
                    }
                }
                Op::Clear => { memory.clear(); added.clear(); }
                Op::SaveRestore => {
                    let json = memory.to_state().to_json_string();
                    memory = new(State::from_json_str(&json).unwrap());
                }
                Op::SetFailing(f) => failing.set(f),
            }
            added.check(&memory.summary(), &memory.buffer(), true);
            if added_ok {
                // Within budget, unless the latest unit alone is over it.
                let buffer = memory.buffer();
                let kept: usize = buffer.iter().map(|m| chatfold::TokenCounter::count_message(&words, m)).sum();
                prop_assert_eq!(kept, memory.buffer_tokens());
                prop_assert!(kept <= max || common::last_unit_start(&buffer) == 0,
                    "buffer over budget ({} > {}) with more than its latest unit", kept, max);
            }
        }
    }

    #[test]
    fn async_rolling_memory_loses_nothing(ops in prop::collection::vec(op(), 1..40), max in 5usize..80) {
        let failing = Arc::new(AtomicBool::new(false));
        let f = failing.clone();
        let summarize = move |r: SummaryRequest<'_>| {
            // A closure's future cannot borrow its argument: it owns a copy.
            let r = r.into_owned();
            let fail = f.load(Ordering::SeqCst);
            async move {
                if fail { return Err("down"); }
                let mut out: Vec<String> = r.previous_summary().map(str::to_owned).into_iter().collect();
                out.extend(r.messages().map(|m| m.id.clone().unwrap()));
                Ok(out.join(" "))
            }
        };
        let new = |state: State| AsyncRollingMemory::from_state(state, lossless(Settings::new(max).summarizer(summarize.clone()).counter(words))).unwrap();
        let mut memory = new(State::default());
        let (mut added, mut next) = (Added::default(), 0usize);
        for op in ops {
            match op {
                Op::Add(item) => {
                    for m in tag_all(common::render(&[item]), &mut next) {
                        added.push(&m, &memory.buffer());
                        let _ = pollster::block_on(memory.add_message(m));
                    }
                }
                Op::Clear => { memory.clear(); added.clear(); }
                Op::SaveRestore => {
                    let json = memory.to_state().to_json_string();
                    memory = new(State::from_json_str(&json).unwrap());
                }
                Op::SetFailing(on) => failing.store(on, Ordering::SeqCst),
            }
            added.check(&memory.summary(), &memory.buffer(), true);
        }
    }

    #[test]
    fn summary_memory_loses_nothing(ops in prop::collection::vec(op(), 1..40)) {
        let failing = Cell::new(false);
        let mut memory = SummaryMemory::new(tagging_summarizer(&failing));
        let (mut added, mut next) = (Added::default(), 0usize);
        for op in ops {
            let mut added_ok = false;
            match op {
                Op::Add(item) => {
                    for m in tag_all(common::render(&[item]), &mut next) {
                        added.push(&m, &memory.buffer());
                        let result = memory.add_message(m);
                        prop_assert_eq!(result.is_err(), failing.get());
                        added_ok = result.is_ok();
                    }
                }
                Op::Clear => { memory.clear(); added.clear(); }
                Op::SaveRestore => {
                    let json = memory.to_state().to_json_string();
                    memory = SummaryMemory::from_state(State::from_json_str(&json).unwrap(), tagging_summarizer(&failing));
                }
                Op::SetFailing(f) => failing.set(f),
            }
            added.check(&memory.summary(), &memory.buffer(), true);
            if added_ok { prop_assert!(memory.buffer().is_empty()); }
        }
    }

    #[test]
    fn window_memory_keeps_a_bounded_suffix(ops in prop::collection::vec(op(), 1..60), max in 1usize..12) {
        let mut memory = WindowMemory::new(max).unwrap();
        let (mut added, mut next) = (Added::default(), 0usize);
        for op in ops {
            match op {
                Op::Add(item) => {
                    for m in tag_all(common::render(&[item]), &mut next) {
                        added.push(&m, &memory.buffer());
                        memory.add_message(m).unwrap();
                    }
                }
                Op::Clear => { memory.clear(); added.clear(); }
                Op::SaveRestore => {
                    let json = memory.to_state().to_json_string();
                    memory = WindowMemory::from_state(State::from_json_str(&json).unwrap(), max).unwrap();
                }
                Op::SetFailing(_) => {}
            }
            let buffer = memory.buffer();
            added.check("", &buffer, false);
            prop_assert!(buffer.len() <= max || common::last_unit_start(&buffer) == 0,
                "{} messages in a window of {max}", buffer.len());
        }
    }
}

/// An operation on a tiered memory: the common ones, or a fold run inline.
#[derive(Clone, Debug)]
enum TieredOp {
    Base(Op),
    Fold,
}

fn tiered_op() -> impl Strategy<Value = TieredOp> {
    prop_oneof![
        6 => op().prop_map(TieredOp::Base),
        1 => Just(TieredOp::Fold),
    ]
}

/// A tagging async summarizer that fails while `failing` is set, recording
/// the tags of the last chunk it was given.
fn tiered_summarizer(
    failing: Arc<AtomicBool>,
    last_chunk: Arc<std::sync::Mutex<Vec<String>>>,
) -> impl Fn(SummaryRequest<'_>) -> std::future::Ready<Result<String, &'static str>> + Clone + Send + Sync + 'static
{
    move |r| {
        *last_chunk.lock().unwrap() = tags(&r.messages().cloned().collect::<Vec<_>>());
        if failing.load(Ordering::SeqCst) {
            return std::future::ready(Err("down"));
        }
        let mut out: Vec<String> = r.previous_summary().map(str::to_owned).into_iter().collect();
        out.extend(r.messages().map(|m| m.id.clone().unwrap()));
        std::future::ready(Ok(out.join(" ")))
    }
}

proptest! {
    #![proptest_config(common::cases(128))]

    /// Every message added is in the summary's input, the summary or the
    /// buffer, exactly once and in order (less what a fallback truncation
    /// dropped, counted); tool results stay with their calls; the view is
    /// within the hard limit whenever L0 and the latest unit fit in it.
    #[test]
    fn tiered_memory_loses_nothing_and_keeps_the_hard_limit(
        ops in prop::collection::vec(tiered_op(), 1..60),
        soft in 5usize..60,
        extra in 0usize..60,
        chunk in 1usize..6,
        fallback in any::<bool>(),
        max_failures in 1usize..3,
        system in prop::collection::vec("[a-z]{1,6}( [a-z]{1,6}){0,4}", 0..2),
    ) {
        use chatfold::memory::{TieredMemory, TieredSettings};
        use chatfold::TokenCounter;
        let failing = Arc::new(AtomicBool::new(false));
        let last_chunk = Arc::new(std::sync::Mutex::new(Vec::new()));
        let summarize = tiered_summarizer(failing.clone(), last_chunk.clone());
        let hard = soft + extra;
        let settings = TieredSettings::new(soft, hard)
            .chunk_size(chunk)
            .fallback_truncate(fallback)
            .max_failures(max_failures)
            .counter(words)
            .policy(chatfold::FoldPolicy::new().max_summary_tokens(usize::MAX));
        let l0: Vec<Message> = system.iter().map(Message::system).collect();
        let (mut memory, _) = TieredMemory::new(l0.clone(), settings.clone(), summarize.clone()).unwrap();
        let (mut added, mut next, mut dropped) = (Added::default(), 0usize, Vec::<String>::new());
        for op in ops {
            match op {
                TieredOp::Base(Op::Add(item)) => {
                    for m in tag_all(common::render(&[item]), &mut next) {
                        added.push(&m, &memory.buffer());
                        memory.add_message(m);
                    }
                }
                TieredOp::Base(Op::Clear) => { memory.clear(); added.clear(); dropped.clear(); }
                TieredOp::Base(Op::SaveRestore) => {
                    let json = memory.to_state().to_json_string();
                    let state = State::from_json_str(&json).unwrap();
                    prop_assert_eq!(&state.system, &l0);
                    memory = TieredMemory::from_state(state, settings.clone(), summarize.clone()).unwrap().0;
                }
                TieredOp::Base(Op::SetFailing(on)) => failing.store(on, Ordering::SeqCst),
                TieredOp::Fold => {
                    let before = memory.stats();
                    let result = pollster::block_on(memory.fold_now());
                    prop_assert_eq!(result.is_err(), failing.load(Ordering::SeqCst) && before.folds_pending > 0);
                    let before = before.messages_dropped;
                    let lost = memory.stats().messages_dropped - before;
                    prop_assert!(fallback || lost == 0, "dropped without fallback_truncate");
                    if lost > 0 {
                        let chunk = last_chunk.lock().unwrap().clone();
                        prop_assert_eq!(chunk.len() as u64, lost);
                        dropped.extend(chunk);
                    }
                    if result.is_ok() {
                        prop_assert!(memory.stats().buffer_tokens <= soft || common::last_unit_start(&memory.buffer()) == 0
                            || memory.stats().folds_pending == 0);
                    }
                }
            }
            // Nothing lost: summary + buffer = what was added, less what was dropped.
            let kept: Vec<Message> = added.all.iter().filter(|m| !dropped.contains(m.id.as_ref().unwrap())).cloned().collect();
            let model = Added { joined: added.all.iter().zip(&added.joined).filter(|(m, _)| !dropped.contains(m.id.as_ref().unwrap())).map(|(_, j)| *j).collect(), all: kept };
            model.check(&memory.summary(), &memory.buffer(), true);
            // The view: within the hard limit whenever L0 and the latest unit fit.
            let view = memory.messages();
            let view_tokens = words.reply_priming() + view.iter().map(|m| words.count_message(m)).sum::<usize>();
            prop_assert_eq!(view_tokens, memory.stats().view_tokens);
            prop_assert_eq!(&view[..l0.len()], &l0[..]);
            let buffer = memory.buffer();
            let latest = &buffer[common::last_unit_start(&buffer)..];
            let floor = words.reply_priming()
                + l0.iter().chain(latest).map(|m| words.count_message(m)).sum::<usize>();
            prop_assert!(view_tokens <= hard || floor > hard, "view of {} tokens over the hard limit {}", view_tokens, hard);
            // The view is a suffix of the buffer, after L0 and at most one summary.
            let shown = &view[l0.len()..];
            let summaries = shown.iter().filter(|m| memory.policy().is_summary(m)).count();
            prop_assert!(summaries <= 1);
            prop_assert!(buffer.ends_with(&shown[summaries..]));
        }
    }
}
