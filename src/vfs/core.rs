//! The filesystem core: inodes, open files, write buffers, held text and the close-time
//! commit, over any [`Tree`]. FUSE-agnostic: every operation returns a [`Result`], so the
//! semantics are tested without a kernel in the loop.
//!
//! Write semantics (docs/semantics.md "When data is committed"): what an application writes goes into the buffer of the
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
//! Scratch files still there at unmount are stored under their own names where the tree
//! can hold them ([`Vfs::store_scratch`]); text no commit took is saved for recovery.
//!
//! Links a tree shows (a world folder's) are served as links: `readlink` and `symlink` go to
//! the tree, and opening one fails with `ELOOP`, since the kernel resolves links before it
//! opens and the core never reads through one.
//!
//! This file holds the [`Vfs`] itself and the operations on names (lookup, attributes,
//! links, folders, removal); the rest is split by concern: open files and handles in
//! [`handles`](crate::vfs::handles), held text in [`overlay`](crate::vfs::overlay),
//! listings in [`readdir`](crate::vfs::readdir), and [`rename`](crate::vfs::rename).

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::SystemTime;

use crate::error::{lock, Error, Result};
use crate::vfs::access::Access;
use crate::vfs::buffer::OneLarge;
use crate::vfs::descriptors::Handle;
use crate::vfs::fresh::FreshDirs;
use crate::vfs::held::Spill;
use crate::vfs::inodes::Inodes;
use crate::vfs::kernel::{KernelCache, Listing, RecheckLog};
use crate::vfs::naming::{
    check_length, check_name, check_size, child, display_path, permission_bits, DEEPEST,
};
use crate::vfs::paths::{Held, HeldAt, OpenFile, Paths};
use crate::vfs::removals::Removals;
use crate::vfs::report::Report;
use crate::vfs::tree::{Kind, Owner, Removal, Stat, Tree};

/// The filesystem core over one tree.
///
/// Locks are taken in this order: a handle, the open-file table, an open file, the held
/// text (the last three are [`Paths`]', whose methods take and release them, see there;
/// the handle table is only held alone; the inode table is taken last, under an open file
/// at a commit, and no lock is taken while it is held).
pub struct Vfs {
    pub(super) tree: Arc<dyn Tree>,
    pub(super) inodes: RwLock<Inodes>,
    pub(super) handles: Mutex<HashMap<u64, Arc<Mutex<Handle>>>>,
    pub(super) next_fh: AtomicU64,
    /// What each path holds: the file being written there, held text, a file moved aside
    /// (the one owner of that state, see [`Paths`]).
    pub(super) paths: Paths,
    pub(super) spill: Spill,
    /// Checks and commits of large texts, one at a time.
    pub(super) one_large: OneLarge,
    pub(super) fresh: FreshDirs,
    /// Removals of stored files held back for a moment (see [`crate::vfs::removals`]).
    pub(super) removals: Removals,
    /// The owners and modes paths show ([`crate::vfs::access`]).
    access: Access,
    /// The kernel's caches, once the mount lets it keep what it is served (see
    /// [`crate::vfs::kernel_cache`]).
    pub(super) kernel: OnceLock<Box<dyn KernelCache>>,
    /// Paths the core changed since the kernel was last told (see [`Vfs::settle`]).
    pub(super) changes: Mutex<Vec<Vec<String>>>,
    /// Read handles on tree files (by handle), with the inode and the stat of their text.
    pub(super) readers: Mutex<HashMap<u64, (u64, Stat)>>,
    /// Inodes whose pages a closed read handle may have filled with old text.
    pub(super) stale_pages: Mutex<Vec<u64>>,
    /// Folders being listed (see [`Vfs::listing_ended`]).
    pub(super) listings: Mutex<HashMap<u64, Listing>>,
    /// Names the kernel keeps that no longer exist, for the watcher to drop.
    pub(super) stale_names: Mutex<Vec<(u64, Arc<str>)>>,
    /// Re-checks of what the kernel keeps started so far (see [`Vfs::kernel_keeps`]).
    pub(super) rechecks: AtomicU64,
    /// Where the latest re-checks looked, for [`Vfs::kernel_keeps`].
    pub(super) recheck_log: Mutex<RecheckLog>,
    /// What [`Tree::underneath`] said when the watcher last looked.
    pub(super) underneath_seen: AtomicU64,
    /// Why held texts' commits failed and the latest errors, for `worldfs status`.
    pub(super) report: Report,
    /// Tests: runs inside `release` between its commit and its leaving the open files, the
    /// window another thread's truncation by path can hit.
    #[cfg(test)]
    pub(super) race_in_release: crate::vfs::race_hook::RaceHook<Vfs>,
    /// Tests: runs inside the commit of scratch text, with the file locked and before the
    /// text is held, the window another thread's unlink of the name can hit.
    #[cfg(test)]
    pub(super) race_in_hold: crate::vfs::race_hook::RaceHook<Vfs>,
}

