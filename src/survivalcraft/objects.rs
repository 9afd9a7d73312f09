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
//! the world is then reopened and every cached object dropped.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::SystemTime;

use crate::error::{Error, Result};
use crate::survivalcraft::chunk::{Chunk, ChunkPos};
use crate::survivalcraft::codec::project::{self, ProjectInfo};
use crate::survivalcraft::format::TerrainFormat;
use crate::survivalcraft::store::World;
use crate::vfs::cache::Cache;
use crate::vfs::mtimes::{content_hash, Mtimes};
use crate::vfs::throttle::Throttle;
use std::time::Duration;

/// How often (at most) to look whether another writer changed the world folder.
pub const REFRESH_INTERVAL_MS: u64 = 500;

/// Estimated memory of the rendered views of one chunk, on top of its cells.
const VIEWS_COST: usize = 256 * 1024;

/// A decoded chunk with what the tree shows about it.
pub struct CachedChunk {
    pub chunk: Chunk,
    pub mtime: SystemTime,
    /// Rendered views by file name, filled on first use.
    views: Mutex<HashMap<&'static str, Arc<Vec<u8>>>>,
}

impl CachedChunk {
    /// The rendered view `name`, rendering it once with `render`.
    pub fn view(&self, name: &'static str, render: impl FnOnce(&Chunk) -> Vec<u8>) -> Arc<Vec<u8>> {
        if let Ok(v) = self.views.lock() {
            if let Some(data) = v.get(name) {
                return data.clone();
            }
        }
        let data = Arc::new(render(&self.chunk));
        if let Ok(mut v) = self.views.lock() {
            v.insert(name, data.clone());
        }
        data
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

/// The mtime-record key of any other object, by its path in the tree.
pub fn path_key(path: &str) -> u64 {
    content_hash(path.as_bytes())
}

const PROJECT_PATH: &str = "Project.xml";

/// Size and mtime of every file of a world folder and its `Regions/`.
type Signature = Vec<(PathBuf, u64, Option<SystemTime>)>;

fn signature(folder: &Path) -> Signature {
    let mut out = Vec::new();
    for dir in [folder.to_path_buf(), folder.join("Regions")] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            if let Ok(md) = e.metadata() {
                if md.is_file() {
                    out.push((e.path(), md.len(), md.modified().ok()));
                }
            }
        }
    }
    out.sort();
    out
}

/// The chunks and the project of one world.
pub struct Objects {
    source: PathBuf,
    read_only: bool,
    world: RwLock<World>,
    format: TerrainFormat,
    cache: Cache<ChunkPos, CachedChunk>,
    project: Mutex<Option<Arc<Project>>>,
    mtimes: Mtimes,
    writer: Mutex<()>,
    /// The stored chunks sorted by position, rebuilt after a chunk is added.
    sorted: Mutex<Option<Arc<Vec<ChunkPos>>>>,
    /// The world folder's files as last seen (`None` for a `.scworld` file).
    seen: Mutex<Option<Signature>>,
    changes: Throttle,
}

fn guard<T>(m: &Mutex<T>) -> Result<MutexGuard<'_, T>> {
    m.lock()
        .map_err(|_| Error::corrupt("internal lock poisoned"))
}

fn chunk_not_found(pos: ChunkPos) -> Error {
    Error::not_found(format!("no chunk at {pos}"))
}

impl Objects {
    /// The objects of the world at `source` (a folder or a `.scworld` file), caching up to
    /// `cache_bytes` of decoded chunks. Reads only the chunk directories.
    pub fn open(source: &Path, read_only: bool, cache_bytes: usize) -> Result<Objects> {
        let world = World::open(source, read_only)?;
        let read_only = world.read_only();
        let seen = world.folder().map(signature);
        Ok(Objects {
            source: source.to_path_buf(),
            read_only,
            format: world.format(),
            world: RwLock::new(world),
            cache: Cache::new(cache_bytes),
            project: Mutex::new(None),
            mtimes: Mtimes::open(source, read_only),
            writer: Mutex::new(()),
            sorted: Mutex::new(None),
            seen: Mutex::new(seen),
            changes: Throttle::new(Duration::from_millis(REFRESH_INTERVAL_MS)),
        })
    }

    /// Reopens the world and drops every cached object when its files changed underneath.
    pub fn refresh(&self) {
        if !self.changes.due() {
            return;
        }
        // A commit in progress changes the files itself; look again next time.
        let Ok(_writer) = self.writer.try_lock() else {
            return;
        };
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
        self.world
            .read()
            .map_err(|_| Error::corrupt("world lock poisoned"))
    }

