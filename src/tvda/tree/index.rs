//! The `index/` part of the mounted tree of a TVDA disk (docs/tree.md "index/"): whole-world
//! answers from [`Index`], shown as folders of links and text files.
//!
//! ```text
//! index/tiles/NAME/LAYER,CX,CY.cubeset  -> ../../../chunks/LAYER/CX,CY.cubeset
//!                                          one link per chunk file holding tile NAME (world disks)
//! index/items/ITEM                      PATH itemList SLOT QUANTITY, one line per inventory
//!                                          item (PATH `inventory` or `actors/ID.json`)
//! ```
//!
//! Tile names are those the chunk files show (`tileNumberToNameMap`, or the number where the
//! map has no name), escaped as everywhere in the mount. Renames: `mv index/tiles/A
//! index/tiles/B` replaces tile A by B in every chunk holding it (B must be in the map, as in
//! a chunk file); `mv index/items/A index/items/B` replaces item A by B in every inventory.
//! Either is one commit of the disk: a commit of several entries rewrites the disk into a
//! new file renamed over the old one, all or nothing.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::SystemTime;

use super::{State, TvdaTree, ENTRY_LIMIT};
use crate::error::{Error, Result};
use crate::index_tree::{self, Shown};
use crate::names;
use crate::tvda::codec::chunk::{chunk_entry_id, decode_chunk, encode_chunk, Layer};
use crate::tvda::codec::tvda::{DiskKind, EntryKind, ROOT_ID};
use crate::tvda::index::{chunk_of, Answer, EntrySource, Kind};
use crate::tvda::store::tvda::Change;
use crate::tvda::views::chunk::World;
use crate::tvda::views::inventory::{rename_item, valid_item};
use crate::tvda::views::names as tvda_names;
use crate::vfs::tree::{base_time, not_found, Entry, TreePath};

/// The top-level folder of the answers.
pub const INDEX: &str = "index";

/// How many times a rename asks its question again when the disk changed under it.
const RENAME_TRIES: usize = 3;

/// Where a path below `index/` points.
pub(super) enum At {
    Top,
    Folder(&'static str),
    Tile(u16),
    TileLink(Layer, u32),
    Item(String),
}

/// The name of the link to chunk `no` of `layer` in `index/tiles/NAME/`.
fn link_name(world: &World, layer: Layer, no: u32) -> Option<String> {
    let (cx, cy) = world.geometry.coords(no)?;
    Some(format!(
        "{},{}",
        layer.name(),
        tvda_names::chunk_file_name(cx, cy)
    ))
}

/// The layer and chunk number a link name of `index/tiles/NAME/` names.
fn parse_link_name(world: &World, name: &str) -> Option<(Layer, u32)> {
    let (layer, file) = name.split_once(',')?;
    let layer = Layer::from_name(layer)?;
    let (cx, cy) = tvda_names::parse_chunk_file_name(file)?;
    Some((layer, world.geometry.chunk_no(cx, cy)?))
}

/// The target of the link to chunk `no` of `layer`.
fn link_target(world: &World, layer: Layer, no: u32) -> Option<String> {
    let (cx, cy) = world.geometry.coords(no)?;
    Some(format!(
        "../../../chunks/{}/{}",
        layer.name(),
        tvda_names::chunk_file_name(cx, cy)
    ))
}

/// The listing cookie of a link: layer, then chunk number (their order in the answer).
fn link_cookie(layer: Layer, no: u32) -> u64 {
    (u64::from(layer.index()) << 32 | u64::from(no)) + 1
}

impl EntrySource for TvdaTree {
    fn entry_ids(&self) -> Result<(u64, Vec<i64>)> {
        let s = self.state()?;
        let ids = s
            .disk
            .entries()
            .filter(|e| e.kind == EntryKind::File && e.id != ROOT_ID)
            .map(|e| e.id)
            .collect();
        Ok((self.generation.load(Ordering::Relaxed), ids))
    }

