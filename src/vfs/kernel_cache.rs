//! Keeping the kernel's caches true. The kernel may keep names, attributes (for the
//! adapter's time to live) and file pages (until told) of what the core serves (see
//! docs/semantics.md "Kernel caching, kept true"), which spares round trips on rsync
//! passes and lets a second read of a file come from the page cache. That is
//! only right if the core tells it, at once, about every change of something it keeps:
//!
//! - after each change the core makes (a commit on close, a removal, a rename, …), every
//!   inode the kernel keeps below the changed object ([`Tree::change_scope`]: a block's other
//!   views change with it) and above it (folder times) is stat-ed again, and those whose
//!   attributes differ from what the kernel was given are invalidated, before the operation
//!   returns;
//! - a watcher polls [`Tree::underneath`]; when another program changed a store, every inode
//!   the kernel keeps is checked the same way, within [`WATCH_INTERVAL`].
//!
//! Attributes stand for content: every view's time changes with its bytes (recorded commit
//! times, or times derived from a hash of the content). What a tree marks
//! [`Stat::volatile`] (world-folder files, rows read afresh on each use) the kernel keeps
//! only briefly, with no page cache across opens. Without a [`KernelCache`] (in-process use
//! and tests) nothing is kept long.
//!
//! A read handle holds the text as it was at open, and the kernel fills its page cache from
//! whatever handle reads: a reader open across a change would put the old text back after
//! the kernel was told to drop it. So a file is opened with its cached pages kept only while
//! no other read handle is open on it, and when a handle whose text went stale closes, the
//! kernel is told to drop the file's pages again.
//!
//! Names go stale too (a block another writer deleted): the kernel is told to drop them,
//! but never from inside a request, since a request that changes a folder holds the lock
//! the kernel needs to drop a name in it; the watcher sends those.
//!
//! [`Tree::change_scope`]: crate::vfs::Tree::change_scope
//! [`Tree::underneath`]: crate::vfs::Tree::underneath

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use crate::error::{lock, Error, Result};
use crate::vfs::core::Vfs;
use crate::vfs::inodes::{is_numbered, Inodes, Kept, ROOT};
use crate::vfs::kernel::{
    same, Keeping, KernelCache, Listing, LOGGED_RECHECKS, MOST_LISTINGS, WATCHED_UNITS,
    WATCH_INTERVAL,
};
use crate::vfs::tree::{Changed, ChangedEntries, Kind, Stat};

/// How many objects of a change of the whole tree are looked up at once (see
/// [`Vfs::changed_objects`]).
const OBJECTS_AT_ONCE: usize = 4096;

/// Settles the core ([`Vfs::settle`]) when dropped. An operation of the core that may
/// change something takes one as its first statement, so it is dropped last: after every lock
/// the operation took is released (telling the kernel may wait for requests other threads
/// serve, see docs/architecture.md "Lock order"), and before the operation returns to the
/// adapter, which replies after it. The adapter has nothing to remember.
#[must_use = "the core settles when the guard is dropped, at the end of the operation"]
pub(super) struct Settling<'a>(&'a Vfs);

impl Drop for Settling<'_> {
    fn drop(&mut self) {
        self.0.settle();
    }
}

/// How many inodes one thread tells the kernel to drop, at least, when several share them.
const DROPPED_PER_THREAD: usize = 2048;

/// Tells the kernel to drop the attributes and pages of `inos`, from as many threads as
/// there are cores when they are many: each notification is a write to the FUSE device
/// that the kernel serves in the writer's thread (it frees the inode's pages there), and
/// a rename all over the map drops hundreds of thousands.
fn drop_inodes(kernel: &dyn KernelCache, inos: &[u64]) {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(inos.len() / DROPPED_PER_THREAD)
        .max(1);
    if threads == 1 {
        for &ino in inos {
            let _ = kernel.inval_inode(ino);
        }
        return;
    }
    let tell = |part: &[u64]| {
        for &ino in part {
            let _ = kernel.inval_inode(ino);
        }
    };
    std::thread::scope(|s| {
        for part in inos.chunks(inos.len().div_ceil(threads)) {
            // A thread the system refuses: this one tells those.
            if std::thread::Builder::new()
                .spawn_scoped(s, move || tell(part))
                .is_err()
            {
                tell(part);
            }
        }
    });
}

impl Vfs {
    /// Lets the kernel keep what it is served for long, telling it through `kernel` what
    /// changes (the mount does this once, after mounting).
    pub fn keep_kernel_cache(&self, kernel: Box<dyn KernelCache>) {
        let Some(seen) = self.tree.underneath() else {
            log::info!("this tree cannot tell other programs' changes: the kernel keeps little");
            return;
        };
        self.underneath_seen.store(seen, Ordering::Relaxed);
        if self.kernel.set(kernel).is_err() {
            log::warn!("the kernel cache was already set");
        }
    }

    /// Whether the core tells the kernel of every change of what it keeps (see
    /// [`Vfs::keep_kernel_cache`]).
    pub fn keeps_kernel_cache(&self) -> bool {
        self.kernel.get().is_some()
    }

    /// The number of re-checks started so far: a caller takes it before it computes a stat
    /// it will hand the kernel, and gives it to [`Vfs::kernel_keeps`].
    pub fn kernel_epoch(&self) -> u64 {
        self.rechecks.load(Ordering::SeqCst)
    }

    /// Notes that the kernel was given `stat` for `ino`, computed after [`Vfs::kernel_epoch`]
    /// said `since`, and tells how long it may keep them: [`Keeping::Kept`] when the core
    /// will tell it when they change. Not when a re-check that may have concerned `ino` (one
    /// of its object, or of everything) started meanwhile: that re-check may have compared
    /// and recorded a newer stat than this one, or passed over `ino` as not kept, and this
    /// one would then stand for long unseen. Re-checks of other objects (a restore commits
    /// one block while it writes the next) do not stop it. [`Keeping::Never`] for a name
    /// some process does not see (a fixed file of a folder it just made, a file it removed
    /// that the tree keeps): the kernel must keep neither the name nor its attributes.
    pub fn kernel_keeps(&self, ino: u64, stat: &Stat, since: u64) -> Keeping {
        if self.seen_by_some_only(ino) {
            return Keeping::Never;
        }
        // Folders are not kept, save numbered ones (a block folder, its `meta/`), whose
        // stats follow their source as their files' do: a folder's time may follow what the
        // core does not re-check (a commit that write-back makes later, an entry made in
        // it), and a stale folder time is what an incremental rsync compares first.
        if self.kernel.get().is_none()
            || stat.volatile
            || (stat.kind == Kind::Dir && !(is_numbered(ino) && stat.source.is_some()))
        {
            return Keeping::Briefly;
        }
        match self.inodes.write() {
            Ok(mut t) => {
                // Under the table's lock, which every re-check takes to record what it found.
                if self.concerned_since(&t, ino, since) {
                    return Keeping::Briefly;
                }
                if t.keep(ino, stat) {
                    Keeping::Kept
                } else {
                    Keeping::Briefly
                }
            }
            Err(_) => Keeping::Briefly,
        }
    }

    /// Whether a re-check that may have concerned `ino` started after [`Vfs::kernel_epoch`]
    /// said `since` (call with the inode table locked).
    fn concerned_since(&self, t: &Inodes, ino: u64, since: u64) -> bool {
        if self.kernel_epoch() == since {
            return false;
        }
        match lock(&self.recheck_log) {
            Ok(log) => log.may_concern(since, self.kernel_epoch(), t.path(ino).as_deref()),
            Err(_) => true,
        }
    }

