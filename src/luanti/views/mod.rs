//! Text views of a map block: the files of `blocks/X,Y,Z/` (DESIGN.md "The trees").
//!
//! Each view renders deterministically (equal blocks give identical bytes) and parses what a
//! person would type in an editor, rejecting everything else with line, column and reason.
//! Every position is relative to the block's origin (node = 16 · block + relative), so a
//! copied block folder is a correct block at its new place. Metadata folders are the tree's.

mod header;
mod light;
mod nodes;
mod objects;
mod text;
mod timers;

pub use header::{parse_header, render_header};
pub use light::{parse_light, render_light};
pub use nodes::{parse_nodes, render_nodes};
pub use objects::{parse_objects, render_objects};
pub use timers::{parse_timers, render_timers};

use crate::luanti::block::{MapBlock, ObjectData, NODE_COUNT};

/// About how many bytes the five views of `block` take once rendered (each at most a few
/// percent under, never far over): what a cached block holds besides its decoded form.
pub fn rendered_size(block: &MapBlock) -> usize {
    // block.txt, and light.txt: two hex digits and a space per node, a line per row.
    let fixed = 600 + 1000 + NODE_COUNT * 3 + 256 * 8;
    // nodes.cubeset: one definition per (name, param2) pair, up to four bytes a cell.
    let mut pairs: Vec<u32> = block
        .content
        .iter()
        .zip(&block.param2)
        .map(|(&c, &p)| u32::from(c) << 8 | u32::from(p))
        .collect();
    pairs.sort_unstable();
    pairs.dedup();
    let definitions: usize = pairs
        .iter()
        .map(|k| block.names.get((k >> 8) as usize).map_or(0, String::len) * 2 + 24)
        .sum();
    let cells = if pairs.len() > 90 { 4 } else { 1 };
    let nodes = 1000 + definitions + NODE_COUNT * cells + 256 * 8;
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
    use crate::luanti::block::{BlockPos, LuaEntity, NodeTimer, RelPos, StaticObject};
    use crate::luanti::blocks::new_block;

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
        for block in [plain, busy] {
            let (actual, estimate) = (rendered(&block), rendered_size(&block));
            assert!(actual <= estimate, "{actual} > {estimate}");
            assert!(
                estimate <= actual + actual / 2 + 16_000,
                "{estimate} vs {actual}"
            );
        }
    }
}
