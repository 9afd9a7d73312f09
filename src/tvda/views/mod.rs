//! Text views of TVDA entries: what a user reads and edits in the mounted tree.
//!
//! - [`names`]: the file names of entries (well-known names, actors, chunks, raw entries);
//! - [`json`]: savegame and actor JSON, pretty-printed and stored back compactly;
//! - [`inventory`]: a player's item list as `ITEM QUANTITY` lines;
//! - [`chunk`]: a chunk's tile layers as Cubeset grids;
//! - [`header`]: the disk header as `key = value` lines (`header.txt`).

pub mod chunk;
pub mod header;
pub mod inventory;
pub mod json;
pub mod names;
