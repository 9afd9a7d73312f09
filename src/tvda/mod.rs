//! Terrarum TVDA disks (spec version 254) and TEVD v2/v3 disks: the TEVd disk family.
//!
//! The same layers as every game, each usable without the ones above it:
//! - [`codec`]: bytes ⇄ structs, pure: the TVDA and TEVD containers (headers, entries,
//!   CRCs, index scans), chunk entries and their tile layers, compression framings;
//! - [`views`]: structs ⇄ the text files of the tree: entry names, JSON documents, a
//!   player's inventory, chunk tiles as Cubeset grids;
//! - [`store`]: the disk files: which member of the family a file is, a TVDA disk with its
//!   crash-safe commits, a TEVD disk as a directory tree, compaction;
//! - [`cache`]: decoded and rendered entries of a TVDA disk, kept while the disk is unchanged;
//! - [`index`]: whole-disk answers (which chunks hold a tile, which inventories an item);
//! - [`tree`]: paths → entries, the mounted tree of a TVDA disk (and in [`tree::tevd`] of a
//!   TEVD disk);
//! - [`inspect`]: `worldfs info` and `worldfs check`.

pub mod cache;
pub mod codec;
pub mod index;
pub mod inspect;
pub mod store;
pub mod tree;
pub mod views;
