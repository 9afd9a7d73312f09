//! `blocks.cubeset`: a chunk's cells as a Cubeset grid of 16 × height × 16.
//!
//! Definition TYPE is the numeric block id, META the block data; the comment after a
//! definition is the block's name. Light is not part of this file (see `light.txt`) and
//! stays as it was. After an edit, every column whose block ids changed gets its stored top
//! height recomputed from its cells, as the game's light updater would.

use crate::cubeset::{self, Definition, Grid};
use crate::error::{Error, Result};
use crate::survivalcraft::block_names::block_name;
use crate::survivalcraft::chunk::{Cell, Chunk};

/// The chunk as a grid; palette sorted by (id, data).
pub fn to_grid(chunk: &Chunk) -> Grid {
    let mut pairs: Vec<(u16, u32)> = chunk.cells().iter().map(|c| (c.id, c.data)).collect();
    pairs.sort_unstable();
    pairs.dedup();
    let cells = chunk
        .cells()
        .iter()
        .map(|c| pairs.binary_search(&(c.id, c.data)).map_or(0, |i| i as u32))
        .collect();
    Grid {
        size: [16, chunk.height(), 16],
        palette: pairs
            .iter()
            .map(|&(id, data)| Definition {
                kind: id.to_string(),
                meta: data,
            })
            .collect(),
        cells,
    }
}

/// The comment shown after a definition: the block's name.
pub fn comment(def: &Definition) -> Option<String> {
    def.kind
        .parse::<u16>()
        .ok()
        .and_then(block_name)
        .map(str::to_string)
}

/// Renders `blocks.cubeset`.
pub fn render(chunk: &Chunk) -> Vec<u8> {
    cubeset::render(&to_grid(chunk), &comment)
}

fn block_id(def: &Definition, max: u16) -> Result<u16> {
    let k = def.kind.as_str();
    let id: u16 = if !k.is_empty() && k.len() <= 5 && k.bytes().all(|b| b.is_ascii_digit()) {
        k.parse()
            .map_err(|_| Error::invalid(format!("block id {k:?} is not a number")))?
    } else {
        return Err(Error::invalid(format!("block id {k:?} is not a number")));
    };
    if id > max {
        return Err(Error::invalid(format!("block id {id} is over {max}")));
    }
    Ok(id)
}

/// Applies a grid onto `base`: new ids and data, light kept, tops of changed columns
/// recomputed.
pub fn from_grid(base: &Chunk, grid: &Grid) -> Result<Chunk> {
    let format = base.format();
    if grid.size != [16, base.height(), 16] {
        return Err(Error::invalid(format!(
            "grid is {}x{}x{}, a chunk is 16x{}x16",
            grid.size[0],
            grid.size[1],
            grid.size[2],
            base.height()
        )));
    }
    let mut palette = Vec::with_capacity(grid.palette.len());
    for def in &grid.palette {
        let id = block_id(def, format.max_id())
            .and_then(|id| {
                if def.meta > format.max_data() {
                    Err(Error::invalid(format!(
                        "block data {} is over {}",
                        def.meta,
                        format.max_data()
                    )))
                } else {
                    Ok(id)
                }
            })
            .map_err(|e| e.context(format!("definition \"{}: {}\"", def.kind, def.meta)))?;
        palette.push((id, def.meta));
    }
    if grid.cells.len() != base.cells().len() {
        return Err(Error::invalid("grid has the wrong number of cells"));
    }
    let mut cells = Vec::with_capacity(grid.cells.len());
    for (&p, old) in grid.cells.iter().zip(base.cells()) {
        let &(id, data) = palette
            .get(p as usize)
            .ok_or_else(|| Error::invalid(format!("cell uses undefined definition {p}")))?;
        cells.push(Cell {
            id,
            data,
            light: old.light,
        });
    }
    let mut out = Chunk::from_parts(format, cells, base.columns().to_vec())?;
    out.follow_tops(base);
    Ok(out)
}

/// Parses an edited `blocks.cubeset` onto `base`.
pub fn parse(base: &Chunk, text: &[u8]) -> Result<Chunk> {
    from_grid(base, &cubeset::parse(text)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::survivalcraft::format::TerrainFormat;

    #[test]
    fn grid_round_trip_keeps_light_and_follows_tops() {
        let mut c = Chunk::empty(TerrainFormat::Chunks16);
        c.set_cell(
            2,
            10,
            3,
            Cell {
                id: 3,
                light: 0,
                data: 1,
            },
        )
        .unwrap();
        c.set_cell(
            2,
            11,
            3,
            Cell {
                id: 0,
                light: 15,
                data: 0,
            },
        )
        .unwrap();
        let mut g = to_grid(&c);
        assert_eq!(g.palette.len(), 2);
        assert_eq!(from_grid(&c, &g).unwrap(), c);
        // Put granite at y=20 of column (2,3).
        let granite = g.palette.iter().position(|d| d.kind == "3").unwrap() as u32;
        g.cells[Chunk::index(2, 20, 3)] = granite;
        let e = from_grid(&c, &g).unwrap();
        assert_eq!(e.column(2, 3).unwrap().top, 20);
        assert_eq!(e.cell(2, 11, 3).unwrap().light, 15);
        assert_eq!(e.column(0, 0).unwrap().top, 0);
    }

    #[test]
    fn out_of_range_definitions_are_rejected() {
        let c = Chunk::empty(TerrainFormat::Chunks32);
        let mut g = to_grid(&c);
        for (kind, meta) in [
            ("1024", 0),
            ("-1", 0),
            ("dirt", 0),
            ("3", 1 << 18),
            ("", 0),
            ("99999999", 0),
        ] {
            g.palette[0] = Definition {
                kind: kind.into(),
                meta,
            };
            assert!(from_grid(&c, &g).is_err(), "{kind} {meta}");
        }
        let c16 = Chunk::empty(TerrainFormat::Chunks16);
        let mut g = to_grid(&c16);
        g.palette[0] = Definition {
            kind: "256".into(),
            meta: 0,
        };
        assert!(from_grid(&c16, &g).is_err());
        g.palette[0] = Definition {
            kind: "255".into(),
            meta: 16,
        };
        assert!(from_grid(&c16, &g).is_err());
        g.palette[0] = Definition {
            kind: "255".into(),
            meta: 15,
        };
        assert!(from_grid(&c16, &g).is_ok());
        g.cells[5] = 9;
        assert!(from_grid(&c16, &g).is_err());
        g.size = [16, 256, 16];
        assert!(from_grid(&c16, &g).is_err());
    }
}
