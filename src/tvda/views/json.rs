//! The JSON entries as text files: `savegameinfo.json` (entry -1) and `actors/ID.json`.
//!
//! Terrarum writes these as compact UTF-8 JSON whose first key is `genver`; the loader finds
//! it with a regex over the first 128 characters. The view pretty-prints them (key order
//! kept, so `genver` stays first and near the top) and turns an edited text back into the
//! compact stored form with `genver` first. A text whose JSON value equals the stored one
//! gives back the stored bytes unchanged, so saving an unedited file rewrites nothing.

use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// The most memory a JSON text may take once decoded.
pub const JSON_MEMORY_LIMIT: usize = 16 << 20;
/// Memory of one decoded JSON value with its slot in a list or map (serde_json's `Value`
/// is 32 bytes; a map entry adds its key, hash and index).
const VALUE_COST: usize = 80;

/// Refuses a JSON text whose decoded form would take more than [`JSON_MEMORY_LIMIT`]: a
/// short text of many tiny values (`[0,0,0,…]`) decodes to 40 times its size.
fn check_size(text: &[u8]) -> Result<()> {
    let values = text
        .iter()
        .filter(|&&b| matches!(b, b',' | b':' | b'[' | b'{'))
        .count()
        + 1;
    let need = text.len().saturating_add(values.saturating_mul(VALUE_COST));
    if need > JSON_MEMORY_LIMIT {
        return Err(Error::new(
            libc::EFBIG,
            format!(
                "JSON of {} bytes would take about {} MiB decoded; worldfs decodes at most {} MiB (the stored bytes stay readable under entries/)",
                text.len(),
                need >> 20,
                JSON_MEMORY_LIMIT >> 20
            ),
        ));
    }
    Ok(())
}

/// Parses JSON text; a syntax error carries its line and column.
pub fn parse_value(text: &[u8]) -> Result<Value> {
    check_size(text)?;
    serde_json::from_slice(text).map_err(|e| Error::at(e.line(), e.column(), e))
}

/// Parses a stored JSON entry; a bad one is corrupt data.
pub fn parse_stored(stored: &[u8]) -> Result<Value> {
    check_size(stored)?;
    serde_json::from_slice(stored).map_err(|e| Error::corrupt(format!("stored JSON: {e}")))
}

/// The pretty-printed text of a stored JSON entry, ending with a newline.
pub fn render_json(stored: &[u8]) -> Result<Vec<u8>> {
    let value = parse_stored(stored)?;
    let mut out = serde_json::to_vec_pretty(&value)
        .map_err(|e| Error::corrupt(format!("cannot print JSON: {e}")))?;
    out.push(b'\n');
    Ok(out)
}

/// The stored form of an edited `savegameinfo.json`: an object with an integer `genver`,
/// written compact with `genver` as the first key.
pub fn parse_info_json(text: &[u8], stored: &[u8]) -> Result<Vec<u8>> {
    let value = parse_value(text)?;
    let Value::Object(map) = value else {
        return Err(Error::at(1, 1, "savegameinfo.json must be a JSON object"));
    };
    match map.get("genver") {
        Some(v) if v.is_i64() || v.is_u64() => {}
        Some(_) => return Err(Error::invalid("\"genver\" must be an integer")),
        None => {
            return Err(Error::invalid(
                "\"genver\" is missing (the game needs it as the first key)",
            ))
        }
    }
    store_object(map, stored)
}

/// The stored form of an edited actor JSON: an object, written compact, key order kept
/// except that a `genver` key moves first.
pub fn parse_actor_json(text: &[u8], stored: &[u8]) -> Result<Vec<u8>> {
    match parse_value(text)? {
        Value::Object(map) => store_object(map, stored),
        _ => Err(Error::at(1, 1, "an actor file must be a JSON object")),
    }
}

/// The compact stored form of `map` (genver first), or `stored` itself when it holds the
/// same value.
pub fn store_object(map: Map<String, Value>, stored: &[u8]) -> Result<Vec<u8>> {
    let value = Value::Object(genver_first(map));
    if parse_stored(stored).ok().as_ref() == Some(&value) {
        return Ok(stored.to_vec());
    }
    serde_json::to_vec(&value).map_err(|e| Error::invalid(format!("cannot write JSON: {e}")))
}

fn genver_first(mut map: Map<String, Value>) -> Map<String, Value> {
    let Some(genver) = map.shift_remove("genver") else {
        return map;
    };
    let mut out = Map::with_capacity(map.len() + 1);
    out.insert("genver".to_string(), genver);
    out.extend(map);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pretty_keeps_genver_first_and_round_trips() {
        let stored =
            br#"{"genver":83886082,"worldIndex":"u","width":180,"f":0.25,"a":[1,{"b":null}]}"#;
        let text = render_json(stored).unwrap();
        let s = String::from_utf8(text.clone()).unwrap();
        assert!(s.starts_with("{\n  \"genver\": 83886082,"));
        assert_eq!(parse_info_json(&text, stored).unwrap(), stored);
        let edited = s.replace("180", "270");
        let back = parse_info_json(edited.as_bytes(), stored).unwrap();
        assert_eq!(
            back,
            br#"{"genver":83886082,"worldIndex":"u","width":270,"f":0.25,"a":[1,{"b":null}]}"#
        );
    }

    #[test]
    fn genver_moves_first_and_errors_have_positions() {
        let back = parse_info_json(br#"{"a":1,"genver":2}"#, b"").unwrap();
        assert_eq!(back, br#"{"genver":2,"a":1}"#);
        let e = parse_info_json(b"{\n  \"genver\": 1,\n  \"a\": }", b"").unwrap_err();
        assert_eq!(e.errno(), libc::EINVAL);
        assert!(e.message().starts_with("line 3, column"), "{e}");
        assert!(parse_info_json(br#"{"a":1}"#, b"").is_err());
        assert!(parse_info_json(br#"{"genver":"1"}"#, b"").is_err());
        assert!(parse_info_json(b"[1]", b"").is_err());
        assert!(parse_actor_json(b"1", b"").is_err());
        assert!(render_json(b"{").is_err());
    }
}
