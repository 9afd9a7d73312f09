//! The decoded chunk every format decodes to and encodes from.
//!
//! A chunk is 16 × H × 16 cells (H = 128 or 256) plus one surface record per column. Cells
//! are held in one order for all formats — y outermost, then z, x fastest, the order of the
//! Cubeset grid and of region files — so views never care where the chunk came from. The
//! fixed-size files store x/z/y (spec §1.1); their codec reorders.

use crate::error::{Error, Result};
use crate::survivalcraft::codec::format::TerrainFormat;

/// Chunk coordinates: block coordinates `>> 4` (the game's `Point2.Y` is world z).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChunkPos {
    /// Chunk x.
    pub cx: i32,
    /// Chunk z.
    pub cz: i32,
}

impl ChunkPos {
    /// A chunk position.
    pub fn new(cx: i32, cz: i32) -> Self {
        ChunkPos { cx, cz }
    }
}

impl std::fmt::Display for ChunkPos {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{},{}", self.cx, self.cz)
    }
}

impl std::str::FromStr for ChunkPos {
    type Err = Error;

    /// Parses the tree's folder name `CX,CZ`.
    fn from_str(s: &str) -> Result<Self> {
        let bad = || Error::invalid(format!("{s:?} is not a chunk position CX,CZ"));
        let (x, z) = s.split_once(',').ok_or_else(bad)?;
        let cx = x.parse().map_err(|_| bad())?;
        let cz = z.parse().map_err(|_| bad())?;
        let pos = ChunkPos { cx, cz };
        if pos.to_string() != s {
            return Err(bad());
        }
        Ok(pos)
    }
}

/// One cell as the format holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Cell {
    /// Block id (contents): 8 bits in `Chunks.dat`, 10 bits otherwise.
    pub id: u16,
    /// Light 0–15 (always 0 for region files, which do not store it).
    pub light: u8,
    /// Block-specific data: 4 bits in `Chunks.dat`, 18 bits otherwise.
    pub data: u32,
}

impl Cell {
    /// The 32-bit block value `id | light << 10 | data << 14` (spec §5).
    pub fn value32(self) -> u32 {
        u32::from(self.id & 0x3FF) | (u32::from(self.light & 0xF) << 10) | (self.data << 14)
    }

    /// Splits a 32-bit block value.
    pub fn from_value32(v: u32) -> Cell {
        Cell {
            id: (v & 0x3FF) as u16,
            light: ((v >> 10) & 0xF) as u8,
            data: v >> 14,
        }
    }

    /// The 16-bit block value `id | light << 8 | data << 12` (spec §2.3).
    pub fn value16(self) -> u16 {
        (self.id & 0xFF) | (u16::from(self.light & 0xF) << 8) | (((self.data & 0xF) as u16) << 12)
    }

    /// Splits a 16-bit block value.
    pub fn from_value16(v: u16) -> Cell {
        Cell {
            id: v & 0xFF,
            light: ((v >> 8) & 0xF) as u8,
            data: u32::from(v >> 12),
        }
    }
}

/// The surface record of one column ("shaft" in the game).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Column {
    /// y of the topmost non-air cell (derived; not stored in region files).
    pub top: u8,
    /// Temperature 0–15 (generator output).
    pub temperature: u8,
    /// Humidity 0–15 (generator output).
    pub humidity: u8,
    /// Shaft byte 2: bottom height in 2.x (derived; 1.x files hold 63–68 here).
    pub bottom: u8,
    /// Shaft byte 3: sunlight height (derived).
    pub sunlight: u8,
}

impl Column {
    /// The u32 shaft value of the fixed-size formats (spec §2.4).
    pub fn shaft(self) -> u32 {
        u32::from(self.top)
            | (u32::from(self.temperature & 0xF) << 8)
            | (u32::from(self.humidity & 0xF) << 12)
            | (u32::from(self.bottom) << 16)
            | (u32::from(self.sunlight) << 24)
    }

    /// Splits a u32 shaft value.
    pub fn from_shaft(v: u32) -> Column {
        Column {
            top: (v & 0xFF) as u8,
            temperature: ((v >> 8) & 0xF) as u8,
            humidity: ((v >> 12) & 0xF) as u8,
            bottom: ((v >> 16) & 0xFF) as u8,
            sunlight: (v >> 24) as u8,
        }
    }
}

/// A decoded chunk: `16 × height × 16` cells and 256 columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    format: TerrainFormat,
    cells: Vec<Cell>,
    columns: Vec<Column>,
}

