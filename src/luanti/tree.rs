//! The mounted tree of a Luanti world (docs/tree.md "The tree"; docs/architecture.md):
//!
//! ```text
//! world.mt, worldmods/, ...        the world folder's other files, folders and links
//! blocks/X,Y,Z/                    one folder per stored block
//!     nodes.cubeset light.txt block.txt timers.txt objects.txt
//!     meta/x,y,z/{fields/KEY, private/KEY, inventory}
//! players/NAME, auth.txt, mod_storage/MOD/KEY     see [`Accounts`]
//! ```
//!
//! Paths are mapped to places here and dispatched: the block side (views, node metadata,
//! listings of block folders) is in [`blocks`], the accounts side in [`accounts`]; decoding,
//! caching and committing live in [`Blocks`], the formats in the codec and the views.

pub mod accounts;
mod blocks;

pub use blocks::BlockNumbers;
mod index;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use crate::error::{Error, Result};
use crate::index_tree;
use crate::luanti::cache::{Blocks, Cached, Edited, Pinned};
use crate::luanti::codec::block::{BlockPos, MetaVar, RelPos};
use crate::luanti::codec::inventory::{parse_inventory, serialize_inventory};
use crate::luanti::index::Index;
use crate::luanti::store::map::MapStore;
use crate::luanti::store::snapshot;
use crate::luanti::store::world_mt::{Backend, WorldMt};
use crate::luanti::store::write_back::Window;
use crate::names;
use crate::storekit::folder::FolderFiles;
use crate::storekit::mtimes::content_hash;
use crate::storekit::scratch::looks_like_scratch;
use crate::vfs::tree::{
    base_time, no_link_here, not_a_link, not_found, stream, Changed, ChangedEntries, Entry, Kind,
    NewFile, Numbering, Options, Owner, Pin, Removal, Stat, Tree, TreePath,
};
use accounts::Accounts;
pub use blocks::{block_name, parse_block_name};
use blocks::{check_key, meta_at, meta_entry, parse_rel_name, source, sub_path, Page, View, VIEWS};

/// A value file (a metadata field, a mod storage key) shows the value plus one `\n`.
fn value_to_file(value: &[u8]) -> Vec<u8> {
    let mut out = value.to_vec();
    out.push(b'\n');
    out
}

/// The value a value file holds: its text without the one trailing `\n` it is shown with.
fn value_from_file(data: &[u8]) -> &[u8] {
    data.strip_suffix(b"\n").unwrap_or(data)
}

/// The names of the world folder hidden from the top level because the tree shows them
/// decoded or shows a view under that name: the view wins (a `blocks/` folder, a `players/`
/// folder beside the sqlite3 player backend, which the engine ignores then).
fn hidden_world_file(name: &str) -> bool {
    name.starts_with("map.sqlite")
        || name == "map.db"
        || name == "blocks"
        || name == index::INDEX
        || name == accounts::PLAYERS
        || name == accounts::MOD_STORAGE
        || accounts::hidden_world_file(name)
}

/// The number of the first line of `text` that is not UTF-8 text.
fn first_non_utf8_line(text: &[u8]) -> Option<usize> {
    text.split(|&b| b == b'\n')
        .position(|line| std::str::from_utf8(line).is_err())
        .map(|i| i + 1)
}

/// Whether `path` is the world folder's `world.mt`.
fn is_world_mt(path: &TreePath) -> bool {
    matches!(path, [name] if name == "world.mt")
}

