//! The node metadata list (list versions 0, 1 and 2) and the pre-23 type-id metadata of
//! version-22 blocks, which the engine converts on load (`content_nodemeta_deserialize_legacy`).
//!
//! Decoding canonicalises: entries sorted by position, variables sorted by key, entries
//! without variables and inventory lists dropped (the engine drops them on save). Where the
//! engine would silently lose data (a duplicate position desynchronises its reader), the
//! block is reported corrupt instead.

use std::collections::{BTreeMap, BTreeSet};

use super::inventory::{check_inventory, read_inventory, serialize_inventory, MAX_SLOTS};
use super::Budget;
use crate::bytes::{put_string16, put_string32, put_u16, put_u32, Reader};
use crate::error::{Error, Result};
use crate::luanti::codec::block::{Inventory, MetaVar, NodeMeta, NodeTimer, RelPos};

/// The position of a metadata entry or timer from its stored `u16`.
pub fn rel_pos(p16: u16, what: &str) -> Result<RelPos> {
    RelPos::from_index(p16).ok_or_else(|| {
        Error::corrupt(format!(
            "{what}: position index {p16} lies outside the block"
        ))
    })
}

/// The stored `u16` of a position; `Error::invalid` when a coordinate is above 15.
pub fn pos_index(p: RelPos, what: &str) -> Result<u16> {
    if p.x > 15 || p.y > 15 || p.z > 15 {
        return Err(Error::invalid(format!(
            "{what}: position {} lies outside the block",
            pos_text(p)
        )));
    }
    Ok(p.index())
}

fn pos_text(p: RelPos) -> String {
    format!("{},{},{}", p.x, p.y, p.z)
}

/// Variables in the order the engine stores them, before canonicalisation: a later
/// duplicate key replaces the value; a private mark is kept (as `markPrivate` does).
#[derive(Default)]
struct Vars(BTreeMap<Vec<u8>, (Vec<u8>, bool)>);

impl Vars {
    fn set(&mut self, key: &[u8], value: &[u8], private: bool) {
        let entry = self.0.entry(key.to_vec()).or_default();
        entry.0 = value.to_vec();
        entry.1 |= private;
    }

    /// `SimpleMetadata::setString`: an empty value removes the variable.
    fn set_string(&mut self, key: &[u8], value: &[u8]) {
        if value.is_empty() {
            self.0.remove(key);
        } else {
            self.set(key, value, false);
        }
    }

    fn get(&self, key: &[u8]) -> &[u8] {
        self.0.get(key).map_or(&[], |v| v.0.as_slice())
    }

    fn into_vec(self) -> Vec<MetaVar> {
        self.0
            .into_iter()
            .map(|(key, (value, private))| MetaVar {
                key,
                value,
                private,
            })
            .collect()
    }
}

/// Collects decoded entries: rejects duplicate positions, drops empty entries, sorts by
/// node index.
#[derive(Default)]
struct Entries {
    seen: BTreeSet<u16>,
    kept: BTreeMap<u16, NodeMeta>,
}

impl Entries {
    fn insert(&mut self, pos: RelPos, vars: Vars, inventory: Inventory) -> Result<()> {
        if !self.seen.insert(pos.index()) {
            return Err(Error::corrupt(format!(
                "node metadata: two entries for position {}",
                pos_text(pos)
            )));
        }
        if !vars.0.is_empty() || !inventory.lists.is_empty() {
            let vars = vars.into_vec();
            self.kept.insert(
                pos.index(),
                NodeMeta {
                    pos,
                    vars,
                    inventory,
                },
            );
        }
        Ok(())
    }

    fn into_vec(self) -> Vec<NodeMeta> {
        self.kept.into_values().collect()
    }
}

/// Memory a metadata variable costs decoded beyond its key and value bytes.
const VAR_OVERHEAD: usize = 112;

