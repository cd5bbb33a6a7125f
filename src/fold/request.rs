//! The request a summarizer gets: the contract between the core and every
//! summarizer, with the view of the folded messages it walks.
//!
//! It sits in the floor, beside the fold that makes it, so that the fold
//! never reaches up to the summarizers, which re-export it.

use std::borrow::Cow;

use crate::count::TokenCounter;
use crate::fold::ledger::LedgerEntry;
use crate::message::Message;

/// What a summarizer is asked to summarize.
///
/// It carries the previous (running) summary, if the history had one, the
/// folded messages in their original order, and the allowance: how many tokens
/// the summary text may take. A longer summary is cut to fit, and the result
/// says so.
///
/// The messages are borrowed from the caller's history; nothing is copied or
/// rendered unless the summarizer asks (see [`transcript`](Self::transcript)).
///
/// # Examples
///
/// ```
/// use chatfold::{Message, SummaryRequest};
///
/// let folded = [Message::user("Book a flight to Seoul."), Message::assistant("For when?")];
/// let request = SummaryRequest::new(Some("The user is planning a trip."), &folded, 200);
/// assert_eq!(request.messages().count(), 2);
/// assert_eq!(
///     request.transcript(),
///     "Previous summary:\nThe user is planning a trip.\n\nConversation:\nuser: Book a flight to Seoul.\nassistant: For when?\n"
/// );
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct SummaryRequest<'a> {
    previous: Option<Cow<'a, str>>,
    messages: Folded<'a>,
    allowance: usize,
    ledger: Cow<'a, [LedgerEntry]>,
    counter: CallerCounter<'a>,
}

/// The counter the caller measures the summary with, when it attached one.
///
/// Requests compare and print without it: it says how to measure, not what
/// is asked.
#[derive(Clone, Copy, Default)]
struct CallerCounter<'a>(Option<&'a (dyn TokenCounter + Sync)>);

impl std::fmt::Debug for CallerCounter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "Some(..)" } else { "None" })
    }
}

impl PartialEq for CallerCounter<'_> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

/// The folded messages: borrowed from the caller (a list, or a slice less
/// some indices, so that nothing proportional to the history is built), or
/// owned by an async request.
#[derive(Clone, Debug, PartialEq)]
enum Folded<'a> {
    Borrowed(Vec<&'a Message>),
    Skipping {
        messages: &'a [Message],
        skip: Vec<usize>,
    },
    Owned(Vec<Message>),
}

impl<'a> SummaryRequest<'a> {
    /// A request over borrowed messages.
    pub fn new(
        previous: Option<&'a str>,
        messages: impl IntoIterator<Item = &'a Message>,
        allowance: usize,
    ) -> Self {
        SummaryRequest {
            previous: previous.map(Cow::Borrowed),
            messages: Folded::Borrowed(messages.into_iter().collect()),
            allowance,
            ledger: Cow::Borrowed(&[]),
            counter: CallerCounter(None),
        }
    }

    /// A request over `messages` but those at the (sorted) indices `skip`.
    pub(crate) fn skipping(
        previous: Option<Cow<'a, str>>,
        messages: &'a [Message],
        skip: Vec<usize>,
        allowance: usize,
    ) -> Self {
        SummaryRequest {
            previous,
            messages: Folded::Skipping { messages, skip },
            allowance,
            ledger: Cow::Borrowed(&[]),
            counter: CallerCounter(None),
        }
    }

    /// The same request with the ledger's entries.
    pub(crate) fn with_ledger(mut self, entries: Cow<'a, [LedgerEntry]>) -> Self {
        self.ledger = entries;
        self
    }

    /// The same request carrying `counter`, the one the caller measures the
    /// summary with (see [`count`](Self::count)).
    pub(crate) fn with_counter(mut self, counter: Option<&'a (dyn TokenCounter + Sync)>) -> Self {
        self.counter = CallerCounter(counter);
        self
    }

    /// The caller's count of `text`, when the request carries its counter:
    /// the tokens `text` takes as the caller measures the summary against
    /// the [`allowance`](Self::allowance). `None` when the caller attached
    /// none (a request made with [`new`](Self::new), or made owned by
    /// [`into_owned`](Self::into_owned)); a summarizer then measures with a
    /// counter of its own.
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::{Message, SummaryRequest};
    ///
    /// let folded = [Message::user("hi")];
    /// assert_eq!(SummaryRequest::new(None, &folded, 50).count("hello"), None);
    /// ```
    pub fn count(&self, text: &str) -> Option<usize> {
        self.counter.0.map(|c| c.count(text))
    }

    /// The identifiers the summary's ledger section will keep verbatim
    /// (newest first, before the room is shared out): an LLM summarizer can
    /// be told they need not be repeated. Each entry is shared with the
    /// compaction's report and the memo of texts read, not copied.
    pub fn ledger(&self) -> &[LedgerEntry] {
        &self.ledger
    }

    /// The running summary the folded messages extend, if any.
    pub fn previous_summary(&self) -> Option<&str> {
        self.previous.as_deref()
    }

    /// The folded messages, oldest first.
    pub fn messages(&self) -> impl ExactSizeIterator<Item = &Message> + DoubleEndedIterator + Clone {
        match &self.messages {
            Folded::Borrowed(v) => FoldedIter::Borrowed(v.iter()),
            Folded::Owned(v) => FoldedIter::Owned(v.iter()),
            Folded::Skipping { messages, skip } => FoldedIter::Skipping {
                messages,
                skip,
                front: 0,
                back: messages.len(),
            },
        }
    }