/// Where a path points.
enum Place {
    Root,
    /// `players/…`, `auth.txt`, `mod_storage/…`: handled by [`Accounts`].
    Accounts,
    /// A file, folder or link of the world folder itself (`world.mt`, `worldmods/…`).
    WorldFile,
    Blocks,
    Block(BlockPos),
    View(BlockPos, &'static View),
    Meta(BlockPos),
    MetaNode(BlockPos, RelPos),
    Vars(BlockPos, RelPos, bool),
    Var(BlockPos, RelPos, bool, Vec<u8>),
    Inventory(BlockPos, RelPos),
    /// `blocks/X,Y,Z/error.txt`: why a block does not decode (only such a block shows it).
    BlockError(BlockPos),
    /// `index/…`: whole-world answers (see [`index`]).
    Index(index::At),
}

/// The renames that change `index/`.
const INDEX_RENAMES: &str =
    "mv of index/nodes/NAME or index/items/ITEM, and rm -r of index/objects/NAME";

/// A Luanti world (or a bare `map.sqlite`) as a tree.
pub struct LuantiTree {
    blocks: Blocks,
    /// The whole-world answers of `index/`.
    index: Arc<Index>,
    files: Option<FolderFiles>,
    accounts: Option<Accounts>,
    /// `world.mt` as it was when the world was opened: where the stores are written.
    world_mt: Option<WorldMt>,
    read_only: bool,
    /// The world folder, or the map database file mounted alone.
    source: PathBuf,
    /// What guards each view on disk ([`LuantiTree::view_sources`]).
    view_sources: Vec<(&'static str, Vec<PathBuf>)>,
    /// Meta folders that exist only because the user made them (empty metadata is not stored).
    empty_meta: Mutex<BTreeSet<(BlockPos, u16)>>,
    /// Recent pages of the `blocks/` listing: the kernel asks for a few dozen entries per
    /// call, and a page read from SQLite serves many consecutive calls.
    pages: Mutex<Vec<Arc<Page>>>,
    /// Blocks changed by edits of the whole map (`index/` renames) since the core last asked
    /// ([`Tree::take_changed_objects`]); `None` once more than [`CHANGED_BLOCKS_NAMED`]
    /// were: the core then re-checks everything the kernel keeps.
    changed_blocks: Mutex<Option<Vec<ChangedBlock>>>,
}

/// A block an edit of the whole map changed, as named to the core.
#[derive(Clone, Copy)]
struct ChangedBlock {
    pos: BlockPos,
    /// The hashes of its stored bytes before and after.
    before: u64,
    after: u64,
    /// The views the edit changed (bit `i`: `VIEWS[i]`); `None`: more than views changed.
    views: Option<u8>,
}

/// How many blocks changed by edits of the whole map are named to the core (24 bytes each):
/// past this, it re-checks everything, as it does without names.
const CHANGED_BLOCKS_NAMED: usize = 1 << 18;

/// A block view's source kept at a reader's open (see [`Tree::pin`]).
struct PinnedView {
    pos: BlockPos,
    view: &'static View,
    pinned: Pinned,
}

/// The world folder of a source: the folder itself, or none for a map database file.
pub fn world_folder(source: &Path) -> Result<Option<PathBuf>> {
    if source.is_dir() {
        Ok(Some(source.to_path_buf()))
    } else if source.is_file() {
        Ok(None)
    } else {
        Err(Error::not_found(format!(
            "{}: no such file or folder",
            source.display()
        )))
    }
}

/// `--snapshot` refuses a world holding data in a store that cannot be read as one moment
/// (see [`snapshot`]): a map in LevelDB or Redis, players, auth or mod storage kept as files
/// or in LevelDB. SQLite databases not in WAL mode are refused as they are opened.
fn refuse_without_snapshot(world: &Path, mt: &WorldMt) -> Result<()> {
    let refused = |what: &str, backend: &Backend| {
        Err(Error::new(
            libc::EPERM,
            format!(
                "{}: --snapshot cannot read {what} as one moment: they are kept in {} \
                 (a snapshot needs sqlite3 in WAL mode or postgresql); mount it --read-only \
                 to read it as it is at each read, or back it up with the server stopped",
                world.display(),
                backend.name()
            ),
        ))
    };
    match mt.map_backend() {
        Backend::Sqlite3 | Backend::Postgresql => {}
        other => return refused("the map", &other),
    }
    let stores = [
        ("player_backend", "players", "players", "players.db"),
        ("auth_backend", "auth data", "auth.txt", "auth.db"),
        (
            "mod_storage_backend",
            "mod storage",
            "mod_storage",
            "mod_storage.db",
        ),
    ];
    for (key, what, files, leveldb) in stores {
        let held = match mt.backend(key) {
            Backend::Sqlite3 | Backend::Postgresql => false,
            Backend::Files => world.join(files).exists(),
            Backend::LevelDb => world.join(leveldb).exists(),
            Backend::Redis | Backend::Other(_) => false,
        };
        if held {
            return refused(what, &mt.backend(key));
        }
    }
    // Every database not in WAL mode named at once, so one stop of the server fixes all.
    let databases = [
        ("backend", "map.sqlite"),
        ("player_backend", "players.sqlite"),
        ("auth_backend", "auth.sqlite"),
        ("mod_storage_backend", "mod_storage.sqlite"),
    ];
    let not_wal: Vec<PathBuf> = databases
        .iter()
        .filter(|(key, _)| {
            let backend = match *key {
                "backend" => mt.map_backend(),
                key => mt.backend(key),
            };
            backend == Backend::Sqlite3
        })
        .map(|(_, file)| world.join(file))
        .filter(|path| path.is_file() && snapshot::not_in_wal_mode(path))
        .collect();
    if !not_wal.is_empty() {
        let commands: Vec<String> = not_wal
            .iter()
            .map(|p| format!("sqlite3 {} 'PRAGMA journal_mode=WAL'", p.display()))
            .collect();
        return Err(Error::new(
            libc::EPERM,
            format!(
                "{}: --snapshot needs SQLite's WAL mode, and {} {} in rollback-journal mode \
                 (the engine's default), where a reader holding a moment would block the \
                 server's saves; stop the server, run: {}; and start it again (the engine \
                 keeps WAL mode from then on)",
                world.display(),
                not_wal
                    .iter()
                    .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                    .collect::<Vec<_>>()
                    .join(", "),
                if not_wal.len() == 1 { "is" } else { "are" },
                commands.join("; ")
            ),
        ));
    }
    Ok(())
}

impl LuantiTree {
    /// Opens the world at `source` (nothing is decoded).
    pub fn open(source: &Path, options: &Options) -> Result<LuantiTree> {
        let world = world_folder(source)?;
        let world_mt = world.as_deref().map(WorldMt::read).transpose()?;
        if let (true, Some(w), Some(mt)) = (snapshot::on(), &world, &world_mt) {
            refuse_without_snapshot(w, mt)?;
        }
        let view_sources = match (&world, &world_mt) {
            (Some(w), Some(mt)) => Self::view_sources(w, mt),
            _ => Vec::new(),
        };
        let store = MapStore::open(source, options.read_only)?;
        let blocks = Blocks::new(store, options.cache_bytes, options.read_only);
        Ok(LuantiTree {
            index: Index::new(blocks.shared_store(), options.cache_bytes),
            blocks,
            files: world
                .as_ref()
                .map(|w| FolderFiles::new(w, hidden_world_file, options.read_only)),
            accounts: match (&world, &world_mt) {
                (Some(w), Some(mt)) => {
                    let accounts = Accounts::open(w, mt, options.read_only)?;
                    if snapshot::on() {
                        // Each store's moment is the mount's, not its first read's.
                        accounts.open_every_store()?;
                    }
                    Some(accounts)
                }
                _ => None,
            },
            world_mt,
            read_only: options.read_only,
            source: source.to_path_buf(),
            view_sources,
            empty_meta: Mutex::new(BTreeSet::new()),
            pages: Mutex::new(Vec::new()),
            changed_blocks: Mutex::new(Some(Vec::new())),
        })
    }

