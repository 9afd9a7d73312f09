//! Decoded Survivalcraft objects on demand: the LRU cache of chunks over a [`World`], the
//! parsed Project.xml, stable mtimes, and atomic read-modify-write of one object.
//!
//! Nothing is decoded until a path inside a chunk folder (or below `players/`) is touched.
//! Reads share the world; a commit takes it exclusively. Edits are serialised by one writer
//! lock (a world is one or a few files, committed as a whole), re-read the current object,
//! apply the edit, and commit only when the decoded object really changed, so untouched
//! chunks and an untouched Project.xml keep their stored bytes exactly.
//!
//! When the game (or anything else) changes the world folder underneath, the size or mtime
//! of one of its files changes; that is checked at most every [`REFRESH_INTERVAL_MS`], and
//! the world is then reopened: cached chunks are checked against their stored bytes before
//! their next use (kept when unchanged), the project is dropped.
//!
//! Chunks live in the shared [`ObjectCache`], which a read racing a commit cannot fill with
//! the chunk from before the commit (the next edit would otherwise start from it and revert
//! the commit), weighed by the cells, columns and rendered views they hold.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::SystemTime;

use crate::error::{Error, Result};
use crate::storekit::mtimes::{content_hash, Key, Mtimes};
use crate::storekit::objects::{ObjectCache, Views, Weigh};
use crate::storekit::throttle::Throttle;
use crate::survivalcraft::codec::chunk::{Chunk, ChunkPos};
use crate::survivalcraft::codec::format::TerrainFormat;
use crate::survivalcraft::codec::project::{self, ProjectInfo};
use crate::survivalcraft::store::World;
use std::time::Duration;

/// How often (at most) to look whether another writer changed the world folder.
pub const REFRESH_INTERVAL_MS: u64 = 500;

/// A decoded chunk with what the tree shows about it.
pub struct CachedChunk {
    pub chunk: Chunk,
    pub mtime: SystemTime,
    /// Rendered views by file name, filled on first use.
    views: Views,
}

impl Weigh for CachedChunk {
    fn weight(&self) -> usize {
        std::mem::size_of::<CachedChunk>()
            + std::mem::size_of_val(self.chunk.cells())
            + std::mem::size_of_val(self.chunk.columns())
            + self.views.weight()
    }
}

/// Project.xml as stored, with what worldfs reads from it.
pub struct Project {
    pub xml: Arc<Vec<u8>>,
    pub info: ProjectInfo,
    pub mtime: SystemTime,
}

/// The mtime-record key of a chunk.
fn chunk_key(pos: ChunkPos) -> u64 {
    (u64::from(pos.cx as u32) << 32) | u64::from(pos.cz as u32)
}

/// The mtime-record key of one view of a chunk: an item of the chunk's group (read from the
/// sidecar with it), the hash of its path.
fn view_key(pos: ChunkPos, name: &str) -> Key {
    Key::item(chunk_key(pos), path_key(&format!("chunks/{pos}/{name}")))
}

/// The mtime-record key of any other object, by its path in the tree.
pub fn path_key(path: &str) -> u64 {
    content_hash(path.as_bytes())
}

const PROJECT_PATH: &str = "Project.xml";

/// Size, mtime and inode of every file of a world folder and its `Regions/` (the inode: a
/// file replaced by one of the same size and time, as `cp -p` makes, is a change too).
type Signature = Vec<(PathBuf, u64, Option<SystemTime>, u64)>;

fn signature(folder: &Path) -> Signature {
    let mut out = Vec::new();
    for dir in [folder.to_path_buf(), folder.join("Regions")] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            if let Ok(md) = e.metadata() {
                if md.is_file() {
                    use std::os::unix::fs::MetadataExt;
                    out.push((e.path(), md.len(), md.modified().ok(), md.ino()));
                }
            }
        }
    }
    out.sort();
    out
}

/// Told of every commit of chunks made through [`Objects`]: the `index/` answers follow our
/// own commits without a scan.
pub trait ChunkWatch: Send + Sync {
    /// Chunks were committed, taking [`Objects::generation`] from `before` to `after`; each
    /// with the block ids it now holds (see [`crate::survivalcraft::index::block_ids`]).
    fn committed(&self, before: u64, after: u64, chunks: &[(ChunkPos, Vec<u16>)]);
}

