//! The filesystem core: inodes, open handles, write buffers, scratch files and the
//! close-time commit, over any [`Tree`]. FUSE-agnostic: every operation returns a
//! [`Result`], so the semantics are tested without a kernel in the loop.
//!
//! Write semantics (README "Writing"): what an application writes goes into its handle's
//! buffer; `flush` (each close) and `fsync` hand the whole buffer to the tree, which parses,
//! re-encodes and commits it, and the call fails with the tree's error if that fails. A
//! failed commit leaves the written text readable at its path (an overlay) so it can be fixed;
//! the store is unchanged. Files created under names the tree calls scratch (editor swap
//! files, temporaries of `sed -i` and rsync) live only here; renaming one over a tree file
//! commits its content to that file. Scratch files vanish at unmount.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::SystemTime;

use crate::error::{Error, Result};
use crate::vfs::fresh::FreshDirs;
use crate::vfs::inodes::{Inodes, ROOT};
use crate::vfs::tree::{Kind, NewFile, Stat, Tree, MAX_TREE_COOKIE};

/// A file whose content lives in the core rather than in the tree.
#[derive(Clone)]
struct Overlay {
    data: Vec<u8>,
    mtime: SystemTime,
    /// An explicitly set mtime (utimens), carried to the tree when the file is committed.
    set_mtime: Option<SystemTime>,
    /// Scratch (never committed under this name) or pending text for a tree path.
    scratch: bool,
}

struct Handle {
    path: Vec<String>,
    data: Vec<u8>,
    dirty: bool,
    /// Whether anything was written or truncated through this handle since it was opened
    /// (an open with `O_TRUNC` or a create alone makes it dirty but not written).
    written: bool,
    /// Whether one close of this handle, with nothing written, was let pass uncommitted.
    deferred: bool,
    scratch: bool,
}

/// How a file is opened.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenMode {
    pub write: bool,
    pub truncate: bool,
    pub append: bool,
}

/// A directory entry produced by [`Vfs::readdir`].
pub struct DirEntry<'a> {
    pub ino: u64,
    pub offset: u64,
    pub name: &'a str,
    pub stat: &'a Stat,
}

/// The filesystem core over one tree.
pub struct Vfs {
    tree: Arc<dyn Tree>,
    inodes: RwLock<Inodes>,
    handles: Mutex<HashMap<u64, Arc<Mutex<Handle>>>>,
    next_fh: AtomicU64,
    overlay: Mutex<HashMap<Vec<String>, Overlay>>,
    fresh: FreshDirs,
    /// Tree files moved aside to a scratch name (an editor's backup), by source path, with
    /// the scratch path holding their text. The source is hidden but stays in the store
    /// until new content is committed to it, or until the scratch copy is deleted.
    aside: Mutex<HashMap<Vec<String>, Vec<String>>>,
}

fn lock<T>(m: &Mutex<T>) -> Result<MutexGuard<'_, T>> {
    m.lock()
        .map_err(|_| Error::corrupt("internal lock poisoned"))
}

/// The path shown in messages: `blocks/0,0,0/nodes.cubeset`.
pub fn display_path(path: &[String]) -> String {
    if path.is_empty() {
        "/".to_string()
    } else {
        path.join("/")
    }
}

fn child(dir: &[String], name: &str) -> Vec<String> {
    let mut p = dir.to_vec();
    p.push(name.to_string());
    p
}

fn overlay_stat(o: &Overlay) -> Stat {
    Stat {
        kind: Kind::File,
        size: o.data.len() as u64,
        mtime: o.mtime,
        perm: 0o644,
    }
}

fn check_name(name: &str) -> Result<()> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') || name.contains('\0') {
        return Err(Error::invalid(format!("invalid file name {name:?}")));
    }
    Ok(())
}

impl Vfs {
    /// A core over `tree`.
    pub fn new(tree: Arc<dyn Tree>) -> Vfs {
        Vfs {
            tree,
            inodes: RwLock::new(Inodes::default()),
            handles: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            overlay: Mutex::new(HashMap::new()),
            fresh: FreshDirs::default(),
            aside: Mutex::new(HashMap::new()),
        }
    }

