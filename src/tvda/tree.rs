//! The mounted tree of a Terrarum TVDA disk (docs/terrarum.md; docs/architecture.md):
//!
//! ```text
//! savegameinfo.json                entry -1, pretty-printed, genver first
//! loadOrder.txt, spritedef, ...    the other well-known entries by readable name (tvda.md §5.2)
//! thumbnail.tga, screenshot.tga    gzip-decoded
//! inventory                        player disks: the item list of entry -1, `ITEM QUANTITY` lines
//! actors/ID.json                   actor entries
//! chunks/LAYER/CX,CY.cubeset       world disks: terrain, wall, ores, fluid chunks
//! entries/ID                       every live file entry's stored bytes
//! index/tiles/NAME/, index/items/ITEM  whole-disk answers (see [`index`]; reached by name,
//!                                  not listed)
//! ```
//!
//! Paths map to entries here; the formats live in the views, the file in [`Disk`]. Nothing
//! is decoded before a file is touched, rendered files sit in [`crate::tvda::cache`]
//! (which a render racing a commit cannot fill with what it rendered from the old bytes),
//! and a write commits the one entry it changes through `Disk::commit` (appended, older copies
//! discarded) only when its stored bytes differ, so an untouched disk stays byte-identical.
//! Renaming an entry to another ID rewrites the disk (two changes). The mount holds a lock
//! on the disk ([`StoreLock`]: exclusive when it writes) so a second writer and `worldfs
//! compact` refuse to run beside it. The folder listings are in `listing`; [`tevd`] is the tree
//! of a TEVD disk.

mod index;
mod listing;
pub mod tevd;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::{Error, Result};
use crate::index_tree;
use crate::storekit::lock::StoreLock;
use crate::storekit::mtimes::{content_hash, derived_mtime, Mtimes};
use crate::storekit::scratch::looks_like_scratch;
use crate::storekit::throttle::Throttle;
use crate::tvda::cache::{Renders, Stored, View, IMAGE_LIMIT};
use crate::tvda::codec::chunk::{chunk_entry_id, parse_chunk_entry_id, Layer};
use crate::tvda::codec::compress::{compress, gunzip, Codec};
use crate::tvda::codec::tvda::{DiskKind, EntryKind, MAGIC, ROOT_ID};
use crate::tvda::index::Index;
use crate::tvda::store::tvda::{Change, Disk, EntryInfo};
use crate::tvda::views::chunk::{store_chunk, World};
use crate::tvda::views::header::{
    looks_like_header, parse_header, render_header, HEADER_FILE, HEADER_TEXT_LIMIT,
};
use crate::tvda::views::inventory::apply_inventory;
use crate::tvda::views::json::{parse_actor_json, parse_info_json};
use crate::tvda::views::names::{self, Presentation, WellKnown};
use crate::vfs::tree::{not_found, Entry, NewFile, Options, Removal, Stat, Tree, TreePath};
use listing::id_cookie;

/// Largest stored entry read to show a file (Terrarum's entries are at most a few MiB).
const ENTRY_LIMIT: u64 = 16 << 20;
/// Entry -1 of a player disk that has none, for an `inventory` written to it.
const NO_PLAYER_JSON: &[u8] = br#"{"inventory":{"itemList":[]}}"#;
/// How often (at most) to look whether another program changed the disk file.
const REFRESH_INTERVAL_MS: u64 = 50;
/// Where a path points.
#[derive(Debug, Clone, Copy)]
enum Place {
    Root,
    /// `header.txt`: the disk header.
    Header,
    WellKnown(WellKnown),
    Inventory,
    Actors,
    Actor(i64),
    Chunks,
    Layer(Layer),
    Chunk(Layer, u32, u32),
    Entries,
    Entry(i64),
    /// `index/…`: whole-disk answers (see [`index`]).
    Index,
}

/// The renames that change `index/`.
const INDEX_RENAMES: &str = "mv of index/tiles/NAME or index/items/ITEM";

struct State {
    disk: Disk,
    lock: StoreLock,
    /// The world facts of entry -1, read on first use.
    world: Option<Arc<World>>,
}

/// A TVDA disk as a tree.
pub struct TvdaTree {
    state: Mutex<State>,
    kind: DiskKind,
    renders: Renders,
    mtimes: Mtimes,
    /// Set at open on a read-only mount or a damaged disk, and when a commit finds damage.
    read_only: AtomicBool,
    /// The mount is read-only: files show the disk's modes (the kernel refuses writes);
    /// a read-write mount whose disk is damaged shows them without write bits.
    mounted_read_only: bool,
    changes: Throttle,
    /// The whole-disk answers of `index/`.
    index: Index,
    /// Changes with every commit and every reload of the disk (what `index` answers are
    /// true for); changed under the state lock.
    generation: AtomicU64,
    /// The disk file.
    source: PathBuf,
    /// Runs once between reading an entry and caching its rendering (tests of the
    /// interleaving).
    #[cfg(test)]
    after_read: crate::vfs::race_hook::RaceHook<TvdaTree>,
}

