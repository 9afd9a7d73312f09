//! The `index/` part of the mounted Luanti tree (docs/tree.md "index/"): whole-world answers shown
//! as folders of links and text files. The answers come from [`Index`]; here they are named
//! (names escaped as everywhere in the mount), listed and linked.
//!
//! ```text
//! index/nodes/NAME/X,Y,Z              -> ../../../blocks/X,Y,Z
//! index/items/ITEM                    PATH LIST SLOT COUNT, one line per slot
//! index/fields/KEY/VALUE/X,Y,Z,x,y,z  -> ../../../../blocks/X,Y,Z/meta/x,y,z
//! index/objects/NAME/X,Y,Z            -> ../../../blocks/X,Y,Z (static objects of entity NAME)
//! index/broken/X,Y,Z                  -> ../../blocks/X,Y,Z (whose error.txt says why)
//! ```
//!
//! `rmdir index/objects/NAME` (the last step of `rm -r`) removes the objects of NAME from
//! every block in one transaction; removing one of its links changes nothing, so that
//! `rm -r` reaches that `rmdir`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::blocks::{block_name, entry_changes, expire_lighting, rel_name};
use super::{base_time, not_found, LuantiTree};
use crate::error::{Error, Result};
use crate::index_tree::{self, Shown};
use crate::luanti::cache::{BlockEdit, Edited};
use crate::luanti::codec::block::{BlockPos, MapBlock, RelPos};
use crate::luanti::index::{
    pack, remove_objects, rename_item, rename_node, unpack, valid_name, Answer, Focus, Kind,
};
use crate::names;
use crate::vfs::tree::{Entry, Stat, TreePath};

/// The top-level folder of the answers.
pub const INDEX: &str = "index";

/// The folders of `index/`, in listing order.
const FOLDERS: [&str; 5] = ["broken", "fields", "items", "nodes", "objects"];

/// Where a path below `index/` points.
pub(super) enum At {
    Top,
    Folder(&'static str),
    Node(String),
    NodeLink(u64),
    Item(Vec<u8>),
    FieldKey(Vec<u8>),
    FieldValue(Vec<u8>, Vec<u8>),
    FieldLink(u64, u16),
    Object(String),
    ObjectLink(u64),
    Broken(u64),
}

/// The link name of a node in `fields/KEY/VALUE/`: its block and its place in the block.
fn node_link_name(packed: u64, node: u16) -> String {
    let rel = RelPos::from_index(node).map(rel_name).unwrap_or_default();
    format!("{},{rel}", block_name(unpack(packed)))
}

/// The packed block and node index of a link name made by [`node_link_name`].
fn parse_node_link(name: &str) -> Option<(u64, u16)> {
    let parts: Vec<&str> = name.split(',').collect();
    let [x, y, z, a, b, c] = parts.as_slice() else {
        return None;
    };
    let pos = super::parse_block_name(&format!("{x},{y},{z}"))?;
    let rel = super::blocks::parse_rel_name(&format!("{a},{b},{c}"))?;
    (node_link_name(pack(pos), rel.index()) == name).then_some((pack(pos), rel.index()))
}

/// The packed position of a block folder name.
fn parse_block(name: &str) -> Option<u64> {
    super::parse_block_name(name).map(pack)
}

/// The stored name among `stored` that the file name `file` shows.
fn stored<'a, T: AsRef<[u8]> + 'a>(
    file: &str,
    stored: impl IntoIterator<Item = &'a T>,
) -> Option<&'a T> {
    names::find(file, stored)
}

/// Entries of a folder of stored names (sorted), shown as file names.
fn named_entries<T: AsRef<[u8]>>(stored: impl Iterator<Item = T>, stat: Stat) -> Vec<Entry> {
    index_tree::named(stored.map(|n| names::escape(n.as_ref())), stat)
}

fn unavailable(kind: &str) -> Error {
    Error::corrupt(format!("index: the {kind} answer is missing"))
}

