//! `header.txt`: a TVDA disk's 300-byte header (tvda.md §2.1) as `key = value` lines, so a
//! backup through the mount holds the disk's name, kind and flags and can be restored into
//! a new disk (docs/terrarum.md).
//!
//! ```text
//! # Terrarum disk header (docs/terrarum.md)
//! name = "Alice"       # the player's or world's name, bytes 10-41 and 64-299
//! kind = player        # byte 50: player, world, undefined or a number
//! save_mode = 0        # byte 49: bit 1 autosave; a world's bit 0 (quicksaved) is the disk's
//! origin = 0           # byte 51: 0 created in game, 16 imported
//! snapshot = none      # bytes 52-53: YYwWWr (23w40a), none for a release build
//! game_mode = 0        # byte 54
//! ```
//!
//! Bytes that are normally zero (or the 0xFE marker) are shown only when they are not:
//! `flags` (byte 48), `capacity` (bytes 4-9), `marker` (byte 47) and `reserved` (bytes
//! 55-63, which Terrarum's rename clobbers), so every byte a user could set round-trips.
//! Not shown: the magic and spec version (fixed), the disk CRC (computed from the entries)
//! and bit 0 of a world's save mode (set by each append, cleared by each rewrite: it tells
//! how the disk was last written, not what it holds). The name is quoted with the escapes of
//! [`push_quoted`], so a name that is not UTF-8 (or holds NULs) round-trips byte for byte.
//!
//! Reading takes each key at most once, in any order; `name` and `kind` are required and
//! the others default to what a new disk has.

use crate::error::{excerpt, Error, Result};
use crate::text::{key_value, lines, parse_int, push_quoted, read_fields, Cursor};
use crate::tvda::codec::tvda::{DiskKind, Header, HeaderFields, SPEC_VERSION};

/// The file name of the view in the mount root.
pub const HEADER_FILE: &str = "header.txt";

/// The save-mode bit a world disk keeps for itself (quicksaved/appended).
const DIRTY_BIT: u8 = 1;

/// The most bytes a header text may have (a full one is about 600).
pub const HEADER_TEXT_LIMIT: usize = 8 << 10;

fn kind_word(kind: u8) -> String {
    match kind {
        0 => "undefined".into(),
        1 => "player".into(),
        2 => "world".into(),
        n => n.to_string(),
    }
}

/// `YYwWWr` of a snapshot number (`0b A_yyyyyyy wwwwww_aa`, revision `Aaa` as a–h), or
/// `none` for 0.
fn snapshot_word(s: [u8; 2]) -> String {
    if s == [0, 0] {
        return "none".into();
    }
    let year = s[0] & 0x7f;
    let week = s[1] >> 2;
    let revision = ((s[0] >> 7) << 2) | (s[1] & 3);
    format!("{year:02}w{week:02}{}", char::from(b'a' + revision))
}

fn parse_snapshot(value: &mut Cursor<'_>) -> Result<[u8; 2]> {
    let word = value.rest();
    if word == "none" {
        return Ok([0, 0]);
    }
    let bad = || {
        value.line.error_at(
            word,
            format!(
                "snapshot `{}` is not YYwWWr (year 0-127, week 0-63, revision a-h, e.g. 23w40a) or none",
                excerpt(word)
            ),
        )
    };
    let (year, rest) = word.split_once('w').ok_or_else(bad)?;
    let letter = rest.chars().last().ok_or_else(bad)?;
    let week = rest.get(..rest.len() - letter.len_utf8()).ok_or_else(bad)?;
    let digits = |s: &str, max: u8| {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse::<u8>().ok())
            .flatten()
            .filter(|&n| n <= max)
    };
    let (year, week) = (
        digits(year, 127).ok_or_else(bad)?,
        digits(week, 63).ok_or_else(bad)?,
    );
    if !('a'..='h').contains(&letter) {
        return Err(bad());
    }
    let revision = letter as u8 - b'a';
    let snapshot = [((revision >> 2) << 7) | year, (week << 2) | (revision & 3)];
    if snapshot == [0, 0] {
        return Err(value
            .line
            .error_at(word, "snapshot 00w00a is stored as 0: write `none`"));
    }
    Ok(snapshot)
}

