//! The filesystem core: inodes, open files, write buffers, held text and the close-time
//! commit, over any [`Tree`]. FUSE-agnostic: every operation returns a [`Result`], so the
//! semantics are tested without a kernel in the loop.
//!
//! Write semantics (README "Writing"): what an application writes goes into the buffer of the
//! file it opened; `flush` (each close) and `fsync` hand the whole buffer to the tree, which
//! parses, re-encodes and commits it, and the call fails with the tree's error if that fails.
//! Like the pages of one inode in a kernel filesystem, a file being written has one buffer,
//! shared by every handle opened on it while it is being written: each descriptor reads what
//! the others wrote, and the file's size and mtime are the buffer's.
//!
//! The core also holds text the tree does not store (see [`held`](crate::vfs::held)): a
//! failed commit leaves the written text readable at its path (pending text) so it can be
//! fixed, the store unchanged, and removing that file discards only the text; files created
//! under names the tree calls scratch (editor swap files, temporaries of `sed -i` and rsync)
//! live only here, and renaming one over a tree file commits its content to that file.
//! Scratch files vanish at unmount; text no commit took is saved for recovery.
//!
//! Links a tree shows (a world folder's) are served as links: `readlink` and `symlink` go to
//! the tree, and opening one fails with `ELOOP`, since the kernel resolves links before it
//! opens and the core never reads through one.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::SystemTime;

use crate::error::{Error, Result};
use crate::vfs::fresh::FreshDirs;
use crate::vfs::held::{private_dir, Spill, Text};
use crate::vfs::inodes::{Inodes, ROOT};
use crate::vfs::tree::{Kind, NewFile, Stat, Tree, MAX_TREE_COOKIE};

/// The largest file the core holds (writes and truncations past it fail with `EFBIG`).
pub const MAX_FILE_SIZE: u64 = 256 << 20;

/// The listing cookie of the first file held by the core (after the tree's and `.`, `..`).
const FIRST_HELD_COOKIE: u64 = MAX_TREE_COOKIE + 3;

/// A file whose content lives in the core rather than in the tree.
struct Overlay {
    text: Text,
    mtime: SystemTime,
    /// An explicitly set mtime (utimens), carried to the tree when the file is committed.
    set_mtime: Option<SystemTime>,
    perm: u16,
    /// Lives only in the core: never committed under this name (a scratch file).
    scratch: bool,
    /// Text a commit did not take: reported and saved for recovery at unmount.
    unsaved: bool,
    /// Its listing cookie: assigned once, so a paged listing neither skips nor repeats it
    /// when other held files come and go.
    cookie: u64,
}

/// The content of a file while handles are open on it.
struct OpenFile {
    path: Vec<String>,
    /// Removed or replaced while open: what its handles write goes nowhere.
    detached: bool,
    data: Vec<u8>,
    dirty: bool,
    mtime: SystemTime,
    perm: u16,
    /// Held by the core (a scratch file): a commit updates the held text, not the tree.
    scratch: bool,
    handles: usize,
    writers: usize,
}

impl OpenFile {
    /// Whether a new handle on its path shares this buffer (it is being written).
    fn shared(&self) -> bool {
        !self.detached && (self.writers > 0 || self.dirty)
    }

    fn stat(&self) -> Stat {
        Stat {
            kind: Kind::File,
            size: self.data.len() as u64,
            mtime: self.mtime,
            perm: self.perm,
        }
    }
}