    /// The tree under this core.
    pub fn tree(&self) -> &Arc<dyn Tree> {
        &self.tree
    }

    fn path_of(&self, ino: u64) -> Result<Vec<String>> {
        self.inodes
            .read()
            .map_err(|_| Error::corrupt("inode table lock poisoned"))?
            .path(ino)
            .ok_or_else(|| Error::new(libc::ESTALE, format!("unknown inode {ino}")))
    }

    fn stat_path(&self, path: &[String]) -> Result<Stat> {
        if let Some(o) = lock(&self.overlay)?.get(path) {
            return Ok(overlay_stat(o));
        }
        if lock(&self.aside)?.contains_key(path) {
            return Err(Error::not_found(format!(
                "{}: moved aside (its text is in the scratch copy)",
                display_path(path)
            )));
        }
        self.tree
            .stat(path)
            .map_err(|e| e.context(display_path(path)))
    }

    /// Looks `name` up in directory `parent` for process `pid`; counts a kernel lookup.
    pub fn lookup(&self, parent: u64, name: &str, pid: u32) -> Result<(u64, Stat)> {
        let dir = self.path_of(parent)?;
        if self.fresh.hidden(&dir, name, pid) {
            return Err(Error::not_found(format!(
                "{}: not written yet into the folder this process made",
                display_path(&child(&dir, name))
            )));
        }
        let path = child(&dir, name);
        let stat = self.stat_path(&path)?;
        let ino = self
            .inodes
            .write()
            .map_err(|_| Error::corrupt("inode table lock poisoned"))?
            .lookup(parent, name);
        Ok((ino, stat))
    }

    /// The kernel forgot `n` lookups of `ino`.
    pub fn forget(&self, ino: u64, n: u64) {
        if let Ok(mut t) = self.inodes.write() {
            t.forget(ino, n);
        }
    }

    /// Attributes of `ino`.
    pub fn getattr(&self, ino: u64) -> Result<Stat> {
        let path = self.path_of(ino)?;
        self.stat_path(&path)
    }

    /// Truncates and/or sets the mtime of `ino` (through handle `fh` when given).
    pub fn setattr(
        &self,
        ino: u64,
        fh: Option<u64>,
        size: Option<u64>,
        mtime: Option<SystemTime>,
    ) -> Result<Stat> {
        let path = self.path_of(ino)?;
        if let Some(size) = size {
            let len =
                usize::try_from(size).map_err(|_| Error::new(libc::EFBIG, "size too large"))?;
            let handle = match fh {
                Some(fh) => lock(&self.handles)?.get(&fh).cloned(),
                None => None,
            };
            if let Some(h) = handle {
                let mut h = lock(&h)?;
                h.data.resize(len, 0);
                h.dirty = true;
                h.written = true;
            } else {
                let mut overlay = lock(&self.overlay)?;
                if let Some(o) = overlay.get_mut(&path) {
                    o.data.resize(len, 0);
                    o.mtime = SystemTime::now();
                } else {
                    drop(overlay);
                    let mut data = self.tree.read(&path)?.to_vec();
                    data.resize(len, 0);
                    self.commit(&path, data)?;
                }
            }
        }
        if let Some(mtime) = mtime {
            let mut overlay = lock(&self.overlay)?;
            if let Some(o) = overlay.get_mut(&path) {
                o.mtime = mtime;
                o.set_mtime = Some(mtime);
            } else {
                drop(overlay);
                self.tree
                    .set_mtime(&path, mtime)
                    .map_err(|e| e.context(display_path(&path)))?;
            }
        }
        self.stat_path(&path)
    }

    fn add_handle(&self, h: Handle) -> Result<u64> {
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        lock(&self.handles)?.insert(fh, Arc::new(Mutex::new(h)));
        Ok(fh)
    }

    fn handle(&self, fh: u64) -> Result<Arc<Mutex<Handle>>> {
        lock(&self.handles)?
            .get(&fh)
            .cloned()
            .ok_or_else(|| Error::new(libc::EBADF, format!("unknown file handle {fh}")))
    }

