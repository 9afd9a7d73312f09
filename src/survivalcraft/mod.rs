//! Survivalcraft worlds: Chunks.dat, Chunks32.dat, Chunks32h.dat, region files, Project.xml.
//!
//! The same layers as every game: [`codec`] (the terrain formats and their limits, bytes ⇄
//! [`codec::chunk::Chunk`] and Project.xml inventories, block names; no I/O), [`views`]
//! (chunks and inventories ⇄ the text files of the tree) and [`store`] (world folders and
//! `.scworld` files: listing, reading and crash-safe commits), then [`cache`] (decoded
//! chunks and Project.xml on demand), [`index`] (whole-world answers) and [`tree`] (the
//! mounted tree); [`inspect`] holds `worldfs info` and `worldfs check`.

pub mod cache;
pub mod codec;
pub mod index;
pub mod inspect;
pub mod store;
pub mod tree;
pub mod views;
