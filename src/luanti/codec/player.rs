//! The player file format: the `players/NAME` file of the mount, and of the files backend.
//!
//! A player file is a Settings block (`key = value` lines, `"""` multi-line values) ended by a
//! `PlayerArgsEnd` line, followed by the player's inventory in the inventory text format. The
//! keys are `breath`, `extended_attributes` (the player metadata as a JSON object of strings),
//! `hp`, `name`, `pitch`, `position` (`(x,y,z)` in BS units, node × 10), `version` and `yaw`.
//!
//! Rendering is deterministic: keys sorted, numbers in their shortest form that reads back to
//! the same `f32` (the engine's own six significant digits lose precision), metadata as a
//! pretty-printed JSON object with sorted keys. [`parse_player`] is the strict reader for
//! edited text; [`read_player_file`] reads a stored file the way the engine does (missing keys
//! take the engine's defaults, keys worldfs does not know are kept in [`Player::extra`]).

use std::collections::BTreeMap;

use crate::error::{excerpt, Error, Result};
use crate::luanti::codec::block::Inventory;
use crate::luanti::codec::inventory::{check_inventory, parse_inventory, serialize_inventory};
use crate::luanti::codec::settings::{self, Entry, Mode, Value};

/// The line that ends the settings part of a player file.
pub const END_LINE: &str = "PlayerArgsEnd";
/// The engine's default hp for a player file without `hp`.
pub const DEFAULT_HP: u16 = 20;
/// The engine's default breath.
pub const DEFAULT_BREATH: u16 = 10;

/// One player, whatever backend stores it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Player {
    pub name: String,
    pub hp: u16,
    pub breath: u16,
    /// Position in BS units (node coordinate × 10).
    pub position: [f32; 3],
    /// Degrees.
    pub pitch: f32,
    /// Degrees.
    pub yaw: f32,
    /// Player metadata (`extended_attributes` / `player_metadata` rows).
    pub metadata: BTreeMap<String, String>,
    pub inventory: Inventory,
    /// Keys of a stored player file that worldfs does not interpret (such as the legacy
    /// `craftresult_is_preview`), kept so that saving the file does not drop them.
    pub extra: BTreeMap<String, String>,
}

const KNOWN_KEYS: [&str; 8] = [
    "breath",
    "extended_attributes",
    "hp",
    "name",
    "pitch",
    "position",
    "version",
    "yaw",
];
const REQUIRED_KEYS: [&str; 6] = ["breath", "hp", "name", "pitch", "position", "yaw"];

/// Writes the player file.
pub fn render_player(player: &Player) -> Vec<u8> {
    let mut values: BTreeMap<&str, String> = BTreeMap::new();
    for (key, value) in &player.extra {
        values.insert(key, value.clone());
    }
    let [x, y, z] = player.position;
    values.insert("breath", player.breath.to_string());
    values.insert("extended_attributes", render_metadata(&player.metadata));
    values.insert("hp", player.hp.to_string());
    values.insert("name", player.name.clone());
    values.insert("pitch", player.pitch.to_string());
    values.insert("position", format!("({x},{y},{z})"));
    values.insert("version", "1".to_string());
    values.insert("yaw", player.yaw.to_string());
    let mut out = Vec::new();
    for (key, value) in &values {
        settings::write_entry(&mut out, key, value);
    }
    out.extend_from_slice(END_LINE.as_bytes());
    out.push(b'\n');
    out.extend_from_slice(&serialize_inventory(&player.inventory));
    out
}

fn render_metadata(metadata: &BTreeMap<String, String>) -> String {
    if metadata.is_empty() {
        return "{}".to_string();
    }
    let object: serde_json::Map<String, serde_json::Value> = metadata
        .iter()
        .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
        .collect();
    let object = serde_json::Value::Object(object);
    // A JSON object of strings always serializes.
    serde_json::to_string_pretty(&object).unwrap_or_default()
}