fn is_dir() -> Error {
    Error::is_dir("is a directory")
}

/// The text of the file at `path` when it holds a disk header text and no disk (a backup's
/// `header.txt` copied to where a disk is to be restored; docs/terrarum.md): a regular file,
/// not a link, without the `TEVd` magic, that [`looks_like_header`].
pub fn new_disk_text(path: &Path) -> Result<Option<Vec<u8>>> {
    let meta =
        std::fs::symlink_metadata(path).map_err(|e| Error::from(e).context(path.display()))?;
    if !meta.is_file() || meta.len() > HEADER_TEXT_LIMIT as u64 {
        return Ok(None);
    }
    let text = std::fs::read(path).map_err(|e| Error::from(e).context(path.display()))?;
    Ok((!text.starts_with(MAGIC) && looks_like_header(&text)).then_some(text))
}

/// The time now in whole seconds, as the disks store entry times.
pub(super) fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// What [`TvdaTree::edit`] does with a text it parsed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Apply {
    /// Nothing: the text is only checked.
    Check,
    /// Commits it, the entry dated `dated` (Unix seconds), else with the commit's time.
    Store { dated: Option<u64> },
}

/// `time` in the whole seconds a disk stores with an entry, if it fits their 48 bits.
pub(super) fn entry_secs(time: SystemTime) -> Option<u64> {
    time.duration_since(UNIX_EPOCH)
        .ok()
        .map(|d| d.as_secs())
        .filter(|&s| s < 1 << 48)
}

/// The folders of a disk's tree (each chunk layer has one).
fn folders() -> impl Iterator<Item = Place> {
    [Place::Root, Place::Actors, Place::Chunks, Place::Entries]
        .into_iter()
        .chain(Layer::ALL.into_iter().map(Place::Layer))
}

/// The key under which a folder's mtime is recorded.
fn folder_key(place: Place) -> u64 {
    let name = match place {
        Place::Actors => "actors".to_string(),
        Place::Chunks => "chunks".to_string(),
        Place::Layer(layer) => format!("chunks/{}", layer.name()),
        Place::Entries => "entries".to_string(),
        _ => String::new(),
    };
    content_hash(format!("folder:{name}").as_bytes())
}

/// The key under which the time of `header.txt` is recorded (with its text's hash).
fn header_key() -> u64 {
    content_hash(format!("file:{HEADER_FILE}").as_bytes())
}

/// What the names of folder `place` follow: the IDs of the entries it shows. A folder keeps
/// a time set on it while none of its entries is added or removed, so a restore that sets
/// `actors/`'s time before it writes `entries/` keeps it.
fn listing_hash(s: &State, kind: DiskKind, place: Place) -> u64 {
    let shown = |id: i64| match place {
        Place::Root => id == -1 || names::by_id(kind, id).is_some(),
        Place::Actors => names::actor_file_name(id).is_some(),
        Place::Layer(layer) => parse_chunk_entry_id(id).is_some_and(|(l, _)| l == layer.index()),
        Place::Chunks => false,
        _ => id != ROOT_ID,
    };
    let bytes: Vec<u8> = s
        .disk
        .entries()
        .map(|e| e.id)
        .filter(|&id| shown(id))
        .flat_map(i64::to_be_bytes)
        .collect();
    content_hash(&bytes)
}

/// The key under which an entry's mtime is recorded: its stored CRC, size and header
/// times, so a rewrite by another program makes the record stale.
fn entry_hash(info: &EntryInfo) -> u64 {
    let mut b = Vec::with_capacity(28);
    b.extend_from_slice(&info.crc.to_be_bytes());
    b.extend_from_slice(&info.size.to_be_bytes());
    b.extend_from_slice(&info.ctime.to_be_bytes());
    b.extend_from_slice(&info.mtime.to_be_bytes());
    content_hash(&b)
}

impl TvdaTree {
    /// Opens the disk at `path` (reads the entry headers, decodes nothing).
    pub fn open(path: &Path, options: &Options) -> Result<TvdaTree> {
        let mut lock = StoreLock::mount(path, options.read_only)?;
        let disk = match new_disk_text(path)? {
            Some(text) => {
                let shown = path.display();
                if options.read_only {
                    return Err(Error::read_only(format!(
                        "{shown} holds a disk header text, not a disk yet: mount it read-write to make it a new, empty disk"
                    )));
                }
                let header = parse_header(&text, None).map_err(|e| e.context(path.display()))?;
                let disk = Disk::create(path, header, &[], now_secs())?;
                log::info!("{shown}: made a new, empty disk from its header text");
                lock.follow(path)?;
                disk
            }
            None => {
                let mut disk = Disk::open(path, !options.read_only)?;
                disk.finish_interrupted()?;
                disk
            }
        };
        let damaged = !disk.damage().is_empty();
        if damaged && !options.read_only {
            log::error!(
                "{}: damaged ({}); mounted read-only so nothing more is lost (see `worldfs check`)",
                path.display(),
                disk.damage().join("; ")
            );
        }
        let kind = disk.header().kind();
        Ok(TvdaTree {
            state: Mutex::new(State {
                disk,
                lock,
                world: None,
            }),
            kind,
            renders: Renders::new(options.cache_bytes),
            mtimes: Mtimes::open(path, options.read_only || damaged),
            read_only: AtomicBool::new(options.read_only || damaged),
            mounted_read_only: options.read_only,
            changes: Throttle::new(Duration::from_millis(REFRESH_INTERVAL_MS)),
            index: Index::new(options.cache_bytes),
            generation: AtomicU64::new(0),
            source: path.to_path_buf(),
            #[cfg(test)]
            after_read: Default::default(),
        })
    }

