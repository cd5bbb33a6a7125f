//! What the fuzz targets check: DESIGN.md's rules on every successful result
//! (`chatfold::testing`, the same checks as the property tests), and nothing lost
//! by the memories.

use std::cell::Cell;
use std::convert::Infallible;

use chatfold::memory::{
    AsyncRemember, AsyncRollingMemory, AsyncSummaryMemory, BufferMemory, Memory, Remember, RollingMemory,
    Settings, State, SummaryMemory, WindowMemory,
};
use chatfold::{Compactor, FoldPolicy, Heuristic, Message, Ready, SummaryRequest, ToolCall};

use chatfold::testing::{compact_checked, last_unit_start};

/// Compacts and checks every rule (`chatfold::testing`), panicking with what broke.
fn check_rules<C: chatfold::TokenCounter>(c: &Compactor<C>, h: &[Message], summary: &str) {
    if let Err(violations) = compact_checked(c, h, summary) {
        panic!("{violations}");
    }
}

/// Target `compact`: the first four bytes set the budget and the summary,
/// the rest is read as a JSON history. Whether it was one.
pub fn fuzz_compact(data: &[u8]) -> bool {
    let (config, rest) = data.split_at(data.len().min(4));
    let budget = config.first().map_or(64, |&b| usize::from(b) * 4 + 1);
    let length = usize::from(config.get(1).copied().unwrap_or(3)) * 3;
    let summary: String = String::from_utf8_lossy(config)
        .chars()
        .cycle()
        .take(length)
        .collect();
    let Ok(history) = chatfold::History::from_reader(rest) else {
        return false;
    };
    check_compaction(&history.messages, budget, &summary);
    true
}

/// Target `state`: the bytes are read as saved state. Whether they were one.
pub fn fuzz_state(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let Ok(state) = State::from_json_str(text) else {
        return false;
    };
    check_state(state);
    true
}

/// Compacts `messages` with each counter, strict and not, and checks the rules.
pub fn check_compaction(messages: &[Message], budget: usize, summary: &str) {
    let bytes = |t: &str| t.len();
    for strict in [false, true] {
        let base = Compactor::new(budget).strict(strict);
        check_rules(&base.clone().counter(Heuristic), messages, summary);
        check_rules(&base.clone().counter(bytes), messages, summary);
        #[cfg(feature = "tiktoken")]
        {
            let size: usize = messages.iter().map(|m| m.to_json().to_string().len()).sum();
            if size < 8_192 {
                let o200k = chatfold::Tiktoken::o200k_base().expect("bundled encoder");
                check_rules(&base.counter(o200k), messages, summary);
            }
        }
    }
}

fn fixed(_: &SummaryRequest<'_>) -> Result<String, Infallible> {
    Ok("summary".to_owned())
}

/// Loads `state` in every strategy: restoring changes nothing; an add and a
/// save give a state that loads again, unchanged.
pub fn check_state(state: State) {
    let round_trip = |s: State| {
        let again = State::from_json_str(&s.to_json_string()).expect("saved state loads");
        assert_eq!(
            State::from_json_str(&again.to_json_string()).expect("loads twice"),
            again
        );
    };
    let new = Message::user("one more");
    let mut rolling =
        RollingMemory::from_state(state.clone(), Settings::new(50).summarizer(fixed)).expect("config");
    assert_eq!(rolling.to_state(), state);
    let _ = rolling.add_message(new.clone());
    round_trip(rolling.to_state());
    let mut buffer = BufferMemory::from_state(state.clone());
    buffer.add_message(new.clone()).expect("buffer add");
    assert_eq!(buffer.buffer().len(), state.buffer.len() + 1);
    round_trip(buffer.to_state());
    let mut window = WindowMemory::from_state(state.clone(), 3).expect("config");
    window.add_message(new.clone()).expect("window add");
    round_trip(window.to_state());
    let mut summary = SummaryMemory::from_state(state.clone(), fixed);
    summary.add_message(new.clone()).expect("summary add");
    assert!(summary.buffer().is_empty());
    let rolling = AsyncRollingMemory::from_state(state.clone(), Settings::new(50).summarizer(Ready(fixed)))
        .expect("config");
    assert_eq!(rolling.to_state(), state);
    let _ = pollster::block_on(rolling.add_message(new.clone()));
    round_trip(rolling.to_state());
    let summary = AsyncSummaryMemory::from_state(state, Ready(fixed));
    pollster::block_on(summary.add_message(new)).expect("summary add");
}

