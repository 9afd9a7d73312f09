//! The subset of Lua a Cubeset file is written in: one assignment `Name = { ... }` whose value
//! is a table constructor of strings, numbers, booleans, `nil` and nested tables.
//!
//! Accepted as Lua accepts it: any whitespace, `--` line comments and `--[[ ]]` / `--[==[ ]==]`
//! block comments, `,` or `;` between fields and after the last one, `Name = v`, `["key"] = v`
//! and positional fields, single- and double-quoted strings with Lua's escapes (`\n`, `\t`,
//! `\\`, `\"`, `\ddd`, `\xXX`, `\u{XXX}`, `\z`, ...). Long strings (`[[...]]`) are not. Every value
//! keeps its byte offset so the interpreting layer can report line and column.

use std::borrow::Cow;

use crate::error::{Error, Result};

/// How deep tables may nest (a Cubeset needs 4 levels).
const MAX_DEPTH: usize = 16;

/// A parsed value with the byte offset where it starts.
#[derive(Debug)]
pub struct Value<'a> {
    pub at: usize,
    pub kind: Kind<'a>,
}

#[derive(Debug)]
pub enum Kind<'a> {
    Str(Str<'a>),
    /// A numeral as written (decimal or hexadecimal, optionally negative).
    Num(&'a str),
    Bool,
    Nil,
    Table(Vec<Field<'a>>),
}

/// A string value. `raw` is true when the source had no escapes, so that character `n` of
/// `text` sits at a known byte offset of the source (used for column numbers).
#[derive(Debug)]
pub struct Str<'a> {
    pub text: Cow<'a, str>,
    pub raw: bool,
}

/// One field of a table constructor; `key` is `None` for positional fields.
#[derive(Debug)]
pub struct Field<'a> {
    pub key: Option<Cow<'a, str>>,
    pub key_at: usize,
    pub value: Value<'a>,
}

impl Value<'_> {
    /// What the value is, for error messages.
    pub fn describe(&self) -> &'static str {
        match self.kind {
            Kind::Str(_) => "a string",
            Kind::Num(_) => "a number",
            Kind::Bool => "a boolean",
            Kind::Nil => "nil",
            Kind::Table(_) => "a table",
        }
    }
}

/// Source text with positions for error messages.
pub struct Source<'a> {
    pub text: &'a str,
}

impl<'a> Source<'a> {
    /// An error at byte offset `at`, reported as line and column (in characters), from 1.
    pub fn error(&self, at: usize, message: impl std::fmt::Display) -> Error {
        let at = at.min(self.text.len());
        let before = self.text.get(..at).unwrap_or(self.text);
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let line = before.matches('\n').count() + 1;
        let column = before.get(line_start..).map_or(0, |s| s.chars().count()) + 1;
        Error::at(line, column, message)
    }

    /// Parses `Name = value` followed by nothing but comments; returns the name and value.
    pub fn parse_assignment(&self) -> Result<(&'a str, usize, Value<'a>)> {
        let mut p = Parser {
            src: self,
            bytes: self.text.as_bytes(),
            pos: 0,
        };
        p.skip_space()?;
        let name_at = p.pos;
        let name = p
            .name()
            .ok_or_else(|| self.error(name_at, "expected `Cubeset = {`"))?;
        p.skip_space()?;
        p.expect(b'=', "expected `=` after the variable name")?;
        let value = p.value(0)?;
        p.skip_space()?;
        if p.peek() == Some(b';') {
            p.pos += 1;
            p.skip_space()?;
        }
        if p.pos < p.bytes.len() {
            return Err(self.error(p.pos, "unexpected text after the table"));
        }
        Ok((name, name_at, value))
    }
}

struct Parser<'s, 'a> {
    src: &'s Source<'a>,
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Parser<'_, 'a> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn peek_at(&self, ahead: usize) -> Option<u8> {
        self.bytes.get(self.pos + ahead).copied()
    }

    fn error(&self, at: usize, message: impl std::fmt::Display) -> Error {
        self.src.error(at, message)
    }

