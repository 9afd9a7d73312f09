//! The Cubeset file format (version 1) for node grids, shared by every game's tree.
//! (Placeholder signatures; the views work replaces the bodies.)

use crate::error::Result;

/// One block definition line `"C: TYPE: META"`, with an optional comment shown after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Definition {
    /// TYPE: a node name (Luanti), a numeric block id (Survivalcraft), a tile name (Terrarum).
    pub kind: String,
    /// META: param2 (Luanti), block data (Survivalcraft), placement/amount (Terrarum).
    pub meta: u32,
}

/// A grid of cells, each an index into `palette`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grid {
    /// Size in x, y, z.
    pub size: [usize; 3],
    /// Distinct definitions; the writer assigns the characters.
    pub palette: Vec<Definition>,
    /// Cell `(x, y, z)` is at `(y * size_z + z) * size_x + x`.
    pub cells: Vec<u32>,
}

/// Renders a grid; `comment` gives the optional comment for a definition (e.g. a block name).
pub fn render(grid: &Grid, comment: &dyn Fn(&Definition) -> Option<String>) -> Vec<u8> {
    let _ = (grid, comment);
    unimplemented!("views")
}

/// Parses a Cubeset file into a grid; errors carry line and column.
pub fn parse(text: &[u8]) -> Result<Grid> {
    let _ = text;
    unimplemented!("views")
}