/// The text of `header`.
pub fn render_header(header: &Header) -> Vec<u8> {
    let f = header.fields();
    let mut name = String::with_capacity(f.name.len() + 2);
    push_quoted(&mut name, &f.name);
    let save_mode = if header.kind() == DiskKind::World {
        f.save_mode & !DIRTY_BIT
    } else {
        f.save_mode
    };
    let mut lines: Vec<(String, &str)> = vec![
        (
            format!("name = {name}"),
            "the player's or world's name, bytes 10-41 and 64-299",
        ),
        (
            format!("kind = {}", kind_word(f.kind)),
            "byte 50: player, world, undefined or a number",
        ),
        (
            format!("save_mode = {save_mode}"),
            "byte 49: bit 1 autosave; a world's bit 0 (quicksaved) is the disk's",
        ),
        (
            format!("origin = {}", f.origin),
            "byte 51: 0 created in game, 16 imported",
        ),
        (
            format!("snapshot = {}", snapshot_word(f.snapshot)),
            "bytes 52-53: YYwWWr (23w40a), none for a release build",
        ),
        (format!("game_mode = {}", f.game_mode), "byte 54"),
    ];
    if f.flags != 0 {
        lines.push((
            format!("flags = {:#04x}", f.flags),
            "byte 48: bit 0 read-only",
        ));
    }
    if f.capacity != 0 {
        lines.push((format!("capacity = {}", f.capacity), "bytes 4-9"));
    }
    if f.marker != SPEC_VERSION {
        lines.push((
            format!("marker = {:#04x}", f.marker),
            "byte 47, normally 0xfe",
        ));
    }
    if f.reserved != [0; 9] {
        let hex: String = f.reserved.iter().map(|b| format!("{b:02x}")).collect();
        lines.push((format!("reserved = 0x{hex}"), "bytes 55-63"));
    }
    let width = lines.iter().map(|(l, _)| l.len()).max().unwrap_or(0);
    let mut out = String::from("# Terrarum disk header (docs/terrarum.md)\n");
    for (line, comment) in lines {
        out.push_str(&format!("{line:width$}  # {comment}\n"));
    }
    out.into_bytes()
}

/// Whether `text` is meant as a header text: small UTF-8 with a `kind = ...` line (what
/// makes a file holding a backup's `header.txt` a new disk; docs/terrarum.md).
pub fn looks_like_header(text: &[u8]) -> bool {
    if text.len() > HEADER_TEXT_LIMIT {
        return false;
    }
    let Ok(lines) = lines(text) else {
        return false;
    };
    let mut lines = lines;
    lines.any(|line| {
        key_value(&line).is_ok_and(|(key, _)| key == "kind") && !line.content().is_empty()
    })
}

/// Parses a header text into the header it describes. With `current` (the disk's header),
/// the result keeps its disk CRC and a world's quicksave bit; without, it is a new disk's.
pub fn parse_header(text: &[u8], current: Option<&Header>) -> Result<Header> {
    if text.len() > HEADER_TEXT_LIMIT {
        return Err(Error::invalid(format!(
            "a header text of {} bytes; header.txt has at most {HEADER_TEXT_LIMIT}",
            text.len()
        )));
    }
    let mut fields = Fields::default();
    let last_line = read_fields(text, |key, value| fields.take(key, value))?;
    let missing = |key: &str| Error::at(last_line + 1, 1, format!("`{key}` is missing"));
    let name = fields.name.ok_or_else(|| missing("name"))?;
    let (kind, kind_line) = fields.kind.ok_or_else(|| missing("kind"))?;
    let defaults = HeaderFields::default();
    let (mut save_mode, save_line) = fields.save_mode.unwrap_or((defaults.save_mode, 0));
    if kind == 2 {
        if save_mode & DIRTY_BIT != 0 {
            return Err(Error::at(
                save_line,
                1,
                "save_mode: bit 0 of a world's save mode (quicksaved) is kept by the disk; \
                 write the value without it",
            ));
        }
        if current.is_some_and(|c| c.kind() == DiskKind::World) {
            save_mode |= current.map_or(0, |c| c.save_mode() & DIRTY_BIT);
        }
    }
    if let Some(c) = current {
        let current_kind = c.fields().kind;
        if current_kind != kind {
            return Err(Error::at(
                kind_line,
                1,
                format!(
                    "kind: the disk is a {} disk; its kind decides the files of the mount and \
                     cannot change through it",
                    kind_word(current_kind)
                ),
            ));
        }
    }
    let base = match current {
        Some(c) => c.clone(),
        None => Header::new("", kind)?,
    };
    base.with_fields(&HeaderFields {
        name,
        capacity: fields.capacity.unwrap_or(defaults.capacity),
        marker: fields.marker.unwrap_or(defaults.marker),
        flags: fields.flags.unwrap_or(defaults.flags),
        save_mode,
        kind,
        origin: fields.origin.unwrap_or(defaults.origin),
        snapshot: fields.snapshot.unwrap_or(defaults.snapshot),
        game_mode: fields.game_mode.unwrap_or(defaults.game_mode),
        reserved: fields.reserved.unwrap_or(defaults.reserved),
    })
    .map_err(|e| Error::at(fields.name_line, 1, e.message()))
}

