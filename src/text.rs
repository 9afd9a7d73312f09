//! The one line/column tokenizer of the text views (Luanti, Survivalcraft and TVDA files):
//! UTF-8 checked with the position of the first bad byte, numbered lines, words and a cursor
//! over one line with column-exact errors (columns count characters from 1), `#` comments,
//! fixed-point decimals (milliseconds, 1/10,000 node) and quoted byte strings.
//!
//! Every view reports a bad edit as `line L, column C: reason` through [`Line::error_at`],
//! so a user's editor can jump to it whichever game the file belongs to.

use crate::error::{excerpt, Error, Result};

/// One line of a view file (without its line break) and its number from 1.
#[derive(Clone, Copy)]
pub struct Line<'a> {
    pub number: usize,
    pub text: &'a str,
}

impl<'a> Line<'a> {
    /// The column (from 1, in characters) where `part`, a slice of this line's text, starts.
    pub fn column(&self, part: &str) -> usize {
        let offset = (part.as_ptr() as usize)
            .saturating_sub(self.text.as_ptr() as usize)
            .min(self.text.len());
        self.text.get(..offset).map_or(0, |s| s.chars().count()) + 1
    }

    /// An error at the start of `part`, which must be a slice of this line's text.
    pub fn error_at(&self, part: &str, message: impl std::fmt::Display) -> Error {
        Error::at(self.number, self.column(part), message)
    }

    /// An error just after the last character of the line.
    pub fn error_at_end(&self, message: impl std::fmt::Display) -> Error {
        self.error_at(self.text.get(self.text.len()..).unwrap_or(""), message)
    }

    /// The same line without trailing whitespace.
    pub fn trim_end(self) -> Line<'a> {
        Line {
            text: self.text.trim_end(),
            ..self
        }
    }

    /// The line up to a `#` (anywhere, quotes are not special), without trailing whitespace.
    pub fn before_hash(self) -> Line<'a> {
        Line {
            text: self.text.split_once('#').map_or(self.text, |(b, _)| b),
            ..self
        }
        .trim_end()
    }

    /// Whether the line is blank or a comment (its first non-blank character is `#`).
    pub fn is_blank_or_comment(&self) -> bool {
        let t = self.text.trim_start();
        t.is_empty() || t.starts_with('#')
    }

    /// The words of the line, separated by spaces and tabs.
    pub fn words(&self) -> impl Iterator<Item = &'a str> {
        self.text.split([' ', '\t']).filter(|w| !w.is_empty())
    }

    /// An error at the first non-blank character of the line.
    pub fn error(&self, message: impl std::fmt::Display) -> Error {
        self.error_at(self.text.trim_start(), message)
    }

    /// The line without a `#` comment (outside double quotes), trimmed; empty for blank and
    /// comment lines.
    pub fn content(&self) -> &'a str {
        let mut quoted = false;
        let mut escaped = false;
        for (i, b) in self.text.bytes().enumerate() {
            match b {
                _ if escaped => escaped = false,
                b'\\' if quoted => escaped = true,
                b'"' => quoted = !quoted,
                b'#' if !quoted => return self.text.get(..i).unwrap_or("").trim(),
                _ => {}
            }
        }
        self.text.trim()
    }

    /// A cursor over this line's content.
    pub fn cursor(&self) -> Cursor<'a> {
        let content = self.content();
        Cursor {
            line: *self,
            rest: content,
        }
    }
}

/// `text` as UTF-8, or an error saying `message` at the line and column of the first byte
/// that is not.
pub fn decode<'a>(text: &'a [u8], message: &str) -> Result<&'a str> {
    std::str::from_utf8(text).map_err(|e| {
        let valid = text.get(..e.valid_up_to()).unwrap_or(&[]);
        let valid = std::str::from_utf8(valid).unwrap_or("");
        let line = valid.matches('\n').count() + 1;
        let column = valid.rsplit('\n').next().map_or(0, |s| s.chars().count()) + 1;
        Error::at(line, column, message)
    })
}