/// Reads an inventory from the reader: at most [`MAX_SLOTS`] slots, charged to the block's
/// `limits` with the memory the inventory takes.
fn inventory(r: &mut Reader<'_>, limits: &mut Budget, pos: RelPos) -> Result<Inventory> {
    let slot_budget = &mut limits.slots;
    let allowed = (*slot_budget).min(MAX_SLOTS);
    let mut left = allowed;
    let (inv, used) = read_inventory(r.rest(), &mut left).map_err(|e| {
        Error::corrupt(format!(
            "node metadata at {}: inventory {}",
            pos_text(pos),
            e.message()
        ))
    })?;
    *slot_budget -= allowed - left;
    r.skip(used, "node metadata inventory")?;
    limits.charge(
        inv.memory(),
        &format!("node metadata at {}: inventory", pos_text(pos)),
    )?;
    Ok(inv)
}

/// Reads a metadata list (versions 0–2) for blocks ≥ 23.
pub(crate) fn read_meta_list(r: &mut Reader<'_>, limits: &mut Budget) -> Result<Vec<NodeMeta>> {
    let version = r.u8("node metadata version")?;
    if version == 0 {
        return Ok(Vec::new());
    }
    if version > 2 {
        return Err(Error::corrupt(format!(
            "node metadata list version {version} is not supported"
        )));
    }
    let count = r.u16("node metadata count")?;
    let mut entries = Entries::default();
    for _ in 0..count {
        let pos = rel_pos(r.u16("node metadata position")?, "node metadata")?;
        let what = format!("node metadata at {}", pos_text(pos));
        let num_vars = usize::try_from(r.u32(&what)?).unwrap_or(usize::MAX);
        let min_size = if version >= 2 { 7 } else { 6 };
        if num_vars > r.remaining() / min_size {
            return Err(Error::corrupt(format!(
                "{what}: {num_vars} variables cannot fit in {} bytes",
                r.remaining()
            )));
        }
        let mut vars = Vars::default();
        limits.charge(std::mem::size_of::<NodeMeta>() + VAR_OVERHEAD, &what)?;
        for _ in 0..num_vars {
            let key = r.string16(&what)?;
            let value = r.string32(&what)?;
            let private = version >= 2 && r.u8(&what)? == 1;
            limits.charge(key.len() + value.len() + VAR_OVERHEAD, &what)?;
            vars.set(key, value, private);
        }
        let inv = inventory(r, limits, pos)?;
        entries.insert(pos, vars, inv)?;
    }
    Ok(entries.into_vec())
}

/// Writes a metadata list for a block of `block_version` (list version 2 from block 28 on,
/// 1 before; a single 0 byte when no entry has content).
pub fn write_meta_list(metas: &[NodeMeta], block_version: u8, out: &mut Vec<u8>) -> Result<()> {
    let mut indices = Vec::with_capacity(metas.len());
    for meta in metas {
        indices.push(pos_index(meta.pos, "node metadata")?);
    }
    for (i, pair) in indices.windows(2).enumerate() {
        if pair[0] >= pair[1] {
            return Err(Error::invalid(format!(
                "node metadata is not sorted by position or has two entries at {}",
                pos_text(metas[i + 1].pos)
            )));
        }
    }
    let kept: Vec<&NodeMeta> = metas
        .iter()
        .filter(|m| !m.vars.is_empty() || !m.inventory.lists.is_empty())
        .collect();
    if kept.is_empty() {
        out.push(0);
        return Ok(());
    }
    let version = if block_version > 27 { 2 } else { 1 };
    out.push(version);
    put_u16(out, kept.len() as u16);
    for meta in kept {
        let what = format!("node metadata at {}", pos_text(meta.pos));
        put_u16(out, meta.pos.index());
        put_u32(out, meta.vars.len() as u32);
        for (i, var) in meta.vars.iter().enumerate() {
            if i > 0 && meta.vars[i - 1].key >= var.key {
                return Err(Error::invalid(format!(
                    "{what}: variables are not sorted by key or a key appears twice"
                )));
            }
            put_string16(out, &var.key, &format!("{what}: key"))?;
            put_string32(out, &var.value, &format!("{what}: value"))?;
            if version >= 2 {
                out.push(u8::from(var.private));
            } else if var.private {
                return Err(Error::invalid(format!(
                    "{what}: private variables need block version 28 or later (this block is {block_version})"
                )));
            }
        }
        check_inventory(&meta.inventory).map_err(|e| e.context(&what))?;
        out.extend_from_slice(&serialize_inventory(&meta.inventory));
    }
    Ok(())
}