/// The blocks holding the node `name` in an answer asked about it.
fn holders<'a>(answer: &'a Answer, name: &str) -> Result<&'a BTreeSet<u64>> {
    let nodes = answer.nodes.as_ref().ok_or_else(|| unavailable("nodes"))?;
    match nodes.get(name) {
        Some(Some(set)) => Ok(set),
        Some(None) => Err(unavailable("nodes")),
        None => Err(Error::not_found("no such node")),
    }
}

impl LuantiTree {
    fn index_answer(&self, kind: Kind) -> Result<Arc<Answer>> {
        self.index.answer(kind, None)
    }

    /// The nodes answer holding the blocks of the stored node name `name` (the index keeps
    /// those of every name only while they fit its budget).
    fn node_answer(&self, name: &str) -> Result<Arc<Answer>> {
        self.index.answer_about(&|n: &str| n == name)
    }

    /// Parses a path below `index/` (`parts` without `index`).
    pub(super) fn index_at(&self, path: &TreePath, parts: &[&str]) -> Result<At> {
        let nf = || not_found(path);
        Ok(match parts {
            [] => At::Top,
            [f] => At::Folder(FOLDERS.iter().find(|x| *x == f).copied().ok_or_else(nf)?),
            ["nodes", file, rest @ ..] => {
                let shown = |n: &str| names::escape(n.as_bytes()) == *file;
                let a = self.index.answer(Kind::Nodes, Some(&shown))?;
                let nodes = a.nodes.as_ref().ok_or_else(|| unavailable("nodes"))?;
                let name = nodes.keys().find(|n| shown(n)).ok_or_else(nf)?.clone();
                match rest {
                    [] => At::Node(name),
                    [b] => {
                        let a = self.node_answer(&name)?;
                        let set = holders(&a, &name)?;
                        let packed = parse_block(b).filter(|p| set.contains(p)).ok_or_else(nf)?;
                        At::NodeLink(packed)
                    }
                    _ => return Err(nf()),
                }
            }
            ["items", item] => {
                let items = self.item_lines()?;
                At::Item(stored(item, items.keys()).cloned().ok_or_else(nf)?)
            }
            ["fields", key, rest @ ..] => {
                let a = self.index_answer(Kind::Fields)?;
                let fields = a.fields.as_ref().ok_or_else(|| unavailable("fields"))?;
                let key = stored(key, fields.keys()).ok_or_else(nf)?;
                let values = &fields[key];
                match rest {
                    [] => At::FieldKey(key.clone()),
                    [value, rest @ ..] => {
                        let value = stored(value, values.keys()).ok_or_else(nf)?;
                        match rest {
                            [] => At::FieldValue(key.clone(), value.clone()),
                            [link] => {
                                let (b, n) = parse_node_link(link)
                                    .filter(|bn| values[value].contains(bn))
                                    .ok_or_else(nf)?;
                                At::FieldLink(b, n)
                            }
                            _ => return Err(nf()),
                        }
                    }
                }
            }
            ["objects", file, rest @ ..] => {
                let a = self.index_answer(Kind::Objects)?;
                let objects = a.objects.as_ref().ok_or_else(|| unavailable("objects"))?;
                let name = stored(file, objects.keys()).ok_or_else(nf)?;
                match rest {
                    [] => At::Object(name.clone()),
                    [b] => At::ObjectLink(
                        parse_block(b)
                            .filter(|p| objects[name].contains(p))
                            .ok_or_else(nf)?,
                    ),
                    _ => return Err(nf()),
                }
            }
            ["broken", b] => {
                let a = self.index_answer(Kind::Nodes)?;
                At::Broken(
                    parse_block(b)
                        .filter(|p| a.broken.contains_key(p))
                        .ok_or_else(nf)?,
                )
            }
            _ => return Err(nf()),
        })
    }

