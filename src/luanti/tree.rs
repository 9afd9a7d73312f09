//! The mounted tree of a Luanti world (DESIGN.md "The trees / Luanti"):
//!
//! ```text
//! world.mt, env_meta.txt, ...      the world folder's other files and links
//! blocks/X,Y,Z/                    one folder per stored block
//!     nodes.cubeset light.txt block.txt timers.txt objects.txt
//!     meta/x,y,z/{fields/KEY, private/KEY, inventory}
//! players/NAME, auth.txt, mod_storage/MOD/KEY     see [`Accounts`]
//! ```
//!
//! Paths are mapped to blocks and views here; decoding, caching and committing live in
//! [`Blocks`], the formats in the codec and the views.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use crate::error::{Error, Result};
use crate::luanti::accounts_tree::{self, Accounts};
use crate::luanti::block::{BlockPos, MapBlock, MetaVar, NodeMeta, RelPos};
use crate::luanti::blocks::{Blocks, Cached};
use crate::luanti::codec::inventory::{parse_inventory, serialize_inventory};
use crate::luanti::map_store::{MapStore, LIST_BYTES};
use crate::luanti::views;
use crate::names;
use crate::vfs::folder::FolderFiles;
use crate::vfs::mtimes::content_hash;
use crate::vfs::scratch::looks_like_scratch;
use crate::vfs::tree::{
    base_time, no_link_here, not_a_link, not_found, stream, Entry, NewFile, Stat, Tree, TreePath,
};

/// The files of a block folder, in listing order, with how each is rendered and parsed.
struct View {
    name: &'static str,
    render: fn(&MapBlock, BlockPos) -> Vec<u8>,
    parse: fn(&[u8], BlockPos, &mut MapBlock) -> Result<()>,
}

const VIEWS: [View; 5] = [
    View {
        name: "block.txt",
        render: |b, _| views::render_header(b),
        parse: |t, _, b| views::parse_header(t, b),
    },
    View {
        name: "light.txt",
        render: |b, _| views::render_light(b),
        parse: |t, _, b| views::parse_light(t, b),
    },
    View {
        name: "nodes.cubeset",
        render: |b, _| views::render_nodes(b),
        parse: parse_nodes_clearing_light,
    },
    View {
        name: "objects.txt",
        render: views::render_objects,
        parse: |t, p, b| views::parse_objects(t, p, b),
    },
    View {
        name: "timers.txt",
        render: |b, _| views::render_timers(b),
        parse: |t, _, b| views::parse_timers(t, b),
    },
];

/// Nodes changed by hand get their lighting recomputed by the engine, as after a game edit.
///
/// From version 27 on that is `lighting_complete = 0`: the engine relights every face of the
/// block (`voxalgo::update_block_border_lighting`). Blocks before 27 have no
/// `lighting_complete` (the engine's `MapBlock::deSerialize` reads it only `if (version >= 27)`
/// and takes 0xFFFF otherwise); the engines that wrote them kept "light needs updating" in the
/// flags instead — `if (m_lighting_expired) flags |= 0x04;` in `MapBlock::serialize`
/// (luanti-org/luanti `src/mapblock.cpp` before f17c9c45, which introduced version 27; the
/// bit is `lighting_expired` in `doc/world_format.md`). So those get that flag, and their
/// version and format stay as they were.
fn parse_nodes_clearing_light(text: &[u8], _pos: BlockPos, block: &mut MapBlock) -> Result<()> {
    let before = (block.names.clone(), block.content.clone());
    views::parse_nodes(text, block)?;
    if before.0 != block.names || before.1 != block.content {
        if block.version >= 27 {
            block.lighting_complete = 0;
        } else {
            block.flags |= LIGHTING_EXPIRED;
        }
    }
    Ok(())
}

/// How long a `block.txt` written through the mount stands against the relighting rule of
/// [`parse_nodes_clearing_light`]: a copy or a restore (`cp -r`, `rsync -a`) writes every file
/// of a block within it, and the header it wrote is the one it wants, flags included.
const HEADER_WINDOW: Duration = Duration::from_secs(60);