    fn world_mut(&self) -> Result<std::sync::RwLockWriteGuard<'_, World>> {
        self.world
            .write()
            .map_err(|_| Error::corrupt("world lock poisoned"))
    }

    /// Every stored chunk, sorted by (cx, cz).
    pub fn sorted_chunks(&self) -> Result<Arc<Vec<ChunkPos>>> {
        self.refresh();
        let mut sorted = guard(&self.sorted)?;
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
        if let Some(c) = self.cache.get(&pos) {
            return Ok(c);
        }
        let (raw, chunk) = {
            let world = self.world()?;
            if !world.contains(pos) {
                return Err(chunk_not_found(pos));
            }
            let raw = world.read_raw(pos)?;
            let chunk = crate::survivalcraft::codec::decode_chunk(self.format, &raw)
                .map_err(|e| e.context(format!("chunk {pos}")))?;
            (raw, chunk)
        };
        let cost = std::mem::size_of_val(chunk.cells())
            + std::mem::size_of_val(chunk.columns())
            + VIEWS_COST;
        let cached = Arc::new(CachedChunk {
            chunk,
            mtime: self.mtimes.mtime(chunk_key(pos), content_hash(&raw)),
            views: Mutex::new(HashMap::new()),
        });
        self.cache.insert(pos, cached.clone(), cost);
        Ok(cached)
    }

    fn commit_chunk(&self, pos: ChunkPos, chunk: &Chunk, mtime: SystemTime) -> Result<()> {
        let raw = {
            let mut world = self.world_mut()?;
            world.commit_chunks(&[(pos, chunk)])?;
            world.read_raw(pos)?
        };
        self.saw_own_commit();
        self.cache.remove(&pos);
        self.mtimes
            .record(chunk_key(pos), content_hash(&raw), mtime);
        Ok(())
    }

    /// Applies `edit` to the current chunk at `pos` and commits the result if it differs.
    pub fn modify_chunk(
        &self,
        pos: ChunkPos,
        edit: impl FnOnce(&Chunk) -> Result<Chunk>,
    ) -> Result<()> {
        let _writer = guard(&self.writer)?;
        let current = self.chunk(pos)?;
        let changed = edit(&current.chunk)?;
        if changed == current.chunk {
            return Ok(());
        }
        self.commit_chunk(pos, &changed, SystemTime::now())
    }

    /// Stores a new all-air chunk at `pos`; fails if one exists.
    pub fn create_chunk(&self, pos: ChunkPos) -> Result<()> {
        let _writer = guard(&self.writer)?;
        if self.contains(pos)? {
            return Err(Error::exists(format!("chunk {pos} exists")));
        }
        self.commit_chunk(pos, &Chunk::empty(self.format), SystemTime::now())?;
        *guard(&self.sorted)? = None;
        Ok(())
    }

    /// Records an explicit mtime for a chunk (rsync, touch).
    pub fn set_chunk_mtime(&self, pos: ChunkPos, mtime: SystemTime) -> Result<()> {
        let _writer = guard(&self.writer)?;
        let raw = {
            let world = self.world()?;
            if !world.contains(pos) {
                return Err(chunk_not_found(pos));
            }
            world.read_raw(pos)?
        };
        self.mtimes
            .record(chunk_key(pos), content_hash(&raw), mtime);
        self.cache.remove(&pos);
        Ok(())
    }

    /// Project.xml, parsed; `None` when the world has none (e.g. a JSON project).
    pub fn project(&self) -> Result<Option<Arc<Project>>> {
        self.refresh();
        let mut slot = guard(&self.project)?;
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
        let _writer = guard(&self.writer)?;
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
        *guard(&self.project)? = None;
        Ok(())
    }

    /// Records an explicit mtime for Project.xml.
    pub fn set_project_mtime(&self, mtime: SystemTime) -> Result<()> {
        let _writer = guard(&self.writer)?;
        let p = self.require_project()?;
        self.set_mtime_of(PROJECT_PATH, &p.xml, mtime);
        *guard(&self.project)? = None;
        Ok(())
    }

    /// Drops every cached object (the store changed underneath).
    fn forget_all(&self) {
        self.cache.clear();
        if let Ok(mut p) = self.project.lock() {
            *p = None;
        }
        if let Ok(mut s) = self.sorted.lock() {
            *s = None;
        }
    }
}
