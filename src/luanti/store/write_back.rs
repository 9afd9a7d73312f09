//! The blocks of the map as the tree writes them: each change committed at once (one
//! transaction per close, `-o sync`), or written back in groups.
//!
//! A transaction of SQLite ends with an fsync, which costs tens of milliseconds: a restore
//! that closes thousands of block files, each its own transaction, spends nearly all its time
//! there. So, as a local filesystem treats `close` and `fsync`, a close may leave its change
//! pending here (already parsed, validated and encoded; every reader of the mount sees it,
//! since [`BlockStore::get`] answers from the pending changes first) and the pending changes
//! are committed together, in one transaction, when the writer pauses ([`Window::quiet`]
//! after the last change), at the latest [`Window::longest`] after the first one, and
//! whenever something must see the store: [`BlockStore::flush`] (fsync, unmount, SIGTERM), a
//! listing, or a commit of another writer. A crash loses at most the changes of the last
//! window; each block is old or new, since a group is one transaction.
//!
//! Another writer: a block we hold pending that another writer changed in the store after
//! our change was made is left as the other writer stored it, with a warning: theirs is the
//! later write, and it would have won over an immediate commit of ours as well.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::thread::Thread;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::luanti::codec::block::BlockPos;
use crate::luanti::store::map::{Change, Listed, MapStore, Stream};
use crate::storekit::mtimes::content_hash;

/// When pending changes are committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// After this long without a new change.
    pub quiet: Duration,
    /// At the latest this long after the first pending change.
    pub longest: Duration,
}

/// The window of a mount without `-o sync`.
pub const WINDOW: Window = Window {
    quiet: Duration::from_millis(100),
    longest: Duration::from_secs(1),
};

/// How long the committing thread sleeps when nothing is pending (a change wakes it).
const IDLE: Duration = Duration::from_secs(1);

/// Told of every commit of ours, with the database's `data_version` just before it (read
/// while the commit holds the write lock, so it covers every other writer's commit before
/// ours) and just after it: whoever keeps something derived from the store (the index)
/// updates it for the committed blocks when it was current before, and knows that it is
/// current after. A `data_version` that could not be read is given as `i64::MIN`, which no
/// version equals.
pub trait CommitWatch: Send + Sync {
    fn committed(&self, before: i64, after: i64, changes: &[Change]);
}

/// A pending change of one block.
struct Pending {
    data: Option<Vec<u8>>,
    /// The hash of the stored bytes our first pending change was made over (`None`: no
    /// block was stored).
    base: Option<u64>,
}

#[derive(Default)]
struct Queue {
    blocks: HashMap<BlockPos, Pending>,
    first: Option<Instant>,
    last: Option<Instant>,
}

/// `map.sqlite` with the changes not yet committed.
pub struct BlockStore {
    store: MapStore,
    /// Set when changes are written back; unset, every change is committed at once.
    window: OnceLock<Window>,
    /// Held through a commit of the queue, so that a block is always either pending or
    /// stored with its new bytes.
    queue: Mutex<Queue>,
    /// The thread that commits when the window closes.
    committer: OnceLock<Thread>,
    /// The token last looked at by [`BlockStore::others_committed`]
    /// ([`MapBackend::others_version`](crate::luanti::store::map::MapBackend::others_version)). Where the backend cannot tell our commits from
    /// others', a commit of ours changes it too (another writer may commit just before or
    /// just after ours, so ours never advances it): the next look then reports a change, and
    /// cached blocks are checked against their stored bytes (read and hashed, not decoded)
    /// on their next use.
    known_version: AtomicI64,
    transactions: AtomicU64,
    /// Told of each commit (see [`CommitWatch`]).
    watch: OnceLock<Weak<dyn CommitWatch>>,
    /// Run before each commit of changes (see [`BlockStore::before_commit`]).
    before_commit: OnceLock<Box<dyn Fn() + Send + Sync>>,
}

/// The hash of the block stored at `pos` (`None`: no block). A block too large to read is
/// hashed by its reason, which names its length: it can still be removed, and another
/// program's change of it is still seen.
fn stored_hash(store: &MapStore, pos: BlockPos) -> Result<Option<u64>> {
    match store.get(pos) {
        Err(e) if e.is_stored_too_large() => Ok(Some(content_hash(e.message().as_bytes()))),
        got => Ok(got?.as_deref().map(content_hash)),
    }
}