    fn expect(&mut self, byte: u8, message: &str) -> Result<()> {
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.unexpected(message))
        }
    }

    /// An error at the current position, naming what was found there.
    fn unexpected(&self, message: &str) -> Error {
        match self.src.text.get(self.pos..).and_then(|s| s.chars().next()) {
            None => self.error(self.pos, format!("{message}, found the end of the file")),
            Some(c) => self.error(self.pos, format!("{message}, found {c:?}")),
        }
    }

    /// Skips whitespace and comments.
    fn skip_space(&mut self) -> Result<()> {
        loop {
            match self.peek() {
                Some(b' ' | b'\t' | b'\n' | b'\r' | b'\x0b' | b'\x0c') => self.pos += 1,
                Some(b'-') if self.peek_at(1) == Some(b'-') => {
                    let start = self.pos;
                    self.pos += 2;
                    if let Some(level) = self.long_bracket_level() {
                        self.skip_long_comment(start, level)?;
                    } else {
                        while let Some(b) = self.peek() {
                            if b == b'\n' {
                                break;
                            }
                            self.pos += 1;
                        }
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    /// At `[`, `[=`…`[`: consumes the opening long bracket and returns its level.
    fn long_bracket_level(&mut self) -> Option<usize> {
        if self.peek() != Some(b'[') {
            return None;
        }
        let mut level = 0;
        while self.peek_at(1 + level) == Some(b'=') {
            level += 1;
        }
        if self.peek_at(1 + level) == Some(b'[') {
            self.pos += level + 2;
            Some(level)
        } else {
            None
        }
    }

    fn skip_long_comment(&mut self, start: usize, level: usize) -> Result<()> {
        while let Some(b) = self.peek() {
            self.pos += 1;
            if b == b']' {
                let mut n = 0;
                while self.peek_at(n) == Some(b'=') {
                    n += 1;
                }
                if n == level && self.peek_at(n) == Some(b']') {
                    self.pos += n + 1;
                    return Ok(());
                }
            }
        }
        Err(self.error(start, "unfinished block comment"))
    }

    /// A Lua name (identifier), if one starts here.
    fn name(&mut self) -> Option<&'a str> {
        let start = self.pos;
        match self.peek() {
            Some(b) if b.is_ascii_alphabetic() || b == b'_' => {}
            _ => return None,
        }
        while matches!(self.peek(), Some(b) if b.is_ascii_alphanumeric() || b == b'_') {
            self.pos += 1;
        }
        self.src.text.get(start..self.pos)
    }

    fn value(&mut self, depth: usize) -> Result<Value<'a>> {
        self.skip_space()?;
        let at = self.pos;
        let kind = match self.peek() {
            Some(b'{') => {
                if depth >= MAX_DEPTH {
                    return Err(self.error(at, "tables nested too deeply"));
                }
                Kind::Table(self.table(depth + 1)?)
            }
            Some(b'"' | b'\'') => Kind::Str(self.string()?),
            Some(b'0'..=b'9' | b'.') => Kind::Num(self.number()?),
            Some(b'-') if matches!(self.peek_at(1), Some(b'0'..=b'9' | b'.')) => {
                Kind::Num(self.number()?)
            }
            Some(b) if b.is_ascii_alphabetic() || b == b'_' => match self.name() {
                Some("true" | "false") => Kind::Bool,
                Some("nil") => Kind::Nil,
                Some(other) => {
                    return Err(self.error(
                        at,
                        format!("expected a value, found the name `{other}` (strings need quotes)"),
                    ))
                }
                None => return Err(self.unexpected("expected a value")),
            },
            Some(b'[') if matches!(self.peek_at(1), Some(b'[' | b'=')) => {
                return Err(self.error(at, "long strings `[[...]]` are not supported; use \"...\""))
            }
            _ => return Err(self.unexpected("expected a value")),
        };
        Ok(Value { at, kind })
    }

    fn number(&mut self) -> Result<&'a str> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        let mut previous = 0;
        while let Some(b) = self.peek() {
            let exponent_sign = matches!(b, b'+' | b'-') && matches!(previous, b'e' | b'E');
            if !(b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || exponent_sign) {
                break;
            }
            previous = b;
            self.pos += 1;
        }
        let text = self.src.text.get(start..self.pos).unwrap_or("");
        let body = text.strip_prefix('-').unwrap_or(text);
        let valid = if let Some(hex) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
            !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit())
        } else {
            body.parse::<f64>().is_ok() && !body.contains(['_', 'i', 'n', 'I', 'N'])
        };
        if valid {
            Ok(text)
        } else {
            Err(self.error(start, format!("malformed number `{text}`")))
        }
    }

    fn string(&mut self) -> Result<Str<'a>> {
        let quote = self.peek().unwrap_or(b'"');
        let start = self.pos;
        self.pos += 1;
        let body_start = self.pos;
        // Fast path: no escapes.
        while let Some(b) = self.peek() {
            if b == quote {
                let text = self.src.text.get(body_start..self.pos).unwrap_or("");
                self.pos += 1;
                return Ok(Str {
                    text: Cow::Borrowed(text),
                    raw: true,
                });
            }
            if b == b'\\' || b == b'\n' || b == b'\r' {
                break;
            }
            self.pos += 1;
        }
        let mut out: Vec<u8> = self.bytes.get(body_start..self.pos).unwrap_or(&[]).to_vec();
        loop {
            let Some(b) = self.peek() else {
                return Err(self.error(start, "unfinished string (missing closing quote)"));
            };
            self.pos += 1;
            match b {
                b'\n' | b'\r' => {
                    return Err(self.error(start, "unfinished string (missing closing quote)"))
                }
                b'\\' => self.escape(&mut out)?,
                _ if b == quote => break,
                _ => out.push(b),
            }
        }
        match String::from_utf8(out) {
            Ok(text) => Ok(Str {
                text: Cow::Owned(text),
                raw: false,
            }),
            Err(_) => Err(self.error(start, "the escapes in this string do not form UTF-8")),
        }
    }

    /// One escape sequence after `\`, appended to `out`.
    fn escape(&mut self, out: &mut Vec<u8>) -> Result<()> {
        let at = self.pos - 1;
        let Some(b) = self.peek() else {
            return Err(self.error(at, "unfinished string (missing closing quote)"));
        };
        self.pos += 1;
        let simple = match b {
            b'n' => Some(b'\n'),
            b't' => Some(b'\t'),
            b'r' => Some(b'\r'),
            b'a' => Some(7),
            b'b' => Some(8),
            b'f' => Some(12),
            b'v' => Some(11),
            b'\\' | b'"' | b'\'' | b'\n' => Some(b),
            _ => None,
        };
        if let Some(c) = simple {
            out.push(c);
            return Ok(());
        }
        match b {
            b'z' => {
                while matches!(
                    self.peek(),
                    Some(b' ' | b'\t' | b'\n' | b'\r' | b'\x0b' | b'\x0c')
                ) {
                    self.pos += 1;
                }
            }
            b'x' => {
                let hex = self.bytes.get(self.pos..self.pos + 2);
                let value = hex
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| self.error(at, "`\\x` needs two hexadecimal digits"))?;
                self.pos += 2;
                out.push(value);
            }
            b'0'..=b'9' => out.push(self.decimal_escape(b, at)?),
            b'u' => {
                let c = self.unicode_escape(at)?;
                let mut buf = [0; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
            _ => {
                let shown = self
                    .src
                    .text
                    .get(self.pos - 1..)
                    .and_then(|s| s.chars().next())
                    .unwrap_or('?');
                return Err(self.error(at, format!("invalid escape `\\{shown}`")));
            }
        }
        Ok(())
    }

    /// `\ddd` (up to three decimal digits, the first `first`) as one byte; `at` is the backslash.
    fn decimal_escape(&mut self, first: u8, at: usize) -> Result<u8> {
        let mut value = u32::from(first - b'0');
        for _ in 0..2 {
            match self.peek() {
                Some(d @ b'0'..=b'9') => {
                    value = value * 10 + u32::from(d - b'0');
                    self.pos += 1;
                }
                _ => break,
            }
        }
        u8::try_from(value).map_err(|_| self.error(at, "decimal escape larger than 255"))
    }

    /// `\u{XXX}` (after the `u`) as a character; `at` is the backslash.
    fn unicode_escape(&mut self, at: usize) -> Result<char> {
        let rest = self.src.text.get(self.pos..).unwrap_or("");
        let c = rest
            .strip_prefix('{')
            .and_then(|r| r.split_once('}'))
            .filter(|(h, _)| !h.is_empty() && h.len() <= 8)
            .and_then(|(h, _)| u32::from_str_radix(h, 16).ok().map(|v| (h.len(), v)))
            .and_then(|(len, v)| char::from_u32(v).map(|c| (len, c)));
        let (len, c) =
            c.ok_or_else(|| self.error(at, "`\\u` needs a code point in braces, like \\u{E9}"))?;
        self.pos += len + 2;
        Ok(c)
    }

    fn table(&mut self, depth: usize) -> Result<Vec<Field<'a>>> {
        let open = self.pos;
        self.pos += 1;
        let mut fields = Vec::new();
        loop {
            self.skip_space()?;
            let key_at = self.pos;
            match self.peek() {
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(fields);
                }
                None => return Err(self.error(open, "unfinished table (missing `}`)")),
                _ => {}
            }
            let key = self.key()?;
            let value = self.value(depth)?;
            fields.push(Field { key, key_at, value });
            self.skip_space()?;
            match self.peek() {
                Some(b',' | b';') => self.pos += 1,
                Some(b'}') => {}
                None => return Err(self.error(open, "unfinished table (missing `}`)")),
                _ => return Err(self.unexpected("expected `,` or `}`")),
            }
        }
    }

    /// The key of a field (`Name =`, `["key"] =`), or `None` for a positional field.
    fn key(&mut self) -> Result<Option<Cow<'a, str>>> {
        let start = self.pos;
        if self.peek() == Some(b'[') && !matches!(self.peek_at(1), Some(b'[' | b'=')) {
            self.pos += 1;
            let key = self.value(MAX_DEPTH)?;
            let key = match key.kind {
                Kind::Str(s) => s.text,
                Kind::Num(n) => Cow::Borrowed(n),
                _ => return Err(self.error(key.at, "a key in brackets must be a string")),
            };
            self.skip_space()?;
            self.expect(b']', "expected `]`")?;
            self.skip_space()?;
            self.expect(b'=', "expected `=` after the key")?;
            return Ok(Some(key));
        }
        if let Some(name) = self.name() {
            self.skip_space()?;
            if self.peek() == Some(b'=') && self.peek_at(1) != Some(b'=') {
                self.pos += 1;
                return Ok(Some(Cow::Borrowed(name)));
            }
        }
        self.pos = start;
        Ok(None)
    }
}