    fn read_entries(&self, ids: &[i64]) -> Result<Vec<(i64, Result<Vec<u8>>)>> {
        let s = self.state()?;
        Ok(ids.iter().map(|&id| (id, read_entry(&s, id))).collect())
    }

    fn generation(&self) -> Result<u64> {
        let _s = self.state()?;
        Ok(self.generation.load(Ordering::Relaxed))
    }
}

/// Entry `id`'s stored bytes, at most [`ENTRY_LIMIT`] of them.
fn read_entry(s: &State, id: i64) -> Result<Vec<u8>> {
    let size = s.disk.entry(id).map_or(0, |e| e.size);
    if size > ENTRY_LIMIT {
        return Err(Error::new(
            libc::EFBIG,
            format!("entry {id} holds {size} bytes, more than worldfs reads"),
        ));
    }
    s.disk.read(id)
}

impl TvdaTree {
    fn index_answer(&self, kind: Kind) -> Result<Arc<Answer>> {
        self.index.answer(self, kind)
    }

    /// The world facts, for a disk that has chunks.
    fn index_world(&self) -> Result<Arc<World>> {
        let mut s = self.state()?;
        self.world(&mut s)
    }

    /// The folders `index/` shows: `tiles` where the disk has chunks.
    fn index_folders(&self) -> Result<Vec<&'static str>> {
        Ok(if self.has_chunks()? {
            vec!["items", "tiles"]
        } else {
            vec!["items"]
        })
    }

    /// Parses a path below `index/` (`path` with `index` first).
    pub(super) fn index_at(&self, path: &TreePath) -> Result<At> {
        let nf = || not_found(path);
        let parts: Vec<&str> = path.iter().skip(1).map(String::as_str).collect();
        Ok(match parts.as_slice() {
            [] => At::Top,
            [f] => At::Folder(
                self.index_folders()?
                    .into_iter()
                    .find(|x| x == f)
                    .ok_or_else(nf)?,
            ),
            ["tiles", name, rest @ ..] => {
                let world = self.index_world().map_err(|_| nf())?;
                let answer = self.index_answer(Kind::Tiles)?;
                let tiles = answer.tiles.as_ref().ok_or_else(nf)?;
                let (&number, chunks) = tiles
                    .iter()
                    .find(|(n, _)| names::escape(world.names.name(**n).as_bytes()) == *name)
                    .ok_or_else(nf)?;
                match rest {
                    [] => At::Tile(number),
                    [link] => {
                        let (layer, no) = parse_link_name(&world, link)
                            .filter(|c| chunks.contains(c))
                            .ok_or_else(nf)?;
                        At::TileLink(layer, no)
                    }
                    _ => return Err(nf()),
                }
            }
            ["items", item] => {
                let items = self.item_lines()?;
                At::Item(names::find(item, items.keys()).cloned().ok_or_else(nf)?)
            }
            _ => return Err(nf()),
        })
    }

    /// The path in the mount of the inventory entry `id`.
    fn inventory_path(&self, id: i64) -> String {
        match (id, self.kind) {
            (-1, DiskKind::Player) => "inventory".to_string(),
            (-1, _) => "savegameinfo.json".to_string(),
            _ => format!(
                "actors/{}",
                tvda_names::actor_file_name(id).unwrap_or_default()
            ),
        }
    }

    /// Every item of any inventory → the lines of its file.
    fn item_lines(&self) -> Result<BTreeMap<String, Vec<u8>>> {
        let answer = self.index_answer(Kind::Items)?;
        let mut out: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        for (item, slots) in answer.items.iter().flatten() {
            let text = out.entry(item.clone()).or_default();
            for s in slots {
                text.extend_from_slice(
                    format!(
                        "{} itemList {} {}\n",
                        self.inventory_path(s.entry),
                        s.slot,
                        s.qty
                    )
                    .as_bytes(),
                );
            }
        }
        Ok(out)
    }

    /// The stored name a rename's target `to` (`index/FOLDER/B`) names.
    fn target_name(to: &TreePath) -> Result<String> {
        let name = to.get(2).map(String::as_str).unwrap_or_default();
        let bytes = names::unescape(name)
            .map_err(|_| Error::invalid(format!("{name}: not a valid name")))?;
        String::from_utf8(bytes).map_err(|_| Error::invalid(format!("{name}: not UTF-8")))
    }