    /// The whole-disk answers of `index/`.
    pub fn index(&self) -> &Index {
        &self.index
    }

    /// The locked state, re-read first when another program changed the disk file.
    fn state(&self) -> Result<MutexGuard<'_, State>> {
        self.state_looking(self.changes.due())
    }

    /// The disk's state, re-read first when `look` and another program changed the disk.
    fn state_looking(&self, look: bool) -> Result<MutexGuard<'_, State>> {
        let mut s = crate::error::lock_named(&self.state, "disk")?;
        if look && s.disk.changed_on_disk()? {
            log::info!("{} changed on disk; re-reading it", s.disk.path().display());
            s.disk.reload()?;
            self.generation.fetch_add(1, Ordering::Relaxed);
            let path = s.disk.path().to_path_buf();
            s.lock.follow(&path)?;
            s.world = None;
            self.renders.clear();
        }
        Ok(s)
    }

    fn place(&self, path: &TreePath) -> Result<Place> {
        let parts: Vec<&str> = path.iter().map(String::as_str).collect();
        let nf = || not_found(path);
        Ok(match parts.as_slice() {
            [] => Place::Root,
            ["actors"] => Place::Actors,
            ["chunks"] => Place::Chunks,
            ["entries"] => Place::Entries,
            [index::INDEX, ..] => Place::Index,
            ["inventory"] if self.kind == DiskKind::Player => Place::Inventory,
            [HEADER_FILE] => Place::Header,
            [name] => Place::WellKnown(names::by_name(self.kind, name).ok_or_else(nf)?),
            ["actors", name] => Place::Actor(names::parse_actor_file_name(name).ok_or_else(nf)?),
            ["chunks", layer] => Place::Layer(Layer::from_name(layer).ok_or_else(nf)?),
            ["chunks", layer, name] => {
                let layer = Layer::from_name(layer).ok_or_else(nf)?;
                let (cx, cy) = names::parse_chunk_file_name(name).ok_or_else(nf)?;
                Place::Chunk(layer, cx, cy)
            }
            ["entries", name] => match names::parse_entry_file_name(name) {
                Some(id) if id != ROOT_ID => Place::Entry(id),
                _ => return Err(nf()),
            },
            _ => return Err(nf()),
        })
    }

    /// The world facts of entry -1 (world disks, and very old disks of undefined kind
    /// whose entry -1 is a world).
    fn world(&self, s: &mut State) -> Result<Arc<World>> {
        if !matches!(self.kind, DiskKind::World | DiskKind::Undefined) {
            return Err(Error::not_found("only world disks have chunks"));
        }
        if let Some(w) = &s.world {
            return Ok(w.clone());
        }
        let w = Arc::new(World::from_json(&s.disk.read(-1)?)?);
        s.world = Some(w.clone());
        Ok(w)
    }

    /// Whether `chunks/` is shown: always on a world disk (empty until its entry -1 says
    /// the world's size and tile names, so a restore finds the folders it fills), and on a
    /// disk of undefined kind whose entry -1 is a world.
    fn has_chunks(&self) -> Result<bool> {
        let mut s = self.state()?;
        Ok(self.kind == DiskKind::World || self.world(&mut s).is_ok())
    }

    /// Fails with the reason when a chunk file cannot be written because the disk holds no
    /// world JSON yet.
    fn world_for_chunks(&self, path: &TreePath) -> Result<Arc<World>> {
        let mut s = self.state()?;
        self.world(&mut s).map_err(|e| {
            Error::invalid(format!(
                "{}: the disk has no world yet ({}): write savegameinfo.json (width, height, tileNumberToNameMap) or entries/-1 first",
                path.join("/"),
                e.message()
            ))
        })
    }

    /// The entry ID of a chunk file, if the world has such a chunk position.
    fn chunk_id(&self, s: &mut State, layer: Layer, cx: u32, cy: u32) -> Result<i64> {
        let world = self.world(s)?;
        let no = world
            .geometry
            .chunk_no(cx, cy)
            .ok_or_else(|| Error::not_found(format!("chunk {cx},{cy} is outside the world")))?;
        chunk_entry_id(layer.index(), no)
    }

    /// The live file entry shown at a file place, and how it is shown.
    /// Where [`Tree::remove`] would act at `path` and on which entry, or why it refuses.
    fn removal(&self, path: &TreePath) -> Result<(Place, i64)> {
        self.check_writable()?;
        let place = self.place(path)?;
        match place {
            Place::Index => return Err(index_tree::read_only(INDEX_RENAMES)),
            Place::Header => {
                return Err(Error::not_permitted(format!(
                    "{HEADER_FILE} cannot be removed: every disk has a header (edit it instead)"
                )))
            }
            _ => {}
        }
        let (id, _) = self.target(place, path)?;
        if id == -1 {
            return Err(Error::not_permitted(format!(
                "{}: entry -1 (savegameinfo.json) cannot be removed: the game cannot load a disk without it",
                path.join("/")
            )));
        }
        Ok((place, id))
    }

    fn target(&self, place: Place, path: &TreePath) -> Result<(i64, View)> {
        let (id, view) = match place {
            Place::WellKnown(w) => (
                w.id,
                match w.presentation {
                    Presentation::Json => View::Json,
                    Presentation::Gzip => View::Gunzip,
                    Presentation::Raw => View::Raw,
                },
            ),
            Place::Inventory => (-1, View::Inventory),
            Place::Actor(id) => (id, View::Json),
            Place::Chunk(layer, cx, cy) => {
                let mut s = self.state()?;
                let id = self
                    .chunk_id(&mut s, layer, cx, cy)
                    .map_err(|_| not_found(path))?;
                (id, View::Chunk(layer))
            }
            Place::Entry(id) => (id, View::Raw),
            _ => return Err(is_dir()),
        };
        Ok((id, view))
    }

    fn info(&self, id: i64, path: &TreePath) -> Result<EntryInfo> {
        self.state()?
            .disk
            .entry(id)
            .filter(|e| e.kind == EntryKind::File)
            .ok_or_else(|| not_found(path))
    }

    /// The rendered file of entry `id` shown as `view`.
    fn render(&self, id: i64, view: View) -> Result<Arc<Vec<u8>>> {
        self.renders.render(
            id,
            view,
            || self.read_for_render(id, view),
            || {
                #[cfg(test)]
                self.after_read.run(self);
            },
        )
    }

    /// Entry `id`'s stored bytes (at most [`ENTRY_LIMIT`]) and what rendering it as `view`
    /// needs besides.
    fn read_for_render(&self, id: i64, view: View) -> Result<Stored> {
        let mut s = self.state()?;
        let world = match view {
            View::Chunk(_) => Some(self.world(&mut s)?),
            _ => None,
        };
        let size = s.disk.entry(id).map_or(0, |e| e.size);
        if size > ENTRY_LIMIT {
            return Err(Error::new(
                libc::EFBIG,
                format!(
                    "entry {id} holds {size} bytes; worldfs shows entries of at most {} MiB",
                    ENTRY_LIMIT >> 20
                ),
            ));
        }
        Ok(Stored {
            bytes: s.disk.read(id)?,
            world,
        })
    }

    /// The time shown for an entry: the time recorded when worldfs (or rsync, touch) last
    /// set it, else the entry's own modification time.
    fn mtime(&self, info: &EntryInfo) -> SystemTime {
        let hash = entry_hash(info);
        let recorded = self.mtimes.mtime(info.id as u64, hash);
        if recorded == derived_mtime(hash) {
            UNIX_EPOCH + Duration::from_secs(info.mtime)
        } else {
            recorded
        }
    }

    fn dir_stat(&self, mtime: SystemTime) -> Stat {
        Stat::dir(mtime, self.shows_read_only())
    }

    fn file_stat(&self, size: u64, mtime: SystemTime) -> Stat {
        Stat::file(size, mtime, self.shows_read_only())
    }

    fn shows_read_only(&self) -> bool {
        self.is_read_only() && !self.mounted_read_only
    }

    /// The time of the folder `place`: a time set on it (rsync, touch, or kept through an
    /// edit) while none of its entries was added or removed, else the root entry's
    /// modification time (the save's "last modified").
    fn folder_mtime(&self, place: Place) -> Result<SystemTime> {
        let s = self.state()?;
        Ok(self.folder_mtime_in(&s, place))
    }

    fn folder_mtime_in(&self, s: &State, place: Place) -> SystemTime {
        self.mtimes
            .recorded(folder_key(place), listing_hash(s, self.kind, place))
            .unwrap_or_else(|| {
                s.disk
                    .entry(ROOT_ID)
                    .map_or(UNIX_EPOCH, |r| UNIX_EPOCH + Duration::from_secs(r.mtime))
            })
    }

    fn file_entry_stat(&self, info: &EntryInfo, view: View) -> Result<Stat> {
        let size = match (view, self.renders.size(info.id, view)) {
            (View::Raw, _) => info.size,
            (_, Some(size)) => size,
            _ => self.render(info.id, view)?.len() as u64,
        };
        Ok(self.file_stat(size, self.mtime(info)))
    }

    /// The text of `header.txt` and the time it shows: a time set on it (rsync, touch, an
    /// edit) while its text is unchanged, else the root entry's creation time (saves move
    /// the root's modification time, not the header's text).
    fn header_file(&self) -> Result<(Vec<u8>, SystemTime)> {
        let s = self.state()?;
        let text = render_header(s.disk.header());
        let mtime = self
            .mtimes
            .recorded(header_key(), content_hash(&text))
            .unwrap_or_else(|| {
                s.disk
                    .entry(ROOT_ID)
                    .map_or(UNIX_EPOCH, |r| UNIX_EPOCH + Duration::from_secs(r.ctime))
            });
        Ok((text, mtime))
    }

    /// Parses `text` as the new `header.txt`; with `commit`, rewrites the disk with it when
    /// it differs (the kind cannot change: it decides the tree).
    fn edit_header(&self, text: &[u8], commit: bool) -> Result<()> {
        let mut s = self.state()?;
        let header = parse_header(text, Some(s.disk.header()))?;
        if !commit {
            return Ok(());
        }
        let old = render_header(s.disk.header());
        if let Err(e) = s.disk.set_header(header) {
            if !s.disk.damage().is_empty() {
                log::error!("{}; the mount is read-only from now on", e.message());
                self.read_only.store(true, Ordering::Relaxed);
            }
            return Err(e);
        }
        let new = render_header(s.disk.header());
        if new != old {
            let before = self.generation.fetch_add(1, Ordering::Relaxed);
            self.index.committed(before, before + 1, &[]);
            self.mtimes
                .record(header_key(), content_hash(&new), SystemTime::now());
        }
        let path = s.disk.path().to_path_buf();
        s.lock.follow(&path)
    }

    fn check_writable(&self) -> Result<()> {
        if self.is_read_only() {
            return Err(Error::read_only("the mount is read-only"));
        }
        Ok(())
    }

    fn is_read_only(&self) -> bool {
        self.read_only.load(Ordering::Relaxed)
    }

    /// Commits `changes` (the entries put dated `dated`, else with the commit's time),
    /// then records the new entries' times and drops stale renders. A commit refused
    /// because the disk is damaged turns the mount read-only.
    fn commit(&self, s: &mut State, changes: &[Change], dated: Option<u64>) -> Result<()> {
        let now = SystemTime::now();
        let secs = now_secs();
        let folder_times: Vec<(Place, u64, SystemTime)> = folders()
            .map(|f| (f, listing_hash(s, self.kind, f), self.folder_mtime_in(s, f)))
            .collect();
        let before = self.generation.load(Ordering::Relaxed);
        if let Err(e) = s.disk.commit_dated(changes, secs, dated.unwrap_or(secs)) {
            if !s.disk.damage().is_empty() {
                log::error!("{}; the mount is read-only from now on", e.message());
                self.read_only.store(true, Ordering::Relaxed);
            }
            return Err(e);
        }
        let after = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        self.index.committed(before, after, changes);
        let path = s.disk.path().to_path_buf();
        s.lock.follow(&path)?;
        let mut ids = Vec::new();
        for change in changes {
            let id = match change {
                Change::Put { id, .. } | Change::Remove { id } => *id,
            };
            if let Some(info) = s.disk.entry(id) {
                let time = dated.map_or(now, |d| UNIX_EPOCH + Duration::from_secs(d));
                self.mtimes.record(id as u64, entry_hash(&info), time);
            }
            if id == -1 {
                s.world = None;
                self.renders.clear();
            }
            ids.push(id);
        }
        let kept: Vec<(u64, u64, SystemTime)> = folder_times
            .into_iter()
            .filter(|&(f, hash, _)| listing_hash(s, self.kind, f) == hash)
            .map(|(f, hash, t)| (folder_key(f), hash, t))
            .collect();
        self.mtimes.record_all(&kept);
        // Still under the state lock: no render reads the disk between the commit and this.
        self.renders.committed(&ids);
        Ok(())
    }

    /// Parses `data` as the new content of `path` as a write does; stores it unless
    /// `apply` only checks.
    fn edit(&self, path: &TreePath, data: &[u8], apply: Apply) -> Result<()> {
        self.check_writable()?;
        let place = self.place(path)?;
        match place {
            Place::Index => return Err(index_tree::read_only(INDEX_RENAMES)),
            Place::Header => return self.edit_header(data, apply != Apply::Check),
            Place::Chunk(..) => drop(self.world_for_chunks(path)?),
            _ => {}
        }
        let (id, view) = self.target(place, path)?;
        match (place, view) {
            (Place::WellKnown(_), View::Json) => self.put(id, apply, |s| self.store_info(data, s)),
            (Place::WellKnown(_), View::Gunzip) => {
                self.put(id, apply, |s| Self::store_gzip(data, s))
            }
            // A restore may write the inventory before savegameinfo.json: entry -1 is made
            // holding only the item list, and savegameinfo.json then gives the rest.
            (Place::Inventory, _) => self.put(id, apply, |s| {
                apply_inventory(s.unwrap_or(NO_PLAYER_JSON), data)
            }),
            (Place::Actor(_), _) => {
                self.put(id, apply, |s| parse_actor_json(data, s.unwrap_or_default()))
            }
            (Place::Chunk(..), View::Chunk(layer)) => {
                let world = {
                    let mut s = self.state()?;
                    self.world(&mut s)?
                };
                self.put(id, apply, |s| {
                    store_chunk(data, layer, &world.names, s, world.codec)
                })
            }
            _ => self.put(id, apply, |_| Ok(data.to_vec())),
        }
    }

    /// Replaces file entry `id` with what `make` builds from its stored bytes (`None` when
    /// it does not exist yet); commits only a real change, and nothing when `apply` only
    /// checks.
    fn put(
        &self,
        id: i64,
        apply: Apply,
        make: impl FnOnce(Option<&[u8]>) -> Result<Vec<u8>>,
    ) -> Result<()> {
        self.check_writable()?;
        let mut s = self.state()?;
        let stored = match s.disk.entry(id) {
            Some(e) if e.kind == EntryKind::File => Some(s.disk.read(id)?),
            Some(_) => return Err(Error::not_permitted(format!("entry {id} is not a file"))),
            None => None,
        };
        let data = make(stored.as_deref())?;
        let Apply::Store { dated } = apply else {
            return Ok(());
        };
        if stored.as_deref() == Some(data.as_slice()) {
            return Ok(());
        }
        self.commit(&mut s, &[Change::Put { id, data }], dated)
    }

    fn delete(&self, id: i64, path: &TreePath) -> Result<()> {
        self.check_writable()?;
        let mut s = self.state()?;
        if s.disk.entry(id).is_none() {
            return Err(not_found(path));
        }
        self.commit(&mut s, &[Change::Remove { id }], None)
    }

    /// The stored form of an edited `savegameinfo.json`; a world's JSON must keep what the
    /// chunk files need when it had it.
    fn store_info(&self, text: &[u8], stored: Option<&[u8]>) -> Result<Vec<u8>> {
        let stored = stored.unwrap_or_default();
        let new = parse_info_json(text, stored)?;
        if self.kind != DiskKind::Player && World::from_json(stored).is_ok() {
            World::from_json(&new).map_err(|e| {
                Error::invalid(format!(
                    "a world's savegameinfo.json needs width, height and tileNumberToNameMap: {}",
                    e.message()
                ))
            })?;
        }
        Ok(new)
    }

    fn store_gzip(data: &[u8], stored: Option<&[u8]>) -> Result<Vec<u8>> {
        match stored {
            Some(s) if gunzip(s, IMAGE_LIMIT).ok().as_deref() == Some(data) => Ok(s.to_vec()),
            _ => compress(Codec::Gzip, data),
        }
    }

    fn fixed_dir_empty(&self, empty: bool) -> Result<()> {
        if empty {
            Ok(())
        } else {
            Err(Error::not_empty("folder not empty"))
        }
    }

    /// Moves the stored bytes of entry `from` to entry `to` (replacing it).
    fn move_entry(&self, from: i64, to: i64, path: &TreePath) -> Result<()> {
        self.check_writable()?;
        if from == to {
            return Ok(());
        }
        let mut s = self.state()?;
        if s.disk
            .entry(from)
            .filter(|e| e.kind == EntryKind::File)
            .is_none()
        {
            return Err(not_found(path));
        }
        let data = s.disk.read(from)?;
        self.commit(
            &mut s,
            &[Change::Put { id: to, data }, Change::Remove { id: from }],
            None,
        )
    }
}

