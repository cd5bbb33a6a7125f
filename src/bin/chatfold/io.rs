//! Input and output: reading the history (a file, or `-` or nothing for
//! standard input), keeping a copy of standard input to give an unchanged
//! input back byte for byte, and writing standard output and files.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use chatfold::{Format, History};

use crate::flags::InputArgs;
use crate::messages;
use crate::{Failure, exit};

/// The input, read message by message, and how to give it back unchanged.
pub(crate) struct Input {
    /// The history as read (and converted to `--format`, if given).
    pub(crate) history: History,
    /// Where it came from.
    source: Source,
}

/// Where the input came from, to write it back byte for byte.
enum Source {
    /// A file, read again when needed.
    File(PathBuf),
    /// Standard input, as read, unless it was longer than [`KEEP_STDIN`].
    Stdin(Option<Vec<u8>>),
}

/// The most standard input kept to write back unchanged; a longer input under
/// budget is written back as equivalent JSON instead.
const KEEP_STDIN: usize = 8 << 20;

/// Passes bytes through, keeping a copy of the first [`KEEP_STDIN`].
struct Keep<R> {
    /// The reader.
    inner: R,
    /// What was read so far, until it grows past [`KEEP_STDIN`].
    copy: Option<Vec<u8>>,
}

impl<R: Read> Read for Keep<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if let Some(copy) = &mut self.copy {
            if copy.len() + n > KEEP_STDIN {
                self.copy = None;
            } else {
                copy.extend_from_slice(&buf[..n]);
            }
        }
        Ok(n)
    }
}

/// The file INPUT names, or `None` for standard input (no INPUT, or `-`).
fn path(args: &InputArgs) -> Option<&Path> {
    args.input.as_deref().filter(|p| p.as_os_str() != "-")
}

/// Reads the history the flags name, in the format they name.
pub(crate) fn read_input(args: &InputArgs) -> Result<Input, Failure> {
    let format = args.format.as_deref().map(str::parse::<Format>).transpose()?;
    let mut input = read_from(path(args))?;
    input.history = in_format(input.history, format)?;
    Ok(input)
}

/// Reads the history from `path`, or standard input for `None`.
fn read_from(path: Option<&Path>) -> Result<Input, Failure> {
    match path {
        Some(p) => {
            let file = std::fs::File::open(p)
                .map_err(|e| Failure::new(exit::BAD_INPUT, messages::cannot_read(p, e)))?;
            Ok(Input {
                history: History::from_reader(file)?,
                source: Source::File(p.to_owned()),
            })
        }
        None => {
            let mut stdin = Keep {
                inner: std::io::stdin().lock(),
                copy: Some(Vec::new()),
            };
            let history = History::from_reader(&mut stdin)?;
            Ok(Input {
                history,
                source: Source::Stdin(stdin.copy),
            })
        }
    }
}

/// The input as it came, for an unchanged result.
pub(crate) fn unchanged(input: &Input, pretty: bool) -> Result<Vec<u8>, Failure> {
    match &input.source {
        Source::File(path) => {
            std::fs::read(path).map_err(|e| Failure::new(exit::BAD_INPUT, messages::cannot_read(path, e)))
        }
        Source::Stdin(Some(bytes)) => Ok(bytes.clone()),
        Source::Stdin(None) => to_json(&input.history.to_json(), pretty),
    }
}

/// Writes `bytes` to standard output.
pub(crate) fn write_stdout(bytes: &[u8]) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)
        .and_then(|()| out.flush())
        .map_err(|e| Failure::new(exit::CANNOT_WRITE, messages::cannot_write_output(e)))
}

/// Writes `text` to the file at `path` (the report).
pub(crate) fn write_report(path: &Path, text: &str) -> Result<(), Failure> {
    std::fs::write(path, text)
        .map_err(|e| Failure::new(exit::CANNOT_WRITE, messages::cannot_write_report(path, e)))
}

/// `history` read as `format` when one is given (`--format`, or the
/// proxy's route), else as it came.
///
/// # Errors
///
/// The library's, when the body's marks say the other format.
pub(crate) fn in_format(history: History, format: Option<Format>) -> chatfold::Result<History> {
    match format {
        Some(format) => history.into_format(format),
        None => Ok(history),
    }
}

/// `value` as JSON, one line or indented, with a final newline.
pub(crate) fn to_json(value: &impl serde::Serialize, pretty: bool) -> Result<Vec<u8>, Failure> {
    let mut out = if pretty {
        serde_json::to_vec_pretty(value)
    } else {
        serde_json::to_vec(value)
    }
    .map_err(|e| Failure::new(exit::BAD_INPUT, messages::cannot_write_json(e)))?;
    out.push(b'\n');
    Ok(out)
}
