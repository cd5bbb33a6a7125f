//! Pinned messages (DESIGN rule 11): which messages a fold keeps verbatim
//! wherever they stand, resolved here once for the compactor and the
//! memories.
//!
//! A pin names a message: the first user turn (the task), the latest user
//! turn (the turn's question, in an agent loop whose last messages are tool
//! calls and results), an index, or a caller's predicate. A user turn here
//! is a `user` message that is not a tool result (Anthropic's `tool_result`
//! blocks) and not a previous summary. A pin on a message that belongs to a
//! tool exchange (a call or a result) pins its whole unit, so that no output
//! holds a call without its results or a result without its call. `system`
//! and `developer` messages are kept already and previous summaries roll
//! forward, so neither is ever pinned.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use crate::error::ConfigError;
use crate::fold::units;
use crate::message::{Message, Role};

/// A caller's test of which messages to pin: called with each message's
/// index and the message.
pub type PinPredicate = Arc<dyn Fn(usize, &Message) -> bool + Send + Sync>;

/// A message a compaction or a memory keeps verbatim wherever it stands
/// (DESIGN rule 11).
///
/// The compactor places a pinned message that stood in the folded part
/// right after the summary, in its order, ahead of the kept turns; one in
/// the kept part stays where it is. Pinned messages count against the
/// budget; when they alone do not fit it, compacting is an error
/// ([`Error::PinnedOverBudget`](crate::Error::PinnedOverBudget)).
///
/// Parsed from its name (`first-user`, `last-user`, or an index), as the
/// CLI's `--pin`, the proxy's `x-chatfold-pin` header and the bindings take
/// it ([`Pin::parse_list`]).
///
/// # Examples
///
/// ```
/// use chatfold::{Compactor, Extractive, Message, Pin};
///
/// let mut history = vec![Message::user("Task: migrate the billing service to Postgres 17.")];
/// for i in 0..40 {
///     history.push(Message::assistant(format!("Step {i} done: moved table t{i}.")));
///     history.push(Message::user(format!("Continue with step {}.", i + 1)));
/// }
/// let compactor = Compactor::new(300).pin(Pin::FirstUser);
/// let result = compactor.compact(&history, &Extractive::new())?;
/// assert!(result.summarized);
/// // The task stands verbatim right after the summary.
/// assert!(compactor.policy.is_summary(&result.messages[0]));
/// assert_eq!(result.messages[1], history[0]);
/// assert_eq!(Pin::parse_list("first-user, last-user, 3")?, [Pin::FirstUser, Pin::LastUser, Pin::Index(3)]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub enum Pin {
    /// The first user turn: the task.
    FirstUser,
    /// The latest user turn: the turn's question.
    LastUser,
    /// The message at this index (in a memory: in its buffer, when the
    /// fold runs; an index past the end pins nothing there).
    Index(usize),
    /// Every message the predicate accepts.
    Matching(PinPredicate),
}

impl Pin {
    /// A pin on every message `predicate` accepts (given its index and the
    /// message).
    pub fn matching(predicate: impl Fn(usize, &Message) -> bool + Send + Sync + 'static) -> Pin {
        Pin::Matching(Arc::new(predicate))
    }

    /// Pins from a comma-separated list of names (`first-user`, `last-user`,
    /// an index); an empty list is no pin.
    ///
    /// # Errors
    ///
    /// [`ConfigError::NotAllowed`] naming the first entry that is none of those.
    pub fn parse_list(list: &str) -> Result<Vec<Pin>, ConfigError> {
        (list.split(','))
            .map(str::trim)
            .filter(|name| !name.is_empty())
            .map(str::parse)
            .collect()
    }
}

impl FromStr for Pin {
    type Err = ConfigError;

    /// `first-user`, `last-user`, or an index.
    fn from_str(name: &str) -> Result<Pin, ConfigError> {
        match name.trim() {
            "first-user" => Ok(Pin::FirstUser),
            "last-user" => Ok(Pin::LastUser),
            n => n.parse().map(Pin::Index).map_err(|_| ConfigError::NotAllowed {
                setting: "pin",
                value: n.to_owned(),
                why: "a pin is first-user, last-user or a message's index",
            }),
        }
    }
}

impl fmt::Debug for Pin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pin::FirstUser => f.write_str("FirstUser"),
            Pin::LastUser => f.write_str("LastUser"),
            Pin::Index(i) => f.debug_tuple("Index").field(i).finish(),
            Pin::Matching(_) => f.write_str("Matching(..)"),
        }
    }
}

impl fmt::Display for Pin {
    /// Its name, as [`FromStr`] reads it (`matching` for a predicate).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pin::FirstUser => f.write_str("first-user"),
            Pin::LastUser => f.write_str("last-user"),
            Pin::Index(i) => write!(f, "{i}"),
            Pin::Matching(_) => f.write_str("matching"),
        }
    }
}

