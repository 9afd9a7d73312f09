//! A path's state in the core, and its one owner, [`Paths`]: the file being written there
//! ([`OpenFile`], shared by every handle opened on it meanwhile), the text held there that
//! the tree does not store ([`Overlay`]: a scratch file, a new object not committed yet,
//! text a commit did not take), and where a tree file moved aside went.
//!
//! Why one owner: the operations of the core (open, commit, rename, unlink, release) each
//! change several of these at once, and a check made under one lock and acted on under
//! another lets another thread's change fall between them. [`Paths`] keeps the tables
//! private and offers whole operations, each one step under its lock; no other module
//! reaches the tables.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use crate::error::{lock, Error, Result};
use crate::vfs::buffer::Buffer;
use crate::vfs::held::Text;
use crate::vfs::naming::{display_path, rebased, MAX_FILE_SIZE};
use crate::vfs::tree::{Kind, Owner, Stat, MAX_TREE_COOKIE};

/// The content of a file while handles are open on it.
pub(super) struct OpenFile {
    pub(super) path: Vec<String>,
    /// Removed or replaced while open: what its handles write goes nowhere.
    pub(super) detached: bool,
    /// Shared with the tree's rendered text until a handle writes (copied then).
    pub(super) data: Buffer,
    pub(super) dirty: bool,
    pub(super) mtime: SystemTime,
    /// A time set on the file while it held unsaved writes (`cp -a` sets it before its
    /// `close()`): applied after the commit, unless a later write cleared it.
    pub(super) set_mtime: Option<SystemTime>,
    pub(super) perm: u16,
    /// Its owner when known: the file's own (a real folder's file) or its creator's
    /// ([`Vfs::set_owner`]), given to the file on disk at its commit.
    pub(super) owner: Option<Owner>,
    /// A write past [`MAX_FILE_SIZE`] failed: the buffer lacks what came after, so it is
    /// never stored or held anywhere (its commits fail with `EFBIG` and drop it, a rename
    /// of it fails) until a truncation says what the file holds.
    pub(super) cut: bool,
    /// Which file on disk its text was read from, for a real folder's file (see
    /// [`Stat::file`]): when the path shows another, its handles keep showing this one.
    pub(super) file: Option<u64>,
    /// Where its commits go.
    pub(super) home: Home,
    pub(super) handles: usize,
    pub(super) writers: usize,
}

/// Why a cut file (see [`OpenFile::cut`]) is not taken.
pub(super) fn cut_error(path: &[String]) -> Error {
    Error::new(
        libc::EFBIG,
        format!(
            "{}: a write past {} MiB failed, so the file is not all there",
            display_path(path),
            MAX_FILE_SIZE >> 20
        ),
    )
}

impl OpenFile {
    /// Whether a new handle on its path shares this buffer (it is being written).
    pub(super) fn shared(&self) -> bool {
        !self.detached && (self.writers > 0 || self.dirty)
    }

    pub(super) fn stat(&self) -> Stat {
        Stat {
            kind: Kind::File,
            size: self.data.len() as u64,
            mtime: self.mtime,
            perm: self.perm,
            // While it holds unsaved writes it changes only through the kernel's own requests
            // on it (which return or drop its attributes) and at its commit (after which the
            // kernel is told). Once committed and still open (after `fsync`, or one of two
            // descriptors closed) the tree may hold another form of its text (canonical),
            // which its last close does not announce: then it is not kept. Scratch text is
            // committed as it is.
            volatile: self.home == Home::Tree && !self.dirty,
            source: None,
            owner: self.owner,
            file: None,
        }
    }
}

/// Where the content of an open file is committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Home {
    /// To the tree, which parses and stores it.
    Tree,
    /// To the text the core holds (a scratch file): never to the tree.
    Core,
}

/// A file whose content lives in the core rather than in the tree.
pub(super) struct Overlay {
    pub(super) text: Text,
    pub(super) mtime: SystemTime,
    /// An explicitly set mtime (utimens), carried to the tree when the file is committed.
    pub(super) set_mtime: Option<SystemTime>,
    pub(super) perm: u16,
    /// What it is: a scratch file, a new object, or text a commit did not take.
    pub(super) held: Held,
    /// Its listing cookie: assigned once, so a paged listing neither skips nor repeats it
    /// when other held files come and go.
    pub(super) cookie: u64,
    /// Who created it, when that is known ([`Vfs::set_owner`]): given to the file on disk
    /// when it is committed (a real folder's file; objects of a store have its owner).
    pub(super) owner: Option<Owner>,
}

