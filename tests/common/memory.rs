//! What the memory test targets share: a word counter, a recording
//! summarizer, and small message builders.

use std::cell::RefCell;
use std::convert::Infallible;

use chatfold::{Message, SummaryRequest, ToolCall};

/// Every word counts one token; framing adds none (keeps the arithmetic readable).
pub fn words(text: &str) -> usize {
    text.split_whitespace().count()
}

pub fn texts(messages: &[Message]) -> Vec<String> {
    messages.iter().map(|m| m.text().into_owned()).collect()
}

/// A summarizer that appends the folded texts to the previous summary, and
/// records each call.
pub fn appending(
    calls: &RefCell<Vec<Vec<String>>>,
) -> impl Fn(&SummaryRequest<'_>) -> Result<String, Infallible> + '_ {
    move |r| {
        let folded: Vec<String> = r.messages().map(|m| m.text().into_owned()).collect();
        calls.borrow_mut().push(folded.clone());
        let mut parts: Vec<String> = r.previous_summary().map(str::to_owned).into_iter().collect();
        parts.extend(folded.into_iter().filter(|t| !t.is_empty()));
        Ok(parts.join(" | "))
    }
}

pub fn call(ids: &[&str]) -> Message {
    Message::assistant_tool_calls(ids.iter().map(|id| ToolCall::new(*id, "f", "{}")).collect())
}