impl Tree for TvdaTree {
    /// The disk file, for everything the mount shows.
    fn source_files(&self, _top: Option<&str>) -> &[PathBuf] {
        std::slice::from_ref(&self.source)
    }

    /// Changes are committed at once; the mtime records waiting are written.
    fn sync(&self) -> Result<()> {
        self.mtimes.flush();
        Ok(())
    }

    fn stat(&self, path: &TreePath) -> Result<Stat> {
        let place = self.place(path)?;
        match place {
            Place::Root | Place::Actors | Place::Entries => {
                Ok(self.dir_stat(self.folder_mtime(place)?))
            }
            Place::Chunks | Place::Layer(_) => {
                if !self.has_chunks()? {
                    return Err(not_found(path));
                }
                Ok(self.dir_stat(self.folder_mtime(place)?))
            }
            Place::Index => Ok(index_tree::stat(&self.index_shown(path)?, |t| {
                self.dir_stat(t)
            })),
            Place::Header => {
                let (text, mtime) = self.header_file()?;
                Ok(self.file_stat(text.len() as u64, mtime))
            }
            _ => {
                let (id, view) = self.target(place, path)?;
                let info = self.info(id, path)?;
                self.file_entry_stat(&info, view)
            }
        }
    }

    fn list(&self, dir: &TreePath, after: u64, sink: &mut dyn FnMut(Entry) -> bool) -> Result<()> {
        match self.place(dir)? {
            Place::Root => {
                for e in self.root_entries()? {
                    if e.cookie > after && !sink(e) {
                        break;
                    }
                }
                Ok(())
            }
            Place::Actors => {
                self.stream_entries(self.actor_entries()?, View::Json, after, sink);
                Ok(())
            }
            Place::Chunks => {
                if !self.has_chunks()? {
                    return Err(not_found(dir));
                }
                for (i, layer) in Layer::ALL.into_iter().enumerate() {
                    let cookie = i as u64 + 1;
                    if cookie > after
                        && !sink(Entry {
                            name: layer.name().into(),
                            cookie,
                            stat: self.dir_stat(self.folder_mtime(Place::Layer(layer))?),
                        })
                    {
                        break;
                    }
                }
                Ok(())
            }
            Place::Layer(layer) => {
                if !self.has_chunks()? {
                    return Err(not_found(dir));
                }
                // A world disk whose entry -1 is not (yet) a world shows empty layers.
                let entries = self.chunk_entries(layer).unwrap_or_default();
                self.stream_entries(entries, View::Chunk(layer), after, sink);
                Ok(())
            }
            Place::Entries => {
                let entries =
                    self.entries_where(|e| Some((id_cookie(e.id), names::entry_file_name(e.id))))?;
                self.stream_entries(entries, View::Raw, after, sink);
                Ok(())
            }
            Place::Index => self.index_list(dir, after, sink),
            _ => Err(Error::not_dir("not a directory")),
        }
    }