/// The lines of `text` (without their line breaks), numbered from 1.
pub fn numbered(text: &str) -> impl Iterator<Item = Line<'_>> {
    text.lines().enumerate().map(|(i, text)| Line {
        number: i + 1,
        text,
    })
}

/// The lines of a view file, which must be UTF-8.
pub fn lines(text: &[u8]) -> Result<impl Iterator<Item = Line<'_>>> {
    Ok(numbered(decode(text, "the file is not UTF-8")?))
}

/// Reads the values of one line from left to right.
pub struct Cursor<'a> {
    pub line: Line<'a>,
    rest: &'a str,
}

impl<'a> Cursor<'a> {
    /// Whether only whitespace is left.
    pub fn at_end(&mut self) -> bool {
        self.rest = self.rest.trim_start();
        self.rest.is_empty()
    }

    /// An error at the current position.
    pub fn error(&mut self, message: impl std::fmt::Display) -> Error {
        self.rest = self.rest.trim_start();
        if self.rest.is_empty() {
            self.line
                .error_at(self.rest, format!("{message}, found the end of the line"))
        } else {
            self.line.error_at(self.rest, message)
        }
    }

    /// Fails unless only whitespace is left.
    pub fn end(&mut self) -> Result<()> {
        if self.at_end() {
            Ok(())
        } else {
            Err(self.line.error_at(self.rest, "unexpected text"))
        }
    }

    /// Consumes `c` (after optional whitespace).
    pub fn expect(&mut self, c: char, what: &str) -> Result<()> {
        self.rest = self.rest.trim_start();
        match self.rest.strip_prefix(c) {
            Some(r) => {
                self.rest = r;
                Ok(())
            }
            None => Err(self.error(format!("expected {what}"))),
        }
    }

    /// The next word: everything up to whitespace or one of `stops`.
    pub fn word(&mut self, stops: &[char]) -> &'a str {
        self.rest = self.rest.trim_start();
        let end = self
            .rest
            .find(|c: char| c.is_whitespace() || stops.contains(&c))
            .unwrap_or(self.rest.len());
        let (word, rest) = self.rest.split_at(end);
        self.rest = rest;
        word
    }

    /// Whether `c` comes next (after optional whitespace); consumes nothing.
    pub fn next_is(&mut self, c: char) -> bool {
        self.rest = self.rest.trim_start();
        self.rest.starts_with(c)
    }

    /// Everything left, trimmed.
    pub fn rest(&mut self) -> &'a str {
        let r = self.rest.trim();
        self.rest = "";
        r
    }

    /// A whole number in `min..=max` (decimal, or hexadecimal with `0x`).
    pub fn int(&mut self, what: &str, min: i64, max: i64) -> Result<i64> {
        let word = self.word(&[',']);
        let value = parse_int(word).ok_or_else(|| {
            self.line
                .error_at(word, format!("{what} must be a whole number"))
        })?;
        if value < min || value > max {
            return Err(self.line.error_at(
                word,
                format!("{what} {} is out of range ({min} to {max})", excerpt(word)),
            ));
        }
        Ok(value)
    }

    /// A decimal with at most `decimals` digits after the point, as an integer scaled by
    /// 10^decimals, in `min..=max` (scaled).
    pub fn fixed(&mut self, what: &str, decimals: u32, min: i64, max: i64) -> Result<i64> {
        let word = self.word(&[',']);
        let value = parse_fixed(word, decimals).map_err(|why| {
            self.line.error_at(
                word,
                format!("{what}: `{}` is not a number ({why})", excerpt(word)),
            )
        })?;
        if value < min || value > max {
            return Err(self.line.error_at(
                word,
                format!(
                    "{what} {} is out of range ({} to {})",
                    excerpt(word),
                    format_fixed(min, decimals),
                    format_fixed(max, decimals)
                ),
            ));
        }
        Ok(value)
    }

    /// A double-quoted string with the escapes of [`push_quoted`].
    pub fn quoted(&mut self, what: &str) -> Result<Vec<u8>> {
        self.rest = self.rest.trim_start();
        let start = self.rest;
        let Some(body) = self.rest.strip_prefix('"') else {
            return Err(self.error(format!("{what} must be a string in double quotes")));
        };
        let mut out = Vec::with_capacity(body.len());
        let mut chars = body.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => {
                    self.rest = body.get(i + 1..).unwrap_or("");
                    return Ok(out);
                }
                '\\' => {
                    let at = body.get(i..).unwrap_or("");
                    let byte = match chars.next().map(|(_, c)| c) {
                        Some('n') => b'\n',
                        Some('r') => b'\r',
                        Some('t') => b'\t',
                        Some('0') => 0,
                        Some('\\') => b'\\',
                        Some('"') => b'"',
                        Some('x') => {
                            let hex: String = chars.by_ref().take(2).map(|(_, c)| c).collect();
                            u8::from_str_radix(&hex, 16)
                                .ok()
                                .filter(|_| hex.len() == 2)
                                .ok_or_else(|| {
                                    self.line.error_at(at, "`\\x` needs two hexadecimal digits")
                                })?
                        }
                        _ => {
                            return Err(self.line.error_at(
                                at,
                                "unknown escape (use \\n \\r \\t \\0 \\\\ \\\" or \\xHH)",
                            ))
                        }
                    };
                    out.push(byte);
                }
                c => {
                    let mut buf = [0; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
            }
        }
        Err(self
            .line
            .error_at(start, format!("{what}: missing closing quote")))
    }
}