// Pre-23 metadata type ids (content_nodemeta.cpp).
const LEGACY_GENERIC: i16 = 1;
const LEGACY_SIGN: i16 = 14;
const LEGACY_CHEST: i16 = 15;
const LEGACY_FURNACE: i16 = 16;
const LEGACY_LOCKABLE_CHEST: i16 = 17;

const CHEST_FORMSPEC: &[u8] =
    b"size[8,9]list[current_name;main;0,0;8,4;]list[current_player;main;0,5;8,4;]";
const FURNACE_FORMSPEC: &[u8] = b"size[8,9]list[current_name;fuel;2,3;1,1;]\
list[current_name;src;2,1;1,1;]list[current_name;dst;5,1;2,2;]\
list[current_player;main;0,5;8,4;]";

/// Reads the type-id metadata of a version-22 block, converted the way the engine does on
/// load; furnaces also get the 1-second node timer the engine starts for them.
pub(crate) fn read_legacy_meta_list(
    r: &mut Reader<'_>,
    limits: &mut Budget,
) -> Result<(Vec<NodeMeta>, Vec<NodeTimer>)> {
    let version = r.u16("legacy node metadata version")?;
    if version > 1 {
        return Err(Error::corrupt(format!(
            "legacy node metadata version {version} is not supported"
        )));
    }
    let count = r.u16("legacy node metadata count")?;
    let mut entries = Entries::default();
    let mut timers = Vec::new();
    for _ in 0..count {
        let pos = rel_pos(
            r.u16("legacy node metadata position")?,
            "legacy node metadata",
        )?;
        let what = format!("legacy node metadata at {}", pos_text(pos));
        limits.charge(std::mem::size_of::<NodeMeta>() + VAR_OVERHEAD, &what)?;
        let type_id = r.i16(&what)?;
        let body = r.string16(&what)?;
        let mut b = Reader::new(body);
        let mut vars = Vars::default();
        let mut inv = Inventory::default();
        match type_id {
            LEGACY_GENERIC => (vars, inv) = legacy_generic(&mut b, limits, pos, &what)?,
            LEGACY_SIGN => {
                let text = b.string16(&what)?;
                vars.set_string(b"text", text);
                let infotext = [b"\"", vars.get(b"text"), b"\""].concat();
                vars.set_string(b"infotext", &infotext);
                vars.set_string(b"formspec", b"field[text;;${text}]");
            }
            LEGACY_CHEST | LEGACY_LOCKABLE_CHEST => {
                if type_id == LEGACY_LOCKABLE_CHEST {
                    let owner = b.string16(&what)?;
                    vars.set_string(b"owner", owner);
                }
                inv = inventory(&mut b, limits, pos)?;
                if !inv.lists.iter().any(|l| l.name == "main") {
                    if let Some(list) = inv.lists.iter_mut().find(|l| l.name == "0") {
                        list.name = "main".to_string();
                    }
                }
                vars.set_string(b"formspec", CHEST_FORMSPEC);
            }
            LEGACY_FURNACE => {
                (vars, inv) = legacy_furnace(&mut b, limits, pos)?;
                timers.push(NodeTimer {
                    pos,
                    timeout: 1000,
                    elapsed: 0,
                });
            }
            other => {
                return Err(Error::corrupt(format!(
                    "{what}: unknown legacy node metadata type {other}"
                )))
            }
        }
        entries.insert(pos, vars, inv)?;
    }
    timers.sort_by_key(|t| t.pos.index());
    Ok((entries.into_vec(), timers))
}

