//! The FUSE-agnostic filesystem core shared by every game: the [`Tree`] contract, inodes,
//! handles, scratch files and write-back. The FUSE adapter (`crate::fuse`) only translates.

pub mod core;
pub mod folder;
pub mod fresh;
pub mod held;
pub mod inodes;
pub mod lock;
pub mod mtimes;
pub mod objects;
#[cfg(test)]
pub mod race_hook;
pub mod replace;
pub mod scratch;
pub mod throttle;
pub mod tree;

pub use self::core::{DirEntry, OpenMode, Vfs};
pub use self::tree::{Entry, Kind, NewFile, Stat, Tree, TreePath};
