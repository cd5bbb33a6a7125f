//! Reading a message array from a stream: the input is checked as UTF-8 a
//! chunk at a time into a reused text buffer, and the messages that end in
//! the buffer are parsed from there as one array, with serde_json's fast
//! string parser, so the whole input is never held. A long batch (384 KiB
//! or more) is parsed in pieces on up to four threads at once, until a
//! piece fails to parse. A message the buffer cuts, and
//! any batch that does not parse, is read one message at a time.
//! Every error is the one reading the whole input at once gives, at the same
//! line and column.

use std::io::Read;

use serde_json::Value;

use crate::error::{Error, InputError, JsonError, Result};
use crate::history::History;
use crate::message::Message;

/// An array of one valid message so far, standing for the messages read:
/// what comes after it in the input fails as it would after them.
const PLACEHOLDER: &[u8] = br#"[{"role":"user"}"#;
/// The same, and the comma after it.
const PLACEHOLDER_COMMA: &[u8] = br#"[{"role":"user"},"#;

/// An array of valid messages, appended to a vector as they are read (no
/// vector of their own to copy); any other array is an error, and the
/// messages read message by message find it.
struct Append<'v>(&'v mut Vec<Message>);

impl<'de> serde::de::DeserializeSeed<'de> for Append<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> std::result::Result<(), D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Append<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an array of messages")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<(), A::Error> {
        while let Some(crate::message::Read(read)) = seq.next_element()? {
            self.0
                .push(read.map_err(|_| serde::de::Error::custom("not a message"))?);
        }
        Ok(())
    }
}

/// Bytes read at a time.
const CHUNK: usize = 1 << 20;

/// A message nested about this deep is read again inside an array, where
/// serde_json's nesting limit (128) counts the array too.
const DEEP: usize = 120;

/// A reader, and the text read from it but not yet consumed.
struct Input<R> {
    reader: R,
    /// Checked text; `text[at..]` is unconsumed.
    text: String,
    at: usize,
    /// Bytes read after `text`: a character cut by the end of a read.
    raw: Vec<u8>,
    /// Line (from 1) and column (bytes since the line's start) of `text[0]`.
    line: usize,
    column: usize,
    /// Bytes of the input before `text[0]`.
    offset: u64,
    eof: bool,
    /// Invalid UTF-8 was found: that error is the answer.
    broken: bool,
    /// Bytes read at a time (at least; more to finish a long message).
    chunk: usize,
    /// Messages are parsed many at a time (until one such parse fails,
    /// and then again after the next read).
    batches: bool,
    /// How many threads a batch is parsed on.
    split: Split,
}

/// Not UTF-8 from byte `byte` on, at `(line, column)` (the column counted
/// from 0, as [`Input`]'s are).
fn utf8(byte: u64, (line, column): (usize, usize)) -> Error {
    Error::InvalidInput(InputError::NotUtf8 {
        byte,
        line,
        column: column + 1,
    })
}

/// The line and column (from 0) after `bytes`, which start at `(line,
/// column)`.
fn advance((line, column): (usize, usize), bytes: &[u8]) -> (usize, usize) {
    match memchr::memrchr(b'\n', bytes) {
        None => (line, column + bytes.len()),
        Some(last) => (
            line + memchr::memchr_iter(b'\n', bytes).count(),
            bytes.len() - last - 1,
        ),
    }
}

fn io(e: std::io::Error) -> Error {
    Error::InvalidInput(InputError::Io(e))
}

/// Not JSON: the input ends where a message should be.
fn at_end() -> Error {
    Error::InvalidInput(InputError::Json(JsonError::at_end()))
}