/// The flags bit "lighting expired" of blocks before version 27.
const LIGHTING_EXPIRED: u8 = 0x04;

/// The files hidden from the top level because the tree shows them decoded.
fn hidden_world_file(name: &str) -> bool {
    name.starts_with("map.sqlite") || accounts_tree::hidden_world_file(name)
}

/// Where a path points.
enum Place<'a> {
    Root,
    /// `players/…`, `auth.txt`, `mod_storage/…`: handled by [`Accounts`].
    Accounts,
    WorldFile(&'a str),
    Blocks,
    Block(BlockPos),
    View(BlockPos, &'static View),
    Meta(BlockPos),
    MetaNode(BlockPos, RelPos),
    Vars(BlockPos, RelPos, bool),
    Var(BlockPos, RelPos, bool, Vec<u8>),
    Inventory(BlockPos, RelPos),
}

/// Refuses a metadata key the block format cannot hold.
fn check_key(key: &[u8]) -> Result<()> {
    if key.len() > usize::from(u16::MAX) {
        return Err(Error::invalid("metadata key longer than 65535 bytes"));
    }
    Ok(())
}

/// Parses `X,Y,Z` exactly as the tree writes it (so there is one name per block).
pub fn parse_block_name(name: &str) -> Option<BlockPos> {
    let mut it = name.split(',');
    let x: i16 = it.next()?.parse().ok()?;
    let y: i16 = it.next()?.parse().ok()?;
    let z: i16 = it.next()?.parse().ok()?;
    if it.next().is_some() || format!("{x},{y},{z}") != name {
        return None;
    }
    Some(BlockPos { x, y, z })
}

/// The folder name of a block.
pub fn block_name(p: BlockPos) -> String {
    format!("{},{},{}", p.x, p.y, p.z)
}

fn parse_rel_name(name: &str) -> Option<RelPos> {
    let mut it = name.split(',');
    let x: u8 = it.next()?.parse().ok()?;
    let y: u8 = it.next()?.parse().ok()?;
    let z: u8 = it.next()?.parse().ok()?;
    if it.next().is_some() || x > 15 || y > 15 || z > 15 || format!("{x},{y},{z}") != name {
        return None;
    }
    Some(RelPos { x, y, z })
}

fn rel_name(p: RelPos) -> String {
    format!("{},{},{}", p.x, p.y, p.z)
}

/// Strips the one trailing newline a value file gets when shown.
fn value_from_file(data: &[u8]) -> Vec<u8> {
    data.strip_suffix(b"\n").unwrap_or(data).to_vec()
}

fn value_to_file(v: &[u8]) -> Vec<u8> {
    let mut out = v.to_vec();
    out.push(b'\n');
    out
}

fn meta_at(block: &MapBlock, rel: RelPos) -> Option<&NodeMeta> {
    block.metadata.iter().find(|m| m.pos == rel)
}

fn meta_entry(block: &mut MapBlock, rel: RelPos) -> &mut NodeMeta {
    let idx = match block
        .metadata
        .binary_search_by_key(&rel.index(), |m| m.pos.index())
    {
        Ok(i) => i,
        Err(i) => {
            block.metadata.insert(
                i,
                NodeMeta {
                    pos: rel,
                    vars: Vec::new(),
                    inventory: Default::default(),
                },
            );
            i
        }
    };
    &mut block.metadata[idx]
}

/// A Luanti world (or a bare `map.sqlite`) as a tree.
pub struct LuantiTree {
    blocks: Blocks,
    files: Option<FolderFiles>,
    accounts: Option<Accounts>,
    read_only: bool,
    /// Meta folders that exist only because the user made them (empty metadata is not stored).
    empty_meta: Mutex<BTreeSet<(BlockPos, u16)>>,
    /// Recent pages of the `blocks/` listing: the kernel asks for a few dozen entries per
    /// call, and a page read from SQLite serves many consecutive calls.
    pages: Mutex<Vec<Arc<Page>>>,
    /// Blocks whose `block.txt` was written through the mount, and when (within
    /// [`HEADER_WINDOW`]): a node edit then keeps the lighting flags that file set.
    headers: Mutex<HashMap<BlockPos, Instant>>,
}

/// One page of the `blocks/` listing: the entries with cookies after `after`.
struct Page {
    generation: u64,
    after: u64,
    entries: Vec<Entry>,
    /// Whether the listing ends with this page.
    last: bool,
}

/// Blocks read from SQLite per page of the `blocks/` listing.
const PAGE_SIZE: usize = 512;
/// Pages kept (several listings may run at once).
const PAGES_KEPT: usize = 8;

pub use crate::vfs::tree::Options;

/// The `map.sqlite` of a source (a world folder or the database itself) and the world folder.
pub fn locate(source: &Path) -> Result<(PathBuf, Option<PathBuf>)> {
    if source.is_dir() {
        let map = source.join("map.sqlite");
        if !map.is_file() {
            return Err(Error::unsupported(format!(
                "{}: no map.sqlite in this folder (only the sqlite3 backend is supported)",
                source.display()
            )));
        }
        Ok((map, Some(source.to_path_buf())))
    } else if source.is_file() {
        Ok((source.to_path_buf(), None))
    } else {
        Err(Error::not_found(format!(
            "{}: no such file or folder",
            source.display()
        )))
    }
}

impl LuantiTree {
    /// Opens the world at `source` (nothing is decoded).
    pub fn open(source: &Path, options: &Options) -> Result<LuantiTree> {
        let (map, world) = locate(source)?;
        let store = MapStore::open(&map, options.read_only)?;
        Ok(LuantiTree {
            blocks: Blocks::new(store, options.cache_bytes, options.read_only),
            files: world
                .as_ref()
                .map(|w| FolderFiles::new(w, hidden_world_file, options.read_only)),
            accounts: match &world {
                Some(w) => Some(Accounts::open(w, options.read_only)?),
                None => None,
            },
            read_only: options.read_only,
            empty_meta: Mutex::new(BTreeSet::new()),
            pages: Mutex::new(Vec::new()),
            headers: Mutex::new(HashMap::new()),
        })
    }

    /// Writes one view of a block. The derived-data rule (a node edit clears the lighting
    /// flags) applies only where the user did not write `block.txt` itself: within
    /// [`HEADER_WINDOW`] of a `block.txt` written through the mount, `nodes.cubeset` keeps the
    /// flags that file set, so `cp -r` and an rsync restore give the block back exactly.
    fn write_view(&self, pos: BlockPos, view: &'static View, data: &[u8]) -> Result<()> {
        let mut headers = self
            .headers
            .lock()
            .map_err(|_| Error::corrupt("header times lock poisoned"))?;
        headers.retain(|_, t| t.elapsed() < HEADER_WINDOW);
        let header_written = headers.contains_key(&pos);
        drop(headers);
        if view.name == "nodes.cubeset" && header_written {
            self.modify(pos, |b| views::parse_nodes(data, b))?;
        } else {
            self.modify(pos, |b| (view.parse)(data, pos, b))?;
        }
        if view.name == "block.txt" {
            if let Ok(mut headers) = self.headers.lock() {
                headers.insert(pos, Instant::now());
            }
        }
        Ok(())
    }

    /// The blocks under this tree.
    pub fn blocks(&self) -> &Blocks {
        &self.blocks
    }

    fn place<'a>(&self, path: &'a TreePath) -> Result<Place<'a>> {
        let parts: Vec<&str> = path.iter().map(String::as_str).collect();
        let block = |s: &str| parse_block_name(s).ok_or_else(|| not_found(path));
        let rel = |s: &str| parse_rel_name(s).ok_or_else(|| not_found(path));
        Ok(match parts.as_slice() {
            [] => Place::Root,
            [top, ..] if self.accounts.as_ref().is_some_and(|a| a.owns(top)) => Place::Accounts,
            ["blocks"] => Place::Blocks,
            [name] => Place::WorldFile(name),
            ["blocks", b] => Place::Block(block(b)?),
            ["blocks", b, "meta"] => Place::Meta(block(b)?),
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

    /// The stored key of a field whose file name is a long form (see [`names`]).
    fn long_key(&self, pos: BlockPos, rel: RelPos, private: bool, file: &str) -> Option<Vec<u8>> {
        let c = self.blocks.get(pos).ok()?;
        let vars = &meta_at(&c.block, rel)?.vars;
        names::find(
            file,
            vars.iter().filter(|v| v.private == private).map(|v| &v.key),
        )
        .cloned()
    }

    fn dir_stat(&self, mtime: SystemTime) -> Stat {
        Stat::dir(mtime, self.read_only)
    }

    fn file_stat(&self, size: usize, mtime: SystemTime) -> Stat {
        Stat::file(size as u64, mtime, self.read_only)
    }

    /// Stat of the file `sub` (its path inside the block folder) holding `data`.
    fn entry_file(&self, pos: BlockPos, c: &Cached, sub: &str, data: &[u8]) -> Stat {
        let mtime = if self.blocks.entry_recorded(pos, sub) {
            self.blocks
                .entry_mtime(pos, c.mtime, c.hash, sub, Some(content_hash(data)))
        } else {
            c.mtime
        };
        self.file_stat(data.len(), mtime)
    }

    /// Stat of the folder `sub` inside the block folder.
    fn entry_dir(&self, pos: BlockPos, c: &Cached, sub: &str) -> Stat {
        let hash = dir_hash(c, sub);
        self.dir_stat(
            self.blocks
                .entry_mtime(pos, c.mtime, c.hash, sub, Some(hash)),
        )
    }

    /// Stat of a block folder from the block's stored bytes.
    fn block_dir(&self, pos: BlockPos, blob: &[u8]) -> Stat {
        let mtime = self.blocks.mtime_of(pos, blob);
        self.dir_stat(
            self.blocks
                .entry_mtime(pos, mtime, content_hash(blob), "", None),
        )
    }

    /// Every entry inside a block folder: its path inside the folder and the hash of its
    /// content (a file) or of its listing (a folder).
    fn block_files(&self, pos: BlockPos, c: &Cached) -> Vec<(String, u64)> {
        let mut out: Vec<(String, u64)> = VIEWS
            .iter()
            .map(|v| {
                let data = c.view(v.name, |b| (v.render)(b, pos));
                (v.name.to_string(), content_hash(&data))
            })
            .collect();
        out.push(("meta".to_string(), dir_hash(c, "meta")));
        for m in &c.block.metadata {
            let dir = format!("meta/{}", rel_name(m.pos));
            for sub in [
                dir.clone(),
                format!("{dir}/fields"),
                format!("{dir}/private"),
            ] {
                let hash = dir_hash(c, &sub);
                out.push((sub, hash));
            }
            out.push((
                format!("{dir}/inventory"),
                content_hash(&serialize_inventory(&m.inventory)),
            ));
            for v in &m.vars {
                let kind = if v.private { "private" } else { "fields" };
                out.push((
                    format!("{dir}/{kind}/{}", names::escape(&v.key)),
                    content_hash(&value_to_file(&v.value)),
                ));
            }
        }
        out
    }

    /// Edits a block; the files whose content the edit leaves unchanged keep their mtimes, so
    /// an incremental rsync sends only the changed files.
    fn modify(&self, pos: BlockPos, edit: impl FnOnce(&mut MapBlock) -> Result<()>) -> Result<()> {
        let before = self.blocks.get(pos)?;
        let times: HashMap<String, (u64, SystemTime)> = self
            .block_files(pos, &before)
            .into_iter()
            .map(|(sub, hash)| {
                let t = self
                    .blocks
                    .entry_mtime(pos, before.mtime, before.hash, &sub, Some(hash));
                (sub, (hash, t))
            })
            .collect();
        self.blocks.modify(pos, edit)?;
        let after = self.blocks.get(pos)?;
        if after.hash == before.hash {
            return Ok(());
        }
        let keep: Vec<(String, Option<u64>, SystemTime)> = self
            .block_files(pos, &after)
            .into_iter()
            .filter_map(|(sub, hash)| match times.get(&sub) {
                Some(&(h, t)) if h == hash => Some((sub, Some(hash), t)),
                _ => None,
            })
            .collect();
        self.blocks.set_entry_mtimes(pos, &keep)
    }

    fn accounts(&self) -> Result<&Accounts> {
        self.accounts
            .as_ref()
            .ok_or_else(|| Error::not_found("a bare map.sqlite has no players"))
    }

    fn world_files(&self) -> Result<&FolderFiles> {
        self.files
            .as_ref()
            .ok_or_else(|| Error::not_found("a bare map.sqlite has no world folder"))
    }

    fn meta_exists(&self, pos: BlockPos, c: &Cached, rel: RelPos) -> bool {
        meta_at(&c.block, rel).is_some()
            || self
                .empty_meta
                .lock()
                .map(|s| s.contains(&(pos, rel.index())))
                .unwrap_or(false)
    }

    fn read_place(&self, place: &Place<'_>, path: &TreePath) -> Result<Arc<Vec<u8>>> {
        match place {
            Place::WorldFile(name) => self.world_files()?.read(name),
            Place::Accounts => self.accounts()?.read(path),
            Place::View(pos, view) => {
                let c = self.blocks.get(*pos)?;
                let pos = *pos;
                Ok(c.view(view.name, |b| (view.render)(b, pos)))
            }
            Place::Inventory(pos, rel) => {
                let c = self.blocks.get(*pos)?;
                if !self.meta_exists(*pos, &c, *rel) {
                    return Err(not_found(path));
                }
                let inv = meta_at(&c.block, *rel)
                    .map(|m| m.inventory.clone())
                    .unwrap_or_default();
                Ok(Arc::new(serialize_inventory(&inv)))
            }
            Place::Var(pos, rel, private, key) => {
                let c = self.blocks.get(*pos)?;
                meta_at(&c.block, *rel)
                    .and_then(|m| {
                        m.vars
                            .iter()
                            .find(|v| v.key == *key && v.private == *private)
                    })
                    .map(|v| Arc::new(value_to_file(&v.value)))
                    .ok_or_else(|| not_found(path))
            }
            _ => Err(Error::is_dir("is a directory")),
        }
    }

    fn block_listing(&self, after: u64, sink: &mut dyn FnMut(Entry) -> bool) -> Result<()> {
        let mut cursor = after;
        loop {
            let page = self.page_containing(cursor)?;
            for e in page.entries.iter().filter(|e| e.cookie > cursor) {
                if !sink(e.clone()) {
                    return Ok(());
                }
            }
            match page.entries.last() {
                Some(e) if !page.last => cursor = e.cookie,
                _ => return Ok(()),
            }
        }
    }

    /// The cached page holding the entries after `cursor`, reading one when none does.
    fn page_containing(&self, cursor: u64) -> Result<Arc<Page>> {
        let generation = self.blocks.generation();
        if let Ok(pages) = self.pages.lock() {
            let hit = pages.iter().find(|p| {
                p.generation == generation
                    && p.after <= cursor
                    && (p.last || p.entries.last().is_some_and(|e| e.cookie > cursor))
            });
            if let Some(p) = hit {
                return Ok(p.clone());
            }
        }
        // Cookies are the store's listing keys plus one (a key may be 0).
        let listed = self
            .blocks
            .store()
            .list(cursor.saturating_sub(1), PAGE_SIZE, true)?;
        let bytes: usize = listed
            .iter()
            .map(|l| l.data.as_ref().map_or(0, Vec::len))
            .sum();
        let last = listed.len() < PAGE_SIZE && bytes < LIST_BYTES;
        let entries = listed
            .into_iter()
            .filter(|l| l.key + 1 > cursor)
            .map(|l| Entry {
                name: block_name(l.pos),
                cookie: l.key + 1,
                stat: match &l.data {
                    Some(d) => self.block_dir(l.pos, d),
                    None => self.dir_stat(base_time()),
                },
            })
            .collect();
        let page = Arc::new(Page {
            generation,
            after: cursor,
            entries,
            last,
        });
        if let Ok(mut pages) = self.pages.lock() {
            pages.retain(|p| p.generation == generation);
            if pages.len() >= PAGES_KEPT {
                pages.remove(0);
            }
            pages.push(page.clone());
        }
        Ok(page)
    }
}

/// The hash of the listing of folder `sub` inside a block folder: a folder keeps its mtime
/// while its entries stay the same.
fn dir_hash(c: &Cached, sub: &str) -> u64 {
    let parts: Vec<&str> = sub.split('/').collect();
    let entries: Vec<String> = match parts.as_slice() {
        ["meta"] => c.block.metadata.iter().map(|m| rel_name(m.pos)).collect(),
        ["meta", r, kind @ ("fields" | "private")] => parse_rel_name(r)
            .and_then(|rel| meta_at(&c.block, rel))
            .map(|m| {
                m.vars
                    .iter()
                    .filter(|v| v.private == (*kind == "private"))
                    .map(|v| names::escape(&v.key))
                    .collect()
            })
            .unwrap_or_default(),
        _ => Vec::new(),
    };
    content_hash(entries.join("/").as_bytes())
}

/// The path of an entry of a block folder inside that folder (`meta/1,10,1/inventory`).
fn sub_path(path: &TreePath) -> String {
    path.get(2..).map(|p| p.join("/")).unwrap_or_default()
}

impl Tree for LuantiTree {
    fn stat(&self, path: &TreePath) -> Result<Stat> {
        let place = self.place(path)?;
        match &place {
            Place::Root | Place::Blocks => Ok(self.dir_stat(base_time())),
            Place::WorldFile(name) => self.world_files()?.stat(name),
            Place::Accounts => self.accounts()?.stat(path),
            Place::Block(pos) => {
                let blob = self
                    .blocks
                    .store()
                    .get(*pos)?
                    .ok_or_else(|| not_found(path))?;
                Ok(self.block_dir(*pos, &blob))
            }
            Place::Meta(pos) => Ok(self.entry_dir(*pos, &*self.blocks.get(*pos)?, "meta")),
            Place::MetaNode(pos, rel) | Place::Vars(pos, rel, _) => {
                let c = self.blocks.get(*pos)?;
                if !self.meta_exists(*pos, &c, *rel) {
                    return Err(not_found(path));
                }
                Ok(self.entry_dir(*pos, &c, &sub_path(path)))
            }
            Place::View(pos, _) | Place::Inventory(pos, _) | Place::Var(pos, ..) => {
                let data = self.read_place(&place, path)?;
                let c = self.blocks.get(*pos)?;
                Ok(self.entry_file(*pos, &c, &sub_path(path), &data))
            }
        }
    }

    fn list(&self, dir: &TreePath, after: u64, sink: &mut dyn FnMut(Entry) -> bool) -> Result<()> {
        let place = self.place(dir)?;
        match place {
            Place::Root => {
                let mut entries = vec![Entry {
                    name: "blocks".into(),
                    cookie: 1,
                    stat: self.dir_stat(base_time()),
                }];
                if let Some(accounts) = &self.accounts {
                    for (i, name) in accounts.top_names().into_iter().enumerate() {
                        if let Ok(stat) = accounts.stat(&[name.to_string()]) {
                            entries.push(Entry {
                                name: name.into(),
                                cookie: i as u64 + 2,
                                stat,
                            });
                        }
                    }
                }
                if let Some(files) = &self.files {
                    entries.extend(files.entries(5)?);
                }
                stream(entries, after, sink);
                Ok(())
            }
            Place::Blocks => {
                self.blocks.refresh();
                self.block_listing(after, sink)
            }
            Place::Accounts => self.accounts()?.list(dir, after, sink),
            Place::Block(pos) => {
                let c = self.blocks.get(pos)?;
                // Views are not rendered to be listed: a listing's file sizes are not used
                // (see `Tree::list`), and `find` or `ls` should not render five views a block.
                let mut entries = Vec::new();
                for (i, v) in VIEWS.iter().enumerate() {
                    entries.push(Entry {
                        name: v.name.into(),
                        cookie: i as u64 + 1,
                        stat: self.file_stat(0, c.mtime),
                    });
                }
                entries.push(Entry {
                    name: "meta".into(),
                    cookie: VIEWS.len() as u64 + 1,
                    stat: self.entry_dir(pos, &c, "meta"),
                });
                entries.sort_by_key(|e| e.cookie);
                stream(entries, after, sink);
                Ok(())
            }
            Place::Meta(pos) => {
                let c = self.blocks.get(pos)?;
                let mut idx: BTreeSet<u16> =
                    c.block.metadata.iter().map(|m| m.pos.index()).collect();
                if let Ok(extra) = self.empty_meta.lock() {
                    idx.extend(extra.iter().filter(|(p, _)| *p == pos).map(|(_, i)| *i));
                }
                let entries = idx
                    .into_iter()
                    .filter_map(|i| RelPos::from_index(i).map(|r| (i, r)))
                    .map(|(i, r)| Entry {
                        name: rel_name(r),
                        cookie: u64::from(i) + 1,
                        stat: self.entry_dir(pos, &c, &format!("meta/{}", rel_name(r))),
                    })
                    .collect();
                stream(entries, after, sink);
                Ok(())
            }
            Place::MetaNode(pos, rel) => {
                let c = self.blocks.get(pos)?;
                if !self.meta_exists(pos, &c, rel) {
                    return Err(not_found(dir));
                }
                let inv = meta_at(&c.block, rel)
                    .map(|m| m.inventory.clone())
                    .unwrap_or_default();
                let sub = sub_path(dir);
                let entries = vec![
                    Entry {
                        name: "fields".into(),
                        cookie: 1,
                        stat: self.entry_dir(pos, &c, &format!("{sub}/fields")),
                    },
                    Entry {
                        name: "inventory".into(),
                        cookie: 2,
                        stat: self.entry_file(
                            pos,
                            &c,
                            &format!("{sub}/inventory"),
                            &serialize_inventory(&inv),
                        ),
                    },
                    Entry {
                        name: "private".into(),
                        cookie: 3,
                        stat: self.entry_dir(pos, &c, &format!("{sub}/private")),
                    },
                ];
                stream(entries, after, sink);
                Ok(())
            }
            Place::Vars(pos, rel, private) => {
                let c = self.blocks.get(pos)?;
                if !self.meta_exists(pos, &c, rel) {
                    return Err(not_found(dir));
                }
                let sub = sub_path(dir);
                let mut shown = BTreeSet::new();
                let entries = meta_at(&c.block, rel)
                    .map(|m| {
                        m.vars
                            .iter()
                            .filter(|v| v.private == private)
                            .enumerate()
                            .filter_map(|(i, v)| {
                                let name = names::escape(&v.key);
                                // Two long keys whose long forms collide: the first one shows.
                                if !shown.insert(name.clone()) {
                                    log::warn!(
                                        "{}/{name}: a second field with this long file name is \
                                         not shown",
                                        dir.join("/")
                                    );
                                    return None;
                                }
                                let stat = self.entry_file(
                                    pos,
                                    &c,
                                    &format!("{sub}/{name}"),
                                    &value_to_file(&v.value),
                                );
                                Some(Entry {
                                    name,
                                    cookie: i as u64 + 1,
                                    stat,
                                })
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                stream(entries, after, sink);
                Ok(())
            }
            _ => Err(Error::not_dir("not a directory")),
        }
    }

    fn read(&self, path: &TreePath) -> Result<Arc<Vec<u8>>> {
        let place = self.place(path)?;
        self.read_place(&place, path)
    }

    fn write(&self, path: &TreePath, data: &[u8]) -> Result<()> {
        match self.place(path)? {
            Place::WorldFile(name) => self.world_files()?.write(name, data),
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
                let value = value_from_file(data);
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
            _ => Err(Error::is_dir("is a directory")),
        }
    }

    fn check(&self, path: &TreePath, data: &[u8]) -> Result<()> {
        match self.place(path)? {
            Place::WorldFile(_) => Ok(()),
            Place::Accounts => self.accounts()?.check(path, data),
            Place::View(pos, view) => {
                (view.parse)(data, pos, &mut self.blocks.get(pos)?.block.clone())
            }
            Place::Inventory(..) => parse_inventory(data).map(drop),
            Place::Var(_, _, _, key) => check_key(&key),
            _ => Err(Error::is_dir("is a directory")),
        }
    }

    fn classify(&self, dir: &TreePath, name: &str) -> Result<NewFile> {
        Ok(match self.place(dir)? {
            Place::Root if self.files.is_some() && !hidden_world_file(name) && name != "blocks" => {
                if looks_like_scratch(name) {
                    NewFile::Scratch
                } else {
                    NewFile::Object
                }
            }
            Place::Accounts => self.accounts()?.classify(dir, name)?,
            Place::Block(_) if VIEWS.iter().any(|v| v.name == name) => NewFile::Object,
            Place::MetaNode(..) if name == "inventory" => NewFile::Object,
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

    fn remove(&self, path: &TreePath) -> Result<()> {
        match self.place(path)? {
            Place::WorldFile(name) => self.world_files()?.remove(name),
            Place::Accounts => self.accounts()?.remove(path),
            // The views of a block cannot be absent: removing one is a no-op, so `rm -r` of
            // a block folder reaches the rmdir that deletes the block.
            Place::View(pos, _) => self.blocks.get(pos).map(|_| ()),
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
            Place::Accounts => self.accounts()?.rmdir(path),
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
        match (self.place(from)?, self.place(to)?) {
            (Place::Block(a), Place::Block(b)) => self.blocks.rename(a, b),
            (Place::Accounts, Place::Accounts) => self.accounts()?.rename(from, to),
            (Place::WorldFile(a), Place::WorldFile(b)) => self.world_files()?.rename(a, b),
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
            Place::Root | Place::Blocks => Ok(()),
            Place::WorldFile(name) => self.world_files()?.set_mtime(name, mtime),
            Place::Accounts => self.accounts()?.set_mtime(path, mtime),
            Place::Block(pos) => {
                self.stat(path)?;
                self.blocks.set_entry_mtimes(pos, &[(sub, None, mtime)])
            }
            Place::Meta(pos) | Place::MetaNode(pos, _) | Place::Vars(pos, ..) => {
                self.stat(path)?;
                let hash = dir_hash(&*self.blocks.get(pos)?, &sub);
                self.blocks
                    .set_entry_mtimes(pos, &[(sub, Some(hash), mtime)])
            }
            Place::View(pos, _) | Place::Var(pos, ..) | Place::Inventory(pos, _) => {
                let data = self.read_place(&place, path)?;
                self.blocks
                    .set_entry_mtimes(pos, &[(sub, Some(content_hash(&data)), mtime)])
            }
        }
    }

    fn read_only(&self) -> bool {
        self.read_only
    }

    fn readlink(&self, path: &TreePath) -> Result<Vec<u8>> {
        match self.place(path)? {
            Place::WorldFile(name) => self.world_files()?.readlink(name),
            _ => Err(not_a_link(path)),
        }
    }

    fn symlink(&self, path: &TreePath, target: &[u8]) -> Result<()> {
        match self.place(path)? {
            Place::WorldFile(name) => self.world_files()?.symlink(name, target),
            _ => Err(no_link_here(path)),
        }
    }
}

impl LuantiTree {
    /// Keeps a meta folder visible while its node has no stored metadata.
    fn keep_meta_dir(&self, pos: BlockPos, rel: RelPos) {
        if let Ok(mut s) = self.empty_meta.lock() {
            s.insert((pos, rel.index()));
        }
    }
}