    fn read(&self, path: &TreePath) -> Result<Arc<Vec<u8>>> {
        let place = self.place(path)?;
        match place {
            Place::Index => return index_tree::read(path, self.index_shown(path)?),
            Place::Header => return Ok(Arc::new(self.header_file()?.0)),
            _ => {}
        }
        let (id, view) = self.target(place, path)?;
        self.info(id, path)?;
        self.render(id, view)
    }

    fn write(&self, path: &TreePath, data: &[u8]) -> Result<()> {
        self.edit(path, data, Apply::Store { dated: None })
    }

    /// Stores `mtime` (in whole seconds) as the entry's own time: a restored disk's entries
    /// carry their backed-up times, as the game's saves would have stamped them.
    fn write_dated(&self, path: &TreePath, data: &[u8], mtime: SystemTime) -> Result<()> {
        self.edit(
            path,
            data,
            Apply::Store {
                dated: entry_secs(mtime),
            },
        )
    }

    fn check(&self, path: &TreePath, data: &[u8]) -> Result<()> {
        self.edit(path, data, Apply::Check)
    }

    fn writable_at(&self, path: &TreePath) -> Result<()> {
        match path.first() {
            Some(top) if top == index::INDEX => Err(index_tree::read_only(INDEX_RENAMES)),
            _ => Ok(()),
        }
    }

