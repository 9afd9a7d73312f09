//! Bulk node data (param0/param1/param2 arrays) and the block's name-id mapping.
//!
//! Decoding replaces the stored ids, whose numbering the engine changes on every save, by
//! canonical indices: names in order of first use by node index. Encoding writes that same
//! dense numbering, which is what the engine itself writes and what third-party tools rely
//! on (only used ids, no duplicates, starting at 0).

use std::collections::HashMap;

use crate::bytes::{put_string16, put_u16, Reader};
use crate::error::{Error, Result};
use crate::luanti::codec::block::{MapBlock, NODE_COUNT};

/// One stored name-id mapping entry.
pub struct NameId<'a> {
    pub id: u16,
    pub name: &'a [u8],
}

/// Reads a name-id mapping (`u8 0`, `u16 count`, entries of `u16 id` + String16 name).
pub fn read_name_ids<'a>(r: &mut Reader<'a>) -> Result<Vec<NameId<'a>>> {
    let version = r.u8("name-id mapping version")?;
    if version != 0 {
        return Err(Error::corrupt(format!(
            "unsupported name-id mapping version {version}"
        )));
    }
    let count = usize::from(r.u16("name-id mapping count")?);
    if count * 4 > r.remaining() {
        return Err(Error::corrupt(format!(
            "name-id mapping: {count} entries cannot fit in {} bytes",
            r.remaining()
        )));
    }
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let id = r.u16("name-id mapping entry")?;
        let name = r.string16("name-id mapping entry")?;
        out.push(NameId { id, name });
    }
    Ok(out)
}

/// The decoded node arrays with canonical names.
pub struct Nodes {
    pub names: Vec<String>,
    pub content: Vec<u16>,
    pub param1: Vec<u8>,
    pub param2: Vec<u8>,
}

/// The stored length of the node arrays for a content width.
pub fn nodes_len(content_width: u8) -> usize {
    NODE_COUNT * (usize::from(content_width) + 2)
}