    /// How many tokens the summary text may take.
    pub fn allowance(&self) -> usize {
        self.allowance
    }

    /// The request as text for a model: the previous summary (if any), then
    /// one `role: text` line per message (tool calls and call ids shown).
    pub fn transcript(&self) -> String {
        let mut out = Vec::new();
        // Writing to a Vec cannot fail, and every piece is UTF-8.
        let _ = self.write_transcript(&mut out);
        String::from_utf8(out).unwrap_or_default()
    }

    /// Writes the [`transcript`](Self::transcript) to `out` line by line,
    /// without building it (a command's standard input, say).
    ///
    /// # Errors
    ///
    /// What writing to `out` fails with.
    pub fn write_transcript(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        if let Some(previous) = &self.previous {
            write!(out, "Previous summary:\n{previous}\n\nConversation:\n")?;
        }
        for m in self.messages() {
            writeln!(out, "{m}")?;
        }
        Ok(())
    }

    /// The same request owning its data, for summarizers that outlive the
    /// caller's borrow (async ones).
    pub fn into_owned(self) -> SummaryRequest<'static> {
        SummaryRequest {
            previous: self.previous.map(|p| Cow::Owned(p.into_owned())),
            messages: match self.messages {
                Folded::Owned(v) => Folded::Owned(v),
                borrowed => {
                    let request = SummaryRequest {
                        previous: None,
                        messages: borrowed,
                        allowance: 0,
                        ledger: Cow::Borrowed(&[]),
                        counter: CallerCounter(None),
                    };
                    Folded::Owned(request.messages().cloned().collect())
                }
            },
            allowance: self.allowance,
            ledger: Cow::Owned(self.ledger.into_owned()),
            counter: CallerCounter(None),
        }
    }
}

/// Iterator over [`Folded`] messages.
#[derive(Clone)]
enum FoldedIter<'r, 'a> {
    Borrowed(std::slice::Iter<'r, &'a Message>),
    Owned(std::slice::Iter<'r, Message>),
    /// `messages[front..back]` less the indices left in `skip`.
    Skipping {
        messages: &'a [Message],
        skip: &'r [usize],
        front: usize,
        back: usize,
    },
}

impl<'r> Iterator for FoldedIter<'r, '_>
where
    Self: 'r,
{
    type Item = &'r Message;

    fn next(&mut self) -> Option<&'r Message> {
        match self {
            FoldedIter::Borrowed(it) => it.next().copied(),
            FoldedIter::Owned(it) => it.next(),
            FoldedIter::Skipping {
                messages,
                skip,
                front,
                back,
            } => {
                while *front < *back {
                    let i = *front;
                    *front += 1;
                    if skip.first() == Some(&i) {
                        *skip = &skip[1..];
                    } else {
                        return messages.get(i);
                    }
                }
                None
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = match self {
            FoldedIter::Borrowed(it) => it.len(),
            FoldedIter::Owned(it) => it.len(),
            FoldedIter::Skipping {
                skip, front, back, ..
            } => (back - front) - skip.len(),
        };
        (n, Some(n))
    }
}

impl DoubleEndedIterator for FoldedIter<'_, '_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        match self {
            FoldedIter::Borrowed(it) => it.next_back().copied(),
            FoldedIter::Owned(it) => it.next_back(),
            FoldedIter::Skipping {
                messages,
                skip,
                front,
                back,
            } => {
                while *back > *front {
                    *back -= 1;
                    let i = *back;
                    if skip.last() == Some(&i) {
                        *skip = &skip[..skip.len() - 1];
                    } else {
                        return messages.get(i);
                    }
                }
                None
            }
        }
    }
}

impl ExactSizeIterator for FoldedIter<'_, '_> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skipping_requests_iterate_both_ways() {
        let h: Vec<Message> = (0..6).map(|i| Message::user(i.to_string())).collect();
        let request = SummaryRequest::skipping(None, &h, vec![0, 2, 5], 10);
        let texts =
            |it: &mut dyn Iterator<Item = &Message>| it.map(|m| m.text().into_owned()).collect::<Vec<_>>();
        assert_eq!(request.messages().len(), 3);
        assert_eq!(texts(&mut request.messages()), ["1", "3", "4"]);
        assert_eq!(texts(&mut request.messages().rev()), ["4", "3", "1"]);
        let mut it = request.messages();
        assert_eq!(it.next().map(|m| m.text().into_owned()).as_deref(), Some("1"));
        assert_eq!(
            it.next_back().map(|m| m.text().into_owned()).as_deref(),
            Some("4")
        );
        assert_eq!(it.len(), 1);
        assert_eq!(
            texts(&mut request.clone().into_owned().messages()),
            ["1", "3", "4"]
        );
    }

    #[test]
    fn the_callers_counter_is_carried_but_not_owned() {
        let h = [Message::user("a b c")];
        let words = |t: &str| t.split_whitespace().count();
        let request = SummaryRequest::new(None, &h, 10);
        assert_eq!(request.count("a b c"), None);
        let request = request.with_counter(Some(&words));
        assert_eq!(request.count("a b c"), Some(3));
        // It measures; it is not part of what is asked.
        assert_eq!(request, SummaryRequest::new(None, &h, 10));
        assert_eq!(request.clone().count("x y"), Some(2));
        assert_eq!(request.into_owned().count("a b c"), None);
    }
}
