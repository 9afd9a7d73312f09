//! Decoded blocks on demand: the cache over `map.sqlite`, per-block locking, change
//! detection and atomic read-modify-write of one block, or of many in one transaction
//! ([`Blocks::edit_many`], parallel and streamed into the transaction).
//!
//! Nothing is decoded until a path inside a block folder is touched. Reads take no global
//! lock while decoding (only the cache's map, briefly). Writes to one block are serialised by
//! a per-block lock, re-read the current block, apply the edit, and commit only when the
//! decoded block really changed, so untouched blocks keep their stored bytes exactly.
//!
//! Blocks live in the shared [`ObjectCache`]: a read racing a commit cannot cache the block
//! from before the commit, and when another writer commits (`PRAGMA data_version`, looked at
//! at most every [`REFRESH_INTERVAL_MS`]) cached blocks are checked against their stored
//! bytes before their next use and kept when unchanged. A block is weighed with all its
//! views up front; one heavier than the whole cache is kept alone until the next block is
//! decoded ([`ObjectCache::keeping_oversized`]), and the memory of such a block is given back
//! to the system when it goes.

use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::{Error, Result};
use crate::luanti::codec;
use crate::luanti::codec::block::{BlockPos, MapBlock, NODE_COUNT};
use crate::luanti::store::map::{Change, MapStore, Stream};
use crate::luanti::store::write_back::{BlockStore, Window};
use crate::luanti::stored_hashes::{Seen, StoredHashes};
use crate::luanti::summaries::{Summaries, Summary};
use crate::luanti::summary_file::SummaryFile;
use crate::luanti::views;
use crate::storekit::mtimes::{content_hash, content_hash_parts, Key, Mtimes};
use crate::storekit::objects::{Lookup, ObjectCache, Views, Weigh};
use crate::storekit::throttle::Throttle;
use std::time::Duration;

/// The most memory one cached block may take with its rendered views (see [`cost`]).
const MAX_BLOCK_COST: usize = 20 << 20;
/// Per-block locks, sharded.
const SHARDS: usize = 64;

/// The entry name under which a block's recorded times keep the state (header and nodes) a
/// `block.txt` written through the mount last left it in (no entry of a block folder has a
/// NUL in its name).
const HEADER_MARK: &str = "\0block.txt written over";
/// How often (at most) to ask SQLite whether another writer changed the database.
const REFRESH_INTERVAL_MS: u64 = 50;

/// A decoded block with what the tree shows about it.
pub struct Cached {
    pub block: MapBlock,
    /// The block's time: of its last commit through worldfs, or derived from its bytes.
    pub mtime: SystemTime,
    /// The hash of the stored bytes.
    pub hash: u64,
    /// Rendered views by file name, filled on first use.
    views: Views,
    /// The content hashes of rendered views (see [`Cached::view_hash`]).
    view_hashes: Mutex<HashMap<&'static str, u64>>,
    /// What the block weighs with all its views rendered (see [`cost`]).
    weight: usize,
    /// Shown from a `readonly_backend` seed: it cannot be changed.
    pub from_seed: bool,
}

impl Cached {
    /// The rendered view `name`, rendering it once with `render`.
    pub fn view(
        &self,
        name: &'static str,
        render: impl FnOnce(&MapBlock) -> Vec<u8>,
    ) -> Arc<Vec<u8>> {
        self.views
            .get_or_render(name, || {
                let _rendering = one_at_a_time();
                render(&self.block)
            })
            .0
    }

    /// The content hash of the rendered view `name` (which times recorded for it are
    /// compared with), hashed once per decoded block: every stat of a file with a recorded
    /// time asks for it, and each commit re-checks every file of its block.
    pub fn view_hash(&self, name: &'static str, render: impl FnOnce(&MapBlock) -> Vec<u8>) -> u64 {
        if let Some(&h) = crate::error::recover(&self.view_hashes).get(name) {
            return h;
        }
        let h = content_hash(&self.view(name, render));
        crate::error::recover(&self.view_hashes).insert(name, h);
        h
    }
}

impl Cached {
    /// What is known of the block's stored bytes.
    pub fn stored(&self) -> Stored {
        Stored {
            mtime: self.mtime,
            hash: self.hash,
            from_seed: self.from_seed,
        }
    }

    /// Takes over the rendered views of `before` (another decoded block at the same
    /// position) that `same` names, with their hashes: the caller knows they render the
    /// same for this block. Views rendered here already are kept.
    pub fn keep_views_of(&self, before: &Cached, same: impl Fn(&'static str) -> bool) {
        let hashes = crate::error::recover(&before.view_hashes).clone();
        for (name, data) in before.views.rendered() {
            if !same(name) {
                continue;
            }
            self.views.keep(name, data);
            if let (Some(&h), Ok(mut mine)) = (hashes.get(name), self.view_hashes.lock()) {
                mine.entry(name).or_insert(h);
            }
        }
    }
}

impl Weigh for Cached {
    /// Weighed once, views included, so rendering a view does not change it.
    fn weight(&self) -> usize {
        self.weight
    }
}

/// What is known of a stored block without decoding it.
#[derive(Debug, Clone, Copy)]
pub struct Stored {
    /// See [`Cached::mtime`].
    pub mtime: SystemTime,
    /// The hash of the stored bytes.
    pub hash: u64,
    /// See [`Cached::from_seed`].
    pub from_seed: bool,
}

/// Blocks one worker of [`Blocks::edit_many`] is given at a time (fewer when they hold more
/// than `EDIT_JOB_BYTES`).
pub const EDIT_JOB: usize = 64;
/// Bytes of blobs one job of [`Blocks::edit_many`] holds at most (beyond its last blob).
const EDIT_JOB_BYTES: usize = 1 << 20;
/// Jobs of [`Blocks::edit_many`] in flight per worker (read and not yet streamed).
pub const EDIT_JOBS_PER_WORKER: usize = 2;

/// What one [`Blocks::edit_many`] committed.
pub struct Edited {
    /// The store's `data_version` just before the transaction and just after its commit.
    pub before: i64,
    pub after: i64,
    /// The blocks it changed.
    pub changed: Vec<BlockPos>,
    /// For each of them, in the same order: the hashes of its stored bytes before and
    /// after, and which of its folder's first 16 entries (in the order [`EntryChanges`]
    /// gives them) the edit changed, bit `i` for the `i`-th; `None` when a later one
    /// changed too.
    pub entries: Vec<(u64, u64, Option<u16>)>,
}

/// A job of [`edit_streamed`]: blocks and their stored blobs.
type Job = Vec<(BlockPos, Vec<u8>)>;
/// What a worker makes of a job: the blocks it changed (see [`EditedBlock`]).
type Done = Result<Vec<EditedBlock>>;

/// A block [`Blocks::edit_many`] changed.
struct EditedBlock {
    pos: BlockPos,
    /// Its new stored bytes.
    blob: Vec<u8>,
    /// The hashes of its stored bytes before and after.
    before: u64,
    after: u64,
    /// Every entry of its folder (paths inside it), with whether the edit changed it.
    entries: Vec<(String, bool)>,
}

/// How [`Blocks::edit_many`] edits a block (it returns whether it changed the block), and
/// the entries of the block's folder, each with whether an edit changed it, from the block
/// before and after.
pub struct BlockEdit<'a> {
    pub edit: &'a (dyn Fn(&mut MapBlock) -> bool + Sync),
    pub entries: &'a EntryChanges,
}

/// Every entry of a block's folder after an edit, with whether the edit changed it, from
/// the block before and after.
pub type EntryChanges = dyn Fn(&MapBlock, &MapBlock) -> Vec<(String, bool)> + Sync;