    /// `mv index/tiles/A index/tiles/B` (also as `mv` asks it when B exists:
    /// `index/tiles/B/A`) and `mv index/items/A index/items/B`.
    pub(super) fn index_rename(&self, from: &TreePath, to: &TreePath) -> Result<()> {
        self.check_writable()?;
        let exdev = || index_tree::not_renamed(super::INDEX_RENAMES);
        let same_folder = |folder: &str| to.len() >= 3 && to[0] == INDEX && to[1] == folder;
        match self.index_at(from)? {
            At::Tile(a) if same_folder("tiles") => {
                if to.len() == 4 && to[3] != from[2] || to.len() > 4 {
                    return Err(exdev());
                }
                let world = self.index_world()?;
                let name = Self::target_name(to)?;
                let b = world.names.number(&name).ok_or_else(|| {
                    Error::invalid(format!(
                        "{name}: not a tile of this world's tileNumberToNameMap (add it to savegameinfo.json first)"
                    ))
                })?;
                if a == b {
                    return Ok(());
                }
                self.rename_tile(a, b, &format!("tile {} to {name}", world.names.name(a)))
            }
            At::Item(a) if same_folder("items") && to.len() == 3 => {
                let b = Self::target_name(to)?;
                if !valid_item(&b) {
                    return Err(Error::invalid(format!(
                        "{b:?}: not a valid item ID (no white space or control characters, not starting with #)"
                    )));
                }
                if a == b {
                    return Ok(());
                }
                let holding = |answer: &Answer| -> Result<Vec<i64>> {
                    let mut entries: Vec<i64> = answer
                        .items
                        .as_ref()
                        .and_then(|i| i.get(&a))
                        .into_iter()
                        .flatten()
                        .map(|s| s.entry)
                        .collect();
                    entries.sort_unstable();
                    entries.dedup();
                    Ok(entries)
                };
                self.rename_in_entries(
                    &format!("item {a} to {b}"),
                    (Kind::Items, holding),
                    |_, stored| rename_item(stored, &a, &b),
                )
            }
            _ => Err(exdev()),
        }
    }

    /// Replaces tile number `a` by `b` in every chunk holding it (meta kept), each keeping
    /// its codec.
    fn rename_tile(&self, a: u16, b: u16, what: &str) -> Result<()> {
        let holding = |answer: &Answer| -> Result<Vec<i64>> {
            answer
                .tiles
                .as_ref()
                .and_then(|t| t.get(&a))
                .into_iter()
                .flatten()
                .map(|&(layer, no)| chunk_entry_id(layer.index(), no))
                .collect()
        };
        self.rename_in_entries(what, (Kind::Tiles, holding), |id, stored| {
            let (layer, _) = chunk_of(id).ok_or_else(|| Error::corrupt("not a chunk entry"))?;
            let (codec, mut tiles) = decode_chunk(layer, stored)?;
            let mut changed = false;
            for t in tiles.iter_mut().filter(|t| t.number == a) {
                t.number = b;
                changed = true;
            }
            if !changed {
                return Ok(None);
            }
            encode_chunk(layer, codec, &tiles).map(Some)
        })
    }