/// What a view of a chunk is rendered with.
pub type Render = fn(&Chunk) -> Vec<u8>;

/// The chunks and the project of one world.
pub struct Objects {
    source: PathBuf,
    read_only: bool,
    world: RwLock<World>,
    format: TerrainFormat,
    cache: ObjectCache<ChunkPos, CachedChunk>,
    project: Mutex<Option<Arc<Project>>>,
    mtimes: Mtimes,
    writer: Mutex<()>,
    /// The stored chunks sorted by position, rebuilt after a chunk is added.
    sorted: Mutex<Option<Arc<Vec<ChunkPos>>>>,
    /// The world folder's files as last seen (`None` for a `.scworld` file).
    seen: Mutex<Option<Signature>>,
    changes: Throttle,
    /// Told of our chunk commits (the index of the tree).
    watch: Mutex<Option<Weak<dyn ChunkWatch>>>,
    /// Runs once between reading a chunk's bytes and caching it (tests of the interleaving).
    #[cfg(test)]
    after_read: crate::vfs::race_hook::RaceHook<Objects>,
}

fn chunk_not_found(pos: ChunkPos) -> Error {
    Error::not_found(format!("no chunk at {pos}"))
}

impl Objects {
    /// Writes the waiting mtime records now (see [`crate::storekit::mtimes`]).
    pub fn flush_times(&self) {
        self.mtimes.flush();
    }

    /// The objects of the world at `source` (a folder or a `.scworld` file), caching up to
    /// `cache_bytes` of decoded chunks. Reads only the chunk directories.
    pub fn open(source: &Path, read_only: bool, cache_bytes: usize) -> Result<Objects> {
        let world = World::open(source, read_only)?;
        let read_only = world.read_only();
        let seen = world.folder().map(signature);
        let objects = Objects {
            source: source.to_path_buf(),
            read_only,
            format: world.format(),
            world: RwLock::new(world),
            cache: ObjectCache::new(cache_bytes),
            project: Mutex::new(None),
            mtimes: Mtimes::open(source, read_only),
            writer: Mutex::new(()),
            sorted: Mutex::new(None),
            seen: Mutex::new(seen),
            changes: Throttle::new(Duration::from_millis(REFRESH_INTERVAL_MS)),
            watch: Mutex::new(None),
            #[cfg(test)]
            after_read: Default::default(),
        };
        // The root folder lists Project.xml's players and containers: a project file that
        // does not parse would fail every listing of the mount (EIO), so the mount is refused
        // with the reason instead.
        objects.project().map_err(|e| {
            Error::new(
                e.errno(),
                format!(
                    "{}: {}; worldfs does not mount a world whose Project.xml does not parse \
                     (the game's Project.bak, if there is one, is a copy of it)",
                    source.display(),
                    e.message()
                ),
            )
        })?;
        Ok(objects)
    }

    /// Reopens the world and drops every cached object when its files changed underneath
    /// (looked at most every [`REFRESH_INTERVAL_MS`], and not during a commit).
    pub fn refresh(&self) {
        if !self.changes.due() {
            return;
        }
        // A commit in progress changes the files itself; look again next time.
        let Ok(_writer) = self.writer.try_lock() else {
            return;
        };
        self.look();
    }

    /// [`Objects::refresh`] now: the caller holds the writer lock.
    fn look(&self) {
        let Ok(mut seen) = self.seen.lock() else {
            return;
        };
        let Some(old) = seen.as_ref() else {
            return;
        };
        let current = signature(&self.source);
        if *old == current {
            return;
        }
        log::info!("{}: changed underneath; reopening", self.source.display());
        match World::open(&self.source, self.read_only) {
            Ok(w) if w.format() == self.format => {
                if let Ok(mut world) = self.world.write() {
                    *world = w;
                }
                *seen = Some(current);
                self.forget_all();
            }
            Ok(_) => log::error!(
                "{}: the terrain format changed underneath; remount to see it",
                self.source.display()
            ),
            Err(e) => log::warn!(
                "{}: cannot reopen ({e}); showing the old state",
                self.source.display()
            ),
        }
    }

    /// Looks whether the world's files changed underneath (see [`Objects::refresh`]); the
    /// number returned changes whenever they did.
    pub fn underneath(&self) -> u64 {
        self.refresh();
        self.cache.underneath_seen()
    }

