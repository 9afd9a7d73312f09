//! The edit matrix (issue "Nothing lost"): every edit path — node name, param2, light, a
//! metadata field, an inventory, a node timer, a static object, a new block by `cp -r`, the
//! restore of a block from a backup, a copy stopped after its block.txt and run again by
//! another mount (a remount: the tree opened anew) — applied to a real block of every serialization version
//! 22–29 through the Luanti tree's write API (the calls a mount's close makes), then:
//!
//! - the stored block decodes to the edit and nothing else changed (the only derived change is
//!   the light rule: node-name edits clear `lighting_complete` from version 27 on and set the
//!   `lighting_expired` flag before, unless block.txt was written too (a copy or a restore
//!   gives the source back exactly), and 22/23 are written as 25);
//! - the real engine loads every edited block and sees the edits (probe.sh).
//!
//! Blocks of versions 25, 27, 28 and 29 come from the samples in `shared/samples/luanti`,
//! read by path (the richest generated block of each version). No real block of 22, 23, 24 or
//! 26 survives anywhere: those are the richest real version-25 block laid out as the
//! 0.4-era writers did (22: type-id metadata list, no timers; 23: the unused byte, no
//! timers; 24 and 26 by the project's encoder). The engine test adds the block the engine
//! itself wrote in a fresh world (chest, sign, furnace: version 29 with metadata and a timer).

#[allow(dead_code)]
mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::engine::{mkworld, probe, ENGINE_RUNS};
use common::maps::{block_pos, map_databases, read_blocks};
use common::samples;
use rusqlite::{params, Connection};
use worldfs::luanti::codec::block::{
    BlockPos, Inventory, InventoryList, ItemStack, LuaEntity, MapBlock, MetaVar, NodeMeta,
    NodeTimer, ObjectData, RelPos, StaticObject, NODE_COUNT,
};
use worldfs::luanti::codec::{decode_block, encode_block};
use worldfs::luanti::store::map::pos_to_int;
use worldfs::luanti::tree::{block_name, LuantiTree};
use worldfs::luanti::views;
use worldfs::names;
use worldfs::vfs::tree::Options;
use worldfs::vfs::tree::Tree;

/// A block to edit, of one serialization version.
struct Source {
    label: String,
    /// The decoded block (objects at `home`).
    block: MapBlock,
    /// The stored bytes as found, when they are used unchanged (no objects to move).
    blob: Vec<u8>,
    /// The block the objects' positions belong to.
    home: BlockPos,
    /// How the stored bytes of the block at another place are made.
    layout: Layout,
}

#[derive(Clone, Copy, PartialEq)]
enum Layout {
    /// The real bytes, re-encoded by the project's encoder only when objects must move.
    Real,
    /// The project's encoder at this version (24, 26).
    Encoder(u8),
    /// A version-25 encoding laid out as version 23 or 22.
    Legacy(u8),
}

/// The edits, one column of the grid each.
const EDITS: [&str; 10] = [
    "node name",
    "param2",
    "light",
    "field",
    "inventory",
    "timer",
    "object",
    "cp -r",
    "restore",
    "copy resumed after a remount",
];
/// The first column of the edits that make their block (the copies).
const FIRST_COPY_COLUMN: i16 = 7;
/// The column holding the unedited source (what `cp -r` and the restore read).
const SOURCE_COLUMN: i16 = EDITS.len() as i16;

/// The grid cell of row `row`, column `col`: far from the engine world's blocks.
fn cell(row: usize, col: i16) -> BlockPos {
    BlockPos {
        x: 40 + col,
        y: row as i16,
        z: 40,
    }
}

fn block_path(pos: BlockPos, rest: &[&str]) -> Vec<String> {
    let mut p = vec!["blocks".to_string(), block_name(pos)];
    p.extend(rest.iter().map(|s| s.to_string()));
    p
}

fn rel_name(r: RelPos) -> String {
    format!("{},{},{}", r.x, r.y, r.z)
}

