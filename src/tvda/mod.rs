//! Terrarum TVDA disks (spec version 254) and TEVD v3 disks.
//!
//! Layers, each usable without the ones above it:
//! - codecs: `container` (the TVDA header, entries, CRCs, index scan), `chunk` (chunk entry
//!   IDs, tile layers), `compress` (gzip, zstd, Snappy framing), `tevd` (TEVD v2/v3 disks);
//! - views: `names` (readable names of entries), `json_view` (savegameinfo and actor JSON),
//!   `inventory` (a player's item list), `chunk_view` (chunk tiles as Cubeset grids);
//! - stores: `store` (a TVDA file, crash-safe commits, compaction), `tevd_store` (a TEVD
//!   disk as a directory tree), `lock` (keeps compaction away from a mounted disk);
//! - trees: `tree` (a TVDA disk's decoded files), `tevd_tree` (a TEVD disk's folders);
//! - commands: `format` (which TEVd disk a file is), `inspect` (`info`, `check`),
//!   `compact`.

pub mod bytes;
pub mod chunk;
pub mod chunk_view;
pub mod compact;
pub mod compress;
pub mod container;
pub mod format;
pub mod inspect;
pub mod inventory;
pub mod json_view;
pub mod names;
pub mod store;
pub mod tevd;
pub mod tevd_store;
pub mod tevd_tree;
pub mod tree;