    /// Every item in any inventory → the lines of its file (node inventories from the
    /// answer, player inventories read now).
    fn item_lines(&self) -> Result<BTreeMap<Vec<u8>, Vec<u8>>> {
        let a = self.index_answer(Kind::Items)?;
        let items = a.items.as_ref().ok_or_else(|| unavailable("items"))?;
        let mut out: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        for (item, slots) in items {
            let text = out.entry(item.clone()).or_default();
            for s in slots {
                let rel = RelPos::from_index(s.node).map(rel_name).unwrap_or_default();
                text.extend_from_slice(
                    format!(
                        "blocks/{}/meta/{rel}/inventory {} {} {}\n",
                        block_name(unpack(s.block)),
                        s.list,
                        s.slot,
                        s.count
                    )
                    .as_bytes(),
                );
            }
        }
        if let Some(accounts) = &self.accounts {
            for (player, inv) in accounts.inventories()? {
                for l in &inv.lists {
                    for (i, s) in l
                        .slots
                        .iter()
                        .enumerate()
                        .filter(|(_, s)| !s.name.is_empty())
                    {
                        out.entry(s.name.clone()).or_default().extend_from_slice(
                            format!(
                                "players/{} {} {} {}\n",
                                names::escape(player.as_bytes()),
                                l.name,
                                i + 1,
                                s.count
                            )
                            .as_bytes(),
                        );
                    }
                }
            }
        }
        Ok(out)
    }

    /// `mv index/nodes/A index/nodes/B` (also as `mv` asks it when B exists:
    /// `index/nodes/B/A`) and `mv index/items/A index/items/B`: A replaced by B in every
    /// block (and, for items, every player) holding it; see [`Blocks::edit_many`].
    ///
    /// [`Blocks::edit_many`]: crate::luanti::cache::Blocks::edit_many
    pub(super) fn index_rename(&self, from: &TreePath, to: &TreePath) -> Result<()> {
        let exdev = || index_tree::not_renamed(super::INDEX_RENAMES);
        let parts: Vec<&str> = from.iter().map(String::as_str).collect();
        let at = self.index_at(from, &parts[1..])?;
        let target = |to: &TreePath| -> Result<Vec<u8>> {
            let name = to.get(2).ok_or_else(exdev)?;
            let bytes = names::unescape(name)
                .map_err(|_| Error::invalid(format!("{name}: not a valid name")))?;
            if !valid_name(&bytes) {
                return Err(Error::invalid(format!(
                    "{name}: not a valid node or item name (modname:name, letters, digits, _)"
                )));
            }
            Ok(bytes)
        };
        let same_folder = |folder: &str| to.len() >= 3 && to[0] == INDEX && to[1] == folder;
        match at {
            At::Node(a) if same_folder("nodes") => {
                // `mv A B` with B an existing folder asks for B/A.
                if to.len() == 4 && to[3] != from[2] || to.len() > 4 {
                    return Err(exdev());
                }
                let b = String::from_utf8(target(to)?)
                    .map_err(|_| Error::invalid("a node name is UTF-8"))?;
                if a == b {
                    return Ok(());
                }
                let holding = |answer: &Answer| -> Vec<BlockPos> {
                    let set = answer
                        .nodes
                        .as_ref()
                        .and_then(|n| n.get(&a))
                        .and_then(Option::as_ref);
                    set.into_iter().flatten().map(|&p| unpack(p)).collect()
                };
                let focus = |n: &str| n == a;
                self.rename_in_blocks(
                    (&format!("node {a} to {b}"), "renaming", "renamed"),
                    (Kind::Nodes, Some(&focus)),
                    holding,
                    |block| {
                        // worldfs cannot know which nodes give light: the engine relights
                        // every block the rename changed, as after a node edit.
                        let renamed = rename_node(block, &a, &b);
                        if renamed {
                            expire_lighting(block);
                        }
                        renamed
                    },
                    |answer, changed| answer.node_renamed(&a, &b, changed),
                )
            }
            At::Item(a) if same_folder("items") && to.len() == 3 => {
                let b = target(to)?;
                if a == b {
                    return Ok(());
                }
                let holding = |answer: &Answer| -> Vec<BlockPos> {
                    let slots = answer.items.as_ref().and_then(|i| i.get(&a));
                    let blocks: BTreeSet<u64> =
                        slots.into_iter().flatten().map(|s| s.block).collect();
                    blocks.into_iter().map(unpack).collect()
                };
                let what = format!(
                    "item {} to {}",
                    String::from_utf8_lossy(&a),
                    String::from_utf8_lossy(&b)
                );
                self.rename_in_blocks(
                    (&what, "renaming", "renamed"),
                    (Kind::Items, None),
                    holding,
                    |block| {
                        block
                            .metadata
                            .iter_mut()
                            .map(|m| rename_item(&mut m.inventory, &a, &b))
                            .sum::<usize>()
                            > 0
                    },
                    |answer, changed| answer.item_renamed(&a, &b, changed),
                )?;
                if let Some(accounts) = &self.accounts {
                    let players = accounts.rename_item(&a, &b)?;
                    log::info!("index: renamed {what} in {players} players' inventories");
                }
                Ok(())
            }
            _ => Err(exdev()),
        }
    }

