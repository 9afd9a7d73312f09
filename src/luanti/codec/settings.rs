//! Luanti's `Settings` text syntax, shared by player files and `world.mt`.
//!
//! The engine reads `key = value` lines (both sides trimmed), skips blank lines and `#`
//! comments, stops at an optional terminator line (`PlayerArgsEnd` for player files), opens a
//! group with `key = {` (closed by `}`) and a multi-line value with `key = """`: the following
//! lines are taken verbatim until a line that is exactly `"""`, and joined with `\n`.
//! Parsing here follows those rules but reports what the engine silently skips (a line without
//! `=`, an unterminated block) with its line number, so an edited file is never half-read.

use crate::error::{Error, Result};

/// One `key = value` entry and the line it starts on (from 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub key: String,
    pub value: Value,
    pub line: usize,
}

/// The value of an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// A plain or `"""` multi-line value.
    Text(String),
    /// A `{ … }` group.
    Group(Vec<Entry>),
}

/// The result of parsing a settings block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    pub entries: Vec<Entry>,
    /// Byte offset just after the terminator line (the end of the text without one).
    pub rest: usize,
    /// Line number of the first line after the terminator.
    pub rest_line: usize,
}

/// How to treat lines the engine would skip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Reject lines without `=` and unterminated blocks with their line number.
    Strict,
    /// Skip them, as the engine does (for files the engine wrote or people hand-edit,
    /// like `world.mt`).
    Lenient,
}

/// Parses settings until `end` (a terminator line such as `PlayerArgsEnd`) or the end of the
/// text when `end` is `None`. A missing terminator is an error.
pub fn parse(text: &[u8], end: Option<&str>, mode: Mode) -> Result<Parsed> {
    let mut lines = Lines {
        text,
        pos: 0,
        line: 0,
    };
    let entries = parse_block(&mut lines, end, mode, 0)?;
    Ok(Parsed {
        entries,
        rest: lines.pos,
        rest_line: lines.line + 1,
    })
}

/// Groups deeper than this are rejected (a bound on recursion for arbitrary input).
const MAX_GROUP_DEPTH: usize = 16;

struct Lines<'a> {
    text: &'a [u8],
    pos: usize,
    line: usize,
}

impl<'a> Lines<'a> {
    /// The next line without its `\n`, or `None` at the end of the text.
    fn next_line(&mut self) -> Option<&'a [u8]> {
        if self.pos >= self.text.len() {
            return None;
        }
        let rest = self.text.get(self.pos..).unwrap_or_default();
        let len = rest.iter().position(|&b| b == b'\n');
        self.line += 1;
        match len {
            Some(n) => {
                self.pos += n + 1;
                rest.get(..n)
            }
            None => {
                self.pos = self.text.len();
                Some(rest)
            }
        }
    }
}

fn utf8(line: &[u8], number: usize) -> Result<&str> {
    std::str::from_utf8(line)
        .map_err(|e| Error::at(number, e.valid_up_to() + 1, "text is not valid UTF-8"))
}

/// The engine's `trim`: ASCII whitespace on both sides.
pub fn trim(s: &str) -> &str {
    // C's isspace, as the engine's trim(): Rust's ASCII whitespace leaves out \v.
    s.trim_matches(|c: char| c.is_ascii_whitespace() || c == '\u{0B}')
}

fn parse_block(
    lines: &mut Lines<'_>,
    end: Option<&str>,
    mode: Mode,
    depth: usize,
) -> Result<Vec<Entry>> {
    let mut entries = Vec::new();
    while let Some(raw) = lines.next_line() {
        let number = lines.line;
        let line = match utf8(raw, number) {
            Ok(l) => l,
            Err(_) if mode == Mode::Lenient => continue,
            Err(e) => return Err(e),
        };
        let trimmed = trim(line);
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if Some(trimmed) == end {
            return Ok(entries);
        }
        let Some((key, value)) = trimmed.split_once('=') else {
            if mode == Mode::Lenient {
                continue;
            }
            let expected = match end {
                Some(end) => format!("expected `key = value` or `{end}`"),
                None => "expected `key = value`".to_string(),
            };
            return Err(Error::at(number, 1, expected));
        };
        let key = trim(key);
        let value = trim(value);
        if key.is_empty() {
            if mode == Mode::Lenient {
                continue;
            }
            return Err(Error::at(number, 1, "missing key before `=`"));
        }
        let value = match value {
            "{" => {
                if depth >= MAX_GROUP_DEPTH {
                    return Err(Error::at(number, 1, "groups nested too deeply"));
                }
                Value::Group(parse_block(lines, Some("}"), mode, depth + 1)?)
            }
            "\"\"\"" => Value::Text(multiline(lines, number, mode)?),
            _ => Value::Text(value.to_string()),
        };
        entries.push(Entry {
            key: key.to_string(),
            value,
            line: number,
        });
    }
    match end {
        Some(end) => Err(Error::at(
            lines.line + 1,
            1,
            format!("missing `{end}` line"),
        )),
        None => Ok(entries),
    }
}