    /// A number that changes with every commit of a chunk and every change underneath seen
    /// (it does not look for one: see [`Objects::underneath`]).
    pub fn generation(&self) -> u64 {
        self.cache.generation()
    }

    /// Tells `watch` of every later chunk commit (one watcher; a later call replaces it).
    pub fn watch(&self, watch: Weak<dyn ChunkWatch>) {
        if let Ok(mut w) = self.watch.lock() {
            *w = Some(watch);
        }
    }

    /// Tells the watcher of a commit of `chunks`.
    fn tell(&self, before: u64, chunks: &[(ChunkPos, &Chunk)]) {
        let Some(watch) = self.watch.lock().ok().and_then(|w| w.as_ref()?.upgrade()) else {
            return;
        };
        let held: Vec<(ChunkPos, Vec<u16>)> = chunks
            .iter()
            .map(|(pos, c)| (*pos, crate::survivalcraft::index::block_ids(c)))
            .collect();
        watch.committed(before, self.generation(), &held);
    }

    /// A chunk's stored bytes, read now (not cached): what a scan decodes.
    pub fn read_raw(&self, pos: ChunkPos) -> Result<Vec<u8>> {
        self.world()?.read_raw(pos)
    }

    /// Notes the world folder's files after our own commit.
    fn saw_own_commit(&self) {
        if let Ok(mut seen) = self.seen.lock() {
            if seen.is_some() {
                *seen = Some(signature(&self.source));
            }
        }
    }

    /// The world's terrain format.
    pub fn format(&self) -> TerrainFormat {
        self.format
    }