fn zlib_len(data: &[u8]) -> usize {
    let mut d = flate2::read::ZlibDecoder::new(data);
    std::io::copy(&mut d, &mut std::io::sink()).unwrap();
    d.total_in() as usize
}

fn zlib(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// A version-25 blob laid out as version 23 (the unused byte after the metadata, no
/// timers) or 22 (additionally an empty type-id metadata list; the block has no metadata).
fn legacy_layout(blob25: &[u8], version: u8, timers: usize) -> Vec<u8> {
    assert_eq!(blob25[0], 25);
    let nodes_end = 4 + zlib_len(&blob25[4..]);
    let meta_end = nodes_end + zlib_len(&blob25[nodes_end..]);
    let tail = &blob25[meta_end..blob25.len() - (3 + 10 * timers)];
    let mut out = vec![version, blob25[1], blob25[2], blob25[3]];
    out.extend_from_slice(&blob25[4..nodes_end]);
    if version == 23 {
        out.extend_from_slice(&blob25[nodes_end..meta_end]);
        out.push(0);
    } else {
        out.extend_from_slice(&zlib(&[0, 1, 0, 0]));
    }
    out.extend_from_slice(tail);
    out
}

/// The block's objects moved from `from` to `to` (as `mv` of a block folder does).
fn moved(block: &MapBlock, from: BlockPos, to: BlockPos) -> MapBlock {
    let mut b = block.clone();
    let d = [
        (i32::from(to.x) - i32::from(from.x)) * 160_000,
        (i32::from(to.y) - i32::from(from.y)) * 160_000,
        (i32::from(to.z) - i32::from(from.z)) * 160_000,
    ];
    for o in &mut b.objects {
        for (p, dp) in o.pos.iter_mut().zip(d) {
            *p += dp;
        }
    }
    b
}

impl Source {
    /// The stored bytes of this source placed at `at`.
    fn blob_at(&self, at: BlockPos) -> Vec<u8> {
        let block = moved(&self.block, self.home, at);
        match self.layout {
            Layout::Real if block == self.block => self.blob.clone(),
            Layout::Real => encode_block(&block).unwrap(),
            Layout::Encoder(v) => encode_block(&MapBlock {
                version: v,
                ..block
            })
            .unwrap(),
            Layout::Legacy(v) => {
                let blob25 = encode_block(&MapBlock {
                    version: 25,
                    ..block.clone()
                })
                .unwrap();
                legacy_layout(&blob25, v, block.timers.len())
            }
        }
    }
}

/// How interesting a block is to edit: metadata, objects, timers, then names.
fn richness(b: &MapBlock) -> (bool, bool, bool, usize) {
    (
        !b.metadata.is_empty(),
        !b.objects.is_empty(),
        !b.timers.is_empty(),
        b.names.len().min(16),
    )
}

/// The block of the first object's position, or `fallback`.
fn objects_home(b: &MapBlock, fallback: BlockPos) -> BlockPos {
    let Some(o) = b.objects.first() else {
        return fallback;
    };
    let c = |v: i32| (f64::from(v) / 10_000.0).round().div_euclid(16.0) as i16;
    BlockPos {
        x: c(o.pos[0]),
        y: c(o.pos[1]),
        z: c(o.pos[2]),
    }
}

/// Every block of the samples (map databases and single blobs) with where it was stored.
fn sample_blocks() -> Vec<(String, Vec<u8>, Option<BlockPos>)> {
    let dir = samples::root();
    let mut out = Vec::new();
    for db in map_databases(&samples::path(samples::LUANTI)) {
        for (key, blob) in read_blocks(&db) {
            let label = format!("{} {key:?}", db.strip_prefix(&dir).unwrap_or(&db).display());
            out.push((label, blob, Some(block_pos(key))));
        }
    }
    let mut files = samples::good_blocks();
    files.extend(samples::BAD_BLOCKS);
    files.sort();
    for f in files {
        out.push((f.to_string(), samples::read(f), None));
    }
    out
}

/// One source per version 22–29 (see the module documentation).
fn sources() -> Vec<Source> {
    let mut best: BTreeMap<u8, Source> = BTreeMap::new();
    let mut best_plain_25: Option<Source> = None;
    for (label, blob, stored_at) in sample_blocks() {
        let Ok(block) = decode_block(&blob) else {
            continue;
        };
        if block.flags & 0x08 != 0 || block.names.iter().all(|n| n == "air") {
            continue;
        }
        let home = objects_home(&block, stored_at.unwrap_or(BlockPos { x: 0, y: 0, z: 0 }));
        let source = Source {
            label,
            block,
            blob,
            home,
            layout: Layout::Real,
        };
        let v = source.block.version;
        if v == 25 && source.block.metadata.is_empty() {
            let better = best_plain_25
                .as_ref()
                .map_or(true, |b| richness(&source.block) > richness(&b.block));
            if better {
                best_plain_25 = Some(Source {
                    label: source.label.clone(),
                    block: source.block.clone(),
                    blob: source.blob.clone(),
                    home,
                    layout: Layout::Real,
                });
            }
        }
        let better = best
            .get(&v)
            .map_or(true, |b| richness(&source.block) > richness(&b.block));
        if better {
            best.insert(v, source);
        }
    }
    for v in [25, 27, 28, 29] {
        assert!(best.contains_key(&v), "no sample block of version {v}");
    }
    let derived = |from: &Source, layout: Layout, what: &str| {
        let version = match layout {
            Layout::Encoder(v) | Layout::Legacy(v) => v,
            Layout::Real => unreachable!(),
        };
        let made = Source {
            label: format!("{} {what}", from.label),
            block: from.block.clone(),
            blob: Vec::new(),
            home: from.home,
            layout,
        };
        // What the made bytes decode to is the block this source stands for.
        let blob = made.blob_at(made.home);
        assert_eq!(blob[0], version);
        Source {
            block: decode_block(&blob).unwrap(),
            blob,
            ..made
        }
    };
    let v25 = &best[&25];
    let plain = best_plain_25.expect("a version-25 sample block without metadata");
    let extra = vec![
        derived(&plain, Layout::Legacy(22), "laid out as version 22"),
        derived(v25, Layout::Legacy(23), "laid out as version 23"),
        derived(v25, Layout::Encoder(24), "encoded as version 24"),
        derived(v25, Layout::Encoder(26), "encoded as version 26"),
    ];
    for s in extra {
        best.insert(s.block.version, s);
    }
    best.into_values().collect()
}

/// The engine's version of what is stored: 22 and 23 are written as 25.
fn written_version(v: u8) -> u8 {
    if v < 24 {
        25
    } else {
        v
    }
}

/// The light rule of a node-name edit: the engine relights the block. From version 27 on
/// that is `lighting_complete = 0`; before, the `lighting_expired` flag (0x04).
fn relit(mut b: MapBlock) -> MapBlock {
    b.version = written_version(b.version);
    if b.version >= 27 {
        b.lighting_complete = 0;
    } else {
        b.flags |= 0x04;
    }
    b
}

/// Names in order of first use, unused ones dropped (the decoded form).
fn canonical(mut b: MapBlock) -> MapBlock {
    let mut names: Vec<String> = Vec::new();
    let mut content = Vec::with_capacity(NODE_COUNT);
    for &c in &b.content {
        let name = &b.names[usize::from(c)];
        let id = match names.iter().position(|n| n == name) {
            Some(i) => i,
            None => {
                names.push(name.clone());
                names.len() - 1
            }
        };
        content.push(id as u16);
    }
    b.names = names;
    b.content = content;
    b.version = written_version(b.version);
    b
}

/// A node index of `b` with no metadata and no timer, from a fixed list of candidates.
fn free_node(b: &MapBlock, taken: &[RelPos]) -> RelPos {
    (0..NODE_COUNT as u16)
        .map(|i| RelPos::from_index((i * 37 + 1100) % NODE_COUNT as u16).unwrap())
        .find(|r| {
            (1..15).contains(&r.x)
                && (1..15).contains(&r.y)
                && (1..15).contains(&r.z)
                && !b.metadata.iter().any(|m| m.pos == *r)
                && !b.timers.iter().any(|t| t.pos == *r)
                && !taken.contains(r)
        })
        .unwrap()
}

fn insert_meta(b: &mut MapBlock, meta: NodeMeta) {
    let at = b
        .metadata
        .partition_point(|m| m.pos.index() < meta.pos.index());
    b.metadata.insert(at, meta);
}

/// What the engine should report at a probed point: (node name, param1 if it is known,
/// param2, the lines below the node line).
struct Expect {
    at: RelPos,
    name: String,
    param1: Option<u8>,
    param2: u8,
    lines: Vec<String>,
}

/// One edited cell: where, what, the expected decoded block, the probe expectation.
struct Cell {
    row: usize,
    label: String,
    edit: &'static str,
    pos: BlockPos,
    expected: MapBlock,
    probe: Option<Expect>,
}

fn node_expect(b: &MapBlock, at: RelPos, param1: bool) -> Expect {
    let i = usize::from(at.index());
    Expect {
        at,
        name: b.names[usize::from(b.content[i])].clone(),
        param1: param1.then_some(b.param1[i]),
        param2: b.param2[i],
        lines: Vec::new(),
    }
}

/// Applies edit `col` to the source block stored at `at` through `tree`; returns the
/// expected decoded block and what the engine should see.
fn apply(
    tree: &LuantiTree,
    world: &Path,
    source_pos: BlockPos,
    at: BlockPos,
    edit: &str,
    original: &MapBlock,
) -> (MapBlock, Option<Expect>) {
    let write = |rest: &[&str], text: &[u8]| {
        tree.write(&block_path(at, rest), text)
            .unwrap_or_else(|e| panic!("{edit}: writing {}: {e}", rest.join("/")))
    };
    let mut e = original.clone();
    match edit {
        "node name" => {
            let r = free_node(original, &[]);
            let i = usize::from(r.index());
            e.names.push("worldfs:edited".into());
            e.content[i] = (e.names.len() - 1) as u16;
            write(&["nodes.cubeset"], &views::render_nodes(&e));
            let e = relit(canonical(e));
            let x = node_expect(&e, r, false);
            (e, Some(x))
        }
        "param2" => {
            let r = free_node(original, &[]);
            let i = usize::from(r.index());
            e.param2[i] = e.param2[i].wrapping_add(1);
            write(&["nodes.cubeset"], &views::render_nodes(&e));
            let e = canonical(e);
            let x = node_expect(&e, r, false);
            (e, Some(x))
        }
        "light" => {
            let r = free_node(original, &[]);
            let i = usize::from(r.index());
            e.param1[i] ^= 0x3c;
            write(&["light.txt"], &views::render_light(&e));
            let e = canonical(e);
            let x = node_expect(&e, r, true);
            (e, Some(x))
        }
        "field" => {
            // A new field on a node without metadata, and a changed value of an existing one.
            let r = free_node(original, &[]);
            tree.mkdir(&block_path(at, &["meta", &rel_name(r)]))
                .unwrap();
            write(
                &["meta", &rel_name(r), "fields", "worldfs_field"],
                b"edited value\n",
            );
            insert_meta(
                &mut e,
                NodeMeta {
                    pos: r,
                    vars: vec![MetaVar {
                        key: b"worldfs_field".to_vec(),
                        value: b"edited value".to_vec(),
                        private: false,
                    }],
                    inventory: Inventory::default(),
                },
            );
            if let Some(m) = e
                .metadata
                .iter_mut()
                .find(|m| m.pos != r && !m.vars.is_empty())
            {
                let v = &mut m.vars[0];
                v.value.extend_from_slice(b" (edited)");
                let kind = if v.private { "private" } else { "fields" };
                let mut text = v.value.clone();
                text.push(b'\n');
                write(
                    &["meta", &rel_name(m.pos), kind, &names::escape(&v.key)],
                    &text,
                );
            }
            let e = canonical(e);
            let mut x = node_expect(&e, r, false);
            x.lines
                .push("  field worldfs_field=\"edited value\"".into());
            (e, Some(x))
        }
        "inventory" => {
            let r = free_node(original, &[]);
            tree.mkdir(&block_path(at, &["meta", &rel_name(r)]))
                .unwrap();
            write(
                &["meta", &rel_name(r), "inventory"],
                b"List main 2\nWidth 0\nItem default:diamond 7\nEmpty\nEndInventoryList\nEndInventory\n",
            );
            insert_meta(
                &mut e,
                NodeMeta {
                    pos: r,
                    vars: Vec::new(),
                    inventory: Inventory {
                        lists: vec![InventoryList {
                            name: "main".into(),
                            width: 0,
                            slots: vec![
                                ItemStack {
                                    name: b"default:diamond".to_vec(),
                                    count: 7,
                                    wear: 0,
                                    metadata: Vec::new(),
                                },
                                ItemStack::default(),
                            ],
                        }],
                    },
                },
            );
            let e = canonical(e);
            let mut x = node_expect(&e, r, false);
            x.lines.push("  inv main[1]=default:diamond 7".into());
            (e, Some(x))
        }
        "timer" => {
            let r = free_node(original, &[]);
            let t = NodeTimer {
                pos: r,
                timeout: 5000,
                elapsed: 1000,
            };
            let at_i = e.timers.partition_point(|x| x.pos.index() < r.index());
            e.timers.insert(at_i, t);
            write(&["timers.txt"], &views::render_timers(&e));
            let e = canonical(e);
            let mut x = node_expect(&e, r, false);
            x.lines.push("  timer 5.000 1.000".into());
            (e, Some(x))
        }
        "object" => {
            let c = |b: i16| (i32::from(b) * 16 + 8) * 10_000;
            e.objects.push(StaticObject {
                kind: 7,
                pos: [c(at.x), c(at.y), c(at.z)],
                data: ObjectData::LuaEntity(LuaEntity {
                    name: "worldfs:probe_entity".into(),
                    state: b"return {edited = true}".to_vec(),
                    hp: 10,
                    velocity: [0, -250, 0],
                    yaw: 1571,
                    extra: None,
                }),
            });
            write(&["objects.txt"], &views::render_objects(&e, at));
            (canonical(e), None)
        }
        "copy resumed after a remount" => {
            // A copy stopped right after the block's block.txt (a killed daemon), then run
            // again by another mount: it writes block.txt unchanged, then the rest.
            tree.mkdir(&block_path(at, &[])).unwrap();
            let header = tree.read(&block_path(source_pos, &["block.txt"])).unwrap();
            write(&["block.txt"], &header);
            tree.sync().unwrap();
            let again = LuantiTree::open(
                world,
                &Options {
                    read_only: false,
                    cache_bytes: 8 << 20,
                },
            )
            .unwrap();
            assert!(copy_block(&again, source_pos, at, false) > 0);
            again.sync().unwrap();
            (canonical(e), None)
        }
        "cp -r" | "restore" => {
            let files = copy_block(tree, source_pos, at, edit == "restore");
            assert!(files > 0);
            // `original` is the source as it is at `at`: objects relative to the block. The
            // copy wrote block.txt itself, so it keeps the source's lighting flags exactly.
            (canonical(e), None)
        }
        other => panic!("unknown edit {other}"),
    }
}

/// Copies the block folder at `from` to `to` the way `cp -r` (readdir order) or a restore by
/// rsync (sorted names, into an existing block whose extra metadata it deletes, then the
/// times) writes it. Returns the number of files written.
fn copy_block(tree: &LuantiTree, from: BlockPos, to: BlockPos, restore: bool) -> usize {
    let source = |rest: &[&str]| tree.read(&block_path(from, rest)).unwrap();
    let list = |p: Vec<String>| {
        let mut names = Vec::new();
        tree.list(&p, 0, &mut |e| {
            names.push(e.name);
            true
        })
        .unwrap();
        names
    };
    let views_list = [
        "block.txt",
        "light.txt",
        "nodes.cubeset",
        "objects.txt",
        "timers.txt",
    ];
    let meta_nodes = list(block_path(from, &["meta"]));
    let mut written = Vec::new();
    let copy_meta = |written: &mut Vec<Vec<String>>| {
        for node in &meta_nodes {
            if tree.stat(&block_path(to, &["meta", node])).is_err() {
                tree.mkdir(&block_path(to, &["meta", node])).unwrap();
            }
            for kind in ["fields", "private"] {
                for key in list(block_path(from, &["meta", node, kind])) {
                    let p = ["meta", node.as_str(), kind, key.as_str()];
                    tree.write(&block_path(to, &p), &source(&p)).unwrap();
                    written.push(block_path(to, &p));
                }
            }
            let p = ["meta", node.as_str(), "inventory"];
            tree.write(&block_path(to, &p), &source(&p)).unwrap();
            written.push(block_path(to, &p));
        }
    };
    let copy_view = |v: &str, written: &mut Vec<Vec<String>>| {
        tree.write(&block_path(to, &[v]), &source(&[v]))
            .unwrap_or_else(|e| panic!("writing {v} of the copy: {e}"));
        written.push(block_path(to, &[v]));
    };
    if restore {
        // The restore goes into a block that exists, with metadata the backup does not have.
        tree.mkdir(&block_path(to, &[])).unwrap();
        tree.mkdir(&block_path(to, &["meta", "0,0,0"])).unwrap();
        tree.write(
            &block_path(to, &["meta", "0,0,0", "fields", "stale"]),
            b"x\n",
        )
        .unwrap();
        for v in &views_list[..2] {
            copy_view(v, &mut written);
        }
        tree.remove(&block_path(to, &["meta", "0,0,0", "fields", "stale"]))
            .unwrap();
        if !meta_nodes.iter().any(|n| n == "0,0,0") {
            tree.rmdir(&block_path(to, &["meta", "0,0,0"])).unwrap();
        }
        copy_meta(&mut written);
        for v in &views_list[2..] {
            copy_view(v, &mut written);
        }
        let when = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_600_000_000);
        for p in &written {
            tree.set_mtime(p, when).unwrap();
        }
    } else {
        if tree.stat(&block_path(to, &[])).is_err() {
            tree.mkdir(&block_path(to, &[])).unwrap();
        }
        for v in views_list {
            copy_view(v, &mut written);
        }
        copy_meta(&mut written);
    }
    written.len()
}

