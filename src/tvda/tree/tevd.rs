//! The mounted tree of a TEVD disk (v2, old v3 with footer, current v3): its real directory
//! tree, read and write.
//!
//! Paths resolve through the directory entries from the root; every change (a file's new
//! content, a created, removed or renamed file or folder) is staged in [`TevdDisk`] and
//! committed at once by its crash-safe rewrite, or rolled back if the commit fails. Entries
//! no directory lists (tsvm's boot sector) are kept but not shown; symlinks are not shown
//! (the tree has only files and folders).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{entry_secs, now_secs};
use crate::error::{Error, Result};
use crate::storekit::lock::StoreLock;
use crate::storekit::mtimes::{content_hash, derived_mtime, Mtimes};
use crate::storekit::scratch::looks_like_scratch;
use crate::storekit::throttle::Throttle;
use crate::tvda::codec::tevd::TevdKind;
use crate::tvda::store::tevd::{NewNode, NodeInfo, TevdDisk};
use crate::vfs::tree::{not_found, Entry, Kind, NewFile, Removal, Stat, Tree, TreePath};

/// How often (at most) to look whether another program changed the disk file.
const REFRESH_INTERVAL_MS: u64 = 50;

/// A TEVD disk as a tree.
pub struct TevdTree {
    disk: Mutex<TevdDisk>,
    path: PathBuf,
    /// The mount's lock on the disk file, re-taken after each rewrite.
    lock: Mutex<StoreLock>,
    mtimes: Mtimes,
    read_only: bool,
    /// Files show no write bits: the disk is damaged on a read-write mount (a read-only
    /// mount shows the disk's modes; the kernel refuses writes there).
    shown_read_only: bool,
    changes: Throttle,
}

/// The key under which an entry's mtime is recorded (stale once the entry changes).
fn node_hash(n: &NodeInfo) -> u64 {
    let mut b = Vec::with_capacity(24);
    b.extend_from_slice(&n.size.to_be_bytes());
    b.extend_from_slice(&n.ctime.to_be_bytes());
    b.extend_from_slice(&n.mtime.to_be_bytes());
    content_hash(&b)
}

/// The folder and name of a path (the root has none).
fn split(path: &TreePath) -> Result<(&TreePath, &str)> {
    match path.split_last() {
        Some((name, dir)) => Ok((dir, name.as_str())),
        None => Err(Error::not_permitted("the root folder")),
    }
}

impl TevdTree {
    /// Opens the disk at `path` (reads the entry headers and directory listings); a damaged
    /// disk is shown read-only.
    pub fn open(path: &Path, read_only: bool) -> Result<TevdTree> {
        let lock = StoreLock::mount(path, read_only)?;
        let disk = TevdDisk::open(path, !read_only)?;
        let damaged = disk.damage().is_some();
        Ok(TevdTree {
            disk: Mutex::new(disk),
            path: path.to_path_buf(),
            lock: Mutex::new(lock),
            mtimes: Mtimes::open(path, read_only || damaged),
            read_only: read_only || damaged,
            shown_read_only: damaged && !read_only,
            changes: Throttle::new(Duration::from_millis(REFRESH_INTERVAL_MS)),
        })
    }

    /// The locked disk, re-read first when another program changed the file.
    fn disk(&self) -> Result<MutexGuard<'_, TevdDisk>> {
        let mut d = crate::error::lock_named(&self.disk, "disk")?;
        if self.changes.due() && d.changed_on_disk()? {
            d.rollback()?;
        }
        Ok(d)
    }

    fn resolve(d: &TevdDisk, path: &TreePath) -> Result<NodeInfo> {
        let id = d.resolve(&path.join("/")).map_err(|_| not_found(path))?;
        let info = d.info(id)?;
        if info.kind == TevdKind::Symlink {
            return Err(not_found(path));
        }
        Ok(info)
    }

    fn stat_of(&self, n: &NodeInfo) -> Stat {
        let hash = node_hash(n);
        let recorded = self.mtimes.mtime(n.id as u32 as u64, hash);
        let mtime = if recorded == derived_mtime(hash) {
            UNIX_EPOCH + Duration::from_secs(n.mtime)
        } else {
            recorded
        };
        let (kind, size, perm) = match n.kind {
            TevdKind::Directory => (Kind::Dir, 0, 0o755),
            _ => (Kind::File, n.size, 0o644),
        };
        Stat {
            kind,
            size,
            mtime,
            perm: if self.shown_read_only {
                perm & 0o555
            } else {
                perm
            },
            volatile: false,
            source: None,
            owner: None,
            file: None,
        }
    }

    /// Applies `stage` to the disk and commits; on any error nothing is kept.
    fn change(&self, stage: impl FnOnce(&mut TevdDisk, u64) -> Result<Vec<i32>>) -> Result<()> {
        let mut d = self.disk()?;
        let now = SystemTime::now();
        let result = stage(&mut d, now_secs()).and_then(|ids| d.commit().map(|_| ids));
        match result {
            Ok(ids) => {
                crate::error::lock_named(&self.lock, "disk")?.follow(&self.path)?;
                for id in ids {
                    if let Ok(info) = d.info(id) {
                        self.mtimes.record(id as u32 as u64, node_hash(&info), now);
                    }
                }
                Ok(())
            }
            Err(e) => {
                if let Err(r) = d.rollback() {
                    log::error!("could not drop staged changes: {r}");
                }
                Err(e)
            }
        }
    }

    /// Writes the file at `path` (making it in its folder), its time in the disk `dated`
    /// (Unix seconds) or the commit's.
    fn write_at(&self, path: &TreePath, data: &[u8], dated: Option<u64>) -> Result<()> {
        let (dir, name) = split(path)?;
        self.change(|d, now| {
            let id = match Self::resolve(d, path) {
                Ok(n) if n.kind == TevdKind::Directory => {
                    return Err(Error::is_dir("is a directory"))
                }
                Ok(n) => n.id,
                Err(_) => {
                    let parent = Self::resolve(d, dir)?;
                    d.create_node(parent.id, name, NewNode::File, now)?
                }
            };
            d.write(id, data, dated.unwrap_or(now))?;
            Ok(vec![id])
        })
    }
}