/// The body of a generic (type 1) legacy entry: an inventory, texts, flags and variables.
fn legacy_generic(
    b: &mut Reader<'_>,
    limits: &mut Budget,
    pos: RelPos,
    what: &str,
) -> Result<(Vars, Inventory)> {
    let mut vars = Vars::default();
    let inv = inventory(b, limits, pos)?;
    b.string32(what)?; // text
    b.string16(what)?; // owner
    let infotext = b.string16(what)?;
    vars.set_string(b"infotext", infotext);
    let formspec = b.string16(what)?;
    vars.set_string(b"formspec", formspec);
    b.bytes(3, what)?; // allow_text_input, allow_removal, enforce_owner
    let num_vars = usize::try_from(b.u32(what)?).unwrap_or(usize::MAX);
    if num_vars > b.remaining() / 6 {
        return Err(Error::corrupt(format!(
            "{what}: {num_vars} variables cannot fit"
        )));
    }
    for _ in 0..num_vars {
        let key = b.string16(what)?;
        let value = b.string32(what)?;
        limits.charge(key.len() + value.len() + VAR_OVERHEAD, what)?;
        vars.set_string(key, value);
    }
    Ok((vars, inv))
}

/// The body of a legacy furnace: its inventory, then its times as text.
fn legacy_furnace(
    b: &mut Reader<'_>,
    limits: &mut Budget,
    pos: RelPos,
) -> Result<(Vars, Inventory)> {
    let mut vars = Vars::default();
    let inv = inventory(b, limits, pos)?;
    let mut numbers = StreamInts::new(b.rest());
    let fuel_totaltime = numbers.next();
    let fuel_time = numbers.next();
    numbers.next(); // src_totaltime, not kept by the engine
    let src_time = numbers.next();
    vars.set_string(b"fuel_totaltime", tenths(fuel_totaltime).as_bytes());
    vars.set_string(b"fuel_time", tenths(fuel_time).as_bytes());
    vars.set_string(b"src_time", tenths(src_time).as_bytes());
    vars.set_string(b"formspec", FURNACE_FORMSPEC);
    Ok((vars, inv))
}

/// `is >> int` repeated on a text stream: whitespace-separated decimal integers; after the
/// first failure every further read gives 0 (the stream stays failed).
struct StreamInts<'a> {
    text: &'a [u8],
    pos: usize,
    failed: bool,
}

impl<'a> StreamInts<'a> {
    fn new(text: &'a [u8]) -> Self {
        StreamInts {
            text,
            pos: 0,
            failed: false,
        }
    }

    fn next(&mut self) -> i32 {
        if self.failed {
            return 0;
        }
        while self.text.get(self.pos).is_some_and(u8::is_ascii_whitespace) {
            self.pos += 1;
        }
        let start = self.pos;
        if matches!(self.text.get(self.pos), Some(b'+' | b'-')) {
            self.pos += 1;
        }
        let digits_start = self.pos;
        let mut value: i64 = 0;
        while let Some(d) = self.text.get(self.pos).filter(|c| c.is_ascii_digit()) {
            value = (value * 10 + i64::from(d - b'0')).min(i64::from(i32::MAX) + 1);
            self.pos += 1;
        }
        if self.pos == digits_start {
            self.failed = true;
            return 0;
        }
        if self.text.get(start) == Some(&b'-') {
            value = -value;
        }
        match i32::try_from(value) {
            Ok(v) => v,
            Err(_) => {
                self.failed = true;
                if value < 0 {
                    i32::MIN
                } else {
                    i32::MAX
                }
            }
        }
    }
}

/// `ftos((float)n / 10)`: the float printed like C++ `ostream << float` (`%g`, 6
/// significant digits).
fn tenths(n: i32) -> String {
    format_g6(f64::from(n as f32 / 10.0))
}

