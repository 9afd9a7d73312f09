//! `nodes.cubeset`: the node names and param2 of a block as a 16 × 16 × 16 Cubeset grid.
//!
//! Each distinct (name, param2) pair is one definition `"C: NAME: PARAM2"`; the grid's cell
//! (x, y, z) is the node at block-relative (x, y, z). param1 (light) is in `light.txt`.
//! Reading rebuilds the block's names, content and param2 canonically (names unique, all
//! used, in order of first use by node index), rejecting param2 above 255, empty names and
//! names longer than 65,535 bytes.

use std::collections::HashMap;

use crate::cubeset::{self, Definition, Grid};
use crate::error::{Error, Result};
use crate::luanti::codec::block::{MapBlock, BLOCK_SIZE, NODE_COUNT};

const SIZE: [usize; 3] = [BLOCK_SIZE; 3];

/// Up to this many names, (content, param2) pairs are looked up in a table of names × 256.
const DENSE_NAMES: usize = 32;

/// `nodes.cubeset`: node names and param2 as a Cubeset file.
pub fn render_nodes(block: &MapBlock) -> Vec<u8> {
    let names = block.names.len();
    let grid = if names <= DENSE_NAMES {
        grid_dense(block)
    } else {
        grid_sparse(block)
    };
    cubeset::render(&grid, &|_| None)
}

/// Grid order is y, z, x and node index z*256 + y*16 + x, so each grid row is a run of 16
/// nodes in the block's arrays: the start of the row of grid rows in order.
fn row_starts() -> impl Iterator<Item = usize> {
    (0..BLOCK_SIZE).flat_map(|y| (0..BLOCK_SIZE).map(move |z| z * 256 + y * 16))
}

/// The grid of a block with few names: (content, param2) pairs are looked up in a table of
/// names × 256 entries; content without a name and missing nodes are out of the palette's
/// range (the Cubeset shows them as undefined).
fn grid_dense(block: &MapBlock) -> Grid {
    let mut table = vec![u32::MAX; block.names.len() * 256];
    let mut palette: Vec<Definition> = Vec::new();
    let mut lookup = |c: u16, p: u8| -> u32 {
        let key = usize::from(c) << 8 | usize::from(p);
        match table.get(key) {
            Some(&index) if index != u32::MAX => index,
            _ => match (table.get_mut(key), block.names.get(usize::from(c))) {
                (Some(slot), Some(name)) => {
                    *slot = palette.len() as u32;
                    palette.push(Definition {
                        kind: name.clone(),
                        meta: u32::from(p),
                    });
                    *slot
                }
                // Content without a name: out of the palette, shown as undefined.
                _ => u32::MAX,
            },
        }
    };
    let mut cells: Vec<u32> = Vec::with_capacity(NODE_COUNT);
    for start in row_starts() {
        let (Some(content), Some(param2)) = (
            block.content.get(start..start + BLOCK_SIZE),
            block.param2.get(start..start + BLOCK_SIZE),
        ) else {
            cells.extend_from_slice(&[u32::MAX; BLOCK_SIZE]);
            continue;
        };
        let (Ok(content), Ok(param2)) = (
            <&[u16; BLOCK_SIZE]>::try_from(content),
            <&[u8; BLOCK_SIZE]>::try_from(param2),
        ) else {
            cells.extend_from_slice(&[u32::MAX; BLOCK_SIZE]);
            continue;
        };
        let mut row = [0u32; BLOCK_SIZE];
        if *content == [content[0]; BLOCK_SIZE] && *param2 == [param2[0]; BLOCK_SIZE] {
            // A row of one kind (common: air, stone): one lookup.
            row = [lookup(content[0], param2[0]); BLOCK_SIZE];
        } else {
            for ((d, &c), &p) in row.iter_mut().zip(content).zip(param2) {
                *d = lookup(c, p);
            }
        }
        cells.extend_from_slice(&row);
    }
    Grid {
        size: SIZE,
        palette,
        cells,
    }
}