/// A whole number: decimal with optional sign, or hexadecimal with `0x`.
pub fn parse_int(word: &str) -> Option<i64> {
    let (negative, digits) = match word.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, word.strip_prefix('+').unwrap_or(word)),
    };
    let value = if let Some(hex) = digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        if hex.is_empty() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) || hex.len() > 15 {
            return None;
        }
        i64::from_str_radix(hex, 16).ok()?
    } else {
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || digits.len() > 18 {
            return None;
        }
        digits.parse::<i64>().ok()?
    };
    Some(if negative { -value } else { value })
}

/// Parses `-12.345` with at most `decimals` digits after the point into `-12345` (for 3).
pub fn parse_fixed(word: &str, decimals: u32) -> std::result::Result<i64, String> {
    let (negative, body) = match word.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, word.strip_prefix('+').unwrap_or(word)),
    };
    let (whole, fraction) = body.split_once('.').unwrap_or((body, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() && fraction.is_empty() || !digits(whole) || !digits(fraction) {
        return Err("expected digits like 12.5".to_string());
    }
    if fraction.len() > decimals as usize {
        return Err(format!("at most {decimals} digits after the point"));
    }
    if whole.len() > 12 {
        return Err("too large".to_string());
    }
    let whole: i64 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| "too large".to_string())?
    };
    let mut frac: i64 = 0;
    for i in 0..decimals as usize {
        let d = fraction
            .as_bytes()
            .get(i)
            .map_or(0, |b| i64::from(b - b'0'));
        frac = frac * 10 + d;
    }
    let value = whole * 10i64.pow(decimals) + frac;
    Ok(if negative { -value } else { value })
}

/// Formats a scaled integer with exactly `decimals` digits after the point.
pub fn format_fixed(value: i64, decimals: u32) -> String {
    let scale = 10i64.pow(decimals);
    let sign = if value < 0 { "-" } else { "" };
    let abs = value.unsigned_abs();
    let scale = scale.unsigned_abs();
    format!(
        "{sign}{}.{:0width$}",
        abs / scale,
        abs % scale,
        width = decimals as usize
    )
}

/// Appends `bytes` as a double-quoted string: UTF-8 text as it is, except `"` and `\`, line
/// breaks and tabs as `\n` `\r` `\t`, and other control bytes and bytes that are not UTF-8
/// as `\xHH`.
pub fn push_quoted(out: &mut String, bytes: &[u8]) {
    out.push('"');
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c if c.is_control() => {
                    let mut buf = [0; 4];
                    for b in c.encode_utf8(&mut buf).bytes() {
                        out.push_str(&format!("\\x{b:02x}"));
                    }
                }
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out.push('"');
}