    /// Opens the file `ino`.
    pub fn open(&self, ino: u64, mode: OpenMode) -> Result<u64> {
        let path = self.path_of(ino)?;
        if mode.write && self.tree.read_only() {
            return Err(Error::read_only("the mount is read-only"));
        }
        let existing = lock(&self.overlay)?.get(&path).cloned();
        let (data, scratch) = match existing {
            Some(o) => (if mode.truncate { Vec::new() } else { o.data }, o.scratch),
            None => {
                let stat = self.stat_path(&path)?;
                if stat.kind == Kind::Dir {
                    return Err(Error::new(libc::EISDIR, "is a directory"));
                }
                let data = if mode.truncate {
                    Vec::new()
                } else {
                    self.tree
                        .read(&path)
                        .map_err(|e| e.context(display_path(&path)))?
                        .to_vec()
                };
                (data, false)
            }
        };
        self.add_handle(Handle {
            path,
            data,
            dirty: mode.truncate,
            written: false,
            deferred: false,
            scratch,
        })
    }

    /// Creates and opens `name` in `parent`.
    pub fn create(&self, parent: u64, name: &str) -> Result<(u64, Stat, u64)> {
        check_name(name)?;
        if self.tree.read_only() {
            return Err(Error::read_only("the mount is read-only"));
        }
        let dir = self.path_of(parent)?;
        let path = child(&dir, name);
        let class = self
            .tree
            .classify(&dir, name)
            .map_err(|e| e.context(display_path(&path)))?;
        let scratch = class == NewFile::Scratch;
        let now = SystemTime::now();
        let o = Overlay {
            data: Vec::new(),
            mtime: now,
            set_mtime: None,
            scratch,
        };
        let stat = overlay_stat(&o);
        lock(&self.overlay)?.insert(path.clone(), o);
        self.fresh.show(&dir, name);
        let fh = self.add_handle(Handle {
            path,
            data: Vec::new(),
            dirty: true,
            written: false,
            deferred: false,
            scratch,
        })?;
        let ino = self
            .inodes
            .write()
            .map_err(|_| Error::corrupt("inode table lock poisoned"))?
            .lookup(parent, name);
        Ok((ino, stat, fh))
    }

    /// Reads from an open handle.
    pub fn read(&self, fh: u64, offset: u64, size: u32) -> Result<Vec<u8>> {
        let h = self.handle(fh)?;
        let h = lock(&h)?;
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(h.data.len());
        let end = start.saturating_add(size as usize).min(h.data.len());
        Ok(h.data[start..end].to_vec())
    }

    /// Writes into an open handle's buffer (nothing is committed before flush/fsync).
    pub fn write(&self, fh: u64, offset: u64, data: &[u8], append: bool) -> Result<usize> {
        let h = self.handle(fh)?;
        let mut h = lock(&h)?;
        let start = if append {
            h.data.len()
        } else {
            usize::try_from(offset).map_err(|_| Error::new(libc::EFBIG, "offset too large"))?
        };
        let end = start
            .checked_add(data.len())
            .ok_or_else(|| Error::new(libc::EFBIG, "file too large"))?;
        if end > 256 << 20 {
            return Err(Error::new(libc::EFBIG, "file too large (limit 256 MiB)"));
        }
        if h.data.len() < end {
            h.data.resize(end, 0);
        }
        h.data[start..end].copy_from_slice(data);
        h.dirty = true;
        h.written = true;
        Ok(data.len())
    }

    /// Commits `data` as the content of tree path `path`; on failure keeps it readable.
    fn commit(&self, path: &[String], data: Vec<u8>) -> Result<()> {
        match self.tree.write(path, &data) {
            Ok(()) => {
                lock(&self.aside)?.remove(path);
                let done = lock(&self.overlay)?.remove(path);
                if let Some(m) = done.and_then(|o| o.set_mtime) {
                    self.tree.set_mtime(path, m)?;
                }
                Ok(())
            }
            Err(e) => {
                let e = e.context(display_path(path));
                log::error!("commit failed, nothing stored: {e}");
                let mut overlay = lock(&self.overlay)?;
                let set_mtime = overlay.get(path).and_then(|o| o.set_mtime);
                overlay.insert(
                    path.to_vec(),
                    Overlay {
                        data,
                        mtime: SystemTime::now(),
                        set_mtime,
                        scratch: false,
                    },
                );
                Err(e.logged())
            }
        }
    }