/// Builds the matrix in the world (or bare `map.sqlite`) at `world`: each source's bytes
/// stored in its row, every edit applied through the tree; returns the edited cells.
fn run_matrix(world: &Path, map: &Path, sources: &[Source]) -> Vec<Cell> {
    {
        let conn = Connection::open(map).unwrap();
        for (row, s) in sources.iter().enumerate() {
            for col in 0..=SOURCE_COLUMN {
                if (FIRST_COPY_COLUMN..SOURCE_COLUMN).contains(&col) {
                    continue; // made by the copies
                }
                let at = cell(row, col);
                conn.execute(
                    "INSERT INTO blocks (pos, data) VALUES (?1, ?2)",
                    params![pos_to_int(at), s.blob_at(at)],
                )
                .unwrap();
            }
        }
    }
    let tree = LuantiTree::open(
        world,
        &Options {
            read_only: false,
            cache_bytes: 8 << 20,
        },
    )
    .unwrap();
    let mut cells = Vec::new();
    for (row, s) in sources.iter().enumerate() {
        let source_pos = cell(row, SOURCE_COLUMN);
        for (col, edit) in EDITS.iter().enumerate() {
            let at = cell(row, col as i16);
            let original = decode_block(&s.blob_at(at)).unwrap();
            let (expected, probe) = apply(&tree, world, source_pos, at, edit, &original);
            cells.push(Cell {
                row,
                label: s.label.clone(),
                edit,
                pos: at,
                expected,
                probe,
            });
        }
    }
    cells
}