fn format_g6(v: f64) -> String {
    if v == 0.0 {
        return if v.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    let sci = format!("{v:.5e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..6).contains(&exp) {
        let mantissa = trim_zeros(mantissa);
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exp.abs());
    }
    let decimals = usize::try_from(5 - exp).unwrap_or(0);
    trim_zeros(&format!("{v:.decimals$}")).to_string()
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::luanti::codec::block::{InventoryList, ItemStack};

    #[test]
    fn g6_formatting_matches_ostream() {
        for (n, text) in [
            (0, "0"),
            (15, "1.5"),
            (3, "0.3"),
            (-25, "-2.5"),
            (123_456_789, "1.23457e+07"),
            (1_000_000, "100000"),
            (10_000_000, "1e+06"),
        ] {
            assert_eq!(tenths(n), text, "{n}");
        }
    }

    #[test]
    fn stream_ints_fail_like_istream() {
        let mut s = StreamInts::new(b" 12 -3 x 7");
        assert_eq!((s.next(), s.next(), s.next(), s.next()), (12, -3, 0, 0));
    }

    fn meta(pos: u16, vars: &[(&[u8], &[u8], bool)], lists: usize) -> NodeMeta {
        NodeMeta {
            pos: RelPos::from_index(pos).unwrap(),
            vars: vars
                .iter()
                .map(|&(k, v, p)| MetaVar {
                    key: k.to_vec(),
                    value: v.to_vec(),
                    private: p,
                })
                .collect(),
            inventory: Inventory {
                lists: (0..lists)
                    .map(|i| InventoryList {
                        name: format!("l{i}"),
                        width: 0,
                        slots: vec![ItemStack::default(); 2],
                    })
                    .collect(),
            },
        }
    }

    #[test]
    fn lists_round_trip_and_empty_entries_are_dropped() {
        let metas = vec![
            meta(3, &[(b"a", b"1", false), (b"b", b"", true)], 1),
            meta(7, &[], 0),
            meta(4000, &[], 2),
        ];
        for version in [25u8, 28] {
            let mut out = Vec::new();
            let res = write_meta_list(&metas, version, &mut out);
            if version == 25 {
                assert!(res.is_err(), "private flag needs 28");
                continue;
            }
            res.unwrap();
            let mut budget = Budget {
                slots: 100,
                ..Budget::new()
            };
            let back = read_meta_list(&mut Reader::new(&out), &mut budget).unwrap();
            assert_eq!(back, vec![metas[0].clone(), metas[2].clone()]);
            assert_eq!(budget.slots, 100 - 6);
        }
        let mut out = Vec::new();
        write_meta_list(&[meta(1, &[], 0)], 28, &mut out).unwrap();
        assert_eq!(out, [0]);
    }

    #[test]
    fn duplicate_positions_are_corrupt() {
        let mut data = vec![1, 0, 2];
        for _ in 0..2 {
            data.extend_from_slice(&[0, 5, 0, 0, 0, 0]);
            data.extend_from_slice(b"EndInventory\n");
        }
        let e = read_meta_list(&mut Reader::new(&data), &mut Budget::new()).unwrap_err();
        assert_eq!(e.errno(), libc::EIO);
    }

    #[test]
    fn legacy_furnace_and_sign_are_converted() {
        let mut data = vec![0, 1, 0, 2];
        let furnace_body = b"List fuel 1\nEmpty\nEndInventoryList\nEndInventory\n15 3 0 7 ";
        data.extend_from_slice(&[0, 9, 0, 16, 0, furnace_body.len() as u8]);
        data.extend_from_slice(furnace_body);
        data.extend_from_slice(&[0, 2, 0, 14, 0, 4, 0, 2, b'h', b'i']);
        let (metas, timers) =
            read_legacy_meta_list(&mut Reader::new(&data), &mut Budget::new()).unwrap();
        assert_eq!(metas.len(), 2);
        let sign = &metas[0];
        assert_eq!(sign.pos.index(), 2);
        let get =
            |m: &NodeMeta, k: &[u8]| m.vars.iter().find(|v| v.key == k).map(|v| v.value.clone());
        assert_eq!(get(sign, b"infotext").unwrap(), b"\"hi\"");
        assert_eq!(get(sign, b"text").unwrap(), b"hi");
        let furnace = &metas[1];
        assert_eq!(get(furnace, b"fuel_totaltime").unwrap(), b"1.5");
        assert_eq!(get(furnace, b"fuel_time").unwrap(), b"0.3");
        assert_eq!(get(furnace, b"src_time").unwrap(), b"0.7");
        assert_eq!(furnace.inventory.lists[0].name, "fuel");
        assert_eq!(timers.len(), 1);
        assert_eq!(timers[0].timeout, 1000);
    }
}
