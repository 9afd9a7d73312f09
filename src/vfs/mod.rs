//! The FUSE-agnostic filesystem core shared by every game: the [`Tree`] contract, inodes,
//! open files and their handles, held text, renames and what the kernel keeps. The FUSE
//! adapter (`crate::fuse`) only translates; what stores and trees share to keep their files
//! (atomic replacement, recorded times, object caches, locks, real folders) is the store
//! toolkit, [`crate::storekit`], which knows nothing of the core.

mod access;
pub mod buffer;
pub mod core;
pub mod descriptors;
pub mod fresh;
pub mod handles;
pub mod held;
pub mod inodes;
pub mod kernel;
pub mod kernel_cache;
pub mod naming;
pub mod overlay;
pub mod paths;
pub mod permission;
#[cfg(test)]
pub mod race_hook;
pub mod readdir;
#[cfg(test)]
mod reftest;
pub mod removals;
pub mod rename;
pub mod report;
#[cfg(test)]
pub mod test_tree;
pub mod tree;

pub use self::core::Vfs;
pub use self::paths::OpenMode;
pub use self::readdir::DirEntry;
pub use self::tree::{Entry, Kind, NewFile, Numbering, Removal, Stat, Tree, TreePath};