    /// Groups the commits of blocks from now on: see
    /// [`write_back`](crate::luanti::store::write_back) (`-o sync` keeps one
    /// transaction per close).
    pub fn write_back(&self, window: Window) -> Result<()> {
        self.blocks.write_back(window)
    }

    /// What guards each view on disk, by top-level name ([`Tree::source_files`]): the
    /// database file (or LevelDB folder, or files folder) of its store as `world.mt` names
    /// its backend; for a store on a server, `world.mt`, which holds its credentials; for a
    /// store not made yet, the world folder. `index/` reads the map and the players.
    fn view_sources(world: &Path, mt: &WorldMt) -> Vec<(&'static str, Vec<PathBuf>)> {
        let file = |backend: Backend, sqlite: &str, leveldb: &str, files: &str| {
            let name = match backend {
                Backend::Sqlite3 => sqlite,
                Backend::LevelDb => leveldb,
                Backend::Files => files,
                _ => "world.mt",
            };
            Some(world.join(name))
                .filter(|p| p.exists())
                .unwrap_or_else(|| world.to_path_buf())
        };
        let map = file(mt.map_backend(), "map.sqlite", "map.db", "map.sqlite");
        let players = file(
            mt.backend("player_backend"),
            "players.sqlite",
            "players.db",
            "players",
        );
        let auth = file(
            mt.backend("auth_backend"),
            "auth.sqlite",
            "auth.db",
            "auth.txt",
        );
        let mods = file(
            mt.backend("mod_storage_backend"),
            "mod_storage.sqlite",
            "mod_storage.db",
            "mod_storage",
        );
        vec![
            ("blocks", vec![map.clone()]),
            (index::INDEX, vec![map, players.clone()]),
            (accounts::PLAYERS, vec![players]),
            (accounts::AUTH, vec![auth]),
            (accounts::MOD_STORAGE, vec![mods]),
        ]
    }

    /// Notes blocks an edit of the whole map changed, once committed (see
    /// [`LuantiTree::changed_blocks`]).
    fn whole_map_changed(&self, edited: &Edited) {
        if let Ok(mut named) = self.changed_blocks.lock() {
            match named.as_mut() {
                Some(v) if v.len() + edited.changed.len() <= CHANGED_BLOCKS_NAMED => {
                    v.extend(edited.changed.iter().zip(&edited.entries).map(
                        |(&pos, &(before, after, first))| ChangedBlock {
                            pos,
                            before,
                            after,
                            views: blocks::changed_views(first),
                        },
                    ))
                }
                _ => *named = None,
            }
        }
    }

    /// The whole-world answers of `index/`.
    pub fn index(&self) -> &Index {
        &self.index
    }

    /// The blocks under this tree.
    pub fn blocks(&self) -> &Blocks {
        &self.blocks
    }

    fn place(&self, path: &TreePath) -> Result<Place> {
        let parts: Vec<&str> = path.iter().map(String::as_str).collect();
        let block = |s: &str| parse_block_name(s).ok_or_else(|| not_found(path));
        let rel = |s: &str| parse_rel_name(s).ok_or_else(|| not_found(path));
        Ok(match parts.as_slice() {
            [] => Place::Root,
            [top, ..] if self.accounts.as_ref().is_some_and(|a| a.owns(top)) => Place::Accounts,
            ["blocks"] => Place::Blocks,
            [index::INDEX, rest @ ..] => Place::Index(self.index_at(path, rest)?),
            [top, ..] if *top != "blocks" => Place::WorldFile,
            ["blocks", b] => Place::Block(block(b)?),
            ["blocks", b, "meta"] => Place::Meta(block(b)?),
            ["blocks", b, blocks::ERROR_FILE] => Place::BlockError(block(b)?),
            ["blocks", b, v] => {
                let view = VIEWS
                    .iter()
                    .find(|x| x.name == *v)
                    .ok_or_else(|| not_found(path))?;
                Place::View(block(b)?, view)
            }
            ["blocks", b, "meta", r] => Place::MetaNode(block(b)?, rel(r)?),
            ["blocks", b, "meta", r, "inventory"] => Place::Inventory(block(b)?, rel(r)?),
            ["blocks", b, "meta", r, d @ ("fields" | "private")] => {
                Place::Vars(block(b)?, rel(r)?, *d == "private")
            }
            ["blocks", b, "meta", r, d @ ("fields" | "private"), k] => {
                let (pos, rel, private) = (block(b)?, rel(r)?, *d == "private");
                let key = if names::is_long(k) {
                    self.long_key(pos, rel, private, k)
                        .ok_or_else(|| not_found(path))?
                } else {
                    names::unescape(k).map_err(|_| not_found(path))?
                };
                Place::Var(pos, rel, private, key)
            }
            _ => return Err(not_found(path)),
        })
    }

    fn accounts(&self) -> Result<&Accounts> {
        self.accounts
            .as_ref()
            .ok_or_else(|| Error::not_found("a bare map.sqlite has no players"))
    }

