//! Atomic units and aligned cuts: where a history may be cut, written once.
//!
//! A *unit* is a run of messages that is kept or dropped whole:
//!
//! - an assistant message with `tool_calls`, every `tool` message that answers
//!   one of its calls, and everything between them (interleaved messages, and
//!   other tool exchanges that overlap it, transitively);
//! - any other message on its own, including an *orphan* result (a `tool`
//!   message whose `tool_call_id` no earlier call has).
//!
//! A result answers the nearest earlier call with its id, so a reused id
//! starts a new exchange. A call nobody answers ends its unit at itself.
//!
//! A *cut* keeps a suffix of whole units. It is *aligned* when the first
//! non-pinned message it keeps is not response-like (an assistant turn, or a
//! tool result: a `tool` message or any message with a `tool_call_id`): Anthropic requires a user turn first, OpenAI rejects a tool
//! result without its call. When the suffix chosen by size opens with a
//! response-like turn, the cut moves forward to the next unit that does not,
//! if there is one; if every later head is response-like it stays put.
//!
//! The compactor and every memory strategy cut through [`cut`].

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::ops::Range;

use crate::message::{Message, Role};

/// The units of `messages`, in order, covering every index once.
pub(crate) fn units(messages: &[Message]) -> Vec<Range<usize>> {
    // end[i]: the last message that answers a call made by message i.
    let mut end: Vec<usize> = (0..messages.len()).collect();
    let mut caller: HashMap<&str, usize, BuildHasherDefault<Fnv>> = HashMap::default();
    for (j, m) in messages.iter().enumerate() {
        if m.role == Role::Tool {
            if let Some(&i) = m.tool_call_id.as_deref().and_then(|id| caller.get(id)) {
                end[i] = j;
            }
        }
        for call in &m.tool_calls {
            caller.insert(call.id.as_str(), j);
        }
    }
    let mut out = Vec::new();
    let mut start = 0;
    while start < messages.len() {
        let mut reach = end[start];
        let mut j = start;
        while j <= reach {
            reach = reach.max(end[j]);
            j += 1;
        }
        out.push(start..j);
        start = j;
    }
    out
}

/// FNV-1a: tool call ids are short and not attacker-chosen keys that need
/// SipHash's protection here (the map lives for one scan).
#[derive(Default)]
struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 { 0xcbf2_9ce4_8422_2325 } else { self.0 };
        for &b in bytes {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}

/// An assistant turn or a tool result (any message answering a call, as
/// rollmem counts it): a turn that must not open a history.
pub(crate) fn is_response_like(message: &Message) -> bool {
    matches!(message.role, Role::Assistant | Role::Tool) || message.tool_call_id.is_some()
}

/// Whether keeping `messages[start..]` opens (after pinned messages) with a
/// response-like turn.
fn opens_with_response(messages: &[Message], start: usize) -> bool {
    messages[start..]
        .iter()
        .find(|m| !m.role.is_pinned())
        .is_some_and(is_response_like)
}

/// Why the cut stopped where it did, before alignment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// The next older unit did not fit the limit.
    Limit,
    /// Every unit is kept.
    Start,
}

/// A cut: keep `messages[start..]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Cut {
    /// First kept index.
    pub start: usize,
    /// Why the walk back stopped.
    pub stop: Stop,
    /// Where the cut was before alignment moved it forward, if it did.
    pub aligned_from: Option<usize>,
}

