//! The inventory text format and ItemStack strings ("itemstrings"), as the engine writes and
//! reads them (`Inventory::serialize`/`deSerialize`, `ItemStack::serialize`/`deSerialize`).
//!
//! The same text is stored inside node metadata, in player files and (one itemstring per
//! slot) in `players.sqlite`, and it is what users edit in `meta/X,Y,Z/inventory`. Parsing
//! therefore accepts everything the engine writes and rejects, with a line and column,
//! what the engine would silently misread: unknown keywords, a list without
//! `EndInventoryList`, more items than the list size, counts or wear outside `u16`, text
//! after the last field of an itemstring, the incremental `KeepList`/`Keep` forms.
//!
//! Quoting follows `serializeJsonStringIfNeeded`: a name or metadata string is written as a
//! JSON-style quoted string when it holds a byte ≤ 0x1F, ≥ 0x7F, a space or `"`. Inside the
//! quotes bytes ≥ 0x80 are written raw (UTF-8 stays readable); `"`, `\`, `\b \f \n \r \t`
//! are escaped and other control bytes become `\u00xx`. Decoding `\uXXXX` keeps only the low
//! byte of the number, exactly like the engine (so `\u00e9` is the single byte 0xE9, not
//! "é"); other escaped characters stand for themselves.
//!
//! Itemstrings of before 2012 are read as the engine still reads them (see
//! [`read_legacy`]): `NodeItem "NAME" COUNT`, `CraftItem NAME COUNT` and `ToolItem "NAME"
//! WEAR` stand for the item they name, so a block or a player that still holds one (an old
//! world the engine loads) decodes, shows today's form and is written in it when changed,
//! as the engine writes it. `MaterialItem` and `MaterialItem2` (node numbers of the 2011
//! node table) are refused with their name, and so is `MBOItem`, which the engine refuses
//! too.

use crate::error::{excerpt, Error, Result};
use crate::luanti::codec::block::{Inventory, InventoryList, ItemStack};

/// The most slots (sum of list sizes) one inventory may declare. A chest has 32, a player
/// about 50; the bound keeps a hostile `List x 4294967295` from allocating gigabytes.
pub const MAX_SLOTS: usize = 1 << 16;

/// Parses the inventory text format; errors name the line (and column where useful).
/// Only blank lines may follow the `EndInventory` line.
pub fn parse_inventory(text: &[u8]) -> Result<Inventory> {
    let mut budget = MAX_SLOTS;
    let (inventory, used) = read_inventory(text, &mut budget)?;
    let mut lines = Lines::new(text.get(used..).unwrap_or_default());
    let first_line = line_count(text.get(..used).unwrap_or_default());
    while let Some((n, line)) = lines.next_line() {
        if !is_blank(line) {
            return Err(Error::at(first_line + n, 1, "text after EndInventory"));
        }
    }
    Ok(inventory)
}

/// Writes the inventory text format, ending with `EndInventory\n`.
pub fn serialize_inventory(inv: &Inventory) -> Vec<u8> {
    let mut out = Vec::new();
    write_inventory(inv, &mut out);
    out
}

/// Parses one itemstring (`name [count [wear [metadata]]]`). The empty string and a count
/// of 0 give the empty stack, as in the engine.
pub fn parse_itemstring(s: &[u8]) -> Result<ItemStack> {
    read_itemstring(s)
        .map_err(|(offset, msg)| Error::invalid(format!("column {}: {msg}", column(s, offset))))
}

/// Serializes one itemstring the way the engine does (the empty stack is `""`).
pub fn serialize_itemstring(item: &ItemStack) -> Vec<u8> {
    let mut out = Vec::new();
    write_itemstring(item, &mut out);
    out
}

/// Checks that `inv` can be written as text that parses back to `inv`: list names without
/// spaces or line breaks, at most [`MAX_SLOTS`] slots in all, no duplicate list names.
pub fn check_inventory(inv: &Inventory) -> Result<()> {
    let mut slots = 0usize;
    for (i, list) in inv.lists.iter().enumerate() {
        if list.name.bytes().any(|b| b == b' ' || b == b'\n') {
            return Err(Error::invalid(format!(
                "inventory list name {:?} contains a space or line break",
                list.name
            )));
        }
        if inv.lists[..i].iter().any(|l| l.name == list.name) {
            return Err(Error::invalid(format!(
                "inventory list {:?} appears twice",
                list.name
            )));
        }
        slots = slots.saturating_add(list.slots.len());
        if slots > MAX_SLOTS {
            return Err(Error::invalid(format!(
                "inventory has more than {MAX_SLOTS} slots"
            )));
        }
    }
    Ok(())
}