struct Handle {
    file: Arc<Mutex<OpenFile>>,
    write: bool,
    /// Whether anything was written or truncated through this handle since it was opened
    /// (an open with `O_TRUNC` or a create alone makes the file dirty but not written).
    written: bool,
    /// Whether one close of this handle, with nothing written, was let pass uncommitted.
    deferred: bool,
    /// Whether this handle created its file (`open(O_CREAT)` of a new name).
    created: bool,
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

/// Text no commit took, saved at unmount by [`Vfs::save_unsaved`].
pub struct Unsaved {
    /// Its path in the mount.
    pub path: String,
    /// Where its text was saved, or why it could not be.
    pub saved: Result<PathBuf>,
}

/// The filesystem core over one tree.
///
/// Locks are taken in this order: a handle, the open-file table, an open file, the overlay,
/// the moved-aside table (the handle table and the inode table are only held alone).
pub struct Vfs {
    tree: Arc<dyn Tree>,
    inodes: RwLock<Inodes>,
    handles: Mutex<HashMap<u64, Arc<Mutex<Handle>>>>,
    next_fh: AtomicU64,
    /// Files being written, by path: the buffer new handles on that path share.
    open: Mutex<HashMap<Vec<String>, Arc<Mutex<OpenFile>>>>,
    overlay: Mutex<HashMap<Vec<String>, Overlay>>,
    next_cookie: AtomicU64,
    spill: Spill,
    fresh: FreshDirs,
    /// Tree files moved aside to a scratch name (an editor's backup), by source path, with
    /// the scratch path holding their text. The source is hidden but stays in the store
    /// until new content is committed to it, or until the scratch copy is deleted.
    aside: Mutex<HashMap<Vec<String>, Vec<String>>>,
    /// Tests: runs inside `release` between its commit and its leaving the open files, the
    /// window another thread's truncation by path can hit.
    #[cfg(test)]
    race_in_release: crate::vfs::race_hook::RaceHook<Vfs>,
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

/// `path` moved from below `from` to below `to`, if it is below `from`.
fn rebased(path: &[String], from: &[String], to: &[String]) -> Option<Vec<String>> {
    (path.len() > from.len() && path.starts_with(from)).then(|| {
        let mut p = to.to_vec();
        p.extend_from_slice(&path[from.len()..]);
        p
    })
}

fn overlay_stat(o: &Overlay) -> Stat {
    Stat {
        kind: Kind::File,
        size: o.text.len(),
        mtime: o.mtime,
        perm: o.perm,
    }
}

/// The longest file name (bytes) the kernel's other filesystems accept; longer names are
/// `ENAMETOOLONG`, as POSIX says, also for names that do not exist.
pub const NAME_MAX: usize = 255;

fn check_length(name: &str) -> Result<()> {
    if name.len() > NAME_MAX {
        return Err(Error::new(
            libc::ENAMETOOLONG,
            format!("file name of {} bytes (at most {NAME_MAX})", name.len()),
        ));
    }
    Ok(())
}

fn check_name(name: &str) -> Result<()> {
    check_length(name)?;
    if name.is_empty() || name == "." || name == ".." || name.contains('/') || name.contains('\0') {
        return Err(Error::invalid(format!("invalid file name {name:?}")));
    }
    Ok(())
}

fn check_size(size: u64) -> Result<usize> {
    if size > MAX_FILE_SIZE {
        return Err(Error::new(
            libc::EFBIG,
            format!("file too large (limit {} MiB)", MAX_FILE_SIZE >> 20),
        ));
    }
    usize::try_from(size).map_err(|_| Error::new(libc::EFBIG, "file too large"))
}

impl Vfs {
    /// A core over `tree`; held text larger than a few pages goes to files in `held_dir`
    /// (the state folder) when given.
    pub fn new(tree: Arc<dyn Tree>, held_dir: Option<PathBuf>) -> Vfs {
        Vfs {
            tree,
            inodes: RwLock::new(Inodes::default()),
            handles: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            open: Mutex::new(HashMap::new()),
            overlay: Mutex::new(HashMap::new()),
            next_cookie: AtomicU64::new(FIRST_HELD_COOKIE),
            spill: Spill::new(held_dir),
            fresh: FreshDirs::default(),
            aside: Mutex::new(HashMap::new()),
            #[cfg(test)]
            race_in_release: Default::default(),
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

    fn cookie(&self) -> u64 {
        self.next_cookie.fetch_add(1, Ordering::Relaxed)
    }

    /// The open file being written at `path`, if any.
    fn open_file(&self, path: &[String]) -> Result<Option<Arc<Mutex<OpenFile>>>> {
        Ok(lock(&self.open)?.get(path).cloned())
    }

    /// Detaches the open file at `path` (removed or replaced): its handles write nowhere.
    fn detach(&self, path: &[String]) -> Result<()> {
        let removed = lock(&self.open)?.remove(path);
        if let Some(f) = removed {
            lock(&f)?.detached = true;
        }
        Ok(())
    }

    fn stat_path(&self, path: &[String]) -> Result<Stat> {
        if let Some(f) = self.open_file(path)? {
            let f = lock(&f)?;
            if f.shared() {
                return Ok(f.stat());
            }
        }
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
        check_length(name)?;
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

    /// Attributes of `ino` (of the buffer while it is being written), through handle `fh`
    /// when given (`fstat`: also for a file removed while open).
    pub fn getattr(&self, ino: u64, fh: Option<u64>) -> Result<Stat> {
        if let Some(fh) = fh {
            let file = lock(&*self.handle(fh)?)?.file.clone();
            let f = lock(&file)?;
            if f.detached || f.shared() {
                return Ok(f.stat());
            }
        }
        let path = self.path_of(ino)?;
        self.stat_path(&path)
    }

    /// Truncates `ino` (through handle `fh` when given), sets its mtime, or sets the mode of
    /// a file the core holds (the tree fixes the modes of its own files).
    pub fn setattr(
        &self,
        ino: u64,
        fh: Option<u64>,
        size: Option<u64>,
        mtime: Option<SystemTime>,
        mode: Option<u32>,
    ) -> Result<Stat> {
        let path = self.path_of(ino)?;
        let file = match fh {
            Some(fh) => Some(lock(&*self.handle(fh)?)?.file.clone()),
            None => self.open_file(&path)?,
        };
        if let Some(size) = size {
            let len = check_size(size)?;
            if let Some(fh) = fh {
                lock(&*self.handle(fh)?)?.written = true;
            }
            let truncated = match &file {
                Some(f) => {
                    let mut f = lock(f)?;
                    if f.shared() || fh.is_some() {
                        f.data.resize(len, 0);
                        f.dirty = true;
                        f.mtime = SystemTime::now();
                        true
                    } else {
                        false
                    }
                }
                None => false,
            };
            if !truncated {
                self.truncate_closed(&path, len)?;
            }
        }
        if let Some(f) = &file {
            let mut f = lock(f)?;
            if let Some(m) = mtime {
                f.mtime = m;
            }
            if let (Some(mode), true) = (mode, f.scratch) {
                f.perm = (mode & 0o777) as u16;
            }
        }
        let held = match lock(&self.overlay)?.get_mut(&path) {
            Some(o) => {
                if let Some(m) = mtime {
                    o.mtime = m;
                    o.set_mtime = Some(m);
                }
                if let Some(mode) = mode {
                    o.perm = (mode & 0o777) as u16;
                }
                true
            }
            None => false,
        };
        if let (Some(m), false) = (mtime, held) {
            self.tree
                .set_mtime(&path, m)
                .map_err(|e| e.context(display_path(&path)))?;
        }
        self.stat_path(&path)
    }

    /// Truncates a file no handle is writing: held text, or a tree file (committed now).
    fn truncate_closed(&self, path: &[String], len: usize) -> Result<()> {
        let mut overlay = lock(&self.overlay)?;
        if let Some(o) = overlay.get_mut(path) {
            let mut data = o.text.bytes()?;
            data.resize(len, 0);
            o.text = self.spill.hold(data);
            o.mtime = SystemTime::now();
            return Ok(());
        }
        drop(overlay);
        let stat = self.stat_path(path)?;
        let mut data = self
            .tree
            .read(path)
            .map_err(|e| e.context(display_path(path)))?
            .to_vec();
        data.resize(len, 0);
        self.commit(path, data, stat.perm)
    }

    fn add_handle(&self, file: Arc<Mutex<OpenFile>>, write: bool, created: bool) -> Result<u64> {
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        let h = Handle {
            file,
            write,
            written: false,
            deferred: false,
            created,
        };
        lock(&self.handles)?.insert(fh, Arc::new(Mutex::new(h)));
        Ok(fh)
    }

    fn handle(&self, fh: u64) -> Result<Arc<Mutex<Handle>>> {
        lock(&self.handles)?
            .get(&fh)
            .cloned()
            .ok_or_else(|| Error::new(libc::EBADF, format!("unknown file handle {fh}")))
    }

    /// Joins the file being written at `path`, if any: one more handle on its buffer.
    fn join(
        open: &HashMap<Vec<String>, Arc<Mutex<OpenFile>>>,
        path: &[String],
        mode: OpenMode,
    ) -> Result<Option<Arc<Mutex<OpenFile>>>> {
        let Some(f) = open.get(path) else {
            return Ok(None);
        };
        let mut g = lock(f)?;
        if !g.shared() {
            return Ok(None);
        }
        g.handles += 1;
        if mode.write {
            g.writers += 1;
        }
        if mode.truncate {
            g.data.clear();
            g.dirty = true;
            g.mtime = SystemTime::now();
        }
        Ok(Some(f.clone()))
    }

    /// Opens the file `ino`.
    pub fn open(&self, ino: u64, mode: OpenMode) -> Result<u64> {
        let path = self.path_of(ino)?;
        if mode.write && self.tree.read_only() {
            return Err(Error::read_only("the mount is read-only"));
        }
        let joined = Self::join(&*lock(&self.open)?, &path, mode)?;
        if let Some(f) = joined {
            return self.add_handle(f, mode.write, false);
        }
        let held = lock(&self.overlay)?.get(&path).map(|o| {
            let data = if mode.truncate {
                Ok(Vec::new())
            } else {
                o.text.bytes()
            };
            (data, o.scratch, o.perm, o.mtime)
        });
        let (data, scratch, perm, mtime) = match held {
            Some((data, scratch, perm, mtime)) => (data?, scratch, perm, mtime),
            None => {
                let stat = self.stat_path(&path)?;
                match stat.kind {
                    Kind::File => {}
                    Kind::Dir => return Err(Error::new(libc::EISDIR, "is a directory")),
                    // The kernel resolves links before it opens; never read through one.
                    Kind::Symlink => {
                        return Err(Error::new(
                            libc::ELOOP,
                            format!("{}: is a symbolic link", display_path(&path)),
                        ))
                    }
                }
                let data = if mode.truncate {
                    Vec::new()
                } else {
                    self.tree
                        .read(&path)
                        .map_err(|e| e.context(display_path(&path)))?
                        .to_vec()
                };
                (data, false, stat.perm, stat.mtime)
            }
        };
        let file = Arc::new(Mutex::new(OpenFile {
            path: path.clone(),
            detached: false,
            data,
            dirty: mode.truncate,
            mtime: if mode.truncate {
                SystemTime::now()
            } else {
                mtime
            },
            perm,
            scratch,
            handles: 1,
            writers: usize::from(mode.write),
        }));
        if mode.write {
            let mut open = lock(&self.open)?;
            // Another handle may have started writing meanwhile: then share its buffer.
            if let Some(other) = Self::join(&open, &path, mode)? {
                drop(open);
                return self.add_handle(other, true, false);
            }
            open.insert(path.clone(), file.clone());
            drop(open);
            self.attach_readers(&path, &file)?;
        }
        self.add_handle(file, mode.write, false)
    }

    /// Descriptors opened read-only on `path` before `file` started being written read from
    /// then on what it holds: one buffer for every descriptor, as on any filesystem (a reader
    /// must not see its old copy cut to the writer's size).
    fn attach_readers(&self, path: &[String], file: &Arc<Mutex<OpenFile>>) -> Result<()> {
        let handles: Vec<Arc<Mutex<Handle>>> = lock(&self.handles)?.values().cloned().collect();
        for h in handles {
            let mut h = lock(&h)?;
            if h.write || Arc::ptr_eq(&h.file, file) || lock(&h.file)?.path != path {
                continue;
            }
            lock(file)?.handles += 1;
            h.file = file.clone();
        }
        Ok(())
    }

    /// Creates and opens `name` in `parent` with permission bits `mode`.
    pub fn create(&self, parent: u64, name: &str, mode: u32) -> Result<(u64, Stat, u64)> {
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
            text: Text::Memory(Vec::new()),
            mtime: now,
            set_mtime: None,
            perm: (mode & 0o777) as u16,
            scratch,
            unsaved: false,
            cookie: self.cookie(),
        };
        let stat = overlay_stat(&o);
        let file = Arc::new(Mutex::new(OpenFile {
            path: path.clone(),
            detached: false,
            data: Vec::new(),
            dirty: true,
            mtime: now,
            perm: o.perm,
            scratch,
            handles: 1,
            writers: 1,
        }));
        self.detach(&path)?;
        lock(&self.open)?.insert(path.clone(), file.clone());
        lock(&self.overlay)?.insert(path, o);
        self.fresh.show(&dir, name);
        let fh = self.add_handle(file, true, true)?;
        let ino = self
            .inodes
            .write()
            .map_err(|_| Error::corrupt("inode table lock poisoned"))?
            .lookup(parent, name);
        Ok((ino, stat, fh))
    }

    /// The target of the symbolic link `ino`, as the tree stores it.
    pub fn readlink(&self, ino: u64) -> Result<Vec<u8>> {
        let path = self.path_of(ino)?;
        if self.stat_path(&path)?.kind != Kind::Symlink {
            return Err(Error::invalid(format!(
                "{}: not a symbolic link",
                display_path(&path)
            )));
        }
        self.tree
            .readlink(&path)
            .map_err(|e| e.context(display_path(&path)))
    }

    /// Creates symbolic link `name` in `parent` pointing to `target` (`ln -s`), for process
    /// `pid`.
    pub fn symlink(&self, parent: u64, name: &str, target: &[u8], pid: u32) -> Result<(u64, Stat)> {
        check_name(name)?;
        if self.tree.read_only() {
            return Err(Error::read_only("the mount is read-only"));
        }
        let dir = self.path_of(parent)?;
        let path = child(&dir, name);
        if self.stat_path(&path).is_ok() {
            return Err(Error::exists(format!("{} exists", display_path(&path))));
        }
        self.tree
            .symlink(&path, target)
            .map_err(|e| e.context(display_path(&path)))?;
        self.fresh.show(&dir, name);
        self.lookup(parent, name, pid)
    }

    /// Reads from an open handle (the file's buffer, with what other handles wrote).
    pub fn read(&self, fh: u64, offset: u64, size: u32) -> Result<Vec<u8>> {
        let file = lock(&*self.handle(fh)?)?.file.clone();
        let f = lock(&file)?;
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(f.data.len());
        let end = start.saturating_add(size as usize).min(f.data.len());
        Ok(f.data[start..end].to_vec())
    }

    /// Writes into the buffer of an open handle's file (nothing is committed before
    /// flush/fsync).
    pub fn write(&self, fh: u64, offset: u64, data: &[u8], append: bool) -> Result<usize> {
        let h = self.handle(fh)?;
        let mut h = lock(&h)?;
        let mut f = lock(&h.file)?;
        let start = if append { f.data.len() as u64 } else { offset };
        let end = check_size(start.saturating_add(data.len() as u64))?;
        let start = end - data.len();
        if f.data.len() < end {
            f.data.resize(end, 0);
        }
        f.data[start..end].copy_from_slice(data);
        f.dirty = true;
        f.mtime = SystemTime::now();
        drop(f);
        h.written = true;
        Ok(data.len())
    }

    /// Commits `data` as the content of tree path `path`; on failure keeps it readable as
    /// pending text (with the mode of what it replaces, else `perm`).
    fn commit(&self, path: &[String], data: Vec<u8>, perm: u16) -> Result<()> {
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
                let stored_perm = self.tree.stat(path).map(|s| s.perm).ok();
                let mut overlay = lock(&self.overlay)?;
                let old = overlay.get(path);
                let o = Overlay {
                    set_mtime: old.and_then(|o| o.set_mtime),
                    perm: old.map(|o| o.perm).or(stored_perm).unwrap_or(perm),
                    cookie: old.map_or_else(|| self.cookie(), |o| o.cookie),
                    text: self.spill.hold(data),
                    mtime: SystemTime::now(),
                    scratch: false,
                    unsaved: true,
                };
                overlay.insert(path.to_vec(), o);
                Err(e.logged())
            }
        }
    }

