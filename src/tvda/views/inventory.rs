//! A player's inventory as a text file: one `ITEM QUANTITY` line per item of the player
//! JSON's `inventory.itemList`.
//!
//! The list is a sorted list of `InventoryPair {itm, qty}`; libGDX may store it as a plain
//! array or as `{"arrayList": [...]}`, and whichever shape the JSON has is kept. Writing the
//! text back replaces the list: kept items keep any other fields of their pair, new ones are
//! `{"itm", "qty"}`, and the list is sorted by item ID the way `InventoryPair.compareTo`
//! (Java string order) sorts it, since the game binary-searches it.

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::text;
use crate::tvda::views::json::{parse_stored, store_object};

const HEADER: &str = "# ITEM QUANTITY, one item per line; lines starting with # are ignored\n";

/// Whether a player JSON has an inventory item list.
pub fn has_inventory(player_json: &[u8]) -> bool {
    parse_stored(player_json)
        .ok()
        .and_then(|mut v| item_list(&mut v).ok().map(|_| ()))
        .is_some()
}

/// The inventory text of a stored player JSON.
pub fn render_inventory(player_json: &[u8]) -> Result<Vec<u8>> {
    let mut value = parse_stored(player_json)?;
    let mut out = String::from(HEADER);
    for pair in item_list(&mut value)?.iter() {
        let (item, qty) = pair_fields(pair)?;
        out.push_str(&format!("{item} {qty}\n"));
    }
    Ok(out.into_bytes())
}

/// The stored player JSON with its item list replaced by the inventory `text`.
pub fn apply_inventory(player_json: &[u8], text: &[u8]) -> Result<Vec<u8>> {
    let items = parse_inventory(text)?;
    let mut value = parse_stored(player_json)?;
    let list = item_list(&mut value)?;
    let mut kept: Map<String, Value> = Map::new();
    for pair in list.iter() {
        let (item, _) = pair_fields(pair)?;
        kept.insert(item.to_string(), pair.clone());
    }
    let mut pairs = Vec::with_capacity(items.len());
    for (item, qty) in items {
        let mut pair = match kept.get(&item) {
            Some(Value::Object(obj)) => obj.clone(),
            _ => Map::new(),
        };
        pair.insert("itm".into(), Value::String(item));
        pair.insert("qty".into(), Value::from(qty));
        pairs.push(Value::Object(pair));
    }
    pairs.sort_by(|a, b| {
        let key = |v: &Value| {
            v.get("itm")
                .and_then(Value::as_str)
                .unwrap_or("")
                .encode_utf16()
                .collect::<Vec<u16>>()
        };
        key(a).cmp(&key(b))
    });
    *list = pairs;
    match value {
        Value::Object(map) => store_object(map, player_json),
        _ => Err(Error::corrupt("player JSON is not an object")),
    }
}

/// Parses inventory text into (item, quantity) pairs, in the order written.
pub fn parse_inventory(text: &[u8]) -> Result<Vec<(String, i64)>> {
    let text = text::decode(text, "text is not UTF-8")?;
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for line in text::numbered(text) {
        if line.is_blank_or_comment() {
            continue;
        }
        let content = line.text.trim();
        let Some((item, qty)) = content.rsplit_once(char::is_whitespace) else {
            return Err(line.error_at(content, "expected ITEM QUANTITY"));
        };
        let item = item.trim_end();
        let qty_value: i64 = qty
            .parse()
            .map_err(|_| line.error_at(qty, format!("quantity {qty:?} is not a whole number")))?;
        if qty_value <= 0 {
            return Err(line.error_at(
                qty,
                "quantity must be positive (delete the line to remove the item)",
            ));
        }
        if !seen.insert(item.to_string()) {
            return Err(line.error_at(content, format!("item {item} is listed twice")));
        }
        out.push((item.to_string(), qty_value));
    }
    Ok(out)
}

fn item_list(value: &mut Value) -> Result<&mut Vec<Value>> {
    let list = value
        .get_mut("inventory")
        .and_then(|inv| inv.get_mut("itemList"))
        .ok_or_else(|| Error::not_found("the player JSON has no inventory.itemList"))?;
    let list = match list {
        Value::Object(obj) => obj.get_mut("arrayList"),
        other => Some(other),
    };
    match list {
        Some(Value::Array(items)) => Ok(items),
        _ => Err(Error::corrupt("inventory.itemList is not a list")),
    }
}

fn pair_fields(pair: &Value) -> Result<(&str, i64)> {
    let item = pair.get("itm").and_then(Value::as_str);
    let qty = pair.get("qty").and_then(Value::as_i64);
    match (item, qty) {
        (Some(item), Some(qty)) => Ok((item, qty)),
        _ => Err(Error::corrupt(format!(
            "inventory pair without itm/qty: {pair}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAYER: &[u8] = br#"{"genver":1,"inventory":{"maxCapacity":100,"itemList":[{"itm":"basegame:1","qty":20},{"itm":"item@basegame:3","qty":1,"x":true}],"wallet":"0"}}"#;

    #[test]
    fn renders_edits_and_keeps_shape() {
        let text = render_inventory(PLAYER).unwrap();
        assert_eq!(
            text,
            format!("{HEADER}basegame:1 20\nitem@basegame:3 1\n").as_bytes()
        );
        assert_eq!(apply_inventory(PLAYER, &text).unwrap(), PLAYER);
        let edited = b"item@basegame:3   5\n  # comment\n\nbasegame:0 2\n";
        let back = apply_inventory(PLAYER, edited).unwrap();
        assert_eq!(
            std::str::from_utf8(&back).unwrap(),
            r#"{"genver":1,"inventory":{"maxCapacity":100,"itemList":[{"itm":"basegame:0","qty":2},{"itm":"item@basegame:3","qty":5,"x":true}],"wallet":"0"}}"#
        );
        let wrapped =
            br#"{"genver":1,"inventory":{"itemList":{"arrayList":[{"itm":"a","qty":1}]}}}"#;
        let back = apply_inventory(wrapped, b"b 3\na 2\n").unwrap();
        assert_eq!(
            back,
            br#"{"genver":1,"inventory":{"itemList":{"arrayList":[{"itm":"a","qty":2},{"itm":"b","qty":3}]}}}"#
        );
        assert!(has_inventory(PLAYER));
        assert!(!has_inventory(br#"{"genver":1}"#));
    }

    #[test]
    fn bad_lines_name_their_position() {
        let e = apply_inventory(PLAYER, b"a 1\nbasegame:1\n").unwrap_err();
        assert_eq!(e.message(), "line 2, column 1: expected ITEM QUANTITY");
        let e = apply_inventory(PLAYER, b"a 1\n  b x2\n").unwrap_err();
        assert!(e.message().starts_with("line 2, column 5:"), "{e}");
        assert!(apply_inventory(PLAYER, b"a 0\n").is_err());
        assert!(apply_inventory(PLAYER, b"a 1\na 2\n").is_err());
        assert!(apply_inventory(PLAYER, b"a 1\n\xff 2\n").is_err());
        assert!(render_inventory(br#"{"genver":1}"#).is_err());
    }
}