    /// Refuses a `world.mt` (`new`: its text, `None` for a link) that would move the world's
    /// data elsewhere: this mount keeps writing to the stores `world.mt` named when it
    /// opened the world, so a `world.mt` that names others (a backup of another backend's
    /// world restored over it) would leave what the mount wrote out of the game's reach. A
    /// link is refused whatever it points to (worldfs never reads `world.mt` through one),
    /// and so is text that is not UTF-8 (the parser would skip such a line,
    /// the engine would read it). Only what lands at `world.mt` is checked: an editor moves
    /// the old one aside or removes it before it writes the new one.
    fn check_world_mt(&self, path: &TreePath, new: Option<&[u8]>) -> Result<()> {
        let Some(opened) = self.world_mt.as_ref().filter(|_| is_world_mt(path)) else {
            return Ok(());
        };
        let Some(text) = new else {
            return Err(Error::not_permitted(
                "world.mt must be a file: the engine would follow a link, worldfs refuses to",
            ));
        };
        // A line that is not UTF-8 is skipped by the parser and read by the engine (and may
        // open a multi-line value that hides the lines after it).
        if let Some(n) = first_non_utf8_line(text) {
            return Err(Error::at(n, 1, "world.mt must be UTF-8 text".to_string()));
        }
        let new = WorldMt::parse(text)?;
        if let Some(key) = new.store_group() {
            return Err(Error::not_permitted(format!(
                "{key} is given as a {{ }} group, and it names where data is stored"
            )));
        }
        match opened.store_change(&new) {
            None => Ok(()),
            Some(change) => Err(Error::not_permitted(format!(
                "not changed, because {change}: this mount writes to the stores world.mt \
                 named when it was mounted. To change them, unmount first; to restore a \
                 backup into the stores its world.mt names, unmount, copy that world.mt into \
                 the world folder, mount and restore again; to restore it into this mount's \
                 stores, leave world.mt out (rsync --exclude /world.mt). The refused text \
                 stays at world.mt in the mount until you rm it"
            ))),
        }
    }

    fn world_files(&self) -> Result<&FolderFiles> {
        self.files
            .as_ref()
            .ok_or_else(|| Error::not_found("a bare map.sqlite has no world folder"))
    }

    fn read_place(&self, place: &Place, path: &TreePath) -> Result<Arc<Vec<u8>>> {
        match place {
            Place::WorldFile => self.world_files()?.read(path),
            Place::Accounts => self.accounts()?.read(path),
            Place::Index(at) => index_tree::read(path, self.index_shown(path, at)?),
            Place::BlockError(pos) => self
                .blocks
                .decode_error(*pos)?
                .map(|reason| Arc::new(format!("{reason}\n").into_bytes()))
                .ok_or_else(|| not_found(path)),
            Place::View(pos, _) | Place::Inventory(pos, _) | Place::Var(pos, ..) => {
                let c = self.blocks.get(*pos)?;
                self.read_in_block(place, path, &c)
            }
            _ => Err(Error::is_dir("is a directory")),
        }
    }

    /// The content of the block file `place` (a view, an inventory or a metadata field) as
    /// the decoded block `c` shows it.
    fn read_in_block(&self, place: &Place, path: &TreePath, c: &Cached) -> Result<Arc<Vec<u8>>> {
        match place {
            Place::View(pos, view) => {
                let pos = *pos;
                Ok(c.view(view.name, |b| (view.render)(b, pos)))
            }
            Place::Inventory(pos, rel) => {
                if !self.meta_exists(*pos, c, *rel) {
                    return Err(not_found(path));
                }
                let inv = meta_at(&c.block, *rel)
                    .map(|m| m.inventory.clone())
                    .unwrap_or_default();
                Ok(Arc::new(serialize_inventory(&inv)))
            }
            Place::Var(_, rel, private, key) => meta_at(&c.block, *rel)
                .and_then(|m| {
                    m.vars
                        .iter()
                        .find(|v| v.key == *key && v.private == *private)
                })
                .map(|v| Arc::new(value_to_file(&v.value)))
                .ok_or_else(|| not_found(path)),
            _ => Err(not_found(path)),
        }
    }
}

impl Tree for LuantiTree {
    /// The world folder for the root (the map file when mounted alone); each view's
    /// database; none for the world folder's own files, which keep their owners.
    fn source_files(&self, top: Option<&str>) -> &[PathBuf] {
        let whole = std::slice::from_ref(&self.source);
        match top {
            None => whole,
            Some(_) if self.files.is_none() => whole,
            Some(top) => self
                .view_sources
                .iter()
                .find(|(t, _)| *t == top)
                .filter(|_| {
                    top == "blocks"
                        || top == index::INDEX
                        || self.accounts.as_ref().is_some_and(|a| a.owns(top))
                })
                .map_or(&[], |(_, sources)| sources.as_slice()),
        }
    }

    fn stat(&self, path: &TreePath) -> Result<Stat> {
        let place = self.place(path)?;
        match &place {
            Place::Root | Place::Blocks => Ok(self.dir_stat(base_time())),
            Place::Index(at) => Ok(index_tree::stat(&self.index_shown(path, at)?, |t| {
                self.dir_stat(t)
            })),
            Place::BlockError(_) => {
                let data = self.read_place(&place, path)?;
                Ok(self.file_stat(data.len(), base_time()))
            }
            Place::WorldFile => self.world_files()?.stat(path),
            Place::Accounts => self.accounts()?.stat(path),
            Place::Block(pos) => {
                let s = self.blocks.stored(*pos)?.ok_or_else(|| not_found(path))?;
                Ok(self.block_dir_at(*pos, s.mtime, s.hash, s.from_seed))
            }
            Place::Meta(pos) => match self.summarized_meta(*pos)? {
                Some((_, stat)) => Ok(stat),
                None => Ok(self.entry_dir(*pos, &*self.blocks.get(*pos)?, "meta")),
            },
            Place::MetaNode(pos, rel) | Place::Vars(pos, rel, _) => {
                let c = self.blocks.get(*pos)?;
                if !self.meta_exists(*pos, &c, *rel) {
                    return Err(not_found(path));
                }
                Ok(self.entry_dir(*pos, &c, &sub_path(path)))
            }
            Place::View(pos, view) => match self.summarized_view(*pos, view)? {
                Some(stat) => Ok(stat),
                None => {
                    let c = self.blocks.get(*pos)?;
                    let data = self.read_in_block(&place, path, &c)?;
                    Ok(self.entry_file(*pos, &c, &sub_path(path), &data))
                }
            },
            Place::Inventory(pos, _) | Place::Var(pos, ..) => {
                // One decoded block for the content and the stat: the size, the time and the
                // source (see `Stat::source`) all name the same stored bytes, even when
                // another writer commits in between.
                let c = self.blocks.get(*pos)?;
                let data = self.read_in_block(&place, path, &c)?;
                Ok(self.entry_file(*pos, &c, &sub_path(path), &data))
            }
        }
    }