    /// Counts a re-check of what the kernel keeps at and above `scope` (`None`: everything),
    /// before it looks at which inodes are kept.
    fn start_recheck(&self, scope: Option<&[String]>) {
        if let Ok(mut log) = lock(&self.recheck_log) {
            let n = self.rechecks.fetch_add(1, Ordering::SeqCst) + 1;
            log.recent.push_back((n, scope.map(<[String]>::to_vec)));
            if log.recent.len() > LOGGED_RECHECKS {
                log.recent.pop_front();
            }
        } else {
            self.rechecks.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Notes a change the core made at `path`, for [`Vfs::settle`] (safe under any lock).
    pub(super) fn note_change(&self, path: &[String]) {
        if self.kernel.get().is_none() {
            return;
        }
        if let Ok(mut q) = lock(&self.changes) {
            if !q.iter().any(|p| p == path) {
                q.push(path.to_vec());
            }
        }
    }

    /// The guard every operation that may change something takes first (see [`Settling`]).
    pub(super) fn settling(&self) -> Settling<'_> {
        Settling(self)
    }

    /// Tells the kernel which of the inodes it keeps changed with the changes noted since the
    /// last call: at the end of every operation that may change something ([`Settling`]),
    /// before the adapter replies, so the next command sees the change; and by the watcher.
    pub(super) fn settle(&self) {
        let stale = match lock(&self.stale_pages) {
            Ok(mut q) => std::mem::take(&mut *q),
            Err(_) => Vec::new(),
        };
        if let Some(kernel) = self.kernel.get() {
            for ino in stale {
                let _ = kernel.inval_inode(ino);
            }
        }
        let paths = match lock(&self.changes) {
            Ok(mut q) if !q.is_empty() => std::mem::take(&mut *q),
            _ => return,
        };
        for path in paths {
            self.changed(&path);
        }
    }

    /// Notes read handle `fh` on `ino`, whose text is that of `stat` (computed after
    /// [`Vfs::kernel_epoch`] said `since`; `torn`: the file changed while the handle read its
    /// text, which may be of either version). True when the kernel may keep the file's cached
    /// pages for it: the attributes it keeps are `stat`, no re-check that may concern the file
    /// started meanwhile, and no other read handle is open on it.
    ///
    /// An open carries no attributes: the kernel keeps those a lookup gave it. When they are
    /// not this text's (a change the watcher has not seen yet, or `torn`), it is told to drop
    /// them at the next [`Vfs::settle`]; it would otherwise cut this text to the size it
    /// keeps, and the watcher, finding what it was told is current, would never tell it.
    pub(super) fn reader_opened(
        &self,
        fh: u64,
        ino: u64,
        stat: &Stat,
        since: u64,
        torn: bool,
    ) -> bool {
        if self.kernel.get().is_none() || stat.volatile {
            return false;
        }
        // Whether the kernel may keep its pages, and whether it must drop its attributes.
        let (agrees, stale) = match self.inodes.write() {
            Ok(mut t) => match t.kept_one(ino) {
                Some(k) if !torn && k.agrees(stat) => {
                    (!self.concerned_since(&t, ino, since), false)
                }
                Some(_) => {
                    t.set_kept(ino, None);
                    (false, true)
                }
                None => (false, torn),
            },
            Err(_) => (false, true),
        };
        if stale {
            self.drop_pages(ino);
        }
        match lock(&self.readers) {
            Ok(mut r) => {
                let alone = !r.values().any(|(i, _)| *i == ino);
                r.insert(fh, (ino, stat.clone()));
                agrees && alone
            }
            Err(_) => false,
        }
    }

    /// Whether a reader's open of `ino`, whose attributes are `stat` (computed after
    /// [`Vfs::kernel_epoch`] said `since`), will let the kernel keep the pages it holds:
    /// what [`Vfs::reader_opened`] decides, asked before the open reads anything.
    pub(super) fn pages_kept(&self, ino: u64, stat: &Stat, since: u64) -> bool {
        if self.kernel.get().is_none() || stat.volatile {
            return false;
        }
        let agrees = match self.inodes.read() {
            Ok(t) => {
                t.kept_one(ino).is_some_and(|k| k.agrees(stat))
                    && !self.concerned_since(&t, ino, since)
            }
            Err(_) => false,
        };
        agrees && lock(&self.readers).is_ok_and(|r| !r.values().any(|(i, _)| *i == ino))
    }

    /// Has the kernel drop the attributes and pages of `ino` at the next [`Vfs::settle`].
    fn drop_pages(&self, ino: u64) {
        if let Ok(mut q) = lock(&self.stale_pages) {
            q.push(ino);
        }
    }

    /// Read handle `fh` closes: when the file changed since it opened, the pages it may have
    /// put back are dropped at the next [`Vfs::settle`]. Takes no other lock while it stats.
    pub(super) fn reader_closed(&self, fh: u64) {
        let Some((ino, opened)) = lock(&self.readers).ok().and_then(|mut r| r.remove(&fh)) else {
            return;
        };
        let now = self.path_of(ino).and_then(|p| self.stat_path(&p));
        if !now.is_ok_and(|s| same(&s, &opened)) {
            self.drop_pages(ino);
        }
    }

    /// After a change the core made at `path`: tells the kernel which of the inodes it
    /// keeps changed with it (see the module docs), and drops the listings it may have
    /// changed: those of the folders at, below and above the changed object, and those the
    /// tree does not vouch for.
    fn changed(&self, path: &[String]) {
        if self.kernel.get().is_none() {
            return;
        }
        let scope = self.tree.change_scope(path).min(path.len());
        // Taken before the re-check is counted: a stat computed before a commit the tree
        // names from here on is either dropped with its object or made before a re-check
        // that concerns it (see `concerned_since`), so it is never kept.
        let named = if scope == 0 {
            self.tree.take_changed_objects()
        } else {
            None
        };
        self.start_recheck(Some(&path[..scope]));
        if scope == 0 {
            if let Some(objects) = named {
                self.changed_objects(path, objects);
                return;
            }
            if let Some(kernel) = self.kernel.get() {
                self.shed_before_recheck(kernel.as_ref());
            }
        }
        let mut todo: Vec<Kept> = Vec::new();
        let mut own = None;
        // The scope's folder (or none when the kernel does not know it: then it keeps
        // nothing below it either) and the folders above it.
        let mut top = None;
        let mut above = Vec::new();
        if let Ok(t) = self.inodes.read() {
            let mut at = Some(ROOT);
            for name in &path[..scope] {
                if let Some(dir) = at {
                    above.push(dir);
                    at = t.find(dir, name);
                }
            }
            top = at;
            if let Some(top) = at {
                todo.extend(t.kept_below(Some(top)));
                own = path[scope..]
                    .iter()
                    .try_fold(top, |dir, name| t.find(dir, name));
            }
            todo.extend(above.iter().filter_map(|&i| t.kept_one(i)));
        }
        // A change of the whole tree (a rename under index/) is re-checked by source.
        let told = self.recheck(todo, scope == 0);
        // The file written itself: its pages hold what was written, which may differ from
        // the text the tree shows now (its canonical form).
        if let (Some(ino), Some(kernel)) = (own, self.kernel.get()) {
            if !told.contains(&ino) {
                let _ = kernel.inval_inode(ino);
            }
        }
        self.drop_listings(&above, top.map(Some));
    }

    /// After a change of the whole tree at `path` whose changed objects the tree named (see
    /// [`Tree::take_changed_objects`]; the re-check of everything was counted): what the
    /// kernel keeps of each numbered object (a block folder) is dropped, its attributes
    /// without a stat or a look at its source (the tree said it changed), and its listings;
    /// of one whose changed entries the tree names, and whose kept attributes all came
    /// from its source before the change, only the folder's attributes and those entries
    /// are dropped, and what the kernel keeps of its other entries, still true, is followed
    /// as derived from the object's new source; what it keeps below any other object, and of the folders above them, is re-checked
    /// as after a change at each; what it keeps of everything else it goes on keeping.
    /// Objects are taken [`OBJECTS_AT_ONCE`] at a time: what is held stays small for any
    /// number of them.
    ///
    /// [`Tree::take_changed_objects`]: crate::vfs::Tree::take_changed_objects
    fn changed_objects(&self, path: &[String], objects: Box<dyn Iterator<Item = Changed> + '_>) {
        let Some(kernel) = self.kernel.get() else {
            return;
        };
        let mut above: Vec<u64> = Vec::new();
        let mut tops: Vec<u64> = Vec::new();
        let mut todo: Vec<Kept> = Vec::new();
        let mut objects = objects.peekable();
        while objects.peek().is_some() {
            let chunk: Vec<Changed> = objects.by_ref().take(OBJECTS_AT_ONCE).collect();
            // Each numbered object the kernel knows, with what changed of it.
            let mut numbered: Vec<(u64, Option<&ChangedEntries>)> = Vec::new();
            if let Ok(t) = self.inodes.read() {
                for object in &chunk {
                    let mut at = Some(ROOT);
                    for name in &object.path {
                        if let Some(dir) = at {
                            if !above.contains(&dir) {
                                above.push(dir);
                            }
                            at = t.find(dir, name);
                        }
                    }
                    let Some(top) = at else { continue };
                    if is_numbered(top) {
                        numbered.push((top, object.entries.as_ref()));
                    } else {
                        todo.extend(t.kept_below(Some(top)));
                        tops.push(top);
                    }
                }
            }
            // Folders whose listings, and those of every folder below, are dropped.
            let mut listed: Vec<u64> = Vec::new();
            let mut dropped: Vec<u64> = Vec::new();
            if let Ok(mut t) = self.inodes.write() {
                for (top, entries) in numbered {
                    match entries {
                        Some(e) if t.carry_source(top, e.before, e.after) => {
                            dropped.extend(t.kept_one(top).map(|k| k.ino));
                            for entry in e.names.iter().filter_map(|n| t.find(top, n)) {
                                dropped.extend(t.kept_below(Some(entry)).iter().map(|k| k.ino));
                                listed.push(entry);
                            }
                        }
                        _ => {
                            dropped.extend(t.kept_below(Some(top)).iter().map(|k| k.ino));
                            listed.push(top);
                        }
                    }
                }
                for &ino in &dropped {
                    t.set_kept(ino, None);
                }
            }
            drop_inodes(kernel.as_ref(), &dropped);
            for folder in listed {
                self.drop_listings(&[], Some(Some(folder)));
            }
        }
        let mut own = None;
        if let Ok(t) = self.inodes.read() {
            todo.extend(above.iter().filter_map(|&i| t.kept_one(i)));
            own = path.iter().try_fold(ROOT, |dir, name| t.find(dir, name));
        }
        let told = self.recheck(todo, true);
        if let Some(ino) = own.filter(|ino| !told.contains(ino)) {
            let _ = kernel.inval_inode(ino);
        }
        self.drop_listings(&above, None);
        for top in tops {
            self.drop_listings(&[], Some(Some(top)));
        }
    }

    /// A call of a listing of folder `ino` (at `dir`) starts; its entries are computed
    /// after this.
    pub(super) fn listing_call(&self, ino: u64, dir: &[String]) {
        let Some(kernel) = self.kernel.get() else {
            return;
        };
        let since = self.kernel_epoch();
        let personal = self.depends_on_who_asks(dir);
        let forgotten: Vec<u64> = match lock(&self.listings) {
            Ok(mut l) => {
                // Listings left unfinished (`ls | head`) are forgotten past a bound, and
                // the kernel drops what it cached of them.
                let forgotten = if l.len() >= MOST_LISTINGS && !l.contains_key(&ino) {
                    l.drain().map(|(i, _)| i).collect()
                } else {
                    Vec::new()
                };
                // Two listings at once, or one resumed: the older start stands for both.
                let listing = l.entry(ino).or_insert(Listing {
                    since,
                    personal: false,
                });
                listing.personal |= personal;
                forgotten
            }
            Err(_) => Vec::new(),
        };
        for ino in forgotten {
            let _ = kernel.inval_inode(ino);
        }
    }

    /// Whether the listing of folder `dir` depends on who asks: a process has an entry of it
    /// hidden (see [`crate::vfs::fresh`]), or a file of it is moved aside.
    fn depends_on_who_asks(&self, dir: &[String]) -> bool {
        self.fresh.hides_in(dir) || self.aside_in(dir).map_or(true, |a| !a.is_empty())
    }

    /// Whether the name of `ino` is one some process does not see (see
    /// [`Keeping::Never`]).
    fn seen_by_some_only(&self, ino: u64) -> bool {
        if !self.fresh.hides_any() {
            return false;
        }
        let Ok(Some(path)) = self.inodes.read().map(|t| t.path(ino)) else {
            return false;
        };
        path.split_last()
            .is_some_and(|(name, dir)| self.fresh.hidden_from_some(dir, name))
    }

    /// A listing of folder `ino` (at `path`) ends: its last, empty reply is on its way, and
    /// the kernel, which opens folders itself, has cached every entry it was given. It may
    /// keep them when the tree vouches for the listing ([`Tree::listing_kept`]), no call of
    /// the listing served a view that depends on who asks (a process's hidden entries: its
    /// entries may stand in the kernel's copy even if another process finished it), and no
    /// re-check that may concern it started since the listing did: then the core drops it
    /// when a change concerns the folder. Otherwise the kernel drops it now, before the
    /// reply marks it complete, so the next listing asks worldfs again.
    ///
    /// [`Tree::listing_kept`]: crate::vfs::Tree::listing_kept
    pub(super) fn listing_ended(&self, ino: u64, path: &[String]) {
        let Some(kernel) = self.kernel.get() else {
            return;
        };
        let listing = lock(&self.listings).ok().and_then(|mut l| l.remove(&ino));
        let vouched = self.tree.listing_kept(path) && !self.depends_on_who_asks(path);
        if let (Some(l), true) = (listing, vouched) {
            if let Ok(mut t) = self.inodes.write() {
                if !l.personal && !self.concerned_since(&t, ino, l.since) {
                    t.set_listed(ino);
                    return;
                }
            }
        }
        let _ = kernel.inval_inode(ino);
    }

    /// Tells the kernel to drop the kept listings of the folders `inos` and of those at and
    /// below `below` (`Some(None)`: of every folder).
    fn drop_listings(&self, inos: &[u64], below: Option<Option<u64>>) {
        let Some(kernel) = self.kernel.get() else {
            return;
        };
        let listed = match self.inodes.write() {
            Ok(mut t) => t.take_listed(inos, below),
            Err(_) => return,
        };
        for ino in listed {
            let _ = kernel.inval_inode(ino);
        }
    }

    /// Stats each kept inode again and invalidates those whose attributes changed (which it
    /// returns); names that no longer exist (or changed kind) are queued for the watcher.
    ///
    /// With `by_source` (after a change whose extent is unknown: another program's, or a
    /// rename all over the map), a kept stat whose [`Stat::source`] the tree still gives is
    /// taken as unchanged without computing it (a block is read and hashed, not decoded and
    /// rendered), and one whose source changed is dropped, name and all, without computing
    /// it either: the kernel looks it up again when it needs it. Sources are looked up once per object (the
    /// tree's [`change_scope`](crate::vfs::Tree::change_scope) of the path).
    fn recheck(&self, kept: Vec<Kept>, by_source: bool) -> Vec<u64> {
        let Some(kernel) = self.kernel.get() else {
            return Vec::new();
        };
        let mut sources: HashMap<Vec<String>, Option<Option<u64>>> = HashMap::new();
        // Each kept inode that changed, with its new stat, and whether its name is gone.
        let mut found: Vec<(Kept, Option<Stat>, bool)> = Vec::new();
        let mut told: Vec<u64> = Vec::new();
        for k in kept {
            let path = match self.path_of(k.ino) {
                Ok(p) => p,
                Err(_) => continue,
            };
            let source = match k.source {
                Some(_) if by_source => {
                    let object = &path[..self.tree.change_scope(&path).min(path.len())];
                    match sources.get(object) {
                        Some(s) => *s,
                        None => {
                            let s = self.tree.source_of(object);
                            sources.insert(object.to_vec(), s);
                            s
                        }
                    }
                }
                _ => None,
            };
            let now = match (source, &k.stat) {
                (Some(now), _) if now == k.source => Now::Same,
                (Some(_), _) => Now::Gone,
                (None, Some(kept)) => match self.stat_path(&path) {
                    Ok(s) if same(&s, kept) => Now::Same,
                    Ok(s) if s.kind == kept.kind => Now::Changed((!s.volatile).then_some(s)),
                    _ => Now::Gone,
                },
                // A numbered entry's attributes are not kept here to compare: dropped.
                (None, None) => Now::Changed(None),
            };
            match now {
                Now::Same => {}
                Now::Changed(stat) => found.push((k, stat, false)),
                Now::Gone => found.push((k, None, true)),
            }
        }
        // A numbered entry's bit is cleared before the kernel is told, not after: a stat
        // served meanwhile (after this re-check started, so kept) sets it again and stays
        // followed, where clearing it afterwards would leave the kernel keeping it unseen.
        if let Ok(mut t) = self.inodes.write() {
            for (k, _, _) in found.iter().filter(|(k, _, _)| k.stat.is_none()) {
                t.set_kept(k.ino, None);
            }
        }
        let mut changed: Vec<(u64, Option<Stat>)> = Vec::new();
        for (k, stat, gone) in found {
            let _ = kernel.inval_inode(k.ino);
            if gone && k.ino != ROOT {
                if let Ok(mut q) = lock(&self.stale_names) {
                    q.push((k.parent, k.name.clone()));
                }
            }
            if k.stat.is_some() {
                changed.push((k.ino, stat));
            } else {
                told.push(k.ino);
            }
        }
        if let Ok(mut t) = self.inodes.write() {
            for (ino, stat) in &changed {
                t.set_kept(*ino, stat.clone());
            }
        }
        told.extend(changed.into_iter().map(|(ino, _)| ino));
        told
    }

    /// Before a re-check of everything (another program's change, a rename all over the
    /// map): each numbered folder kept costs a look at its source, so past
    /// [`WATCHED_UNITS`] the oldest are dropped instead (a server saving all the time keeps
    /// the kernel's copy of a world to what was used lately, as before numbering; a rename
    /// all over the map costs what it did then).
    fn shed_before_recheck(&self, kernel: &dyn KernelCache) {
        let shed = match self.inodes.write() {
            Ok(mut t) => t.shed_units(WATCHED_UNITS),
            Err(_) => Default::default(),
        };
        drop_inodes(kernel, &shed.inodes);
        // Names are dropped by the watcher, never from inside a request (see the module docs).
        if let Ok(mut q) = lock(&self.stale_names) {
            q.extend(shed.entries.into_iter().map(|(p, n)| (p, Arc::from(n))));
        }
    }

    /// One look of the watcher: other programs' changes, then the names to drop.
    pub fn watch_once(&self) {
        let (done, failed) = self.remove_held_back(crate::vfs::removals::WINDOW);
        if failed > 0 {
            log::warn!("{failed} removals failed; their files stay stored");
        }
        if done > 0 {
            self.settle();
        }
        let Some(kernel) = self.kernel.get() else {
            return;
        };
        let seen = self.tree.underneath().unwrap_or_default();
        if self.underneath_seen.swap(seen, Ordering::Relaxed) != seen {
            self.start_recheck(None);
            self.shed_before_recheck(kernel.as_ref());
            let all = match self.inodes.read() {
                Ok(t) => t.kept_below(None),
                Err(_) => Vec::new(),
            };
            log::debug!(
                "stores changed underneath: checking {} kept inodes",
                all.len()
            );
            self.recheck(all, true);
            self.drop_listings(&[], Some(None));
        }
        let names = match lock(&self.stale_names) {
            Ok(mut q) => std::mem::take(&mut *q),
            Err(_) => Vec::new(),
        };
        for (parent, name) in names {
            // ENOENT: the kernel dropped it already.
            let _ = kernel.inval_entry(parent, &name);
        }
    }

    /// Starts the watcher thread; it ends with the core.
    pub fn watch(self: &Arc<Self>) -> Result<()> {
        let vfs: Weak<Vfs> = Arc::downgrade(self);
        std::thread::Builder::new()
            .name("worldfs-watch".into())
            .spawn(move || loop {
                std::thread::sleep(WATCH_INTERVAL);
                match vfs.upgrade() {
                    Some(vfs) => vfs.watch_once(),
                    None => return,
                }
            })
            .map(|_| ())
            .map_err(|e| Error::from(e).context("starting the kernel cache watcher"))
    }
}

/// A kept inode as a re-check finds it.
enum Now {
    Same,
    /// Its attributes changed: the new ones when they were computed and may be kept.
    Changed(Option<Stat>),
    /// It no longer exists, is no longer of its kind, or what it derives from changed
    /// (it may be gone: not computed): its name is dropped too, and looked up again.
    Gone,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::paths::OpenMode;
    use crate::vfs::test_tree::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::{Mutex, OnceLock};