/// Parses an edited player file strictly: unknown keys (except the ones `stored` kept in
/// [`Player::extra`]), missing keys, bad numbers, a bad inventory, a list whose slot count
/// differs from its size or a missing `PlayerArgsEnd` are errors with their line.
pub fn parse_player(text: &[u8], stored: Option<&Player>) -> Result<Player> {
    parse(text, Strictness::Edit(stored))
}

/// Reads a player file as stored by the engine (or worldfs); errors are `corrupt`.
pub fn read_player_file(bytes: &[u8]) -> Result<Player> {
    parse(bytes, Strictness::Stored).map_err(|e| Error::corrupt(e.message()))
}

#[derive(Clone, Copy)]
enum Strictness<'a> {
    Edit(Option<&'a Player>),
    Stored,
}

fn parse(text: &[u8], strictness: Strictness<'_>) -> Result<Player> {
    let parsed = settings::parse(text, Some(END_LINE), Mode::Strict)?;
    let mut player = Player {
        hp: DEFAULT_HP,
        breath: DEFAULT_BREATH,
        ..Player::default()
    };
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for entry in &parsed.entries {
        let value = match &entry.value {
            Value::Text(v) => v,
            Value::Group(_) => return Err(Error::at(entry.line, 1, "groups are not allowed here")),
        };
        if let Some(first) = seen.insert(&entry.key, entry.line) {
            return Err(Error::at(
                entry.line,
                1,
                format!("key {:?} appears twice (first on line {first})", entry.key),
            ));
        }
        apply_key(&mut player, entry, value, strictness)?;
    }
    if let Strictness::Edit(_) = strictness {
        for key in REQUIRED_KEYS {
            if !seen.contains_key(key) {
                return Err(Error::at(
                    parsed.rest_line.saturating_sub(1).max(1),
                    1,
                    format!("missing key {key:?}"),
                ));
            }
        }
    }
    if player.name.is_empty() {
        return Err(Error::at(1, 1, "the player has no name"));
    }
    let inventory_text = text.get(parsed.rest..).unwrap_or_default();
    let offset = parsed.rest_line - 1;
    if let Strictness::Edit(_) = strictness {
        check_slot_counts(inventory_text, offset)?;
    }
    player.inventory = parse_inventory(inventory_text).map_err(|e| shift_line(e, offset))?;
    check_inventory(&player.inventory).map_err(|e| Error::at(parsed.rest_line, 1, e))?;
    Ok(player)
}

fn apply_key(
    player: &mut Player,
    entry: &Entry,
    value: &str,
    strictness: Strictness<'_>,
) -> Result<()> {
    let at = |msg: String| Error::at(entry.line, 1, msg);
    match entry.key.as_str() {
        "name" => {
            check_name(value).map_err(|m| at(format!("name: {m}")))?;
            player.name = value.to_string();
        }
        "hp" => player.hp = parse_u16(value).map_err(|m| at(format!("hp: {m}")))?,
        "breath" => player.breath = parse_u16(value).map_err(|m| at(format!("breath: {m}")))?,
        "pitch" => player.pitch = parse_f32(value).map_err(|m| at(format!("pitch: {m}")))?,
        "yaw" => player.yaw = parse_f32(value).map_err(|m| at(format!("yaw: {m}")))?,
        "position" => {
            player.position = parse_v3f(value).map_err(|m| at(format!("position: {m}")))?
        }
        "version" => {
            value
                .parse::<i32>()
                .map_err(|_| at(format!("version: {:?} is not an integer", excerpt(value))))?;
        }
        "extended_attributes" => {
            player.metadata = parse_metadata(value, entry.line, strictness)?;
        }
        key => {
            let kept = match strictness {
                Strictness::Stored => true,
                Strictness::Edit(stored) => stored.is_some_and(|p| p.extra.contains_key(key)),
            };
            if !kept {
                return Err(at(format!(
                    "unknown key {:?} (known: {})",
                    excerpt(key),
                    KNOWN_KEYS.join(", ")
                )));
            }
            player.extra.insert(key.to_string(), value.to_string());
        }
    }
    Ok(())
}