    fn world(&self) -> Result<std::sync::RwLockReadGuard<'_, World>> {
        crate::error::read(&self.world, "world")
    }

    fn world_mut(&self) -> Result<std::sync::RwLockWriteGuard<'_, World>> {
        crate::error::write(&self.world, "world")
    }

    /// Every stored chunk, sorted by (cx, cz).
    pub fn sorted_chunks(&self) -> Result<Arc<Vec<ChunkPos>>> {
        self.refresh();
        let mut sorted = crate::error::lock(&self.sorted)?;
        if let Some(s) = sorted.as_ref() {
            return Ok(s.clone());
        }
        let mut all = self.world()?.chunks();
        all.sort();
        all.dedup();
        let all = Arc::new(all);
        *sorted = Some(all.clone());
        Ok(all)
    }

    /// Whether a chunk is stored (without reading it).
    pub fn contains(&self, pos: ChunkPos) -> Result<bool> {
        Ok(self.world()?.contains(pos))
    }

    /// The decoded chunk at `pos`, or `Error::not_found`.
    pub fn chunk(&self, pos: ChunkPos) -> Result<Arc<CachedChunk>> {
        self.refresh();
        self.cache.get_or_load(
            &pos,
            || {
                let world = self.world()?;
                if !world.contains(pos) {
                    return Err(chunk_not_found(pos));
                }
                let raw = world.read_raw(pos)?;
                let hash = content_hash(&raw);
                Ok((raw, hash))
            },
            |(_, hash)| *hash,
            |(raw, hash)| {
                #[cfg(test)]
                self.after_read.run(self);
                let chunk = crate::survivalcraft::codec::decode_chunk(self.format, &raw)
                    .map_err(|e| e.context(format!("chunk {pos}")))?;
                Ok(CachedChunk {
                    chunk,
                    mtime: self.mtimes.mtime(chunk_key(pos), hash),
                    views: Views::default(),
                })
            },
        )
    }

    /// The view `name` of the chunk at `pos` (rendered once with `render`) and its mtime: a
    /// time recorded for the view while its content is unchanged (set by rsync or touch, or
    /// kept through an edit of another view), else the chunk's.
    pub fn chunk_view(
        &self,
        pos: ChunkPos,
        name: &'static str,
        render: impl FnOnce(&Chunk) -> Vec<u8>,
    ) -> Result<(Arc<Vec<u8>>, SystemTime)> {
        let cached = self.chunk(pos)?;
        let (data, rendered) = cached.views.get_or_render(name, || render(&cached.chunk));
        if rendered {
            self.cache.reweigh(&pos);
        }
        let key = view_key(pos, name);
        let mtime = if self.mtimes.has(key) {
            self.mtimes
                .recorded(key, content_hash(&data))
                .unwrap_or(cached.mtime)
        } else {
            cached.mtime
        };
        Ok((data, mtime))
    }

    /// Records times for views of the chunk at `pos`: `(view name, hash of its content,
    /// time)`, each standing while that view's content is unchanged.
    pub fn set_view_mtimes(&self, pos: ChunkPos, views: &[(&str, u64, SystemTime)]) {
        let records: Vec<(Key, u64, SystemTime)> = views
            .iter()
            .map(|&(name, hash, t)| (view_key(pos, name), hash, t))
            .collect();
        self.mtimes.record_all(&records);
    }

    /// Writes a chunk; the caller holds the writer lock.
    fn commit_chunk(&self, pos: ChunkPos, chunk: &Chunk, mtime: SystemTime) -> Result<()> {
        let before = self.generation();
        let raw = {
            let mut world = self.world_mut()?;
            world.commit_chunks(&[(pos, chunk)])?;
            world.read_raw(pos)?
        };
        self.saw_own_commit();
        self.mtimes
            .record(chunk_key(pos), content_hash(&raw), mtime);
        self.cache.committed([&pos]);
        self.tell(before, &[(pos, chunk)]);
        Ok(())
    }

    /// The time a view of the chunk at `pos` shows, its content hashing to `hash`, while
    /// the chunk's stored bytes hash to `raw_hash` (as [`Objects::chunk_view`] tells it).
    fn view_mtime(&self, pos: ChunkPos, name: &str, hash: u64, raw_hash: u64) -> SystemTime {
        let chunk = self.mtimes.mtime(chunk_key(pos), raw_hash);
        let key = view_key(pos, name);
        if self.mtimes.has(key) {
            self.mtimes.recorded(key, hash).unwrap_or(chunk)
        } else {
            chunk
        }
    }

    /// Applies `edit` to each chunk at `positions` as stored now (`None`: unchanged) and
    /// commits every changed chunk in one commit of the store, all or nothing (see
    /// [`World::edit_chunks`]), holding one decoded chunk at a time. The views `keep` (name
    /// and renderer) whose content a chunk's edit leaves unchanged keep their times;
    /// `progress` is told how many chunks were edited so far. Returns how many changed.
    pub fn modify_chunks(
        &self,
        (positions, asked): (&[ChunkPos], u64),
        edit: impl Fn(&Chunk) -> Option<Chunk>,
        keep: &[(&'static str, Render)],
        progress: impl Fn(usize),
    ) -> Result<usize> {
        let _writer = crate::error::lock(&self.writer)?;
        // The positions are right for the world as of `asked`: looked at now, not after
        // the refresh interval, so a save of the game just before is not missed.
        self.look();
        let before = self.generation();
        if before != asked {
            return Err(Error::new(
                libc::EAGAIN,
                "the world changed since the question was answered; nothing written",
            ));
        }
        let mut held = Vec::new();
        let mut kept_times = Vec::new();
        let mut seen = 0;
        let (changed, stored) = {
            let mut world = self.world_mut()?;
            let changed = world.edit_chunks(positions, |pos, raw, old| {
                seen += 1;
                if seen % 1000 == 0 {
                    progress(seen);
                }
                let Some(new) = edit(&old).filter(|n| *n != old) else {
                    return Ok(None);
                };
                let raw_hash = content_hash(raw);
                for (name, render) in keep {
                    let (a, b) = (render(&old), render(&new));
                    if a == b {
                        let hash = content_hash(&a);
                        let t = self.view_mtime(pos, name, hash, raw_hash);
                        kept_times.push((view_key(pos, name), hash, t));
                    }
                }
                held.push((pos, crate::survivalcraft::index::block_ids(&new)));
                Ok(Some(new))
            })?;
            let stored = changed
                .iter()
                .map(|&pos| Ok((pos, content_hash(&world.read_raw(pos)?))))
                .collect::<Result<Vec<_>>>()?;
            (changed, stored)
        };
        if changed.is_empty() {
            return Ok(0);
        }
        self.saw_own_commit();
        let now = SystemTime::now();
        let records: Vec<(Key, u64, SystemTime)> = stored
            .iter()
            .map(|&(pos, hash)| (Key::from(chunk_key(pos)), hash, now))
            .chain(kept_times)
            .collect();
        self.mtimes.record_all(&records);
        self.cache.committed(changed.iter());
        if let Some(watch) = self.watch.lock().ok().and_then(|w| w.as_ref()?.upgrade()) {
            watch.committed(before, self.generation(), &held);
        }
        Ok(changed.len())
    }

    /// Applies `edit` to the current chunk at `pos` and commits the result if it differs.
    pub fn modify_chunk(
        &self,
        pos: ChunkPos,
        edit: impl FnOnce(&Chunk) -> Result<Chunk>,
    ) -> Result<()> {
        let _writer = crate::error::lock(&self.writer)?;
        let current = self.chunk(pos)?;
        let changed = edit(&current.chunk)?;
        if changed == current.chunk {
            return Ok(());
        }
        self.commit_chunk(pos, &changed, SystemTime::now())
    }

    /// Stores a new all-air chunk at `pos`; fails if one exists.
    pub fn create_chunk(&self, pos: ChunkPos) -> Result<()> {
        let _writer = crate::error::lock(&self.writer)?;
        if self.contains(pos)? {
            return Err(Error::exists(format!("chunk {pos} exists")));
        }
        self.commit_chunk(pos, &Chunk::empty(self.format), SystemTime::now())?;
        *crate::error::lock(&self.sorted)? = None;
        Ok(())
    }

    /// Project.xml, parsed; `None` when the world has none (e.g. a JSON project).
    pub fn project(&self) -> Result<Option<Arc<Project>>> {
        self.refresh();
        let mut slot = crate::error::lock(&self.project)?;
        if let Some(p) = slot.as_ref() {
            return Ok(Some(p.clone()));
        }
        let Some(xml) = self.world()?.project_xml()? else {
            return Ok(None);
        };
        let info = project::read(&xml).map_err(|e| e.context(PROJECT_PATH))?;
        let p = Arc::new(Project {
            mtime: self.mtime_of(PROJECT_PATH, &xml),
            xml: Arc::new(xml),
            info,
        });
        *slot = Some(p.clone());
        Ok(Some(p))
    }

    /// The current project, or an error saying the world has none.
    pub fn require_project(&self) -> Result<Arc<Project>> {
        self.project()?
            .ok_or_else(|| Error::not_found("this world has no Project.xml"))
    }

    /// The mtime of the object at tree path `path` whose current bytes are `data`.
    pub fn mtime_of(&self, path: &str, data: &[u8]) -> SystemTime {
        self.mtimes.mtime(path_key(path), content_hash(data))
    }

    /// Records an explicit mtime for the object at tree path `path` with bytes `data`.
    pub fn set_mtime_of(&self, path: &str, data: &[u8], mtime: SystemTime) {
        self.mtimes
            .record(path_key(path), content_hash(data), mtime);
    }

    /// Replaces Project.xml with what `edit` makes of the current one, if that differs.
    /// The new bytes must parse as a project. `renders` lists the tree files derived from
    /// the project (path and how to render it from the parsed project): every one whose
    /// content changed gets the commit time as its mtime.
    pub fn modify_project(
        &self,
        edit: impl FnOnce(&Project) -> Result<Vec<u8>>,
        renders: impl Fn(&ProjectInfo) -> Vec<(String, Vec<u8>)>,
    ) -> Result<()> {
        let _writer = crate::error::lock(&self.writer)?;
        let current = self.require_project()?;
        let xml = edit(&current)?;
        if xml == *current.xml {
            return Ok(());
        }
        // What fails to parse here is the user's text, not stored data.
        let info = project::read(&xml).map_err(|e| Error::invalid(e.message()))?;
        self.world_mut()?.commit_project(&xml)?;
        self.saw_own_commit();
        let now = SystemTime::now();
        let before: HashMap<String, Vec<u8>> = renders(&current.info).into_iter().collect();
        for (path, data) in renders(&info) {
            if before.get(&path) != Some(&data) {
                self.set_mtime_of(&path, &data, now);
            }
        }
        self.set_mtime_of(PROJECT_PATH, &xml, now);
        *crate::error::lock(&self.project)? = None;
        Ok(())
    }

    /// Records an explicit mtime for Project.xml.
    pub fn set_project_mtime(&self, mtime: SystemTime) -> Result<()> {
        let _writer = crate::error::lock(&self.writer)?;
        let p = self.require_project()?;
        self.set_mtime_of(PROJECT_PATH, &p.xml, mtime);
        *crate::error::lock(&self.project)? = None;
        Ok(())
    }

    /// Forgets what the store changed underneath: chunks are checked before their next use,
    /// the project and the chunk list are read again.
    fn forget_all(&self) {
        self.cache.changed_underneath();
        if let Ok(mut p) = self.project.lock() {
            *p = None;
        }
        if let Ok(mut s) = self.sorted.lock() {
            *s = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::survivalcraft::codec::chunk::Cell;
    use crate::survivalcraft::codec::fixed::empty_directory;

    /// Sidecars written before records were grouped keep their meaning: a view's item is
    /// the hash of its path, as its key was, in the group of its chunk's own record.
    #[test]
    fn a_view_key_is_the_old_key_in_its_chunk_group() {
        let pos = ChunkPos { cx: -3, cz: 70_000 };
        let key = view_key(pos, "cells.txt");
        assert_eq!(key.item, content_hash(b"chunks/-3,70000/cells.txt"));
        assert_eq!(key.group, chunk_key(pos));
        assert_eq!(Key::from(chunk_key(pos)).group, key.group);
    }

    fn world() -> (tempfile::TempDir, Objects) {
        let dir = tempfile::tempdir().unwrap();
        std::env::set_var("WORLDFS_STATE_DIR", dir.path());
        let format = TerrainFormat::Chunks32h;
        std::fs::write(
            dir.path().join(format.file_name().unwrap()),
            empty_directory(format).unwrap(),
        )
        .unwrap();
        let objects = Objects::open(dir.path(), false, 1 << 24).unwrap();
        (dir, objects)
    }

    /// A world with terrain and a Project.xml that does not parse is refused at open with
    /// the file and the reason (it mounted, and every listing of its root failed with EIO).
    #[test]
    fn a_project_that_does_not_parse_is_refused_at_open() {
        let (dir, _) = world();
        let garbage: [&[u8]; 3] = [
            b"\x8f\x01garbage\xff\xfe",
            b"<Project Version=\"2.2\"><Entities><Entity",
            b"<Subsystems />",
        ];
        for bytes in garbage {
            std::fs::write(dir.path().join("Project.xml"), bytes).unwrap();
            for read_only in [true, false] {
                let e = Objects::open(dir.path(), read_only, 1 << 20)
                    .err()
                    .expect("opened");
                let text = e.to_string();
                assert!(
                    text.contains("Project.xml: ") && text.contains("does not parse"),
                    "{text}"
                );
            }
        }
        std::fs::write(
            dir.path().join("Project.xml"),
            "<Project Version=\"2.2\"><Entities /></Project>",
        )
        .unwrap();
        let objects = Objects::open(dir.path(), true, 1 << 20).unwrap();
        assert!(objects.project().unwrap().is_some());
    }

    fn set(value: u32) -> impl FnOnce(&Chunk) -> Result<Chunk> {
        move |c| {
            let mut c = c.clone();
            c.set_cell(1, 2, 3, Cell::from_value32(value))?;
            Ok(c)
        }
    }

    #[test]
    fn a_read_racing_a_commit_never_caches_the_old_chunk() {
        let (_dir, objects) = world();
        let pos = ChunkPos::new(0, 0);
        objects.create_chunk(pos).unwrap();
        // A reader reads the chunk's bytes; before it caches what it decoded, a commit
        // changes the chunk. The reader must not put the old chunk back in the cache.
        objects.after_read.set(move |o: &Objects| {
            o.modify_chunk(pos, set(7)).unwrap();
        });
        let raced = objects.chunk(pos).unwrap();
        assert_eq!(raced.chunk.cell(1, 2, 3), Some(Cell::from_value32(0)));
        assert_eq!(
            objects.chunk(pos).unwrap().chunk.cell(1, 2, 3),
            Some(Cell::from_value32(7)),
            "the read after the commit sees the commit"
        );
        // The next edit starts from the committed chunk, so the commit is not reverted.
        objects
            .modify_chunk(pos, |c| {
                let mut c = c.clone();
                c.set_cell(0, 0, 0, Cell::from_value32(1))?;
                Ok(c)
            })
            .unwrap();
        let reopened = Objects::open(&objects.source, true, 1 << 20).unwrap();
        let stored = reopened.chunk(pos).unwrap();
        assert_eq!(stored.chunk.cell(1, 2, 3), Some(Cell::from_value32(7)));
        assert_eq!(stored.chunk.cell(0, 0, 0), Some(Cell::from_value32(1)));
    }
}