/// Decodes the node arrays (`raw` is exactly [`nodes_len`] bytes) with the mapping.
pub fn decode_nodes(raw: &[u8], content_width: u8, name_ids: &[NameId<'_>]) -> Result<Nodes> {
    let cw = usize::from(content_width);
    if raw.len() != nodes_len(content_width) {
        return Err(Error::corrupt(format!(
            "node data is {} bytes, expected {}",
            raw.len(),
            nodes_len(content_width)
        )));
    }
    let param1 = raw[cw * NODE_COUNT..(cw + 1) * NODE_COUNT].to_vec();
    let mut param2 = raw[(cw + 1) * NODE_COUNT..].to_vec();
    let mut content = stored_ids(raw, cw, &mut param2);
    let names = canonical_ids(&mut content, name_ids)?;
    Ok(Nodes {
        names,
        content,
        param1,
        param2,
    })
}

/// The stored id of every node (content width `cw`); with width 1, ids above 0x7F take the
/// high nibble of `param2`, which is cleared.
fn stored_ids(raw: &[u8], cw: usize, param2: &mut [u8]) -> Vec<u16> {
    if cw == 2 {
        // A plain loop into a sized vector: much faster than collecting the iterator.
        let mut ids = vec![0u16; NODE_COUNT];
        for (id, b) in ids.iter_mut().zip(raw.chunks_exact(2)) {
            *id = u16::from_be_bytes([b[0], b[1]]);
        }
        ids
    } else {
        // content_width 1: ids above 0x7F borrow the high nibble of param2
        // (MapNode::deSerializeBulk).
        raw[..NODE_COUNT]
            .iter()
            .zip(param2.iter_mut())
            .map(|(&p0, p2)| {
                let p0 = u16::from(p0);
                if p0 > 0x7F {
                    let id = (p0 << 4) | u16::from(*p2 >> 4);
                    *p2 &= 0x0F;
                    id
                } else {
                    p0
                }
            })
            .collect()
    }
}

/// The most mapping entries [`already_canonical`] looks through (it compares them pairwise).
const FAST_MAPPING: usize = 64;

/// The names of `content` when its stored ids already are the canonical indices: ids 0, 1, …
/// in order of first use, each named (the last entry of an id wins) by a distinct, valid
/// name — what the engine writes. `None` otherwise (or when the mapping is large): then
/// [`canonical_ids`] renumbers them, with the same result where this one has one.
fn already_canonical(content: &[u16], name_ids: &[NameId<'_>]) -> Option<Vec<String>> {
    if name_ids.len() > FAST_MAPPING {
        return None;
    }
    let mut next: u16 = 0;
    for &id in content {
        if id >= next {
            if id != next {
                return None;
            }
            next += 1;
        }
    }
    let mut names: Vec<String> = Vec::new();
    for id in 0..next {
        let name = name_ids.iter().rev().find(|e| e.id == id)?.name;
        let text = std::str::from_utf8(name).ok()?;
        if names.iter().any(|n| n == text) {
            return None;
        }
        names.push(text.to_string());
    }
    Some(names)
}

/// Replaces the stored ids in `content` by indices into the returned names, in order of
/// first use.
fn canonical_ids(content: &mut [u16], name_ids: &[NameId<'_>]) -> Result<Vec<String>> {
    match already_canonical(content, name_ids) {
        Some(names) => Ok(names),
        None => renumber(content, name_ids),
    }
}

/// [`canonical_ids`] by renumbering every node.
fn renumber(content: &mut [u16], name_ids: &[NameId<'_>]) -> Result<Vec<String>> {
    // Later entries for the same id win, as in NameIdMapping::deSerialize.
    let by_id: HashMap<u16, &[u8]> = name_ids.iter().map(|e| (e.id, e.name)).collect();
    let mut names: Vec<String> = Vec::new();
    let mut index_of_name: HashMap<&[u8], u16> = HashMap::new();
    // Stored id → canonical index, UNSET until first seen; ids are small and dense in
    // practice, and the table never exceeds 64 Ki entries.
    const UNSET: u16 = u16::MAX;
    let max_id = content.iter().copied().max().unwrap_or(0);
    let mut index_of_id = vec![UNSET; usize::from(max_id) + 1];
    for (i, node) in content.iter_mut().enumerate() {
        let id = *node;
        let Some(slot) = index_of_id.get_mut(usize::from(id)) else {
            return Err(Error::corrupt(format!("node {i}: id {id} out of range")));
        };
        if *slot == UNSET {
            let name = by_id.get(&id).ok_or_else(|| {
                Error::corrupt(format!(
                    "node {i} has id {id}, which the name-id mapping does not name"
                ))
            })?;
            *slot = match index_of_name.get(name) {
                Some(&index) => index,
                None => {
                    let text = std::str::from_utf8(name).map_err(|_| {
                        Error::corrupt(format!(
                            "node name {:?} is not valid UTF-8",
                            String::from_utf8_lossy(name)
                        ))
                    })?;
                    // At most 4096 distinct ids are used, so the index stays below UNSET.
                    let index = names.len() as u16;
                    names.push(text.to_string());
                    index_of_name.insert(name, index);
                    index
                }
            };
        }
        *node = *slot;
    }
    Ok(names)
}

/// The encoded name-id mapping and node arrays (content_width 2, params_width 2 — the
/// two width bytes are not included), with dense ids in order of first use.
pub struct EncodedNodes {
    pub name_ids: Vec<u8>,
    pub nodes: Vec<u8>,
}

/// The names of `block` when its name indices already are the ids [`encode_nodes`] writes:
/// 0, 1, … in order of first use, every name used and distinct (a decoded block, and one a
/// rename gave a new name it did not hold). `None` otherwise.
fn dense_ids(block: &MapBlock) -> Option<Vec<&str>> {
    let mut next: u16 = 0;
    for &c in &block.content {
        if c >= next {
            if c != next {
                return None;
            }
            next += 1;
        }
    }
    let names = &block.names;
    if usize::from(next) != names.len() || names.len() > FAST_MAPPING {
        return None;
    }
    for (i, n) in names.iter().enumerate() {
        if names[..i].contains(n) {
            return None;
        }
    }
    Some(names.iter().map(String::as_str).collect())
}

/// The ids [`encode_nodes`] writes for each node of `block` and the names they stand for,
/// renumbered 0.. in order of first use (names given twice become one).
fn renumbered_ids(block: &MapBlock) -> Result<(Vec<u16>, Vec<&str>)> {
    let mut new_id = vec![u16::MAX; block.names.len()];
    let mut id_of_name: HashMap<&str, u16> = HashMap::new();
    let mut used: Vec<&str> = Vec::new();
    let mut ids = Vec::with_capacity(NODE_COUNT);
    for (i, &c) in block.content.iter().enumerate() {
        let slot = new_id.get_mut(usize::from(c)).ok_or_else(|| {
            Error::invalid(format!(
                "node {i} uses name index {c}, but the block has {} names",
                block.names.len()
            ))
        })?;
        if *slot == u16::MAX {
            let name = block.names[usize::from(c)].as_str();
            *slot = *id_of_name.entry(name).or_insert_with(|| {
                used.push(name);
                (used.len() - 1) as u16
            });
        }
        ids.push(*slot);
    }
    Ok((ids, used))
}

/// Encodes the nodes of `block`; ids are renumbered 0.. in order of first use, so the
/// output is canonical even if `block.names` is not.
pub fn encode_nodes(block: &MapBlock) -> Result<EncodedNodes> {
    for (what, len) in [
        ("content", block.content.len()),
        ("param1", block.param1.len()),
        ("param2", block.param2.len()),
    ] {
        if len != NODE_COUNT {
            return Err(Error::invalid(format!(
                "block has {len} {what} values, expected {NODE_COUNT}"
            )));
        }
    }
    let (ids, used) = match dense_ids(block) {
        Some(names) => (block.content.clone(), names),
        None => renumbered_ids(block)?,
    };
    let mut nodes = vec![0u8; NODE_COUNT * 2];
    for (b, id) in nodes.chunks_exact_mut(2).zip(&ids) {
        b.copy_from_slice(&id.to_be_bytes());
    }
    nodes.extend_from_slice(&block.param1);
    nodes.extend_from_slice(&block.param2);

    let mut name_ids = vec![0u8];
    put_u16(&mut name_ids, used.len() as u16);
    for (id, name) in used.iter().enumerate() {
        put_u16(&mut name_ids, id as u16);
        put_string16(&mut name_ids, name.as_bytes(), "node name")?;
    }
    Ok(EncodedNodes { name_ids, nodes })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Name indices that already are the ids to write are written as they are, with the
        /// same bytes renumbering would write, whatever the names (unused, given twice).
        #[test]
        fn dense_ids_are_what_renumbering_gives(
            first_use in proptest::collection::vec(0u16..6, 1..8),
            runs in proptest::collection::vec((0usize..8, 1usize..600), 1..12),
            names in proptest::collection::vec(0usize..4, 1..8),
            in_first_use_order: bool,
        ) {
            let mut content = Vec::with_capacity(NODE_COUNT);
            for (pick, len) in runs.iter().cycle() {
                if content.len() >= NODE_COUNT {
                    break;
                }
                let id = first_use[pick % first_use.len()] % names.len() as u16;
                content.extend(std::iter::repeat(id).take(*len));
            }
            content.truncate(NODE_COUNT);
            if in_first_use_order {
                let mut seen: Vec<u16> = Vec::new();
                for c in content.iter_mut() {
                    let at = seen.iter().position(|s| s == c).unwrap_or_else(|| {
                        seen.push(*c);
                        seen.len() - 1
                    });
                    *c = at as u16;
                }
            }
            let pool = ["air", "test:a", "test:b", "test:a"];
            let block = MapBlock {
                names: names.iter().map(|&n| pool[n].to_string()).collect(),
                content,
                ..crate::luanti::cache::new_block()
            };
            let (ids, used) = renumbered_ids(&block).map_err(|e| e.to_string()).unwrap();
            if let Some(dense) = dense_ids(&block) {
                prop_assert_eq!(&block.content, &ids);
                prop_assert_eq!(dense, used);
            }
        }

        /// Stored ids that already are canonical are taken as they are, with exactly the
        /// names and errors renumbering would give, whatever the mapping (ids named twice,
        /// names given twice, names that are not UTF-8, ids not named).
        #[test]
        fn canonical_ids_are_what_renumbering_gives(
            first_use in proptest::collection::vec(0u16..6, 1..8),
            runs in proptest::collection::vec((0usize..8, 1usize..600), 1..12),
            mapping in proptest::collection::vec((0u16..7, 0usize..5), 0..10),
            in_first_use_order: bool,
        ) {
            let mut content = Vec::with_capacity(NODE_COUNT);
            for (pick, len) in runs.iter().cycle() {
                if content.len() >= NODE_COUNT {
                    break;
                }
                let id = first_use[pick % first_use.len()];
                content.extend(std::iter::repeat(id).take(*len));
            }
            content.truncate(NODE_COUNT);
            if in_first_use_order {
                // As the engine numbers them: 0, 1, … in order of first use.
                let mut seen: Vec<u16> = Vec::new();
                for c in content.iter_mut() {
                    let at = seen.iter().position(|s| s == c).unwrap_or_else(|| {
                        seen.push(*c);
                        seen.len() - 1
                    });
                    *c = at as u16;
                }
            }
            let names: [&[u8]; 5] = [b"air", b"test:a", b"test:b", b"test:a", b"\xff\xfe"];
            let name_ids: Vec<NameId<'_>> = mapping
                .iter()
                .map(|&(id, n)| NameId { id, name: names[n] })
                .collect();
            let mut fast = content.clone();
            let mut slow = content.clone();
            let got = canonical_ids(&mut fast, &name_ids).map_err(|e| e.to_string());
            let want = renumber(&mut slow, &name_ids).map_err(|e| e.to_string());
            prop_assert_eq!(&got, &want);
            if got.is_ok() {
                prop_assert_eq!(fast, slow);
            }
        }
    }

    /// What the engine writes (ids 0, 1, … in order of first use, each named once) is taken
    /// as it is.
    #[test]
    fn engine_numbering_needs_no_renumbering() {
        let mut content = vec![0u16; NODE_COUNT];
        content[100..200].fill(1);
        content[3000] = 2;
        let map = [
            NameId { id: 2, name: b"c" },
            NameId { id: 0, name: b"a" },
            NameId { id: 1, name: b"b" },
        ];
        assert_eq!(
            already_canonical(&content, &map),
            Some(vec!["a".to_string(), "b".into(), "c".into()])
        );
        content[50] = 2;
        assert_eq!(already_canonical(&content, &map), None, "2 used before 1");
    }

    fn raw_cw1(p0: &[(usize, u8, u8)]) -> Vec<u8> {
        let mut raw = vec![0u8; nodes_len(1)];
        for &(i, c, p2) in p0 {
            raw[i] = c;
            raw[2 * NODE_COUNT + i] = p2;
        }
        raw
    }

    #[test]
    fn content_width_1_borrows_param2_high_nibble() {
        let raw = raw_cw1(&[(5, 0x80, 0x38), (6, 1, 0x38)]);
        let map = [
            NameId {
                id: 0,
                name: b"air",
            },
            NameId {
                id: 1,
                name: b"test:one",
            },
            NameId {
                id: 0x803,
                name: b"test:two",
            },
        ];
        let nodes = decode_nodes(&raw, 1, &map).unwrap();
        assert_eq!(nodes.names, ["air", "test:two", "test:one"]);
        assert_eq!(nodes.content[5], 1);
        assert_eq!(nodes.param2[5], 0x08);
        assert_eq!(nodes.content[6], 2);
        assert_eq!(nodes.param2[6], 0x38);
    }

    #[test]
    fn unmapped_ids_are_corrupt() {
        let raw = raw_cw1(&[(7, 9, 0)]);
        let e = decode_nodes(
            &raw,
            1,
            &[NameId {
                id: 0,
                name: b"air",
            }],
        )
        .err()
        .unwrap();
        assert!(e.message().contains("node 7 has id 9"), "{e}");
    }

    #[test]
    fn encoding_renumbers_by_first_use() {
        let block = MapBlock {
            version: 29,
            flags: 0,
            lighting_complete: 0xFFFF,
            timestamp: 0,
            names: vec!["unused".into(), "b".into(), "a".into(), "b".into()],
            content: (0..NODE_COUNT).map(|i| [2u16, 1, 3][i % 3]).collect(),
            param1: vec![0; NODE_COUNT],
            param2: vec![0; NODE_COUNT],
            metadata: vec![],
            objects: vec![],
            timers: vec![],
        };
        let enc = encode_nodes(&block).unwrap();
        assert_eq!(&enc.nodes[..6], &[0, 0, 0, 1, 0, 1]);
        assert_eq!(
            enc.name_ids,
            b"\x00\x00\x02\x00\x00\x00\x01a\x00\x01\x00\x01b"
        );
    }
}
