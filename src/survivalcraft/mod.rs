//! Survivalcraft worlds: Chunks.dat, Chunks32.dat, Chunks32h.dat, region files, Project.xml.
//!
//! Layers: [`codec`] (bytes ⇄ [`chunk::Chunk`] and Project.xml inventories, no I/O),
//! [`views`] (chunks and inventories ⇄ the text files of the tree) and [`store`] (world
//! folders and `.scworld` files: listing, reading and crash-safe commits), then
//! [`objects`] (decoded chunks and Project.xml on demand) and [`tree`] (the mounted tree);
//! [`inspect`] holds `worldfs info` and `worldfs check`.

pub mod block_names;
pub mod chunk;
pub mod codec;
pub mod format;
pub mod inspect;
pub mod objects;
pub mod store;
pub mod tree;
pub mod views;
