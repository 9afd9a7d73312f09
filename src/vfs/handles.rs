//! Open files and their handles: the one buffer of a file being written, shared by every
//! handle opened on it meanwhile, and the commits of `flush`, `fsync` and `release` (see
//! [`Vfs::flush`] for why a first close with nothing written commits nothing).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use crate::error::{lock, Error, Result};
use crate::vfs::buffer::{Buffer, Later, Slice};
use crate::vfs::core::Vfs;
use crate::vfs::descriptors::{Handle, HandleState};
use crate::vfs::held::Text;
use crate::vfs::kernel::same;
use crate::vfs::naming::{check_name, check_size, child, display_path, permission_bits};
use crate::vfs::paths::{cut_error, Home, OpenFile, OpenMode};
use crate::vfs::paths::{overlay_stat, Held, Overlay};
use crate::vfs::tree::{Kind, NewFile, Stat};

impl Vfs {
    pub(super) fn add_handle(&self, file: Arc<Mutex<OpenFile>>, state: HandleState) -> Result<u64> {
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        let h = Handle { file, state };
        lock(&self.handles)?.insert(fh, Arc::new(Mutex::new(h)));
        Ok(fh)
    }

    pub(super) fn handle(&self, fh: u64) -> Result<Arc<Mutex<Handle>>> {
        lock(&self.handles)?
            .get(&fh)
            .cloned()
            .ok_or_else(|| Error::new(libc::EBADF, format!("unknown file handle {fh}")))
    }

    /// Opens the file `ino`.
    pub fn open(&self, ino: u64, mode: OpenMode) -> Result<u64> {
        self.open_keeping(ino, mode).map(|(fh, _)| fh)
    }

    /// Opens the file `ino`; true when the kernel may keep its cached pages from earlier
    /// opens (read from the tree, whose changes the core reports: see
    /// [`crate::vfs::kernel_cache`]).
    pub fn open_keeping(&self, ino: u64, mode: OpenMode) -> Result<(u64, bool)> {
        let _settled = self.settling();
        let since = self.kernel_epoch();
        let path = self.path_of(ino)?;
        if mode.write {
            self.writable_at(&path)?;
        }
        let joined = self.paths.join(&path, mode)?;
        if let Some(f) = joined {
            return Ok((self.add_handle(f, HandleState::opened(mode.write))?, false));
        }
        let mut reading = None;
        let held = self.paths.with_held(&path, |o| {
            let data = if mode.truncate {
                Ok(Arc::default())
            } else {
                o.text.bytes().map(Arc::new)
            };
            let home = if o.held.is_scratch() {
                Home::Core
            } else {
                Home::Tree
            };
            (data, home, o.perm, o.mtime, o.owner)
        })?;
        let (data, home, perm, mtime, owner, disk_file) = match held {
            Some((data, home, perm, mtime, owner)) => {
                (Buffer::Memory(data?), home, perm, mtime, owner, None)
            }
            None => {
                let stat = self.stat_path(&path)?;
                match stat.kind {
                    Kind::File => {}
                    Kind::Dir => return Err(Error::is_dir("is a directory")),
                    // The kernel resolves links before it opens; never read through one.
                    Kind::Symlink => {
                        return Err(Error::new(
                            libc::ELOOP,
                            format!("{}: is a symbolic link", display_path(&path)),
                        ))
                    }
                }
                // A reader whose pages the kernel keeps most likely reads nothing: its text
                // is rendered at its first read, from what the tree kept of it now.
                let pinned = if mode.write || mode.truncate || !self.pages_kept(ino, &stat, since) {
                    None
                } else {
                    self.tree.pin(&path, &stat)
                };
                let data = if let Some(pin) = pinned {
                    let len = usize::try_from(stat.size).unwrap_or(usize::MAX);
                    reading = Some((stat.clone(), false));
                    Buffer::Later(Box::new(Later::new(
                        self.tree.clone(),
                        path.clone(),
                        pin,
                        len,
                    )))
                } else {
                    let data = if mode.truncate {
                        Arc::default()
                    } else {
                        self.tree
                            .read(&path)
                            .map_err(|e| e.context(display_path(&path)))?
                    };
                    if !mode.write {
                        // The text is of the version the stat describes only if the file did
                        // not change while it was read (the stat stands for the content).
                        let after = self.stat_path(&path)?;
                        let torn = !same(&after, &stat);
                        reading = Some((after, torn));
                    }
                    Buffer::Memory(data)
                };
                (
                    data,
                    Home::Tree,
                    stat.perm,
                    stat.mtime,
                    stat.owner,
                    stat.file,
                )
            }
        };
        let file = Arc::new(Mutex::new(OpenFile {
            path: path.clone(),
            detached: false,
            data,
            dirty: mode.truncate,
            set_mtime: None,
            mtime: if mode.truncate {
                SystemTime::now()
            } else {
                mtime
            },
            perm,
            owner,
            cut: false,
            file: disk_file,
            home,
            handles: 1,
            writers: usize::from(mode.write),
        }));
        if mode.write {
            // Another handle may have started writing meanwhile: then share its buffer.
            if let Some(other) = self.paths.start_writing(&file, mode)? {
                return Ok((self.add_handle(other, HandleState::Opened)?, false));
            }
            self.attach_readers(&path, &file)?;
        }
        let fh = self.add_handle(file, HandleState::opened(mode.write))?;
        let keep =
            reading.is_some_and(|(stat, torn)| self.reader_opened(fh, ino, &stat, since, torn));
        Ok((fh, keep))
    }