/// Decodes, edits and re-encodes the blocks of one job; the changed ones are returned.
fn edit_job(job: Job, how: &BlockEdit<'_>) -> Done {
    let mut done = Vec::new();
    for (pos, blob) in job {
        let Ok(before) = codec::decode_block(&blob) else {
            continue;
        };
        let before_hash = content_hash(&blob);
        drop(blob);
        let mut block = before.clone();
        if (how.edit)(&mut block) {
            let at = |e: Error| e.context(format!("block {},{},{}", pos.x, pos.y, pos.z));
            let blob = codec::encode_block(&block).map_err(at)?;
            // Versions 22 and 23 are stored as 25: the block as read back is what shows.
            if matches!(block.version, 22 | 23) {
                block = codec::decode_block(&blob).map_err(at)?;
            }
            done.push(EditedBlock {
                pos,
                after: content_hash(&blob),
                blob,
                before: before_hash,
                entries: (how.entries)(&before, &block),
            });
        }
    }
    Ok(done)
}

/// The hash an entry's time is recorded under for "whatever the entry's content, while the
/// block's stored bytes hash to `blob`": a whole-map edit dates the entries it changed so,
/// without rendering them (see [`Blocks::entry_mtime`]). A content hash equal to it by
/// chance is one in 2^64.
fn while_stored(blob: u64) -> u64 {
    blob ^ 0x7768_696c_6520_7374
}

/// The work of [`Blocks::edit_many`] inside its transaction: this thread reads the blocks
/// at `positions` from `stream` in jobs, `workers` threads edit them, and this thread puts
/// each changed block into `stream` as it comes back (and tells `changed` its position and
/// hash). At most `workers` × [`EDIT_JOBS_PER_WORKER`] jobs are in flight.
fn edit_streamed(
    stream: &mut dyn Stream,
    positions: &[BlockPos],
    how: &BlockEdit<'_>,
    workers: usize,
    progress: &dyn Fn(usize, usize),
    mut changed: impl FnMut(EditedBlock),
) -> Result<()> {
    let most = workers * EDIT_JOBS_PER_WORKER;
    let (job_tx, job_rx) = mpsc::sync_channel::<Job>(most);
    let job_rx = Mutex::new(job_rx);
    let (done_tx, done_rx) = mpsc::channel::<Done>();
    std::thread::scope(|s| {
        for _ in 0..workers {
            let (done_tx, job_rx) = (done_tx.clone(), &job_rx);
            s.spawn(move || loop {
                let job = match job_rx.lock() {
                    Ok(rx) => rx.recv(),
                    Err(_) => return,
                };
                let Ok(job) = job else { return };
                let done =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| edit_job(job, how)))
                        .unwrap_or_else(|_| Err(Error::corrupt("editing a block panicked")));
                if done_tx.send(done).is_err() {
                    return;
                }
            });
        }
        drop(done_tx);
        let result = feed(
            stream,
            positions,
            &job_tx,
            &done_rx,
            most,
            progress,
            &mut changed,
        );
        // The workers end once the jobs still queued are done.
        drop(job_tx);
        result
    })
}

/// The blocks of one map database.
pub struct Blocks {
    store: Arc<BlockStore>,
    /// Decoded blocks; one that weighs more than the whole cache is kept alone, and dropped
    /// before another block is decoded, so at most one such block is in memory at a time.
    cache: ObjectCache<BlockPos, Cached>,
    /// What the stats of the blocks shown last need, kept past the cache.
    summaries: Summaries,
    /// The hashes of stored blocks read in this generation (see [`StoredHashes`]).
    hashes: StoredHashes,
    mtimes: Mtimes,
    locks: Vec<Mutex<()>>,
    /// Per-block locks over the times recorded for a block's entries (see
    /// [`Blocks::times_lock`]), sharded.
    time_locks: Vec<Mutex<()>>,
    /// Counts [`Blocks::set_entry_mtimes`]: with the generation, what a stat computed from
    /// the store and the recorded times stands for (see [`Blocks::times_generation`]).
    times_set: AtomicU64,
    changes: Throttle,
    /// Reads of the map by [`Blocks::stored`] (tests of what a stat reads).
    #[cfg(test)]
    pub(crate) stored_reads: AtomicU64,
    /// Runs once in [`Blocks::stored`] after it read the map and before it notes what it
    /// read (tests of a commit racing a stat).
    #[cfg(test)]
    pub(crate) after_stored_read: crate::vfs::race_hook::RaceHook<Blocks>,
    /// Runs once at the end of a commit, after the store and the cache took it and before
    /// anything else looks at the database (tests of the interleaving).
    #[cfg(test)]
    pub(crate) in_commit: crate::vfs::race_hook::RaceHook<Blocks>,
    /// Runs once in [`Blocks::edit_many`] after it took the block locks and before its
    /// transaction begins (tests of another writer committing then).
    #[cfg(test)]
    pub(crate) before_edit: crate::vfs::race_hook::RaceHook<Blocks>,
}

/// Held while a block is decoded or one of its views rendered: the memory that takes (up to
/// the codec's limits: 12 MiB decompressed, 20 MiB with the rendered files) is then needed
/// once, not once per request thread (`find` and `cat` of a hostile world's blocks at once
/// held two, 74 MiB). Both are a small part of a walk's time (2.5x the read floor, against
/// a mount walk's 28x), and a block that misses the cache is decoded once, so walks by
/// several readers lose little. The whole-map work that runs on workers of its own (the
/// `index/` scans, a rename across the map) decodes beside it, one block per worker.
static HEAVY_WORK: Mutex<()> = Mutex::new(());

/// Waits for [`HEAVY_WORK`] (it guards no data, so a panic elsewhere does not stop it).
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    crate::error::recover(&HEAVY_WORK)
}

/// Gives memory freed by a large block, a whole-map scan or a rename back to the system.
/// glibc keeps freed small allocations (a block's thousands of objects or fields, the blocks
/// a scan's workers decoded on other threads) in its heaps; `malloc_trim` returns those
/// pages, so the daemon's memory follows what it holds (`--cache-size`) rather than the
/// largest work it ever did.
pub fn return_freed_memory() {
    // SAFETY: malloc_trim only releases free memory of the allocator; it is thread-safe.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    unsafe {
        libc::malloc_trim(0);
    }
}

/// What a cached block weighs: the memory its decoded form holds and what its views take
/// once rendered (they are cached with it), plus the entry itself. An error when that passes
/// [`MAX_BLOCK_COST`].
fn cost(block: &MapBlock) -> Result<usize> {
    let cost = block.memory() + views::rendered_size(block) + std::mem::size_of::<Cached>();
    if cost > MAX_BLOCK_COST {
        return Err(Error::corrupt(format!(
            "the block and its files would take {} MiB of memory ({} static objects); at most \
             {} MiB are allowed per block",
            cost >> 20,
            block.objects.len(),
            MAX_BLOCK_COST >> 20
        )));
    }
    Ok(cost)
}

fn shard(pos: BlockPos) -> usize {
    let h = (pos.x as u16 as usize).wrapping_mul(31)
        ^ (pos.y as u16 as usize).wrapping_mul(1009)
        ^ (pos.z as u16 as usize).wrapping_mul(7919);
    h % SHARDS
}

/// Reads the blocks at `positions` into jobs for the workers (see [`edit_streamed`]) and
/// puts what they send back into `stream`, keeping at most `most` jobs in flight.
fn feed(
    stream: &mut dyn Stream,
    positions: &[BlockPos],
    jobs: &mpsc::SyncSender<Job>,
    done: &mpsc::Receiver<Done>,
    most: usize,
    progress: &dyn Fn(usize, usize),
    changed: &mut dyn FnMut(EditedBlock),
) -> Result<()> {
    let mut in_flight = 0usize;
    let mut take = |stream: &mut dyn Stream, in_flight: &mut usize| -> Result<()> {
        let blocks = done
            .recv()
            .map_err(|_| Error::corrupt("the editing threads ended early"))??;
        *in_flight -= 1;
        for mut block in blocks {
            stream.put(block.pos, &block.blob)?;
            block.blob = Vec::new();
            changed(block);
        }
        Ok(())
    };
    let mut job = Vec::new();
    let mut bytes = 0;
    for (i, &pos) in positions.iter().enumerate() {
        if i % 1024 == 0 {
            progress(i, positions.len());
        }
        if let Some(blob) = stream.get(pos)? {
            bytes += blob.len();
            job.push((pos, blob));
        }
        if job.len() < EDIT_JOB && bytes < EDIT_JOB_BYTES && i + 1 < positions.len() {
            continue;
        }
        if job.is_empty() {
            continue;
        }
        if in_flight == most {
            take(stream, &mut in_flight)?;
        }
        jobs.send(std::mem::take(&mut job))
            .map_err(|_| Error::corrupt("the editing threads ended early"))?;
        in_flight += 1;
        bytes = 0;
    }
    while in_flight > 0 {
        take(stream, &mut in_flight)?;
    }
    progress(positions.len(), positions.len());
    Ok(())
}