/// Runs the operations encoded in `data` on a rolling and a window memory,
/// checking after each that nothing was lost (rolling: summary + buffer hold
/// every message since the last clear, once, in order; window: the buffer is a
/// suffix of them) and the bounds hold.
pub fn fuzz_memory_ops(data: &[u8]) -> bool {
    let Some((&first, ops)) = data.split_first() else {
        return false;
    };
    let max_tokens = usize::from(first) + 1;
    let max_messages = usize::from(first % 16) + 1;
    let failing = Cell::new(false);
    let summarize = |r: &SummaryRequest<'_>| {
        if failing.get() {
            return Err("down");
        }
        let mut tags: Vec<String> = r.previous_summary().map(str::to_owned).into_iter().collect();
        tags.extend(r.messages().map(|m| m.id.clone().unwrap_or_default()));
        Ok(tags.join(" "))
    };
    let words = |t: &str| t.split_whitespace().count();
    // The summary lists every folded tag, so it is never cut here.
    let settings = || {
        Settings::new(max_tokens)
            .summarizer(summarize)
            .counter(words)
            .policy(FoldPolicy::new().max_summary_tokens(usize::MAX))
    };
    let mut rolling = RollingMemory::new(settings()).expect("config");
    let mut window = WindowMemory::new(max_messages).expect("config");
    let mut added: Vec<String> = Vec::new();
    let mut next = 0usize;
    let mut open_calls: Vec<String> = Vec::new();
    for &op in ops {
        next += 1;
        let tag = format!("m{next}");
        let text = "w ".repeat(usize::from(op >> 3));
        let message = match op & 7 {
            0 => Some(Message::user(text)),
            1 => Some(Message::assistant(text)),
            2 => {
                open_calls.push(format!("c{next}"));
                Some(Message::assistant_tool_calls(vec![ToolCall::new(
                    format!("c{next}"),
                    "f",
                    text,
                )]))
            }
            3 => Some(Message::tool(
                text,
                open_calls.pop().unwrap_or_else(|| "orphan".into()),
            )),
            4 => Some(Message::system(text)),
            5 => {
                rolling.clear();
                window.clear();
                added.clear();
                None
            }
            6 => {
                let saved = rolling.to_state().to_json_string();
                let state = State::from_json_str(&saved).expect("saved state loads");
                rolling = RollingMemory::from_state(state, settings()).expect("config");
                let saved = window.to_state().to_json_string();
                window = WindowMemory::from_state(State::from_json_str(&saved).expect("loads"), max_messages)
                    .expect("config");
                None
            }
            _ => {
                failing.set(!failing.get());
                None
            }
        };
        if let Some(message) = message {
            let message = message.with_id(tag.clone());
            added.push(tag);
            let ok = rolling.add_message(message.clone()).is_ok();
            assert!(ok || failing.get(), "an add failed with a working summarizer");
            window.add_message(message).expect("window add");
            if ok {
                let buffer = rolling.buffer();
                let kept: usize = buffer
                    .iter()
                    .map(|m| chatfold::TokenCounter::count_message(&words, m))
                    .sum();
                assert_eq!(kept, rolling.buffer_tokens());
                assert!(
                    kept <= max_tokens || last_unit_start(&buffer) == 0,
                    "over budget beyond the latest unit"
                );
            }
        }
        let mut seen: Vec<String> = rolling.summary().split_whitespace().map(str::to_owned).collect();
        seen.extend(rolling.buffer().iter().map(|m| m.id.clone().unwrap_or_default()));
        assert_eq!(seen, added, "rolling memory lost or duplicated a message");
        let window_tags: Vec<String> = window
            .buffer()
            .iter()
            .map(|m| m.id.clone().unwrap_or_default())
            .collect();
        assert!(
            added.ends_with(&window_tags),
            "window is not a suffix of what was added"
        );
        let buffer = window.buffer();
        assert!(buffer.len() <= max_messages || last_unit_start(&buffer) == 0);
    }
    true
}