    fn list(&self, dir: &TreePath, after: u64, sink: &mut dyn FnMut(Entry) -> bool) -> Result<()> {
        match self.place(dir)? {
            Place::Root => self.list_root(after, sink),
            Place::Blocks => self.list_blocks(after, sink),
            Place::Index(at) => self.index_list(&at, after, sink),
            Place::Accounts => self.accounts()?.list(dir, after, sink),
            Place::WorldFile => self.world_files()?.list(dir, 1, after, sink),
            Place::Block(pos) => self.list_block(pos, after, sink),
            Place::Meta(pos) => self.list_meta(pos, after, sink),
            Place::MetaNode(pos, rel) => self.list_meta_node(dir, (pos, rel), after, sink),
            Place::Vars(pos, rel, private) => self.list_vars(dir, (pos, rel, private), after, sink),
            _ => Err(Error::not_dir("not a directory")),
        }
    }

    fn read(&self, path: &TreePath) -> Result<Arc<Vec<u8>>> {
        let place = self.place(path)?;
        self.read_place(&place, path)
    }

    /// A block's view keeps the block's stored bytes at the open, when those are the bytes
    /// `stat` was made of (a view's text depends on them and the position only, so whether
    /// the block is as the map generator made it does not matter).
    fn pin(&self, path: &TreePath, stat: &Stat) -> Option<Pin> {
        let Ok(Place::View(pos, view)) = self.place(path) else {
            return None;
        };
        let pinned = self.blocks.pin(pos).ok()??;
        let made_of = [false, true]
            .into_iter()
            .any(|seed| stat.source == Some(source(pinned.hash, seed)));
        made_of.then(|| Arc::new(PinnedView { pos, view, pinned }) as Pin)
    }

    fn read_pinned(&self, path: &TreePath, pin: &Pin) -> Result<Arc<Vec<u8>>> {
        let p = pin.downcast_ref::<PinnedView>().ok_or_else(|| {
            Error::new(
                libc::EIO,
                format!("{}: not a pin of a block view", path.join("/")),
            )
        })?;
        self.blocks
            .pinned_view(p.pos, &p.pinned, p.view.name, |b| (p.view.render)(b, p.pos))
    }

    fn write(&self, path: &TreePath, data: &[u8]) -> Result<()> {
        match self.place(path)? {
            Place::WorldFile => {
                self.check_world_mt(path, Some(data))?;
                self.world_files()?.write(path, data)
            }
            Place::Accounts => self.accounts()?.write(path, data),
            Place::View(pos, view) => self.write_view(pos, view, data),
            Place::Inventory(pos, rel) => {
                let inv = parse_inventory(data)?;
                self.modify(pos, |b| {
                    meta_entry(b, rel).inventory = inv;
                    Ok(())
                })?;
                self.keep_meta_dir(pos, rel);
                Ok(())
            }
            Place::Var(pos, rel, private, key) => {
                check_key(&key)?;
                let value = value_from_file(data).to_vec();
                self.modify(pos, |b| {
                    let m = meta_entry(b, rel);
                    m.vars.retain(|v| v.key != key);
                    let at = m.vars.partition_point(|v| v.key < key);
                    m.vars.insert(
                        at,
                        MetaVar {
                            key,
                            value,
                            private,
                        },
                    );
                    Ok(())
                })?;
                self.keep_meta_dir(pos, rel);
                Ok(())
            }
            Place::Index(_) => Err(index_tree::read_only(INDEX_RENAMES)),
            _ => Err(Error::is_dir("is a directory")),
        }
    }

    fn check(&self, path: &TreePath, data: &[u8]) -> Result<()> {
        match self.place(path)? {
            Place::WorldFile => self.check_world_mt(path, Some(data)),
            Place::Accounts => self.accounts()?.check(path, data),
            Place::View(pos, view) => {
                (view.parse)(data, pos, &mut self.blocks.get(pos)?.block.clone())
            }
            Place::Inventory(..) => parse_inventory(data).map(drop),
            Place::Var(_, _, _, key) => check_key(&key),
            Place::Index(_) => Err(index_tree::read_only(INDEX_RENAMES)),
            _ => Err(Error::is_dir("is a directory")),
        }
    }

    fn writable_at(&self, path: &TreePath) -> Result<()> {
        match path.first().map(String::as_str) {
            Some(index::INDEX) => Err(index_tree::read_only(INDEX_RENAMES)),
            // A block shown from a `readonly_backend` seed (0555/0444) takes nothing, whoever
            // asks: root, or a mount whose kernel does not check modes.
            Some("blocks") => match path.get(1).and_then(|b| parse_block_name(b)) {
                Some(pos) => self.blocks.check_writable(pos),
                None => Ok(()),
            },
            _ => Ok(()),
        }
    }