    fn classify(&self, dir: &TreePath, name: &str) -> Result<NewFile> {
        if looks_like_scratch(name) {
            return Ok(NewFile::Scratch);
        }
        let object = match self.place(dir)? {
            Place::Root => {
                name == HEADER_FILE
                    || names::by_name(self.kind, name).is_some()
                    || (name == "inventory" && self.kind == DiskKind::Player)
            }
            Place::Actors => names::parse_actor_file_name(name).is_some(),
            Place::Layer(layer) => {
                let child = [dir.to_vec(), vec![name.to_string()]].concat();
                match self.place(&child) {
                    // Without a world yet, the write is refused with the reason rather than
                    // held as a scratch file that no commit stores.
                    Ok(Place::Chunk(_, cx, cy)) => {
                        let mut s = self.state()?;
                        self.chunk_id(&mut s, layer, cx, cy).is_ok() || self.world(&mut s).is_err()
                    }
                    _ => false,
                }
            }
            Place::Entries => names::parse_entry_file_name(name).is_some_and(|id| id != ROOT_ID),
            // The target of a rename (`mv index/items/A index/items/B`).
            Place::Index => dir.len() == 2,
            _ => false,
        };
        Ok(if object {
            NewFile::Object
        } else {
            NewFile::Scratch
        })
    }