/// The grid of any block: a hash map from (content, param2); cells whose content has no
/// name, or which are missing, are out of the palette's range (the Cubeset shows them as
/// undefined).
fn grid_sparse(block: &MapBlock) -> Grid {
    let mut map: HashMap<(u16, u8), u32> = HashMap::new();
    let mut palette: Vec<Definition> = Vec::new();
    let mut cells: Vec<u32> = Vec::with_capacity(NODE_COUNT);
    for start in row_starts() {
        for i in start..start + 16 {
            let (Some(&c), Some(&p)) = (block.content.get(i), block.param2.get(i)) else {
                cells.push(u32::MAX);
                continue;
            };
            let Some(name) = block.names.get(usize::from(c)) else {
                cells.push(u32::MAX);
                continue;
            };
            let index = *map.entry((c, p)).or_insert_with(|| {
                palette.push(Definition {
                    kind: name.clone(),
                    meta: u32::from(p),
                });
                palette.len() as u32 - 1
            });
            cells.push(index);
        }
    }
    Grid {
        size: SIZE,
        palette,
        cells,
    }
}

/// Parses `nodes.cubeset` into `block` (names, content, param2), canonically.
pub fn parse_nodes(text: &[u8], block: &mut MapBlock) -> Result<()> {
    let grid = cubeset::parse_checked(text, Some(SIZE), &check)?;
    if grid.cells.len() != NODE_COUNT {
        return Err(Error::invalid("nodes.cubeset must have 4096 cells"));
    }
    let mut names: Vec<String> = Vec::new();
    let mut name_ids: HashMap<&str, u16> = HashMap::new();
    let mut id_of: Vec<u16> = vec![u16::MAX; grid.palette.len()];
    let mut content = vec![0u16; NODE_COUNT];
    let mut param2 = vec![0u8; NODE_COUNT];
    for (i, (c, p2)) in content.iter_mut().zip(param2.iter_mut()).enumerate() {
        let x = i & 15;
        let y = (i >> 4) & 15;
        let z = i >> 8;
        let p = grid.cells[(y * 16 + z) * 16 + x] as usize;
        let def = &grid.palette[p];
        if id_of[p] == u16::MAX {
            let next = names.len() as u16;
            let id = *name_ids.entry(def.kind.as_str()).or_insert(next);
            if id == next {
                names.push(def.kind.clone());
            }
            id_of[p] = id;
        }
        *c = id_of[p];
        *p2 = def.meta as u8;
    }
    block.names = names;
    block.content = content;
    block.param2 = param2;
    Ok(())
}

/// What a Luanti definition must satisfy.
fn check(def: &Definition) -> std::result::Result<(), String> {
    if def.meta > 255 {
        return Err(format!("param2 {} is out of range (0 to 255)", def.meta));
    }
    if def.kind.is_empty() {
        return Err("empty node name".to_string());
    }
    if def.kind.len() > usize::from(u16::MAX) {
        return Err("node name longer than 65535 bytes".to_string());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(names: usize, seed: u64) -> MapBlock {
        let mut s = seed | 1;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let content: Vec<u16> = (0..NODE_COUNT)
            .map(|_| (next() % names as u64) as u16)
            .collect();
        let param2: Vec<u8> = (0..NODE_COUNT).map(|_| (next() % 3) as u8).collect();
        let mut b = crate::luanti::cache::new_block();
        b.names = (0..names).map(|i| format!("mod:node{i}")).collect();
        b.content = content;
        b.param2 = param2;
        b
    }

    #[test]
    fn dense_and_grid_sparse_render_the_same_file() {
        for (names, seed) in [(1, 1), (2, 7), (5, 99), (DENSE_NAMES, 3)] {
            let b = block(names, seed);
            let dense = cubeset::render(&grid_dense(&b), &|_| None);
            let sparse = cubeset::render(&grid_sparse(&b), &|_| None);
            assert_eq!(dense, sparse, "{names} names");
            assert_eq!(render_nodes(&b), dense);
        }
    }

    #[test]
    fn blocks_with_many_names_round_trip() {
        let b = block(DENSE_NAMES * 3, 5);
        let text = render_nodes(&b);
        let mut back = crate::luanti::cache::new_block();
        parse_nodes(&text, &mut back).unwrap();
        for i in 0..NODE_COUNT {
            let name = |m: &MapBlock| m.names[usize::from(m.content[i])].clone();
            assert_eq!(name(&back), name(&b));
            assert_eq!(back.param2[i], b.param2[i]);
        }
    }

    #[test]
    fn content_past_the_names_is_an_undefined_cell() {
        let mut b = block(3, 11);
        b.content[5] = 3;
        for grid in [grid_dense(&b), grid_sparse(&b)] {
            assert_eq!(grid.cells[5], u32::MAX);
            assert_ne!(grid.cells[4], u32::MAX);
        }
        let mut back = crate::luanti::cache::new_block();
        assert!(parse_nodes(&render_nodes(&b), &mut back).is_err());
    }
}