impl Vfs {
    /// A core over `tree`; held text larger than a few pages goes to files in `held_dir`
    /// (the state folder) when given.
    pub fn new(tree: Arc<dyn Tree>, held_dir: Option<PathBuf>) -> Vfs {
        let numbering = tree.numbering();
        Vfs {
            tree,
            inodes: RwLock::new(Inodes::new(numbering)),
            handles: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            paths: Paths::default(),
            spill: Spill::new(held_dir),
            one_large: OneLarge::default(),
            fresh: FreshDirs::default(),
            removals: Removals::default(),
            access: Access::default(),
            kernel: OnceLock::new(),
            changes: Mutex::new(Vec::new()),
            readers: Mutex::new(HashMap::new()),
            stale_pages: Mutex::new(Vec::new()),
            listings: Mutex::new(HashMap::new()),
            stale_names: Mutex::new(Vec::new()),
            rechecks: AtomicU64::new(0),
            recheck_log: Mutex::new(RecheckLog::default()),
            underneath_seen: AtomicU64::new(0),
            report: Report::default(),
            #[cfg(test)]
            race_in_release: Default::default(),
            #[cfg(test)]
            race_in_hold: Default::default(),
        }
    }

    /// Refuses a change while the tree is read-only (`EROFS`, with the tree's reason): the one
    /// place a read-only mount is enforced, before every operation that changes anything.
    pub(super) fn writable(&self) -> Result<()> {
        if self.tree.read_only() {
            return Err(self.tree.read_only_error());
        }
        Ok(())
    }

    /// Whether a file may be created or written at `path` (the mount is writable and the
    /// tree takes files there).
    pub(super) fn writable_at(&self, path: &[String]) -> Result<()> {
        self.writable()?;
        self.takes_files_at(path)
    }

    /// Whether the tree takes files at `path` at all (not under `index/`), whether or not
    /// the mount is writable now: held text may still move after the tree turned read-only.
    pub(super) fn takes_files_at(&self, path: &[String]) -> Result<()> {
        self.tree
            .writable_at(path)
            .map_err(|e| e.context(display_path(path)))
    }

    /// The tree under this core.
    pub fn tree(&self) -> &Arc<dyn Tree> {
        &self.tree
    }

    /// Tells the core how to find whether a process is a fork of another running the same
    /// program: what a process's new folder hides from it, it hides from those (`vfs::fresh`).
    pub fn set_fork_of(&self, fork_of: crate::vfs::fresh::ForkOf) {
        self.fresh.set_fork_of(fork_of);
    }

    /// Why held texts' commits failed and the latest errors (see [`Report`]).
    pub fn report(&self) -> &Report {
        &self.report
    }

    /// The path of `ino`; `ENAMETOOLONG` for an entry a listing named below [`DEEPEST`] (or
    /// a folder moved there with what the kernel knows in it).
    pub(super) fn path_of(&self, ino: u64) -> Result<Vec<String>> {
        let inodes = crate::error::read(&self.inodes, "inode table")?;
        let path = match inodes.path(ino) {
            Some(path) => path,
            None if inodes.knows(ino) => {
                return Err(Error::new(
                    libc::ENAMETOOLONG,
                    format!("inode {ino}: deeper than the {DEEPEST} levels the mount shows (moved there with its folder)"),
                ))
            }
            None => return Err(Error::new(libc::ESTALE, format!("unknown inode {ino}"))),
        };
        drop(inodes);
        match path.split_last() {
            Some((name, dir)) if path.len() > DEEPEST => child(dir, name),
            _ => Ok(path),
        }
    }

    pub(super) fn stat_path(&self, path: &[String]) -> Result<Stat> {
        self.stat_held_or_stored(path)
            .map(|stat| self.shown(path, stat))
    }

    /// `stat` of `path` with the owner and permissions it shows ([`crate::vfs::access`]).
    pub(super) fn shown(&self, path: &[String], stat: Stat) -> Stat {
        self.access.shown(&*self.tree, path, stat)
    }