impl Chunk {
    /// An all-air chunk of a format.
    pub fn empty(format: TerrainFormat) -> Chunk {
        Chunk {
            format,
            cells: vec![Cell::default(); 256 * format.height()],
            columns: vec![Column::default(); 256],
        }
    }

    /// The format the chunk came from (and will be written as).
    pub fn format(&self) -> TerrainFormat {
        self.format
    }

    /// Cells per column.
    pub fn height(&self) -> usize {
        self.format.height()
    }

    /// Index of cell (x, y, z) in [`Chunk::cells`]: `(y * 16 + z) * 16 + x`.
    pub fn index(x: usize, y: usize, z: usize) -> usize {
        (y * 16 + z) * 16 + x
    }

    /// All cells, y outermost, then z, x fastest.
    pub fn cells(&self) -> &[Cell] {
        &self.cells
    }

    /// The cell at (x, y, z); `None` outside the chunk.
    pub fn cell(&self, x: usize, y: usize, z: usize) -> Option<Cell> {
        if x >= 16 || z >= 16 {
            return None;
        }
        self.cells.get(Self::index(x, y, z)).copied()
    }

    /// Sets a cell, checking it fits the format (id and data width; light 0–15).
    pub fn set_cell(&mut self, x: usize, y: usize, z: usize, cell: Cell) -> Result<()> {
        check_cell(self.format, cell)?;
        if x >= 16 || z >= 16 || y >= self.height() {
            return Err(Error::invalid(format!(
                "cell {x},{y},{z} is outside the chunk"
            )));
        }
        let i = Self::index(x, y, z);
        if let Some(c) = self.cells.get_mut(i) {
            *c = cell;
        }
        Ok(())
    }

    /// The column record at (x, z); index `z * 16 + x` in [`Chunk::columns`].
    pub fn column(&self, x: usize, z: usize) -> Option<Column> {
        if x >= 16 || z >= 16 {
            return None;
        }
        self.columns.get(z * 16 + x).copied()
    }

    /// All columns, z outer, x fastest.
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// Replaces a column record (temperature and humidity 0–15).
    pub fn set_column(&mut self, x: usize, z: usize, column: Column) -> Result<()> {
        if column.temperature > 15 || column.humidity > 15 {
            return Err(Error::invalid("temperature and humidity are 0-15"));
        }
        if x >= 16 || z >= 16 {
            return Err(Error::invalid(format!(
                "column {x},{z} is outside the chunk"
            )));
        }
        if let Some(c) = self.columns.get_mut(z * 16 + x) {
            *c = column;
        }
        Ok(())
    }

    /// y of the topmost non-air cell of a column, 0 if the column is all air (what the
    /// game's light updater stores as TopHeight).
    pub fn computed_top(&self, x: usize, z: usize) -> u8 {
        (0..self.height())
            .rev()
            .find(|&y| self.cell(x, y, z).is_some_and(|c| c.id != 0))
            .map_or(0, |y| y.min(255) as u8)
    }

    /// Builds a chunk from cells in this module's order and 256 columns, checking sizes and
    /// that every cell fits the format.
    pub fn from_parts(
        format: TerrainFormat,
        cells: Vec<Cell>,
        columns: Vec<Column>,
    ) -> Result<Chunk> {
        if cells.len() != 256 * format.height() || columns.len() != 256 {
            return Err(Error::invalid(format!(
                "a {format:?} chunk has {} cells and 256 columns, not {} and {}",
                256 * format.height(),
                cells.len(),
                columns.len()
            )));
        }
        for &c in &cells {
            check_cell(format, c)?;
        }
        for c in &columns {
            if c.temperature > 15 || c.humidity > 15 {
                return Err(Error::invalid("temperature and humidity are 0-15"));
            }
        }
        Ok(Chunk {
            format,
            cells,
            columns,
        })
    }

    /// Recomputes the stored top height of every column whose block ids differ from `old`
    /// (the way the game's light updater follows an edit); other columns keep theirs.
    pub fn follow_tops(&mut self, old: &Chunk) {
        for z in 0..16 {
            for x in 0..16 {
                let changed = (0..self.height())
                    .any(|y| self.cell(x, y, z).map(|c| c.id) != old.cell(x, y, z).map(|c| c.id));
                if changed {
                    let top = self.computed_top(x, z);
                    if let Some(c) = self.columns.get_mut(z * 16 + x) {
                        c.top = top;
                    }
                }
            }
        }
    }

