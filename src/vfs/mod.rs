//! The FUSE-agnostic filesystem core shared by every game: the [`Tree`] contract, inodes,
//! handles, scratch files and write-back. The FUSE adapter (`crate::fuse`) only translates.

mod access;
pub mod buffer;
pub mod core;
pub mod folder;
pub mod fresh;
pub mod handles;
pub mod held;
pub mod inodes;
pub mod journal;
pub mod kernel_cache;
pub mod lock;
pub mod mtimes;
pub mod objects;
pub mod overlay;
#[cfg(test)]
pub mod race_hook;
pub mod readdir;
#[cfg(test)]
mod reftest;
pub mod removals;
pub mod rename;
pub mod replace;
pub mod scan;
pub mod scratch;
#[cfg(test)]
pub mod test_tree;
pub mod throttle;
pub mod tree;

pub use self::core::Vfs;
pub use self::handles::OpenMode;
pub use self::readdir::DirEntry;
pub use self::tree::{Entry, Kind, NewFile, Removal, Stat, Tree, TreePath};