/// A freshly created block: all air, generated, lighting to be computed by the engine.
pub fn new_block() -> MapBlock {
    MapBlock {
        version: 29,
        flags: 0,
        lighting_complete: 0,
        timestamp: u32::MAX,
        names: vec!["air".to_string()],
        content: vec![0; NODE_COUNT],
        param1: vec![0; NODE_COUNT],
        param2: vec![0; NODE_COUNT],
        metadata: Vec::new(),
        objects: Vec::new(),
        timers: Vec::new(),
    }
}

/// A block's stored bytes as they were at a reader's open (see [`Blocks::pin`]).
pub struct Pinned {
    blob: Vec<u8>,
    /// The hash of the bytes ([`content_hash`]).
    pub hash: u64,
}

impl Blocks {
    /// Blocks of `store`, caching up to `cache_bytes`: three sixteenths for block summaries
    /// (see [`crate::luanti::summaries`]), three sixteenths for the hashes of stored blocks
    /// read (see [`crate::luanti::stored_hashes`]), the rest (five eighths: 20 MiB of the
    /// default, as much as the largest block may take) for decoded blocks.
    pub fn new(store: MapStore, cache_bytes: usize, read_only: bool) -> Blocks {
        let summary_bytes = cache_bytes / 16 * 3;
        let hash_bytes = cache_bytes / 16 * 3;
        let mtimes = Mtimes::open(&store.identity(), read_only);
        let summaries = Summaries::weighing(summary_bytes, SummaryFile::open(&store.identity()));
        let store = BlockStore::new(store);
        // Marks of `block.txt` written through the mount reach the sidecar before the block.
        store.before_commit(mtimes.writer());
        Blocks {
            store,
            cache: ObjectCache::keeping_oversized(cache_bytes - summary_bytes - hash_bytes),
            summaries,
            hashes: StoredHashes::weighing(hash_bytes),
            mtimes,
            locks: (0..SHARDS).map(|_| Mutex::new(())).collect(),
            time_locks: (0..SHARDS).map(|_| Mutex::new(())).collect(),
            times_set: AtomicU64::new(0),
            changes: Throttle::new(Duration::from_millis(REFRESH_INTERVAL_MS)),
            #[cfg(test)]
            stored_reads: AtomicU64::new(0),
            #[cfg(test)]
            after_stored_read: Default::default(),
            #[cfg(test)]
            in_commit: Default::default(),
            #[cfg(test)]
            before_edit: Default::default(),
        }
    }

    /// A pair that changes whenever stored blocks or the times recorded for their entries
    /// may have changed (a time set on a block folder commits nothing): what a listing
    /// computed of both stands for. Take it before computing.
    pub fn times_generation(&self) -> (u64, u64) {
        (self.times_set.load(Ordering::SeqCst), self.generation())
    }

    /// A number that changes whenever stored blocks may have changed.
    pub fn generation(&self) -> u64 {
        self.cache.generation()
    }

    /// The underlying store.
    pub fn store(&self) -> &BlockStore {
        &self.store
    }

    /// The underlying store, shared (the index scans it and watches its commits).
    pub fn shared_store(&self) -> Arc<BlockStore> {
        self.store.clone()
    }

    /// Groups commits from now on (see [`BlockStore::write_back`]).
    pub fn write_back(&self, window: Window) -> Result<()> {
        self.store.write_back(window)
    }

    /// Starts a new generation when another writer changed the database since we last
    /// looked (on backends that cannot tell, our own commits count too: see
    /// `BlockStore::others_committed`): our pending changes are committed then (see
    /// [`BlockStore`] for the blocks both changed), and cached blocks are checked against
    /// their stored bytes on their next use.
    pub fn refresh(&self) {
        if !self.changes.due() {
            return;
        }
        if self.store.others_committed() {
            log::debug!("map database changed underneath; checking cached blocks on use");
            if let Err(e) = self.store.flush() {
                log::error!("committing pending blocks: {e}");
            }
            self.cache.changed_underneath();
        }
    }

    /// Looks whether the database changed underneath (see [`Blocks::refresh`]); the number
    /// returned changes whenever it did.
    pub fn underneath(&self) -> u64 {
        self.refresh();
        self.cache.underneath_seen()
    }

    /// Writes the waiting mtime records (see [`crate::storekit::mtimes`]) and block summaries
    /// (see [`crate::luanti::summary_file`]) to the sidecar now.
    pub fn flush_sidecars(&self) {
        self.mtimes.flush();
        self.summaries.flush();
    }

    /// The mtime of a block given its stored bytes.
    pub fn mtime_of(&self, pos: BlockPos, blob: &[u8]) -> SystemTime {
        self.mtimes
            .mtime(self.store.map().key_of(pos), content_hash(blob))
    }

    /// The decoded block at `pos`, or `Error::not_found`.
    pub fn get(&self, pos: BlockPos) -> Result<Arc<Cached>> {
        self.refresh();
        self.cache.get_or_load(
            &pos,
            || {
                let blob = self.store.read(pos)?.ok_or_else(|| {
                    Error::not_found(format!("no block at {},{},{}", pos.x, pos.y, pos.z))
                })?;
                let hash = content_hash(&blob);
                Ok((blob, hash))
            },
            |(_, hash)| *hash,
            |(blob, hash)| self.decode(pos, &blob, hash),
        )
    }

    /// Decodes stored bytes, first dropping the cached block that weighs more than the cache
    /// (if any) and giving its memory back to the system.
    fn decode(&self, pos: BlockPos, blob: &[u8], hash: u64) -> Result<Cached> {
        if self.cache.drop_oversized() {
            return_freed_memory();
        }
        let (block, weight) = self.decode_bounded(pos, blob)?;
        Ok(Cached {
            block,
            mtime: self.mtime_of(pos, blob),
            hash,
            views: Views::default(),
            view_hashes: Mutex::default(),
            weight,
            from_seed: self.store.map().seeded_at(pos)?,
        })
    }

    /// Refuses (`EROFS`) a change of the block at `pos` that no commit could store (a
    /// `readonly_backend` seed's).
    pub fn check_writable(&self, pos: BlockPos) -> Result<()> {
        self.store.map().check_writable(pos)
    }

    /// Decodes stored bytes under [`HEAVY_WORK`], with the decoded block's weight (refused
    /// past [`MAX_BLOCK_COST`]).
    fn decode_bounded(&self, pos: BlockPos, blob: &[u8]) -> Result<(MapBlock, usize)> {
        let decoded = {
            let _one = one_at_a_time();
            codec::decode_block(blob).and_then(|block| cost(&block).map(|w| (block, w)))
        };
        decoded.map_err(|e| {
            // What the failed decode allocated (up to the codec's bounds) is free again.
            return_freed_memory();
            e.context(format!("block {},{},{}", pos.x, pos.y, pos.z))
        })
    }

    /// The stored bytes of the block at `pos`, kept to be rendered later
    /// ([`Blocks::pinned_view`]): read, not decoded. `None`: no block there, or it is cached
    /// decoded and fresh (its views cost little to read now, and a reader holds only its
    /// view's text, not the decoded block).
    pub fn pin(&self, pos: BlockPos) -> Result<Option<Pinned>> {
        self.refresh();
        if let Lookup::Fresh(_) = self.cache.lookup(&pos).1 {
            return Ok(None);
        }
        Ok(self.store.read(pos)?.map(|blob| Pinned {
            hash: content_hash(&blob),
            blob,
        }))
    }