impl<R: Read> Input<R> {
    /// Reads and checks more text; whether any came. Invalid UTF-8 is the
    /// answer at once: reading the whole input, it would be the first thing
    /// found wrong.
    fn fill(&mut self) -> Result<bool> {
        if self.eof {
            return Ok(false);
        }
        // The byte before `at` stays: a batch puts its `[` there.
        let done = self.at.saturating_sub(1);
        if done > 0 {
            (self.line, self.column) = self.position_of(done);
            self.offset += done as u64;
            self.text.drain(..done);
            self.at -= done;
        }
        // One buffer, moved between its checked (`String`) and raw forms
        // without copying: the reader's bytes are copied once, and checked
        // once with what was left over.
        let mut bytes = std::mem::take(&mut self.text).into_bytes();
        bytes.append(&mut self.raw);
        // A message longer than a chunk doubles what is read, so that it is
        // parsed again only a logarithmic number of times.
        let want = self.chunk.max(bytes.len());
        bytes.reserve(want);
        let before = bytes.len();
        let read = (&mut self.reader).take(want as u64).read_to_end(&mut bytes);
        self.eof = bytes.len() == before;
        let grown = bytes.len() > before;
        // New text: a batch may parse where the last one did not.
        self.batches |= grown;
        self.text = match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(bad) => {
                let e = bad.utf8_error();
                if e.error_len().is_some() || self.eof {
                    self.broken = true;
                    let valid = e.valid_up_to();
                    let at = advance((self.line, self.column), &bad.as_bytes()[..valid]);
                    return Err(utf8(self.offset + valid as u64, at));
                }
                // A character cut by the end of the read waits for the rest.
                let mut bytes = bad.into_bytes();
                self.raw = bytes.split_off(e.valid_up_to());
                String::from_utf8(bytes).unwrap_or_default()
            }
        };
        read.map_err(io)?;
        Ok(grown)
    }

    /// Line and column of `text[at]`.
    fn position(&self) -> (usize, usize) {
        self.position_of(self.at)
    }

    /// Line and column of `text[i]`.
    fn position_of(&self, i: usize) -> (usize, usize) {
        advance((self.line, self.column), &self.text.as_bytes()[..i])
    }

    /// The messages that start at `text[at]` (a `{`) and end in the text
    /// read so far, parsed as one array, as the whole input would be: one
    /// parser for many messages (several at once for a long batch, see
    /// [`parse_parts`](Self::parse_parts)). `None` (nothing consumed) when
    /// no message ends in the text, or the array does not parse; reading
    /// message by message then finds what is wrong, or goes on to the next
    /// read.
    fn batch(&mut self, messages: &mut Vec<Message>) -> Option<()> {
        if !self.batches {
            return None;
        }
        let end = self.at + ends(&self.text.as_bytes()[self.at..])?;
        let had = messages.len();
        let parts = self.split.parts(end - self.at);
        let parsed = (parts > 1 && self.parse_parts(end, parts, messages).is_some()) || {
            // A guess was wrong (or a piece is bad): this input's batches
            // are parsed whole from now on, each once.
            if parts > 1 {
                self.split.most = 1;
            }
            messages.truncate(had);
            self.parse_array(self.at, end, messages)
        };
        if !parsed {
            messages.truncate(had);
            self.batches = false;
            return None;
        }
        self.consume(end - self.at);
        Some(())
    }

    /// Parses `text[from..end]` (from a message's `{` to just after a
    /// message's `}`) as an array of messages appended to `messages`: `[`
    /// over the byte before `from` (consumed: `[`, `,` or whitespace) and
    /// `]` over the byte at `end`, both put back after. Whether it parsed.
    fn parse_array(&mut self, from: usize, end: usize, messages: &mut Vec<Message>) -> bool {
        let Some(open) = from.checked_sub(1) else {
            return false;
        };
        let (Some(before), Some(after)) = (self.text.get(open..from), self.text.get(end..=end)) else {
            return false;
        };
        let (before, after) = (before.to_owned(), after.to_owned());
        if !after.is_ascii() {
            return false;
        }
        self.text.replace_range(open..from, "[");
        self.text.replace_range(end..=end, "]");
        let parsed = parse_into(&self.text[open..=end], messages);
        self.text.replace_range(open..from, &before);
        self.text.replace_range(end..=end, &after);
        parsed
    }

    /// [`parse_array`](Self::parse_array) of `text[at..end]` in `parts`
    /// pieces at once, the first on this thread, the others copied as
    /// arrays of their own for threads of theirs. Each piece but the last
    /// ends at the last message end ([`ends`]) before its share of the
    /// bytes. A guess there inside a string makes the piece before it fail
    /// to parse; pieces that all parse each start where a message does, so
    /// they are the messages the whole batch gives, in order. `None` when
    /// the pieces cannot be cut, a thread cannot start, or a piece does
    /// not parse (some of its messages may have been appended).
    fn parse_parts(&mut self, end: usize, parts: usize, messages: &mut Vec<Message>) -> Option<()> {
        let (bytes, from) = (self.text.as_bytes(), self.at);
        // Each piece's start (a `{`) and end (just after a `}`).
        let mut pieces = Vec::with_capacity(parts);
        let mut start = from;
        for i in 1..parts {
            let share = from + (end - from) / parts * i;
            let cut = start + ends(bytes.get(start..share)?)?;
            // The `{` that `ends` found after the `,`.
            let next = cut + memchr::memchr(b'{', bytes.get(cut..end)?)?;
            pieces.push((start, cut));
            start = next;
        }
        pieces.push((start, end));
        let copies = pieces[1..]
            .iter()
            .map(|&(start, end)| Some(format!("[{}]", self.text.get(start..end)?)))
            .collect::<Option<Vec<String>>>()?;
        let first_end = pieces[0].1;
        std::thread::scope(|scope| {
            let threads: Vec<_> = (copies.iter())
                .map(|text| std::thread::Builder::new().spawn_scoped(scope, move || parse_copy(text)))
                .collect();
            let mut parsed = self.parse_array(from, first_end, messages);
            for thread in threads {
                // Every thread is joined (a scope's panics are its
                // unjoined threads').
                match thread.map(|t| t.join()) {
                    Ok(Ok(Some(mut more))) if parsed => messages.append(&mut more),
                    _ => parsed = false,
                }
            }
            parsed.then_some(())
        })
    }

    /// Consumes `n` bytes of text.
    fn consume(&mut self, n: usize) {
        self.at += n;
    }

    /// The next byte that is not JSON whitespace, consuming the whitespace.
    fn peek(&mut self) -> Result<Option<u8>> {
        loop {
            let ws = self.text.as_bytes()[self.at..]
                .iter()
                .take_while(|&&b| is_space(b))
                .count();
            self.consume(ws);
            if let Some(&b) = self.text.as_bytes().get(self.at) {
                return Ok(Some(b));
            }
            if !self.fill()? {
                return Ok(None);
            }
        }
    }

    /// Everything not consumed, read to the end and checked.
    fn rest(mut self) -> Result<String> {
        let mut bytes = std::mem::take(&mut self.raw);
        self.reader.read_to_end(&mut bytes).map_err(io)?;
        let start = self.offset + self.text.len() as u64;
        let tail = String::from_utf8(bytes).map_err(|bad| {
            let valid = bad.utf8_error().valid_up_to();
            let end = self.position_of(self.text.len());
            utf8(start + valid as u64, advance(end, &bad.as_bytes()[..valid]))
        })?;
        let mut text = self.text.split_off(self.at);
        text.push_str(&tail);
        Ok(text)
    }

    /// `found`, unless the rest of the input holds invalid UTF-8, which
    /// reading the whole input would have found first.
    fn fail(self, found: Error) -> Error {
        if self.broken {
            return found;
        }
        match self.rest() {
            Ok(_) => found,
            Err(e) => e,
        }
    }
}