/// Reads one inventory from the start of `text` up to and including its `EndInventory`
/// line; returns it and the number of bytes consumed. Declared slots are taken from
/// `slot_budget` (the caller's bound across several inventories).
pub(crate) fn read_inventory(text: &[u8], slot_budget: &mut usize) -> Result<(Inventory, usize)> {
    let mut lines = Lines::new(text);
    let mut lists: Vec<InventoryList> = Vec::new();
    loop {
        let Some((n, line)) = lines.next_line() else {
            return Err(Error::at(lines.line_no + 1, 1, "missing EndInventory"));
        };
        let (keyword, rest) = split_keyword(line);
        match keyword {
            b"EndInventory" | b"end" => {
                if rest.is_some_and(|r| !r.is_empty()) {
                    return Err(Error::at(
                        n,
                        keyword.len() + 1,
                        "unexpected text after EndInventory",
                    ));
                }
                return Ok((Inventory { lists }, lines.pos));
            }
            b"List" => {
                let list = read_list(&mut lines, n, rest.unwrap_or_default(), slot_budget)?;
                if lists.iter().any(|l| l.name == list.name) {
                    return Err(Error::at(
                        n,
                        6,
                        format!("list {:?} appears twice", list.name),
                    ));
                }
                lists.push(list);
            }
            _ if is_blank(line) => {}
            b"KeepList" => {
                return Err(Error::at(
                    n,
                    1,
                    "KeepList (the incremental network form) is not allowed here",
                ))
            }
            _ => {
                return Err(Error::at(
                    n,
                    1,
                    format!(
                        "unknown keyword {:?} outside a list (expected List or EndInventory)",
                        String::from_utf8_lossy(keyword)
                    ),
                ))
            }
        }
    }
}

/// Reads a list after its `List` header (`header` = the text after `List `).
fn read_list(
    lines: &mut Lines<'_>,
    header_line: usize,
    header: &[u8],
    slot_budget: &mut usize,
) -> Result<InventoryList> {
    let (name, size) = read_list_header(header_line, header, slot_budget)?;
    let mut width = 0u32;
    let mut slots: Vec<ItemStack> = Vec::new();
    loop {
        let Some((n, line)) = lines.next_line() else {
            return Err(Error::at(
                header_line,
                1,
                format!("list {:?} has no EndInventoryList", excerpt(&name)),
            ));
        };
        let (keyword, rest) = split_keyword(line);
        match keyword {
            b"EndInventoryList" | b"end" => {
                if rest.is_some_and(|r| !r.is_empty()) {
                    return Err(Error::at(
                        n,
                        keyword.len() + 1,
                        "unexpected text after EndInventoryList",
                    ));
                }
                slots.resize(size, ItemStack::default());
                return Ok(InventoryList { name, width, slots });
            }
            b"Width" => {
                width = rest
                    .and_then(|r| parse_decimal(r, u64::from(u32::MAX)))
                    .and_then(|w| u32::try_from(w).ok())
                    .ok_or_else(|| Error::at(n, 7, "width must be a number"))?;
            }
            b"Item" | b"Empty" => {
                if slots.len() >= size {
                    return Err(Error::at(
                        n,
                        1,
                        format!("too many items: list {:?} has {size} slots", excerpt(&name)),
                    ));
                }
                slots.push(read_slot(n, line, keyword, rest)?);
            }
            _ if is_blank(line) => {}
            _ => return Err(unexpected_in_list(n, keyword, &name)),
        }
    }
}