    /// What the core told the kernel.
    #[derive(Default, Clone)]
    struct Told(Arc<Mutex<Vec<String>>>);

    impl KernelCache for Told {
        fn inval_inode(&self, ino: u64) -> std::io::Result<()> {
            self.0.lock().unwrap().push(format!("inode {ino}"));
            Ok(())
        }
        fn inval_entry(&self, parent: u64, name: &str) -> std::io::Result<()> {
            self.0
                .lock()
                .unwrap()
                .push(format!("entry {parent} {name}"));
            Ok(())
        }
    }

    impl Told {
        fn take(&self) -> Vec<String> {
            std::mem::take(&mut *self.0.lock().unwrap())
        }
    }

    /// A core whose kernel keeps `d/f`, `d/g` and `d/h`, as served by lookups.
    fn kept() -> (Arc<Files>, Vfs, Told, [u64; 3]) {
        kept_by(false)
    }

    /// [`kept`], the stats carrying their [`Stat::source`] when `sources`.
    fn kept_by(sources: bool) -> (Arc<Files>, Vfs, Told, [u64; 3]) {
        kept_numbered(sources, false)
    }

    /// [`kept_by`], with `d` and its files numbered by the tree when `numbered`.
    fn kept_numbered(sources: bool, numbered: bool) -> (Arc<Files>, Vfs, Told, [u64; 3]) {
        let (tree, vfs, f) = setup_numbered(numbered);
        tree.sources.store(sources, Ordering::Relaxed);
        for name in ["d/g", "d/h"] {
            lock(&tree.files)
                .unwrap()
                .insert(name.into(), b"ok same".to_vec());
        }
        let told = Told::default();
        vfs.keep_kernel_cache(Box::new(told.clone()));
        let d = dir_ino(&vfs);
        let mut inos = [f, 0, 0];
        for (i, name) in ["f", "g", "h"].into_iter().enumerate() {
            let (ino, stat) = vfs.lookup(d, name, 1).unwrap();
            assert!((vfs.kernel_keeps(ino, &stat, vfs.kernel_epoch()) == Keeping::Kept));
            inos[i] = ino;
        }
        (tree, vfs, told, inos)
    }