    fn classify(&self, dir: &TreePath, name: &str) -> Result<NewFile> {
        Ok(match self.place(dir)? {
            // auth.txt is made by writing it where no auth data exists yet.
            Place::Root if name == accounts::AUTH && self.accounts.is_some() => NewFile::Object,
            Place::Root if self.files.is_some() && !hidden_world_file(name) => {
                if looks_like_scratch(name) {
                    NewFile::Scratch
                } else {
                    NewFile::Object
                }
            }
            Place::WorldFile if looks_like_scratch(name) => NewFile::Scratch,
            Place::WorldFile => NewFile::Object,
            Place::Accounts => self.accounts()?.classify(dir, name)?,
            Place::Block(_) if VIEWS.iter().any(|v| v.name == name) => NewFile::Object,
            Place::MetaNode(..) if name == "inventory" => NewFile::Object,
            // The target of a rename of a node or an item (`mv index/items/A index/items/B`).
            Place::Index(index::At::Folder("nodes" | "items")) => NewFile::Object,
            // Field names are free: every name is a key but the exact temporaries of sed,
            // rsync and vim, and a long form names only a stored key.
            Place::Vars(..) if names::is_tool_temporary(name) => NewFile::Scratch,
            Place::Vars(..) => {
                names::unescape(name)?;
                NewFile::Object
            }
            _ => NewFile::Scratch,
        })
    }

    fn check_remove(&self, path: &TreePath) -> Result<Removal> {
        let place = self.place(path)?;
        let removal = match place {
            Place::WorldFile => {
                self.world_files()?.check_remove(path)?;
                return Ok(if is_world_mt(path) {
                    Removal::Checked
                } else {
                    Removal::AtOnce
                });
            }
            // Removing a link of index/objects/NAME/ changes nothing, so `rm -r` reaches
            // the rmdir of NAME, which removes the objects.
            Place::Index(index::At::ObjectLink(_)) => return Ok(Removal::AtOnce),
            Place::Index(_) => return Err(index_tree::read_only(INDEX_RENAMES)),
            // Removing these changes nothing stored (auth.txt is reset by writing it).
            Place::View(..) | Place::BlockError(_) => Removal::AtOnce,
            Place::Accounts if path.len() == 1 => Removal::AtOnce,
            Place::Accounts => Removal::Checked,
            // A seed block's (0555) are refused now, not when the held-back removal commits.
            Place::Inventory(pos, _) | Place::Var(pos, ..) => {
                self.blocks.check_writable(pos)?;
                Removal::Checked
            }
            _ => return Err(Error::is_dir("is a directory")),
        };
        match self.stat(path)?.kind {
            Kind::Dir => Err(Error::is_dir("is a directory")),
            _ => Ok(removal),
        }
    }

    fn remove(&self, path: &TreePath) -> Result<()> {
        match self.place(path)? {
            Place::WorldFile => self.world_files()?.remove(path),
            Place::Index(index::At::ObjectLink(_)) => Ok(()),
            Place::Index(_) => Err(index_tree::read_only(INDEX_RENAMES)),
            Place::Accounts => self.accounts()?.remove(path),
            // The views of a block cannot be absent: removing one is a no-op, so `rm -r` of
            // a block folder reaches the rmdir that deletes the block.
            Place::View(pos, _) => self.blocks.get(pos).map(|_| ()),
            // So is removing a broken block's error.txt, so `rm -r` reaches the rmdir.
            Place::BlockError(pos) => match self.blocks.decode_error(pos)? {
                Some(_) => Ok(()),
                None => Err(not_found(path)),
            },
            Place::Inventory(pos, rel) => {
                self.modify(pos, |b| {
                    if let Some(m) = b.metadata.iter_mut().find(|m| m.pos == rel) {
                        m.inventory.lists.clear();
                    }
                    Ok(())
                })?;
                self.keep_meta_dir(pos, rel);
                Ok(())
            }
            Place::Var(pos, rel, private, key) => {
                let c = self.blocks.get(pos)?;
                let exists = meta_at(&c.block, rel)
                    .is_some_and(|m| m.vars.iter().any(|v| v.key == key && v.private == private));
                if !exists {
                    return Err(not_found(path));
                }
                self.modify(pos, |b| {
                    if let Some(m) = b.metadata.iter_mut().find(|m| m.pos == rel) {
                        m.vars.retain(|v| v.key != key);
                    }
                    b.metadata
                        .retain(|m| !m.vars.is_empty() || !m.inventory.lists.is_empty());
                    Ok(())
                })?;
                self.keep_meta_dir(pos, rel);
                Ok(())
            }
            _ => Err(Error::is_dir("is a directory")),
        }
    }

    fn mkdir(&self, path: &TreePath) -> Result<()> {
        match self.place(path)? {
            Place::Block(pos) => self.blocks.create(pos),
            Place::Accounts => self.accounts()?.mkdir(path),
            Place::WorldFile => self.world_files()?.mkdir(path),
            Place::MetaNode(pos, rel) => {
                let c = self.blocks.get(pos)?;
                if self.meta_exists(pos, &c, rel) {
                    return Err(Error::exists("metadata folder exists"));
                }
                self.keep_meta_dir(pos, rel);
                Ok(())
            }
            _ => Err(Error::not_permitted(format!(
                "{}: folders here are fixed (blocks/X,Y,Z and meta/x,y,z can be created)",
                path.join("/")
            ))),
        }
    }