/// The name and size of a list from its header line, taking its slots from `slot_budget`.
fn read_list_header(
    header_line: usize,
    header: &[u8],
    slot_budget: &mut usize,
) -> Result<(String, usize)> {
    let full = [b"List ".as_slice(), header].concat();
    let (name, size_text) = match header.iter().position(|&b| b == b' ') {
        Some(i) => (&header[..i], &header[i + 1..]),
        None => return Err(Error::at(header_line, 1, "expected \"List NAME SIZE\"")),
    };
    let name = String::from_utf8(name.to_vec())
        .map_err(|_| Error::at(header_line, 6, "list name is not valid UTF-8"))?;
    let size_col = column(&full, 6 + name.len());
    let size = parse_decimal(size_text, u64::from(u32::MAX))
        .ok_or_else(|| Error::at(header_line, size_col, "list size must be a number"))?;
    let size = usize::try_from(size).unwrap_or(usize::MAX);
    if size > *slot_budget {
        return Err(Error::at(
            header_line,
            size_col,
            format!(
                "list size {size} is more than the {} slots left (at most {MAX_SLOTS} per \
                 inventory, {} per map block)",
                *slot_budget,
                super::MAX_BLOCK_SLOTS
            ),
        ));
    }
    *slot_budget -= size;
    Ok((name, size))
}

/// One `Item ITEMSTRING` or `Empty` line (line `n`) of a list.
fn read_slot(n: usize, line: &[u8], keyword: &[u8], rest: Option<&[u8]>) -> Result<ItemStack> {
    if keyword == b"Empty" {
        if rest.is_some_and(|r| !r.is_empty()) {
            return Err(Error::at(n, 6, "unexpected text after Empty"));
        }
        return Ok(ItemStack::default());
    }
    let s = rest.unwrap_or_default();
    read_itemstring(s).map_err(|(offset, msg)| Error::at(n, column(line, 5 + offset), msg))
}

/// The error for line `n` of list `name`, which starts with `keyword` that no list line has.
fn unexpected_in_list(n: usize, keyword: &[u8], name: &str) -> Error {
    if keyword == b"EndInventory" || keyword == b"List" {
        return Error::at(
            n,
            1,
            format!(
                "list {:?} has no EndInventoryList before this line",
                excerpt(name)
            ),
        );
    }
    Error::at(
        n,
        1,
        format!(
            "unknown keyword {:?} in list {:?} (expected Item, Empty, Width or EndInventoryList)",
            excerpt(&String::from_utf8_lossy(keyword)),
            excerpt(name)
        ),
    )
}

fn write_inventory(inv: &Inventory, out: &mut Vec<u8>) {
    for list in &inv.lists {
        out.extend_from_slice(b"List ");
        out.extend_from_slice(list.name.as_bytes());
        out.extend_from_slice(format!(" {}\nWidth {}\n", list.slots.len(), list.width).as_bytes());
        for item in &list.slots {
            if is_empty(item) {
                out.extend_from_slice(b"Empty\n");
            } else {
                out.extend_from_slice(b"Item ");
                write_itemstring(item, out);
                out.push(b'\n');
            }
        }
        out.extend_from_slice(b"EndInventoryList\n");
    }
    out.extend_from_slice(b"EndInventory\n");
}

/// An empty stack in the engine's sense (no name or count 0).
fn is_empty(item: &ItemStack) -> bool {
    item.name.is_empty() || item.count == 0
}

fn write_itemstring(item: &ItemStack, out: &mut Vec<u8>) {
    if is_empty(item) {
        return;
    }
    let parts = if !item.metadata.is_empty() {
        4
    } else if item.wear != 0 {
        3
    } else if item.count != 1 {
        2
    } else {
        1
    };
    write_json_string_if_needed(&item.name, out);
    if parts >= 2 {
        out.extend_from_slice(format!(" {}", item.count).as_bytes());
    }
    if parts >= 3 {
        out.extend_from_slice(format!(" {}", item.wear).as_bytes());
    }
    if parts >= 4 {
        out.push(b' ');
        write_json_string_if_needed(&item.metadata, out);
    }
}

/// An itemstring parse failure: byte offset in the string and the reason.
type ItemError = (usize, String);