fn multiline(lines: &mut Lines<'_>, start: usize, mode: Mode) -> Result<String> {
    let mut parts: Vec<&str> = Vec::new();
    loop {
        let Some(raw) = lines.next_line() else {
            if mode == Mode::Lenient {
                break;
            }
            return Err(Error::at(
                start,
                1,
                "multi-line value is not closed by a `\"\"\"` line",
            ));
        };
        let line = utf8(raw, lines.line)?;
        if line == "\"\"\"" {
            break;
        }
        parts.push(line);
    }
    Ok(parts.join("\n"))
}

/// Whether `value` can be written as `key = value` on one line and read back unchanged.
fn fits_one_line(value: &str) -> bool {
    !value.contains('\n') && trim(value) == value && value != "{" && value != "\"\"\""
}

/// Whether `value` can be written at all (as one line or as a `"""` block).
pub fn writable(value: &str) -> bool {
    fits_one_line(value) || !value.split('\n').any(|line| line == "\"\"\"")
}

/// Appends `key = value`, as a `"""` block when the value does not survive one line.
/// The caller guarantees [`writable`].
pub fn write_entry(out: &mut Vec<u8>, key: &str, value: &str) {
    out.extend_from_slice(key.as_bytes());
    if fits_one_line(value) {
        out.extend_from_slice(b" = ");
        out.extend_from_slice(value.as_bytes());
    } else {
        out.extend_from_slice(b" = \"\"\"\n");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\n\"\"\"");
    }
    out.push(b'\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn text(entries: &[Entry], key: &str) -> Option<String> {
        entries
            .iter()
            .rev()
            .find(|e| e.key == key)
            .and_then(|e| match &e.value {
                Value::Text(t) => Some(t.clone()),
                Value::Group(_) => None,
            })
    }

    #[test]
    fn reads_blocks_groups_and_terminator() {
        let src = b"# c\n a = 1 \nb = \"\"\"\nnull\n\n\"\"\"\ng = {\n x = 2\n}\nEND\nrest";
        let p = parse(src, Some("END"), Mode::Strict).unwrap();
        assert_eq!(text(&p.entries, "a").as_deref(), Some("1"));
        assert_eq!(text(&p.entries, "b").as_deref(), Some("null\n"));
        assert!(matches!(p.entries[2].value, Value::Group(ref g) if g.len() == 1));
        assert_eq!(&src[p.rest..], b"rest");
        assert_eq!(p.rest_line, 11);
    }

    #[test]
    fn strict_errors_name_the_line() {
        let e = parse(b"a = 1\nbogus\nEND\n", Some("END"), Mode::Strict).unwrap_err();
        assert!(e.message().starts_with("line 2,"), "{e}");
        let e = parse(b"a = 1\n", Some("END"), Mode::Strict).unwrap_err();
        assert!(e.message().contains("missing `END`"), "{e}");
        let e = parse(b"a = \"\"\"\nx\n", None, Mode::Strict).unwrap_err();
        assert!(e.message().starts_with("line 1,"), "{e}");
        assert!(parse(b"bogus\n= x\na = 1\n", None, Mode::Lenient).is_ok());
    }

    proptest! {
        #[test]
        fn written_values_read_back(value in "[ -~\n\t]{0,40}") {
            prop_assume!(writable(&value));
            let mut out = Vec::new();
            write_entry(&mut out, "k", &value);
            out.extend_from_slice(b"END\n");
            let p = parse(&out, Some("END"), Mode::Strict).unwrap();
            prop_assert_eq!(text(&p.entries, "k"), Some(value));
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = parse(&bytes, Some("END"), Mode::Strict);
            let _ = parse(&bytes, None, Mode::Lenient);
        }
    }
}
