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
use crate::luanti::block::{MapBlock, BLOCK_SIZE, NODE_COUNT};

const SIZE: [usize; 3] = [BLOCK_SIZE; 3];

/// Up to this many names, (content, param2) pairs are looked up in a table of names × 256.
const DENSE_NAMES: usize = 32;

/// Node index (`z*256 + y*16 + x`) of each grid cell (`(y*16 + z)*16 + x`).
fn node_index(cell: usize) -> usize {
    let (x, z, y) = (cell & 15, (cell >> 4) & 15, (cell >> 8) & 15);
    (z << 8) | (y << 4) | x
}

/// `nodes.cubeset`: node names and param2 as a Cubeset file.
pub fn render_nodes(block: &MapBlock) -> Vec<u8> {
    let mut palette: Vec<Definition> = Vec::new();
    let mut cells: Vec<u32> = Vec::with_capacity(NODE_COUNT);
    let names = block.names.len();
    // (content, param2) → palette index: a dense table for the usual few names.
    let mut dense: Vec<u32> = if names <= DENSE_NAMES {
        vec![u32::MAX; names * 256]
    } else {
        Vec::new()
    };
    let mut sparse: HashMap<(u16, u8), u32> = HashMap::new();
    for cell in 0..NODE_COUNT {
        let i = node_index(cell);
        let (Some(&content), Some(&param2)) = (block.content.get(i), block.param2.get(i)) else {
            cells.push(u32::MAX);
            continue;
        };
        let Some(name) = block.names.get(usize::from(content)) else {
            cells.push(u32::MAX);
            continue;
        };
        let slot = if names <= DENSE_NAMES {
            &mut dense[usize::from(content) * 256 + usize::from(param2)]
        } else {
            sparse.entry((content, param2)).or_insert(u32::MAX)
        };
        if *slot == u32::MAX {
            *slot = palette.len() as u32;
            palette.push(Definition {
                kind: name.clone(),
                meta: u32::from(param2),
            });
        }
        cells.push(*slot);
    }
    let grid = Grid {
        size: SIZE,
        palette,
        cells,
    };
    cubeset::render(&grid, &|_| None)
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