    /// Converts to another format the way the game's converters do for cells that fit
    /// (1.28→1.29 keeps id, light and data; 2.1→2.2 fills y 128–255 with air), without the
    /// game's per-block id remaps. Fails if a cell does not fit the target.
    pub fn convert(&self, target: TerrainFormat) -> Result<Chunk> {
        let mut out = Chunk::empty(target);
        for y in 0..self.height() {
            for z in 0..16 {
                for x in 0..16 {
                    if let Some(mut c) = self.cell(x, y, z) {
                        if !target.stores_light() {
                            c.light = 0;
                        }
                        if y < target.height() {
                            out.set_cell(x, y, z, c)?;
                        } else if c.id != 0 {
                            return Err(Error::invalid(format!(
                                "cell {x},{y},{z} is above the {target:?} height"
                            )));
                        }
                    }
                }
            }
        }
        out.columns.clone_from(&self.columns);
        Ok(out)
    }
}

/// Checks a cell against a format's bit widths.
pub fn check_cell(format: TerrainFormat, cell: Cell) -> Result<()> {
    if cell.id > format.max_id() {
        return Err(Error::invalid(format!(
            "block id {} is over {} ({format:?})",
            cell.id,
            format.max_id()
        )));
    }
    if cell.data > format.max_data() {
        return Err(Error::invalid(format!(
            "block data {} is over {} ({format:?})",
            cell.data,
            format.max_data()
        )));
    }
    if cell.light > 15 {
        return Err(Error::invalid(format!("light {} is over 15", cell.light)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_split_and_join() {
        let c = Cell {
            id: 173,
            light: 0,
            data: 5,
        };
        assert_eq!(c.value16(), 20653);
        assert_eq!(Cell::from_value16(20653), c);
        let c = Cell {
            id: 1023,
            light: 15,
            data: 0x3FFFF,
        };
        assert_eq!(c.value32(), u32::MAX);
        assert_eq!(Cell::from_value32(u32::MAX), c);
        let s = Column {
            top: 70,
            temperature: 9,
            humidity: 3,
            bottom: 64,
            sunlight: 1,
        };
        assert_eq!(Column::from_shaft(s.shaft()), s);
    }

    #[test]
    fn positions_parse_strictly() {
        assert_eq!(
            "-3,17".parse::<ChunkPos>().ok(),
            Some(ChunkPos::new(-3, 17))
        );
        assert!("3, 17".parse::<ChunkPos>().is_err());
        assert!("+3,17".parse::<ChunkPos>().is_err());
        assert!("3".parse::<ChunkPos>().is_err());
    }

    #[test]
    fn cells_are_checked_against_the_format() {
        let mut c = Chunk::empty(TerrainFormat::Chunks16);
        assert!(c
            .set_cell(
                0,
                0,
                0,
                Cell {
                    id: 256,
                    light: 0,
                    data: 0
                }
            )
            .is_err());
        assert!(c
            .set_cell(
                0,
                0,
                0,
                Cell {
                    id: 1,
                    light: 0,
                    data: 16
                }
            )
            .is_err());
        assert!(c
            .set_cell(
                0,
                128,
                0,
                Cell {
                    id: 1,
                    light: 0,
                    data: 0
                }
            )
            .is_err());
        assert!(c
            .set_cell(
                15,
                127,
                15,
                Cell {
                    id: 255,
                    light: 15,
                    data: 15
                }
            )
            .is_ok());
        let mut c = Chunk::empty(TerrainFormat::Regions);
        assert!(c
            .set_cell(
                0,
                0,
                0,
                Cell {
                    id: 1024,
                    light: 0,
                    data: 0
                }
            )
            .is_err());
        assert!(c
            .set_cell(
                0,
                255,
                0,
                Cell {
                    id: 1023,
                    light: 0,
                    data: 0x3FFFF
                }
            )
            .is_ok());
    }

    #[test]
    fn tops_follow_changed_columns_only() {
        let mut old = Chunk::empty(TerrainFormat::Chunks32);
        old.columns[0].top = 99; // stale on purpose: untouched columns keep it
        old.columns[1].top = 42;
        let mut new = old.clone();
        new.set_cell(
            1,
            7,
            0,
            Cell {
                id: 3,
                light: 0,
                data: 0,
            },
        )
        .unwrap();
        new.follow_tops(&old);
        assert_eq!(new.column(0, 0).unwrap().top, 99);
        assert_eq!(new.column(1, 0).unwrap().top, 7);
    }
}
