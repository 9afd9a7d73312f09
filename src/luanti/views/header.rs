//! `block.txt`: the header fields of a block as `key = value` lines.
//!
//! ```text
//! version = 29
//! underground = false        # flags 0x01: the block is underground
//! day_night_differs = true   # flags 0x02: day and night light differ
//! lighting_expired = false   # flags 0x04: light needs updating (versions before 27)
//! generated = true           # not flags 0x08: false makes the engine generate the block again
//! lighting_complete = 0xffff # one bit per face and light bank; 0xffff = complete
//! timestamp = undefined      # game time in seconds of the last save; undefined = 0xffffffff
//! ```
//!
//! `lighting_complete` exists from version 27 on (world_format: "Added in version 27"; the
//! engine reads it only then and takes 0xffff for older blocks). Blocks before 27 show no
//! such line; their "light needs updating" is `lighting_expired`. Reading one accepts
//! `lighting_complete = 0xffff` (what older worldfs versions showed) and rejects any other
//! value with its line.
//!
//! Flag bits 0x10–0x80 have no meaning in the engine; when a block has any, they are shown as
//! `other_flags = 0x..` (absent means 0). Reading takes every key but `other_flags` (and
//! `lighting_complete` before version 27) exactly once, in any order; booleans are `true`/`false` (also `yes`/`no`, `1`/`0`); numbers are
//! decimal or `0x` hexadecimal; `#` starts a comment.

use crate::error::{excerpt, Error, Result};
use crate::luanti::codec::block::MapBlock;
use crate::text::{parse_int, read_fields, Cursor};

/// The flag bits with a name: (key, bit, shown inverted, comment).
const FLAGS: [(&str, u8, bool, &str); 4] = [
    (
        "underground",
        0x01,
        false,
        "flags 0x01: the block is underground",
    ),
    (
        "day_night_differs",
        0x02,
        false,
        "flags 0x02: day and night light differ",
    ),
    (
        "lighting_expired",
        0x04,
        false,
        "flags 0x04: light needs updating (versions before 27)",
    ),
    (
        "generated",
        0x08,
        true,
        "not flags 0x08: false makes the engine generate the block again",
    ),
];

/// The first version with a `lighting_complete` field.
const LIGHTING_COMPLETE_SINCE: u8 = 27;

/// The bits of `flags` not named in [`FLAGS`].
const OTHER_FLAGS: u8 = 0xf0;

/// `block.txt`: version, flags, lighting_complete, timestamp.
pub fn render_header(block: &MapBlock) -> Vec<u8> {
    let mut lines: Vec<(String, &str)> = Vec::with_capacity(8);
    lines.push((format!("version = {}", block.version), ""));
    for (key, bit, inverted, comment) in FLAGS {
        let set = (block.flags & bit != 0) != inverted;
        lines.push((format!("{key} = {set}"), comment));
    }
    if block.flags & OTHER_FLAGS != 0 {
        lines.push((
            format!("other_flags = {:#04x}", block.flags & OTHER_FLAGS),
            "flags 0x10-0x80: not used by the engine",
        ));
    }
    if block.version >= LIGHTING_COMPLETE_SINCE {
        lines.push((
            format!("lighting_complete = {:#06x}", block.lighting_complete),
            "one bit per face and light bank; 0xffff = complete",
        ));
    }
    let timestamp = if block.timestamp == u32::MAX {
        "undefined".to_string()
    } else {
        block.timestamp.to_string()
    };
    lines.push((
        format!("timestamp = {timestamp}"),
        "game time in seconds of the last save; undefined = 0xffffffff",
    ));
    let width = lines.iter().map(|(l, _)| l.len()).max().unwrap_or(0);
    let mut out = String::with_capacity(600);
    for (line, comment) in lines {
        if comment.is_empty() {
            out.push_str(&line);
        } else {
            out.push_str(&format!("{line:width$}  # {comment}"));
        }
        out.push('\n');
    }
    out.into_bytes()
}