/// What a file the core holds is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Held {
    /// A scratch file (an editor's swap file, a tool's temporary, a tree file moved aside):
    /// lives only in the core while mounted; still there at unmount, it is stored under its
    /// name where the tree can hold it ([`Vfs::store_scratch`]), else dropped.
    Scratch,
    /// A new object created and not committed yet: its first commit stores it.
    New,
    /// Text a commit did not take, shown at the path of the file it was for (the store
    /// unchanged): reported, and saved for recovery at unmount.
    Failed,
    /// Text a commit did not take, renamed to a name the tree does not store: held there
    /// like a scratch file, and still saved for recovery at unmount.
    FailedScratch,
}

impl Held {
    /// Lives only in the core: commits update the held text, never the tree.
    pub(super) fn is_scratch(self) -> bool {
        matches!(self, Held::Scratch | Held::FailedScratch)
    }

    /// Holds text no commit took.
    pub(super) fn is_unsaved(self) -> bool {
        matches!(self, Held::Failed | Held::FailedScratch)
    }

    /// What it becomes when renamed to a name the tree does not store.
    pub(super) fn renamed_to_scratch(self) -> Held {
        if self.is_unsaved() {
            Held::FailedScratch
        } else {
            Held::Scratch
        }
    }
}

pub(super) fn overlay_stat(o: &Overlay) -> Stat {
    Stat {
        kind: Kind::File,
        size: o.text.len(),
        mtime: o.mtime,
        perm: o.perm,
        // Like a file being written, it changes only through the kernel's requests and
        // commits the kernel is told of; text a commit did not take is shown afresh.
        volatile: o.held.is_unsaved(),
        source: None,
        owner: o.owner,
        file: None,
    }
}

/// The listing cookie of the first file held by the core (after the tree's and `.`, `..`).
pub(super) const FIRST_HELD_COOKIE: u64 = MAX_TREE_COOKIE + 3;

/// How a file is opened.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenMode {
    pub write: bool,
    pub truncate: bool,
    pub append: bool,
}

/// Text held at paths, and tree files moved aside: under one lock, so that a check of one
/// and a change of the other are one step.
#[derive(Default)]
struct HeldPaths {
    text: HashMap<Vec<String>, Overlay>,
    /// Tree files moved aside to a scratch name (an editor's backup), by source path, with
    /// the scratch path holding their text. The source is hidden but stays in the store
    /// until new content is committed to it, or until the scratch copy is deleted.
    aside: HashMap<Vec<String>, Vec<String>>,
}

/// What the core holds at a path, for a stat.
pub(super) enum HeldAt {
    /// Text: its attributes.
    Text(Stat),
    /// A tree file moved aside: hidden.
    Aside,
    /// Nothing: the tree's file, if any.
    Nothing,
}

/// The state of every path the core holds something for (see the module documentation).
///
/// Lock order (docs/architecture.md "Lock order"): `open` → one [`OpenFile`] → `held`.
/// The `open` table is held while the open files it lists are locked (to join one, release
/// one, move them), and never taken by a thread that holds an open file's lock; `held` is a
/// leaf: every method takes and releases it inside, and the closures some methods run under
/// it ([`Paths::with_held`], [`Paths::fail`]) lock nothing. No guard of either leaves this
/// module, so the order holds by construction.
pub(super) struct Paths {
    /// Files being written, by path: the buffer new handles on that path share.
    open: Mutex<HashMap<Vec<String>, Arc<Mutex<OpenFile>>>>,
    held: Mutex<HeldPaths>,
    /// The listing cookie the next held file gets.
    next_cookie: std::sync::atomic::AtomicU64,
}

impl Default for Paths {
    fn default() -> Paths {
        Paths {
            open: Mutex::default(),
            held: Mutex::default(),
            next_cookie: std::sync::atomic::AtomicU64::new(FIRST_HELD_COOKIE),
        }
    }
}