/// Cuts `messages` (split into `units`) by walking back from the end.
///
/// The latest unit is always kept. Each older unit is offered to `fits`,
/// newest first; the walk stops at the first one it refuses. The cut is then
/// aligned (see the module docs).
pub(crate) fn cut(
    messages: &[Message],
    units: &[Range<usize>],
    mut fits: impl FnMut(Range<usize>) -> bool,
) -> Cut {
    let Some((last, older)) = units.split_last() else {
        return Cut {
            start: 0,
            stop: Stop::Start,
            aligned_from: None,
        };
    };
    let mut start = last.start;
    let mut stop = Stop::Start;
    for unit in older.iter().rev() {
        if !fits(unit.clone()) {
            stop = Stop::Limit;
            break;
        }
        start = unit.start;
    }
    let mut aligned_from = None;
    if opens_with_response(messages, start) {
        let first_later = units.partition_point(|u| u.start <= start);
        let later = units[first_later..].iter().map(|u| u.start);
        if let Some(better) = later.into_iter().find(|&s| !opens_with_response(messages, s)) {
            aligned_from = Some(start);
            start = better;
        }
    }
    Cut {
        start,
        stop,
        aligned_from,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolCall;

    fn call(ids: &[&str]) -> Message {
        Message::assistant_tool_calls(ids.iter().map(|id| ToolCall::new(*id, "f", "{}")).collect())
    }

    fn ranges(messages: &[Message]) -> Vec<(usize, usize)> {
        units(messages).into_iter().map(|r| (r.start, r.end)).collect()
    }

    #[test]
    fn plain_messages_are_single_units() {
        let h = [Message::user("a"), Message::assistant("b"), Message::user("c")];
        assert_eq!(ranges(&h), [(0, 1), (1, 2), (2, 3)]);
        assert!(units(&[]).is_empty());
    }

    #[test]
    fn call_with_several_results_is_one_unit() {
        let h = [
            Message::user("q"),
            call(&["a", "b", "c"]),
            Message::tool("1", "a"),
            Message::tool("2", "b"),
            Message::tool("3", "c"),
            Message::assistant("done"),
        ];
        assert_eq!(ranges(&h), [(0, 1), (1, 5), (5, 6)]);
    }

    #[test]
    fn interleaved_messages_join_the_unit() {
        let h = [
            call(&["a", "b"]),
            Message::tool("1", "a"),
            Message::system("note"),
            Message::user("hurry"),
            Message::tool("2", "b"),
            Message::user("next"),
        ];
        assert_eq!(ranges(&h), [(0, 5), (5, 6)]);
    }

    #[test]
    fn overlapping_exchanges_merge() {
        let h = [
            call(&["a"]),
            call(&["b"]),
            Message::tool("1", "a"),
            Message::tool("2", "b"),
            Message::user("x"),
        ];
        assert_eq!(ranges(&h), [(0, 4), (4, 5)]);
    }

    #[test]
    fn orphans_and_unanswered_calls_stand_alone() {
        let h = [
            Message::tool("lost", "zzz"),
            call(&["a"]),
            Message::user("never answered"),
            Message::tool("before its call", "b"),
            call(&["b"]),
        ];
        assert_eq!(ranges(&h), [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)]);
    }

    #[test]
    fn reused_id_answers_the_nearest_call() {
        let h = [
            call(&["x"]),
            Message::tool("1", "x"),
            Message::user("again"),
            call(&["x"]),
            Message::tool("2", "x"),
        ];
        assert_eq!(ranges(&h), [(0, 2), (2, 3), (3, 5)]);
    }

    fn cut_by_count(messages: &[Message], keep: usize) -> Cut {
        let units = units(messages);
        let mut kept = units.last().map_or(0, |u| u.len());
        cut(messages, &units, |u| {
            kept += u.len();
            kept <= keep
        })
    }

    #[test]
    fn latest_unit_is_kept_even_over_the_limit() {
        let h = [Message::user("a"), call(&["a"]), Message::tool("r", "a")];
        let c = cut_by_count(&h, 0);
        assert_eq!(c.start, 1);
        assert_eq!(c.stop, Stop::Limit);
    }

    #[test]
    fn alignment_moves_past_response_like_heads() {
        let h = [
            Message::user("u1"),
            Message::assistant("a1"),
            Message::assistant("a2"),
            call(&["t"]),
            Message::tool("r", "t"),
            Message::user("u2"),
            Message::assistant("a3"),
        ];
        // By count the cut would keep from a2; alignment moves it to u2.
        let c = cut_by_count(&h, 5);
        assert_eq!((c.start, c.aligned_from), (5, Some(2)));
    }

    #[test]
    fn alignment_is_skipped_when_no_later_head_is_user_led() {
        let h = [
            Message::user("u1"),
            Message::assistant("a1"),
            Message::assistant("a2"),
            Message::assistant("a3"),
        ];
        let c = cut_by_count(&h, 2);
        assert_eq!((c.start, c.aligned_from), (2, None));
    }

    #[test]
    fn alignment_looks_past_pinned_messages() {
        let h = [
            Message::user("u1"),
            Message::system("s"),
            Message::assistant("a1"),
            Message::user("u2"),
            Message::assistant("a2"),
        ];
        let c = cut_by_count(&h, 4);
        assert_eq!((c.start, c.aligned_from), (3, Some(1)));
        // A pinned message followed by a user turn is a fine opening.
        let h = [Message::assistant("a"), Message::system("s"), Message::user("u")];
        assert_eq!(cut_by_count(&h, 2).start, 1);
    }

    #[test]
    fn orphan_heads_are_aligned_away() {
        let h = [
            Message::user("u1"),
            Message::tool("orphan", "nope"),
            Message::user("u2"),
        ];
        let c = cut_by_count(&h, 2);
        assert_eq!((c.start, c.aligned_from), (2, Some(1)));
    }
}