    #[test]
    fn a_commit_tells_the_kernel_of_exactly_the_files_of_its_object_that_changed() {
        let (tree, vfs, told, [f, g, _]) = kept();
        // The commit of f changes g too (as a node edit changes a block's block.txt).
        lock(&tree.files)
            .unwrap()
            .insert("d/g".into(), b"ok changed".to_vec());
        let fh = vfs.open(f, TRUNC).unwrap();
        vfs.write(fh, 0, b"ok new text", false).unwrap();
        // The release tells the kernel itself, before it returns (the adapter replies after).
        vfs.release(fh).unwrap();
        let mut got = told.take();
        got.sort();
        assert_eq!(got, vec![format!("inode {f}"), format!("inode {g}")]);
        vfs.settle();
        assert!(told.take().is_empty(), "told once");
    }

    #[test]
    fn a_time_set_by_path_is_told_before_it_returns_and_a_truncation_just_after_its_reply() {
        let (tree, vfs, told, [f, g, _]) = kept();
        // `touch -d` of a file the kernel keeps: told before the call returns.
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
        vfs.setattr(f, None, None, Some(t), None).unwrap();
        assert!(
            told.take().contains(&format!("inode {f}")),
            "the time set is told by the setattr itself"
        );
        // `truncate(2)` of the closed file commits it; the commit changes g too. Nothing is
        // told before the reply (the kernel waits for a truncation's reply holding the
        // file's write-back); both are told just after it.
        let (ino, stat) = vfs.lookup(dir_ino(&vfs), "f", 1).unwrap();
        assert!((vfs.kernel_keeps(ino, &stat, vfs.kernel_epoch()) == Keeping::Kept));
        lock(&tree.files)
            .unwrap()
            .insert("d/g".into(), b"ok changed".to_vec());
        let before_reply = vfs.setattr_replying(f, None, Some(4), None, None, |r| {
            r.unwrap();
            told.take()
        });
        assert!(
            before_reply.is_empty(),
            "told before the truncation's reply"
        );
        assert_eq!(stored(&tree, "d/f").unwrap(), b"ok o");
        let mut got = told.take();
        got.sort();
        assert_eq!(got, vec![format!("inode {f}"), format!("inode {g}")]);
        vfs.watch_once();
        assert!(
            told.take().is_empty(),
            "a watch with nothing due takes no one's changes"
        );
    }

    #[test]
    fn another_programs_change_is_told_at_the_next_watch_and_only_then() {
        let (tree, vfs, told, [_, g, h]) = kept();
        lock(&tree.files)
            .unwrap()
            .insert("d/g".into(), b"ok other".to_vec());
        lock(&tree.files).unwrap().remove("d/h");
        vfs.watch_once();
        assert!(told.take().is_empty(), "the tree saw no change yet");
        tree.underneath.fetch_add(1, Ordering::Relaxed);
        vfs.watch_once();
        let d = dir_ino(&vfs);
        let mut got = told.take();
        got.sort();
        assert_eq!(
            got,
            vec![
                format!("entry {d} h"),
                format!("inode {g}"),
                format!("inode {h}"),
            ]
        );
        vfs.watch_once();
        assert!(told.take().is_empty(), "told once");
    }

