//! Advisory locks on a world's store, so worldfs processes keep out of each other's way.
//!
//! A read-write mount holds an exclusive `flock` on its store for as long as it runs (a
//! Luanti `map.sqlite`, a Survivalcraft world folder, a Terrarum disk file): a second writer
//! could corrupt a single-file store, so a second read-write mount is refused, naming the
//! process that holds the world. A read-only mount of a disk file holds a shared lock, and
//! `worldfs compact` takes an exclusive one, so compaction refuses a mounted disk. A commit
//! that rewrites a disk renames a new file over the old one, which leaves the lock on the old
//! inode, so the holder re-locks the new file after each commit (`follow`). The games take no
//! such locks (SQLite arbitrates its own writers); these only keep worldfs's processes apart.
//! The kernel drops a lock when its holder exits, however it ends.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

use crate::error::{Error, Result};

/// A held lock on a store file or folder.
pub struct StoreLock {
    /// Held until dropped.
    _lock: Flock<File>,
    ino: u64,
    exclusive: bool,
}

/// Who holds a lock on the file `dev`/`ino`, from `/proc/locks`: "mounted read-write by
/// worldfs (pid N)", or a vaguer phrase when the holder cannot be told.
fn holder(dev: u64, ino: u64) -> String {
    let want = format!(
        "{:02x}:{:02x}:{ino}",
        libc::major(dev as libc::dev_t),
        libc::minor(dev as libc::dev_t)
    );
    let locks = std::fs::read_to_string("/proc/locks").unwrap_or_default();
    let found = locks.lines().find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        match f.as_slice() {
            [_, "FLOCK", _, kind, pid, id, ..] if *id == want => Some((*kind == "WRITE", *pid)),
            _ => None,
        }
    });
    let Some((write, pid)) = found else {
        return "in use by another worldfs process".to_string();
    };
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let compacting = cmdline.split(|&b| b == 0).any(|a| a == b"compact");
    if compacting {
        format!("being compacted by worldfs (pid {pid})")
    } else if write {
        format!("already mounted read-write by worldfs (pid {pid})")
    } else {
        format!("mounted read-only by worldfs (pid {pid})")
    }
}

impl StoreLock {
    fn take(path: &Path, exclusive: bool, hint: &str) -> Result<StoreLock> {
        let file = File::open(path).map_err(|e| Error::from(e).context(path.display()))?;
        let md = file.metadata()?;
        let arg = if exclusive {
            FlockArg::LockExclusiveNonblock
        } else {
            FlockArg::LockSharedNonblock
        };
        let lock = Flock::lock(file, arg).map_err(|(_, errno)| match errno {
            Errno::EWOULDBLOCK => Error::new(
                libc::EBUSY,
                format!("{} is {}{hint}", path.display(), holder(md.dev(), md.ino())),
            ),
            e => Error::new(e as i32, format!("{}: cannot lock: {e}", path.display())),
        })?;
        Ok(StoreLock {
            _lock: lock,
            ino: md.ino(),
            exclusive,
        })
    }

    /// The lock a mount holds: exclusive when it writes, shared when it only reads.
    pub fn mount(path: &Path, read_only: bool) -> Result<StoreLock> {
        StoreLock::take(path, !read_only, "")
    }

    /// The exclusive lock of compaction; `EBUSY` while the disk is mounted.
    pub fn exclusive(path: &Path) -> Result<StoreLock> {
        StoreLock::take(path, true, " (unmount it first)")
    }

    /// Re-takes the lock when `path` is now another file (after a rewrite).
    pub fn follow(&mut self, path: &Path) -> Result<()> {
        if std::fs::metadata(path)?.ino() != self.ino {
            *self = StoreLock::take(path, self.exclusive, "")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mounts_exclude_compaction_and_follow_renames() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("disk");
        std::fs::write(&path, b"a").unwrap();
        let mut mounted = StoreLock::mount(&path, true).unwrap();
        let second = StoreLock::mount(&path, true).unwrap();
        let e = StoreLock::exclusive(&path).err().unwrap();
        assert_eq!(e.errno(), libc::EBUSY);
        let pid = std::process::id();
        assert!(
            e.message()
                .contains(&format!("mounted read-only by worldfs (pid {pid})")),
            "{e}"
        );
        assert!(e.message().contains("unmount it first"), "{e}");
        drop(second);
        let tmp = dir.path().join("disk.new");
        std::fs::write(&tmp, b"b").unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        assert!(
            StoreLock::exclusive(&path).is_ok(),
            "lock was on the old inode"
        );
        mounted.follow(&path).unwrap();
        assert!(StoreLock::exclusive(&path).is_err());
        drop(mounted);
        assert!(StoreLock::exclusive(&path).is_ok());
    }

    #[test]
    fn a_second_writer_is_refused_with_the_holder_named() {
        let dir = tempfile::tempdir().unwrap();
        let world = dir.path().join("world");
        std::fs::create_dir(&world).unwrap();
        let writer = StoreLock::mount(&world, false).unwrap();
        let e = StoreLock::mount(&world, false).err().unwrap();
        assert_eq!(e.errno(), libc::EBUSY);
        let pid = std::process::id();
        assert_eq!(
            e.message(),
            format!(
                "{} is already mounted read-write by worldfs (pid {pid})",
                world.display()
            )
        );
        assert!(
            StoreLock::mount(&world, true).is_err(),
            "no reader beside a writer"
        );
        drop(writer);
        let _again = StoreLock::mount(&world, false).unwrap();
    }
}