impl BlockStore {
    /// `store`, committing every change at once until [`BlockStore::write_back`].
    pub fn new(store: MapStore) -> Arc<BlockStore> {
        let known = store.others_version().ok().flatten().unwrap_or(0);
        Arc::new(BlockStore {
            store,
            window: OnceLock::new(),
            queue: Mutex::new(Queue::default()),
            committer: OnceLock::new(),
            known_version: AtomicI64::new(known),
            transactions: AtomicU64::new(0),
            watch: OnceLock::new(),
            before_commit: OnceLock::new(),
        })
    }

    /// Runs `f` before each transaction that commits changes, pending or not, from now on
    /// (one per store): what must be written before a change reaches the store (a mark that
    /// says how the change was made) is written then, once per group.
    pub fn before_commit(&self, f: Box<dyn Fn() + Send + Sync>) {
        let _ = self.before_commit.set(f);
    }

    /// From now on, groups changes and commits them as `window` says (a read-only store
    /// has nothing to write back).
    pub fn write_back(self: &Arc<Self>, window: Window) -> Result<()> {
        if self.store.read_only() || self.window.set(window).is_err() {
            return Ok(());
        }
        let weak = Arc::downgrade(self);
        let thread = std::thread::Builder::new()
            .name("worldfs-commit".into())
            .spawn(move || commit_when_due(&weak))
            .map_err(|e| Error::from(e).context("starting the commit thread"))?;
        let _ = self.committer.set(thread.thread().clone());
        Ok(())
    }

    /// Tells `watch` of every commit from now on (one watcher per store).
    pub fn watch(&self, watch: Weak<dyn CommitWatch>) {
        let _ = self.watch.set(watch);
    }

    /// The underlying database.
    pub fn map(&self) -> &MapStore {
        &self.store
    }

    /// Transactions committed so far.
    pub fn transactions(&self) -> u64 {
        self.transactions.load(Ordering::Relaxed)
    }