    #[test]
    fn another_programs_change_is_checked_by_source_without_computing_a_stat() {
        let (tree, vfs, told, [f, g, h]) = kept_by(true);
        let d = dir_ino(&vfs);
        let stats = || tree.stats.load(Ordering::Relaxed);
        // A change elsewhere: the sources are the same, nothing is computed or told.
        let before = stats();
        tree.underneath.fetch_add(1, Ordering::Relaxed);
        vfs.watch_once();
        assert!(told.take().is_empty(), "unchanged sources: nothing told");
        assert_eq!(stats(), before, "unchanged sources: no stat computed");
        // A change of d (one object): all its kept files are dropped, names too, unseen.
        lock(&tree.files)
            .unwrap()
            .insert("d/g".into(), b"ok other".to_vec());
        tree.underneath.fetch_add(1, Ordering::Relaxed);
        vfs.watch_once();
        let mut got = told.take();
        got.sort();
        assert_eq!(
            got,
            vec![
                format!("entry {d} f"),
                format!("entry {d} g"),
                format!("entry {d} h"),
                format!("inode {f}"),
                format!("inode {g}"),
                format!("inode {h}"),
            ]
        );
        assert_eq!(stats(), before, "changed sources: no stat computed either");
        tree.underneath.fetch_add(1, Ordering::Relaxed);
        vfs.watch_once();
        assert!(told.take().is_empty(), "dropped: no longer kept");
    }

    #[test]
    fn numbered_files_cost_no_node_and_a_commit_drops_every_one_kept_of_its_object() {
        let (tree, vfs, told, [f, g, h]) = kept_numbered(true, true);
        let d = dir_ino(&vfs);
        assert!(
            [d, f, g, h].iter().all(|&i| i >> 52 == 1),
            "numbered by the tree"
        );
        assert_eq!(
            vfs.inodes.read().unwrap().len(),
            1,
            "only the root has a node"
        );
        assert_eq!(vfs.inodes.read().unwrap().units(), 1, "one unit follows d");
        let fh = vfs.open(f, TRUNC).unwrap();
        vfs.write(fh, 0, b"ok new text", false).unwrap();
        vfs.release(fh).unwrap();
        // Their attributes are not kept to compare: every kept file of d is dropped, the
        // unchanged h too, and nothing stays followed.
        let mut got = told.take();
        got.sort();
        assert_eq!(
            got,
            vec![
                format!("inode {f}"),
                format!("inode {g}"),
                format!("inode {h}")
            ]
        );
        assert_eq!(vfs.inodes.read().unwrap().units(), 0);
        vfs.settle();
        assert!(told.take().is_empty(), "told once");
        // Served again, kept again; another program's change elsewhere keeps them, one of d
        // drops them all, names too, without computing a stat.
        for name in ["f", "g"] {
            let (ino, stat) = vfs.lookup(d, name, 1).unwrap();
            assert_eq!(
                vfs.kernel_keeps(ino, &stat, vfs.kernel_epoch()),
                Keeping::Kept
            );
        }
        let stats = || tree.stats.load(Ordering::Relaxed);
        let before = stats();
        tree.underneath.fetch_add(1, Ordering::Relaxed);
        vfs.watch_once();
        assert!(told.take().is_empty(), "unchanged source: nothing told");
        lock(&tree.files)
            .unwrap()
            .insert("d/h".into(), b"ok other".to_vec());
        tree.underneath.fetch_add(1, Ordering::Relaxed);
        vfs.watch_once();
        let mut got = told.take();
        got.sort();
        assert_eq!(
            got,
            vec![
                format!("entry {d} f"),
                format!("entry {d} g"),
                format!("inode {f}"),
                format!("inode {g}"),
            ]
        );
        assert_eq!(stats(), before, "no stat computed");
    }

    #[test]
    fn a_numbered_folder_is_kept_and_dropped_with_its_object() {
        let (tree, vfs, told, [f, _, _]) = kept_numbered(true, true);
        let (d, stat) = vfs.lookup(ROOT, "d", 1).unwrap();
        assert!(stat.kind == Kind::Dir && stat.source.is_some());
        assert_eq!(
            vfs.kernel_keeps(d, &stat, vfs.kernel_epoch()),
            Keeping::Kept
        );
        // A commit in it drops it with its files.
        let fh = vfs.open(f, TRUNC).unwrap();
        vfs.write(fh, 0, b"ok new text", false).unwrap();
        vfs.release(fh).unwrap();
        assert!(told.take().contains(&format!("inode {d}")));
        // Kept again, another program's change of it drops it, name and all.
        let (_, stat) = vfs.lookup(ROOT, "d", 1).unwrap();
        assert_eq!(
            vfs.kernel_keeps(d, &stat, vfs.kernel_epoch()),
            Keeping::Kept
        );
        lock(&tree.files)
            .unwrap()
            .insert("d/h".into(), b"ok other".to_vec());
        tree.underneath.fetch_add(1, Ordering::Relaxed);
        vfs.watch_once();
        let got = told.take();
        assert!(got.contains(&format!("inode {d}")), "{got:?}");
        assert!(got.contains(&format!("entry {ROOT} d")), "{got:?}");
        // A folder the tree does not number is kept briefly, source or not.
        let (_, plain, _, _) = kept_numbered(true, false);
        let (d, stat) = plain.lookup(ROOT, "d", 1).unwrap();
        assert!(stat.source.is_some());
        assert_eq!(
            plain.kernel_keeps(d, &stat, plain.kernel_epoch()),
            Keeping::Briefly
        );
    }

    /// A change of the whole tree whose objects the tree names (a rename under `index/`)
    /// tells the kernel of those only: a named numbered folder's kept files are dropped
    /// without computing a stat, what is kept elsewhere stays kept and nothing is told of
    /// it; not named, everything kept is re-checked as before.
    #[test]
    fn a_change_of_the_whole_tree_tells_the_kernel_only_of_the_objects_it_names() {
        let (tree, vfs, told, [f, g, h]) = kept_numbered(true, true);
        lock(&tree.dirs).unwrap().push("all".into());
        store(&tree, "all/x", b"ok x");
        let (all, _) = vfs.lookup(ROOT, "all", 1).unwrap();
        let of_d = |got: &[String]| {
            [f, g, h]
                .iter()
                .filter(|i| got.contains(&format!("inode {i}")))
                .count()
        };
        let stats = || tree.stats.load(Ordering::Relaxed);

        *lock(&tree.whole).unwrap() = Some(wholes(&["all"]));
        let before = stats();
        vfs.rename(all, "x", all, "y").unwrap();
        let a_rename = stats() - before;
        let got = told.take();
        assert_eq!(of_d(&got), 0, "d is not named: {got:?}");
        assert_eq!(vfs.inodes.read().unwrap().units(), 1, "d stays followed");

        let before = stats();
        *lock(&tree.whole).unwrap() = Some(wholes(&["all", "d"]));
        vfs.rename(all, "y", all, "x").unwrap();
        let got = told.take();
        assert_eq!(of_d(&got), 3, "every kept file of d: {got:?}");
        assert!(
            !got.iter().any(|t| t.starts_with("entry")),
            "names stay: {got:?}"
        );
        assert_eq!(vfs.inodes.read().unwrap().units(), 0);
        assert_eq!(stats() - before, a_rename, "no stat of d's files computed");

        let d = dir_ino(&vfs);
        for name in ["f", "g"] {
            let (ino, stat) = vfs.lookup(d, name, 1).unwrap();
            assert_eq!(
                vfs.kernel_keeps(ino, &stat, vfs.kernel_epoch()),
                Keeping::Kept
            );
        }
        store(&tree, "d/h", b"ok other");
        *lock(&tree.whole).unwrap() = None;
        vfs.rename(all, "x", all, "y").unwrap();
        let got = told.take();
        assert_eq!(of_d(&got), 2, "not named: re-checked by source: {got:?}");

        // A rename that fails after a part of it was done (a Luanti item rename whose
        // players fail after its blocks were committed) tells what the tree names.
        for name in ["f", "g"] {
            let (ino, stat) = vfs.lookup(d, name, 1).unwrap();
            assert_eq!(
                vfs.kernel_keeps(ino, &stat, vfs.kernel_epoch()),
                Keeping::Kept
            );
        }
        *lock(&tree.whole).unwrap() = Some(wholes(&["all", "d"]));
        assert!(vfs.rename(all, "y", all, "refused").is_err());
        let got = told.take();
        assert_eq!(of_d(&got), 2, "told though the rename failed: {got:?}");
    }