    /// The view `name` (rendered by `render`) of the block `pinned` holds: of the cached
    /// block when it is fresh and still those bytes, else of the bytes kept, decoded beside
    /// the cache (nothing is cached: the reader may be of a block changed since).
    pub fn pinned_view(
        &self,
        pos: BlockPos,
        pinned: &Pinned,
        name: &'static str,
        render: impl FnOnce(&MapBlock) -> Vec<u8>,
    ) -> Result<Arc<Vec<u8>>> {
        if let Lookup::Fresh(c) = self.cache.lookup(&pos).1 {
            if c.hash == pinned.hash {
                return Ok(c.view(name, render));
            }
        }
        let (block, _) = self.decode_bounded(pos, &pinned.blob)?;
        Ok(Arc::new(render(&block)))
    }

    /// Why the stored block at `pos` does not decode (`None`: it decodes; `ENOENT`: no
    /// block), decoded under [`HEAVY_WORK`] like every other decode of a request.
    pub fn decode_error(&self, pos: BlockPos) -> Result<Option<String>> {
        let blob = match self.store.read(pos) {
            Err(e) if e.is_stored_too_large() => return Ok(Some(e.to_string())),
            read => read?,
        }
        .ok_or_else(|| Error::not_found(format!("no block at {},{},{}", pos.x, pos.y, pos.z)))?;
        let _one = one_at_a_time();
        Ok(codec::decode_block(&blob).err().map(|e| e.to_string()))
    }

    /// What a block folder's stat needs of the block stored at `pos` (`None`: no block
    /// there): of the cached block when it is fresh, else what was seen of its stored bytes
    /// in this generation of the cache (see [`StoredHashes`]), else of its stored bytes,
    /// without decoding them.
    pub fn stored(&self, pos: BlockPos) -> Result<Option<Stored>> {
        self.refresh();
        let generation = self.generation();
        if let Lookup::Fresh(c) = self.cache.lookup(&pos).1 {
            return Ok(Some(Stored {
                mtime: c.mtime,
                hash: c.hash,
                from_seed: c.from_seed,
            }));
        }
        if let Some(seen) = self.hashes.get(pos, generation) {
            return Ok(Some(Stored {
                mtime: self.mtimes.mtime(self.store.map().key_of(pos), seen.hash),
                hash: seen.hash,
                from_seed: seen.from_seed,
            }));
        }
        #[cfg(test)]
        self.stored_reads.fetch_add(1, Ordering::SeqCst);
        let blob = match self.store.read(pos) {
            // Too large to read: shown as a broken block (its error.txt says why), whose
            // stat is made of the reason (it changes when the stored length does).
            Err(e) if e.is_stored_too_large() => {
                return Ok(Some(Stored {
                    mtime: UNIX_EPOCH,
                    hash: content_hash(e.message().as_bytes()),
                    from_seed: false,
                }))
            }
            read => read?,
        };
        let Some(blob) = blob else {
            self.summaries.forget(pos);
            return Ok(None);
        };
        let stored = Stored {
            mtime: self.mtime_of(pos, &blob),
            hash: content_hash(&blob),
            from_seed: self.store.map().seeded_at(pos)?,
        };
        let seen = Seen {
            hash: stored.hash,
            from_seed: stored.from_seed,
        };
        #[cfg(test)]
        self.after_stored_read.run(self);
        self.hashes.put(pos, generation, seen);
        if self
            .summaries
            .get(pos)
            .is_some_and(|s| s.hash != stored.hash)
        {
            self.summaries.forget(pos);
        }
        Ok(Some(stored))
    }

    /// The summary of the block at `pos` (see [`crate::luanti::summaries`]) with what
    /// [`Blocks::stored`] tells, when the block's stored bytes are those it was computed
    /// from; `None` when there is none or they changed. The stored bytes are read again only
    /// once per generation of the cache (every commit of ours, and every change of another
    /// writer [`Blocks::refresh`] sees, starts one), and not at all while the block is cached.
    pub fn summary(&self, pos: BlockPos) -> Result<Option<(Stored, Summary)>> {
        let Some(s) = self.summaries.get(pos) else {
            return Ok(None);
        };
        Ok(self
            .stored(pos)?
            .filter(|stored| stored.hash == s.hash)
            .map(|stored| (stored, s)))
    }

    /// How many blocks are cached decoded (tests of what decodes).
    #[cfg(test)]
    pub(crate) fn decoded(&self) -> usize {
        self.cache.len()
    }

    /// Keeps the block summaries in `file` from now on (tests, which cannot share the state
    /// directory's environment variable).
    #[cfg(test)]
    pub(crate) fn keep_summaries_in(&mut self, file: Option<SummaryFile>) {
        self.summaries = Summaries::keeping(1000, file);
    }

    /// Drops every cached decoded block, as the cache does under pressure (tests).
    #[cfg(test)]
    pub(crate) fn drop_decoded(&self) {
        self.cache.clear();
    }

    /// Adds what `fill` notes to the summary of the decoded block `c` at `pos`. While `c` is
    /// the cached block and fresh, its stored hash counts as seen in this generation (the
    /// next pass over an unchanged world reads no stored bytes to use the summary).
    pub fn summarize(&self, pos: BlockPos, c: &Cached, fill: impl FnOnce(&mut Summary)) {
        let generation = self.generation();
        let fresh = matches!(self.cache.lookup(&pos).1, Lookup::Fresh(f) if std::ptr::eq(&*f, c));
        // Whether the block comes from the seed is asked again: a cached block kept across
        // another writer's change of the same bytes (deleted from the main map, left in the
        // seed) may tell it from before.
        // (Once per generation: the stats of a block folder's entries each add to it.)
        let known = self
            .hashes
            .get(pos, generation)
            .is_some_and(|seen| seen.hash == c.hash);
        if fresh && !known {
            if let Ok(from_seed) = self.store.map().seeded_at(pos) {
                let seen = Seen {
                    hash: c.hash,
                    from_seed,
                };
                self.hashes.put(pos, generation, seen);
            }
        }
        self.summaries.note(pos, c.hash, fill);
    }

