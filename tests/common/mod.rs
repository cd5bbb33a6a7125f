//! Generated histories for property tests, and independent checks of the
//! rules (written from DESIGN.md, not from the library's code).
#![allow(dead_code)]

use chatfold::{Message, Part, Role, ToolCall};
use proptest::prelude::*;

pub mod fake_llm;
pub mod rules;
#[allow(unused_imports)]
pub use rules::*;

/// One step of a generated conversation.
#[derive(Clone, Debug)]
pub enum Item {
    System(String),
    Developer(String),
    User(String),
    UserParts(Vec<String>),
    Assistant(String),
    AssistantNull,
    Custom(String, String),
    /// An assistant turn calling `calls` tools; results for `answered` of
    /// them (indices, in that order), with `interleave` after the first result.
    Tools {
        calls: usize,
        answered: Vec<usize>,
        interleave: Option<Box<Item>>,
    },
    Orphan(String),
}

pub fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z]{1,8}( [a-z]{1,8}){0,12}[.!?]?",
        1 => identifier_text(),
        1 => "[日本語ébç🙂 ]{1,20}",
        1 => "",
        1 => "[a-z ]{40,200}",
    ]
}

/// An identifier of one of the ledger's classes.
pub fn identifier() -> impl Strategy<Value = String> {
    prop_oneof![
        "/[a-z]{1,6}/[a-z]{1,6}/[a-z]{1,6}\\.(log|csv|json)",
        "[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}",
        "https://[a-z]{3,8}\\.example\\.com/[a-z]{1,6}/[0-9]{1,4}",
        "[A-Z]{2,5}-[0-9]{2,5}",
        "10\\.[1-9][0-9]?\\.[1-9][0-9]?\\.[1-9][0-9]?:[1-9][0-9]{3}",
        "v[0-9]\\.[0-9]{1,2}\\.[0-9]{1,2}",
        "[a-z]{3,8}@[a-z]{3,8}\\.io",
        "[0-9a-f]{12}[0-9][a-f]",
    ]
}

/// A sentence holding identifiers.
pub fn identifier_text() -> impl Strategy<Value = String> {
    (
        "[a-z]{1,8}( [a-z]{1,8}){0,4}",
        prop::collection::vec(identifier(), 1..3),
    )
        .prop_map(|(words, ids)| format!("{words} {} done.", ids.join(" and ")))
}

fn leaf() -> impl Strategy<Value = Item> {
    prop_oneof![
        1 => text().prop_map(Item::System),
        1 => text().prop_map(Item::Developer),
        8 => text().prop_map(Item::User),
        1 => prop::collection::vec(text(), 0..3).prop_map(Item::UserParts),
        6 => text().prop_map(Item::Assistant),
        1 => Just(Item::AssistantNull),
        1 => ("[a-z]{3,6}", text()).prop_map(|(r, t)| Item::Custom(r, t)),
        1 => text().prop_map(Item::Orphan),
    ]
}

pub fn item() -> impl Strategy<Value = Item> {
    prop_oneof![
        6 => leaf(),
        3 => (1usize..4, prop::collection::vec(0usize..4, 0..5), prop::option::of(leaf()))
            .prop_map(|(calls, answered, interleave)| Item::Tools {
                answered: answered.into_iter().filter(|&i| i < calls).collect(),
                calls,
                interleave: interleave.map(Box::new),
            }),
    ]
}

/// Renders items as messages, with unique call ids.
pub fn render(items: &[Item]) -> Vec<Message> {
    let mut out = Vec::new();
    let mut next_id = 0usize;
    for item in items {
        render_one(item, &mut out, &mut next_id);
    }
    out
}

fn render_one(item: &Item, out: &mut Vec<Message>, next_id: &mut usize) {
    match item {
        Item::System(t) => out.push(Message::system(t.clone())),
        Item::Developer(t) => out.push(Message::developer(t.clone())),
        Item::User(t) => out.push(Message::user(t.clone())),
        Item::UserParts(ts) => {
            let mut parts: Vec<Part> = ts.iter().map(|t| Part::text(t.clone())).collect();
            parts.push(Part::from_json(
                serde_json::json!({"type": "image_url", "image_url": {"url": "https://x/y.png"}}),
            ));
            out.push(Message::user("").with_parts(parts));
        }
        Item::Assistant(t) => out.push(Message::assistant(t.clone())),
        Item::AssistantNull => {
            let mut m = Message::assistant("");
            m.content = None;
            out.push(m);
        }
        Item::Custom(role, t) => out.push(Message::new(Role::from(role.as_str()), t.clone())),
        Item::Orphan(t) => {
            *next_id += 1;
            out.push(Message::tool(t.clone(), format!("orphan{next_id}")));
        }
        Item::Tools {
            calls,
            answered,
            interleave,
        } => {
            let ids: Vec<String> = (0..*calls)
                .map(|_| {
                    *next_id += 1;
                    format!("call_{next_id}")
                })
                .collect();
            let tool_calls = ids
                .iter()
                .map(|id| ToolCall::new(id.clone(), "lookup", format!(r#"{{"q":"{id}"}}"#)))
                .collect();
            out.push(Message::assistant_tool_calls(tool_calls));
            for (k, &i) in answered.iter().enumerate() {
                out.push(Message::tool(format!("result for {}", ids[i]), ids[i].clone()));
                if k == 0 {
                    if let Some(extra) = interleave {
                        render_one(extra, out, next_id);
                    }
                }
            }
        }
    }
}

pub fn history(max_items: usize) -> impl Strategy<Value = Vec<Message>> {
    prop::collection::vec(item(), 0..max_items).prop_map(|items| render(&items))
}

/// `cases` property-test cases, or `PROPTEST_CASES` when set (for long local runs).
pub fn cases(cases: u32) -> proptest::test_runner::Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    proptest::test_runner::Config::with_cases(cases)
}
