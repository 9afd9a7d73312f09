//! worldfs: mount a voxel-game world as a tree of decoded, readable and writable files.
//!
//! Layers, each testable without the ones above it (docs/architecture.md):
//! codecs (bytes ⇄ structs) → text views (structs ⇄ files) → stores (containers,
//! transactions) → trees (paths → objects, cache, write-back) → the FUSE adapter.

// Data from disk and from users never panics the daemon: no unwrap, expect or panic outside
// tests (tests may unwrap).
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

pub mod bytes;
pub mod callers;
pub mod cli;
pub mod cubeset;
pub mod error;
pub mod fuse;
pub mod index_tree;
pub mod inspect;
pub mod luanti;
pub mod manpage;
pub mod mount;
pub mod names;
pub mod status;
pub mod storekit;
pub mod survivalcraft;
pub mod text;
pub mod tvda;
pub mod vfs;
pub mod worlds;

pub use error::{Error, Result};