/// Appends the messages of `text`, an array of them, to `messages`;
/// whether it is one (some may have been appended when it is not).
fn parse_into(text: &str, messages: &mut Vec<Message>) -> bool {
    let mut de = serde_json::Deserializer::from_str(text);
    serde::de::DeserializeSeed::deserialize(Append(messages), &mut de)
        .and_then(|()| de.end())
        .is_ok()
}

/// The messages of `text`, an array of them, or `None`.
fn parse_copy(text: &str) -> Option<Vec<Message>> {
    let mut messages = Vec::new();
    parse_into(text, &mut messages).then_some(messages)
}

/// How many threads a batch is parsed on: at most `most`, one per `least`
/// bytes (rounded to the nearest), and no more than the machine runs at
/// once.
#[derive(Clone, Copy, Debug)]
struct Split {
    /// Threads at most (1: this one alone).
    most: usize,
    /// Bytes a thread is given at least.
    least: usize,
    /// Threads the machine runs at once; `None`: asked of it, once, when a
    /// batch first is long enough to share.
    machine: Option<usize>,
}

impl Split {
    /// Up to 4 threads, one per quarter MiB (a thread costs tens of
    /// microseconds to start, a quarter MiB a millisecond or two to parse):
    /// batches of 384 KiB or more are shared.
    fn machine() -> Self {
        Split {
            most: 4,
            least: 1 << 18,
            machine: None,
        }
    }