    /// Applies `edit` to the blocks `holding` finds in the answer of `kind` (holding the
    /// blocks of the node name `focus` picks, for nodes) and commits the changed ones in one
    /// transaction ([`Blocks::edit_many`]), logging the progress; `follow` then brings the
    /// kept answer up to date for the changed blocks.
    ///
    /// The blocks come from the answer true for the store as the transaction found it: the
    /// one asked before, when nothing was committed since, else one asked again inside the
    /// transaction (other writers are kept out of it), so a block another writer gave the
    /// name just before is renamed too.
    ///
    /// [`Blocks::edit_many`]: crate::luanti::cache::Blocks::edit_many
    fn rename_in_blocks(
        &self,
        (what, doing, done): (&str, &str, &str),
        (kind, focus): (Kind, Focus<'_>),
        holding: impl Fn(&Answer) -> Vec<BlockPos>,
        edit: impl Fn(&mut MapBlock) -> bool + Sync,
        follow: impl FnOnce(&mut Answer, &[u64]),
    ) -> Result<()> {
        let started = std::time::Instant::now();
        let ask = || match focus {
            Some(f) => self.index.answer_about(f),
            None => self.index_answer(kind),
        };
        let asked = ask()?;
        let positions = |before: i64| -> Result<Vec<BlockPos>> {
            let answer = if asked.version == Some(before) {
                asked
            } else {
                drop(asked);
                log::info!("index: the map changed since the question; asking it again");
                ask()?
            };
            let blocks = holding(&answer);
            log::info!("index: {doing} {what} in {} blocks", blocks.len());
            Ok(blocks)
        };
        let progress = |looked: usize, all: usize| {
            if looked > 0 && looked < all {
                log::info!("index: {doing} {what}: {looked} of {all} blocks");
            }
        };
        let followed = |edited: &Edited| {
            self.whole_map_changed(edited);
            let changed: Vec<u64> = edited.changed.iter().map(|&p| pack(p)).collect();
            self.index.edited(edited.before, edited.after, |answer| {
                follow(answer, &changed)
            });
        };
        let how = BlockEdit {
            edit: &edit,
            entries: &entry_changes,
        };
        let changed = self.blocks.edit_many(positions, &how, progress, followed)?;
        log::info!(
            "index: {done} {what} in {changed} blocks, committed in one transaction ({:.3} s)",
            started.elapsed().as_secs_f64()
        );
        Ok(())
    }

    /// `rmdir index/objects/NAME`: the static objects of entity `name` removed from every
    /// block holding one, in one transaction; every other object, and everything else of
    /// those blocks, kept as it is.
    pub(super) fn remove_objects_everywhere(&self, name: &str) -> Result<()> {
        let holding = |answer: &Answer| -> Vec<BlockPos> {
            let set = answer.objects.as_ref().and_then(|o| o.get(name));
            set.into_iter().flatten().map(|&p| unpack(p)).collect()
        };
        self.rename_in_blocks(
            (&format!("objects {name}"), "removing", "removed"),
            (Kind::Objects, None),
            holding,
            |block| remove_objects(block, name),
            |answer, changed| answer.objects_removed(name, changed),
        )
    }

    fn link_target(&self, at: &At) -> Option<String> {
        match at {
            At::NodeLink(b) | At::ObjectLink(b) => {
                Some(format!("../../../blocks/{}", block_name(unpack(*b))))
            }
            At::FieldLink(b, n) => Some(format!(
                "../../../../blocks/{}/meta/{}",
                block_name(unpack(*b)),
                RelPos::from_index(*n).map(rel_name).unwrap_or_default()
            )),
            At::Broken(b) => Some(format!("../../blocks/{}", block_name(unpack(*b)))),
            _ => None,
        }
    }

    /// What the path `path` below `index/`, at `at`, shows.
    pub(super) fn index_shown(&self, path: &TreePath, at: &At) -> Result<Shown> {
        if let Some(target) = self.link_target(at) {
            return Ok(Shown::Link(target));
        }
        Ok(match at {
            At::Item(item) => Shown::Text(
                self.item_lines()?
                    .remove(item)
                    .ok_or_else(|| not_found(path))?,
            ),
            At::Top => Shown::Folder(base_time()),
            At::Folder("items") => Shown::Folder(index_tree::items_time(&self.item_lines()?)),
            _ => Shown::Folder(self.answer_time()?),
        })
    }

    /// The mtime of a folder listing part of an answer: it changes whenever the answer may
    /// (the kernel opens folders itself and keeps a listing until the folder's mtime
    /// changes), without a scan ([`Index::stamp`]).
    ///
    /// [`Index::stamp`]: crate::luanti::index::Index::stamp
    fn answer_time(&self) -> Result<SystemTime> {
        let nanos = (self.index.stamp()? % 1_000_000_000) as u32;
        Ok(base_time() + Duration::new(0, nanos))
    }

    fn answer_dir_stat(&self) -> Result<Stat> {
        Ok(self.dir_stat(self.answer_time()?))
    }

    pub(super) fn index_list(
        &self,
        at: &At,
        after: u64,
        sink: &mut dyn FnMut(Entry) -> bool,
    ) -> Result<()> {
        let entries: Vec<Entry> = match at {
            At::Top => named_entries(FOLDERS.iter(), self.dir_stat(base_time())),
            At::Folder("nodes") => {
                let a = self.index_answer(Kind::Nodes)?;
                let nodes = a.nodes.as_ref().ok_or_else(|| unavailable("nodes"))?;
                named_entries(nodes.keys(), self.answer_dir_stat()?)
            }
            At::Folder("items") => index_tree::texts(
                self.item_lines()?
                    .iter()
                    .enumerate()
                    .map(|(i, (n, text))| (i as u64 + 1, names::escape(n), text)),
            ),
            At::Folder("fields") => {
                let a = self.index_answer(Kind::Fields)?;
                let fields = a.fields.as_ref().ok_or_else(|| unavailable("fields"))?;
                named_entries(fields.keys(), self.answer_dir_stat()?)
            }
            At::Folder("objects") => {
                let a = self.index_answer(Kind::Objects)?;
                let objects = a.objects.as_ref().ok_or_else(|| unavailable("objects"))?;
                named_entries(objects.keys(), self.answer_dir_stat()?)
            }
            At::Object(name) => {
                let a = self.index_answer(Kind::Objects)?;
                let blocks = a
                    .objects
                    .as_ref()
                    .and_then(|o| o.get(name))
                    .ok_or_else(|| Error::not_found("no such object"))?;
                let blocks = blocks.range(after + 1..).copied();
                index_tree::links(block_links(blocks, "../../../blocks/"), after, sink);
                return Ok(());
            }
            At::Folder(_) => {
                let a = self.index_answer(Kind::Nodes)?;
                let blocks = a.broken.range(after + 1..).map(|(b, _)| *b);
                index_tree::links(block_links(blocks, "../../blocks/"), after, sink);
                return Ok(());
            }
            At::Node(name) => {
                let a = self.node_answer(name)?;
                let set = holders(&a, name)?;
                let blocks = set.range(after + 1..).copied();
                index_tree::links(block_links(blocks, "../../../blocks/"), after, sink);
                return Ok(());
            }
            At::FieldKey(key) => {
                let a = self.index_answer(Kind::Fields)?;
                let fields = a.fields.as_ref().ok_or_else(|| unavailable("fields"))?;
                let values = fields
                    .get(key)
                    .ok_or_else(|| Error::not_found("no such field"))?;
                named_entries(values.keys(), self.answer_dir_stat()?)
            }
            At::FieldValue(key, value) => {
                let a = self.index_answer(Kind::Fields)?;
                let nodes = a
                    .fields
                    .as_ref()
                    .and_then(|f| f.get(key))
                    .and_then(|v| v.get(value))
                    .ok_or_else(|| Error::not_found("no such value"))?;
                let from = (after.saturating_sub(1) >> 12) + 1;
                let cookie = |b: u64, n: u16| ((b - 1) << 12 | u64::from(n)) + 1;
                let links = nodes
                    .range((from, 0)..)
                    .filter(|&&(b, n)| cookie(b, n) > after)
                    .map(|&(b, n)| {
                        let target = self.link_target(&At::FieldLink(b, n)).unwrap_or_default();
                        (cookie(b, n), node_link_name(b, n), target)
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

/// The links to `blocks` (packed positions, ascending), their targets under `prefix`: the
/// cookie of a block is its packed position.
fn block_links<'a>(
    blocks: impl Iterator<Item = u64> + 'a,
    prefix: &'a str,
) -> impl Iterator<Item = (u64, String, String)> + 'a {
    blocks.map(move |b| {
        let name = block_name(unpack(b));
        (b, name.clone(), format!("{prefix}{name}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::luanti::cache::Edited;
    use crate::luanti::codec;
    use crate::luanti::store::map::MapStore;
    use crate::luanti::summaries::VIEW_COUNT;
    use crate::luanti::test_map::{blob, map_with};
    use crate::luanti::tree::blocks::changed_views;
    use crate::luanti::tree::CHANGED_BLOCKS_NAMED;
    use crate::vfs::tree::{Changed, ChangedEntries, Options, Tree};

    fn at(x: i16) -> BlockPos {
        BlockPos { x, y: 0, z: 0 }
    }

    fn p(parts: &[&str]) -> Vec<String> {
        parts.iter().map(|s| s.to_string()).collect()
    }

    /// A read-write tree of a map holding blocks `test:a` at x in `a` and `test:z` at `z`,
    /// its folder (the state folder too) and its map file.
    fn tree_of(
        a: std::ops::Range<i16>,
        z: i16,
    ) -> (tempfile::TempDir, std::path::PathBuf, LuantiTree) {
        let mut blocks: Vec<_> = a.map(|x| (at(x), "test:a")).collect();
        blocks.push((at(z), "test:z"));
        let (dir, path) = map_with(&blocks);
        std::env::set_var("WORLDFS_STATE_DIR", dir.path());
        let options = Options {
            read_only: false,
            cache_bytes: 1 << 20,
        };
        let tree = LuantiTree::open(&path, &options).expect("opens");
        (dir, path, tree)
    }

    /// Another writer that gives a block the name after the question and before the
    /// rename's transaction begins: the rename asks again inside its transaction, so that
    /// block is renamed too.
    #[test]
    fn a_block_given_the_name_just_before_the_rename_is_renamed_too() {
        let (_dir, path, tree) = tree_of(0..10, 20);
        let mut listed = 0;
        tree.list(&p(&["index", "nodes", "test:a"]), 0, &mut |_| {
            listed += 1;
            true
        })
        .expect("the question");
        assert_eq!(listed, 10);
        let other = path.clone();
        tree.blocks.before_edit.set(move |_| {
            MapStore::open(&other, false)
                .expect("another writer")
                .commit(&[(at(20), Some(blob("test:a")))])
                .expect("its commit");
        });
        tree.rename(
            &p(&["index", "nodes", "test:a"]),
            &p(&["index", "nodes", "test:b"]),
        )
        .expect("the rename");
        let store = MapStore::open(&path, true).expect("reader");
        for x in (0..10).chain([20]) {
            let b = codec::decode_block(&store.get(at(x)).expect("read").expect("stored"))
                .expect("decodes");
            assert_eq!(b.names, ["test:b"], "block {x},0,0");
        }
    }

    /// A rename under `index/` names to the core exactly the blocks it changed, with
    /// `index/`, once, each with the views it changed and the source its stats now come
    /// from; past the bound it names none, so the core re-checks everything.
    #[test]
    fn a_rename_names_the_blocks_it_changed_once() {
        let (_dir, _path, tree) = tree_of(0..5, 9);
        let named = |tree: &LuantiTree| -> Option<Vec<Changed>> {
            let mut all: Vec<_> = tree.take_changed_objects()?.collect();
            all.sort();
            Some(all)
        };
        let index = Changed::whole(p(&["index"]));
        assert_eq!(
            named(&tree),
            Some(vec![index.clone()]),
            "nothing changed yet"
        );
        let before: Vec<u64> = (0..5)
            .map(|x| {
                let file = p(&["blocks", &block_name(at(x)), "light.txt"]);
                tree.stat(&file).expect("stat").source.expect("a source")
            })
            .collect();
        tree.rename(
            &p(&["index", "nodes", "test:a"]),
            &p(&["index", "nodes", "test:b"]),
        )
        .expect("the rename");
        let mut expected: Vec<Changed> = (0..5)
            .map(|x| {
                let block = p(&["blocks", &block_name(at(x))]);
                let mut file = block.clone();
                file.push("light.txt".into());
                let after = tree.stat(&file).expect("stat").source.expect("a source");
                Changed {
                    path: block,
                    entries: Some(ChangedEntries {
                        // The nodes only: the header already has the lighting to redo.
                        names: vec!["nodes.cubeset"],
                        before: before[x as usize],
                        after,
                    }),
                }
            })
            .chain([index.clone()])
            .collect();
        expected.sort();
        assert_eq!(named(&tree), Some(expected));
        assert_eq!(named(&tree), Some(vec![index.clone()]), "named once");

        let edited = |n: usize| Edited {
            before: 0,
            after: 0,
            changed: vec![at(1); n],
            entries: vec![(0, 0, None); n],
        };
        tree.whole_map_changed(&edited(CHANGED_BLOCKS_NAMED));
        tree.whole_map_changed(&edited(1));
        assert_eq!(named(&tree), None, "past the bound: unknown");
        assert_eq!(named(&tree), Some(vec![index]), "and known again after");
    }

    /// Only views named changed name the block's entries: anything below `meta/`, or past
    /// the sixteenth entry, makes the whole block changed.
    #[test]
    fn only_changed_views_are_named_entries() {
        assert_eq!(changed_views(Some(0b00101)), Some(0b101));
        assert_eq!(changed_views(Some(0)), Some(0));
        assert_eq!(changed_views(Some(1 << VIEW_COUNT)), None, "meta");
        assert_eq!(changed_views(Some(1 << 9 | 1)), None, "below meta");
        assert_eq!(changed_views(None), None, "past the sixteenth");
    }
}