    fn queue(&self) -> Result<MutexGuard<'_, Queue>> {
        crate::error::lock_named(&self.queue, "pending blocks")
    }

    /// The blocks whose changes are pending, sorted.
    pub fn pending(&self) -> Vec<BlockPos> {
        let mut pending: Vec<BlockPos> = match self.queue() {
            Ok(q) => q.blocks.keys().copied().collect(),
            Err(_) => Vec::new(),
        };
        pending.sort_by_key(|p| (p.x, p.y, p.z));
        pending
    }

    /// The blob of one block: pending, or stored.
    pub fn get(&self, pos: BlockPos) -> Result<Option<Vec<u8>>> {
        if let Some(p) = self.queue()?.blocks.get(&pos) {
            return Ok(p.data.clone());
        }
        self.store.get(pos)
    }

    /// The blob of one block for showing it: pending, or stored as
    /// [`MapBackend::read_ahead`](crate::luanti::store::map::MapBackend::read_ahead) reads it.
    pub fn read(&self, pos: BlockPos) -> Result<Option<Vec<u8>>> {
        if let Some(p) = self.queue()?.blocks.get(&pos) {
            return Ok(p.data.clone());
        }
        self.store.read_ahead(pos)
    }

    /// Commits `changes` (all blocks old or new together), or makes them pending.
    pub fn commit(&self, changes: Vec<Change>) -> Result<()> {
        if self.window.get().is_none() {
            return self.write(changes);
        }
        let mut queue = self.queue()?;
        // Every base is known before any block is queued: a read that fails leaves none of
        // the changes pending (all or nothing, as a transaction). A block no commit could
        // store (a seed's) is refused now: queued, it would fail every commit of the others.
        let mut bases = Vec::with_capacity(changes.len());
        for (pos, _) in &changes {
            bases.push(match queue.blocks.get(pos) {
                Some(p) => p.base,
                None => {
                    self.store.check_writable(*pos)?;
                    stored_hash(&self.store, *pos)?
                }
            });
        }
        for ((pos, data), base) in changes.into_iter().zip(bases) {
            queue.blocks.insert(pos, Pending { data, base });
        }
        let now = Instant::now();
        let woke = queue.first.is_none();
        queue.first.get_or_insert(now);
        queue.last = Some(now);
        drop(queue);
        if woke {
            if let Some(t) = self.committer.get() {
                t.unpark();
            }
        }
        Ok(())
    }

    /// Commits every pending change in one transaction. On failure they stay pending.
    pub fn flush(&self) -> Result<()> {
        let mut queue = self.queue()?;
        if queue.blocks.is_empty() {
            return Ok(());
        }
        let pending = std::mem::take(&mut queue.blocks);
        let bases: HashMap<BlockPos, Option<u64>> =
            pending.iter().map(|(pos, p)| (*pos, p.base)).collect();
        let changes: Vec<Change> = pending.iter().map(|(p, c)| (*p, c.data.clone())).collect();
        match self.write_unless_changed(changes, &bases) {
            Ok(()) => {
                queue.first = None;
                queue.last = None;
                Ok(())
            }
            Err(e) => {
                queue.blocks = pending;
                Err(e)
            }
        }
    }

    /// Commits `changes` in one transaction.
    fn write(&self, changes: Vec<Change>) -> Result<()> {
        self.write_unless_changed(changes, &HashMap::new())
    }

    /// Commits `changes` in one transaction, but for the blocks whose stored bytes no longer
    /// hash to their entry in `bases` (another writer changed them since): those keep what
    /// the other writer stored.
    fn write_unless_changed(
        &self,
        changes: Vec<Change>,
        bases: &HashMap<BlockPos, Option<u64>>,
    ) -> Result<()> {
        if let Some(f) = self.before_commit.get() {
            f();
        }
        let count = changes.len();
        let mut before = i64::MIN;
        let select = |store: &MapStore, changes: Vec<Change>| {
            before = store.data_version().unwrap_or(i64::MIN);
            if bases.is_empty() {
                return Ok(changes);
            }
            let mut kept = Vec::with_capacity(changes.len());
            for (pos, data) in changes {
                match bases.get(&pos) {
                    Some(base) if stored_hash(store, pos)? != *base => log::warn!(
                        "block {},{},{}: another program changed it after it was written \
                         through the mount and before that write was committed; the other \
                         program's version (the later one) is kept",
                        pos.x,
                        pos.y,
                        pos.z
                    ),
                    _ => kept.push((pos, data)),
                }
            }
            Ok(kept)
        };
        let kept = self.store.commit_selected(changes, select)?;
        self.transactions.fetch_add(1, Ordering::Relaxed);
        if let Some(watch) = self.watch.get().and_then(Weak::upgrade) {
            let after = self.store.data_version().unwrap_or(i64::MIN);
            watch.committed(before, after, &kept);
        }
        log::debug!(
            "committed {} of {count} pending block changes in one transaction",
            kept.len()
        );
        Ok(())
    }

    /// A streamed commit (see [`MapBackend::commit_stream`](crate::luanti::store::map::MapBackend::commit_stream)), pending changes committed
    /// first: `produce` is given the store's `data_version` as of just before the
    /// transaction (read once other writers are kept out) and the open transaction.
    /// Returns that `data_version` and the one just after the commit. The [`CommitWatch`]
    /// is not told (it is told blobs, which a streamed commit does not keep): the caller
    /// knows what changed and brings what it derived up to date itself.
    pub fn commit_stream(
        &self,
        produce: impl FnOnce(i64, &mut dyn Stream) -> Result<()>,
    ) -> Result<(i64, i64)> {
        self.flush()?;
        let mut before = i64::MIN;
        self.store.commit_stream(Box::new(|stream| {
            before = self.store.data_version().unwrap_or(i64::MIN);
            produce(before, stream)
        }))?;
        self.transactions.fetch_add(1, Ordering::Relaxed);
        let after = self.store.data_version().unwrap_or(i64::MIN);
        Ok((before, after))
    }

    /// Whether another writer committed since we last looked (on backends that cannot tell,
    /// also whether we did: see `known_version`). False while that cannot be told (our
    /// writer is committing): the next look tells.
    pub fn others_committed(&self) -> bool {
        match self.store.others_version() {
            Ok(Some(v)) => self.known_version.swap(v, Ordering::Relaxed) != v,
            Ok(None) | Err(_) => false,
        }
    }

    /// How long until the pending changes are due (`None`: nothing is pending).
    fn due_in(&self) -> Option<Duration> {
        let window = self.window.get()?;
        let queue = self.queue().ok()?;
        let (first, last) = (queue.first?, queue.last?);
        let due = (last + window.quiet).min(first + window.longest);
        Some(due.saturating_duration_since(Instant::now()))
    }

    /// Up to `limit` blocks after `after`, as [`MapBackend::list`](crate::luanti::store::map::MapBackend::list) lists them, pending changes
    /// committed first.
    pub fn list(&self, after: u64, limit: usize, with_data: bool) -> Result<Vec<Listed>> {
        self.flush()?;
        self.store.list(after, limit, with_data)
    }
}