/// Reads a text of `key = value` lines (blank and comment-only lines skipped): `take` gets
/// each key and its value and says whether the key was new, a key given twice fails naming
/// its line, and each value must be read to its end. Returns the number of the last line.
pub fn read_fields<'a>(
    text: &'a [u8],
    mut take: impl FnMut(&'a str, &mut Cursor<'a>) -> Result<bool>,
) -> Result<usize> {
    let mut last_line = 0;
    for line in lines(text)? {
        last_line = line.number;
        if line.content().is_empty() {
            continue;
        }
        let (key, mut value) = key_value(&line)?;
        if !take(key, &mut value)? {
            return Err(line.error(format!("`{key}` is given twice")));
        }
        value.end()?;
    }
    Ok(last_line)
}

/// Splits `key = value` (the line's content without comment); errors name the line.
pub fn key_value<'a>(line: &Line<'a>) -> Result<(&'a str, Cursor<'a>)> {
    let content = line.content();
    let Some((key, value)) = content.split_once('=') else {
        return Err(line.error("expected `key = value`"));
    };
    let key = key.trim();
    if key.is_empty() || key.contains(char::is_whitespace) {
        return Err(line.error_at(content, "expected `key = value`"));
    }
    Ok((
        key,
        Cursor {
            line: *line,
            rest: value,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_point_round_trips() {
        for v in [
            0,
            1,
            -1,
            999,
            -1000,
            12345,
            i32::MAX as i64,
            i32::MIN as i64,
        ] {
            for d in [3, 4] {
                assert_eq!(parse_fixed(&format_fixed(v, d), d), Ok(v), "{v} {d}");
            }
        }
        assert_eq!(parse_fixed("2.5", 3), Ok(2500));
        assert_eq!(parse_fixed("-.5", 3), Ok(-500));
        assert_eq!(parse_fixed("7", 4), Ok(70000));
        assert!(parse_fixed("1.2345", 3).is_err());
        assert!(parse_fixed("1e3", 3).is_err());
        assert!(parse_fixed(".", 3).is_err());
        assert!(parse_fixed("", 3).is_err());
    }

    #[test]
    fn quoted_strings_round_trip() {
        let bytes = b"a\"b\\c\nd\te\x01f\xffg\xc3\xa9h #";
        let mut s = String::new();
        push_quoted(&mut s, bytes);
        assert_eq!(s, "\"a\\\"b\\\\c\\nd\\te\\x01f\\xffg\u{e9}h #\"");
        let line = Line {
            number: 1,
            text: &s,
        };
        let mut c = Cursor {
            line,
            rest: line.text,
        };
        assert_eq!(c.quoted("x").unwrap(), bytes);
        assert!(c.at_end());
    }

    #[test]
    fn comments_end_outside_quotes() {
        let line = Line {
            number: 1,
            text: "  state = \"a # b\" # comment",
        };
        assert_eq!(line.content(), "state = \"a # b\"");
    }

    #[test]
    fn words_and_errors_have_character_columns() {
        let line = numbered("a\n\t\u{e9}t\u{e9} 12  x # c  ").nth(1).unwrap();
        assert_eq!(line.number, 2);
        let line = line.before_hash();
        let words: Vec<&str> = line.words().collect();
        assert_eq!(words, ["\u{e9}t\u{e9}", "12", "x"]);
        assert_eq!(line.column(words[1]), 6);
        assert_eq!(line.error_at_end("m").message(), "line 2, column 11: m");
        assert!(numbered("  # c").all(|l| l.is_blank_or_comment()));
        let e = decode(b"ok\n\xc3\xa9x\xff", "not text").unwrap_err();
        assert_eq!(e.message(), "line 2, column 3: not text");
    }
}