/// Joins `f` when it is being written: one more handle on its buffer (`O_TRUNC` empties it).
fn join(f: &Arc<Mutex<OpenFile>>, mode: OpenMode) -> Result<Option<Arc<Mutex<OpenFile>>>> {
    let mut g = lock(f)?;
    if !g.shared() {
        return Ok(None);
    }
    g.handles += 1;
    if mode.write {
        g.writers += 1;
    }
    if mode.truncate {
        g.data = Buffer::default();
        g.cut = false;
        g.dirty = true;
        g.mtime = SystemTime::now();
        g.set_mtime = None;
    }
    Ok(Some(f.clone()))
}

impl Paths {
    /// A new listing cookie for a held file: assigned once, so a paged listing neither skips
    /// nor repeats it when other held files come and go.
    pub(super) fn cookie(&self) -> u64 {
        self.next_cookie
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    // --- Files being written ---------------------------------------------------------------

    /// The open file being written at `path`, if any.
    pub(super) fn open_file(&self, path: &[String]) -> Result<Option<Arc<Mutex<OpenFile>>>> {
        Ok(lock(&self.open)?.get(path).cloned())
    }

    /// Joins the file being written at `path`, if any: one more handle on its buffer.
    pub(super) fn join(
        &self,
        path: &[String],
        mode: OpenMode,
    ) -> Result<Option<Arc<Mutex<OpenFile>>>> {
        match lock(&self.open)?.get(path) {
            Some(f) => join(f, mode),
            None => Ok(None),
        }
    }

    /// `file` starts being written at its path, unless another handle started meanwhile:
    /// then that one is joined and returned.
    pub(super) fn start_writing(
        &self,
        file: &Arc<Mutex<OpenFile>>,
        mode: OpenMode,
    ) -> Result<Option<Arc<Mutex<OpenFile>>>> {
        let path = lock(file)?.path.clone();
        let mut open = lock(&self.open)?;
        if let Some(other) = open.get(&path) {
            if let Some(joined) = join(other, mode)? {
                return Ok(Some(joined));
            }
        }
        open.insert(path, file.clone());
        Ok(None)
    }

    /// A file created at `path`: it replaces (detaches) any file open there, and its held
    /// text `o` is what the path shows until its first commit.
    pub(super) fn create(
        &self,
        path: &[String],
        file: &Arc<Mutex<OpenFile>>,
        o: Overlay,
    ) -> Result<()> {
        let old = lock(&self.open)?.insert(path.to_vec(), file.clone());
        if let Some(old) = old {
            lock(&old)?.detached = true;
        }
        lock(&self.held)?.text.insert(path.to_vec(), o);
        Ok(())
    }

    /// Detaches the open file at `path` (removed or replaced): its handles write nowhere.
    pub(super) fn detach(&self, path: &[String]) -> Result<()> {
        let removed = lock(&self.open)?.remove(path);
        if let Some(f) = removed {
            lock(&f)?.detached = true;
        }
        Ok(())
    }

    /// Detaches every open file at or below folder `path` (removed).
    pub(super) fn detach_below(&self, path: &[String]) -> Result<()> {
        let mut open = lock(&self.open)?;
        let below: Vec<Vec<String>> = open
            .keys()
            .filter(|p| p.starts_with(path))
            .cloned()
            .collect();
        for p in below {
            if let Some(f) = open.remove(&p) {
                lock(&f)?.detached = true;
            }
        }
        Ok(())
    }

    /// A handle on `file` is released (`writer`: it was opened for writing): the file is
    /// locked and returned, and leaves the table of open files when it was the last handle.
    pub(super) fn release<'f>(
        &self,
        file: &'f Arc<Mutex<OpenFile>>,
        writer: bool,
    ) -> Result<MutexGuard<'f, OpenFile>> {
        let mut open = lock(&self.open)?;
        let mut f = lock(file)?;
        f.handles = f.handles.saturating_sub(1);
        if writer {
            f.writers = f.writers.saturating_sub(1);
        }
        if f.handles == 0 && open.get(&f.path).is_some_and(|o| Arc::ptr_eq(o, file)) {
            open.remove(&f.path);
        }
        Ok(f)
    }

    /// Moves the open file at `from` (and, for a folder, those below it) to `to`; `home`,
    /// when given, is where the moved file's commits go from now on.
    pub(super) fn move_open(
        &self,
        from: &[String],
        to: &[String],
        home: Option<Home>,
    ) -> Result<()> {
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
                if let (Some(home), true) = (home, p == from) {
                    g.home = home;
                }
            }
            open.insert(dest, f);
        }
        Ok(())
    }

    // --- Held text and files moved aside ------------------------------------------------------

    /// What is held at `path`, for its stat.
    pub(super) fn held_at(&self, path: &[String]) -> Result<HeldAt> {
        let held = lock(&self.held)?;
        Ok(match held.text.get(path) {
            Some(o) => HeldAt::Text(overlay_stat(o)),
            None if held.aside.contains_key(path) => HeldAt::Aside,
            None => HeldAt::Nothing,
        })
    }

    /// What the text held at `path` is, if any.
    pub(super) fn held_kind(&self, path: &[String]) -> Result<Option<Held>> {
        Ok(lock(&self.held)?.text.get(path).map(|o| o.held))
    }

    /// Runs `f` on the text held at `path`, if any, under the lock (`f` locks nothing).
    pub(super) fn with_held<R>(
        &self,
        path: &[String],
        f: impl FnOnce(&mut Overlay) -> R,
    ) -> Result<Option<R>> {
        Ok(lock(&self.held)?.text.get_mut(path).map(f))
    }

    /// Holds the text of scratch file `path` written by its commit: the held text updated,
    /// or `make()` held there when there is none.
    pub(super) fn hold_scratch(
        &self,
        path: &[String],
        text: Text,
        mtime: SystemTime,
        dated: Option<SystemTime>,
        make: impl FnOnce(Text) -> Overlay,
    ) -> Result<()> {
        let mut held = lock(&self.held)?;
        match held.text.get_mut(path) {
            Some(o) => {
                o.text = text;
                o.mtime = mtime;
                o.set_mtime = dated;
            }
            None => {
                held.text.insert(path.to_vec(), make(text));
            }
        }
        Ok(())
    }

    /// Drops the text held at `path` (stored by other means), returning it.
    pub(super) fn take_held(&self, path: &[String]) -> Result<Option<Overlay>> {
        Ok(lock(&self.held)?.text.remove(path))
    }

    /// A commit to the tree at `path` succeeded: the text held there (returned) and a
    /// moved-aside mark of `path` are over, in one step.
    pub(super) fn committed(&self, path: &[String]) -> Result<Option<Overlay>> {
        let mut held = lock(&self.held)?;
        held.aside.remove(path);
        Ok(held.text.remove(path))
    }

    /// A commit to the tree at `path` failed: `make` gives the text held there from now on,
    /// from what was held there before (if anything), in one step.
    pub(super) fn fail(
        &self,
        path: &[String],
        make: impl FnOnce(Option<&Overlay>) -> Overlay,
    ) -> Result<()> {
        let mut held = lock(&self.held)?;
        let o = make(held.text.get(path));
        held.text.insert(path.to_vec(), o);
        Ok(())
    }

    /// Removes the text held at `path` (an unlink), returning it; when it was the scratch
    /// copy of a tree file moved aside, that mark goes too and the source is returned (the
    /// only copy is deleted: the source is then removed from the tree).
    pub(super) fn discard(
        &self,
        path: &[String],
    ) -> Result<Option<(Overlay, Option<Vec<String>>)>> {
        let mut held = lock(&self.held)?;
        let Some(o) = held.text.remove(path) else {
            return Ok(None);
        };
        let mut source = None;
        if o.held.is_scratch() {
            source = held
                .aside
                .iter()
                .find(|(_, c)| c.as_slice() == path)
                .map(|(s, _)| s.clone());
            if let Some(s) = &source {
                held.aside.remove(s);
            }
        }
        Ok(Some((o, source)))
    }

    /// Whether any text is held below folder `path`.
    pub(super) fn holds_below(&self, path: &[String]) -> Result<bool> {
        Ok(lock(&self.held)?
            .text
            .keys()
            .any(|p| p.len() > path.len() && p.starts_with(path)))
    }

    /// The held files of folder `dir` whose cookies come after `offset`, by cookie: cookie,
    /// name, attributes, and whether it is scratch.
    pub(super) fn held_in(
        &self,
        dir: &[String],
        offset: u64,
    ) -> Result<Vec<(u64, String, Stat, bool)>> {
        let mut extra: Vec<(u64, String, Stat, bool)> = lock(&self.held)?
            .text
            .iter()
            .filter(|(p, o)| p.len() == dir.len() + 1 && p.starts_with(dir) && o.cookie > offset)
            .filter_map(|(p, o)| {
                p.last()
                    .map(|n| (o.cookie, n.clone(), overlay_stat(o), o.held.is_scratch()))
            })
            .collect();
        extra.sort_by_key(|e| e.0);
        Ok(extra)
    }

    /// The paths holding text no commit took.
    pub(super) fn failed_paths(&self) -> Result<Vec<Vec<String>>> {
        Ok(lock(&self.held)?
            .text
            .iter()
            .filter(|(_, v)| v.held.is_unsaved())
            .map(|(k, _)| k.clone())
            .collect())
    }

    /// The paths of scratch files.
    pub(super) fn scratch_paths(&self) -> Result<Vec<Vec<String>>> {
        Ok(lock(&self.held)?
            .text
            .iter()
            .filter(|(_, v)| v.held == Held::Scratch)
            .map(|(p, _)| p.clone())
            .collect())
    }

    /// Every held text, taken (at unmount).
    pub(super) fn drain(&self) -> Result<Vec<(Vec<String>, Overlay)>> {
        Ok(lock(&self.held)?.text.drain().collect())
    }

    /// The names of folder `dir`'s tree files moved aside.
    pub(super) fn aside_in(&self, dir: &[String]) -> Result<Vec<String>> {
        Ok(lock(&self.held)?
            .aside
            .keys()
            .filter(|p| p.len() == dir.len() + 1 && p.starts_with(dir))
            .filter_map(|p| p.last().cloned())
            .collect())
    }

    /// The tree file `copy` holds the text of, when `copy` is a copy moved aside from it.
    pub(super) fn aside_source(&self, copy: &[String]) -> Result<Option<Vec<String>>> {
        Ok(lock(&self.held)?
            .aside
            .iter()
            .find(|(_, c)| c.as_slice() == copy)
            .map(|(source, _)| source.clone()))
    }

    /// Whether tree file `path` is moved aside.
    pub(super) fn is_aside(&self, path: &[String]) -> Result<bool> {
        Ok(lock(&self.held)?.aside.contains_key(path))
    }

    /// Tree file `from` moved aside to `to`, whose held text `o` is its copy: one step.
    pub(super) fn move_aside(&self, from: &[String], to: &[String], o: Overlay) -> Result<()> {
        let mut held = lock(&self.held)?;
        held.aside.insert(from.to_vec(), to.to_vec());
        held.text.insert(to.to_vec(), o);
        Ok(())
    }

    /// The text held at `from` renamed to `to`, a name the tree does not store: held there
    /// as scratch with `text` (placed for `to`) and a new cookie, and a copy moved aside
    /// at `from` is now at `to`; one step.
    pub(super) fn rename_held(&self, from: &[String], to: &[String], text: Text) -> Result<()> {
        let cookie = self.cookie();
        let mut held = lock(&self.held)?;
        if let Some(mut o) = held.text.remove(from) {
            o.text = text;
            o.held = o.held.renamed_to_scratch();
            o.cookie = cookie;
            held.text.insert(to.to_vec(), o);
        }
        for v in held.aside.values_mut() {
            if *v == from {
                *v = to.to_vec();
            }
        }
        Ok(())
    }

    /// A tree file renamed over `to` (inside the tree): the text held for `to` and its
    /// moved-aside mark are replaced, as by a commit (`mv -b new f` moves `f` to `f~`
    /// first).
    pub(super) fn replaced(&self, to: &[String]) -> Result<()> {
        let mut held = lock(&self.held)?;
        held.text.remove(to);
        held.aside.remove(to);
        Ok(())
    }

    /// After a folder moved from `from` to `to`, the held files below it and the moved-aside
    /// marks move along (their spilled text moved with [`Text::move_to`]); one step.
    pub(super) fn move_below(&self, from: &[String], to: &[String]) -> Result<()> {
        let mut held = lock(&self.held)?;
        let below: Vec<Vec<String>> = held
            .text
            .keys()
            .filter(|p| p.starts_with(from))
            .cloned()
            .collect();
        for p in below {
            if let (Some(mut o), Some(dest)) = (held.text.remove(&p), rebased(&p, from, to)) {
                o.text.move_to(&dest);
                held.text.insert(dest, o);
            }
        }
        held.aside = std::mem::take(&mut held.aside)
            .into_iter()
            .map(|(k, v)| {
                let k = rebased(&k, from, to).unwrap_or(k);
                let v = rebased(&v, from, to).unwrap_or(v);
                (k, v)
            })
            .collect();
        Ok(())
    }
}