    fn rmdir(&self, path: &TreePath) -> Result<()> {
        match self.place(path)? {
            Place::Block(pos) => self.blocks.delete(pos),
            Place::Index(index::At::Object(name)) => self.remove_objects_everywhere(&name),
            Place::Accounts => self.accounts()?.rmdir(path),
            Place::WorldFile => self.world_files()?.rmdir(path),
            Place::MetaNode(pos, rel) => {
                let c = self.blocks.get(pos)?;
                if !self.meta_exists(pos, &c, rel) {
                    return Err(not_found(path));
                }
                self.modify(pos, |b| {
                    b.metadata.retain(|m| m.pos != rel);
                    Ok(())
                })?;
                if let Ok(mut s) = self.empty_meta.lock() {
                    s.remove(&(pos, rel.index()));
                }
                Ok(())
            }
            // Fixed folders stay; removing them empty is a no-op so `rm -r` can proceed.
            Place::Meta(pos) => {
                let c = self.blocks.get(pos)?;
                if c.block.metadata.is_empty() {
                    Ok(())
                } else {
                    Err(Error::not_empty("meta folder not empty"))
                }
            }
            Place::Vars(pos, rel, private) => {
                let c = self.blocks.get(pos)?;
                let any = meta_at(&c.block, rel)
                    .is_some_and(|m| m.vars.iter().any(|v| v.private == private));
                if any {
                    Err(Error::not_empty("folder not empty"))
                } else {
                    Ok(())
                }
            }
            _ => Err(Error::not_permitted(format!(
                "{}: cannot be removed",
                path.join("/")
            ))),
        }
    }

    fn rename(&self, from: &TreePath, to: &TreePath) -> Result<()> {
        if from.first().map(String::as_str) == Some(index::INDEX) {
            return self.index_rename(from, to);
        }
        match (self.place(from)?, self.place(to)?) {
            (Place::Block(a), Place::Block(b)) => self.blocks.rename(a, b),
            (Place::Accounts, Place::Accounts) => self.accounts()?.rename(from, to),
            (Place::WorldFile, Place::WorldFile) => {
                let files = self.world_files()?;
                if self.world_mt.is_some() && is_world_mt(to) {
                    self.check_world_mt(to, Some(&files.read(from)?))?;
                }
                files.rename(from, to)
            }
            (Place::Var(pa, ra, fa, ka), Place::Var(pb, rb, fb, kb)) if pa == pb && ra == rb => {
                self.modify(pa, |b| {
                    let m = meta_entry(b, ra);
                    let value = m
                        .vars
                        .iter()
                        .find(|v| v.key == ka && v.private == fa)
                        .map(|v| v.value.clone())
                        .ok_or_else(|| Error::not_found("no such field"))?;
                    m.vars.retain(|v| v.key != ka && v.key != kb);
                    let at = m.vars.partition_point(|v| v.key < kb);
                    m.vars.insert(
                        at,
                        MetaVar {
                            key: kb,
                            value,
                            private: fb,
                        },
                    );
                    Ok(())
                })
            }
            _ => Err(Error::new(
                libc::EXDEV,
                "only block folders, metadata fields of one node and world files can be renamed",
            )),
        }
    }

    fn set_mtime(&self, path: &TreePath, mtime: SystemTime) -> Result<()> {
        let place = self.place(path)?;
        let sub = sub_path(path);
        match place {
            Place::Root | Place::Blocks | Place::Index(_) | Place::BlockError(_) => Ok(()),
            Place::WorldFile => self.world_files()?.set_mtime(path, mtime),
            Place::Accounts => self.accounts()?.set_mtime(path, mtime),
            Place::Block(pos) => {
                let _times = self.blocks.times_lock(pos)?;
                self.stat(path)?;
                let hash = self.blocks.get(pos)?.hash;
                self.blocks.set_entry_mtimes(pos, &[(sub, hash, mtime)]);
                Ok(())
            }
            Place::Meta(pos) | Place::MetaNode(pos, _) | Place::Vars(pos, ..) => {
                let _times = self.blocks.times_lock(pos)?;
                self.stat(path)?;
                let hash = self.dir_hash(pos, &*self.blocks.get(pos)?, &sub);
                self.blocks.set_entry_mtimes(pos, &[(sub, hash, mtime)]);
                Ok(())
            }
            Place::View(pos, _) | Place::Var(pos, ..) | Place::Inventory(pos, _) => {
                let _times = self.blocks.times_lock(pos)?;
                let data = self.read_place(&place, path)?;
                self.blocks
                    .set_entry_mtimes(pos, &[(sub, content_hash(&data), mtime)]);
                Ok(())
            }
        }
    }

    fn set_perm(&self, path: &TreePath, perm: u16) -> Result<()> {
        match self.place(path)? {
            Place::WorldFile => self.world_files()?.set_perm(path, perm),
            _ => Ok(()),
        }
    }

    fn set_owner(&self, path: &TreePath, owner: Owner) -> Result<()> {
        match self.place(path)? {
            Place::WorldFile => self.world_files()?.set_owner(path, owner),
            _ => Ok(()),
        }
    }

    fn read_only(&self) -> bool {
        self.read_only
    }

    fn read_only_error(&self) -> Error {
        if snapshot::on() {
            Error::read_only("a --snapshot mount: the world as it was when mounted, read-only")
        } else {
            Error::read_only("the mount is read-only")
        }
    }

    /// A change to any file of a block changes its other views (and its folder's time); a
    /// change under `index/` (a rename) may change any block.
    fn change_scope(&self, path: &TreePath) -> usize {
        match path.first().map(String::as_str) {
            Some("blocks") if path.len() > 2 => 2,
            // A rename under index/ changes blocks all over the map.
            Some(index::INDEX) => 0,
            _ => path.len(),
        }
    }