    /// Commits a handle's file if it was written (each close).
    ///
    /// The first close of a handle only truncated or created, with nothing written yet,
    /// commits nothing: a shell redirection (`cmd > file`) opens the file, duplicates the
    /// descriptor and closes the original before anything is written, and that close must not
    /// commit an empty file (invalid for most views, and a needless commit). It still fails
    /// when the tree would refuse what the file holds ([`Tree::check`]), so a lone
    /// `open(O_TRUNC); close()` reports the error its commit meets (the shell ignores the
    /// error of its own close). A file this handle created is committed at that first close
    /// when the tree takes it empty. The next close, or the release, commits whatever the
    /// file holds.
    pub fn flush(&self, fh: u64) -> Result<()> {
        self.commit_handle(fh, false)
    }

    /// Commits a handle's file if it is dirty (fsync).
    pub fn fsync(&self, fh: u64) -> Result<()> {
        self.commit_handle(fh, true)
    }

    fn commit_handle(&self, fh: u64, last: bool) -> Result<()> {
        let h = self.handle(fh)?;
        let mut h = lock(&h)?;
        if !h.write {
            return Ok(());
        }
        let file = h.file.clone();
        // Held through the commit: commits of one file happen one at a time, in order.
        let mut f = lock(&file)?;
        if f.detached || !f.dirty {
            return Ok(());
        }
        if !h.written && !h.deferred && !last {
            h.deferred = true;
            if f.scratch {
                return Ok(());
            }
            self.tree.check(&f.path, &f.data).map_err(|e| {
                e.context(format!(
                    "{}: nothing written before this close",
                    display_path(&f.path)
                ))
            })?;
            // A new file the tree takes empty exists once its first close returns (its
            // folder's times change then, not at the kernel's later release).
            if !h.created {
                return Ok(());
            }
        }
        self.commit_file(&mut f)
    }

    /// Commits an open file's buffer: scratch text to the overlay, anything else to the tree.
    fn commit_file(&self, f: &mut OpenFile) -> Result<()> {
        f.dirty = false;
        if f.scratch {
            let text = self.spill.hold(f.data.clone());
            let mut overlay = lock(&self.overlay)?;
            match overlay.get_mut(&f.path) {
                Some(o) => {
                    o.text = text;
                    o.mtime = f.mtime;
                }
                None => {
                    overlay.insert(
                        f.path.clone(),
                        Overlay {
                            text,
                            mtime: f.mtime,
                            set_mtime: None,
                            perm: f.perm,
                            scratch: true,
                            unsaved: false,
                            cookie: self.cookie(),
                        },
                    );
                }
            }
            return Ok(());
        }
        self.commit(&f.path, f.data.clone(), f.perm)
    }