    /// Commits a handle's buffer if it was written (each close).
    ///
    /// The first close of a handle only truncated or created, with nothing written yet, is let
    /// pass: a shell redirection (`cmd > file`, and `touch`) opens the file, duplicates the
    /// descriptor and closes the original before anything is written, and that close must not
    /// commit an empty file (invalid for most views: a bogus error, a needless commit). The
    /// next close commits whatever the handle holds.
    pub fn flush(&self, fh: u64) -> Result<()> {
        self.commit_handle(fh, false)
    }

    /// Commits a handle's buffer if it is dirty (fsync).
    pub fn fsync(&self, fh: u64) -> Result<()> {
        self.commit_handle(fh, true)
    }

    fn commit_handle(&self, fh: u64, last: bool) -> Result<()> {
        let h = self.handle(fh)?;
        let mut h = lock(&h)?;
        if !h.dirty {
            return Ok(());
        }
        if !h.written && !h.deferred && !last {
            h.deferred = true;
            return Ok(());
        }
        h.dirty = false;
        if h.scratch {
            let mut overlay = lock(&self.overlay)?;
            let now = SystemTime::now();
            let o = overlay.entry(h.path.clone()).or_insert(Overlay {
                data: Vec::new(),
                mtime: now,
                set_mtime: None,
                scratch: true,
            });
            o.data = h.data.clone();
            o.mtime = now;
            return Ok(());
        }
        let data = h.data.clone();
        let path = h.path.clone();
        self.commit(&path, data)
    }

    /// Closes a handle, committing what is still unflushed.
    pub fn release(&self, fh: u64) -> Result<()> {
        let result = self.commit_handle(fh, true);
        lock(&self.handles)?.remove(&fh);
        result
    }

    /// Commits every open handle's unflushed writes (SIGTERM, unmount). Returns the number of
    /// commits that failed (each is logged).
    pub fn commit_all(&self) -> usize {
        let fhs: Vec<u64> = match self.handles.lock() {
            Ok(h) => h.keys().copied().collect(),
            Err(_) => return 1,
        };
        fhs.into_iter()
            .filter(|&fh| self.commit_handle(fh, true).is_err())
            .count()
    }

    /// Entries the kernel should drop so that at most about `budget` inodes stay held (see
    /// [`Inodes::over_budget`]).
    pub fn over_budget(&self, budget: usize) -> Vec<(u64, String)> {
        match self.inodes.read() {
            Ok(t) => t
                .over_budget(budget)
                .into_iter()
                .map(|(p, n)| (p, n.to_string()))
                .collect(),
            Err(_) => Vec::new(),
        }
    }

    /// Paths whose written text could not be committed (kept readable in the mount).
    pub fn failed_paths(&self) -> Vec<String> {
        match self.overlay.lock() {
            Ok(o) => o
                .iter()
                .filter(|(_, v)| !v.scratch)
                .map(|(k, _)| display_path(k))
                .collect(),
            Err(_) => Vec::new(),
        }
    }

    /// Scratch files that still hold text (a tool's temporary never renamed over an object):
    /// they are not stored, and vanish at unmount.
    pub fn scratch_paths(&self) -> Vec<String> {
        match self.overlay.lock() {
            Ok(o) => o
                .iter()
                .filter(|(_, v)| v.scratch && !v.data.is_empty())
                .map(|(k, _)| display_path(k))
                .collect(),
            Err(_) => Vec::new(),
        }
    }