fn read_itemstring(s: &[u8]) -> std::result::Result<ItemStack, ItemError> {
    let (name, mut pos) = read_word_or_json(s, 0)?;
    if let Some(kind) = Legacy::of(&name) {
        if pos < s.len() && s.get(pos) != Some(&b' ') {
            return Err((pos, "unexpected text after item name".to_string()));
        }
        return read_legacy(kind, s, pos + 1).map(normalize);
    }
    let mut item = ItemStack {
        name,
        count: 1,
        wear: 0,
        metadata: Vec::new(),
    };
    // count, then wear: each a field up to the next space
    for field in 0..2 {
        if pos >= s.len() {
            return Ok(normalize(item));
        }
        if s.get(pos) != Some(&b' ') {
            let what = if field == 0 { "item name" } else { "count" };
            return Err((pos, format!("unexpected text after {what}")));
        }
        pos += 1;
        let end = s[pos..]
            .iter()
            .position(|&b| b == b' ')
            .map_or(s.len(), |i| pos + i);
        let text = &s[pos..end];
        if text.is_empty() {
            if end == s.len() {
                return Ok(normalize(item));
            }
            return Err((pos, "unexpected space".to_string()));
        }
        let what = if field == 0 { "count" } else { "wear" };
        let value = parse_decimal(text, u64::from(u16::MAX))
            .and_then(|v| u16::try_from(v).ok())
            .ok_or_else(|| (pos, format!("{what} must be a number from 0 to 65535")))?;
        if field == 0 {
            item.count = value;
        } else {
            item.wear = value;
        }
        pos = end;
    }
    if pos >= s.len() {
        return Ok(normalize(item));
    }
    if s.get(pos) != Some(&b' ') {
        return Err((pos, "unexpected text after wear".to_string()));
    }
    pos += 1;
    if pos < s.len() {
        let (metadata, end) = read_word_or_json(s, pos)?;
        if end < s.len() {
            return Err((end, "unexpected text after metadata".to_string()));
        }
        item.metadata = metadata;
    }
    Ok(normalize(item))
}

/// The itemstring forms of before 2012, by the word they start with.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Legacy {
    /// `node`, `NodeItem`, `MaterialItem3`, `craft`, `CraftItem`: a name and a count.
    Counted,
    /// `tool`, `ToolItem`: a name and a wear.
    Tool,
    /// `MaterialItem`, `MaterialItem2`, `MBOItem`: not read.
    Numbered,
}

impl Legacy {
    fn of(word: &[u8]) -> Option<Legacy> {
        match word {
            b"node" | b"NodeItem" | b"MaterialItem3" | b"craft" | b"CraftItem" => {
                Some(Legacy::Counted)
            }
            b"tool" | b"ToolItem" => Some(Legacy::Tool),
            b"MaterialItem" | b"MaterialItem2" | b"MBOItem" => Some(Legacy::Numbered),
            _ => None,
        }
    }
}

/// The rest of a pre-2012 itemstring, from `start` (after the word and its space), as the
/// engine's `ItemStack::deSerialize` reads it ("Obsoleted on 2012-01-07"): the name is the
/// text between the first two `"` (taken as it is, no escapes) or else the first word;
/// after it and its spaces comes the count (0 reads as 1) or, for a tool, the wear (the
/// count is 1). Where the engine's `stoi` would read a leading number and ignore the rest,
/// or throw, the rest must be exactly one number up to 65535.
fn read_legacy(kind: Legacy, s: &[u8], start: usize) -> std::result::Result<ItemStack, ItemError> {
    if kind == Legacy::Numbered {
        return Err((
            0,
            "MaterialItem, MaterialItem2 and MBOItem itemstrings (of 2011, node numbers \
             instead of names) are not read: give the item as NAME COUNT"
                .to_string(),
        ));
    }
    let rest = s.get(start..).unwrap_or_default();
    let (name, after) = match rest.iter().position(|&b| b == b'"') {
        Some(open) => {
            let inside = &rest[open + 1..];
            let close = inside.iter().position(|&b| b == b'"');
            let name = &inside[..close.unwrap_or(inside.len())];
            (name, close.map_or(rest.len(), |c| open + 1 + c + 1))
        }
        None => {
            let end = rest.iter().position(|&b| b == b' ').unwrap_or(rest.len());
            (&rest[..end], end)
        }
    };
    let number_at = start
        + after
        + rest
            .get(after..)
            .unwrap_or_default()
            .iter()
            .take_while(|&&b| b == b' ')
            .count();
    let number = s.get(number_at..).unwrap_or_default();
    let trimmed = number.trim_ascii_end();
    let what = if kind == Legacy::Tool {
        "wear"
    } else {
        "count"
    };
    let value = parse_decimal(trimmed, u64::from(u16::MAX))
        .and_then(|v| u16::try_from(v).ok())
        .ok_or_else(|| {
            (
                number_at,
                format!("a legacy itemstring's {what} must be a number from 0 to 65535"),
            )
        })?;
    let (count, wear) = match kind {
        Legacy::Tool => (1, value),
        _ => (value.max(1), 0),
    };
    Ok(ItemStack {
        name: name.to_vec(),
        count,
        wear,
        metadata: Vec::new(),
    })
}