    /// Many inodes dropped at once are told from several threads, each exactly once.
    #[test]
    fn many_dropped_inodes_are_each_told_once() {
        for n in [0, 1, DROPPED_PER_THREAD, 5 * DROPPED_PER_THREAD + 3] {
            let told = Told::default();
            let inos: Vec<u64> = (1..=n as u64).collect();
            drop_inodes(&told, &inos);
            let mut got = told.take();
            got.sort();
            let mut expected: Vec<String> = inos.iter().map(|i| format!("inode {i}")).collect();
            expected.sort();
            assert_eq!(got, expected, "{n} inodes");
        }
    }

    /// Top-level objects, each named as changed whole.
    fn wholes(names: &[&str]) -> Vec<Changed> {
        names
            .iter()
            .map(|n| Changed::whole(vec![n.to_string()]))
            .collect()
    }

    /// A named object whose changed entries the tree names too (a block an `index/` rename
    /// changed the nodes of): the kernel is told of the folder and those entries only, and
    /// what it keeps of the others stays followed, as derived from the object's new source:
    /// a re-check by source after it finds them unchanged. Unless what the kernel keeps
    /// came from another source than the change started from (another program changed the
    /// object just before): then all of it is dropped.
    #[test]
    fn a_named_object_whose_changed_entries_are_named_costs_the_kernel_only_those() {
        let (tree, vfs, told, [f, g, h]) = kept_numbered(true, true);
        lock(&tree.dirs).unwrap().push("all".into());
        store(&tree, "all/x", b"ok x");
        let (all, _) = vfs.lookup(ROOT, "all", 1).unwrap();
        let (d, stat) = vfs.lookup(ROOT, "d", 1).unwrap();
        assert_eq!(
            vfs.kernel_keeps(d, &stat, vfs.kernel_epoch()),
            Keeping::Kept
        );
        let source = || d_source(&lock(&tree.files).unwrap());
        // Changes d/f, names d with f changed, renames in all/; what the kernel was told.
        let change = |from: &str, to: &str, before: u64| {
            store(&tree, "d/f", to.as_bytes());
            let mut named = wholes(&["all"]);
            named.push(Changed {
                path: vec!["d".into()],
                entries: Some(ChangedEntries {
                    names: vec!["f"],
                    before,
                    after: source(),
                }),
            });
            *lock(&tree.whole).unwrap() = Some(named);
            vfs.rename(all, from, all, if from == "x" { "y" } else { "x" })
                .unwrap();
            told.take()
        };
        let got = change("x", "ok new", source());
        for ino in [d, f] {
            assert!(got.contains(&format!("inode {ino}")), "{ino}: {got:?}");
        }
        for ino in [g, h] {
            assert!(!got.contains(&format!("inode {ino}")), "{ino}: {got:?}");
        }
        let stats = tree.stats.load(Ordering::Relaxed);
        tree.underneath.fetch_add(1, Ordering::Relaxed);
        vfs.watch_once();
        let got = told.take();
        assert!(got.is_empty(), "followed from the new source: {got:?}");
        assert_eq!(
            tree.stats.load(Ordering::Relaxed),
            stats,
            "no stat computed"
        );

        // Another program changes d/h, unseen yet, and the change starts from there: what
        // the kernel keeps of g and h came from before it, and is dropped.
        store(&tree, "d/h", b"ok other");
        let got = change("y", "ok newer", source());
        for ino in [g, h] {
            assert!(got.contains(&format!("inode {ino}")), "{ino}: {got:?}");
        }
        assert_eq!(vfs.inodes.read().unwrap().units(), 0, "nothing kept of d");
    }

    /// Serves `d/g` again from inside the first invalidation it is told of, as a lookup on
    /// another request thread may while a re-check tells the kernel.
    struct LookupWhileTold {
        vfs: OnceLock<Weak<Vfs>>,
        done: AtomicBool,
    }

    impl KernelCache for Arc<LookupWhileTold> {
        fn inval_inode(&self, _ino: u64) -> std::io::Result<()> {
            let Some(vfs) = self.vfs.get().and_then(Weak::upgrade) else {
                return Ok(());
            };
            if !self.done.swap(true, Ordering::SeqCst) {
                let (g, stat) = vfs.lookup(dir_ino(&vfs), "g", 1).unwrap();
                assert_eq!(
                    vfs.kernel_keeps(g, &stat, vfs.kernel_epoch()),
                    Keeping::Kept
                );
            }
            Ok(())
        }
        fn inval_entry(&self, _parent: u64, _name: &str) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_numbered_file_served_while_a_recheck_tells_the_kernel_stays_followed() {
        let (tree, vfs, f) = setup_numbered(true);
        tree.sources.store(true, Ordering::Relaxed);
        lock(&tree.files)
            .unwrap()
            .insert("d/g".into(), b"ok same".to_vec());
        let vfs = Arc::new(vfs);
        let kernel = Arc::new(LookupWhileTold {
            vfs: OnceLock::new(),
            done: AtomicBool::new(false),
        });
        let _ = kernel.vfs.set(Arc::downgrade(&vfs));
        vfs.keep_kernel_cache(Box::new(kernel.clone()));
        let d = dir_ino(&vfs);
        let (g, stat) = vfs.lookup(d, "g", 1).unwrap();
        assert_eq!(
            vfs.kernel_keeps(g, &stat, vfs.kernel_epoch()),
            Keeping::Kept
        );
        let fh = vfs.open(f, TRUNC).unwrap();
        vfs.write(fh, 0, b"ok new text", false).unwrap();
        vfs.release(fh).unwrap();
        assert!(
            kernel.done.load(Ordering::SeqCst),
            "g was told and served again"
        );
        assert!(
            vfs.inodes.read().unwrap().kept_one(g).is_some(),
            "served after the re-check started: followed"
        );
    }

    #[test]
    fn a_numbered_files_pages_are_kept_only_while_its_source_is_the_one_the_kernel_keeps() {
        let (tree, vfs, told, [f, _, _]) = kept_numbered(true, true);
        let since = vfs.kernel_epoch();
        let (_, stat) = vfs.lookup(dir_ino(&vfs), "f", 1).unwrap();
        assert!(
            vfs.pages_kept(f, &stat, since),
            "the source the kernel keeps"
        );
        // Another program changed d; the watcher has not looked yet.
        lock(&tree.files)
            .unwrap()
            .insert("d/g".into(), b"ok other".to_vec());
        let (_, now) = vfs.lookup(dir_ino(&vfs), "f", 1).unwrap();
        assert_eq!(
            (now.size, now.mtime),
            (stat.size, stat.mtime),
            "f looks the same"
        );
        assert!(
            !vfs.pages_kept(f, &now, vfs.kernel_epoch()),
            "another source"
        );
        let fh = vfs.open(f, OpenMode::default()).unwrap();
        vfs.settle();
        assert!(
            told.take().contains(&format!("inode {f}")),
            "the kernel drops what it keeps of f"
        );
        vfs.release(fh).unwrap();
    }

    #[test]
    fn a_reader_whose_pages_the_kernel_keeps_renders_only_when_read_and_the_text_of_its_open() {
        let (tree, vfs, told, [f, _, _]) = kept_by(true);
        let reads = || tree.reads.load(Ordering::Relaxed);
        let before = reads();
        let (fh, keep) = vfs.open_keeping(f, OpenMode::default()).unwrap();
        assert!(keep);
        assert_eq!(reads(), before, "nothing rendered at the open");
        // Another program changes f before anything is read: the handle reads the text of
        // its open, and the kernel is told to drop its pages when the handle closes.
        lock(&tree.files)
            .unwrap()
            .insert("d/f".into(), b"ok a new and longer text".to_vec());
        assert_eq!(&*vfs.read(fh, 0, 100).unwrap(), b"ok old");
        assert_eq!(&*vfs.read(fh, 3, 100).unwrap(), b"old");
        assert_eq!(reads(), before, "rendered from what was kept at the open");
        vfs.release(fh).unwrap();
        vfs.settle();
        assert_eq!(told.take(), vec![format!("inode {f}")]);
        // The kernel's pages are of the old text now: an open reads the new one at once.
        let (fh, keep) = vfs.open_keeping(f, OpenMode::default()).unwrap();
        assert!(!keep);
        assert_eq!(reads(), before + 1);
        assert_eq!(&*vfs.read(fh, 0, 100).unwrap(), b"ok a new and longer text");
        vfs.release(fh).unwrap();
        // A second reader beside a first: the kernel drops its pages, the text is read.
        let since = vfs.kernel_epoch();
        let (_, stat) = vfs.lookup(dir_ino(&vfs), "f", 1).unwrap();
        assert!((vfs.kernel_keeps(f, &stat, since) == Keeping::Kept));
        let (r1, keep1) = vfs.open_keeping(f, OpenMode::default()).unwrap();
        let (r2, keep2) = vfs.open_keeping(f, OpenMode::default()).unwrap();
        assert!(keep1 && !keep2);
        assert_eq!(reads(), before + 2, "only the second open read");
        vfs.release(r1).unwrap();
        vfs.release(r2).unwrap();
    }