    fn stat_held_or_stored(&self, path: &[String]) -> Result<Stat> {
        if let Some(f) = self.paths.open_file(path)? {
            let f = lock(&f)?;
            if f.shared() {
                return Ok(f.stat());
            }
        }
        match self.paths.held_at(path)? {
            HeldAt::Text(stat) => return Ok(stat),
            HeldAt::Aside => {
                return Err(Error::not_found(format!(
                    "{}: moved aside (its text is in the scratch copy)",
                    display_path(path)
                )))
            }
            HeldAt::Nothing => {}
        }
        if self.removals.holds(path)? {
            return Err(Error::not_found(format!(
                "{}: removed (the store drops it in a moment)",
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
        let path = child(&dir, name)?;
        if self.fresh.hidden(&dir, name, pid) {
            return Err(Error::not_found(format!(
                "{}: not written yet into the folder this process made",
                display_path(&path)
            )));
        }
        let stat = self.stat_path(&path)?;
        let ino = crate::error::write(&self.inodes, "inode table")?.lookup(parent, name, stat.file);
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
            let (path, stat, read_from) = (f.path.clone(), f.stat(), f.file);
            let own = f.detached || f.shared();
            drop(f);
            // A real folder's file that another program replaced on disk since this handle
            // read it shows what its handles read, as on disk; its name goes to a new inode
            // (see `Inodes::lookup`) so that the kernel keeps the two apart.
            // Only another file seen at the path counts: not a name moved, hidden or gone.
            let replaced = read_from.is_some()
                && !own
                && matches!(self.stat_path(&path), Ok(now) if now.file.is_some() && now.file != read_from);
            if replaced {
                crate::error::write(&self.inodes, "inode table")?.unname(ino);
            }
            let named = crate::error::read(&self.inodes, "inode table")?.named(ino);
            if own || !named {
                return Ok(self.shown(&path, stat));
            }
        }
        let path = self.path_of(ino)?;
        self.stat_path(&path)
    }

    /// [`Vfs::setattr`] for the adapter: `reply` answers the kernel with its result, and a
    /// truncation is told to the kernel just after that (what else it changed: the file's
    /// folder, the other views of its object), as an operation's changes are before its
    /// reply (see [`Vfs::setattr`] for why not before).
    pub fn setattr_replying<R>(
        &self,
        ino: u64,
        fh: Option<u64>,
        size: Option<u64>,
        mtime: Option<SystemTime>,
        mode: Option<u32>,
        reply: impl FnOnce(Result<Stat>) -> R,
    ) -> R {
        let after_reply = size.is_some().then(|| self.settling());
        let replied = reply(self.setattr(ino, fh, size, mtime, mode));
        drop(after_reply);
        replied
    }

    /// Truncates `ino` (through handle `fh` when given), sets its mtime, or sets its mode (of
    /// a file the core holds, else through [`Tree::set_perm`]).
    pub fn setattr(
        &self,
        ino: u64,
        fh: Option<u64>,
        size: Option<u64>,
        mtime: Option<SystemTime>,
        mode: Option<u32>,
    ) -> Result<Stat> {
        // A truncation is told just after this reply ([`Vfs::setattr_replying`]), not
        // before it: while the kernel waits for a truncating SETATTR it holds the file's
        // write-back, and dropping the file's pages then (dirty ones of a shared mapping)
        // would wait for it for ever. The reply carries the new size, and the kernel drops
        // the pages past it itself.
        let _settled = size.is_none().then(|| self.settling());
        let path = self.path_of(ino)?;
        // Held text is the core's, not the tree's: it may change after the tree turned
        // read-only while mounted (see `unlink`).
        let held = self.paths.held_kind(&path)?.is_some();
        if (size.is_some() || mtime.is_some() || mode.is_some()) && !held {
            self.writable()?;
        }
        if size.is_some() {
            self.takes_files_at(&path)?;
        }
        let file = match fh {
            Some(fh) => Some(lock(&*self.handle(fh)?)?.file.clone()),
            None => self.paths.open_file(&path)?,
        };
        if let Some(size) = size {
            self.truncate(&path, fh, file.as_ref(), size)?;
        }
        // A time set while the file holds unsaved writes is the file's once they are
        // committed (`cp -a` sets it before it closes).
        let mut after_commit = false;
        if let Some(f) = &file {
            let mut f = lock(f)?;
            if let Some(m) = mtime {
                f.mtime = m;
                if f.dirty && !f.detached {
                    f.set_mtime = Some(m);
                    after_commit = true;
                }
            }
            if let Some(mode) = mode {
                f.perm = permission_bits(mode);
            }
        }
        let held = self
            .paths
            .with_held(&path, |o| {
                if let Some(m) = mtime {
                    o.mtime = m;
                    o.set_mtime = Some(m);
                }
                if let Some(mode) = mode {
                    o.perm = permission_bits(mode);
                }
            })?
            .is_some();
        if let (Some(m), false, false) = (mtime, held, after_commit) {
            self.tree
                .set_mtime(&path, m)
                .map_err(|e| e.context(display_path(&path)))?;
        }
        if let (Some(mode), false) = (mode, held) {
            self.tree
                .set_perm(&path, permission_bits(mode))
                .map_err(|e| e.context(display_path(&path)))?;
        }
        // The time or mode of held text (a copier's temporary file, before it is renamed
        // into the tree) changes nothing the tree shows: the reply tells the kernel all.
        if size.is_some() || ((mtime.is_some() || mode.is_some()) && !held) {
            self.note_change(&path);
        }
        self.stat_path(&path)
    }

    /// Truncates `path` to `size`: the buffer of the file being written (through handle `fh`,
    /// or shared by its writers), else the closed file.
    fn truncate(
        &self,
        path: &[String],
        fh: Option<u64>,
        file: Option<&Arc<Mutex<OpenFile>>>,
        size: u64,
    ) -> Result<()> {
        let len = check_size(size)?;
        if let Some(fh) = fh {
            lock(&*self.handle(fh)?)?.state.wrote();
        }
        if let Some(f) = file {
            let mut f = lock(f)?;
            if f.shared() || fh.is_some() {
                f.data.resize(&self.spill, len)?;
                f.cut = false;
                f.dirty = true;
                f.mtime = SystemTime::now();
                return Ok(());
            }
        }
        self.truncate_closed(path, len)
    }

    /// Truncates a file no handle is writing: held text, or a tree file (committed now).
    pub(super) fn truncate_closed(&self, path: &[String], len: usize) -> Result<()> {
        let truncated = self.paths.with_held(path, |o| {
            let mut data = o.text.bytes()?;
            data.resize(len, 0);
            o.text = self.spill.hold(path, data);
            o.mtime = SystemTime::now();
            Ok::<(), Error>(())
        })?;
        if let Some(done) = truncated {
            return done;
        }
        let stat = self.stat_path(path)?;
        let _one = self
            .one_large
            .enter(usize::try_from(stat.size).unwrap_or(usize::MAX))?;
        let mut data = self
            .tree
            .read(path)
            .map_err(|e| e.context(display_path(path)))?
            .to_vec();
        data.resize(len, 0);
        self.commit(path, data, stat.perm, stat.owner, None)
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

    /// Gives `ino` the owner `owner`: what another user made through the mount (a file,
    /// folder or link), or a `chown`. A real folder's file gets that owner on disk, at once
    /// or when its text is committed, so that what another user makes through an
    /// `--allow-other` mount is theirs and `cp -a` as root keeps owners, as on disk; the
    /// objects of a store keep the store's owner ([`Tree::set_owner`]).
    /// Returns its attributes then.
    pub fn set_owner(&self, ino: u64, owner: Owner) -> Result<Stat> {
        let _settled = self.settling();
        let path = self.path_of(ino)?;
        if let Some(f) = self.paths.open_file(&path)? {
            lock(&f)?.owner = Some(owner);
        }
        let held = self
            .paths
            .with_held(&path, |o| o.owner = Some(owner))?
            .is_some();
        if !held {
            self.tree
                .set_owner(&path, owner)
                .map_err(|e| e.context(display_path(&path)))?;
        }
        self.note_change(&path);
        self.stat_path(&path)
    }

    /// Creates symbolic link `name` in `parent` pointing to `target` (`ln -s`), for process
    /// `pid`.
    pub fn symlink(&self, parent: u64, name: &str, target: &[u8], pid: u32) -> Result<(u64, Stat)> {
        let _settled = self.settling();
        check_name(name)?;
        let dir = self.path_of(parent)?;
        let path = child(&dir, name)?;
        self.writable_at(&path)?;
        self.remove_below(&path)?;
        if self.stat_path(&path).is_ok() {
            return Err(Error::exists(format!("{} exists", display_path(&path))));
        }
        self.tree
            .symlink(&path, target)
            .map_err(|e| e.context(display_path(&path)))?;
        self.note_change(&path);
        self.fresh.show(&dir, name);
        self.lookup(parent, name, pid)
    }

    /// Entries the kernel should drop so that at most about `budget` inodes stay held, as
    /// `(inode, folder, name)` (see [`Inodes::over_budget`], which `sent_before` is for).
    pub fn over_budget(
        &self,
        budget: usize,
        sent_before: &HashSet<u64>,
    ) -> Vec<(u64, u64, String)> {
        match self.inodes.read() {
            Ok(t) => t
                .over_budget(budget, sent_before)
                .into_iter()
                .map(|(i, p, n)| (i, p, n.to_string()))
                .collect(),
            Err(_) => Vec::new(),
        }
    }

    /// What the kernel should drop so that at most about `most` numbered folders have their
    /// kept state followed (see [`Inodes::shed_units`]).
    pub fn shed_units(&self, most: usize) -> crate::vfs::inodes::Shed {
        match self.inodes.write() {
            Ok(mut t) => t.shed_units(most),
            Err(_) => Default::default(),
        }
    }

    /// Creates directory `name` in `parent` for process `pid`.
    pub fn mkdir(&self, parent: u64, name: &str, pid: u32) -> Result<(u64, Stat)> {
        let _settled = self.settling();
        check_name(name)?;
        let dir = self.path_of(parent)?;
        let path = child(&dir, name)?;
        if self.removals.holds(&path)? {
            self.writable_at(&path)?;
            self.remove_below(&path)?;
        }
        let existing = self.stat_path(&path).ok();
        let hidden = self.fresh.hidden(&dir, name, pid);
        match existing {
            // A fixed folder of a folder this process just made (`cp -r` filling a new block).
            Some(s) if hidden && s.kind == Kind::Dir => {}
            Some(_) => return Err(Error::exists(format!("{} exists", display_path(&path)))),
            None => {
                self.writable_at(&path)?;
                self.tree
                    .mkdir(&path)
                    .map_err(|e| e.context(display_path(&path)))?;
                self.note_change(&path);
            }
        }
        self.fresh.show(&dir, name);
        self.fresh.made(&path, pid);
        self.lookup(parent, name, pid)
    }

    /// `ENOTEMPTY` when the core holds a file below folder `path` (text a commit did not
    /// take, a scratch file): `rmdir` and a folder renamed over it would leave that text
    /// in a folder that is gone or another one.
    pub(super) fn holds_nothing_below(&self, path: &[String]) -> Result<()> {
        if self.paths.holds_below(path)? {
            return Err(Error::not_empty(format!(
                "{} holds unsaved or scratch files",
                display_path(path)
            )));
        }
        Ok(())
    }

    /// The names of folder `dir`'s tree files moved aside or removed a moment ago (hidden
    /// from every listing of it, and making its listing depend on who asks).
    pub(super) fn aside_in(&self, dir: &[String]) -> Result<Vec<String>> {
        let mut names = self.paths.aside_in(dir)?;
        names.extend(self.removals.names_in(dir)?);
        Ok(names)
    }

    /// Commits the held-back removals at or below `path` now (something is about to happen
    /// there that must see them done); the first failure is the error.
    pub(super) fn remove_below(&self, path: &[String]) -> Result<()> {
        let _committing = self.removals.committing()?;
        let due = self.removals.below(path)?;
        match self.remove_now(due).into_iter().next() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Commits removals (each then leaves [`Removals`]; one that fails stays held and is
    /// tried again, and is logged); returns the failures. A file the tree keeps showing
    /// after its removal (a block's `light.txt`) is hidden from the process that removed it
    /// until it writes it (see [`crate::vfs::fresh`]).
    pub(super) fn remove_now(&self, due: Vec<(Vec<String>, u32)>) -> Vec<Error> {
        let mut failed = Vec::new();
        for (path, pid) in due {
            let removed = self.tree.remove(&path);
            if removed.is_ok() && self.tree.stat(&path).is_ok() {
                self.fresh.unlinked(&path, pid);
            }
            let outcome = match removed {
                Ok(()) => Ok(()),
                // Gone already (another program removed it): nothing left to do.
                Err(e) if e.errno() == libc::ENOENT => Ok(()),
                Err(e) => {
                    let e = e.context(display_path(&path));
                    log::error!("removal failed, tried again in a moment: {e}");
                    let reason = e.to_string();
                    failed.push(e);
                    Err(reason)
                }
            };
            if let Err(e) = self.removals.done(&path, outcome) {
                failed.push(e);
            }
            self.note_change(&path);
        }
        failed
    }

    /// Commits the removals held back for at least `age` (the watcher's, and all of them
    /// at the unmount); returns how many were due and how many of those failed.
    /// Not settled here: the watcher settles when any was due, and `sync` settles itself
    /// (a settle every watch would take the queue of changes other operations noted and
    /// tell the kernel after they replied).
    pub fn remove_held_back(&self, age: std::time::Duration) -> (usize, usize) {
        let Ok(_committing) = self.removals.committing() else {
            return (0, 1);
        };
        match self.removals.older(age) {
            Ok(due) => (due.len(), self.remove_now(due).len()),
            Err(_) => (0, 1),
        }
    }

    /// The tree file `copy` holds the text of, when `copy` is a copy moved aside from it.
    pub(super) fn aside_source(&self, copy: &[String]) -> Result<Option<Vec<String>>> {
        self.paths.aside_source(copy)
    }

    /// Removes file `name` from `parent`, for no process in particular (see
    /// [`Vfs::unlink_as`]).
    pub fn unlink(&self, parent: u64, name: &str) -> Result<()> {
        self.unlink_as(parent, name, 0)
    }

    /// Removes file `name` from `parent` for process `pid`. Pending text (a failed commit's)
    /// is discarded and the stored object shows again; the next removal deletes the object.
    /// The removal of a stored file is checked now and committed a moment later, unless the
    /// name is created again first (see [`crate::vfs::removals`]).
    pub fn unlink_as(&self, parent: u64, name: &str, pid: u32) -> Result<()> {
        let _settled = self.settling();
        let path = child(&self.path_of(parent)?, name)?;
        // Discarding held text changes nothing stored, so a tree that turned read-only while
        // mounted (a damaged TVDA disk) still lets it go; removing what the tree stores (or
        // the only copy of a file moved aside) is a change.
        let held = self.paths.held_kind(&path)?;
        let moved_aside = || Ok::<_, Error>(self.aside_source(&path)?.is_some());
        match held {
            Some(h) if !h.is_scratch() => {}
            Some(_) if !moved_aside()? => {}
            _ => self.writable()?,
        }
        // A file still open under the name is cut off before its held text goes: a release
        // committing scratch text meanwhile (`close(fd); unlink(name)`: the kernel's release
        // comes after the close returns) either holds it first, and it goes here, or finds
        // the file cut off and holds nothing.
        if held.is_some() {
            self.paths.detach(&path)?;
        }
        match self.paths.discard(&path)? {
            Some((o, source)) if o.held.is_scratch() => {
                // The only copy of a file moved aside and never replaced: deleting it
                // deletes the object (`mv a a~ && rm a~` removes a).
                if let Some(src) = source {
                    self.tree
                        .remove(&src)
                        .map_err(|e| e.context(display_path(&src)))?;
                }
            }
            // Failed text discarded: the stored object shows again, but not to the process
            // that removed the text until it writes the name (a second `install` or `cp
            // --remove-destination` creates it with `O_EXCL`).
            // A new file that took the place of a removal, removed before it committed: the
            // removal goes on (`rm f; exec 3>f; rm f` removes f).
            Some((o, _)) if o.held == Held::New && self.removals.replaced_done(&path)? => {
                self.removals.add(&path, pid)?;
            }
            Some(_) => {
                self.removals.replaced_done(&path)?;
                if self.tree.stat(&path).is_ok() {
                    self.fresh.unlinked(&path, pid);
                }
            }
            None => {
                if self.removals.holds(&path)? {
                    return Err(Error::not_found(format!(
                        "{}: removed already",
                        display_path(&path)
                    )));
                }
                let removal = self
                    .tree
                    .check_remove(&path)
                    .map_err(|e| e.context(display_path(&path)))?;
                match removal {
                    Removal::Checked => self.removals.add(&path, pid)?,
                    Removal::AtOnce => {
                        if let Some(e) = self.remove_now(vec![(path.clone(), pid)]).pop() {
                            return Err(e);
                        }
                    }
                }
            }
        }
        self.note_change(&path);
        self.paths.detach(&path)?;
        if let Ok(mut t) = self.inodes.write() {
            t.unlink(parent, name);
        }
        Ok(())
    }

    /// Removes directory `name` from `parent` (and the object it shows).
    pub fn rmdir(&self, parent: u64, name: &str) -> Result<()> {
        let _settled = self.settling();
        self.writable()?;
        let path = child(&self.path_of(parent)?, name)?;
        self.remove_below(&path)?;
        self.holds_nothing_below(&path)?;
        self.tree
            .rmdir(&path)
            .map_err(|e| e.context(display_path(&path)))?;
        self.note_change(&path);
        self.paths.detach_below(&path)?;
        self.fresh.removed(&path);
        if let Ok(mut t) = self.inodes.write() {
            t.unlink(parent, name);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::naming::NAME_MAX;
    use crate::vfs::paths::OpenMode;
    use crate::vfs::test_tree::*;

    /// `install`, `mv` from another file system, `cp --remove-destination`: unlink, then
    /// create the name again. The stored file is replaced only by a new text that commits;
    /// one that fails leaves it stored.
    #[test]
    fn a_file_removed_and_created_again_is_replaced_only_by_a_text_that_commits() {
        let (tree, vfs, _) = setup();
        let d = dir_ino(&vfs);
        let replace = |text: &[u8]| -> Result<()> {
            vfs.unlink_as(d, "f", 7)?;
            let (_, _, fh) = vfs.create(d, "f", 0o644)?;
            vfs.write(fh, 0, text, false)?;
            vfs.release(fh)
        };
        assert_eq!(replace(b"bad first").unwrap_err().errno(), libc::EINVAL);
        // A second try discards the failed text and creates the name again: the stored
        // object that shows again is hidden from it, so its create is not EEXIST.
        assert_eq!(replace(b"bad").unwrap_err().errno(), libc::EINVAL);
        vfs.remove_held_back(std::time::Duration::ZERO);
        assert_eq!(stored(&tree, "d/f").unwrap(), b"ok old", "kept stored");
        let (f, _) = vfs.lookup(d, "f", 1).unwrap();
        assert_eq!(
            read_all(&vfs, f),
            b"bad",
            "the failed text shows, as after any failed save"
        );
        vfs.unlink(d, "f").unwrap();
        let (f, _) = vfs.lookup(d, "f", 1).unwrap();
        assert_eq!(read_all(&vfs, f), b"ok old");
        replace(b"ok new").unwrap();
        vfs.remove_held_back(std::time::Duration::ZERO);
        assert_eq!(stored(&tree, "d/f").unwrap(), b"ok new");
    }

    /// A removal hides the name from everyone at once and reaches the store a moment later,
    /// or at once when a `rmdir`, a rename or the unmount needs it.
    #[test]
    fn a_removal_hides_the_file_at_once_and_reaches_the_store_when_due() {
        let (tree, vfs, _) = setup();
        let d = dir_ino(&vfs);
        vfs.unlink_as(d, "f", 7).unwrap();
        assert_eq!(vfs.lookup(d, "f", 8).unwrap_err().errno(), libc::ENOENT);
        let mut names = Vec::new();
        vfs.readdir(d, 0, false, 8, &mut |e| {
            names.push(e.name.to_string());
            true
        })
        .unwrap();
        assert!(!names.contains(&"f".to_string()), "{names:?}");
        assert_eq!(
            vfs.remove_held_back(std::time::Duration::from_secs(60)),
            (0, 0)
        );
        assert_eq!(stored(&tree, "d/f").unwrap(), b"ok old", "not yet");
        assert_eq!(vfs.commit_all(), 0);
        assert_eq!(stored(&tree, "d/f"), None, "the unmount commits it");
        store(&tree, "d/g", b"ok g");
        vfs.unlink(d, "g").unwrap();
        vfs.rmdir(ROOT, "d").unwrap();
        assert_eq!(
            stored(&tree, "d/g"),
            None,
            "rmdir commits what was removed below"
        );
        // A removal the tree refuses fails at the unlink, not later.
        assert_eq!(vfs.unlink(ROOT, "d").unwrap_err().errno(), libc::EISDIR);
    }

    /// The reference model's shrunk findings (`vfs::reftest`): a name removed a moment ago
    /// is gone for a second `rm` and for `mv`, and a failed `mv` onto it (its source not
    /// there) commits nothing early.
    #[test]
    fn a_name_removed_a_moment_ago_is_gone_for_rm_and_mv() {
        let (tree, vfs, _) = setup();
        let d = dir_ino(&vfs);
        vfs.unlink(d, "f").unwrap();
        assert_eq!(vfs.unlink(d, "f").unwrap_err().errno(), libc::ENOENT);
        assert_eq!(
            vfs.rename(d, "f", d, "f").unwrap_err().errno(),
            libc::ENOENT
        );
        assert_eq!(
            vfs.rename(d, "g", d, "f").unwrap_err().errno(),
            libc::ENOENT
        );
        assert_eq!(
            stored(&tree, "d/f").unwrap(),
            b"ok old",
            "nothing committed early"
        );
    }

    /// A stored file named like a temporary (a key `x~`), removed and created again: the
    /// new file is scratch, which commits nothing over the old one, so the removal is done
    /// first and removing the new file leaves nothing (an adversarial review's finding).
    #[test]
    fn a_temporary_named_file_created_again_does_not_bring_the_old_one_back() {
        let (tree, vfs, _) = setup();
        let d = dir_ino(&vfs);
        store(&tree, "d/x~", b"ok key");
        vfs.unlink_as(d, "x~", 7).unwrap();
        let (_, _, fh) = vfs.create(d, "x~", 0o644).unwrap();
        assert_eq!(
            stored(&tree, "d/x~"),
            None,
            "removed before the scratch file is made"
        );
        vfs.write(fh, 0, b"new", false).unwrap();
        vfs.release(fh).unwrap();
        vfs.unlink_as(d, "x~", 7).unwrap();
        assert_eq!(vfs.commit_all(), 0);
        assert_eq!(stored(&tree, "d/x~"), None);
    }

    /// The mount shows [`DEEPEST`] levels: a request naming a path below answers
    /// `ENAMETOOLONG` (lookup, mkdir, create, rename into it), while the deepest folder
    /// still lists its entries, and an entry a listing named is refused when used. So no
    /// request's cost grows past that of a path of `DEEPEST` names.
    #[test]
    fn paths_deeper_than_the_mount_shows_are_refused() {
        let (_tree, vfs, _) = setup();
        let mut dir = dir_ino(&vfs);
        for _ in 1..DEEPEST {
            dir = vfs.mkdir(dir, "s", 7).unwrap().0;
        }
        assert_eq!(vfs.path_of(dir).unwrap().len(), DEEPEST);
        let too_long = |r: Result<()>| r.unwrap_err().errno();
        assert_eq!(
            too_long(vfs.mkdir(dir, "s", 7).map(drop)),
            libc::ENAMETOOLONG
        );
        assert_eq!(
            too_long(vfs.create(dir, "x", 0o644).map(drop)),
            libc::ENAMETOOLONG
        );
        assert_eq!(
            too_long(vfs.lookup(dir, "fixed", 8).map(drop)),
            libc::ENAMETOOLONG
        );
        let d = dir_ino(&vfs);
        assert_eq!(too_long(vfs.rename(d, "f", dir, "f")), libc::ENAMETOOLONG);
        let mut plus = Vec::new();
        vfs.readdir(dir, 0, true, 8, &mut |e| {
            plus.push((e.name.to_string(), e.ino));
            true
        })
        .unwrap();
        let fixed = plus.iter().find(|(n, _)| n == "fixed").expect("listed");
        let e = vfs.open(fixed.1, OpenMode::default()).unwrap_err();
        assert_eq!(e.errno(), libc::ENAMETOOLONG, "{e}");
        assert!(e.to_string().contains("256 levels"), "{e}");

        // A folder moved deeper with what the kernel knows in it: those names are refused
        // the same way, and no request walks their whole chain.
        let (a, _) = vfs.mkdir(d, "a", 7).unwrap();
        let (b, _) = vfs.mkdir(a, "b", 7).unwrap();
        let (known, _) = vfs.lookup(b, "fixed", 8).unwrap();
        let mut above = dir_ino(&vfs);
        for _ in 1..DEEPEST - 1 {
            above = vfs.lookup(above, "s", 8).unwrap().0;
        }
        vfs.rename(d, "a", above, "a").unwrap();
        for ino in [b, known] {
            let e = vfs.getattr(ino, None).unwrap_err();
            assert_eq!(e.errno(), libc::ENAMETOOLONG, "{e}");
        }
    }

    #[test]
    fn a_folder_holding_pending_text_is_not_removed() {
        let (_tree, vfs, f) = setup();
        fail_a_save(&vfs, f);
        assert_eq!(vfs.rmdir(ROOT, "d").unwrap_err().errno(), libc::ENOTEMPTY);
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
        vfs.remove_held_back(std::time::Duration::ZERO);
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
}