    /// Held while the times recorded for the entries of the block at `pos` are read and
    /// written back around an edit, and while a time is set on one of them: an edit that
    /// keeps the times of the entries it leaves unchanged must not write back a time that
    /// was set meanwhile (rsync sets a folder's time while it still writes in the block).
    /// Taken before the block's own lock, never while holding it.
    pub fn times_lock(&self, pos: BlockPos) -> Result<std::sync::MutexGuard<'_, ()>> {
        crate::error::lock_named(&self.time_locks[shard(pos)], "block times")
    }

    fn lock(&self, pos: BlockPos) -> Result<std::sync::MutexGuard<'_, ()>> {
        crate::error::lock_named(&self.locks[shard(pos)], "block")
    }

    fn commit(&self, changes: Vec<(BlockPos, Option<MapBlock>)>, mtime: SystemTime) -> Result<()> {
        let mut encoded: Vec<Change> = Vec::with_capacity(changes.len());
        for (pos, block) in &changes {
            let at = || format!("block {},{},{}", pos.x, pos.y, pos.z);
            let blob = match block {
                Some(b) => {
                    // What the mount writes it must read back: the read's bound on a block's
                    // memory is the write's too.
                    cost(b).map_err(|e| Error::new(libc::EFBIG, e.message()).context(at()))?;
                    Some(codec::encode_block(b).map_err(|e| e.context(at()))?)
                }
                None => None,
            };
            encoded.push((*pos, blob));
        }
        self.commit_encoded(encoded, mtime)
    }

    /// Commits encoded blocks (see [`Blocks::commit`]).
    fn commit_encoded(&self, encoded: Vec<Change>, mtime: SystemTime) -> Result<()> {
        let positions: Vec<BlockPos> = encoded.iter().map(|(pos, _)| *pos).collect();
        let hashes: Vec<(u64, u64)> = encoded
            .iter()
            .filter_map(|(pos, blob)| {
                let blob = blob.as_ref()?;
                Some((self.store.map().key_of(*pos), content_hash(blob)))
            })
            .collect();
        self.store.commit(encoded)?;
        // Times first: a reader that decodes a committed block from here on finds its time.
        for (key, hash) in hashes {
            self.mtimes.record(key, hash, mtime);
        }
        // Another writer's commit before or just after ours is not hidden by ours: the store
        // leaves it for the next `refresh` to see (see `BlockStore::others_committed`).
        self.cache.committed(positions.iter());
        #[cfg(test)]
        self.in_commit.run(self);
        Ok(())
    }

    /// Applies `edit` to stored blocks (it returns whether it changed the block) and
    /// commits every changed block in one transaction (all or nothing), returning when
    /// committed; blocks it leaves unchanged keep their stored bytes, and blocks that do not
    /// decode are left as they are. Pending changes are committed first, and every block
    /// lock is held throughout, so no edit through the mount interleaves.
    ///
    /// The blocks are `positions(before)`, asked once the transaction keeps other writers
    /// out (`before`: the store's `data_version` then), so they are the right ones for the
    /// store as it is edited. Each is read once, decoded, edited and re-encoded by worker
    /// threads (one per core) and streamed into the transaction as it comes
    /// ([`BlockStore::commit_stream`]): at most [`EDIT_JOBS_PER_WORKER`] jobs of
    /// [`EDIT_JOB`] blocks per worker are held at once, whatever the number of blocks
    /// (what the store holds until the commit is the backend's: see
    /// [`MapBackend::commit_stream`](crate::luanti::store::map::MapBackend::commit_stream)). `progress` is told how many blocks of how many were
    /// looked at; `committed` is told what was committed, before the locks are released.
    /// Returns how many blocks changed.
    ///
    /// Times: a changed block's folder gets the time of the commit; in it, the entries
    /// `how.entries` names get it too, and every other entry keeps the time it showed, so
    /// the next incremental backup sends only the files whose content changed.
    pub fn edit_many(
        &self,
        positions: impl FnOnce(i64) -> Result<Vec<BlockPos>>,
        how: &BlockEdit<'_>,
        progress: impl Fn(usize, usize),
        committed: impl FnOnce(&Edited),
    ) -> Result<usize> {
        let _all = self
            .locks
            .iter()
            .map(|l| crate::error::lock_named(l, "block"))
            .collect::<Result<Vec<_>>>()?;
        #[cfg(test)]
        self.before_edit.run(self);
        let mut changed = Vec::new();
        let mut entries = Vec::new();
        // The times to record once committed, made as each block comes back (its list of
        // entries is not kept): those of the edit's moment as (key, hash), the others with
        // their time. The block keeps its time, which its unchanged entries show; its folder
        // and the entries the edit changed show the edit's. An unchanged entry dated by an
        // earlier whole-map edit keeps that date.
        let now = SystemTime::now();
        let mut dated_now: Vec<(Key, u64)> = Vec::new();
        let mut kept: Vec<(Key, u64, SystemTime)> = Vec::new();
        let workers = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2)
            .max(2);
        let (before, after) = self.store.commit_stream(|before, stream| {
            // In the store's order: neighbours share pages, read and written once each.
            let mut positions = positions(before)?;
            positions.sort_by_key(|p| self.store.map().key_of(*p));
            edit_streamed(stream, &positions, how, workers, &progress, |e| {
                let key = Key::from(self.store.map().key_of(e.pos));
                kept.push((key, e.after, self.mtimes.mtime(key, e.before)));
                dated_now.push((self.entry_key(e.pos, ""), e.after));
                let mut first = Some(0u16);
                for (i, (sub, changed)) in e.entries.iter().enumerate() {
                    let entry = self.entry_key(e.pos, sub);
                    if *changed {
                        first = first.and_then(|bits| (i < 16).then(|| bits | 1 << i));
                        dated_now.push((entry, while_stored(e.after)));
                    } else if let Some(t) = self.mtimes.recorded(entry, while_stored(e.before)) {
                        kept.push((entry, while_stored(e.after), t));
                    }
                }
                changed.push(e.pos);
                entries.push((e.before, e.after, first));
            })
        })?;
        self.mtimes.record_all(&kept);
        drop(kept);
        for chunk in dated_now.chunks(4096) {
            let records: Vec<_> = chunk.iter().map(|&(k, h)| (k, h, now)).collect();
            self.mtimes.record_all(&records);
        }
        drop(dated_now);
        self.cache.committed(changed.iter());
        return_freed_memory();
        let edited = Edited {
            before,
            after,
            changed,
            entries,
        };
        committed(&edited);
        Ok(edited.changed.len())
    }

    /// Applies `edit` to the current block at `pos` and commits it if anything changed.
    pub fn modify(
        &self,
        pos: BlockPos,
        edit: impl FnOnce(&mut MapBlock) -> Result<()>,
    ) -> Result<()> {
        let _guard = self.lock(pos)?;
        let current = self.get(pos)?;
        let mut block = current.block.clone();
        edit(&mut block)?;
        if block == current.block {
            return Ok(());
        }
        self.commit(vec![(pos, Some(block))], SystemTime::now())
    }

    /// Stores a new all-air block at `pos`; fails if one exists.
    pub fn create(&self, pos: BlockPos) -> Result<()> {
        let _guard = self.lock(pos)?;
        if self.store.get(pos)?.is_some() {
            return Err(Error::exists(format!(
                "block {},{},{} exists",
                pos.x, pos.y, pos.z
            )));
        }
        self.commit(vec![(pos, Some(new_block()))], SystemTime::now())
    }

    /// Deletes the block at `pos` (the engine regenerates it).
    pub fn delete(&self, pos: BlockPos) -> Result<()> {
        let _guard = self.lock(pos)?;
        // A block too large to read exists all the same, and is removed like any other.
        let exists = match self.store.get(pos) {
            Err(e) if e.is_stored_too_large() => true,
            got => got?.is_some(),
        };
        if !exists {
            return Err(Error::not_found(format!(
                "no block at {},{},{}",
                pos.x, pos.y, pos.z
            )));
        }
        self.commit(vec![(pos, None)], SystemTime::now())
    }

    /// Moves the block at `from` to `to` in one transaction, shifting its static objects.
    pub fn rename(&self, from: BlockPos, to: BlockPos) -> Result<()> {
        let (_a, _b) = if shard(from) == shard(to) {
            (self.lock(from)?, None)
        } else if shard(from) < shard(to) {
            let a = self.lock(from)?;
            (a, Some(self.lock(to)?))
        } else {
            let b = self.lock(to)?;
            (self.lock(from)?, Some(b))
        };
        if self.store.get(to)?.is_some() {
            return Err(Error::exists(format!(
                "block {},{},{} exists",
                to.x, to.y, to.z
            )));
        }
        let mut block = self.get(from)?.block.clone();
        let shift = |a: i16, b: i16| (i32::from(b) - i32::from(a)) * 16 * 10_000;
        let d = [
            shift(from.x, to.x),
            shift(from.y, to.y),
            shift(from.z, to.z),
        ];
        for o in &mut block.objects {
            for (p, dp) in o.pos.iter_mut().zip(d) {
                *p = p.saturating_add(dp);
            }
        }
        let mtime = self.get(from)?.mtime;
        self.commit(vec![(to, Some(block)), (from, None)], mtime)
    }

    /// Whether a time is recorded for the entry `sub` of the block's folder (when none is,
    /// its time is the block's, and its content need not be hashed).
    pub fn entry_recorded(&self, pos: BlockPos, sub: &str) -> bool {
        self.mtimes.has(self.entry_key(pos, sub))
    }

    /// The sidecar key of entry `sub` of the block at `pos`: an item of the block's group
    /// (its store key, the key of the block's own record), the hash of `"{store key}/{sub}"`
    /// built on the stack (asked on every stat of a block's file).
    fn entry_key(&self, pos: BlockPos, sub: &str) -> Key {
        let mut digits = [0u8; 20];
        let mut rest = &mut digits[..];
        // A u64 has at most 20 decimal digits: the write always fits.
        let _ = write!(rest, "{}", self.store.map().key_of(pos));
        let len = 20 - rest.len();
        Key::item(
            self.store.map().key_of(pos),
            content_hash_parts(&[&digits[..len], b"/", sub.as_bytes()]),
        )
    }

    /// The mtime of an entry of the folder of a block whose own time is `block.mtime`: `sub`
    /// is the entry's path inside the folder (`""` for the folder itself), `hash` the hash of
    /// a file's content or of a folder's listing. An entry keeps a time set on it (rsync,
    /// touch, or kept through an edit of another file) while that hash is unchanged, and a
    /// time a whole-map edit gave it while the block's stored bytes are the ones it left
    /// ([`Blocks::edit_many`]); otherwise it shows the block's time.
    pub fn entry_mtime(&self, pos: BlockPos, block: &Stored, sub: &str, hash: u64) -> SystemTime {
        self.entry_recorded_mtime(pos, block.hash, sub, hash)
            .unwrap_or(block.mtime)
    }

    /// The time recorded for the entry `sub` of the block's folder while its hash is
    /// `hash` and the block's stored bytes hash to `blob`, if one is (see
    /// [`Blocks::entry_mtime`]).
    pub fn entry_recorded_mtime(
        &self,
        pos: BlockPos,
        blob: u64,
        sub: &str,
        hash: u64,
    ) -> Option<SystemTime> {
        let key = self.entry_key(pos, sub);
        self.mtimes
            .recorded(key, hash)
            .or_else(|| self.mtimes.recorded(key, while_stored(blob)))
    }

    /// Records that a `block.txt` written through the mount left the block at `pos` in the
    /// state hashing to `state` (kept with the recorded times, under a key no entry has).
    pub fn mark_header_written(&self, pos: BlockPos, state: u64) {
        // Written before the block's commit reaches the store (the store writes the waiting
        // records first, see `Blocks::new`), not only with the records' own groups: the
        // commit may reach the store before a kill, and a restore run again after it
        // rewrites an unchanged block.txt, which marks nothing, so a lost mark would let
        // its nodes.cubeset clear the lighting flags (mount test 17).
        self.mtimes
            .record(self.entry_key(pos, HEADER_MARK), state, SystemTime::now());
    }

    /// Whether a `block.txt` written through the mount left the block at `pos` in the state
    /// hashing to `state`, as it still is.
    pub fn header_written_over(&self, pos: BlockPos, state: u64) -> bool {
        self.mtimes
            .recorded(self.entry_key(pos, HEADER_MARK), state)
            .is_some()
    }

    /// Records explicit mtimes for entries of the block's folder: `(sub, hash, time)`, as in
    /// [`Blocks::entry_mtime`].
    pub fn set_entry_mtimes(&self, pos: BlockPos, entries: &[(String, u64, SystemTime)]) {
        let records: Vec<(Key, u64, SystemTime)> = entries
            .iter()
            .map(|(sub, hash, t)| (self.entry_key(pos, sub), *hash, *t))
            .collect();
        self.mtimes.record_all(&records);
        self.times_set.fetch_add(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::luanti::codec::block::{MetaVar, NodeMeta, RelPos};
    use crate::luanti::test_map::{blob, map_with, memory_with};

    fn pos(x: i16, y: i16, z: i16) -> BlockPos {
        BlockPos { x, y, z }
    }

    /// Issue 37: a reader's open keeps the stored bytes of a block that is not cached, and
    /// its view is rendered from them later, whatever was committed meanwhile; a block
    /// cached decoded and fresh is not pinned (its views are read at the open).
    #[test]
    fn a_pinned_block_renders_the_view_of_its_bytes_after_a_change() {
        let p = pos(0, 0, 0);
        let blocks = Blocks::new(memory_with(&[(p, "test:a")]), 1 << 20, false);
        let names = |b: &MapBlock| b.names.join(",").into_bytes();
        let pinned = blocks.pin(p).expect("read").expect("not cached: pinned");
        blocks
            .modify(p, |b| {
                b.names = vec!["test:b".to_string()];
                Ok(())
            })
            .expect("modify");
        let view = blocks
            .pinned_view(p, &pinned, "names", names)
            .expect("view");
        assert_eq!(&*view, b"test:a");
        assert_eq!(&*blocks.get(p).expect("now").block.names, ["test:b"]);
        assert!(blocks.pin(p).expect("read").is_none(), "cached and fresh");
        let view = blocks
            .pinned_view(p, &pinned, "names", names)
            .expect("view");
        assert_eq!(&*view, b"test:a", "not the cached block of other bytes");
        let now = blocks.pinned_view(
            p,
            &Pinned {
                blob: blob("test:c"),
                hash: 0,
            },
            "names",
            names,
        );
        assert_eq!(&*now.expect("view"), b"test:c");
    }

    /// Issue "Nothing lost", point 10: a block is weighed by what it holds, so blocks
    /// with tens of thousands of objects do not pile up in a cache sized for a few of them.
    #[test]
    fn the_cache_weighs_blocks_by_what_they_hold() {
        use crate::luanti::codec::block::{LuaEntity, ObjectData, StaticObject};
        let mut crowded = new_block();
        crowded.objects = (0..30_000)
            .map(|i| StaticObject {
                kind: 7,
                pos: [i, 0, 0],
                data: ObjectData::LuaEntity(LuaEntity {
                    name: "mobs:sheep".into(),
                    state: Vec::new(),
                    hp: 1,
                    velocity: [0; 3],
                    yaw: 0,
                    extra: None,
                }),
            })
            .collect();
        let blob = codec::encode_block(&crowded).expect("encodes");
        assert!(blob.len() < 100_000, "{} bytes on disk", blob.len());
        let positions: Vec<BlockPos> = (0..4).map(|x| pos(x, 0, 0)).collect();
        let writer = memory_with(&[]);
        writer
            .commit(
                &positions
                    .iter()
                    .map(|p| (*p, Some(blob.clone())))
                    .collect::<Vec<_>>(),
            )
            .expect("commit");
        let blocks = Blocks::new(writer, 8 << 20, false);
        for p in &positions {
            let c = blocks.get(*p).expect("decodes");
            assert!(cost(&c.block).expect("allowed") > 8 << 20);
        }
        assert_eq!(blocks.cache.len(), 1, "only the last block fits");
    }

    /// What the mount writes it reads back: a field value that would store the block in more
    /// bytes than a read takes (incompressible, under the decompressed bound) is refused at
    /// the write with `EFBIG`, and the stored block stays as it was.
    #[test]
    fn a_block_too_large_to_read_back_is_refused_at_the_write() {
        let p = pos(0, 0, 0);
        let before = blob("air");
        let blocks = Blocks::new(memory_with(&[(p, "air")]), 32 << 20, false);
        // xorshift bytes: zstd cannot shrink them.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let noise: Vec<u8> = (0..codec::MAX_STORED + (1 << 20))
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        assert!(noise.len() < codec::MAX_DECOMPRESSED);
        let e = blocks
            .modify(p, |b| {
                b.metadata = vec![NodeMeta {
                    pos: RelPos::from_index(1).expect("a node"),
                    vars: vec![MetaVar {
                        key: b"text".to_vec(),
                        value: noise,
                        private: false,
                    }],
                    inventory: Default::default(),
                }];
                Ok(())
            })
            .unwrap_err();
        assert_eq!(e.errno(), libc::EFBIG, "{e}");
        assert!(e.message().contains("at most 8388608 are read back"), "{e}");
        assert_eq!(
            blocks.store.get(p).expect("read").as_deref(),
            Some(&before[..])
        );
    }

    /// Sidecars written before keys were built on the stack, or grouped, keep their meaning:
    /// an entry's item is still the hash of `"{store key}/{entry}"`, for the largest and
    /// smallest store keys, in the group of the block's own record.
    #[test]
    fn entry_keys_are_the_hash_of_the_store_key_and_the_entry() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("map.sqlite");
        rusqlite::Connection::open(&path)
            .and_then(|c| c.execute("CREATE TABLE blocks (pos INT PRIMARY KEY, data BLOB)", []))
            .expect("a map database");
        let blocks = Blocks::new(MapStore::open(&path, false).expect("map"), 1 << 20, false);
        for p in [
            pos(0, 0, 0),
            pos(-2048, -2048, -2048),
            pos(2047, 2047, 2047),
            pos(3, -7, 11),
        ] {
            for sub in ["", "nodes.cubeset", "meta/1,2,3/fields/text", "m\u{e9}ta"] {
                let key = blocks.store.map().key_of(p);
                let joined = format!("{key}/{sub}");
                assert_eq!(
                    blocks.entry_key(p, sub),
                    Key::item(key, content_hash(joined.as_bytes()))
                );
            }
        }
    }

    /// A summary made from the cached block while it is fresh notes its stored hash as seen
    /// in the generation (a later stat reads no stored bytes); one made from a block that is
    /// no longer the cached one does not, and one for other bytes is not used.
    #[test]
    fn a_summary_of_the_fresh_cached_block_counts_as_checked() {
        let blocks = Blocks::new(memory_with(&[(pos(0, 0, 0), "test:a")]), 1 << 20, false);
        let p = pos(0, 0, 0);
        let c = blocks.get(p).expect("decoded");
        blocks.summarize(p, &c, |s| s.set_view(0, 10, None));
        assert_eq!(
            blocks.hashes.get(p, blocks.generation()).map(|s| s.hash),
            Some(c.hash)
        );
        assert_eq!(
            blocks.summary(p).expect("summary").map(|(st, _)| st.hash),
            Some(c.hash)
        );

        blocks
            .modify(p, |b| {
                b.timestamp = 7;
                Ok(())
            })
            .expect("a commit");
        blocks.summarize(p, &c, |s| s.set_view(1, 10, None));
        let s = blocks.summaries.get(p).expect("summarized");
        assert_eq!(s.hash, c.hash);
        assert_eq!(
            blocks.hashes.get(p, blocks.generation()),
            None,
            "c is not the cached block now"
        );
        assert!(
            blocks.summary(p).expect("summary").is_none(),
            "the stored bytes changed"
        );
    }

    /// What a stat saw of the stored bytes is used in place of reading them again, while the
    /// generation holds: after our commit and after another writer's change (once seen) the
    /// stat reads the store again and shows the new bytes, with no decoded block or summary
    /// to tell it.
    #[test]
    fn a_stat_reads_the_stored_bytes_once_per_generation() {
        let p = pos(0, 0, 0);
        let (_dir, path) = map_with(&[(p, "default:stone")]);
        let blocks = Blocks::new(MapStore::open(&path, false).expect("ours"), 1 << 20, false);
        let hash_now = |blocks: &Blocks| blocks.stored(p).expect("stored").map(|s| s.hash);
        let reads = |blocks: &Blocks| blocks.stored_reads.load(Ordering::SeqCst);
        let first = hash_now(&blocks);
        assert_eq!(first, Some(content_hash(&blob("default:stone"))));
        assert_eq!((hash_now(&blocks), reads(&blocks)), (first, 1), "read once");
        blocks
            .modify(p, |b| {
                b.names = vec!["default:cobble".to_string()];
                Ok(())
            })
            .expect("our commit");
        assert_eq!(blocks.decoded(), 0, "the commit drops the decoded block");
        let ours = hash_now(&blocks);
        assert!(ours.is_some() && ours != first, "our commit shows");
        assert_eq!((hash_now(&blocks), reads(&blocks)), (ours, 2));
        MapStore::open(&path, false)
            .expect("another writer")
            .commit(&[(p, Some(blob("default:sand")))])
            .expect("outside commit");
        std::thread::sleep(Duration::from_millis(REFRESH_INTERVAL_MS + 30));
        let theirs = Some(content_hash(&blob("default:sand")));
        assert_eq!(hash_now(&blocks), theirs, "another writer's change shows");
        assert_eq!((hash_now(&blocks), reads(&blocks)), (theirs, 3));
    }

    /// A stat whose read of the store raced our commit of the block does not keep what it
    /// read: the next stat reads again and shows the commit.
    #[test]
    fn a_stat_racing_our_commit_does_not_keep_what_it_read() {
        let p = pos(0, 0, 0);
        let (_dir, path) = map_with(&[(p, "default:stone")]);
        let blocks = Blocks::new(MapStore::open(&path, false).expect("ours"), 1 << 20, false);
        blocks.after_stored_read.set(move |blocks: &Blocks| {
            blocks
                .modify(p, |b| {
                    b.names = vec!["default:cobble".to_string()];
                    Ok(())
                })
                .expect("our commit");
        });
        let raced = blocks.stored(p).expect("stored").map(|s| s.hash);
        assert_eq!(raced, Some(content_hash(&blob("default:stone"))));
        let now = blocks.stored(p).expect("stored").map(|s| s.hash);
        assert!(now.is_some() && now != raced, "the commit shows");
        assert_eq!(blocks.stored_reads.load(Ordering::SeqCst), 2);
    }

    /// Whether a block comes from the seed is asked again for its summary: a block kept
    /// cached across another writer's deletion of its main row (the seed holds the same
    /// bytes) still says "main", and its summary must not carry that past the cache.
    #[test]
    fn a_summary_asks_again_whether_the_block_comes_from_the_seed() {
        let dir = tempfile::tempdir().expect("temp dir");
        let world = dir.path();
        std::fs::write(
            world.join("world.mt"),
            "backend = sqlite3\nreadonly_backend = sqlite3\n",
        )
        .expect("world.mt");
        std::fs::create_dir(world.join("readonly")).expect("readonly/");
        let p = pos(0, 0, 0);
        for map in [world.join("map.sqlite"), world.join("readonly/map.sqlite")] {
            let c = rusqlite::Connection::open(&map).expect("a map");
            c.execute("CREATE TABLE blocks (pos INT PRIMARY KEY, data BLOB)", [])
                .expect("table");
            drop(c);
            MapStore::open(&map, false)
                .expect("writer")
                .commit(&[(p, Some(blob("test:a")))])
                .expect("the same block in both");
        }
        let blocks = Blocks::new(MapStore::open(world, true).expect("seeded"), 1 << 20, true);
        let c = blocks.get(p).expect("decoded");
        assert!(!c.from_seed);
        rusqlite::Connection::open(world.join("map.sqlite"))
            .and_then(|m| m.execute("DELETE FROM blocks", []))
            .expect("another writer deletes the main row");
        std::thread::sleep(Duration::from_millis(REFRESH_INTERVAL_MS + 30));
        let kept = blocks.get(p).expect("the same bytes, from the seed now");
        assert!(
            Arc::ptr_eq(&c, &kept) && !kept.from_seed,
            "the cached block says main"
        );
        blocks.summarize(p, &kept, |s| s.set_view(0, 1, None));
        assert_eq!(
            blocks.hashes.get(p, blocks.generation()),
            Some(Seen {
                hash: kept.hash,
                from_seed: true
            })
        );
        blocks.drop_decoded();
        assert!(
            blocks
                .stored(p)
                .expect("stored")
                .is_some_and(|s| s.from_seed),
            "a stat past the cache says the seed"
        );
    }

    #[test]
    fn another_writers_commit_keeps_unchanged_cached_blocks_only() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("map.sqlite");
        rusqlite::Connection::open(&path)
            .and_then(|c| c.execute("CREATE TABLE blocks (pos INT PRIMARY KEY, data BLOB)", []))
            .expect("a map database");
        let (a, b, c) = (pos(0, 0, 0), pos(1, 0, 0), pos(0, -1, 3));
        let writer = MapStore::open(&path, false).expect("writer");
        writer
            .commit(&[
                (a, Some(blob("default:stone"))),
                (b, Some(blob("default:dirt"))),
                (c, Some(blob("default:sand"))),
            ])
            .expect("first commit");
        let blocks = Blocks::new(MapStore::open(&path, true).expect("reader"), 1 << 20, true);
        let (a1, b1) = (blocks.get(a).expect("a"), blocks.get(b).expect("b"));
        assert!(blocks.get(c).is_ok());
        let before = blocks.generation();

        // Another writer changes a and deletes c; b keeps its bytes.
        writer
            .commit(&[(a, Some(blob("default:water_source"))), (c, None)])
            .expect("outside commit");
        std::thread::sleep(Duration::from_millis(REFRESH_INTERVAL_MS + 30));

        let b2 = blocks.get(b).expect("b again");
        assert!(blocks.generation() > before, "the outside commit was seen");
        assert!(Arc::ptr_eq(&b1, &b2), "b was kept, not decoded again");
        let a2 = blocks.get(a).expect("a again");
        assert!(!Arc::ptr_eq(&a1, &a2));
        assert_eq!(a2.block.names, vec!["default:water_source".to_string()]);
        let gone = blocks.get(c).err().expect("c was deleted");
        assert_eq!(gone.errno(), libc::ENOENT);
        assert!(blocks.stored(c).expect("stored").is_none());
        assert!(blocks.stored(b).expect("stored").is_some());
    }

    /// Our own commits, at once or written back, are not taken for another writer's: the
    /// cached blocks they left alone stay as they are. Another writer's commit is still
    /// seen.
    /// A `block.txt` mark is on disk when the group holding its block's change commits, not
    /// only when the recorded times' own group is written (a kill right after the commit
    /// would otherwise lose it: mount test 17).
    #[test]
    fn a_header_mark_reaches_the_sidecar_before_its_blocks_commit() {
        let a = pos(2, 0, 0);
        let (_dir, path) = map_with(&[(a, "default:stone")]);
        let blocks = Blocks::new(MapStore::open(&path, false).expect("ours"), 1 << 20, false);
        blocks
            .write_back(Window {
                quiet: Duration::from_secs(60),
                longest: Duration::from_secs(60),
            })
            .expect("writes back");
        blocks.mark_header_written(a, 42);
        blocks
            .modify(a, |b| {
                b.timestamp = 5;
                Ok(())
            })
            .expect("pending");
        blocks.store().flush().expect("commits");
        let reader = Blocks::new(MapStore::open(&path, true).expect("reader"), 1 << 20, true);
        assert!(reader.header_written_over(a, 42));
        assert!(!reader.header_written_over(a, 43));
    }

    #[test]
    fn our_own_commits_leave_the_cache_alone() {
        let (a, b) = (pos(0, 0, 0), pos(1, 0, 0));
        let (_dir, path) = map_with(&[(a, "default:stone"), (b, "default:dirt")]);
        let blocks = Blocks::new(MapStore::open(&path, false).expect("ours"), 1 << 20, false);
        let b1 = blocks.get(b).expect("b");
        let before = blocks.underneath();
        let set = |name: &str| {
            blocks
                .modify(a, |block| {
                    block.names = vec![name.to_string()];
                    Ok(())
                })
                .expect("our commit");
        };
        set("default:cobble");
        std::thread::sleep(Duration::from_millis(REFRESH_INTERVAL_MS + 30));
        assert!(Arc::ptr_eq(&b1, &blocks.get(b).expect("b")));
        assert_eq!(blocks.underneath(), before, "a commit at once");

        blocks
            .write_back(Window {
                quiet: Duration::from_millis(20),
                longest: Duration::from_secs(30),
            })
            .expect("write-back");
        set("default:wood");
        std::thread::sleep(Duration::from_millis(REFRESH_INTERVAL_MS + 100));
        assert!(
            blocks.store().pending().is_empty(),
            "committed by the window"
        );
        assert!(Arc::ptr_eq(&b1, &blocks.get(b).expect("b")));
        assert_eq!(blocks.underneath(), before, "a written-back commit");
        assert_eq!(blocks.get(a).expect("a").block.names, ["default:wood"]);

        MapStore::open(&path, false)
            .expect("another writer")
            .commit(&[(b, Some(blob("default:sand")))])
            .expect("outside commit");
        std::thread::sleep(Duration::from_millis(REFRESH_INTERVAL_MS + 30));
        assert_eq!(blocks.get(b).expect("b").block.names, ["default:sand"]);
        assert!(blocks.underneath() > before);
    }

    /// Another writer's commit just before one of ours is not hidden by ours: our commit
    /// reads the database's new `data_version`, which includes the other commit.
    #[test]
    fn another_writers_commit_just_before_ours_is_still_seen() {
        let (a, b) = (pos(0, 0, 0), pos(1, 0, 0));
        let (_dir, path) = map_with(&[(a, "default:stone"), (b, "default:dirt")]);
        let outside = MapStore::open(&path, false).expect("writer");
        let blocks = Blocks::new(MapStore::open(&path, false).expect("ours"), 1 << 20, false);
        assert!(blocks.get(a).is_ok());
        assert_eq!(
            blocks.get(b).expect("b").block.names,
            vec!["default:dirt".to_string()]
        );
        outside
            .commit(&[(b, Some(blob("default:sand")))])
            .expect("outside commit");
        blocks
            .modify(a, |block| {
                block.names = vec!["default:cobble".to_string()];
                Ok(())
            })
            .expect("our commit");
        std::thread::sleep(Duration::from_millis(REFRESH_INTERVAL_MS + 30));
        assert_eq!(
            blocks.get(b).expect("b again").block.names,
            vec!["default:sand".to_string()]
        );
    }

    /// A database with the blocks `(pos, all-NAME)`, and its path.
    /// Another writer that changes a cached block right after our commit (before anything
    /// else looks at the database) is seen: our commit does not make the block look current.
    #[test]
    fn a_block_read_during_our_commit_is_rechecked_after_another_writers_change() {
        let (a, b) = (pos(0, 0, 0), pos(1, 0, 0));
        let (_dir, path) = map_with(&[(a, "default:stone"), (b, "default:dirt")]);
        let blocks = Blocks::new(MapStore::open(&path, false).expect("ours"), 1 << 20, false);
        assert_eq!(blocks.get(b).expect("b").block.names, ["default:dirt"]);
        let outside = path.clone();
        blocks.in_commit.set(move |blocks: &Blocks| {
            assert_eq!(blocks.get(b).expect("b").block.names, ["default:dirt"]);
            MapStore::open(&outside, false)
                .expect("another writer")
                .commit(&[(b, Some(blob("default:sand")))])
                .expect("outside commit");
        });
        blocks
            .modify(a, |block| {
                block.names = vec!["default:cobble".to_string()];
                Ok(())
            })
            .expect("our commit");
        std::thread::sleep(Duration::from_millis(REFRESH_INTERVAL_MS + 30));
        assert_eq!(
            blocks.get(b).expect("b again").block.names,
            ["default:sand"],
            "the other writer's change is seen"
        );
    }

    /// A reader that decodes a block while our commit of it runs caches it with the time
    /// of our commit, not a time derived from its bytes.
    #[test]
    fn a_block_read_during_our_commit_shows_the_commits_time() {
        let a = pos(0, 0, 0);
        let (_dir, path) = map_with(&[(a, "default:stone")]);
        let blocks = Blocks::new(MapStore::open(&path, false).expect("ours"), 1 << 20, false);
        blocks.in_commit.set(move |blocks: &Blocks| {
            assert_eq!(blocks.get(a).expect("a").block.names, ["default:cobble"]);
        });
        let before = SystemTime::now();
        blocks
            .modify(a, |block| {
                block.names = vec!["default:cobble".to_string()];
                Ok(())
            })
            .expect("our commit");
        let got = blocks.get(a).expect("a again");
        assert_eq!(got.block.names, ["default:cobble"]);
        assert!(
            got.mtime >= before,
            "the block shows {:?}, not the time of its commit",
            got.mtime
        );
    }
}