/// The keys of `header.txt` as read so far (with the lines some errors name).
#[derive(Default)]
struct Fields {
    name: Option<Vec<u8>>,
    name_line: usize,
    kind: Option<(u8, usize)>,
    save_mode: Option<(u8, usize)>,
    origin: Option<u8>,
    snapshot: Option<[u8; 2]>,
    game_mode: Option<u8>,
    flags: Option<u8>,
    capacity: Option<u64>,
    marker: Option<u8>,
    reserved: Option<[u8; 9]>,
}

const KEYS: &str =
    "name, kind, save_mode, origin, snapshot, game_mode, flags, capacity, marker, reserved";

fn byte(value: &mut Cursor<'_>, what: &str) -> Result<u8> {
    Ok(value.int(what, 0, 255)? as u8)
}

impl Fields {
    /// Reads the value of `key`; false when the key was given before.
    fn take(&mut self, key: &str, value: &mut Cursor<'_>) -> Result<bool> {
        let line = value.line;
        let fresh = match key {
            "name" => {
                let name = value.quoted("name")?;
                if name.len() > 268 {
                    return Err(line.error(format!(
                        "name of {} bytes; a TVDA name holds at most 268",
                        name.len()
                    )));
                }
                if name.last() == Some(&0) {
                    return Err(line.error(
                        "name ends with \\0: trailing NULs are the name's padding; leave them out",
                    ));
                }
                self.name_line = line.number;
                self.name.replace(name).is_none()
            }
            "kind" => {
                let word = value.rest();
                let kind = match word {
                    "undefined" => 0,
                    "player" => 1,
                    "world" => 2,
                    _ => parse_int(word)
                        .filter(|n| (3..=255).contains(n))
                        .ok_or_else(|| {
                            line.error_at(
                                word,
                                format!(
                                    "kind `{}` is not player, world, undefined or a number 3-255",
                                    excerpt(word)
                                ),
                            )
                        })? as u8,
                };
                self.kind.replace((kind, line.number)).is_none()
            }
            "save_mode" => {
                let v = byte(value, "save_mode")?;
                self.save_mode.replace((v, line.number)).is_none()
            }
            "origin" => {
                let v = byte(value, "origin")?;
                self.origin.replace(v).is_none()
            }
            "snapshot" => {
                let v = parse_snapshot(value)?;
                self.snapshot.replace(v).is_none()
            }
            "game_mode" => {
                let v = byte(value, "game_mode")?;
                self.game_mode.replace(v).is_none()
            }
            "flags" => {
                let v = byte(value, "flags")?;
                self.flags.replace(v).is_none()
            }
            "capacity" => {
                let v = value.int("capacity", 0, (1 << 48) - 1)? as u64;
                self.capacity.replace(v).is_none()
            }
            "marker" => {
                let v = byte(value, "marker")?;
                self.marker.replace(v).is_none()
            }
            "reserved" => {
                let word = value.rest();
                let reserved = reserved_bytes(word).ok_or_else(|| {
                    line.error_at(word, "reserved must be 0x and 18 hexadecimal digits")
                })?;
                self.reserved.replace(reserved).is_none()
            }
            _ => {
                return Err(line.error(format!("unknown key `{}` (expected {KEYS})", excerpt(key))))
            }
        };
        Ok(fresh)
    }
}

