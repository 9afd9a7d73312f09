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
    pairs.sort_by_key(utf16_key);
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

/// The `(item, quantity)` pairs of the item list of a stored actor or player JSON, in list
/// order; `None` when it has no `inventory.itemList`.
pub fn item_pairs(stored: &[u8]) -> Result<Option<Vec<(String, i64)>>> {
    let mut value = parse_stored(stored)?;
    let Ok(list) = item_list(&mut value) else {
        return Ok(None);
    };
    list.iter()
        .map(|pair| pair_fields(pair).map(|(i, q)| (i.to_string(), q)))
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

/// Whether `item` can be written as an item ID of an inventory file: UTF-8 (a `&str`), not
/// empty, no white space or control character, not starting with `#` (a comment there).
pub fn valid_item(item: &str) -> bool {
    !item.is_empty()
        && !item.starts_with('#')
        && !item.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// The stored JSON with item `from` replaced by `to` in its item list (the quantity added to
/// `to`'s where the list holds both: item IDs are unique in the list, which stays sorted as
/// the game sorts it) and in the equipped and quick-slot references; `None` when it holds no
/// `from`.
pub fn rename_item(stored: &[u8], from: &str, to: &str) -> Result<Option<Vec<u8>>> {
    let mut value = parse_stored(stored)?;
    let Ok(list) = item_list(&mut value) else {
        return Ok(None);
    };
    let Some(at) = list
        .iter()
        .position(|p| pair_fields(p).is_ok_and(|(i, _)| i == from))
    else {
        return Ok(None);
    };
    let (_, qty) = pair_fields(&list[at])?;
    let mut pair = list.remove(at);
    match list
        .iter_mut()
        .find(|p| pair_fields(p).is_ok_and(|(i, _)| i == to))
    {
        Some(existing) => {
            let (_, had) = pair_fields(existing)?;
            let sum = had
                .checked_add(qty)
                .ok_or_else(|| Error::invalid(format!("{to}: the quantities overflow")))?;
            if let Some(obj) = existing.as_object_mut() {
                obj.insert("qty".into(), Value::from(sum));
            }
        }
        None => {
            if let Some(obj) = pair.as_object_mut() {
                obj.insert("itm".into(), Value::String(to.to_string()));
            }
            list.push(pair);
        }
    }
    list.sort_by_key(utf16_key);
    if let Some(inv) = value.get_mut("inventory") {
        for refs in ["itemEquipped", "quickSlot"] {
            if let Some(Value::Array(slots)) = inv.get_mut(refs) {
                for slot in slots.iter_mut().filter(|s| s.as_str() == Some(from)) {
                    *slot = Value::String(to.to_string());
                }
            }
        }
    }
    match value {
        Value::Object(map) => store_object(map, stored).map(Some),
        _ => Err(Error::corrupt("actor JSON is not an object")),
    }
}

/// The order `InventoryPair.compareTo` sorts item IDs in (Java string order).
fn utf16_key(pair: &Value) -> Vec<u16> {
    pair.get("itm")
        .and_then(Value::as_str)
        .unwrap_or("")
        .encode_utf16()
        .collect()
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
    fn items_are_renamed_in_the_list_and_the_references_merging_quantities() {
        let player = br#"{"genver":1,"inventory":{"itemList":[{"itm":"basegame:1","qty":20},{"itm":"item@basegame:3","qty":1,"x":true}],"itemEquipped":[null,"item@basegame:3"],"quickSlot":["basegame:1","item@basegame:3",null]}}"#;
        assert_eq!(
            item_pairs(player).unwrap(),
            Some(vec![
                ("basegame:1".to_string(), 20),
                ("item@basegame:3".to_string(), 1)
            ])
        );
        assert_eq!(rename_item(player, "nothing", "x").unwrap(), None);
        // A new name: the pair keeps its other fields, the list stays sorted.
        let back = rename_item(player, "item@basegame:3", "a:9")
            .unwrap()
            .unwrap();
        assert_eq!(
            std::str::from_utf8(&back).unwrap(),
            r#"{"genver":1,"inventory":{"itemList":[{"itm":"a:9","qty":1,"x":true},{"itm":"basegame:1","qty":20}],"itemEquipped":[null,"a:9"],"quickSlot":["basegame:1","a:9",null]}}"#
        );
        // A name the list holds: the quantities add up.
        let back = rename_item(player, "item@basegame:3", "basegame:1")
            .unwrap()
            .unwrap();
        assert_eq!(
            std::str::from_utf8(&back).unwrap(),
            r#"{"genver":1,"inventory":{"itemList":[{"itm":"basegame:1","qty":21}],"itemEquipped":[null,"basegame:1"],"quickSlot":["basegame:1","basegame:1",null]}}"#
        );
        assert_eq!(item_pairs(br#"{"genver":1}"#).unwrap(), None);
        assert_eq!(rename_item(br#"{"genver":1}"#, "a", "b").unwrap(), None);
        for bad in ["", "a b", "#x", "a\tb", "a\u{7}"] {
            assert!(!valid_item(bad), "{bad:?}");
        }
        assert!(valid_item("basegame:1") && valid_item("item@basegame:3") && valid_item("dyn:12"));
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