/// The engine clears stacks without a name or with count 0.
fn normalize(item: ItemStack) -> ItemStack {
    if is_empty(&item) {
        ItemStack::default()
    } else {
        item
    }
}

/// Reads a quoted JSON-style string or a bare word (up to a space) starting at `pos`;
/// returns the decoded bytes and the offset after it.
fn read_word_or_json(s: &[u8], pos: usize) -> std::result::Result<(Vec<u8>, usize), ItemError> {
    if s.get(pos) == Some(&b'"') {
        return read_json_string(s, pos);
    }
    let rest = s.get(pos..).unwrap_or_default();
    let end = rest
        .iter()
        .position(|&b| b == b' ')
        .map_or(s.len(), |i| pos + i);
    Ok((s[pos..end].to_vec(), end))
}

fn read_json_string(s: &[u8], start: usize) -> std::result::Result<(Vec<u8>, usize), ItemError> {
    let mut out = Vec::new();
    let mut i = start + 1;
    loop {
        let Some(&c) = s.get(i) else {
            return Err((start, "quoted string has no closing quote".to_string()));
        };
        i += 1;
        match c {
            b'"' => return Ok((out, i)),
            b'\\' => {
                let Some(&e) = s.get(i) else {
                    return Err((start, "quoted string has no closing quote".to_string()));
                };
                i += 1;
                match e {
                    b'b' => out.push(0x08),
                    b'f' => out.push(0x0C),
                    b'n' => out.push(b'\n'),
                    b'r' => out.push(b'\r'),
                    b't' => out.push(b'\t'),
                    b'u' => {
                        let value = s
                            .get(i..i + 4)
                            .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
                            .and_then(|h| std::str::from_utf8(h).ok())
                            .and_then(|h| u16::from_str_radix(h, 16).ok())
                            .ok_or_else(|| {
                                (i - 2, "\\u must be followed by 4 hex digits".to_string())
                            })?;
                        // The engine keeps only the low byte (serialize.cpp: "does not
                        // work for anything other than ASCII").
                        out.push((value & 0xFF) as u8);
                        i += 4;
                    }
                    other => out.push(other),
                }
            }
            other => out.push(other),
        }
    }
}

fn needs_quotes(s: &[u8]) -> bool {
    s.iter()
        .any(|&b| b <= 0x1F || b >= 0x7F || b == b' ' || b == b'"')
}

fn write_json_string_if_needed(s: &[u8], out: &mut Vec<u8>) {
    if !needs_quotes(s) {
        out.extend_from_slice(s);
        return;
    }
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    for &b in s {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0C => out.extend_from_slice(b"\\f"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0..=0x1F | 0x7F => {
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(b >> 4)]);
                out.push(HEX[usize::from(b & 15)]);
            }
            _ => out.push(b),
        }
    }
    out.push(b'"');
}

/// A decimal number of at most `max`, digits only.
fn parse_decimal(text: &[u8], max: u64) -> Option<u64> {
    if text.is_empty() || text.len() > 20 {
        return None;
    }
    let mut value: u64 = 0;
    for &b in text {
        if !b.is_ascii_digit() {
            return None;
        }
        value = value.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    (value <= max).then_some(value)
}

/// The keyword (up to the first space) and the text after that space, if any.
fn split_keyword(line: &[u8]) -> (&[u8], Option<&[u8]>) {
    match line.iter().position(|&b| b == b' ') {
        Some(i) => (&line[..i], Some(&line[i + 1..])),
        None => (line, None),
    }
}

fn is_blank(line: &[u8]) -> bool {
    line.iter().all(u8::is_ascii_whitespace)
}

/// The 1-based character column of byte `offset` in `line`.
fn column(line: &[u8], offset: usize) -> usize {
    let prefix = line.get(..offset).unwrap_or(line);
    String::from_utf8_lossy(prefix).chars().count() + 1
}

fn line_count(text: &[u8]) -> usize {
    text.iter().filter(|&&b| b == b'\n').count()
}

/// Lines split at `\n` (the last one may lack it), numbered from 1.
struct Lines<'a> {
    text: &'a [u8],
    pos: usize,
    line_no: usize,
}

impl<'a> Lines<'a> {
    fn new(text: &'a [u8]) -> Self {
        Lines {
            text,
            pos: 0,
            line_no: 0,
        }
    }