    /// Descriptors opened read-only on `path` before `file` started being written read from
    /// then on what it holds: one buffer for every descriptor, as on any filesystem (a reader
    /// must not see its old copy cut to the writer's size).
    pub(super) fn attach_readers(
        &self,
        path: &[String],
        file: &Arc<Mutex<OpenFile>>,
    ) -> Result<()> {
        let handles: Vec<Arc<Mutex<Handle>>> = lock(&self.handles)?.values().cloned().collect();
        for h in handles {
            let mut h = lock(&h)?;
            if h.state.writes() || Arc::ptr_eq(&h.file, file) || lock(&h.file)?.path != path {
                continue;
            }
            lock(file)?.handles += 1;
            h.file = file.clone();
        }
        Ok(())
    }

    /// Creates and opens `name` in `parent` with permission bits `mode`.
    pub fn create(&self, parent: u64, name: &str, mode: u32) -> Result<(u64, Stat, u64)> {
        let _settled = self.settling();
        check_name(name)?;
        let dir = self.path_of(parent)?;
        let path = child(&dir, name)?;
        self.writable_at(&path)?;
        let class = self
            .tree
            .classify(&dir, name)
            .map_err(|e| e.context(display_path(&path)))?;
        // A file removed a moment ago and created again (`install`, `cp
        // --remove-destination`): the new object's commit replaces the stored one, and a
        // failed one leaves it stored. A scratch file there (a key named `4913`) commits
        // nothing over it: the removal is done first.
        match class {
            NewFile::Object => {
                self.removals.cancel(&path)?;
            }
            NewFile::Scratch => self.remove_below(&path)?,
        }
        let (held, home) = match class {
            NewFile::Scratch => (Held::Scratch, Home::Core),
            NewFile::Object => (Held::New, Home::Tree),
        };
        let now = SystemTime::now();
        let o = Overlay {
            text: Text::Memory(Vec::new()),
            mtime: now,
            set_mtime: None,
            perm: permission_bits(mode),
            held,
            cookie: self.paths.cookie(),
            owner: None,
        };
        let stat = self.shown(&path, overlay_stat(&o));
        let file = Arc::new(Mutex::new(OpenFile {
            path: path.clone(),
            detached: false,
            data: Buffer::default(),
            dirty: true,
            mtime: now,
            set_mtime: None,
            perm: o.perm,
            owner: None,
            cut: false,
            file: None,
            home,
            handles: 1,
            writers: 1,
        }));
        self.paths.create(&path, &file, o)?;
        self.fresh.show(&dir, name);
        let fh = self.add_handle(file, HandleState::Created)?;
        let ino = crate::error::write(&self.inodes, "inode table")?.lookup(parent, name, stat.file);
        Ok((ino, stat, fh))
    }