/// Checks a player name: something every backend and the auth.txt line can hold.
pub fn check_name(name: &str) -> std::result::Result<(), String> {
    if name.is_empty() {
        return Err("empty".to_string());
    }
    if let Some(c) = name.chars().find(|c| c.is_control() || *c == ':') {
        return Err(format!("character {c:?} is not allowed in a player name"));
    }
    if settings::trim(name) != name {
        return Err("leading or trailing spaces".to_string());
    }
    Ok(())
}

fn parse_u16(value: &str) -> std::result::Result<u16, String> {
    value
        .parse::<u16>()
        .map_err(|_| format!("{:?} is not a whole number from 0 to 65535", excerpt(value)))
}

fn parse_f32(value: &str) -> std::result::Result<f32, String> {
    let trimmed = settings::trim(value);
    match trimmed.parse::<f32>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(format!("{:?} is not a finite number", excerpt(value))),
    }
}

fn parse_v3f(value: &str) -> std::result::Result<[f32; 3], String> {
    let inner = value
        .strip_prefix('(')
        .and_then(|v| v.strip_suffix(')'))
        .ok_or_else(|| format!("{:?} is not of the form (x,y,z)", excerpt(value)))?;
    let parts: Vec<&str> = inner.split(',').collect();
    let [x, y, z] = parts.as_slice() else {
        return Err(format!(
            "{:?} does not have three coordinates",
            excerpt(value)
        ));
    };
    Ok([parse_f32(x)?, parse_f32(y)?, parse_f32(z)?])
}

fn parse_metadata(
    value: &str,
    line: usize,
    strictness: Strictness<'_>,
) -> Result<BTreeMap<String, String>> {
    let json: serde_json::Value = serde_json::from_str(value).map_err(|e| {
        let block = usize::from(value.contains('\n'));
        Error::at(
            line + block + e.line().saturating_sub(1),
            e.column().max(1),
            format!("extended_attributes: {e}"),
        )
    })?;
    let object = match json {
        serde_json::Value::Null => return Ok(BTreeMap::new()),
        serde_json::Value::Object(o) => o,
        _ => {
            return Err(Error::at(
                line,
                1,
                "extended_attributes must be a JSON object of strings",
            ))
        }
    };
    let mut out = BTreeMap::new();
    for (key, v) in object {
        let text = match (v, strictness) {
            (serde_json::Value::String(s), _) => s,
            // The engine reads other scalars with jsoncpp's asString().
            (serde_json::Value::Null, Strictness::Stored) => String::new(),
            (serde_json::Value::Bool(b), Strictness::Stored) => b.to_string(),
            (serde_json::Value::Number(n), Strictness::Stored) => n.to_string(),
            _ => {
                return Err(Error::at(
                    line,
                    1,
                    format!("extended_attributes: the value of {key:?} must be a string"),
                ))
            }
        };
        out.insert(key, text);
    }
    Ok(out)
}

