//! The disk files of the TEVd family and their transactions.
//!
//! - [`format`]: which member of the family a file is, from its first bytes;
//! - [`tvda`]: a TVDA disk, read entry by entry, changed by crash-safe appends or rewrites;
//! - [`tevd`]: a TEVD disk as a directory tree, changed by one crash-safe rewrite;
//! - [`compact`]: `worldfs compact`, a TVDA disk rewritten without dead entries.
//!
//! Both stores open their file the same way and tell another program's write by the same
//! [`Stamp`], kept here once.

pub mod compact;
pub mod format;
pub mod tevd;
pub mod tvda;

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::error::{Error, Result};
use crate::storekit::replace::{open_no_follow, remove_leftovers};

/// Mode of a disk file worldfs creates (less the umask).
pub(super) const NEW_DISK_MODE: u32 = 0o644;

/// What identifies one version of a disk file: a rewrite (new inode) or an append or write in
/// place (length, modification time) by another program changes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stamp {
    pub(super) len: u64,
    ino: u64,
    mtime: i64,
    mtime_nsec: i64,
}

impl Stamp {
    pub(super) fn of(file: &File) -> Result<Stamp> {
        let m = file.metadata()?;
        Ok(Stamp {
            len: m.len(),
            ino: m.ino(),
            mtime: m.mtime(),
            mtime_nsec: m.mtime_nsec(),
        })
    }

    pub(super) fn of_path(path: &Path) -> Result<Stamp> {
        Stamp::of(&File::open(path)?)
    }
}

/// Opens a disk file and stamps it. A disk opened to be written (`appends` when the store
/// writes into the file itself) is never opened through a link, and temporary files of an
/// interrupted rewrite are removed.
pub(super) fn open_disk(path: &Path, writable: bool, appends: bool) -> Result<(File, Stamp)> {
    let file = if writable {
        let file = open_no_follow(path, appends)?;
        remove_leftovers(path)?;
        file
    } else {
        File::open(path).map_err(|e| Error::from(e).context(path.display()))?
    };
    let stamp = Stamp::of(&file)?;
    Ok((file, stamp))
}