impl Tree for TevdTree {
    /// The disk file, for everything the mount shows.
    fn source_files(&self, _top: Option<&str>) -> &[PathBuf] {
        std::slice::from_ref(&self.path)
    }

    /// Changes are committed at once; the mtime records waiting are written.
    fn sync(&self) -> Result<()> {
        self.mtimes.flush();
        Ok(())
    }

    fn stat(&self, path: &TreePath) -> Result<Stat> {
        let d = self.disk()?;
        Ok(self.stat_of(&Self::resolve(&d, path)?))
    }

    fn list(&self, dir: &TreePath, after: u64, sink: &mut dyn FnMut(Entry) -> bool) -> Result<()> {
        let children = {
            let d = self.disk()?;
            let n = Self::resolve(&d, dir)?;
            if n.kind != TevdKind::Directory {
                return Err(Error::not_dir("not a directory"));
            }
            d.list(n.id)?
        };
        // Cookies are positions in the listing plus one: a directory keeps its order.
        for (i, c) in children.iter().enumerate() {
            let cookie = i as u64 + 1;
            if cookie <= after || c.kind == TevdKind::Symlink {
                continue;
            }
            if !sink(Entry {
                name: c.name.clone(),
                cookie,
                stat: self.stat_of(c),
            }) {
                break;
            }
        }
        Ok(())
    }

    fn read(&self, path: &TreePath) -> Result<Arc<Vec<u8>>> {
        let d = self.disk()?;
        let n = Self::resolve(&d, path)?;
        if n.kind == TevdKind::Directory {
            return Err(Error::is_dir("is a directory"));
        }
        Ok(Arc::new(d.read(n.id)?))
    }

    fn write(&self, path: &TreePath, data: &[u8]) -> Result<()> {
        self.write_at(path, data, None)
    }

    /// Stores `mtime` (in whole seconds) as the file's own time in the disk.
    fn write_dated(&self, path: &TreePath, data: &[u8], mtime: SystemTime) -> Result<()> {
        self.write_at(path, data, entry_secs(mtime))
    }

    fn check(&self, path: &TreePath, _data: &[u8]) -> Result<()> {
        // Any bytes make a file; only the place is checked.
        let (dir, _) = split(path)?;
        let d = self.disk()?;
        match Self::resolve(&d, path) {
            Ok(n) if n.kind == TevdKind::Directory => Err(Error::is_dir("is a directory")),
            Ok(_) => Ok(()),
            Err(_) => Self::resolve(&d, dir).map(drop),
        }
    }

    fn classify(&self, _dir: &TreePath, name: &str) -> Result<NewFile> {
        Ok(if looks_like_scratch(name) {
            NewFile::Scratch
        } else {
            NewFile::Object
        })
    }

    fn check_remove(&self, path: &TreePath) -> Result<Removal> {
        let d = self.disk()?;
        match Self::resolve(&d, path)?.kind {
            TevdKind::Directory => Err(Error::is_dir("is a directory")),
            // A TEVD file takes any bytes: nothing to hold back.
            _ => Ok(Removal::AtOnce),
        }
    }

    fn remove(&self, path: &TreePath) -> Result<()> {
        self.change(|d, now| {
            let n = Self::resolve(d, path)?;
            if n.kind == TevdKind::Directory {
                return Err(Error::is_dir("is a directory"));
            }
            d.remove(n.id, now)?;
            Ok(Vec::new())
        })
    }

    fn mkdir(&self, path: &TreePath) -> Result<()> {
        let (dir, name) = split(path)?;
        self.change(|d, now| {
            let parent = Self::resolve(d, dir)?;
            Ok(vec![d.create_node(
                parent.id,
                name,
                NewNode::Directory,
                now,
            )?])
        })
    }

    fn rmdir(&self, path: &TreePath) -> Result<()> {
        self.change(|d, now| {
            let n = Self::resolve(d, path)?;
            if n.kind != TevdKind::Directory {
                return Err(Error::not_dir("not a directory"));
            }
            d.remove(n.id, now)?;
            Ok(Vec::new())
        })
    }

    fn rename(&self, from: &TreePath, to: &TreePath) -> Result<()> {
        let (to_dir, to_name) = split(to)?;
        self.change(|d, now| {
            let n = Self::resolve(d, from)?;
            let parent = Self::resolve(d, to_dir)?;
            if let Ok(existing) = Self::resolve(d, to) {
                if existing.kind == TevdKind::Directory && existing.id != n.id {
                    if n.kind != TevdKind::Directory {
                        return Err(Error::is_dir("target is a directory"));
                    }
                    d.remove(existing.id, now)?;
                }
            }
            d.rename(n.id, parent.id, to_name, now)?;
            Ok(vec![n.id])
        })
    }

    fn set_mtime(&self, path: &TreePath, mtime: SystemTime) -> Result<()> {
        let d = self.disk()?;
        let n = Self::resolve(&d, path)?;
        self.mtimes.record(n.id as u32 as u64, node_hash(&n), mtime);
        Ok(())
    }

    fn read_only(&self) -> bool {
        self.read_only
    }
}