/// Parses `block.txt` into `block`.
pub fn parse_header(text: &[u8], block: &mut MapBlock) -> Result<()> {
    let mut fields = Fields::default();
    fields.last_line = read_fields(text, |key, value| fields.take(key, value))?;
    fields.apply(block)
}

/// The keys of `block.txt` as read so far.
#[derive(Default)]
struct Fields {
    version: Option<u8>,
    flags: [Option<bool>; 4],
    other: Option<u8>,
    /// The value and its line.
    lighting_complete: Option<(u16, usize)>,
    timestamp: Option<u32>,
    last_line: usize,
}

impl Fields {
    /// Reads the value of `key`; false when the key was given before.
    fn take(&mut self, key: &str, value: &mut Cursor<'_>) -> Result<bool> {
        let line = value.line;
        let fresh = match key {
            "version" => {
                let v = value.int("version", 22, 29)? as u8;
                self.version.replace(v).is_none()
            }
            "other_flags" => {
                let v = value.int("other_flags", 0, 255)? as u8;
                if v & !OTHER_FLAGS != 0 {
                    return Err(line.error(format!(
                        "other_flags may only hold bits 0x10-0x80, not {v:#04x}"
                    )));
                }
                self.other.replace(v).is_none()
            }
            "lighting_complete" => {
                let v = value.int("lighting_complete", 0, 0xffff)? as u16;
                self.lighting_complete.replace((v, line.number)).is_none()
            }
            "timestamp" => {
                let v = timestamp(value)?;
                self.timestamp.replace(v).is_none()
            }
            _ => {
                let Some(i) = FLAGS.iter().position(|f| f.0 == key) else {
                    return Err(line.error(format!(
                        "unknown key `{}` (expected version, {}, lighting_complete, timestamp)",
                        excerpt(key),
                        FLAGS.map(|f| f.0).join(", ")
                    )));
                };
                let v = boolean(value, key)?;
                self.flags[i].replace(v).is_none()
            }
        };
        Ok(fresh)
    }

    /// Stores what was read into `block`, or says which key is missing or wrong.
    fn apply(self, block: &mut MapBlock) -> Result<()> {
        let last_line = self.last_line;
        let missing = |key: &str| Error::at(last_line + 1, 1, format!("`{key}` is missing"));
        let version = self.version.ok_or_else(|| missing("version"))?;
        let mut bits = self.other.unwrap_or(0);
        for ((key, bit, inverted, _), value) in FLAGS.iter().zip(self.flags) {
            if value.ok_or_else(|| missing(key))? != *inverted {
                bits |= bit;
            }
        }
        block.lighting_complete = if version >= LIGHTING_COMPLETE_SINCE {
            self.lighting_complete
                .map(|(v, _)| v)
                .ok_or_else(|| missing("lighting_complete"))?
        } else {
            match self.lighting_complete {
                None | Some((0xffff, _)) => 0xffff,
                Some((v, line)) => {
                    return Err(Error::at(
                        line,
                        1,
                        format!(
                            "lighting_complete = {v:#06x}: blocks before version 27 have no \
                             lighting_complete (it is always 0xffff); use lighting_expired"
                        ),
                    ))
                }
            }
        };
        block.version = version;
        block.flags = bits;
        block.timestamp = self.timestamp.ok_or_else(|| missing("timestamp"))?;
        Ok(())
    }
}

/// A timestamp: seconds, or `undefined` (0xffffffff).
fn timestamp(value: &mut Cursor<'_>) -> Result<u32> {
    let word = value.word(&[]);
    if word == "undefined" {
        return Ok(u32::MAX);
    }
    parse_int(word)
        .and_then(|v| u32::try_from(v).ok())
        .ok_or_else(|| {
            value.line.error_at(
                word,
                "timestamp must be a number of seconds (0 to 4294967295) or `undefined`",
            )
        })
}

fn boolean(value: &mut Cursor<'_>, key: &str) -> Result<bool> {
    let word = value.word(&[]);
    match word {
        "true" | "yes" | "1" => Ok(true),
        "false" | "no" | "0" => Ok(false),
        _ => Err(value
            .line
            .error_at(word, format!("{key} must be true or false"))),
    }
}