    /// How many pieces a batch of `len` bytes is parsed in: one per
    /// `least` bytes, rounded to the nearest (a batch is a little less than
    /// the bytes read).
    fn parts(self, len: usize) -> usize {
        let least = self.least.max(1);
        let parts = self.most.min(len.saturating_add(least / 2) / least);
        if parts < 2 {
            return 1;
        }
        static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
        let machine = self.machine.unwrap_or_else(|| {
            *THREADS.get_or_init(|| std::thread::available_parallelism().map_or(1, usize::from))
        });
        parts.min(machine)
    }
}

/// JSON's whitespace.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\r' | b'\t')
}

/// Where the last message in `bytes` that another follows ends: the last
/// `}` followed by `,` and `{` (with whitespace between), searched from the
/// end, preferring one where the `{` opens with `"role"` (the usual first
/// key; nested objects in a message, such as tool calls or parts, seldom
/// have it). A guess, which parsing checks: a message array that parses is
/// read as the whole input would read it, wherever the guess put its end.
fn ends(bytes: &[u8]) -> Option<usize> {
    let skip_back = |mut i: usize| {
        while i > 0 && is_space(bytes[i - 1]) {
            i -= 1;
        }
        i
    };
    let opens_with_role = |open: usize| {
        let rest = &bytes[open + 1..];
        let key = rest
            .iter()
            .position(|&b| !is_space(b))
            .map_or(rest, |i| &rest[i..]);
        key.starts_with(b"\"role\"")
    };
    let (mut open, mut first) = (bytes.len(), None);
    while let Some(next) = memchr::memrchr(b'{', &bytes[..open]) {
        open = next;
        let comma = skip_back(open);
        if comma > 0 && bytes[comma - 1] == b',' {
            let close = skip_back(comma - 1);
            if close > 0 && bytes[close - 1] == b'}' {
                if opens_with_role(open) {
                    return Some(close);
                }
                first = first.or(Some(close));
            }
        }
    }
    first
}

/// What parsing `text` (which starts with `prefix` bytes of our own) as a
/// history gives, with positions moved to the input's.
fn as_history(text: &str, prefix: usize, line: usize, column: usize, index: usize) -> Result<History> {
    super::parse_str(text).map_err(|e| match e {
        Error::InvalidMessage { index: i, problem } => Error::InvalidMessage {
            index: index + i,
            problem,
        },
        Error::InvalidInput(InputError::Json(json)) => {
            Error::InvalidInput(InputError::Json(json.moved(prefix, line, column)))
        }
        other => other,
    })
}

/// Reads a history from `reader`: a bare array message by message, anything
/// else (a request body, bad input) whole.
pub(super) fn read(reader: impl Read) -> Result<History> {
    read_in(reader, CHUNK, Split::machine())
}