fn stored(map: &Path, pos: BlockPos) -> Vec<u8> {
    Connection::open(map)
        .unwrap()
        .query_row(
            "SELECT data FROM blocks WHERE pos = ?1",
            params![pos_to_int(pos)],
            |r| r.get(0),
        )
        .unwrap()
}

fn check_decoded(map: &Path, cells: &[Cell]) {
    let mut failures = Vec::new();
    for c in cells {
        let got = decode_block(&stored(map, c.pos)).unwrap();
        if got != c.expected {
            failures.push(format!(
                "{} ({}), {}: the stored block differs from the edit{}",
                c.label,
                c.expected.version,
                c.edit,
                describe_difference(&got, &c.expected)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn describe_difference(got: &MapBlock, want: &MapBlock) -> String {
    let mut out = String::new();
    // Each differing field, shown as `format` shows it (the node arrays are too long to show).
    let mut field = |name: &str, differs: bool, shown: &dyn Fn() -> (String, String)| {
        if differs {
            let (g, w) = shown();
            out.push_str(&format!("\n    {name}: stored {g}, expected {w}"));
        }
    };
    macro_rules! field {
        ($name:ident) => {
            field(stringify!($name), got.$name != want.$name, &|| {
                (String::new(), String::new())
            })
        };
        ($name:ident, $format:literal) => {
            field(stringify!($name), got.$name != want.$name, &|| {
                (format!($format, got.$name), format!($format, want.$name))
            })
        };
    }
    field!(version, "{}");
    field!(flags, "{:#x}");
    field!(lighting_complete, "{:#x}");
    field!(timestamp, "{}");
    field!(names, "{:?}");
    field!(content);
    field!(param1);
    field!(param2);
    field!(metadata, "{:?}");
    field!(objects, "{:?}");
    field!(timers, "{:?}");
    out
}

fn make_map(dir: &Path) -> PathBuf {
    let map = dir.join("map.sqlite");
    Connection::open(&map)
        .unwrap()
        .execute("CREATE TABLE blocks (pos INT PRIMARY KEY, data BLOB)", [])
        .unwrap();
    map
}

#[test]
fn every_edit_of_every_version_stores_the_edit_and_nothing_else() {
    let state = tempfile::tempdir().unwrap();
    std::env::set_var("WORLDFS_STATE_DIR", state.path());
    let sources = sources();
    let versions: Vec<u8> = sources.iter().map(|s| s.block.version).collect();
    assert_eq!(versions, [22, 23, 24, 25, 26, 27, 28, 29]);
    for s in &sources {
        println!("version {}: {}", s.block.version, s.label);
    }
    let dir = tempfile::tempdir().unwrap();
    let map = make_map(dir.path());
    let cells = run_matrix(&map, &map, &sources);
    assert_eq!(cells.len(), sources.len() * EDITS.len());
    check_decoded(&map, &cells);
}

/// What probe.sh printed, by point: the node line's fields and the lines below it.
fn probed_points(out: &str) -> BTreeMap<String, (String, u8, u8, Vec<String>)> {
    let mut points = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in out.lines() {
        if let Some(rest) = line.strip_prefix("node ") {
            let f: Vec<&str> = rest.split(' ').collect();
            points.insert(
                f[0].to_string(),
                (
                    f[1].to_string(),
                    f[2].parse().unwrap(),
                    f[3].parse().unwrap(),
                    Vec::new(),
                ),
            );
            current = Some(f[0].to_string());
        } else if line.starts_with("  ") {
            let key = current.as_ref().expect("a line below a node line");
            points.get_mut(key).unwrap().3.push(line.to_string());
        }
    }
    points
}

#[test]
fn the_engine_loads_every_edited_block_and_sees_the_edits() {
    let _engine = ENGINE_RUNS.lock().unwrap_or_else(|e| e.into_inner());
    let state = tempfile::tempdir().unwrap();
    std::env::set_var("WORLDFS_STATE_DIR", state.path());
    let tmp = tempfile::tempdir().unwrap();
    let world = tmp.path().join("world");
    mkworld(&world, 2);
    let map = world.join("map.sqlite");
    let mut sources = sources();
    // The block the engine wrote with the chest, sign and furnace.
    let home = BlockPos { x: 0, y: 0, z: 0 };
    let blob = stored(&map, home);
    sources.push(Source {
        label: "engine world block 0,0,0".into(),
        block: decode_block(&blob).unwrap(),
        blob,
        home,
        layout: Layout::Real,
    });
    let cells = run_matrix(&world, &map, &sources);
    check_decoded(&map, &cells);

    // The probed area is exactly the grid: every block in it is stored, so the engine
    // generates nothing there.
    let first = cell(0, 0);
    let last = cell(sources.len() - 1, SOURCE_COLUMN);
    let p1 = format!("{},{},{}", first.x * 16, first.y * 16, first.z * 16);
    let p2 = format!(
        "{},{},{}",
        last.x * 16 + 15,
        last.y * 16 + 15,
        last.z * 16 + 15
    );
    let abs = |c: &Cell, r: RelPos| {
        format!(
            "{},{},{}",
            i32::from(c.pos.x) * 16 + i32::from(r.x),
            i32::from(c.pos.y) * 16 + i32::from(r.y),
            i32::from(c.pos.z) * 16 + i32::from(r.z)
        )
    };
    let points: Vec<String> = cells
        .iter()
        .filter_map(|c| c.probe.as_ref().map(|x| abs(c, x.at)))
        .collect();
    let out = probe(&world, &p1, &p2, &points.join(";"));
    println!("{out}");

    // Every node of every block of the grid, by name, as the engine counts them.
    let mut want_counts: BTreeMap<String, usize> = BTreeMap::new();
    for row in 0..sources.len() {
        for col in 0..=SOURCE_COLUMN {
            let b = decode_block(&stored(&map, cell(row, col))).unwrap();
            for &c in &b.content {
                *want_counts
                    .entry(b.names[usize::from(c)].clone())
                    .or_default() += 1;
            }
        }
    }
    let got_counts: BTreeMap<String, usize> = out
        .lines()
        .filter_map(|l| l.strip_prefix("count "))
        .map(|l| {
            let (name, n) = l.rsplit_once(' ').unwrap();
            (name.to_string(), n.parse().unwrap())
        })
        .collect();
    assert_eq!(
        got_counts, want_counts,
        "the engine sees other nodes in the grid"
    );

    let seen = probed_points(&out);
    let mut failures = Vec::new();
    for c in &cells {
        let Some(x) = &c.probe else { continue };
        let key = abs(c, x.at);
        let Some((name, param1, param2, lines)) = seen.get(&key) else {
            failures.push(format!(
                "{} row {}: {}: point {key} not probed",
                c.label, c.row, c.edit
            ));
            continue;
        };
        let ok = *name == x.name
            && *param2 == x.param2
            && x.param1.map_or(true, |p| p == *param1)
            && *lines == x.lines;
        if !ok {
            failures.push(format!(
                "{} (version {}), {}: the engine sees {name} {param1} {param2} {lines:?} at {key}, \
                 expected {} {:?} {} {:?}",
                c.label, c.expected.version, c.edit, x.name, x.param1, x.param2, x.lines
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