    #[test]
    fn a_reader_open_across_a_change_gets_the_files_pages_dropped_when_it_closes() {
        let (tree, vfs, told, [f, _, _]) = kept();
        let (r1, keep1) = vfs.open_keeping(f, OpenMode::default()).unwrap();
        assert!(keep1, "alone: the kernel keeps the pages");
        let (r2, keep2) = vfs.open_keeping(f, OpenMode::default()).unwrap();
        assert!(!keep2, "another reader is open: pages dropped at this open");
        vfs.release(r2).unwrap();
        vfs.settle();
        assert!(told.take().is_empty(), "nothing changed while r2 was open");
        // Another program changes f while r1 holds its old text.
        lock(&tree.files)
            .unwrap()
            .insert("d/f".into(), b"ok other text".to_vec());
        vfs.release(r1).unwrap();
        vfs.settle();
        assert_eq!(told.take(), vec![format!("inode {f}")]);
    }

    /// Found by raising the attributes' time to live to an hour (mount test 07, one run in
    /// twelve): an open that finds a change the watcher has not seen yet took the new
    /// attributes for those the kernel keeps (an open carries none), so the watcher, seeing
    /// the change, told the kernel nothing, and it kept the old size, cutting reads to it.
    #[test]
    fn an_open_that_finds_a_change_first_has_the_kernel_drop_the_old_attributes() {
        let (tree, vfs, told, [f, _, _]) = kept();
        lock(&tree.files)
            .unwrap()
            .insert("d/f".into(), b"ok a longer text".to_vec());
        let (fh, keep) = vfs.open_keeping(f, OpenMode::default()).unwrap();
        assert!(!keep, "the kernel's pages are of the old text");
        vfs.settle();
        assert_eq!(told.take(), vec![format!("inode {f}")]);
        vfs.release(fh).unwrap();
        vfs.settle();
        assert!(told.take().is_empty(), "the handle's text is current");
        // Once the kernel holds the new attributes, an open keeps its pages again.
        let since = vfs.kernel_epoch();
        let (ino, stat) = vfs.lookup(dir_ino(&vfs), "f", 1).unwrap();
        assert_eq!((ino, stat.size), (f, 16));
        assert!((vfs.kernel_keeps(f, &stat, since) == Keeping::Kept));
        let (fh, keep) = vfs.open_keeping(f, OpenMode::default()).unwrap();
        assert!(keep);
        vfs.release(fh).unwrap();
        vfs.settle();
        assert!(told.take().is_empty());
    }

    #[test]
    fn an_open_whose_text_changed_while_it_was_read_keeps_no_pages_and_drops_the_attributes() {
        let (tree, vfs, told, [f, _, _]) = kept();
        let new_text = b"ok changed meanwhile";
        tree.on_read.set(|t: &Files| {
            lock(&t.files)
                .unwrap()
                .insert("d/f".into(), new_text.to_vec());
        });
        // The kernel already keeps the new attributes (a lookup on another thread saw the
        // change): the open's stat, taken before the change, is not the text's.
        let old = vfs.getattr(f, None).unwrap();
        let new = Stat {
            size: new_text.len() as u64,
            ..old
        };
        assert!((vfs.kernel_keeps(f, &new, vfs.kernel_epoch()) == Keeping::Kept));
        let (fh, keep) = vfs.open_keeping(f, OpenMode::default()).unwrap();
        assert!(!keep, "the text is not of the attributes the kernel keeps");
        vfs.settle();
        assert_eq!(told.take(), vec![format!("inode {f}")]);
        assert_eq!(read_all(&vfs, f), b"ok changed meanwhile");
        vfs.release(fh).unwrap();
    }

    /// Lists folder `ino` whole as process `pid`, as the kernel does (until a call hands
    /// out nothing), and returns the names.
    fn list(vfs: &Vfs, ino: u64, pid: u32) -> Vec<String> {
        let mut names = Vec::new();
        let mut offset = 0;
        loop {
            let mut given = false;
            vfs.readdir(ino, offset, false, pid, &mut |e| {
                given = true;
                offset = e.offset;
                names.push(e.name.to_string());
                true
            })
            .unwrap();
            if !given {
                return names;
            }
        }
    }

    /// A core whose tree vouches for the listings of `d` (kept) but not of `e`, with the
    /// kernel keeping `d/f`, `d/g` and `d/h`; and the inodes of `d`, `e` and `e/x`.
    fn listings() -> (Arc<Files>, Vfs, Told, [u64; 3]) {
        let (tree, vfs, told, _) = kept();
        tree.kept_listings.store(true, Ordering::Relaxed);
        lock(&tree.dirs).unwrap().push("e".into());
        store(&tree, "e/x", b"ok x");
        let e = vfs.lookup(ROOT, "e", 1).unwrap().0;
        let x = vfs.lookup(e, "x", 1).unwrap().0;
        let d = dir_ino(&vfs);
        (tree, vfs, told, [d, e, x])
    }

    #[test]
    fn a_kept_listing_is_dropped_when_its_folder_changes_or_the_stores_do_and_only_then() {
        let (tree, vfs, told, [d, _, x]) = listings();
        assert_eq!(list(&vfs, d, 1), [".", "..", "f", "g", "h"]);
        vfs.watch_once();
        rewrite(&vfs, x, b"ok y");
        assert!(
            !told.take().contains(&format!("inode {d}")),
            "neither a tick nor a change elsewhere drops it"
        );
        // A commit in d (it could add or remove an entry, as a node edit does in meta/).
        let f = vfs.lookup(d, "f", 1).unwrap().0;
        rewrite(&vfs, f, b"ok new f");
        assert!(told.take().contains(&format!("inode {d}")));
        rewrite(&vfs, f, b"ok newer f");
        assert!(
            !told.take().contains(&format!("inode {d}")),
            "dropped once, until listed again"
        );
        // Another program's change of the stores.
        list(&vfs, d, 1);
        tree.underneath.fetch_add(1, Ordering::Relaxed);
        vfs.watch_once();
        assert!(told.take().contains(&format!("inode {d}")));
    }

    #[test]
    fn a_listing_the_tree_does_not_vouch_for_is_dropped_as_it_ends() {
        let (_tree, vfs, told, [d, e, _]) = listings();
        let dropped = |told: &Told, ino: u64| told.take().contains(&format!("inode {ino}"));
        assert_eq!(list(&vfs, e, 1), [".", "..", "x"]);
        assert!(dropped(&told, e), "dropped before its last reply");
        vfs.watch_once();
        assert!(!dropped(&told, e), "nothing left to drop");
        // A listing left unfinished is not dropped: the kernel never serves it.
        vfs.readdir(e, 0, false, 1, &mut |_| true).unwrap();
        assert!(!dropped(&told, e));
        assert_eq!(list(&vfs, d, 1), [".", "..", "f", "g", "h"]);
        assert!(!dropped(&told, d), "a kept listing stands");
    }

    #[test]
    fn a_listing_hiding_files_from_anyone_is_never_kept() {
        let (_tree, vfs, told, [d, _, _]) = listings();
        let (made, _) = vfs.mkdir(d, "new", 1).unwrap();
        told.take();
        assert_eq!(list(&vfs, made, 1), [".", ".."], "hidden from its maker");
        assert!(told.take().contains(&format!("inode {made}")));
        assert_eq!(list(&vfs, made, 2), [".", "..", "fixed"], "shown to others");
        assert!(
            told.take().contains(&format!("inode {made}")),
            "the maker would be served what others see"
        );
        // Nor are the names and attributes of what it hides.
        let (fixed, stat) = vfs.lookup(made, "fixed", 2).unwrap();
        assert_eq!(
            vfs.kernel_keeps(fixed, &stat, vfs.kernel_epoch()),
            Keeping::Never
        );
    }