impl Drop for BlockStore {
    fn drop(&mut self) {
        if let Err(e) = self.flush() {
            log::error!("pending blocks could not be committed: {e}");
        }
        if let Some(t) = self.committer.get() {
            t.unpark();
        }
    }
}

/// The committing thread: commits the pending changes when they are due, until the store
/// is gone.
fn commit_when_due(store: &Weak<BlockStore>) {
    loop {
        let Some(s) = store.upgrade() else { return };
        let wait = match s.due_in() {
            Some(d) if d.is_zero() => match s.flush() {
                Ok(()) => IDLE,
                Err(e) => {
                    log::error!("committing pending blocks (retried in a while): {e}");
                    s.window.get().map_or(IDLE, |w| w.longest)
                }
            },
            Some(d) => d,
            None => IDLE,
        };
        drop(s);
        std::thread::park_timeout(wait);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::luanti::test_map::{blob, map_with};

    /// What must reach the disk before a change (see [`BlockStore::before_commit`]) is
    /// written before the transaction of the group the change is in, once per group.
    #[test]
    fn before_commit_runs_once_a_group_before_its_transaction() {
        let pos = BlockPos { x: 1, y: 2, z: 3 };
        let (_dir, path) = map_with(&[(pos, "default:stone")]);
        let store = BlockStore::new(MapStore::open(&path, false).expect("opens"));
        let seen: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
        let (db, log) = (path.clone(), seen.clone());
        store.before_commit(Box::new(move || {
            let stored = MapStore::open(&db, true)
                .and_then(|m| m.get(BlockPos { x: 1, y: 2, z: 3 }))
                .expect("reads")
                .expect("a block");
            log.lock().expect("log").push(stored);
        }));
        store
            .write_back(Window {
                quiet: Duration::from_secs(60),
                longest: Duration::from_secs(60),
            })
            .expect("writes back");
        for name in ["default:dirt", "default:sand"] {
            store
                .commit(vec![(pos, Some(blob(name)))])
                .expect("pending");
        }
        assert!(
            seen.lock().expect("log").is_empty(),
            "nothing committed yet"
        );
        store.flush().expect("commits");
        let seen = seen.lock().expect("log").clone();
        assert_eq!(
            seen,
            vec![blob("default:stone")],
            "once, before the transaction"
        );
        assert_eq!(
            store.map().get(pos).expect("reads"),
            Some(blob("default:sand"))
        );
    }

    /// A change of several blocks whose stored state cannot be read for one of them is
    /// refused whole: the blocks before it in the change are not made pending either.
    #[test]
    fn a_change_that_fails_leaves_nothing_pending() {
        let (a, b) = (BlockPos { x: 1, y: 2, z: 3 }, BlockPos { x: 4, y: 5, z: 6 });
        let (_dir, path) = map_with(&[(a, "default:stone"), (b, "default:stone")]);
        let store = BlockStore::new(MapStore::open(&path, false).expect("opens"));
        let long = Duration::from_secs(60);
        store
            .write_back(Window {
                quiet: long,
                longest: long,
            })
            .expect("writes back");
        store
            .commit(vec![(a, Some(blob("default:dirt")))])
            .expect("pending");
        rusqlite::Connection::open(&path)
            .and_then(|c| c.execute("DROP TABLE blocks", []))
            .expect("another program drops the table");
        let failed = store.commit(vec![
            (a, Some(blob("default:sand"))),
            (b, Some(blob("default:sand"))),
        ]);
        assert!(failed.is_err(), "b's stored state cannot be read");
        assert_eq!(
            store.read(a).expect("pending"),
            Some(blob("default:dirt")),
            "a keeps what was pending before"
        );
    }
}