    fn next_line(&mut self) -> Option<(usize, &'a [u8])> {
        let rest = self.text.get(self.pos..).filter(|r| !r.is_empty())?;
        let (line, used) = match rest.iter().position(|&b| b == b'\n') {
            Some(i) => (&rest[..i], i + 1),
            None => (rest, rest.len()),
        };
        self.pos += used;
        self.line_no += 1;
        Some((self.line_no, line))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stack(name: &[u8], count: u16, wear: u16, metadata: &[u8]) -> ItemStack {
        ItemStack {
            name: name.to_vec(),
            count,
            wear,
            metadata: metadata.to_vec(),
        }
    }

    #[test]
    fn itemstring_fields_are_omitted_when_default() {
        let cases: [(ItemStack, &[u8]); 5] = [
            (stack(b"default:dirt", 1, 0, b""), b"default:dirt"),
            (stack(b"default:dirt", 99, 0, b""), b"default:dirt 99"),
            (stack(b"default:pick", 1, 300, b""), b"default:pick 1 300"),
            (
                stack(b"x:book", 1, 0, b"\x01title\x02Hi there\x03"),
                b"x:book 1 0 \"\\u0001title\\u0002Hi there\\u0003\"",
            ),
            (ItemStack::default(), b""),
        ];
        for (item, text) in cases {
            assert_eq!(serialize_itemstring(&item), text);
            assert_eq!(parse_itemstring(text).unwrap(), item);
        }
    }

    #[test]
    fn names_with_utf8_are_quoted_raw() {
        let item = stack("mod:é q".as_bytes(), 2, 0, b"");
        let text = serialize_itemstring(&item);
        assert_eq!(text, "\"mod:é q\" 2".as_bytes());
        assert_eq!(parse_itemstring(&text).unwrap(), item);
    }

    #[test]
    fn unicode_escape_keeps_the_low_byte() {
        let item = parse_itemstring(b"\"a\\u00e9\\u0141\"").unwrap();
        assert_eq!(item.name, b"a\xe9\x41");
    }

    #[test]
    fn count_zero_or_empty_name_is_the_empty_stack() {
        assert_eq!(
            parse_itemstring(b"default:dirt 0").unwrap(),
            ItemStack::default()
        );
        assert_eq!(parse_itemstring(b"\"\" 5").unwrap(), ItemStack::default());
        assert_eq!(parse_itemstring(b"default:dirt ").unwrap().count, 1);
    }

    /// The forms of before 2012 read as the engine reads them, and are written in today's.
    #[test]
    fn legacy_itemstrings_read_as_the_item_they_stand_for() {
        for (old, new) in [
            (&b"NodeItem \"default:dirt\" 5"[..], &b"default:dirt 5"[..]),
            (b"node \"default:wood\" 0", b"default:wood"),
            (b"MaterialItem3 \"default:stone\" 99", b"default:stone 99"),
            (b"CraftItem default:stick 10", b"default:stick 10"),
            (b"craft \"default:coal_lump\"   3 ", b"default:coal_lump 3"),
            (
                b"ToolItem \"default:pick_steel\" 1234",
                b"default:pick_steel 1 1234",
            ),
            (b"tool default:axe_wood 0", b"default:axe_wood"),
            (b"CraftItem \"with space\" 2", b"\"with space\" 2"),
            (b"NodeItem \"\" 5", b""),
        ] {
            let item = parse_itemstring(old)
                .unwrap_or_else(|e| panic!("{}: {e}", String::from_utf8_lossy(old)));
            assert_eq!(
                serialize_itemstring(&item),
                new,
                "{}",
                String::from_utf8_lossy(old)
            );
        }
        let inv = parse_inventory(
            b"List main 2\nWidth 0\nItem NodeItem \"default:dirt\" 5\nEmpty\nEndInventoryList\nEndInventory\n",
        )
        .unwrap();
        assert_eq!(inv.lists[0].slots[0].name, b"default:dirt");
        assert_eq!(inv.lists[0].slots[0].count, 5);
        for (bad, why) in [
            (&b"MaterialItem 2 5"[..], "MaterialItem"),
            (b"MaterialItem2 800 5", "MaterialItem"),
            (b"MBOItem x", "MBOItem"),
            (b"NodeItem \"default:dirt\"", "count"),
            (b"NodeItem \"default:dirt\" 5x", "count"),
            (b"ToolItem \"default:pick\" 70000", "wear"),
            (b"CraftItemX 5", "count"),
        ] {
            let e = parse_itemstring(bad).map(|i| serialize_itemstring(&i));
            if bad == b"CraftItemX 5" {
                assert_eq!(
                    e.unwrap(),
                    b"CraftItemX 5",
                    "only the exact words are legacy"
                );
                continue;
            }
            let e = e.unwrap_err();
            assert!(
                e.message().contains(why),
                "{}: {e}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn malformed_itemstrings_are_rejected() {
        for bad in [
            &b"default:dirt 65536"[..],
            b"default:dirt -1",
            b"default:dirt 5x",
            b"default:dirt   10",
            b"\"unterminated",
            b"\"a\"b 5",
            b"x 1 0 \"meta\" extra",
            b"x 1 0 meta extra",
            b"x 1 70000",
            b"\"\\u12\"",
        ] {
            assert!(
                parse_itemstring(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn errors_carry_line_and_column() {
        let text =
            b"List main 2\nWidth 0\nItem default:dirt 5x\nEmpty\nEndInventoryList\nEndInventory\n";
        let e = parse_inventory(text).unwrap_err();
        assert_eq!(e.errno(), libc::EINVAL);
        assert!(
            e.message().starts_with("line 3, column 19:"),
            "{}",
            e.message()
        );

        let e = parse_inventory(b"Lsit main 2\n").unwrap_err();
        assert!(
            e.message().starts_with("line 1, column 1:"),
            "{}",
            e.message()
        );

        let e = parse_inventory(b"List main 1\nEmpty\nEmpty\nEndInventoryList\nEndInventory\n")
            .unwrap_err();
        assert!(e.message().contains("too many items"), "{}", e.message());

        let e = parse_inventory(b"List main 1\nEmpty\n").unwrap_err();
        assert!(
            e.message().contains("no EndInventoryList"),
            "{}",
            e.message()
        );

        let e = parse_inventory(b"List main 1\nEndInventoryList\n").unwrap_err();
        assert!(
            e.message().contains("missing EndInventory"),
            "{}",
            e.message()
        );

        let e = parse_inventory(b"EndInventory\nList\n").unwrap_err();
        assert!(e.message().starts_with("line 2,"), "{}", e.message());
    }

    #[test]
    fn short_lists_are_padded_and_width_may_come_anywhere() {
        let inv = parse_inventory(b"List a 3\nItem x 2\nWidth 3\nend\nend").unwrap();
        assert_eq!(inv.lists[0].width, 3);
        assert_eq!(inv.lists[0].slots.len(), 3);
        assert_eq!(inv.lists[0].slots[0], stack(b"x", 2, 0, b""));
        assert_eq!(
            serialize_inventory(&inv),
            b"List a 3\nWidth 3\nItem x 2\nEmpty\nEmpty\nEndInventoryList\nEndInventory\n"
        );
    }

    #[test]
    fn huge_lists_are_refused_without_allocating() {
        let e = parse_inventory(b"List a 4294967295\nEndInventoryList\nEndInventory\n");
        assert!(e.is_err());
        let e = parse_inventory(
            b"List a 65536\nEndInventoryList\nList b 1\nEndInventoryList\nEndInventory\n",
        );
        assert!(e.is_err());
    }

    #[test]
    fn read_inventory_stops_after_its_terminator() {
        let text = b"List a 1\nEmpty\nEndInventoryList\nEndInventory\n\x00\x01binary";
        let mut budget = MAX_SLOTS;
        let (inv, used) = read_inventory(text, &mut budget).unwrap();
        assert_eq!(inv.lists.len(), 1);
        assert_eq!(&text[used..], b"\x00\x01binary");
        assert_eq!(budget, MAX_SLOTS - 1);
    }

    #[test]
    fn check_inventory_rejects_unwritable_names() {
        let list = |name: &str| InventoryList {
            name: name.to_string(),
            width: 0,
            slots: vec![],
        };
        assert!(check_inventory(&Inventory {
            lists: vec![list("a b")]
        })
        .is_err());
        assert!(check_inventory(&Inventory {
            lists: vec![list("a"), list("a")]
        })
        .is_err());
        assert!(check_inventory(&Inventory {
            lists: vec![list("a"), list("b")]
        })
        .is_ok());
    }
}