    fn check_remove(&self, path: &TreePath) -> Result<Removal> {
        let (_, id) = self.removal(path)?;
        // At once: one entry shows under several names (`entries/ID` and its view), and a
        // removal held back by name would delete what another name commits meanwhile.
        self.info(id, path).map(|_| Removal::AtOnce)
    }

    fn remove(&self, path: &TreePath) -> Result<()> {
        let (place, id) = self.removal(path)?;
        match place {
            Place::Inventory => {
                self.info(id, path)?;
                self.put(id, Apply::Store { dated: None }, |s| {
                    apply_inventory(s.unwrap_or_default(), b"")
                })
            }
            _ => self.delete(id, path),
        }
    }

    fn mkdir(&self, path: &TreePath) -> Result<()> {
        self.check_writable()?;
        Err(Error::not_permitted(format!(
            "{}: the folders of a TVDA disk are fixed",
            path.join("/")
        )))
    }

    fn rmdir(&self, path: &TreePath) -> Result<()> {
        self.check_writable()?;
        // Fixed folders stay; removing one that shows nothing is a no-op so `rm -r` works.
        match self.place(path)? {
            Place::Actors => self.fixed_dir_empty(self.actor_entries()?.is_empty()),
            Place::Layer(layer) => {
                self.fixed_dir_empty(self.chunk_entries(layer).map_or(true, |e| e.is_empty()))
            }
            Place::Chunks => {
                let mut empty = true;
                for layer in Layer::ALL {
                    empty &= self.chunk_entries(layer).map_or(true, |e| e.is_empty());
                }
                self.fixed_dir_empty(empty)
            }
            Place::Entries => {
                let s = self.state()?;
                let empty = !s.disk.entries().any(|e| e.id != ROOT_ID);
                self.fixed_dir_empty(empty)
            }
            Place::Root => Err(Error::not_permitted("the root cannot be removed")),
            Place::Index => Err(index_tree::read_only(INDEX_RENAMES)),
            _ => Err(Error::not_dir("not a directory")),
        }
    }