    /// Applies `edit` to the stored bytes of the entries `holding` finds in the answer of
    /// `kind` and commits the changed ones in one commit of the disk, logging the progress.
    /// The disk is looked at again once it is locked for the commit (not after the refresh
    /// interval): when another program saved it since the answer was made, the question is
    /// asked again first, so an entry that just gained the name is renamed too.
    fn rename_in_entries(
        &self,
        what: &str,
        (kind, holding): (Kind, impl Fn(&Answer) -> Result<Vec<i64>>),
        edit: impl Fn(i64, &[u8]) -> Result<Option<Vec<u8>>>,
    ) -> Result<()> {
        let started = std::time::Instant::now();
        let mut tries = RENAME_TRIES;
        let (mut s, ids) = loop {
            let answer = self.index_answer(kind)?;
            let ids = holding(&answer)?;
            let s = self.state_looking(true)?;
            if self.generation.load(Ordering::Relaxed) == answer.version {
                break (s, ids);
            }
            tries -= 1;
            if tries == 0 {
                return Err(Error::new(
                    libc::EAGAIN,
                    "the disk kept changing while the rename was made; nothing written",
                ));
            }
            log::info!("index: the disk changed since the question; asking it again");
        };
        log::info!("index: renaming {what} in {} entries", ids.len());
        let mut changes = Vec::new();
        for &id in &ids {
            if let Some(data) = edit(id, &read_entry(&s, id)?)? {
                changes.push(Change::Put { id, data });
            }
        }
        let changed = changes.len();
        self.commit(&mut s, &changes, None)?;
        log::info!(
            "index: renamed {what} in {changed} entries, committed at once ({:.3} s)",
            started.elapsed().as_secs_f64()
        );
        Ok(())
    }

    /// What the path `path` below `index/` shows.
    pub(super) fn index_shown(&self, path: &TreePath) -> Result<Shown> {
        Ok(match self.index_at(path)? {
            At::TileLink(layer, no) => {
                Shown::Link(link_target(&*self.index_world()?, layer, no).unwrap_or_default())
            }
            At::Item(item) => Shown::Text(
                self.item_lines()?
                    .remove(&item)
                    .ok_or_else(|| not_found(path))?,
            ),
            At::Top => Shown::Folder(base_time()),
            At::Folder("items") => Shown::Folder(index_tree::items_time(&self.item_lines()?)),
            _ => Shown::Folder(self.answer_time(&*self.index_answer(Kind::Tiles)?)),
        })
    }

    /// The mtime of a folder listing part of `answer`.
    fn answer_time(&self, answer: &Answer) -> SystemTime {
        index_tree::answer_time(answer.generation)
    }

    pub(super) fn index_list(
        &self,
        dir: &TreePath,
        after: u64,
        sink: &mut dyn FnMut(Entry) -> bool,
    ) -> Result<()> {
        let entries: Vec<Entry> = match self.index_at(dir)? {
            At::Top => index_tree::named(
                self.index_folders()?.into_iter().map(String::from),
                self.dir_stat(base_time()),
            ),
            At::Folder("tiles") => {
                let world = self.index_world()?;
                let answer = self.index_answer(Kind::Tiles)?;
                let stat = self.dir_stat(self.answer_time(&answer));
                answer
                    .tiles
                    .iter()
                    .flatten()
                    .map(|(n, _)| Entry {
                        name: names::escape(world.names.name(*n).as_bytes()),
                        cookie: u64::from(*n) + 1,
                        stat: stat.clone(),
                    })
                    .collect()
            }
            At::Folder(_) => index_tree::texts(
                self.item_lines()?
                    .iter()
                    .enumerate()
                    .map(|(i, (item, text))| (i as u64 + 1, names::escape(item.as_bytes()), text)),
            ),
            At::Tile(number) => {
                let world = self.index_world()?;
                let answer = self.index_answer(Kind::Tiles)?;
                let chunks = answer
                    .tiles
                    .as_ref()
                    .and_then(|t| t.get(&number))
                    .ok_or_else(|| Error::not_found("no such tile"))?;
                // Only those after the cookie are named (a paged listing comes back often).
                let after_cookie = chunks
                    .iter()
                    .filter(|&&(layer, no)| link_cookie(layer, no) > after);
                let links = after_cookie.filter_map(|&(layer, no)| {
                    let name = link_name(&world, layer, no)?;
                    Some((
                        link_cookie(layer, no),
                        name,
                        link_target(&world, layer, no)?,
                    ))
                });
                index_tree::links(links, after, sink);
                return Ok(());
            }
            _ => return Err(Error::not_dir("not a directory")),
        };
        index_tree::list(entries, after, sink);
        Ok(())
    }
}