    /// After renames under `index/`: the blocks they changed, `index/` and the accounts'
    /// folders (an item rename changes players' inventories); not the world folder's files,
    /// whose stats are volatile.
    fn take_changed_objects(&self) -> Option<Box<dyn Iterator<Item = Changed> + '_>> {
        let blocks = self.changed_blocks.lock().ok()?.replace(Vec::new())?;
        let mut tops = vec![Changed::whole(vec![index::INDEX.to_string()])];
        if let Some(accounts) = &self.accounts {
            tops.extend(
                accounts
                    .top_names()
                    .into_iter()
                    .map(|n| Changed::whole(vec![n.to_string()])),
            );
        }
        let blocks = blocks.into_iter().map(|b| Changed {
            path: vec!["blocks".to_string(), block_name(b.pos)],
            entries: b.views.map(|views| ChangedEntries {
                names: VIEWS
                    .iter()
                    .enumerate()
                    .filter(|&(i, _)| views & 1 << i != 0)
                    .map(|(_, v)| v.name)
                    .collect(),
                // An edit of the whole map refuses blocks from the seed.
                before: source(b.before, false),
                after: source(b.after, false),
            }),
        });
        Some(Box::new(tops.into_iter().chain(blocks)))
    }

    /// `blocks/` and everything in it: blocks come and go with the map database (or by
    /// `mkdir`, `rm` and `mv` through the mount), and a block folder's entries with its
    /// stored bytes.
    fn listing_kept(&self, dir: &TreePath) -> bool {
        dir.first().is_some_and(|top| top == "blocks")
    }

    /// The map database (players, auth and mod storage are read afresh on each use, and
    /// the world folder's files are the system's: their stats are volatile).
    fn underneath(&self) -> Option<u64> {
        Some(self.blocks.underneath())
    }

    fn numbering(&self) -> Option<Arc<dyn Numbering>> {
        Some(Arc::new(blocks::BlockNumbers(
            self.blocks.store().map().axis_order(),
        )))
    }

    /// Every stat under a block folder derives from the block's stored bytes (entry times
    /// set through the mount are changes of ours, re-checked exactly after each).
    fn source_of(&self, path: &TreePath) -> Option<Option<u64>> {
        match path
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .as_slice()
        {
            ["blocks", _, blocks::ERROR_FILE] => None,
            ["blocks", b, ..] => self.block_source(parse_block_name(b)?).ok(),
            _ => None,
        }
    }

    fn sync(&self) -> Result<()> {
        let committed = self.blocks.store().flush();
        self.blocks.flush_sidecars();
        if let Some(accounts) = &self.accounts {
            accounts.flush_times();
        }
        committed
    }

    fn notes(&self) -> Vec<(bool, String)> {
        self.blocks.store().map().condition().into_iter().collect()
    }

    fn uncommitted(&self) -> Vec<String> {
        let pending = self.blocks.store().pending();
        pending
            .into_iter()
            .map(|pos| format!("blocks/{}", block_name(pos)))
            .collect()
    }

    fn readlink(&self, path: &TreePath) -> Result<Vec<u8>> {
        match self.place(path)? {
            Place::WorldFile => self.world_files()?.readlink(path),
            Place::Index(at) => index_tree::readlink(path, self.index_shown(path, &at)?),
            _ => Err(not_a_link(path)),
        }
    }

    fn symlink(&self, path: &TreePath, target: &[u8]) -> Result<()> {
        match self.place(path)? {
            Place::WorldFile => {
                self.check_world_mt(path, None)?;
                self.world_files()?.symlink(path, target)
            }
            _ => Err(no_link_here(path)),
        }
    }
}

impl LuantiTree {
    /// Lists the top level: `blocks`, the accounts' names and the world folder's other files.
    /// `index` is not listed (it is reached by name): a backup, `find` or `grep -r` of the
    /// mount must not walk a second view of the whole world, nor restore into it.
    fn list_root(&self, after: u64, sink: &mut dyn FnMut(Entry) -> bool) -> Result<()> {
        let mut entries = vec![Entry {
            name: "blocks".into(),
            cookie: 1,
            stat: self.dir_stat(base_time()),
        }];
        if let Some(accounts) = &self.accounts {
            for (i, name) in accounts.top_names().into_iter().enumerate() {
                // Only a name that does not exist is left out. One whose store cannot be read
                // (a server that is down, a database another program locked or that is
                // damaged) is listed, with attributes the kernel does not keep: its own
                // `stat` and reads fail with the reason, so a backup reports the error
                // (`rsync --delete` then deletes nothing) instead of taking it for deleted,
                // and the rest of the world is still listed.
                let stat = match accounts.stat(&[name.to_string()]) {
                    Ok(stat) => stat,
                    Err(e) if e.errno() == libc::ENOENT => continue,
                    Err(e) => {
                        log::warn!("{name}: listed, but it cannot be read: {}", e.message());
                        Stat {
                            volatile: true,
                            ..self.file_stat(0, base_time())
                        }
                    }
                };
                entries.push(Entry {
                    name: name.into(),
                    cookie: i as u64 + 2,
                    stat,
                });
            }
        }
        if let Some(files) = &self.files {
            entries.extend(files.entries(&[], 6)?);
        }
        stream(entries, after, sink);
        Ok(())
    }

    /// Keeps a meta folder visible while its node has no stored metadata.
    fn keep_meta_dir(&self, pos: BlockPos, rel: RelPos) {
        if let Ok(mut s) = self.empty_meta.lock() {
            s.insert((pos, rel.index()));
        }
    }
}
