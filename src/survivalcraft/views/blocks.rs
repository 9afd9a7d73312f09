//! `blocks.cubeset`: a chunk's cells as a Cubeset grid of 16 × height × 16.
//!
//! Definition TYPE is the numeric block id, META the block data; the comment after a
//! definition is the block's name. Light is not part of this file (see `light.txt`) and
//! stays as it was. After an edit, every column whose block ids changed gets its stored top
//! height recomputed from its cells, as the game's light updater would.

use crate::cubeset::{self, Definition, Grid};
use crate::error::{Error, Result};
use crate::survivalcraft::codec::block_names::block_name;
use crate::survivalcraft::codec::chunk::{Cell, Chunk};
use crate::survivalcraft::codec::format::TerrainFormat;

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

/// The block id of a definition, checking TYPE is a decimal id and META fits the format.
fn definition(def: &Definition, format: TerrainFormat) -> Result<(u16, u32)> {
    let k = def.kind.as_str();
    let id: u16 = match k.parse() {
        Ok(id) if k.len() <= 5 && k.bytes().all(|b| b.is_ascii_digit()) => id,
        _ => return Err(Error::invalid(format!("block id {k:?} is not a number"))),
    };
    if id > format.max_id() {
        return Err(Error::invalid(format!(
            "block id {id} is over {}",
            format.max_id()
        )));
    }
    if def.meta > format.max_data() {
        return Err(Error::invalid(format!(
            "block data {} is over {}",
            def.meta,
            format.max_data()
        )));
    }
    Ok((id, def.meta))
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
        let entry = definition(def, format)
            .map_err(|e| e.context(format!("definition \"{}: {}\"", def.kind, def.meta)))?;
        palette.push(entry);
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

/// Parses an edited `blocks.cubeset` onto `base`; a bad size or definition is reported at
/// its line and column.
pub fn parse(base: &Chunk, text: &[u8]) -> Result<Chunk> {
    let format = base.format();
    let check = |d: &Definition| {
        definition(d, format)
            .map(|_| ())
            .map_err(|e| e.message().to_string())
    };
    let grid = cubeset::parse_checked(text, Some([16, base.height(), 16]), &check)?;
    from_grid(base, &grid)
}

#[cfg(test)]
mod tests {
    use super::*;

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

#[cfg(test)]
mod text_tests {
    use super::*;

    fn chunk() -> Chunk {
        let mut c = Chunk::empty(TerrainFormat::Chunks16);
        for z in 0..16 {
            for x in 0..16 {
                c.set_cell(
                    x,
                    0,
                    z,
                    Cell {
                        id: 1,
                        light: 0,
                        data: 0,
                    },
                )
                .unwrap();
                c.set_cell(
                    x,
                    1,
                    z,
                    Cell {
                        id: 67,
                        light: 0,
                        data: (x % 3) as u32,
                    },
                )
                .unwrap();
            }
        }
        c
    }

    #[test]
    fn text_round_trips_with_names_in_comments() {
        let c = chunk();
        let text = render(&c);
        let s = String::from_utf8(text.clone()).unwrap();
        assert!(s.contains("Basalt"), "{}", &s[..600]);
        assert_eq!(parse(&c, &text).unwrap(), c);
    }

    #[test]
    fn bad_definitions_are_reported_at_their_line() {
        let c = chunk();
        let s = String::from_utf8(render(&c)).unwrap();
        let line = s.lines().position(|l| l.contains(": 67: 2\"")).unwrap() + 1;
        for (from, to, why) in [
            (": 67: 2\"", ": 1024: 2\"", "over 255"),
            (": 67: 2\"", ": 67: 16\"", "data 16 is over 15"),
            (": 67: 2\"", ": stone: 2\"", "not a number"),
        ] {
            let e = parse(&c, s.replacen(from, to, 1).as_bytes()).unwrap_err();
            assert!(
                e.message().starts_with(&format!("line {line}, column")),
                "{e}"
            );
            assert!(e.message().contains(why), "{e}");
        }
        let mut t = Chunk::empty(TerrainFormat::Chunks32);
        t.set_cell(
            0,
            0,
            0,
            Cell {
                id: 5,
                light: 0,
                data: 0,
            },
        )
        .unwrap();
        let s = String::from_utf8(render(&t))
            .unwrap()
            .replacen(": 5: 0\"", ": 1024: 0\"", 1);
        assert!(parse(&t, s.as_bytes())
            .unwrap_err()
            .message()
            .contains("over 1023"));
        // The grid of another height is refused.
        assert!(parse(&Chunk::empty(TerrainFormat::Chunks32h), &render(&c)).is_err());
    }
}
