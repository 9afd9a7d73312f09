//! Advisory locks on a disk file, so `worldfs compact` can tell that a disk is mounted.
//!
//! A mount holds a shared `flock` on its disk file for as long as it runs; compaction takes
//! an exclusive one without waiting and refuses when it cannot. A commit that rewrites the
//! disk renames a new file over the old one, which leaves the lock on the old inode, so the
//! mount re-locks the new file after each commit (`follow`). The game itself takes no
//! locks; these only keep worldfs's own commands apart.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

use crate::error::{Error, Result};

/// A held lock on a disk file.
pub struct DiskLock {
    /// Held until dropped.
    _lock: Flock<File>,
    ino: u64,
}

impl DiskLock {
    fn take(path: &Path, arg: FlockArg, busy: &str) -> Result<DiskLock> {
        let file = File::open(path).map_err(|e| Error::from(e).context(path.display()))?;
        let ino = file.metadata()?.ino();
        let lock = Flock::lock(file, arg).map_err(|(_, errno)| match errno {
            Errno::EWOULDBLOCK => Error::new(libc::EBUSY, format!("{}: {busy}", path.display())),
            e => Error::new(e as i32, format!("{}: cannot lock: {e}", path.display())),
        })?;
        Ok(DiskLock { _lock: lock, ino })
    }

    /// The shared lock a mount holds.
    pub fn shared(path: &Path) -> Result<DiskLock> {
        DiskLock::take(
            path,
            FlockArg::LockSharedNonblock,
            "the disk is being compacted",
        )
    }

    /// The exclusive lock of compaction; `EBUSY` while the disk is mounted.
    pub fn exclusive(path: &Path) -> Result<DiskLock> {
        DiskLock::take(
            path,
            FlockArg::LockExclusiveNonblock,
            "the disk is mounted (unmount it first)",
        )
    }

    /// Re-takes a shared lock when `path` is now another file (after a rewrite).
    pub fn follow(&mut self, path: &Path) -> Result<()> {
        if std::fs::metadata(path)?.ino() != self.ino {
            *self = DiskLock::shared(path)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_locks_exclude_compaction_and_follow_renames() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("disk");
        std::fs::write(&path, b"a").unwrap();
        let mut mounted = DiskLock::shared(&path).unwrap();
        let _second = DiskLock::shared(&path).unwrap();
        let e = DiskLock::exclusive(&path).err().unwrap();
        assert_eq!(e.errno(), libc::EBUSY);
        assert!(e.message().contains("mounted"), "{e}");
        drop(_second);
        let tmp = dir.path().join("disk.new");
        std::fs::write(&tmp, b"b").unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        assert!(
            DiskLock::exclusive(&path).is_ok(),
            "lock was on the old inode"
        );
        mounted.follow(&path).unwrap();
        assert!(DiskLock::exclusive(&path).is_err());
        drop(mounted);
        assert!(DiskLock::exclusive(&path).is_ok());
    }
}