/// [`read`], `chunk` bytes at a time, batches parsed as `split` says.
fn read_in(reader: impl Read, chunk: usize, split: Split) -> Result<History> {
    let mut input = Input {
        reader,
        text: String::new(),
        at: 0,
        raw: Vec::new(),
        line: 1,
        column: 0,
        offset: 0,
        eof: false,
        broken: false,
        chunk,
        batches: true,
        split,
    };
    // The first byte that is not whitespace, nothing consumed yet.
    let first = loop {
        let bytes = input.text.as_bytes();
        if let Some(i) = bytes.iter().position(|&b| !is_space(b)) {
            break Some(i);
        }
        if !input.fill()? {
            break None;
        }
    };
    match first {
        Some(i) if input.text.as_bytes()[i] == b'[' => input.consume(i + 1),
        _ => return super::parse_str(&input.rest()?),
    }
    let mut messages = Vec::new();
    loop {
        // After `[` or `,`: a message, or (only at the start) `]`.
        match input.peek()? {
            Some(b']') if messages.is_empty() => {
                input.consume(1);
                break;
            }
            Some(b'{') => {}
            Some(_) => return Err(tail(input, b"[", messages.len())),
            None => {
                let prefix: &[u8] = if messages.is_empty() {
                    b"["
                } else {
                    PLACEHOLDER_COMMA
                };
                return Err(tail(input, prefix, messages.len()));
            }
        }
        match input.batch(&mut messages) {
            Some(()) => {}
            None => match element(&mut input, messages.len()) {
                Ok(m) => messages.push(m),
                Err(e) => return Err(input.fail(e)),
            },
        }
        match input.peek()? {
            Some(b',') => {
                input.consume(1);
                if input.peek()? == Some(b']') {
                    return Err(tail(input, PLACEHOLDER_COMMA, messages.len()));
                }
            }
            Some(b']') => {
                input.consume(1);
                break;
            }
            _ => return Err(tail(input, PLACEHOLDER, messages.len())),
        }
    }
    if input.peek()?.is_some() {
        return Err(tail(input, b"[]", messages.len()));
    }
    Ok(History::from(messages))
}

/// The error where the array goes wrong outside a message: what the rest
/// of the input says after `prefix` (an array so far, as parsed), with the
/// `index` of the message it stands for.
fn tail<R: Read>(input: Input<R>, prefix: &[u8], index: usize) -> Error {
    let (line, column) = input.position();
    let rest = match input.rest() {
        Ok(rest) => rest,
        Err(e) => return e,
    };
    let text = format!("{}{rest}", String::from_utf8_lossy(prefix));
    // The placeholder stands for the messages read; the synthetic array's
    // messages are counted from it.
    let first = index.saturating_sub(usize::from(prefix.starts_with(PLACEHOLDER)));
    match as_history(&text, prefix.len(), line, column, first) {
        Err(e) => e,
        Ok(_) => at_end(),
    }
}

/// The message at the current position (a `{`), the array's `index`th.
fn element<R: Read>(input: &mut Input<R>, index: usize) -> Result<Message> {
    let (value, len) = loop {
        let mut values = serde_json::Deserializer::from_str(&input.text[input.at..]).into_iter::<Value>();
        match values.next() {
            Some(Ok(value)) => break (value, values.byte_offset()),
            Some(Err(e)) if e.is_eof() && input.fill()? => {}
            Some(Err(_)) => {
                // Read again inside an array, as the whole input would be
                // (nesting counts the array): the same error, at the same place.
                let (line, column) = input.position();
                let text = format!("[{}", &input.text[input.at..]);
                return Err(match as_history(&text, 1, line, column, index) {
                    Err(e) => e,
                    Ok(_) => at_end(),
                });
            }
            None if input.fill()? => {}
            None => return Err(at_end()),
        }
    };
    let message = if depth(&value) >= DEEP {
        // Read again inside an array: serde_json's nesting limit counts it.
        let text = format!("[{}]", &input.text[input.at..input.at + len]);
        let (line, column) = input.position();
        let history = as_history(&text, 1, line, column, index)?;
        history.messages.into_iter().next()
    } else {
        Some(Message::parse(value).map_err(|problem| Error::InvalidMessage { index, problem })?)
    };
    let message = message.ok_or_else(at_end)?;
    input.consume(len);
    Ok(message)
}

/// How deep `value` nests, counting itself (stopping at [`DEEP`]).
fn depth(value: &Value) -> usize {
    fn below(value: &Value, d: usize) -> usize {
        if d >= DEEP {
            return d;
        }
        let deepest =
            |items: &mut dyn Iterator<Item = &Value>| items.map(|v| below(v, d + 1)).max().unwrap_or(d);
        match value {
            Value::Array(items) => deepest(&mut items.iter()),
            Value::Object(map) => deepest(&mut map.values()),
            _ => d,
        }
    }
    below(value, 1)
}

#[cfg(test)]
mod tests;
