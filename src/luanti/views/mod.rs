//! Text views of a map block: the files of `blocks/X,Y,Z/` (docs/tree.md "The tree"; layout in docs/architecture.md).
//!
//! Each view renders deterministically (equal blocks give identical bytes) and parses what a
//! person would type in an editor, rejecting everything else with line, column and reason.
//! Every position is relative to the block's origin (node = 16 · block + relative), so a
//! copied block folder is a correct block at its new place. Metadata folders are the tree's.

mod header;
mod light;
mod nodes;
mod objects;
mod timers;

pub use header::{parse_header, render_header};
pub use light::{parse_light, render_light};
pub use nodes::{parse_nodes, render_nodes};
pub use objects::{parse_objects, render_objects};
pub use timers::{parse_timers, render_timers};

use crate::luanti::codec::block::{MapBlock, ObjectData, NODE_COUNT};

/// About how many bytes the five views of `block` take once rendered: what a cached block
/// holds besides its decoded form. Never far over; under by at most some KiB, and never
/// under where it matters (a view of many MiB).
pub fn rendered_size(block: &MapBlock) -> usize {
    // block.txt, and light.txt: two hex digits and a space per node, a line per row.
    let fixed = 600 + 1000 + NODE_COUNT * 3 + 256 * 8;
    // nodes.cubeset: one definition per (name, param2) pair, up to four bytes a cell.
    let nodes = 1000 + 256 * 8 + nodes_size(block);
    // objects.txt: the fixed lines, names and states quoted, raw data in hexadecimal.
    let objects: usize = block
        .objects
        .iter()
        .map(|o| match &o.data {
            ObjectData::LuaEntity(e) => 260 + quoted_len(e.name.as_bytes()) + quoted_len(&e.state),
            ObjectData::Raw(d) => 80 + 2 * d.len(),
        })
        .sum();
    // timers.txt: a short line each.
    let timers = 100 + block.timers.len() * 40;
    fixed + nodes + objects + timers
}

/// About the size of the definitions and cells of `nodes.cubeset`. A block's names are
/// usually few and short: two definitions each are assumed, which is close and costs no
/// pass over the nodes. When the names could make the file large (a long name written once
/// per param2 value: a 64 KiB name with 256 values is 16 MiB of definitions), the pairs are
/// counted exactly.
fn nodes_size(block: &MapBlock) -> usize {
    let line = |name: &String| quoted_len(name.as_bytes()) + 24;
    let lines: usize = block.names.iter().map(line).sum();
    let cells = |pairs: usize| NODE_COUNT * if pairs > 90 { 4 } else { 1 };
    if lines * 256 <= 1 << 20 {
        return 2 * lines + cells(block.names.len() * 2);
    }
    let mut seen = vec![0u64; block.names.len() * 4];
    for (&c, &p) in block.content.iter().zip(&block.param2) {
        let key = usize::from(c) * 256 + usize::from(p);
        if let Some(word) = seen.get_mut(key / 64) {
            *word |= 1 << (key % 64);
        }
    }
    let (mut pairs, mut definitions) = (0, 0);
    for (name, words) in block.names.iter().zip(seen.chunks(4)) {
        let n: usize = words.iter().map(|w| w.count_ones() as usize).sum();
        pairs += n;
        definitions += n * line(name);
    }
    definitions + cells(pairs)
}

/// The length of `bytes` quoted by `text::push_quoted`.
fn quoted_len(bytes: &[u8]) -> usize {
    let mut n = 2;
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            n += match c {
                '"' | '\\' | '\n' | '\r' | '\t' => 2,
                c if c.is_control() => 4 * c.len_utf8(),
                c => c.len_utf8(),
            };
        }
        n += 4 * chunk.invalid().len();
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::luanti::cache::new_block;
    use crate::luanti::codec::block::{BlockPos, LuaEntity, NodeTimer, RelPos, StaticObject};

    fn rendered(block: &MapBlock) -> usize {
        let pos = BlockPos { x: 3, y: -1, z: 7 };
        render_header(block).len()
            + render_light(block).len()
            + render_nodes(block).len()
            + render_objects(block, pos).len()
            + render_timers(block).len()
    }

    /// The estimate is never under what the views take, and not far over.
    #[test]
    fn rendered_size_bounds_the_views() {
        let plain = new_block();
        let mut busy = new_block();
        busy.names = (0..300)
            .map(|i| format!("mod_{i}:node_{}", "x".repeat(i % 40)))
            .collect();
        busy.content = (0..NODE_COUNT).map(|i| (i * 7 % 300) as u16).collect();
        busy.param2 = (0..NODE_COUNT).map(|i| (i % 3) as u8).collect();
        busy.param1 = (0..NODE_COUNT).map(|i| i as u8).collect();
        let origin = [48 * 10_000, -16 * 10_000, 112 * 10_000];
        for i in 0..500 {
            let data = if i % 2 == 0 {
                ObjectData::LuaEntity(LuaEntity {
                    name: "mobs:sheep".into(),
                    state: (0..=255u8).cycle().take(i * 3).collect(),
                    hp: 7,
                    velocity: [1, -2, 3],
                    yaw: -1571,
                    extra: None,
                })
            } else {
                ObjectData::Raw(vec![0xab; i])
            };
            busy.objects.push(StaticObject {
                kind: if i % 2 == 0 { 7 } else { 3 },
                pos: origin.map(|o| o + i as i32 * 17),
                data,
            });
        }
        busy.timers = (0..200u16)
            .map(|i| NodeTimer {
                pos: RelPos::from_index(i * 20).unwrap(),
                timeout: -1_234_567,
                elapsed: 99_999,
            })
            .collect();
        // A long name with every param2 value: its definitions are most of the file.
        let mut long = new_block();
        long.names = vec!["n".repeat(5000)];
        long.param2 = (0..NODE_COUNT).map(|i| i as u8).collect();
        // Few short names with many param2 values: the cheap estimate is a little under.
        let mut varied = new_block();
        varied.names = (0..10).map(|i| format!("default:node_{i}")).collect();
        varied.content = (0..NODE_COUNT).map(|i| (i % 10) as u16).collect();
        varied.param2 = (0..NODE_COUNT).map(|i| (i / 10 % 24) as u8).collect();
        for block in [plain, busy, long, varied] {
            let (actual, estimate) = (rendered(&block), rendered_size(&block));
            assert!(actual <= estimate + 16_000, "{actual} > {estimate}");
            assert!(
                estimate <= actual + actual / 2 + 16_000,
                "{estimate} vs {actual}"
            );
        }
    }
}