    /// Adversarial review: the maker lists part of its new folder (one `getdents`) and
    /// stops; once nothing is hidden any more another process lists it whole, and the
    /// kernel, which kept the maker's part, appends the rest to it.
    #[test]
    fn a_listing_partly_served_to_a_process_with_hidden_entries_is_never_kept() {
        let (_tree, vfs, told, [d, _, _]) = listings();
        let (made, _) = vfs.mkdir(d, "new", 1).unwrap();
        vfs.readdir(made, 0, false, 1, &mut |e| e.name == ".")
            .unwrap();
        vfs.fresh.removed(&["d".to_string(), "new".to_string()]);
        told.take();
        assert_eq!(list(&vfs, made, 2), [".", "..", "fixed"]);
        assert!(told.take().contains(&format!("inode {made}")));
        assert_eq!(list(&vfs, made, 2), [".", "..", "fixed"]);
        assert!(
            !told.take().contains(&format!("inode {made}")),
            "a listing wholly served to everyone is kept"
        );
    }

    /// Opens `ino`, writes `text` in place of its content and closes it, then settles.
    fn rewrite(vfs: &Vfs, ino: u64, text: &[u8]) {
        let fh = vfs.open(ino, TRUNC).unwrap();
        vfs.write(fh, 0, text, false).unwrap();
        vfs.release(fh).unwrap();
        vfs.settle();
    }

    #[test]
    fn a_recheck_stops_a_stat_from_being_kept_only_when_it_may_concern_it() {
        let (tree, vfs, f) = setup();
        lock(&tree.dirs).unwrap().push("e".into());
        lock(&tree.files)
            .unwrap()
            .insert("e/x".into(), b"ok x".to_vec());
        vfs.keep_kernel_cache(Box::new(Told::default()));
        let e = vfs.lookup(ROOT, "e", 1).unwrap().0;
        let x = vfs.lookup(e, "x", 1).unwrap().0;
        // A commit of another object (e/x) while a stat of d/f is on its way.
        let since = vfs.kernel_epoch();
        let stat = vfs.getattr(f, None).unwrap();
        rewrite(&vfs, x, b"ok y");
        assert_ne!(vfs.kernel_epoch(), since, "the commit re-checked");
        assert!(
            (vfs.kernel_keeps(f, &stat, since) == Keeping::Kept),
            "e/x does not concern d/f"
        );
        // A commit of its own object (d) meanwhile: not kept.
        let since = vfs.kernel_epoch();
        let stat = vfs.getattr(f, None).unwrap();
        let g = vfs.create(dir_ino(&vfs), "g", 0o644).unwrap();
        vfs.write(g.2, 0, b"ok g", false).unwrap();
        vfs.release(g.2).unwrap();
        vfs.settle();
        assert!(
            !(vfs.kernel_keeps(f, &stat, since) == Keeping::Kept),
            "d/g's commit concerns d/f"
        );
        // More re-checks than are remembered: not kept, whatever they concerned.
        let since = vfs.kernel_epoch();
        let stat = vfs.getattr(f, None).unwrap();
        for i in 0..=LOGGED_RECHECKS {
            rewrite(&vfs, x, format!("ok {i}").as_bytes());
        }
        assert!(
            !(vfs.kernel_keeps(f, &stat, since) == Keeping::Kept),
            "forgotten re-checks"
        );
    }

    /// Adversarial review (adv-s20): a file still open after its commit (fsync, or the
    /// close of one of two descriptors) shows its buffer, which is now kept; when its last
    /// handle closes nothing is committed, so nothing is told, and the kernel keeps the
    /// buffer's size and time (and cuts reads to that size) though the tree shows its
    /// canonical text. Through a mount: write block.txt without its comments, fsync, fstat,
    /// close: for up to 1 s `stat` shows the written size and `cat` returns the canonical
    /// text cut to it.
    #[test]
    fn a_stat_of_a_file_open_after_its_commit_is_not_kept_past_its_close() {
        let (tree, vfs, f) = setup();
        let told = Told::default();
        vfs.keep_kernel_cache(Box::new(told.clone()));
        let fh = vfs.open(f, TRUNC).unwrap();
        vfs.write(fh, 0, b"ok  x", false).unwrap();
        vfs.fsync(fh).unwrap();
        vfs.settle();
        // The tree holds the canonical form of what was written (as block.txt gains its
        // comments): longer than the buffer.
        lock(&tree.files)
            .unwrap()
            .insert("d/f".into(), b"ok x # the canonical form".to_vec());
        told.take();
        // fstat before the close.
        let since = vfs.kernel_epoch();
        let open = vfs.getattr(f, Some(fh)).unwrap();
        let kept = vfs.kernel_keeps(f, &open, since) == Keeping::Kept;
        vfs.release(fh).unwrap();
        vfs.settle();
        let now = vfs.getattr(f, None).unwrap();
        let told_f = told.take().contains(&format!("inode {f}"));
        assert!(
            !kept || told_f || (now.size == open.size && now.mtime == open.mtime),
            "the kernel keeps size {} (tree: {}) and was not told",
            open.size,
            now.size
        );
    }

    #[test]
    fn files_the_core_holds_are_kept_and_told_when_committed() {
        let (tree, vfs, _) = setup();
        let told = Told::default();
        vfs.keep_kernel_cache(Box::new(told.clone()));
        let d = dir_ino(&vfs);
        // rsync's temporary: created, written, closed, renamed over the file it replaces.
        let since = vfs.kernel_epoch();
        let (tmp, stat, fh) = vfs.create(d, ".f.Xa3k2P", 0o600).unwrap();
        assert!(
            (vfs.kernel_keeps(tmp, &stat, since) == Keeping::Kept),
            "a new scratch file"
        );
        vfs.write(fh, 0, b"ok new", false).unwrap();
        vfs.release(fh).unwrap();
        vfs.settle();
        let since = vfs.kernel_epoch();
        let stat = vfs.getattr(tmp, None).unwrap();
        assert_eq!(stat.size, 6);
        assert!(
            (vfs.kernel_keeps(tmp, &stat, since) == Keeping::Kept),
            "a closed scratch file"
        );
        told.take();
        // rsync then sets its time and its mode: the replies carry them, nothing else in
        // the tree changed, so nothing is told and the replies' attributes are kept.
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
        let since = vfs.kernel_epoch();
        let stat = vfs.setattr(tmp, None, None, Some(t), None).unwrap();
        assert_eq!(stat.mtime, t);
        assert!(told.take().is_empty(), "a held file's time is the reply's");
        assert!(vfs.kernel_keeps(tmp, &stat, since) == Keeping::Kept);
        let since = vfs.kernel_epoch();
        let stat = vfs.setattr(tmp, None, None, None, Some(0o644)).unwrap();
        assert_eq!(stat.perm, 0o644);
        assert!(told.take().is_empty(), "a held file's mode is the reply's");
        assert!(vfs.kernel_keeps(tmp, &stat, since) == Keeping::Kept);
        vfs.rename(d, ".f.Xa3k2P", d, "f").unwrap();
        vfs.settle();
        assert_eq!(stored(&tree, "d/f").as_deref(), Some(&b"ok new"[..]));
        assert!(
            told.take().contains(&format!("inode {tmp}")),
            "the file renamed over a tree file is told"
        );
        // Text a commit did not take is shown afresh, never kept.
        let f = vfs.lookup(d, "f", 1).unwrap().0;
        fail_a_save(&vfs, f);
        let stat = vfs.getattr(f, None).unwrap();
        assert!(stat.volatile, "failed text");
        assert!(!(vfs.kernel_keeps(f, &stat, vfs.kernel_epoch()) == Keeping::Kept));
    }

    #[test]
    fn without_a_kernel_cache_or_for_volatile_files_or_across_a_recheck_nothing_is_kept() {
        let (tree, vfs, f) = setup();
        let stat = vfs.getattr(f, None).unwrap();
        assert!(
            !(vfs.kernel_keeps(f, &stat, 0) == Keeping::Kept),
            "no kernel cache set"
        );
        vfs.keep_kernel_cache(Box::new(Told::default()));
        let since = vfs.kernel_epoch();
        assert!((vfs.kernel_keeps(f, &stat, since) == Keeping::Kept));
        vfs.watch_once();
        assert!(
            (vfs.kernel_keeps(f, &stat, since) == Keeping::Kept),
            "no re-check ran"
        );
        lock(&tree.files)
            .unwrap()
            .insert("d/f".into(), b"ok changed".to_vec());
        tree.underneath.fetch_add(1, Ordering::Relaxed);
        vfs.watch_once();
        assert!(
            !(vfs.kernel_keeps(f, &stat, since) == Keeping::Kept),
            "a stat computed before a re-check is not kept"
        );
        let volatile = Stat {
            volatile: true,
            ..stat
        };
        assert_ne!(
            vfs.kernel_keeps(f, &volatile, vfs.kernel_epoch()),
            Keeping::Kept
        );
    }
}