impl PartialEq for Pin {
    /// Two predicates are equal when they are the same one.
    fn eq(&self, other: &Pin) -> bool {
        match (self, other) {
            (Pin::FirstUser, Pin::FirstUser) | (Pin::LastUser, Pin::LastUser) => true,
            (Pin::Index(a), Pin::Index(b)) => a == b,
            (Pin::Matching(a), Pin::Matching(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

/// Whether `m` is a user turn a pin may name: a `user` message that is not
/// a tool result.
fn is_user_turn(m: &Message) -> bool {
    m.role == Role::User && !m.is_response()
}

/// What a resolution does with an index past the end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Past {
    /// An error (a compaction: the caller named a message it does not have).
    Refused,
    /// Nothing is pinned (a memory's buffer, which grows).
    Ignored,
}

/// The indices `pins` name in `messages`, ascending, each tool exchange
/// whole; never one `excluded` says is kept otherwise (a `system` message,
/// a previous summary). `callers` lists the messages that make calls. Costs
/// a pass over the messages only for a predicate or a pin inside a tool
/// exchange; the first and latest user turns are found from their ends.
///
/// # Errors
///
/// An index past the end, with [`Past::Refused`].
pub(crate) fn resolve(
    messages: &[Message],
    pins: &[Pin],
    callers: &[usize],
    excluded: impl Fn(usize) -> bool,
    past: Past,
) -> Result<Vec<usize>, ConfigError> {
    if pins.is_empty() {
        return Ok(Vec::new());
    }
    let eligible = |i: usize| !excluded(i) && !messages[i].role.is_pinned();
    let user_turn = |&i: &usize| eligible(i) && is_user_turn(&messages[i]);
    let mut named = Vec::new();
    for pin in pins {
        match pin {
            Pin::FirstUser => named.extend((0..messages.len()).find(user_turn)),
            Pin::LastUser => named.extend((0..messages.len()).rev().find(user_turn)),
            &Pin::Index(i) if i < messages.len() => named.push(i),
            &Pin::Index(i) => match past {
                Past::Ignored => {}
                Past::Refused => {
                    return Err(ConfigError::TooLarge {
                        setting: "pin",
                        value: i,
                        max: messages.len().saturating_sub(1),
                        limit: Some("last message's index"),
                    });
                }
            },
            Pin::Matching(accepts) => named.extend((0..messages.len()).filter(|&i| accepts(i, &messages[i]))),
        }
    }
    named.retain(|&i| eligible(i));
    named.sort_unstable();
    named.dedup();
    // A call, a result or the reasoning before one takes its whole unit.
    let exchange = |i: usize| {
        let m = &messages[i];
        m.makes_calls() || m.role == Role::Tool || m.answered_ids().next().is_some() || m.leads_in()
    };
    let mut loose: Vec<usize> = named.iter().copied().filter(|&i| exchange(i)).collect();
    if !loose.is_empty() {
        for unit in units::Backward::new(messages, callers, 0) {
            let inside = loose.iter().any(|i| unit.contains(i));
            if inside && unit.len() > 1 {
                named.extend(unit.clone().filter(|&i| eligible(i)));
            }
            loose.retain(|i| !unit.contains(i));
            if loose.is_empty() {
                break;
            }
        }
        named.sort_unstable();
        named.dedup();
    }
    Ok(named)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolCall;

    fn resolved(messages: &[Message], pins: &[Pin]) -> Vec<usize> {
        let callers = units::callers(messages);
        resolve(messages, pins, &callers, |_| false, Past::Refused).unwrap()
    }

    #[test]
    fn names_parse_and_print_back() {
        for name in ["first-user", "last-user", "0", "17"] {
            assert_eq!(name.parse::<Pin>().unwrap().to_string(), name);
        }
        assert!(Pin::parse_list(" , ").unwrap().is_empty());
        let err = Pin::parse_list("first-user,task").unwrap_err();
        assert!(err.to_string().contains("pin cannot be task"), "{err}");
        assert!(Pin::parse_list("-1").is_err());
    }

    #[test]
    fn user_turns_skip_results_system_messages_and_the_excluded() {
        let h = [
            Message::system("s"),
            Message::assistant_tool_calls(vec![ToolCall::new("c1", "f", "{}")]),
            Message::tool("r", "c1"),
            Message::user("task"),
            Message::assistant("a"),
            Message::user("question"),
            Message::assistant_tool_calls(vec![ToolCall::new("c2", "f", "{}")]),
            Message::tool("r2", "c2"),
        ];
        assert_eq!(resolved(&h, &[Pin::FirstUser]), [3]);
        assert_eq!(resolved(&h, &[Pin::LastUser, Pin::FirstUser]), [3, 5]);
        assert_eq!(
            resolved(&h, &[Pin::Index(0)]),
            Vec::<usize>::new(),
            "system: kept already"
        );
        let callers = units::callers(&h);
        let skip_task = resolve(&h, &[Pin::FirstUser], &callers, |i| i == 3, Past::Refused).unwrap();
        assert_eq!(skip_task, [5]);
    }

    #[test]
    fn a_pin_in_a_tool_exchange_takes_its_unit() {
        let h = [
            Message::user("go"),
            Message::assistant_tool_calls(vec![ToolCall::new("a", "f", "{}"), ToolCall::new("b", "g", "{}")]),
            Message::tool("ra", "a"),
            Message::tool("rb", "b"),
            Message::user("next"),
        ];
        assert_eq!(resolved(&h, &[Pin::Index(3)]), [1, 2, 3]);
        assert_eq!(resolved(&h, &[Pin::matching(|_, m| m.makes_calls())]), [1, 2, 3]);
        assert_eq!(resolved(&h, &[Pin::Index(4)]), [4]);
    }

    #[test]
    fn an_index_past_the_end_is_refused_or_ignored() {
        let h = [Message::user("x")];
        let err = resolve(&h, &[Pin::Index(1)], &[], |_| false, Past::Refused).unwrap_err();
        assert!(err.to_string().starts_with("pin (1) must be at most 0"), "{err}");
        assert_eq!(
            resolve(&h, &[Pin::Index(1)], &[], |_| false, Past::Ignored).unwrap(),
            Vec::<usize>::new()
        );
        assert_eq!(
            resolve(&[], &[Pin::LastUser], &[], |_| false, Past::Refused).unwrap(),
            Vec::<usize>::new()
        );
    }
}