    fn rename(&self, from: &TreePath, to: &TreePath) -> Result<()> {
        self.check_writable()?;
        if from.first().map(String::as_str) == Some(index::INDEX) {
            return self.index_rename(from, to);
        }
        let (a, b) = (self.place(from)?, self.place(to)?);
        let same_kind = matches!(
            (a, b),
            (Place::Entry(_), Place::Entry(_)) | (Place::Actor(_), Place::Actor(_))
        ) || matches!((a, b), (Place::Chunk(la, ..), Place::Chunk(lb, ..)) if la == lb);
        if !same_kind {
            return Err(Error::new(
                libc::EXDEV,
                "only entries/ID, actors/ID.json and chunks of one layer move to another ID",
            ));
        }
        let (from_id, _) = self.target(a, from)?;
        let (to_id, _) = self.target(b, to)?;
        self.move_entry(from_id, to_id, from)
    }

    fn set_mtime(&self, path: &TreePath, mtime: SystemTime) -> Result<()> {
        self.check_writable()?;
        let place = self.place(path)?;
        match place {
            Place::Index => return self.index_shown(path).map(drop),
            Place::Header => {
                let (text, _) = self.header_file()?;
                self.mtimes.record(header_key(), content_hash(&text), mtime);
                return Ok(());
            }
            _ => {}
        }
        if matches!(
            place,
            Place::Root | Place::Actors | Place::Chunks | Place::Layer(_) | Place::Entries
        ) {
            self.stat(path)?;
            let s = self.state()?;
            self.mtimes
                .record(folder_key(place), listing_hash(&s, self.kind, place), mtime);
            return Ok(());
        }
        let (id, _) = self.target(place, path)?;
        let info = self.info(id, path)?;
        self.mtimes.record(id as u64, entry_hash(&info), mtime);
        Ok(())
    }

    fn read_only(&self) -> bool {
        self.is_read_only()
    }

    /// A rename under `index/` changes entries all over the disk.
    fn change_scope(&self, path: &TreePath) -> usize {
        if path.first().map(String::as_str) == Some(index::INDEX) {
            0
        } else {
            path.len()
        }
    }

    fn readlink(&self, path: &TreePath) -> Result<Vec<u8>> {
        match self.place(path)? {
            Place::Index => index_tree::readlink(path, self.index_shown(path)?),
            _ => Err(crate::vfs::tree::not_a_link(path)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tvda::codec::tvda::{Content, Header};

    /// A disk stores whole seconds in 48 bits: a time past them (settable on some file
    /// systems) is not stored wrapped, and a time before 1970 is not stored either.
    #[test]
    fn entry_times_are_whole_seconds_that_fit_48_bits() {
        let at = |s: u64| UNIX_EPOCH + Duration::from_secs(s);
        assert_eq!(
            entry_secs(at(1_600_000_000) + Duration::from_millis(900)),
            Some(1_600_000_000)
        );
        assert_eq!(entry_secs(at((1 << 48) - 1)), Some((1 << 48) - 1));
        assert_eq!(entry_secs(at(1 << 48)), None);
        assert_eq!(entry_secs(UNIX_EPOCH - Duration::from_secs(1)), None);
    }

    #[test]
    fn a_render_racing_a_commit_never_caches_the_old_rendering() {
        let dir = tempfile::tempdir().unwrap();
        std::env::set_var("WORLDFS_STATE_DIR", dir.path());
        let path = dir.path().join("disk");
        let entries = [
            (-1, Content::File(br#"{"genver":1}"#.to_vec())),
            (-4, Content::File(b"old".to_vec())),
        ];
        Disk::create(&path, Header::new("p", 1).unwrap(), &entries, 1).unwrap();
        let tree = TvdaTree::open(
            &path,
            &Options {
                read_only: false,
                cache_bytes: 1 << 20,
            },
        )
        .unwrap();
        let file = ["entries".to_string(), names::entry_file_name(-4)];
        // A reader reads entry -4; before it caches its rendering, a write commits a new
        // -4. The reader must not put the old rendering (nor its size) in the caches.
        tree.after_read.set(|t: &TvdaTree| {
            let file = ["entries".to_string(), names::entry_file_name(-4)];
            t.write(&file, b"new, longer").unwrap();
        });
        assert_eq!(*tree.read(&file).unwrap(), b"old");
        assert_eq!(*tree.read(&file).unwrap(), b"new, longer");
        assert_eq!(tree.stat(&file).unwrap().size, 11);
    }
}