fn reserved_bytes(word: &str) -> Option<[u8; 9]> {
    let hex = word.strip_prefix("0x")?;
    if hex.len() != 18 || !hex.is_ascii() {
        return None;
    }
    let mut out = [0; 9];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header_of(f: HeaderFields) -> Header {
        Header::new("", f.kind).unwrap().with_fields(&f).unwrap()
    }

    #[test]
    fn renders_and_parses_back_every_field() {
        let mut name = "Zoë \"the\" \\ builder\n".as_bytes().to_vec();
        name.extend_from_slice(&[0, 0xff, b'x']);
        let h = header_of(HeaderFields {
            name,
            capacity: 0xffff_ffff,
            marker: 0,
            flags: 1,
            save_mode: 3,
            kind: 1,
            origin: 16,
            snapshot: [0x80 | 23, (40 << 2) | 1],
            game_mode: 0x81,
            reserved: [0, 0, 0, 0, 0, b'W', b'X', b'Y', b'Z'],
        });
        let text = render_header(&h);
        let shown = String::from_utf8(text.clone()).unwrap();
        assert!(shown.contains("snapshot = 23w40f"), "{shown}");
        assert!(shown.contains("kind = player"), "{shown}");
        assert!(shown.contains("reserved = 0x0000000000"), "{shown}");
        assert!(looks_like_header(&text));
        assert_eq!(parse_header(&text, None).unwrap(), h);
        assert_eq!(parse_header(&text, Some(&h)).unwrap(), h);
    }

    #[test]
    fn every_snapshot_number_round_trips() {
        for n in 0..=u16::MAX {
            let s = n.to_be_bytes();
            let text = format!("snapshot = {}", snapshot_word(s));
            let line = crate::text::numbered(&text).next().unwrap();
            let (_, mut value) = key_value(&line).unwrap();
            assert_eq!(parse_snapshot(&mut value).unwrap(), s, "{text}");
        }
    }

    #[test]
    fn a_minimal_text_makes_a_new_disk_header() {
        let h = parse_header(b"name = \"W\"\nkind = world\n", None).unwrap();
        assert_eq!(h, Header::new("W", 2).unwrap());
        let shown = String::from_utf8(render_header(&h)).unwrap();
        assert!(!shown.contains("marker"), "{shown}");
        assert!(!shown.contains("reserved"), "{shown}");
    }

    #[test]
    fn a_worlds_quicksave_bit_is_kept_by_the_disk() {
        let mut dirty = Header::new("W", 2).unwrap();
        dirty.set_save_mode(3);
        dirty.set_disk_crc(0x1234_5678);
        let text = render_header(&dirty);
        assert!(String::from_utf8_lossy(&text).contains("save_mode = 2"));
        assert_eq!(parse_header(&text, Some(&dirty)).unwrap(), dirty);
        let mut clean = dirty.clone();
        clean.set_save_mode(2);
        assert_eq!(render_header(&clean), text);
        assert_eq!(parse_header(&text, Some(&clean)).unwrap(), clean);
        let err = parse_header(b"name = \"W\"\nkind = world\nsave_mode = 3\n", None).unwrap_err();
        assert!(err.message().contains("line 3"), "{}", err.message());
    }

    #[test]
    fn bad_texts_name_their_line_and_reason() {
        let player = Header::new("P", 1).unwrap();
        let cases: [(&[u8], &str); 12] = [
            (b"name = \"P\"\n", "line 2, column 1: `kind` is missing"),
            (b"kind = player\n", "`name` is missing"),
            (b"name = P\nkind = player\n", "line 1"),
            (
                b"name = \"P\"\nkind = elf\n",
                "line 2, column 8: kind `elf`",
            ),
            (
                b"name = \"P\"\nkind = player\nkind = player\n",
                "line 3, column 1: `kind` is given twice",
            ),
            (
                b"name = \"P\"\nkind = player\ncolour = red\n",
                "line 3, column 1: unknown key `colour`",
            ),
            (
                b"name = \"P\"\nkind = player\norigin = 256\n",
                "line 3, column 10: origin 256 is out of range",
            ),
            (
                b"name = \"P\"\nkind = player\nsnapshot = 23w99a\n",
                "line 3, column 12: snapshot `23w99a`",
            ),
            (
                b"name = \"P\"\nkind = player\nreserved = 0x00\n",
                "line 3, column 12: reserved must be",
            ),
            (
                b"name = \"P\\0\"\nkind = player\n",
                "line 1, column 1: name ends with \\0",
            ),
            (
                b"name = \"P\"\nkind = world\n",
                "line 2, column 1: kind: the disk is a player disk",
            ),
            (b"name = \"P\"\nkind = player\x80\n", "line 2"),
        ];
        for (text, want) in cases {
            let err = parse_header(text, Some(&player)).unwrap_err();
            assert!(
                err.message().contains(want),
                "{:?}: {} lacks {want}",
                String::from_utf8_lossy(text),
                err.message()
            );
        }
        let long = format!("name = \"{}\"\nkind = player\n", "x".repeat(269));
        assert!(parse_header(long.as_bytes(), None)
            .unwrap_err()
            .message()
            .contains("at most 268"));
        assert!(!looks_like_header(b"name = \"P\"\n"));
        assert!(!looks_like_header(b"TEVd\xfe"));
    }
}