    /// Closes a handle, committing what is still unflushed.
    pub fn release(&self, fh: u64) -> Result<()> {
        let result = self.commit_handle(fh, true);
        #[cfg(test)]
        self.race_in_release.run(self);
        let Some(h) = lock(&self.handles)?.remove(&fh) else {
            return result;
        };
        let h = lock(&h)?;
        let mut open = lock(&self.open)?;
        let mut f = lock(&h.file)?;
        f.handles = f.handles.saturating_sub(1);
        if h.write {
            f.writers = f.writers.saturating_sub(1);
        }
        if f.handles == 0 && open.get(&f.path).is_some_and(|o| Arc::ptr_eq(o, &h.file)) {
            open.remove(&f.path);
        }
        drop(open);
        // A change that reached the buffer after the commit above and before it left the
        // table of open files (a truncation by path, racing this release) would be dropped
        // with it: it is committed now.
        if f.handles == 0 && f.dirty && !f.detached {
            return result.and(self.commit_file(&mut f));
        }
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

    /// Paths holding text no commit took (kept readable in the mount), sorted.
    pub fn failed_paths(&self) -> Vec<String> {
        let mut paths: Vec<String> = match self.overlay.lock() {
            Ok(o) => o
                .iter()
                .filter(|(_, v)| v.unsaved)
                .map(|(k, _)| display_path(k))
                .collect(),
            Err(_) => Vec::new(),
        };
        paths.sort();
        paths
    }

    /// Saves the text no commit took into `dir` (made, mode 0700), one file per path at the
    /// same relative path, and drops every held text. Called once, at unmount.
    pub fn save_unsaved(&self, dir: &Path) -> Vec<Unsaved> {
        let held: Vec<(Vec<String>, Overlay)> = match self.overlay.lock() {
            Ok(mut o) => o.drain().collect(),
            Err(_) => Vec::new(),
        };
        let mut unsaved: Vec<Unsaved> = held
            .into_iter()
            .filter(|(_, o)| o.unsaved)
            .map(|(path, o)| {
                let dest = path.iter().fold(dir.to_path_buf(), |d, n| d.join(n));
                let saved = dest
                    .parent()
                    .map_or(Ok(()), private_dir)
                    .and_then(|()| o.text.save(&dest))
                    .map(|()| dest);
                Unsaved {
                    path: display_path(&path),
                    saved,
                }
            })
            .collect();
        self.spill.remove();
        unsaved.sort_by(|a, b| a.path.cmp(&b.path));
        unsaved
    }

    /// Scratch files that still hold text (a tool's temporary never renamed over an object):
    /// they are not stored, and vanish at unmount.
    pub fn scratch_paths(&self) -> Vec<String> {
        match self.overlay.lock() {
            Ok(o) => o
                .iter()
                .filter(|(_, v)| v.scratch && !v.text.is_empty())
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
        // Core-held files of this directory that the tree does not list, after the tree's,
        // in the order of their stable cookies.
        let mut extra: Vec<(u64, String, Stat, bool)> = lock(&self.overlay)?
            .iter()
            .filter(|(p, o)| p.len() == dir.len() + 1 && p.starts_with(&dir) && o.cookie > offset)
            .filter_map(|(p, o)| {
                p.last()
                    .map(|n| (o.cookie, n.clone(), overlay_stat(o), o.scratch))
            })
            .collect();
        extra.sort_by_key(|e| e.0);
        for (cookie, name, stat, scratch) in extra {
            if !scratch && self.tree.stat(&child(&dir, &name)).is_ok() {
                continue;
            }
            let child_ino = self.entry_ino(ino, &name, plus);
            if !sink(DirEntry {
                ino: child_ino,
                offset: cookie,
                name: &name,
                stat: &stat,
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

    /// Removes file `name` from `parent`. Pending text (a failed commit's) is discarded and
    /// the stored object shows again; the next removal deletes the object.
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
            Some(_) => {}
            None => self
                .tree
                .remove(&path)
                .map_err(|e| e.context(display_path(&path)))?,
        }
        self.detach(&path)?;
        if let Ok(mut t) = self.inodes.write() {
            t.unlink(parent, name);
        }
        Ok(())
    }

    /// Removes directory `name` from `parent` (and the object it shows).
    pub fn rmdir(&self, parent: u64, name: &str) -> Result<()> {
        let path = child(&self.path_of(parent)?, name);
        let has_held = lock(&self.overlay)?
            .keys()
            .any(|p| p.len() > path.len() && p.starts_with(&path));
        if has_held {
            return Err(Error::new(
                libc::ENOTEMPTY,
                format!("{} holds unsaved or scratch files", display_path(&path)),
            ));
        }
        self.tree
            .rmdir(&path)
            .map_err(|e| e.context(display_path(&path)))?;
        let below: Vec<Vec<String>> = lock(&self.open)?
            .keys()
            .filter(|p| p.starts_with(&path))
            .cloned()
            .collect();
        for p in below {
            self.detach(&p)?;
        }
        self.fresh.removed(&path);
        if let Ok(mut t) = self.inodes.write() {
            t.unlink(parent, name);
        }
        Ok(())
    }

    /// Moves the open file at `from` (and, for a folder, those below it) to `to`; `scratch`
    /// says whether a moved file is now held by the core.
    fn move_open(&self, from: &[String], to: &[String], scratch: Option<bool>) -> Result<()> {
        let mut open = lock(&self.open)?;
        let moving: Vec<Vec<String>> = open
            .keys()
            .filter(|p| p.starts_with(from))
            .cloned()
            .collect();
        for p in moving {
            let Some(f) = open.remove(&p) else { continue };
            let dest = rebased(&p, from, to).unwrap_or_else(|| to.to_vec());
            {
                let mut g = lock(&f)?;
                g.path = dest.clone();
                if let (Some(s), true) = (scratch, p == from) {
                    g.scratch = s;
                }
            }
            open.insert(dest, f);
        }
        Ok(())
    }

    /// The text held at `from` for a rename: the buffer of a file being written, else the
    /// held text. With `take`, the buffer counts as committed (the rename commits it).
    fn text_of(&self, from: &[String], take: bool) -> Result<Vec<u8>> {
        if let Some(f) = self.open_file(from)? {
            let mut f = lock(&f)?;
            if f.dirty {
                f.dirty = !take;
                return Ok(f.data.clone());
            }
        }
        match lock(&self.overlay)?.get(from) {
            Some(o) => o.text.bytes(),
            None => Err(Error::not_found(display_path(from))),
        }
    }

    /// Renames `name` in `parent` to `new_name` in `new_parent`.
    pub fn rename(&self, parent: u64, name: &str, new_parent: u64, new_name: &str) -> Result<()> {
        check_name(new_name)?;
        let from = child(&self.path_of(parent)?, name);
        let to = child(&self.path_of(new_parent)?, new_name);
        let to_dir = &to[..to.len() - 1];
        let held = lock(&self.overlay)?.contains_key(&from);
        let to_class = self
            .tree
            .classify(to_dir, new_name)
            .map_err(|e| e.context(display_path(&to)))?;
        let to_in_tree = self.tree.stat(&to).ok();
        if held {
            if let Some(s) = &to_in_tree {
                if s.kind == Kind::Dir {
                    return Err(Error::new(
                        libc::EISDIR,
                        format!("{} is a directory", display_path(&to)),
                    ));
                }
            }
            if to_in_tree.as_ref().is_some_and(|s| s.kind == Kind::Symlink) {
                // A file renamed over a link replaces the link, as anywhere: the link goes,
                // and what it points to is never written. The text is checked first, so a
                // rename the tree would refuse leaves the link where it was.
                self.tree
                    .check(&to, &self.text_of(&from, false)?)
                    .map_err(|e| e.context(display_path(&to)))?;
                self.tree
                    .remove(&to)
                    .map_err(|e| e.context(display_path(&to)))?;
            }
            let data = self.text_of(&from, true)?;
            if to_in_tree.is_some() || to_class == NewFile::Object {
                // Replacing a tree file's content (rsync, sed -i, editors): commit it.
                let (set_mtime, perm) = lock(&self.overlay)?
                    .get(&from)
                    .map_or((None, 0o644), |o| (o.set_mtime, o.perm));
                self.commit(&to, data, perm)?;
                if let Some(m) = set_mtime {
                    self.tree
                        .set_mtime(&to, m)
                        .map_err(|e| e.context(display_path(&to)))?;
                }
                lock(&self.overlay)?.remove(&from);
                self.detach(&to)?;
                self.move_open(&from, &to, Some(false))?;
            } else {
                // A held file under another name the tree does not store: held there, as a
                // scratch file (text no commit took stays marked for recovery).
                let mut overlay = lock(&self.overlay)?;
                if let Some(mut o) = overlay.remove(&from) {
                    o.text = self.spill.hold(data);
                    o.scratch = true;
                    o.cookie = self.cookie();
                    overlay.insert(to.clone(), o);
                }
                drop(overlay);
                for v in lock(&self.aside)?.values_mut() {
                    if *v == from {
                        *v = to.clone();
                    }
                }
                self.detach(&to)?;
                self.move_open(&from, &to, Some(true))?;
            }
        } else {
            let stat = self.stat_path(&from)?;
            if to_in_tree.is_none() && to_class == NewFile::Scratch && stat.kind == Kind::File {
                // A tree file moved aside (an editor's backup copy): its text becomes a
                // scratch file and the file is hidden, but the object stays stored until new
                // content replaces it, so a failed save never loses it. The copy keeps the
                // file's mode.
                let data = self
                    .tree
                    .read(&from)
                    .map_err(|e| e.context(display_path(&from)))?
                    .to_vec();
                lock(&self.aside)?.insert(from.clone(), to.clone());
                let o = Overlay {
                    text: self.spill.hold(data),
                    mtime: stat.mtime,
                    set_mtime: None,
                    perm: stat.perm,
                    scratch: true,
                    unsaved: false,
                    cookie: self.cookie(),
                };
                self.detach(&to)?;
                lock(&self.overlay)?.insert(to.clone(), o);
                self.move_open(&from, &to, Some(true))?;
            } else {
                self.tree.rename(&from, &to).map_err(|e| {
                    e.context(format!("{} -> {}", display_path(&from), display_path(&to)))
                })?;
                // What replaced `to` replaces the text held for it too.
                lock(&self.overlay)?.remove(&to);
                self.detach(&to)?;
                self.move_open(&from, &to, None)?;
                self.move_held_below(&from, &to)?;
            }
        }
        self.fresh.removed(&from);
        self.fresh.show(to_dir, new_name);
        if let Ok(mut t) = self.inodes.write() {
            t.rename(parent, name, new_parent, new_name);
        }
        Ok(())
    }

    /// After a folder moved from `from` to `to`, moves the held files below it along.
    fn move_held_below(&self, from: &[String], to: &[String]) -> Result<()> {
        let mut overlay = lock(&self.overlay)?;
        let below: Vec<Vec<String>> = overlay
            .keys()
            .filter(|p| p.starts_with(from))
            .cloned()
            .collect();
        for p in below {
            if let (Some(o), Some(dest)) = (overlay.remove(&p), rebased(&p, from, to)) {
                overlay.insert(dest, o);
            }
        }
        drop(overlay);
        let mut aside = lock(&self.aside)?;
        *aside = aside
            .drain()
            .map(|(k, v)| {
                let k = rebased(&k, from, to).unwrap_or(k);
                let v = rebased(&v, from, to).unwrap_or(v);
                (k, v)
            })
            .collect();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::tree::Entry;
    use std::time::UNIX_EPOCH;

    /// Folders of files, keyed by their path (`d/f`): `d` exists, `mkdir` makes a folder
    /// holding a fixed file `fixed` (like a block's views). A file's content must start with
    /// `ok` to be committed; a file named `auth` has mode 0600. `links` holds symbolic
    /// links (key and target).
    #[derive(Default)]
    struct Files {
        files: Mutex<HashMap<String, Vec<u8>>>,
        links: Mutex<HashMap<String, Vec<u8>>>,
        dirs: Mutex<Vec<String>>,
        writes: Mutex<Vec<Vec<u8>>>,
        mtimes: Mutex<HashMap<String, SystemTime>>,
    }

    impl Files {
        fn is_dir(&self, path: &[String]) -> Result<bool> {
            let key = path.join("/");
            Ok(path.is_empty() || key == "d" || lock(&self.dirs)?.contains(&key))
        }

        fn file_key(&self, path: &[String]) -> Result<String> {
            match path.split_last() {
                Some((_, dir)) if self.is_dir(dir)? => Ok(path.join("/")),
                _ => Err(Error::not_found("no such folder")),
            }
        }
    }

    impl Tree for Files {
        fn stat(&self, path: &[String]) -> Result<Stat> {
            if self.is_dir(path)? {
                return Ok(Stat::dir(UNIX_EPOCH, false));
            }
            let key = self.file_key(path)?;
            if let Some(target) = lock(&self.links)?.get(&key) {
                return Ok(Stat::symlink(target.len() as u64, UNIX_EPOCH));
            }
            let files = lock(&self.files)?;
            let data = files
                .get(&key)
                .ok_or_else(|| Error::not_found("no such file"))?;
            Ok(Stat {
                kind: Kind::File,
                size: data.len() as u64,
                mtime: UNIX_EPOCH,
                perm: if key.ends_with("/auth") { 0o600 } else { 0o644 },
            })
        }
        fn list(&self, _: &[String], _: u64, _: &mut dyn FnMut(Entry) -> bool) -> Result<()> {
            Ok(())
        }
        fn read(&self, path: &[String]) -> Result<Arc<Vec<u8>>> {
            let files = lock(&self.files)?;
            let data = files
                .get(&self.file_key(path)?)
                .ok_or_else(|| Error::not_found("no such file"))?;
            Ok(Arc::new(data.clone()))
        }
        fn write(&self, path: &[String], data: &[u8]) -> Result<()> {
            let key = self.file_key(path)?;
            if !data.starts_with(b"ok") {
                return Err(Error::at(1, 1, "expected `ok`"));
            }
            lock(&self.writes)?.push(data.to_vec());
            lock(&self.files)?.insert(key, data.to_vec());
            Ok(())
        }
        fn check(&self, path: &[String], data: &[u8]) -> Result<()> {
            self.file_key(path)?;
            if !data.starts_with(b"ok") {
                return Err(Error::at(1, 1, "expected `ok`"));
            }
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
            let key = self.file_key(path)?;
            if lock(&self.links)?.remove(&key).is_none() {
                lock(&self.files)?.remove(&key);
            }
            Ok(())
        }
        fn mkdir(&self, path: &[String]) -> Result<()> {
            let key = path.join("/");
            lock(&self.dirs)?.push(key.clone());
            lock(&self.files)?.insert(format!("{key}/fixed"), b"ok fixed".to_vec());
            Ok(())
        }
        fn rmdir(&self, _: &[String]) -> Result<()> {
            Ok(())
        }
        fn rename(&self, from: &[String], to: &[String]) -> Result<()> {
            let (from, to) = (self.file_key(from)?, self.file_key(to)?);
            let mut links = lock(&self.links)?;
            if let Some(target) = links.remove(&from) {
                lock(&self.files)?.remove(&to);
                links.insert(to, target);
                return Ok(());
            }
            links.remove(&to);
            let mut files = lock(&self.files)?;
            let data = files
                .remove(&from)
                .ok_or_else(|| Error::not_found("no such file"))?;
            files.insert(to, data);
            Ok(())
        }
        fn set_mtime(&self, path: &[String], mtime: SystemTime) -> Result<()> {
            lock(&self.mtimes)?.insert(self.file_key(path)?, mtime);
            Ok(())
        }
        fn read_only(&self) -> bool {
            false
        }
        fn readlink(&self, path: &[String]) -> Result<Vec<u8>> {
            lock(&self.links)?
                .get(&self.file_key(path)?)
                .cloned()
                .ok_or_else(|| Error::invalid("not a link"))
        }
        fn symlink(&self, path: &[String], target: &[u8]) -> Result<()> {
            lock(&self.links)?.insert(self.file_key(path)?, target.to_vec());
            Ok(())
        }
    }

    fn setup() -> (Arc<Files>, Vfs, u64) {
        let tree = Arc::new(Files::default());
        lock(&tree.files)
            .unwrap()
            .insert("d/f".into(), b"ok old".to_vec());
        let vfs = Vfs::new(tree.clone(), None);
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
        // `cmd > file`: the shell's close of the original descriptor (its error, an empty file
        // being invalid here, is ignored by the shell), then cmd writes and closes.
        let fh = vfs.open(f, trunc).unwrap();
        vfs.flush(fh).unwrap_err();
        assert!(lock(&tree.writes).unwrap().is_empty());
        vfs.write(fh, 0, b"ok new", false).unwrap();
        vfs.flush(fh).unwrap();
        vfs.release(fh).unwrap();
        assert_eq!(*lock(&tree.writes).unwrap(), vec![b"ok new".to_vec()]);
        // `: > file`: the truncation alone is committed at the next close.
        let fh = vfs.open(f, trunc).unwrap();
        vfs.flush(fh).unwrap_err();
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
        assert_eq!(lock(&tree.files).unwrap()["d/f"], b"okd");
    }

    #[test]
    fn a_lone_truncating_close_fails_with_the_error_its_commit_meets() {
        let (tree, vfs, f) = setup();
        // open(O_TRUNC); close(): the close reports that the empty file cannot be stored.
        let fh = vfs.open(f, TRUNC).unwrap();
        assert_eq!(vfs.flush(fh).unwrap_err().errno(), libc::EINVAL);
        assert!(lock(&tree.writes).unwrap().is_empty(), "nothing committed");
        vfs.release(fh).unwrap_err();
        assert_eq!(stored(&tree, "d/f").unwrap(), b"ok old");
        assert_eq!(vfs.failed_paths(), vec!["d/f".to_string()]);
        // A new file created and closed empty: the same.
        let d = dir_ino(&vfs);
        let (_, _, fh) = vfs.create(d, "g", 0o644).unwrap();
        assert_eq!(vfs.flush(fh).unwrap_err().errno(), libc::EINVAL);
        vfs.release(fh).unwrap_err();
        assert_eq!(stored(&tree, "d/g"), None);
        // Scratch files take anything.
        let (_, _, fh) = vfs.create(d, "g.swp", 0o600).unwrap();
        vfs.flush(fh).unwrap();
        vfs.release(fh).unwrap();
    }

    #[test]
    fn a_file_moved_aside_stays_stored_until_replaced_or_its_copy_is_deleted() {
        let (tree, vfs, _) = setup();
        let d = vfs.lookup(ROOT, "d", 1).unwrap().0;
        let stored = |name: &str| lock(&tree.files).unwrap().get(name).cloned();
        // An editor's backup: `f` moves aside, then a new `f` fails to save.
        vfs.rename(d, "f", d, "f~").unwrap();
        assert_eq!(vfs.lookup(d, "f", 1).unwrap_err().errno(), libc::ENOENT);
        assert_eq!(
            stored("d/f").unwrap(),
            b"ok old",
            "still stored while aside"
        );
        let (_, _, fh) = vfs.create(d, "f", 0o644).unwrap();
        vfs.write(fh, 0, b"bad", false).unwrap();
        assert!(vfs.release(fh).is_err());
        assert_eq!(
            stored("d/f").unwrap(),
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
        assert_eq!(stored("d/f").unwrap(), b"ok new");
        // `mv f f~ && rm f~` deletes f.
        vfs.rename(d, "f", d, "f~").unwrap();
        vfs.unlink(d, "f~").unwrap();
        assert_eq!(stored("d/f"), None);
    }

    const TRUNC: OpenMode = OpenMode {
        write: true,
        truncate: true,
        append: false,
    };
    const RW: OpenMode = OpenMode {
        write: true,
        truncate: false,
        append: false,
    };

    fn dir_ino(vfs: &Vfs) -> u64 {
        vfs.lookup(ROOT, "d", 1).unwrap().0
    }

    fn stored(tree: &Files, name: &str) -> Option<Vec<u8>> {
        lock(&tree.files).unwrap().get(name).cloned()
    }

    fn read_all(vfs: &Vfs, ino: u64) -> Vec<u8> {
        let fh = vfs.open(ino, OpenMode::default()).unwrap();
        let data = vfs.read(fh, 0, 1 << 20).unwrap();
        vfs.release(fh).unwrap();
        data
    }

    /// Leaves `bad` as the pending text of `d/f` (its commit failed).
    fn fail_a_save(vfs: &Vfs, f: u64) {
        let fh = vfs.open(f, TRUNC).unwrap();
        vfs.write(fh, 0, b"bad", false).unwrap();
        assert_eq!(vfs.flush(fh).unwrap_err().errno(), libc::EINVAL);
        vfs.release(fh).unwrap();
    }

    #[test]
    fn removing_pending_text_discards_only_the_text_and_a_second_rm_deletes() {
        let (tree, vfs, f) = setup();
        let d = dir_ino(&vfs);
        fail_a_save(&vfs, f);
        assert_eq!(read_all(&vfs, f), b"bad");
        vfs.unlink(d, "f").unwrap();
        assert_eq!(
            stored(&tree, "d/f").unwrap(),
            b"ok old",
            "the object is kept"
        );
        assert!(vfs.failed_paths().is_empty());
        let (f, stat) = vfs.lookup(d, "f", 1).unwrap();
        assert_eq!(stat.size, 6, "the stored object shows again");
        assert_eq!(read_all(&vfs, f), b"ok old");
        vfs.unlink(d, "f").unwrap();
        assert_eq!(stored(&tree, "d/f"), None, "a second rm deletes it");
    }

    #[test]
    fn renaming_pending_text_to_a_scratch_name_moves_only_the_text() {
        let (tree, vfs, f) = setup();
        let d = dir_ino(&vfs);
        fail_a_save(&vfs, f);
        vfs.rename(d, "f", d, "f.tmp").unwrap();
        assert_eq!(stored(&tree, "d/f").unwrap(), b"ok old");
        let (f, _) = vfs.lookup(d, "f", 1).unwrap();
        assert_eq!(
            read_all(&vfs, f),
            b"ok old",
            "the stored object shows again"
        );
        let (tmp, _) = vfs.lookup(d, "f.tmp", 1).unwrap();
        assert_eq!(read_all(&vfs, tmp), b"bad");
        assert_eq!(
            vfs.failed_paths(),
            vec!["d/f.tmp".to_string()],
            "still text no commit took: kept for recovery"
        );
        vfs.unlink(d, "f.tmp").unwrap();
        assert!(vfs.failed_paths().is_empty());
        assert_eq!(stored(&tree, "d/f").unwrap(), b"ok old");
    }

    #[test]
    fn renaming_a_file_over_pending_text_replaces_the_text() {
        let (tree, vfs, f) = setup();
        let d = dir_ino(&vfs);
        lock(&tree.files)
            .unwrap()
            .insert("d/g".into(), b"ok g".to_vec());
        fail_a_save(&vfs, f);
        vfs.rename(d, "g", d, "f").unwrap();
        assert_eq!(stored(&tree, "d/f").unwrap(), b"ok g");
        let (f, _) = vfs.lookup(d, "f", 1).unwrap();
        assert_eq!(
            read_all(&vfs, f),
            b"ok g",
            "the renamed file, not the old text"
        );
        assert!(vfs.failed_paths().is_empty());
    }

    #[test]
    fn a_folder_holding_pending_text_is_not_removed() {
        let (_tree, vfs, f) = setup();
        fail_a_save(&vfs, f);
        assert_eq!(vfs.rmdir(ROOT, "d").unwrap_err().errno(), libc::ENOTEMPTY);
    }

    #[test]
    fn the_size_of_a_file_open_for_writing_is_its_buffer() {
        let (_tree, vfs, f) = setup();
        let fh = vfs.open(f, TRUNC).unwrap();
        vfs.write(fh, 0, &[b'o'; 100], false).unwrap();
        vfs.write(fh, 1, b"k", false).unwrap();
        assert_eq!(
            vfs.getattr(f, None).unwrap().size,
            100,
            "stat sees the buffer"
        );
        vfs.setattr(f, Some(fh), Some(150), None, None).unwrap();
        assert_eq!(vfs.getattr(f, None).unwrap().size, 150, "ftruncate up");
        // A second descriptor on the same file sees the first one's writes, and writes into
        // the same buffer.
        let other = vfs.open(f, RW).unwrap();
        assert_eq!(vfs.read(other, 0, 1000).unwrap().len(), 150);
        vfs.write(other, 150, b"!", false).unwrap();
        assert_eq!(vfs.read(fh, 150, 10).unwrap(), b"!");
        assert_eq!(vfs.getattr(f, None).unwrap().size, 151);
        vfs.release(other).unwrap();
        vfs.release(fh).unwrap();
        assert_eq!(vfs.getattr(f, None).unwrap().size, 151);
    }

    #[test]
    fn fstat_of_a_file_removed_while_open_is_its_buffer() {
        let (tree, vfs, f) = setup();
        let d = dir_ino(&vfs);
        let fh = vfs.open(f, RW).unwrap();
        vfs.write(fh, 6, b" more", false).unwrap();
        vfs.unlink(d, "f").unwrap();
        assert_eq!(vfs.getattr(f, Some(fh)).unwrap().size, 11);
        assert_eq!(vfs.read(fh, 0, 100).unwrap(), b"ok old more");
        vfs.release(fh).unwrap();
        assert_eq!(
            stored(&tree, "d/f"),
            None,
            "writes to a removed file go nowhere"
        );
    }

    #[test]
    fn growing_a_file_past_the_limit_is_efbig_and_keeps_the_mount() {
        let (tree, vfs, f) = setup();
        let fh = vfs.open(f, RW).unwrap();
        let e = vfs
            .setattr(f, Some(fh), Some(1 << 40), None, None)
            .unwrap_err();
        assert_eq!(e.errno(), libc::EFBIG);
        let e = vfs.setattr(f, None, Some(1 << 40), None, None).unwrap_err();
        assert_eq!(e.errno(), libc::EFBIG);
        let e = vfs.write(fh, MAX_FILE_SIZE, b"x", false).unwrap_err();
        assert_eq!(e.errno(), libc::EFBIG);
        vfs.release(fh).unwrap();
        assert_eq!(stored(&tree, "d/f").unwrap(), b"ok old");
    }

    /// Lists `d` two entries per call, running `between` after each call.
    fn paged_listing(vfs: &Vfs, mut between: impl FnMut(usize)) -> Vec<String> {
        let d = dir_ino(vfs);
        let mut seen = Vec::new();
        let mut offset = 0;
        for page in 0..100 {
            let mut got = 0;
            vfs.readdir(d, offset, false, 1, &mut |e| {
                if got == 2 {
                    return false;
                }
                got += 1;
                offset = e.offset;
                seen.push(e.name.to_string());
                true
            })
            .unwrap();
            if got == 0 {
                break;
            }
            between(page);
        }
        seen
    }

    #[test]
    fn listing_cookies_of_held_files_stay_stable_while_files_come_and_go() {
        let (_tree, vfs, _) = setup();
        let d = dir_ino(&vfs);
        for n in ["b.tmp", "d.tmp", "f.tmp", "h.tmp"] {
            let (_, _, fh) = vfs.create(d, n, 0o644).unwrap();
            vfs.release(fh).unwrap();
        }
        let seen = paged_listing(&vfs, |page| {
            // Between pages: a new name sorting first, and a removed one already listed.
            if page < 3 {
                let (_, _, fh) = vfs.create(d, &format!("a{page}.tmp"), 0o644).unwrap();
                vfs.release(fh).unwrap();
            }
            if page == 1 {
                vfs.unlink(d, "b.tmp").unwrap();
            }
        });
        for n in ["d.tmp", "f.tmp", "h.tmp"] {
            assert_eq!(
                seen.iter().filter(|s| *s == n).count(),
                1,
                "{n} in {seen:?}"
            );
        }
    }

    #[test]
    fn held_files_show_real_modes() {
        let (tree, vfs, _) = setup();
        let d = dir_ino(&vfs);
        lock(&tree.files)
            .unwrap()
            .insert("d/auth".into(), b"ok hash".to_vec());
        // `create` honours the mode asked for; chmod of a held file is real.
        let (tmp, stat, fh) = vfs.create(d, "sedAb12Cd", 0o600).unwrap();
        assert_eq!(stat.perm, 0o600);
        vfs.release(fh).unwrap();
        assert_eq!(vfs.getattr(tmp, None).unwrap().perm, 0o600);
        vfs.setattr(tmp, None, None, None, Some(0o640)).unwrap();
        assert_eq!(vfs.getattr(tmp, None).unwrap().perm, 0o640);
        // A copy moved aside keeps the mode of what it holds.
        vfs.rename(d, "auth", d, "auth~").unwrap();
        let (backup, _) = vfs.lookup(d, "auth~", 1).unwrap();
        assert_eq!(vfs.getattr(backup, None).unwrap().perm, 0o600);
        vfs.rename(d, "auth~", d, "auth").unwrap();
        // Text a commit did not take keeps the mode of the file it is for.
        let (auth, _) = vfs.lookup(d, "auth", 1).unwrap();
        let fh = vfs.open(auth, TRUNC).unwrap();
        vfs.write(fh, 0, b"bad", false).unwrap();
        vfs.release(fh).unwrap_err();
        assert_eq!(vfs.getattr(auth, None).unwrap().perm, 0o600);
        assert_eq!(vfs.getattr(auth, None).unwrap().size, 3);
    }

    #[test]
    fn vim_save_by_rename_commits_and_a_failed_one_restores_the_backup() {
        let (tree, vfs, _) = setup();
        let d = dir_ino(&vfs);
        let save = |text: &[u8]| -> Result<()> {
            // vim with 'writebackup' and 'backupcopy' auto: rename f to f~, create f, write,
            // fsync, close, restore the mode, remove the backup (or restore it on failure).
            vfs.rename(d, "f", d, "f~")?;
            let (f, _, fh) = vfs.create(d, "f", 0o644)?;
            vfs.write(fh, 0, text, false)?;
            let synced = vfs.fsync(fh);
            vfs.flush(fh)?;
            vfs.release(fh)?;
            if let Err(e) = synced {
                vfs.rename(d, "f~", d, "f")?;
                return Err(e);
            }
            vfs.setattr(f, None, None, None, Some(0o644))?;
            vfs.unlink(d, "f~")
        };
        save(b"ok new").unwrap();
        assert_eq!(stored(&tree, "d/f").unwrap(), b"ok new");
        assert_eq!(vfs.lookup(d, "f~", 1).unwrap_err().errno(), libc::ENOENT);
        assert_eq!(save(b"bad").unwrap_err().errno(), libc::EINVAL);
        assert_eq!(
            stored(&tree, "d/f").unwrap(),
            b"ok new",
            "a failed save keeps it"
        );
        let (f, _) = vfs.lookup(d, "f", 1).unwrap();
        assert_eq!(read_all(&vfs, f), b"ok new");
        assert!(vfs.failed_paths().is_empty());
        assert_eq!(vfs.lookup(d, "f~", 1).unwrap_err().errno(), libc::ENOENT);
    }

    #[test]
    fn sed_in_place_commits_by_rename_and_a_failure_keeps_the_object() {
        let (tree, vfs, _) = setup();
        let d = dir_ino(&vfs);
        let sed = |text: &[u8]| -> Result<()> {
            // GNU sed -i: create sedXXXXXX (0600), write, fchmod to the file's mode, close,
            // rename over the file.
            let (tmp, _, fh) = vfs.create(d, "sedAb12Cd", 0o600)?;
            vfs.write(fh, 0, text, false)?;
            vfs.setattr(tmp, Some(fh), None, None, Some(0o644))?;
            vfs.flush(fh)?;
            vfs.release(fh)?;
            vfs.rename(d, "sedAb12Cd", d, "f")
        };
        sed(b"ok edited").unwrap();
        assert_eq!(stored(&tree, "d/f").unwrap(), b"ok edited");
        assert_eq!(
            vfs.lookup(d, "sedAb12Cd", 1).unwrap_err().errno(),
            libc::ENOENT
        );
        assert_eq!(sed(b"bad").unwrap_err().errno(), libc::EINVAL);
        assert_eq!(stored(&tree, "d/f").unwrap(), b"ok edited");
        // The text shows at the file; removing it discards only the text.
        let (f, _) = vfs.lookup(d, "f", 1).unwrap();
        assert_eq!(read_all(&vfs, f), b"bad");
        vfs.unlink(d, "sedAb12Cd").unwrap();
        vfs.unlink(d, "f").unwrap();
        assert_eq!(stored(&tree, "d/f").unwrap(), b"ok edited");
        assert!(vfs.failed_paths().is_empty());
    }

    #[test]
    fn rsync_temporary_renamed_over_commits_with_its_mtime() {
        let (tree, vfs, _) = setup();
        let d = dir_ino(&vfs);
        let when = UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        let rsync = |text: &[u8]| -> Result<()> {
            // rsync: create .f.XXXXXX, write, close, set mode and mtime, rename over f.
            let (tmp, _, fh) = vfs.create(d, ".f.Xa3k2P", 0o600)?;
            vfs.write(fh, 0, text, false)?;
            vfs.flush(fh)?;
            vfs.release(fh)?;
            vfs.setattr(tmp, None, None, Some(when), Some(0o644))?;
            assert_eq!(vfs.getattr(tmp, None)?.mtime, when);
            vfs.rename(d, ".f.Xa3k2P", d, "f")
        };
        rsync(b"ok synced").unwrap();
        assert_eq!(stored(&tree, "d/f").unwrap(), b"ok synced");
        assert_eq!(lock(&tree.mtimes).unwrap()["d/f"], when);
        assert_eq!(rsync(b"bad").unwrap_err().errno(), libc::EINVAL);
        assert_eq!(stored(&tree, "d/f").unwrap(), b"ok synced");
    }

    #[test]
    fn cp_r_fills_a_new_folder_through_its_hidden_fixed_files() {
        let (tree, vfs, _) = setup();
        let d = dir_ino(&vfs);
        // cp -r src d/new: mkdir, then each file with O_CREAT|O_EXCL (a lookup first).
        let (new, _) = vfs.mkdir(d, "new", 7).unwrap();
        assert_eq!(
            vfs.lookup(new, "fixed", 7).unwrap_err().errno(),
            libc::ENOENT
        );
        assert!(
            vfs.lookup(new, "fixed", 8).is_ok(),
            "others see the folder as it is"
        );
        for (name, text) in [("fixed", &b"ok copied"[..]), ("extra", b"ok extra")] {
            let (_, _, fh) = vfs.create(new, name, 0o644).unwrap();
            vfs.write(fh, 0, text, false).unwrap();
            vfs.flush(fh).unwrap();
            vfs.release(fh).unwrap();
        }
        assert_eq!(stored(&tree, "d/new/fixed").unwrap(), b"ok copied");
        assert_eq!(stored(&tree, "d/new/extra").unwrap(), b"ok extra");
        assert!(vfs.lookup(new, "fixed", 7).is_ok());
        // A bad copied file fails its close and leaves nothing stored.
        let (_, _, fh) = vfs.create(new, "broken", 0o644).unwrap();
        vfs.write(fh, 0, b"bad", false).unwrap();
        assert_eq!(vfs.flush(fh).unwrap_err().errno(), libc::EINVAL);
        vfs.release(fh).unwrap();
        assert_eq!(stored(&tree, "d/new/broken"), None);
        assert_eq!(vfs.failed_paths(), vec!["d/new/broken".to_string()]);
    }

    #[test]
    fn large_unsaved_text_leaves_memory_and_is_saved_for_recovery() {
        let state = tempfile::tempdir().unwrap();
        let tree = Arc::new(Files::default());
        lock(&tree.files)
            .unwrap()
            .insert("d/f".into(), b"ok old".to_vec());
        let held = state.path().join("held");
        let vfs = Vfs::new(tree.clone(), Some(held.clone()));
        let d = dir_ino(&vfs);
        let (f, _) = vfs.lookup(d, "f", 1).unwrap();
        let big = vec![b'x'; 1 << 20];
        let fh = vfs.open(f, TRUNC).unwrap();
        vfs.write(fh, 0, &big, false).unwrap();
        vfs.release(fh).unwrap_err();
        assert_eq!(
            std::fs::read_dir(&held).unwrap().count(),
            1,
            "the text is in a file"
        );
        assert!(matches!(
            lock(&vfs.overlay).unwrap()[&["d".to_string(), "f".to_string()][..]].text,
            Text::File { .. }
        ));
        assert_eq!(read_all(&vfs, f), big, "and still readable");
        // A scratch file is not saved; the unsaved text is, at the same path.
        let (_, _, fh) = vfs.create(d, "f.swp", 0o600).unwrap();
        vfs.write(fh, 0, b"swap", false).unwrap();
        vfs.release(fh).unwrap();
        let recovery = state.path().join("unsaved");
        let saved = vfs.save_unsaved(&recovery);
        assert_eq!(saved.len(), 1);
        assert_eq!(saved[0].path, "d/f");
        let file = saved[0].saved.as_ref().unwrap();
        assert_eq!(*file, recovery.join("d/f"));
        assert_eq!(std::fs::read(file).unwrap(), big);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(!held.exists(), "the spill folder is gone");
        assert_eq!(stored(&tree, "d/f").unwrap(), b"ok old");
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
        let (_, _, fh) = vfs.create(vfs_dir, "f", 0o644).unwrap();
        vfs.write(fh, 0, b"ok copy", false).unwrap();
        vfs.release(fh).unwrap();
        assert!(vfs.lookup(vfs_dir, "f", 7).is_ok());
    }

    #[test]
    fn names_longer_than_name_max_are_enametoolong() {
        let (_tree, vfs, _) = setup();
        let d = vfs.lookup(ROOT, "d", 1).unwrap().0;
        let long = "x".repeat(NAME_MAX + 1);
        let errno = |r: Result<()>| r.unwrap_err().errno();
        assert_eq!(
            errno(vfs.lookup(d, &long, 1).map(|_| ())),
            libc::ENAMETOOLONG
        );
        assert_eq!(
            errno(vfs.create(d, &long, 0o644).map(|_| ())),
            libc::ENAMETOOLONG
        );
        assert_eq!(
            errno(vfs.mkdir(d, &long, 1).map(|_| ())),
            libc::ENAMETOOLONG
        );
        assert_eq!(errno(vfs.rename(d, "f", d, &long)), libc::ENAMETOOLONG);
        let max = "x".repeat(NAME_MAX);
        assert_eq!(
            errno(vfs.lookup(d, &max, 1).map(|_| ())),
            libc::ENOENT,
            "a name of NAME_MAX bytes is a name"
        );
    }

    #[test]
    fn a_truncation_racing_the_last_release_is_committed() {
        let (tree, vfs, _) = setup();
        let d = vfs.lookup(ROOT, "d", 1).unwrap().0;
        // pjdfstest: a file is written and closed, then truncated by path while the kernel's
        // release of the writing handle is still on its way.
        let (ino, _, fh) = vfs.create(d, "g", 0o644).unwrap();
        vfs.write(fh, 0, b"ok", false).unwrap();
        vfs.flush(fh).unwrap();
        vfs.race_in_release.set(move |vfs: &Vfs| {
            vfs.setattr(ino, None, Some(100), None, None).unwrap();
        });
        vfs.release(fh).unwrap();
        let stored = lock(&tree.files).unwrap().get("d/g").cloned().unwrap();
        assert_eq!(stored.len(), 100, "the truncation is committed");
        assert!(stored.starts_with(b"ok"));
        assert_eq!(vfs.getattr(ino, None).unwrap().size, 100);
    }

    #[test]
    fn links_show_as_links_and_act_on_the_link_itself() {
        let (tree, vfs, f) = setup();
        let d = dir_ino(&vfs);
        let target = b"../outside/victim".to_vec();
        lock(&tree.links)
            .unwrap()
            .insert("d/l".into(), target.clone());
        let (l, st) = vfs.lookup(d, "l", 1).unwrap();
        assert_eq!(st.kind, Kind::Symlink);
        assert_eq!(st.size, target.len() as u64);
        assert_eq!(st.perm, 0o777);
        assert_eq!(vfs.getattr(l, None).unwrap().kind, Kind::Symlink);
        assert_eq!(vfs.readlink(l).unwrap(), target);
        assert_eq!(vfs.readlink(f).unwrap_err().errno(), libc::EINVAL);
        for mode in [OpenMode::default(), RW, TRUNC] {
            assert_eq!(vfs.open(l, mode).unwrap_err().errno(), libc::ELOOP);
        }
        // A new link, not over an existing name.
        let (n, st) = vfs.symlink(d, "n", b"f", 1).unwrap();
        assert_eq!(st.kind, Kind::Symlink);
        assert_eq!(vfs.readlink(n).unwrap(), b"f");
        assert_eq!(
            vfs.symlink(d, "f", b"x", 1).unwrap_err().errno(),
            libc::EEXIST
        );
        assert_eq!(stored(&tree, "d/f").unwrap(), b"ok old");
        // rename moves the link, rm removes the link; the file it names stays.
        vfs.rename(d, "n", d, "m").unwrap();
        assert!(vfs.lookup(d, "n", 1).is_err());
        let (m, _) = vfs.lookup(d, "m", 1).unwrap();
        assert_eq!(vfs.readlink(m).unwrap(), b"f");
        vfs.unlink(d, "m").unwrap();
        assert!(vfs.lookup(d, "m", 1).is_err());
        assert_eq!(stored(&tree, "d/f").unwrap(), b"ok old");
        // A scratch file renamed over a link replaces the link, not what it points to.
        let (_, _, fh) = vfs.create(d, "l.swp", 0o644).unwrap();
        vfs.write(fh, 0, b"ok mine", false).unwrap();
        vfs.release(fh).unwrap();
        vfs.rename(d, "l.swp", d, "l").unwrap();
        assert!(lock(&tree.links).unwrap().is_empty());
        assert_eq!(stored(&tree, "d/l").unwrap(), b"ok mine");
        // Text the tree refuses leaves the link where it was.
        lock(&tree.links)
            .unwrap()
            .insert("d/k".into(), b"target".to_vec());
        let (_, _, fh) = vfs.create(d, "k.swp", 0o644).unwrap();
        vfs.write(fh, 0, b"bad", false).unwrap();
        vfs.release(fh).unwrap();
        assert_eq!(
            vfs.rename(d, "k.swp", d, "k").unwrap_err().errno(),
            libc::EINVAL
        );
        assert_eq!(lock(&tree.links).unwrap().get("d/k").unwrap(), b"target");
    }

    #[test]
    fn a_reader_opened_before_a_writer_reads_what_it_wrote() {
        let (_tree, vfs, f) = setup();
        let rd = vfs.open(f, OpenMode::default()).unwrap();
        assert_eq!(vfs.read(rd, 0, 100).unwrap(), b"ok old");
        let wr = vfs.open(f, TRUNC).unwrap();
        vfs.write(wr, 0, b"ok new text", false).unwrap();
        assert_eq!(vfs.read(rd, 0, 100).unwrap(), b"ok new text");
        assert_eq!(vfs.getattr(f, Some(rd)).unwrap().size, 11);
        vfs.release(wr).unwrap();
        assert_eq!(vfs.read(rd, 0, 100).unwrap(), b"ok new text");
        vfs.release(rd).unwrap();
        let again = vfs.open(f, OpenMode::default()).unwrap();
        assert_eq!(vfs.read(again, 0, 100).unwrap(), b"ok new text");
        vfs.release(again).unwrap();
    }
}