/// Checks that every `List NAME SIZE` has exactly SIZE `Item`/`Empty` lines (the engine pads
/// short lists silently, which would hide a deleted line in an edit). `offset` is the number of
/// lines before the inventory text.
fn check_slot_counts(text: &[u8], offset: usize) -> Result<()> {
    let mut open: Option<(usize, &str, u64, u64)> = None;
    for (i, raw) in text.split(|&b| b == b'\n').enumerate() {
        let number = offset + i + 1;
        let Ok(line) = std::str::from_utf8(raw) else {
            continue;
        };
        let mut words = line.split(' ');
        let keyword = settings::trim(words.next().unwrap_or_default());
        match keyword {
            "List" => {
                let name = words.next().unwrap_or_default();
                let size = words
                    .next()
                    .and_then(|s| settings::trim(s).parse::<u64>().ok());
                open = size.map(|size| (number, name, size, 0));
            }
            "Item" | "Empty" => {
                if let Some((_, _, _, count)) = open.as_mut() {
                    *count += 1;
                }
            }
            "EndInventoryList" | "end" => {
                if let Some((line, name, size, count)) = open.take() {
                    if size != count {
                        return Err(Error::at(
                            line,
                            1,
                            format!("list {name:?} has size {size} but {count} slot lines"),
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Moves the `line N` of an error from the inventory text to the whole file.
fn shift_line(error: Error, offset: usize) -> Error {
    let message = error.message();
    let parsed = message.strip_prefix("line ").and_then(|rest| {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let number: usize = rest.get(..digits)?.parse().ok()?;
        Some((number, rest.get(digits..)?))
    });
    match parsed {
        Some((number, rest)) => {
            Error::new(error.errno(), format!("line {}{rest}", number + offset))
        }
        None => error.context(format!("inventory (from line {})", offset + 1)),
    }
}

impl Player {
    /// Checks that the player can be stored and read back unchanged by every backend.
    pub fn validate(&self) -> Result<()> {
        check_name(&self.name).map_err(|m| Error::invalid(format!("player name: {m}")))?;
        let numbers = [
            self.position[0],
            self.position[1],
            self.position[2],
            self.pitch,
            self.yaw,
        ];
        if numbers.iter().any(|v| !v.is_finite()) {
            return Err(Error::invalid("position, pitch and yaw must be finite"));
        }
        for (key, value) in &self.extra {
            let bad_key = key.is_empty()
                || KNOWN_KEYS.contains(&key.as_str())
                || key.contains(['=', '\n', '#'])
                || settings::trim(key) != key;
            if bad_key || !settings::writable(value) {
                return Err(Error::invalid(format!(
                    "kept key {key:?} cannot be written"
                )));
            }
        }
        check_inventory(&self.inventory)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shift_line_moves_positions() {
        let e = shift_line(Error::at(3, 4, "bad"), 10);
        assert_eq!(e.message(), "line 13, column 4: bad");
        let e = shift_line(Error::invalid("no position"), 10);
        assert_eq!(e.message(), "inventory (from line 11): no position");
    }

    #[test]
    fn slot_counts_are_checked() {
        let text = b"List main 2\nWidth 0\nEmpty\nEndInventoryList\nEndInventory\n";
        let e = check_slot_counts(text, 5).unwrap_err();
        assert!(e.message().starts_with("line 6,"), "{e}");
        let ok = b"List main 1\nWidth 0\nEmpty\nEndInventoryList\nEndInventory\n";
        assert!(check_slot_counts(ok, 0).is_ok());
    }

    #[test]
    fn positions_need_three_finite_numbers() {
        assert_eq!(parse_v3f("(1.5, -2,3)").unwrap(), [1.5, -2.0, 3.0]);
        assert!(parse_v3f("(1,2)").is_err());
        assert!(parse_v3f("(1,2,x)").is_err());
        assert!(parse_v3f("(1,2,inf)").is_err());
        assert!(parse_v3f("1,2,3").is_err());
    }

    #[test]
    fn metadata_renders_as_sorted_json() {
        let mut m = BTreeMap::new();
        m.insert("b".to_string(), "two\nlines".to_string());
        m.insert("a".to_string(), "1".to_string());
        let text = render_metadata(&m);
        assert_eq!(text, "{\n  \"a\": \"1\",\n  \"b\": \"two\\nlines\"\n}");
        assert_eq!(parse_metadata(&text, 1, Strictness::Edit(None)).unwrap(), m);
        assert!(parse_metadata("{\"a\": 1}", 1, Strictness::Edit(None)).is_err());
        assert_eq!(
            parse_metadata("{\"a\": 1}", 1, Strictness::Stored).unwrap()["a"],
            "1"
        );
        assert!(parse_metadata("null\n", 1, Strictness::Stored)
            .unwrap()
            .is_empty());
    }
}