    /// Streams the entries of directory `ino` after `offset`, as process `pid` sees them, to
    /// `sink` until it returns false. With `plus`, each entry counts as a kernel lookup
    /// (readdirplus).
    pub fn readdir(
        &self,
        ino: u64,
        offset: u64,
        plus: bool,
        pid: u32,
        sink: &mut dyn FnMut(DirEntry<'_>) -> bool,
    ) -> Result<()> {
        let dir = self.path_of(ino)?;
        let dir_stat = self.stat_path(&dir)?;
        if dir_stat.kind != Kind::Dir {
            return Err(Error::new(libc::ENOTDIR, "not a directory"));
        }
        if offset < 1
            && !sink(DirEntry {
                ino,
                offset: 1,
                name: ".",
                stat: &dir_stat,
            })
        {
            return Ok(());
        }
        if offset < 2
            && !sink(DirEntry {
                ino: ROOT,
                offset: 2,
                name: "..",
                stat: &dir_stat,
            })
        {
            return Ok(());
        }
        let mut full = false;
        let aside_here: Vec<String> = lock(&self.aside)?
            .keys()
            .filter(|p| p.len() == dir.len() + 1 && p.starts_with(&dir))
            .filter_map(|p| p.last().cloned())
            .collect();
        if offset <= MAX_TREE_COOKIE + 2 {
            let after = offset.saturating_sub(2);
            self.tree
                .list(&dir, after, &mut |e| {
                    if self.fresh.hidden(&dir, &e.name, pid) || aside_here.contains(&e.name) {
                        return true;
                    }
                    let child_ino = self.entry_ino(ino, &e.name, plus);
                    let ok = sink(DirEntry {
                        ino: child_ino,
                        offset: e.cookie + 2,
                        name: &e.name,
                        stat: &e.stat,
                    });
                    if !ok {
                        if plus {
                            self.forget(child_ino, 1);
                        }
                        full = true;
                    }
                    ok
                })
                .map_err(|e| e.context(display_path(&dir)))?;
        }
        if full {
            return Ok(());
        }
        // Core-held files of this directory that the tree does not list, after the tree's.
        let mut extra: Vec<(String, Overlay)> = lock(&self.overlay)?
            .iter()
            .filter(|(p, _)| p.len() == dir.len() + 1 && p.starts_with(&dir))
            .filter_map(|(p, o)| p.last().map(|n| (n.clone(), o.clone())))
            .collect();
        extra.sort_by(|a, b| a.0.cmp(&b.0));
        for (i, (name, o)) in extra.iter().enumerate() {
            let off = MAX_TREE_COOKIE + 3 + i as u64;
            if off <= offset {
                continue;
            }
            if !o.scratch && self.tree.stat(&child(&dir, name)).is_ok() {
                continue;
            }
            let child_ino = self.entry_ino(ino, name, plus);
            if !sink(DirEntry {
                ino: child_ino,
                offset: off,
                name,
                stat: &overlay_stat(o),
            }) {
                if plus {
                    self.forget(child_ino, 1);
                }
                break;
            }
        }
        Ok(())
    }

    fn entry_ino(&self, parent: u64, name: &str, plus: bool) -> u64 {
        if plus {
            if let Ok(mut t) = self.inodes.write() {
                return t.lookup(parent, name);
            }
        } else if let Ok(t) = self.inodes.read() {
            if let Some(ino) = t.find(parent, name) {
                return ino;
            }
        }
        // A stand-in number for plain readdir; the kernel looks the name up before use.
        u64::MAX >> 1
    }

    /// Creates directory `name` in `parent` for process `pid`.
    pub fn mkdir(&self, parent: u64, name: &str, pid: u32) -> Result<(u64, Stat)> {
        check_name(name)?;
        let dir = self.path_of(parent)?;
        let path = child(&dir, name);
        let existing = self.stat_path(&path).ok();
        let hidden = self.fresh.hidden(&dir, name, pid);
        match existing {
            // A fixed folder of a folder this process just made (`cp -r` filling a new block).
            Some(s) if hidden && s.kind == Kind::Dir => {}
            Some(_) => return Err(Error::exists(format!("{} exists", display_path(&path)))),
            None => self
                .tree
                .mkdir(&path)
                .map_err(|e| e.context(display_path(&path)))?,
        }
        self.fresh.show(&dir, name);
        self.fresh.made(&path, pid);
        self.lookup(parent, name, pid)
    }

    /// Removes file `name` from `parent`.
    pub fn unlink(&self, parent: u64, name: &str) -> Result<()> {
        let path = child(&self.path_of(parent)?, name);
        let removed = lock(&self.overlay)?.remove(&path);
        match removed {
            Some(o) if o.scratch => {
                // The only copy of a file moved aside and never replaced: deleting it
                // deletes the object (`mv a a~ && rm a~` removes a).
                let source = {
                    let mut aside = lock(&self.aside)?;
                    let source = aside
                        .iter()
                        .find(|(_, v)| **v == path)
                        .map(|(k, _)| k.clone());
                    if let Some(src) = &source {
                        aside.remove(src);
                    }
                    source
                };
                if let Some(src) = source {
                    self.tree
                        .remove(&src)
                        .map_err(|e| e.context(display_path(&src)))?;
                }
            }
            Some(_) => {
                // Pending text of a tree path: drop it; remove the object too if it exists.
                if self.tree.stat(&path).is_ok() {
                    self.tree
                        .remove(&path)
                        .map_err(|e| e.context(display_path(&path)))?;
                }
            }
            None => self
                .tree
                .remove(&path)
                .map_err(|e| e.context(display_path(&path)))?,
        }
        if let Ok(mut t) = self.inodes.write() {
            t.unlink(parent, name);
        }
        Ok(())
    }

    /// Removes directory `name` from `parent` (and the object it shows).
    pub fn rmdir(&self, parent: u64, name: &str) -> Result<()> {
        let path = child(&self.path_of(parent)?, name);
        let has_scratch = lock(&self.overlay)?
            .keys()
            .any(|p| p.len() > path.len() && p.starts_with(&path));
        if has_scratch {
            return Err(Error::new(
                libc::ENOTEMPTY,
                format!("{} holds unsaved or scratch files", display_path(&path)),
            ));
        }
        self.tree
            .rmdir(&path)
            .map_err(|e| e.context(display_path(&path)))?;
        self.fresh.removed(&path);
        if let Ok(mut t) = self.inodes.write() {
            t.unlink(parent, name);
        }
        Ok(())
    }

    /// Renames `name` in `parent` to `new_name` in `new_parent`.
    pub fn rename(&self, parent: u64, name: &str, new_parent: u64, new_name: &str) -> Result<()> {
        check_name(new_name)?;
        let from = child(&self.path_of(parent)?, name);
        let to = child(&self.path_of(new_parent)?, new_name);
        let to_dir = &to[..to.len() - 1];
        let moving = lock(&self.overlay)?.get(&from).cloned();
        let to_class = self
            .tree
            .classify(to_dir, new_name)
            .map_err(|e| e.context(display_path(&to)))?;
        let to_in_tree = self.tree.stat(&to).ok();
        if let Some(o) = moving {
            if let Some(s) = &to_in_tree {
                if s.kind == Kind::Dir {
                    return Err(Error::new(
                        libc::EISDIR,
                        format!("{} is a directory", display_path(&to)),
                    ));
                }
            }
            if to_in_tree.is_some() || to_class == NewFile::Object {
                // Replacing a tree file's content (rsync, sed -i, editors): commit it.
                self.commit(&to, o.data.clone())?;
                if let Some(m) = o.set_mtime {
                    self.tree
                        .set_mtime(&to, m)
                        .map_err(|e| e.context(display_path(&to)))?;
                }
                lock(&self.overlay)?.remove(&from);
            } else {
                let mut overlay = lock(&self.overlay)?;
                overlay.remove(&from);
                overlay.insert(to.clone(), o);
                drop(overlay);
                for v in lock(&self.aside)?.values_mut() {
                    if *v == from {
                        *v = to.clone();
                    }
                }
            }
        } else {
            let stat = self.stat_path(&from)?;
            if to_in_tree.is_none() && to_class == NewFile::Scratch && stat.kind == Kind::File {
                // A tree file moved aside (an editor's backup copy): its text becomes a
                // scratch file and the file is hidden, but the object stays stored until new
                // content replaces it, so a failed save never loses it.
                let data = self
                    .tree
                    .read(&from)
                    .map_err(|e| e.context(display_path(&from)))?
                    .to_vec();
                lock(&self.aside)?.insert(from.clone(), to.clone());
                lock(&self.overlay)?.insert(
                    to.clone(),
                    Overlay {
                        data,
                        mtime: stat.mtime,
                        set_mtime: None,
                        scratch: true,
                    },
                );
            } else {
                self.tree.rename(&from, &to).map_err(|e| {
                    e.context(format!("{} -> {}", display_path(&from), display_path(&to)))
                })?;
            }
        }
        self.fresh.removed(&from);
        self.fresh.show(to_dir, new_name);
        if let Ok(mut t) = self.inodes.write() {
            t.rename(parent, name, new_parent, new_name);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::tree::Entry;
    use std::time::UNIX_EPOCH;

    /// One folder `d` holding files; a file's content must start with `ok` to be committed.
    #[derive(Default)]
    struct Files {
        files: Mutex<HashMap<String, Vec<u8>>>,
        writes: Mutex<Vec<Vec<u8>>>,
    }

    fn file_name(path: &[String]) -> Result<&str> {
        match path {
            [d, f] if d == "d" => Ok(f),
            _ => Err(Error::not_found("no such file")),
        }
    }

    impl Tree for Files {
        fn stat(&self, path: &[String]) -> Result<Stat> {
            let dir = Stat {
                kind: Kind::Dir,
                size: 0,
                mtime: UNIX_EPOCH,
                perm: 0o755,
            };
            if path.is_empty() || path == ["d"] {
                return Ok(dir);
            }
            let files = lock(&self.files)?;
            let data = files
                .get(file_name(path)?)
                .ok_or_else(|| Error::not_found("no such file"))?;
            Ok(Stat {
                kind: Kind::File,
                size: data.len() as u64,
                mtime: UNIX_EPOCH,
                perm: 0o644,
            })
        }
        fn list(&self, _: &[String], _: u64, _: &mut dyn FnMut(Entry) -> bool) -> Result<()> {
            Ok(())
        }
        fn read(&self, path: &[String]) -> Result<Arc<Vec<u8>>> {
            let files = lock(&self.files)?;
            let data = files
                .get(file_name(path)?)
                .ok_or_else(|| Error::not_found("no such file"))?;
            Ok(Arc::new(data.clone()))
        }
        fn write(&self, path: &[String], data: &[u8]) -> Result<()> {
            if !data.starts_with(b"ok") {
                return Err(Error::at(1, 1, "expected `ok`"));
            }
            lock(&self.writes)?.push(data.to_vec());
            lock(&self.files)?.insert(file_name(path)?.to_string(), data.to_vec());
            Ok(())
        }
        fn classify(&self, _: &[String], name: &str) -> Result<NewFile> {
            Ok(if crate::vfs::scratch::looks_like_scratch(name) {
                NewFile::Scratch
            } else {
                NewFile::Object
            })
        }
        fn remove(&self, path: &[String]) -> Result<()> {
            lock(&self.files)?.remove(file_name(path)?);
            Ok(())
        }
        fn mkdir(&self, _: &[String]) -> Result<()> {
            Err(Error::not_permitted("fixed"))
        }
        fn rmdir(&self, _: &[String]) -> Result<()> {
            Ok(())
        }
        fn rename(&self, _: &[String], _: &[String]) -> Result<()> {
            Ok(())
        }
        fn set_mtime(&self, _: &[String], _: SystemTime) -> Result<()> {
            Ok(())
        }
        fn read_only(&self) -> bool {
            false
        }
    }

    fn setup() -> (Arc<Files>, Vfs, u64) {
        let tree = Arc::new(Files::default());
        lock(&tree.files)
            .unwrap()
            .insert("f".into(), b"ok old".to_vec());
        let vfs = Vfs::new(tree.clone());
        let (ino, _) = vfs.lookup(ROOT, "d", 1).unwrap();
        let (f, _) = vfs.lookup(ino, "f", 1).unwrap();
        (tree, vfs, f)
    }

    #[test]
    fn a_close_before_any_write_does_not_commit_the_truncation() {
        let (tree, vfs, f) = setup();
        let trunc = OpenMode {
            write: true,
            truncate: true,
            append: false,
        };
        // `cmd > file`: the shell's close of the original descriptor, then cmd writes and closes.
        let fh = vfs.open(f, trunc).unwrap();
        vfs.flush(fh).unwrap();
        assert!(lock(&tree.writes).unwrap().is_empty());
        vfs.write(fh, 0, b"ok new", false).unwrap();
        vfs.flush(fh).unwrap();
        vfs.release(fh).unwrap();
        assert_eq!(*lock(&tree.writes).unwrap(), vec![b"ok new".to_vec()]);
        // `: > file`, `touch`: the truncation alone is committed at the next close.
        let fh = vfs.open(f, trunc).unwrap();
        vfs.flush(fh).unwrap();
        assert!(vfs.flush(fh).is_err(), "an empty file is not valid here");
        vfs.release(fh).unwrap();
        assert_eq!(lock(&tree.writes).unwrap().len(), 1);
        assert_eq!(vfs.failed_paths(), vec!["d/f".to_string()]);
        // fsync commits what is there, written or not.
        let fh = vfs.open(f, trunc).unwrap();
        vfs.write(fh, 0, b"bad", false).unwrap();
        assert_eq!(vfs.fsync(fh).unwrap_err().errno(), libc::EINVAL);
        let rd = vfs.open(f, OpenMode::default()).unwrap();
        assert_eq!(
            vfs.read(rd, 0, 100).unwrap(),
            b"bad",
            "pending text readable"
        );
        vfs.release(rd).unwrap();
        vfs.write(fh, 0, b"ok", false).unwrap();
        vfs.fsync(fh).unwrap();
        vfs.release(fh).unwrap();
        assert!(vfs.failed_paths().is_empty());
        assert_eq!(lock(&tree.files).unwrap()["f"], b"okd");
    }

    #[test]
    fn a_file_moved_aside_stays_stored_until_replaced_or_its_copy_is_deleted() {
        let (tree, vfs, _) = setup();
        let d = vfs.lookup(ROOT, "d", 1).unwrap().0;
        let stored = |name: &str| lock(&tree.files).unwrap().get(name).cloned();
        // An editor's backup: `f` moves aside, then a new `f` fails to save.
        vfs.rename(d, "f", d, "f~").unwrap();
        assert_eq!(vfs.lookup(d, "f", 1).unwrap_err().errno(), libc::ENOENT);
        assert_eq!(stored("f").unwrap(), b"ok old", "still stored while aside");
        let (_, _, fh) = vfs.create(d, "f").unwrap();
        vfs.write(fh, 0, b"bad", false).unwrap();
        assert!(vfs.release(fh).is_err());
        assert_eq!(
            stored("f").unwrap(),
            b"ok old",
            "a failed save loses nothing"
        );
        // Fixing the text commits it; deleting the backup then keeps the new content.
        let (f, _) = vfs.lookup(d, "f", 1).unwrap();
        let fh = vfs
            .open(
                f,
                OpenMode {
                    write: true,
                    truncate: true,
                    append: false,
                },
            )
            .unwrap();
        vfs.write(fh, 0, b"ok new", false).unwrap();
        vfs.release(fh).unwrap();
        vfs.unlink(d, "f~").unwrap();
        assert_eq!(stored("f").unwrap(), b"ok new");
        // `mv f f~ && rm f~` deletes f.
        vfs.rename(d, "f", d, "f~").unwrap();
        vfs.unlink(d, "f~").unwrap();
        assert_eq!(stored("f"), None);
    }

    #[test]
    fn a_new_folder_hides_its_fixed_entries_from_its_maker_only() {
        let (_tree, vfs, _) = setup();
        let vfs_dir = vfs.lookup(ROOT, "d", 1).unwrap().0;
        vfs.fresh.made(&["d".to_string()], 7);
        assert_eq!(
            vfs.lookup(vfs_dir, "f", 7).unwrap_err().errno(),
            libc::ENOENT
        );
        assert!(vfs.lookup(vfs_dir, "f", 8).is_ok());
        let (_, _, fh) = vfs.create(vfs_dir, "f").unwrap();
        vfs.write(fh, 0, b"ok copy", false).unwrap();
        vfs.release(fh).unwrap();
        assert!(vfs.lookup(vfs_dir, "f", 7).is_ok());
    }
}