    /// Reads from an open handle (the file's buffer, with what other handles wrote).
    pub fn read(&self, fh: u64, offset: u64, size: u32) -> Result<Slice> {
        let file = lock(&*self.handle(fh)?)?.file.clone();
        // A text left to its first read is rendered with the file unlocked: a writer's open
        // looks at every reader's file ([`Vfs::attach_readers`]).
        let later = lock(&file)?.data.later();
        if let Some(later) = later {
            let text = later.render()?;
            lock(&file)?.data.rendered(text);
        }
        let f = lock(&file)?;
        f.data.read(offset, size)
    }

    /// Writes into the buffer of an open handle's file (nothing is committed before
    /// flush/fsync).
    pub fn write(&self, fh: u64, offset: u64, data: &[u8], append: bool) -> Result<usize> {
        let h = self.handle(fh)?;
        let mut h = lock(&h)?;
        let mut f = lock(&h.file)?;
        let start = if append { f.data.len() as u64 } else { offset };
        let end = match check_size(start.saturating_add(data.len() as u64)) {
            Ok(end) => end,
            Err(e) => {
                f.cut = true;
                return Err(e);
            }
        };
        let start = end - data.len();
        f.data.write_at(&self.spill, start, data)?;
        f.dirty = true;
        f.mtime = SystemTime::now();
        f.set_mtime = None;
        drop(f);
        h.state.wrote();
        Ok(data.len())
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
    /// Whether a close of handle `fh` has nothing to commit or check before it returns: its
    /// file is scratch text the core holds (a copier's temporary, committed or checked only
    /// when renamed into the tree), so [`Vfs::flush`] would do nothing and the kernel need
    /// not send it.
    pub fn closes_quietly(&self, fh: u64) -> bool {
        self.handle(fh)
            .ok()
            .and_then(|h| {
                let file = lock(&*h).ok()?.file.clone();
                let home = lock(&file).ok()?.home;
                Some(home == Home::Core)
            })
            .unwrap_or(false)
    }

    pub fn flush(&self, fh: u64) -> Result<()> {
        let _settled = self.settling();
        self.commit_handle(fh, false)
    }

    /// Commits a handle's file if it is dirty, then every change the tree holds back
    /// (fsync: when it returns, what was written before is in the store).
    pub fn fsync(&self, fh: u64) -> Result<()> {
        let _settled = self.settling();
        self.commit_handle(fh, true)?;
        self.sync()
    }

    /// Commits every change the tree holds back ([`Tree::sync`]), removals held back first
    /// (one that fails is logged, tried again and reported at the unmount; it does not fail
    /// the `fsync` of another file).
    pub fn sync(&self) -> Result<()> {
        let _settled = self.settling();
        self.remove_held_back(std::time::Duration::ZERO);
        self.tree.sync()
    }

    pub(super) fn commit_handle(&self, fh: u64, last: bool) -> Result<()> {
        let h = self.handle(fh)?;
        let mut h = lock(&h)?;
        if !h.state.writes() {
            return Ok(());
        }
        let file = h.file.clone();
        // Held through the commit: commits of one file happen one at a time, in order.
        let mut f = lock(&file)?;
        if f.detached || !f.dirty {
            return Ok(());
        }
        let first_close = matches!(h.state, HandleState::Opened | HandleState::Created);
        if first_close && !last {
            let created = h.state == HandleState::Created;
            h.state = HandleState::Deferred;
            if f.home == Home::Core {
                return Ok(());
            }
            {
                let _one = self.one_large.enter(f.data.len())?;
                self.tree.check(&f.path, &f.data.bytes()?).map_err(|e| {
                    e.context(format!(
                        "{}: nothing written before this close",
                        display_path(&f.path)
                    ))
                })?;
            }
            // A new file the tree takes empty exists once its first close returns (its
            // folder's times change then, not at the kernel's later release). Not one made
            // where a stored file was moved aside (`mv auth.txt auth.txt~; echo … >
            // auth.txt`): that replaces the stored file, and an empty one (no accounts) must
            // not replace it before the text written next.
            if !created || self.paths.is_aside(&f.path)? {
                return Ok(());
            }
        }
        self.commit_file(&mut f)
    }

    /// Commits an open file's buffer: scratch text to the overlay, anything else to the tree.
    pub(super) fn commit_file(&self, f: &mut OpenFile) -> Result<()> {
        f.dirty = false;
        if f.cut {
            let e = cut_error(&f.path);
            log::error!("not stored, what was written is dropped: {e}");
            // Scratch text cut is dropped with its name: held empty (as made), a rename of
            // it after this release would commit nothing over what it was to replace.
            if f.home == Home::Core {
                self.paths.take_held(&f.path)?;
                self.note_change(&f.path);
            }
            return Err(e.logged());
        }
        if f.home == Home::Core {
            // A time set while this file was open with unsaved writes stays the held text's;
            // one set before these writes no longer is (a write moves the time).
            let dated = f.set_mtime.take();
            #[cfg(test)]
            self.race_in_hold.run(self);
            let _one = self.one_large.enter(f.data.len())?;
            let text = self
                .spill
                .hold(&f.path, Arc::unwrap_or_clone(f.data.bytes()?));
            let (perm, owner) = (f.perm, f.owner);
            return self
                .paths
                .hold_scratch(&f.path, text, f.mtime, dated, |text| Overlay {
                    text,
                    mtime: f.mtime,
                    set_mtime: dated,
                    perm,
                    held: Held::Scratch,
                    cookie: self.paths.cookie(),
                    owner,
                });
        }
        let set_mtime = f.set_mtime.take();
        let one = self.one_large.enter(f.data.len())?;
        let text = Arc::unwrap_or_clone(f.data.bytes()?);
        self.commit(&f.path, text, f.perm, f.owner, set_mtime)?;
        drop(one);
        if f.file.is_some() {
            // Its readers now read what was committed, which is the file at the path.
            f.file = crate::error::read(&self.inodes, "inode table")?.file_at(&f.path);
        }
        Ok(())
    }

    /// Closes a handle, committing what is still unflushed.
    pub fn release(&self, fh: u64) -> Result<()> {
        let _settled = self.settling();
        self.reader_closed(fh);
        let result = self.commit_handle(fh, true);
        #[cfg(test)]
        self.race_in_release.run(self);
        let Some(h) = lock(&self.handles)?.remove(&fh) else {
            return result;
        };
        let h = lock(&h)?;
        let mut f = self.paths.release(&h.file, h.state.writes())?;
        // A change that reached the buffer after the commit above and before it left the
        // table of open files (a truncation by path, racing this release) would be dropped
        // with it: it is committed now.
        if f.handles == 0 && f.dirty && !f.detached {
            return result.and(self.commit_file(&mut f));
        }
        result
    }

    /// Commits every open handle's unflushed writes and then every change the tree holds
    /// back (SIGTERM, unmount). Returns the number of commits that failed (each is logged).
    pub fn commit_all(&self) -> usize {
        let _settled = self.settling();
        let fhs: Vec<u64> = match self.handles.lock() {
            Ok(h) => h.keys().copied().collect(),
            Err(_) => return 1,
        };
        let failed = fhs
            .into_iter()
            .filter(|&fh| self.commit_handle(fh, true).is_err())
            .count();
        // Removals held back are committed by the sync.
        match self.sync() {
            Ok(()) => failed,
            Err(e) => {
                log::error!("committing the changes held back: {e}");
                failed + 1
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::naming::MAX_FILE_SIZE;
    use crate::vfs::test_tree::*;
    use crate::vfs::tree::Tree;

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
            vfs.read(rd, 0, 100).unwrap().to_vec(),
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

    /// The kernel sends no FLUSH for a handle whose close commits and checks nothing (a
    /// copier's temporary): its release holds the text as a flush and a release would.
    #[test]
    fn a_scratch_files_close_needs_no_flush() {
        let (tree, vfs, f) = setup();
        let d = dir_ino(&vfs);
        let (tmp, _, fh) = vfs.create(d, ".f.Xa3k2P", 0o600).unwrap();
        assert!(vfs.closes_quietly(fh));
        vfs.write(fh, 0, b"bad", false).unwrap();
        vfs.release(fh).unwrap();
        assert_eq!(
            vfs.getattr(tmp, None).unwrap().size,
            3,
            "held at the release"
        );
        assert!(lock(&tree.writes).unwrap().is_empty());
        let e = vfs.rename(d, ".f.Xa3k2P", d, "f").unwrap_err();
        assert_eq!(
            e.errno(),
            libc::EINVAL,
            "the rename reports the reason: {e}"
        );
        let fh = vfs.open(f, TRUNC).unwrap();
        assert!(!vfs.closes_quietly(fh), "a tree file's close commits");
        vfs.release(fh).unwrap_err();
        let (_, _, fh) = vfs.create(d, "g", 0o644).unwrap();
        assert!(!vfs.closes_quietly(fh), "a new tree file's close commits");
    }

    #[test]
    fn a_time_set_before_the_close_is_set_once_by_the_commit() {
        let (tree, vfs, f) = setup();
        // `cp -a`: writes, sets the time, then closes.
        let fh = vfs.open(f, TRUNC).unwrap();
        vfs.write(fh, 0, b"ok copied", false).unwrap();
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
        vfs.setattr(f, Some(fh), None, Some(t), None).unwrap();
        assert_eq!(
            tree.times_set.load(Ordering::Relaxed),
            0,
            "held for the commit"
        );
        vfs.release(fh).unwrap();
        assert_eq!(stored(&tree, "d/f").unwrap(), b"ok copied");
        assert_eq!(lock(&tree.mtimes).unwrap()["d/f"], t);
        assert_eq!(tree.times_set.load(Ordering::Relaxed), 1, "set once");
        // Over text a commit did not take, whose time was set too: the later time, once.
        let fh = vfs.open(f, TRUNC).unwrap();
        vfs.write(fh, 0, b"bad", false).unwrap();
        vfs.release(fh).unwrap_err();
        vfs.setattr(f, None, None, Some(t), None).unwrap();
        let later = t + std::time::Duration::from_secs(60);
        let fh = vfs.open(f, TRUNC).unwrap();
        vfs.write(fh, 0, b"ok fixed", false).unwrap();
        vfs.setattr(f, Some(fh), None, Some(later), None).unwrap();
        let before = tree.times_set.load(Ordering::Relaxed);
        vfs.release(fh).unwrap();
        assert_eq!(stored(&tree, "d/f").unwrap(), b"ok fixed");
        assert_eq!(lock(&tree.mtimes).unwrap()["d/f"], later);
        assert_eq!(
            tree.times_set.load(Ordering::Relaxed),
            before + 1,
            "set once"
        );
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
        assert_eq!(vfs.read(other, 0, 1000).unwrap().to_vec().len(), 150);
        vfs.write(other, 150, b"!", false).unwrap();
        assert_eq!(vfs.read(fh, 150, 10).unwrap().to_vec(), b"!");
        assert_eq!(vfs.getattr(f, None).unwrap().size, 151);
        vfs.release(other).unwrap();
        vfs.release(fh).unwrap();
        assert_eq!(vfs.getattr(f, None).unwrap().size, 151);
    }

    /// A handle opened on a file shares the text the tree rendered (no copy per open), and
    /// writing through it copies first: the tree's text and other readers' stay as they were.
    #[test]
    fn a_write_never_changes_the_text_the_tree_gave() {
        let (tree, vfs, f) = setup();
        let path = ["d".to_string(), "f".to_string()];
        let shown = tree.read(&path).unwrap();
        let rd = vfs.open(f, OpenMode::default()).unwrap();
        let held = lock(&*vfs.handle(rd).unwrap())
            .unwrap()
            .file
            .lock()
            .unwrap()
            .data
            .bytes()
            .unwrap();
        assert!(
            Arc::ptr_eq(&held, &shown),
            "the reader holds the tree's text itself"
        );
        let w = vfs.open(f, RW).unwrap();
        vfs.write(w, 3, b"new", false).unwrap();
        vfs.setattr(f, Some(w), Some(4), None, None).unwrap();
        assert_eq!(*shown, b"ok old", "the tree's text is untouched");
        assert_eq!(vfs.read(w, 0, 100).unwrap().to_vec(), b"ok n");
        vfs.release(w).unwrap();
        vfs.release(rd).unwrap();
        assert_eq!(stored(&tree, "d/f").unwrap(), b"ok n");
        assert_eq!(*shown, b"ok old");
        assert_eq!(read_all(&vfs, f), b"ok n");
    }

    #[test]
    fn fstat_of_a_file_removed_while_open_is_its_buffer() {
        let (tree, vfs, f) = setup();
        let d = dir_ino(&vfs);
        let fh = vfs.open(f, RW).unwrap();
        vfs.write(fh, 6, b" more", false).unwrap();
        vfs.unlink(d, "f").unwrap();
        assert_eq!(vfs.getattr(f, Some(fh)).unwrap().size, 11);
        assert_eq!(vfs.read(fh, 0, 100).unwrap().to_vec(), b"ok old more");
        vfs.release(fh).unwrap();
        vfs.remove_held_back(std::time::Duration::ZERO);
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

    #[test]
    fn a_file_whose_write_failed_past_the_limit_is_never_stored_cut() {
        let (tree, vfs, f) = setup();
        let d = dir_ino(&vfs);
        // `cp big f`: the writes up to the limit land, the next one fails, cp closes.
        let fh = vfs.open(f, RW).unwrap();
        vfs.write(fh, 0, b"ok new", false).unwrap();
        let e = vfs.write(fh, MAX_FILE_SIZE - 1, b"xy", false).unwrap_err();
        assert_eq!(e.errno(), libc::EFBIG);
        let e = vfs.flush(fh).unwrap_err();
        assert_eq!(e.errno(), libc::EFBIG);
        assert!(e.to_string().contains("d/f"), "{e}");
        vfs.release(fh).unwrap();
        assert_eq!(stored(&tree, "d/f").unwrap(), b"ok old");
        assert!(lock(&tree.writes).unwrap().is_empty());
        assert!(vfs.failed_paths().is_empty(), "the cut text is held");
        let fh = vfs.open(f, RW).unwrap();
        assert_eq!(vfs.read(fh, 0, 100).unwrap().to_vec(), b"ok old");
        vfs.release(fh).unwrap();
        // A cut temporary renamed over the file while open (or after) goes nowhere either.
        let (_, _, tmp) = vfs.create(d, ".f.tmp", 0o644).unwrap();
        vfs.write(tmp, 0, b"ok tmp", false).unwrap();
        vfs.write(tmp, MAX_FILE_SIZE, b"x", false).unwrap_err();
        let e = vfs.rename(d, ".f.tmp", d, "f").unwrap_err();
        assert_eq!(e.errno(), libc::EFBIG);
        assert_eq!(vfs.release(tmp).unwrap_err().errno(), libc::EFBIG);
        // Released, it is gone with what was written: a later `mv` of it (a script's
        // `cat big > tmp; mv tmp f`) replaces nothing.
        assert_eq!(
            vfs.lookup(d, ".f.tmp", 1).unwrap_err().errno(),
            libc::ENOENT
        );
        let e = vfs.rename(d, ".f.tmp", d, "f").unwrap_err();
        assert_eq!(e.errno(), libc::ENOENT);
        assert_eq!(stored(&tree, "d/f").unwrap(), b"ok old");
        assert!(vfs.failed_paths().is_empty(), "the cut text is held");
        // A truncation says what the file holds: then it commits.
        let fh = vfs.open(f, RW).unwrap();
        vfs.write(fh, 0, b"ok new", false).unwrap();
        vfs.write(fh, MAX_FILE_SIZE, b"x", false).unwrap_err();
        vfs.setattr(f, Some(fh), Some(6), None, None).unwrap();
        vfs.release(fh).unwrap();
        assert_eq!(stored(&tree, "d/f").unwrap(), b"ok new");
        // So does another program's `open(O_TRUNC)` joining the cut buffer.
        let fh = vfs.open(f, RW).unwrap();
        vfs.write(fh, MAX_FILE_SIZE, b"x", false).unwrap_err();
        let other = vfs.open(f, TRUNC).unwrap();
        vfs.write(other, 0, b"ok other", false).unwrap();
        vfs.flush(other).unwrap();
        vfs.release(other).unwrap();
        vfs.release(fh).unwrap();
        assert_eq!(stored(&tree, "d/f").unwrap(), b"ok other");
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
    fn an_unlink_racing_the_release_of_a_scratch_file_leaves_nothing_held() {
        // vim: `close(fd)` of its probe swap file `.f.swpx`, then `unlink(".f.swpx")`, which
        // reaches the core while the kernel's release of fd still commits its text.
        let tree = Arc::new(crate::vfs::test_tree::Files::default());
        let vfs = Arc::new(Vfs::new(tree, None));
        let d = vfs.lookup(ROOT, "d", 1).unwrap().0;
        let (_, _, fh) = vfs.create(d, ".f.swpx", 0o600).unwrap();
        vfs.flush(fh).unwrap();
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let other = vfs.clone();
        vfs.race_in_hold.set(move |_| {
            let unlinker = std::thread::spawn(move || other.unlink_as(d, ".f.swpx", 2));
            // The unlink runs as far as it can while the release holds the file.
            std::thread::sleep(std::time::Duration::from_millis(100));
            done_tx.send(unlinker).unwrap();
        });
        vfs.release(fh).unwrap();
        done_rx.recv().unwrap().join().unwrap().unwrap();
        assert!(
            vfs.paths
                .held_kind(&["d".to_string(), ".f.swpx".to_string()])
                .unwrap()
                .is_none(),
            "the removed scratch file is held again"
        );
        assert!(vfs.lookup(d, ".f.swpx", 1).is_err());
    }

    #[test]
    fn a_reader_opened_before_a_writer_reads_what_it_wrote() {
        let (_tree, vfs, f) = setup();
        let rd = vfs.open(f, OpenMode::default()).unwrap();
        assert_eq!(vfs.read(rd, 0, 100).unwrap().to_vec(), b"ok old");
        let wr = vfs.open(f, TRUNC).unwrap();
        vfs.write(wr, 0, b"ok new text", false).unwrap();
        assert_eq!(vfs.read(rd, 0, 100).unwrap().to_vec(), b"ok new text");
        assert_eq!(vfs.getattr(f, Some(rd)).unwrap().size, 11);
        vfs.release(wr).unwrap();
        assert_eq!(vfs.read(rd, 0, 100).unwrap().to_vec(), b"ok new text");
        vfs.release(rd).unwrap();
        let again = vfs.open(f, OpenMode::default()).unwrap();
        assert_eq!(vfs.read(again, 0, 100).unwrap().to_vec(), b"ok new text");
        vfs.release(again).unwrap();
    }
}
