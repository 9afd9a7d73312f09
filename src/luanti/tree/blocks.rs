//! The `blocks/` part of the mounted Luanti tree: block folders, their views and the
//! `meta/x,y,z/` folders of node metadata.
//!
//! The paths are parsed in `tree.rs` into a `Place`; here are the views a block folder shows
//! (and how each is parsed back), the listings of the block-side folders (one function per
//! folder, each a page of the store's listing or one decoded block), and the mtimes of a
//! block folder's entries: an entry keeps a time set on it while its content is unchanged,
//! so an rsync after an edit sends only the files that changed.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::SystemTime;

use super::{base_time, not_found, value_to_file, LuantiTree};
use crate::error::{Error, Result};
use crate::luanti::cache::{Cached, Stored};
use crate::luanti::codec::block::{BlockPos, MapBlock, NodeMeta, RelPos};
use crate::luanti::codec::inventory::serialize_inventory;
use crate::luanti::store::map::{AxisOrder, LIST_BYTES};
use crate::luanti::summaries::VIEW_COUNT;
use crate::luanti::views;
use crate::names;
use crate::storekit::mtimes::content_hash;
use crate::vfs::tree::{stream, Entry, Numbering, Stat, TreePath};

/// The files of a block folder, in listing order, with how each is rendered and parsed.
pub(super) struct View {
    pub(super) name: &'static str,
    pub(super) render: fn(&MapBlock, BlockPos) -> Vec<u8>,
    pub(super) parse: fn(&[u8], BlockPos, &mut MapBlock) -> Result<()>,
    /// Whether two blocks (at one position) hold the same of every field `render` reads, so
    /// the view renders the same for both: a block changed through one view keeps the
    /// other views' renders (`views_render_only_what_they_compare` checks each field).
    pub(super) same: fn(&MapBlock, &MapBlock) -> bool,
}

pub(super) const VIEWS: [View; VIEW_COUNT] = [
    View {
        name: "block.txt",
        render: |b, _| views::render_header(b),
        parse: |t, _, b| views::parse_header(t, b),
        same: |a, b| {
            (a.version, a.flags, a.lighting_complete, a.timestamp)
                == (b.version, b.flags, b.lighting_complete, b.timestamp)
        },
    },
    View {
        name: "light.txt",
        render: |b, _| views::render_light(b),
        parse: |t, _, b| views::parse_light(t, b),
        same: |a, b| a.param1 == b.param1,
    },
    View {
        name: "nodes.cubeset",
        render: |b, _| views::render_nodes(b),
        parse: parse_nodes_clearing_light,
        same: |a, b| a.names == b.names && a.content == b.content && a.param2 == b.param2,
    },
    View {
        name: "objects.txt",
        render: views::render_objects,
        parse: |t, p, b| views::parse_objects(t, p, b),
        same: |a, b| a.objects == b.objects,
    },
    View {
        name: "timers.txt",
        render: |b, _| views::render_timers(b),
        parse: |t, _, b| views::parse_timers(t, b),
        same: |a, b| a.timers == b.timers,
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
        expire_lighting(block);
    }
    Ok(())
}

/// Marks the block for relighting by the engine (see [`parse_nodes_clearing_light`]): its
/// nodes changed, and worldfs cannot know which of them give light.
pub(super) fn expire_lighting(block: &mut MapBlock) {
    if block.version >= 27 {
        block.lighting_complete = 0;
    } else {
        block.flags |= LIGHTING_EXPIRED;
    }
}

/// Every entry of the folder of block `after` (paths inside it, the folder itself aside),
/// each with whether its content (a file's bytes, a folder's listing) differs from what
/// the same path held in `before`, the views first, in [`VIEWS`] order (see
/// [`changed_views`]); found without rendering anything: the views whose fields
/// differ, and below `meta/` the inventories, values and listings that differ. A whole-map
/// edit dates the changed ones and no other (see
/// [`crate::luanti::cache::Blocks::edit_many`]).
pub(super) fn entry_changes(before: &MapBlock, after: &MapBlock) -> Vec<(String, bool)> {
    let mut out: Vec<(String, bool)> = VIEWS
        .iter()
        .map(|v| (v.name.to_string(), !(v.same)(before, after)))
        .collect();
    let nodes = |b: &MapBlock| b.metadata.iter().map(|m| m.pos.index()).collect::<Vec<_>>();
    out.push(("meta".to_string(), nodes(before) != nodes(after)));
    for m in &after.metadata {
        let old = meta_at(before, m.pos);
        let dir = format!("meta/{}", rel_name(m.pos));
        out.push((dir.clone(), old.is_none()));
        out.push((
            format!("{dir}/inventory"),
            old.map(|o| &o.inventory) != Some(&m.inventory),
        ));
        for (private, kind) in [(false, "fields"), (true, "private")] {
            let vars = |n: Option<&NodeMeta>| -> Vec<(Vec<u8>, Vec<u8>)> {
                n.into_iter()
                    .flat_map(|n| &n.vars)
                    .filter(|v| v.private == private)
                    .map(|v| (v.key.clone(), v.value.clone()))
                    .collect()
            };
            let (was, now) = (vars(old), vars(Some(m)));
            let keys =
                |v: &[(Vec<u8>, Vec<u8>)]| v.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
            out.push((format!("{dir}/{kind}"), keys(&was) != keys(&now)));
            for (key, value) in &now {
                let same = was.iter().any(|(k, v)| k == key && v == value);
                out.push((format!("{dir}/{kind}/{}", names::escape(key)), !same));
            }
        }
    }
    out
}

/// Which views an edit changed, from the first entries [`entry_changes`] named changed
/// (bit `i` for its `i`-th, the views first): `None` when anything else changed too (`meta`
/// or an entry below it), or an entry past the sixteenth (`first` is `None`).
pub(super) fn changed_views(first: Option<u16>) -> Option<u8> {
    first
        .filter(|bits| bits >> VIEW_COUNT == 0)
        .and_then(|bits| u8::try_from(bits).ok())
}

/// A block's header: version, flags, `lighting_complete`, timestamp.
fn header(block: &MapBlock) -> (u8, u8, u16, u32) {
    (
        block.version,
        block.flags,
        block.lighting_complete,
        block.timestamp,
    )
}

/// What the relighting rule of [`parse_nodes_clearing_light`] looks at to tell a copy from an
/// edit: the block's node names and their indices (param2 does not light anything) and its
/// header but its version (22 and 23 are stored as 25, so the version read back differs
/// from the one written). A `block.txt` written through the mount marks the block with it; a
/// `nodes.cubeset` written while it is unchanged belongs to the same copy. Another program's
/// save (it moves the timestamp), a header whose commit was lost in a crash, a node edit in
/// between: each changes it, and the next node edit relights.
fn lighting_key(block: &MapBlock) -> u64 {
    let mut bytes = Vec::with_capacity(block.content.len() * 2 + block.names.len() * 16 + 8);
    let (_, flags, lighting, timestamp) = header(block);
    bytes.push(flags);
    bytes.extend_from_slice(&lighting.to_le_bytes());
    bytes.extend_from_slice(&timestamp.to_le_bytes());
    for name in &block.names {
        bytes.extend_from_slice(name.as_bytes());
        bytes.push(0);
    }
    for c in &block.content {
        bytes.extend_from_slice(&c.to_le_bytes());
    }
    content_hash(&bytes)
}

/// The flags bit "lighting expired" of blocks before version 27.
const LIGHTING_EXPIRED: u8 = 0x04;

/// Refuses a metadata key the block format cannot hold.
pub(super) fn check_key(key: &[u8]) -> Result<()> {
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

/// The fixed entries of a block folder: its views and `meta/`.
const FIXED: [&str; VIEW_COUNT + 1] = [
    VIEWS[0].name,
    VIEWS[1].name,
    VIEWS[2].name,
    VIEWS[3].name,
    VIEWS[4].name,
    "meta",
];

/// Block folders numbered by position, and their views and `meta/` by index (see
/// [`Numbering`]): the kernel may keep the names of a whole map while the core keeps a few
/// bytes per block it keeps attributes in. Positions are numbered in the map store's key
/// order ([`AxisOrder`]), so a `find`, which visits a large folder in inode order, reads
/// the store in the order its reads ahead fetch.
pub struct BlockNumbers(pub AxisOrder);

impl Numbering for BlockNumbers {
    fn dir(&self) -> &'static [&'static str] {
        &["blocks"]
    }

    fn number(&self, name: &str) -> Option<u64> {
        parse_block_name(name).map(|p| self.0.number(p))
    }

    fn name(&self, n: u64) -> Option<String> {
        (n >> 48 == 0).then(|| block_name(self.0.pos(n)))
    }

    fn fixed(&self) -> &'static [&'static str] {
        &FIXED
    }
}

pub(super) fn parse_rel_name(name: &str) -> Option<RelPos> {
    let mut it = name.split(',');
    let x: u8 = it.next()?.parse().ok()?;
    let y: u8 = it.next()?.parse().ok()?;
    let z: u8 = it.next()?.parse().ok()?;
    if it.next().is_some() || x > 15 || y > 15 || z > 15 || format!("{x},{y},{z}") != name {
        return None;
    }
    Some(RelPos { x, y, z })
}

pub(super) fn rel_name(p: RelPos) -> String {
    format!("{},{},{}", p.x, p.y, p.z)
}

pub(super) fn meta_at(block: &MapBlock, rel: RelPos) -> Option<&NodeMeta> {
    block.metadata.iter().find(|m| m.pos == rel)
}

pub(super) fn meta_entry(block: &mut MapBlock, rel: RelPos) -> &mut NodeMeta {
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

/// The one file of the folder of a block that does not decode: why.
pub(super) const ERROR_FILE: &str = "error.txt";

/// One page of the `blocks/` listing: the entries with cookies after `after`.
pub(super) struct Page {
    /// [`Blocks::times_generation`] when it was read: its folders' times are those of then.
    ///
    /// [`Blocks::times_generation`]: crate::luanti::cache::Blocks::times_generation
    generation: (u64, u64),
    after: u64,
    entries: Vec<Entry>,
    /// Whether the listing ends with this page.
    last: bool,
}

/// The listing hash of a node's `meta/x,y,z/` (its names never change): it keeps a time set
/// on it through every edit of what it holds.
const FIXED_LISTING: u64 = 0;

/// Blocks read from SQLite per page of the `blocks/` listing.
const PAGE_SIZE: usize = 512;

/// Pages kept (several listings may run at once).
const PAGES_KEPT: usize = 8;

/// The path of an entry of a block folder inside that folder (`meta/1,10,1/inventory`).
pub(super) fn sub_path(path: &TreePath) -> String {
    path.get(2..).map(|p| p.join("/")).unwrap_or_default()
}

impl LuantiTree {
    /// The hash of the listing of folder `sub` inside a block folder: a folder keeps its mtime
    /// while the names it lists stay the same (in any stored order). `meta/` lists the nodes
    /// made by mkdir before they hold anything too, so a restore that makes a node's folder,
    /// sets `meta/`'s time and only then fills the node leaves that time standing.
    pub(super) fn dir_hash(&self, pos: BlockPos, c: &Cached, sub: &str) -> u64 {
        let parts: Vec<&str> = sub.split('/').collect();
        let entries: BTreeSet<String> = match parts.as_slice() {
            ["meta"] => return self.meta_hash(pos, c, true),
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
            _ => return FIXED_LISTING,
        };
        let listing: Vec<String> = entries.into_iter().collect();
        content_hash(listing.join("/").as_bytes())
    }

    /// The hash of `meta/`'s listing (see [`Self::dir_hash`]): the stored nodes, and with
    /// `made` the node folders made by `mkdir` too.
    fn meta_hash(&self, pos: BlockPos, c: &Cached, made: bool) -> u64 {
        let names: BTreeSet<String> = self
            .meta_nodes(pos, c, made)
            .into_iter()
            .filter_map(RelPos::from_index)
            .map(rel_name)
            .collect();
        let listing: Vec<String> = names.into_iter().collect();
        content_hash(listing.join("/").as_bytes())
    }

    /// The node indices `meta/` lists: the nodes with stored metadata, and with `made` the
    /// node folders made by `mkdir` too.
    fn meta_nodes(&self, pos: BlockPos, c: &Cached, made: bool) -> BTreeSet<u16> {
        let mut idx: BTreeSet<u16> = c.block.metadata.iter().map(|m| m.pos.index()).collect();
        if made {
            if let Ok(extra) = self.empty_meta.lock() {
                idx.extend(extra.iter().filter(|(p, _)| *p == pos).map(|(_, i)| *i));
            }
        }
        idx
    }

    /// Writes one view of a block. The derived-data rule (a node edit clears the lighting
    /// flags) applies only where the user did not write `block.txt` itself: a `nodes.cubeset`
    /// written while the block is as a `block.txt` written through the mount left it (same
    /// header, same nodes; see [`lighting_key`]) keeps the flags that file set, so `cp -r`
    /// and an rsync restore give the block back exactly, however long the copy takes and also
    /// when a restore killed between the two files is run again. The mark lives with the
    /// recorded times (it survives a remount) and is recorded under the block's times lock,
    /// so a `nodes.cubeset` committed at the same time sees it or commits before it. A
    /// `block.txt` that changes nothing (an editor's save) marks nothing.
    pub(super) fn write_view(&self, pos: BlockPos, view: &'static View, data: &[u8]) -> Result<()> {
        match view.name {
            "nodes.cubeset" => self.modify(pos, |b| {
                if self.blocks.header_written_over(pos, lighting_key(b)) {
                    views::parse_nodes(data, b)
                } else {
                    (view.parse)(data, pos, b)
                }
            }),
            "block.txt" => self.modify(pos, |b| {
                let before = header(b);
                (view.parse)(data, pos, b)?;
                if header(b) != before {
                    self.blocks.mark_header_written(pos, lighting_key(b));
                }
                Ok(())
            }),
            _ => self.modify(pos, |b| (view.parse)(data, pos, b)),
        }
    }

    /// The stored key of a field whose file name is a long form (see [`names`]).
    pub(super) fn long_key(
        &self,
        pos: BlockPos,
        rel: RelPos,
        private: bool,
        file: &str,
    ) -> Option<Vec<u8>> {
        let c = self.blocks.get(pos).ok()?;
        let vars = &meta_at(&c.block, rel)?.vars;
        names::find(
            file,
            vars.iter().filter(|v| v.private == private).map(|v| &v.key),
        )
        .cloned()
    }

    pub(super) fn dir_stat(&self, mtime: SystemTime) -> Stat {
        Stat::dir(mtime, false)
    }

    pub(super) fn file_stat(&self, size: usize, mtime: SystemTime) -> Stat {
        Stat::file(size as u64, mtime, false)
    }

    /// Stat of the file `sub` (its path inside the block folder) holding `data`; a view's
    /// size (and content hash, when it was needed) go into the block's summary.
    pub(super) fn entry_file(&self, pos: BlockPos, c: &Cached, sub: &str, data: &[u8]) -> Stat {
        let view = VIEWS.iter().enumerate().find(|(_, v)| v.name == sub);
        let hash = self.blocks.entry_recorded(pos, sub).then(|| match view {
            Some((_, v)) => c.view_hash(v.name, |b| (v.render)(b, pos)),
            None => content_hash(data),
        });
        if let Some((i, _)) = view {
            self.blocks
                .summarize(pos, c, |s| s.set_view(i, data.len(), hash));
        }
        let mtime = match hash {
            Some(h) => self.blocks.entry_mtime(pos, &c.stored(), sub, h),
            None => c.mtime,
        };
        Stat {
            source: Some(source(c.hash, c.from_seed)),
            ..Stat::file(data.len() as u64, mtime, c.from_seed)
        }
    }

    /// Stat of view `v` of the block at `pos` from the block's summary, without decoding the
    /// block: the same as [`Self::entry_file`] gives for it; `None` when the summary does not
    /// tell.
    pub(super) fn summarized_view(&self, pos: BlockPos, v: &View) -> Result<Option<Stat>> {
        let Some(i) = VIEWS.iter().position(|w| w.name == v.name) else {
            return Ok(None);
        };
        let Some((stored, s)) = self.blocks.summary(pos)? else {
            return Ok(None);
        };
        let Some(size) = s.size(i) else {
            return Ok(None);
        };
        let mtime = if self.blocks.entry_recorded(pos, v.name) {
            match s.view_hash(i) {
                Some(h) => self.blocks.entry_mtime(pos, &stored, v.name, h),
                None => return Ok(None),
            }
        } else {
            stored.mtime
        };
        Ok(Some(Stat {
            source: Some(source(stored.hash, stored.from_seed)),
            ..Stat::file(size, mtime, stored.from_seed)
        }))
    }

    /// Stat of the block's `meta/` folder from the block's summary, without decoding the
    /// block (see [`Self::summarized_view`]); `None` when the summary does not tell, or when
    /// node folders made by `mkdir` are listed beside the stored nodes.
    pub(super) fn summarized_meta(&self, pos: BlockPos) -> Result<Option<(Stored, Stat)>> {
        let Some((stored, s)) = self.blocks.summary(pos)? else {
            return Ok(None);
        };
        Ok(match s.meta() {
            Some(listing) if !self.made_meta_in(pos) => {
                let mtime = self.blocks.entry_mtime(pos, &stored, "meta", listing);
                let stat = Stat {
                    source: Some(source(stored.hash, stored.from_seed)),
                    ..Stat::dir(mtime, stored.from_seed)
                };
                Some((stored, stat))
            }
            _ => None,
        })
    }

    /// Whether node folders made by `mkdir` (not stored yet) are in the block at `pos`.
    fn made_meta_in(&self, pos: BlockPos) -> bool {
        crate::error::recover(&self.empty_meta)
            .iter()
            .any(|(p, _)| *p == pos)
    }

    /// Stat of the folder `sub` inside the block folder; the hash of the stored nodes'
    /// `meta/` listing goes into the block's summary.
    pub(super) fn entry_dir(&self, pos: BlockPos, c: &Cached, sub: &str) -> Stat {
        let hash = self.dir_hash(pos, c, sub);
        if sub == "meta" {
            let stored = self.meta_hash(pos, c, false);
            let nodes = c.block.metadata.len();
            self.blocks.summarize(pos, c, |s| s.set_meta(stored, nodes));
        }
        let mtime = self.blocks.entry_mtime(pos, &c.stored(), sub, hash);
        Stat {
            source: Some(source(c.hash, c.from_seed)),
            ..Stat::dir(mtime, c.from_seed)
        }
    }

    /// Stat of a block folder from the block's stored bytes: the time of the block's last
    /// change (or the time set on the folder since), so `ls -lt blocks` shows the blocks
    /// edited last first.
    pub(super) fn block_dir(&self, pos: BlockPos, blob: &[u8], from_seed: bool) -> Stat {
        let (mtime, hash) = (self.blocks.mtime_of(pos, blob), content_hash(blob));
        self.block_dir_at(pos, mtime, hash, from_seed)
    }

    /// Stat of a block folder from the time and content hash of the block's stored bytes.
    pub(super) fn block_dir_at(
        &self,
        pos: BlockPos,
        mtime: SystemTime,
        hash: u64,
        from_seed: bool,
    ) -> Stat {
        let block = Stored {
            mtime,
            hash,
            from_seed,
        };
        let mtime = self.blocks.entry_mtime(pos, &block, "", hash);
        Stat {
            source: Some(source(hash, from_seed)),
            ..Stat::dir(mtime, from_seed)
        }
    }

    /// What the stats of the block at `pos` are derived from now (see
    /// [`Stat::source`]): its stored bytes, hashed without decoding them, and whether they
    /// come from the seed; `None` when no block is there.
    pub(super) fn block_source(&self, pos: BlockPos) -> Result<Option<u64>> {
        Ok(self
            .blocks
            .stored(pos)?
            .map(|s| source(s.hash, s.from_seed)))
    }

    /// Every entry inside a block folder: its path inside the folder and the hash of its
    /// content (a file) or of its listing (a folder).
    fn block_files(&self, pos: BlockPos, c: &Cached) -> Vec<(String, u64)> {
        let mut out: Vec<(String, u64)> = VIEWS
            .iter()
            .map(|v| {
                let hash = c.view_hash(v.name, |b| (v.render)(b, pos));
                (v.name.to_string(), hash)
            })
            .collect();
        out.push(("meta".to_string(), self.dir_hash(pos, c, "meta")));
        for m in &c.block.metadata {
            let dir = format!("meta/{}", rel_name(m.pos));
            for sub in [
                dir.clone(),
                format!("{dir}/fields"),
                format!("{dir}/private"),
            ] {
                let hash = self.dir_hash(pos, c, &sub);
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
    pub(super) fn modify(
        &self,
        pos: BlockPos,
        edit: impl FnOnce(&mut MapBlock) -> Result<()>,
    ) -> Result<()> {
        let _times = self.blocks.times_lock(pos)?;
        let before = self.blocks.get(pos)?;
        let times: HashMap<String, (u64, SystemTime)> = self
            .block_files(pos, &before)
            .into_iter()
            .map(|(sub, hash)| {
                let t = self.blocks.entry_mtime(pos, &before.stored(), &sub, hash);
                (sub, (hash, t))
            })
            .collect();
        // A time set on the block folder itself stands through writes into it through the
        // mount, as a folder's time does when files in it are rewritten: a restore's rsync
        // sets it before it has written everything below `meta/`.
        let folder_time = self
            .blocks
            .entry_recorded_mtime(pos, before.hash, "", before.hash);
        self.blocks.modify(pos, edit)?;
        let after = self.blocks.get(pos)?;
        if after.hash == before.hash {
            return Ok(());
        }
        // A restore writes a block's views one at a time: each of them is rendered and
        // hashed again only when what it shows changed.
        after.keep_views_of(&before, |name| {
            VIEWS
                .iter()
                .any(|v| v.name == name && (v.same)(&before.block, &after.block))
        });
        let mut keep: Vec<(String, u64, SystemTime)> = self
            .block_files(pos, &after)
            .into_iter()
            .filter_map(|(sub, hash)| match times.get(&sub) {
                Some(&(h, t)) if h == hash => Some((sub, hash, t)),
                _ => None,
            })
            .collect();
        keep.extend(folder_time.map(|t| (String::new(), after.hash, t)));
        self.blocks.set_entry_mtimes(pos, &keep);
        Ok(())
    }

    pub(super) fn meta_exists(&self, pos: BlockPos, c: &Cached, rel: RelPos) -> bool {
        meta_at(&c.block, rel).is_some()
            || crate::error::recover(&self.empty_meta).contains(&(pos, rel.index()))
    }

    pub(super) fn block_listing(
        &self,
        after: u64,
        sink: &mut dyn FnMut(Entry) -> bool,
    ) -> Result<()> {
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
        let generation = self.blocks.times_generation();
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
                    Some(d) => self.block_dir(l.pos, d, l.from_seed),
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

    /// Lists `blocks/`: pages of the stored blocks, read from the store as the kernel asks.
    pub(super) fn list_blocks(
        &self,
        after: u64,
        sink: &mut dyn FnMut(Entry) -> bool,
    ) -> Result<()> {
        self.blocks.refresh();
        self.block_listing(after, sink)
    }

    /// Lists a block folder: its views and `meta`.
    pub(super) fn list_block(
        &self,
        pos: BlockPos,
        after: u64,
        sink: &mut dyn FnMut(Entry) -> bool,
    ) -> Result<()> {
        // A block with a summary decodes (it was made from the decoded block), and its
        // `meta/` stat is in it: the block is not decoded again.
        let (mtime, from_seed, meta) = match self.summarized_meta(pos)? {
            Some((stored, meta)) => (stored.mtime, stored.from_seed, meta),
            None => match self.blocks.get(pos) {
                Ok(c) => (c.mtime, c.from_seed, self.entry_dir(pos, &c, "meta")),
                Err(e) => {
                    let Some(reason) = self.blocks.decode_error(pos)? else {
                        return Err(e);
                    };
                    let entry = Entry {
                        name: ERROR_FILE.into(),
                        cookie: 1,
                        stat: self.file_stat(reason.len() + 1, base_time()),
                    };
                    stream(vec![entry], after, sink);
                    return Ok(());
                }
            },
        };
        // Views are not rendered to be listed: a listing's file sizes are not used
        // (see `Tree::list`), and `find` or `ls` should not render five views a block.
        let mut entries = Vec::new();
        for (i, v) in VIEWS.iter().enumerate() {
            entries.push(Entry {
                name: v.name.into(),
                cookie: i as u64 + 1,
                stat: Stat::file(0, mtime, from_seed),
            });
        }
        entries.push(Entry {
            name: "meta".into(),
            cookie: VIEWS.len() as u64 + 1,
            stat: meta,
        });
        stream(entries, after, sink);
        Ok(())
    }

    /// Lists `meta/` of a block: one folder per node with metadata (or made by mkdir).
    pub(super) fn list_meta(
        &self,
        pos: BlockPos,
        after: u64,
        sink: &mut dyn FnMut(Entry) -> bool,
    ) -> Result<()> {
        // Most blocks hold no node metadata; their summary tells, without decoding them.
        if let Some((_, s)) = self.blocks.summary(pos)? {
            if s.no_nodes() && !self.made_meta_in(pos) {
                return Ok(());
            }
        }
        let c = self.blocks.get(pos)?;
        let entries = self
            .meta_nodes(pos, &c, true)
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

    /// Lists the folder of one node's metadata: `fields`, `inventory`, `private`.
    pub(super) fn list_meta_node(
        &self,
        dir: &TreePath,
        (pos, rel): (BlockPos, RelPos),
        after: u64,
        sink: &mut dyn FnMut(Entry) -> bool,
    ) -> Result<()> {
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

    /// Lists `fields/` or `private/` of one node: one file per metadata variable.
    pub(super) fn list_vars(
        &self,
        dir: &TreePath,
        (pos, rel, private): (BlockPos, RelPos, bool),
        after: u64,
        sink: &mut dyn FnMut(Entry) -> bool,
    ) -> Result<()> {
        let c = self.blocks.get(pos)?;
        if !self.meta_exists(pos, &c, rel) {
            return Err(not_found(dir));
        }
        let sub = sub_path(dir);
        let mut shown = BTreeSet::new();
        let vars = meta_at(&c.block, rel).map_or(&[][..], |m| &m.vars[..]);
        let entries = vars
            .iter()
            .filter(|v| v.private == private)
            .enumerate()
            .filter_map(|(i, v)| {
                let name = names::escape(&v.key);
                // Two long keys whose long forms collide: the first one shows.
                if !shown.insert(name.clone()) {
                    log::warn!(
                        "{}/{name}: a second field with this long file name is not shown",
                        dir.join("/")
                    );
                    return None;
                }
                let data = value_to_file(&v.value);
                let stat = self.entry_file(pos, &c, &format!("{sub}/{name}"), &data);
                Some(Entry {
                    name,
                    cookie: i as u64 + 1,
                    stat,
                })
            })
            .collect();
        stream(entries, after, sink);
        Ok(())
    }
}

/// The [`Stat::source`] of a block's stats: the hash of its stored bytes, told apart by
/// whether they come from the seed (the same bytes shown from the seed are read-only).
pub(super) fn source(hash: u64, from_seed: bool) -> u64 {
    hash ^ u64::from(from_seed).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, UNIX_EPOCH};

    use crate::luanti::codec::block::BlockPos;
    use crate::luanti::store::map::MapStore;
    use crate::luanti::test_map::{blob, map_with};
    use crate::luanti::tree::LuantiTree;
    use crate::vfs::tree::{Options, Stat, Tree};

    fn at(parts: &[&str]) -> Vec<String> {
        parts.iter().map(|s| s.to_string()).collect()
    }

    fn open(path: &std::path::Path) -> LuantiTree {
        let options = Options {
            read_only: false,
            cache_bytes: 1 << 20,
        };
        LuantiTree::open(path, &options).expect("opens")
    }

    /// A block with something in every field a view renders.
    fn rich_block() -> crate::luanti::codec::block::MapBlock {
        use crate::luanti::codec::block::{NodeTimer, ObjectData, RelPos, StaticObject};
        let mut b = crate::luanti::cache::new_block();
        b.names = vec!["default:stone".into(), "default:chest".into(), "air".into()];
        for i in 0..4096 {
            b.content[i] = (i % 3) as u16;
            b.param1[i] = (i % 251) as u8;
            b.param2[i] = (i % 7) as u8;
        }
        b.objects.push(StaticObject {
            kind: 9,
            pos: [10_000, 20_000, 30_000],
            data: ObjectData::Raw(b"raw".to_vec()),
        });
        b.timers.push(NodeTimer {
            pos: RelPos { x: 1, y: 2, z: 3 },
            timeout: 5000,
            elapsed: 250,
        });
        b
    }

    /// Each view's `same` compares every field its render reads: a change of any one field
    /// changes only the renders of views whose `same` tells it (a view that read a field
    /// it does not compare would keep a stale render after an edit, and its file its old
    /// time, so an incremental backup would miss the change).
    #[test]
    fn views_render_only_what_they_compare() {
        use super::VIEWS;
        use crate::luanti::codec::block::{MapBlock, NodeMeta, NodeTimer, RelPos};
        let pos = BlockPos { x: 3, y: -1, z: 2 };
        let base = rich_block();
        // Every field of a block, so that a new one does not compile until it is edited
        // below too.
        let MapBlock {
            version: _,
            flags: _,
            lighting_complete: _,
            timestamp: _,
            names: _,
            content: _,
            param1: _,
            param2: _,
            metadata: _,
            objects: _,
            timers: _,
        } = &base;
        type Edit = fn(&mut MapBlock);
        let edits: Vec<(&str, Edit)> = vec![
            ("version", |b| b.version = 26),
            ("flags", |b| b.flags ^= 0x01),
            ("other flags", |b| b.flags ^= 0x20),
            ("lighting_complete", |b| b.lighting_complete ^= 0x0100),
            ("timestamp", |b| b.timestamp += 1),
            ("param1", |b| b.param1[4095] ^= 0x11),
            ("a name", |b| b.names[1] = "default:furnace".into()),
            ("content", |b| b.content[7] = 2),
            ("param2", |b| b.param2[100] ^= 3),
            ("objects", |b| b.objects[0].pos[1] += 1),
            ("timers", |b| {
                b.timers.push(NodeTimer {
                    pos: RelPos { x: 0, y: 0, z: 9 },
                    timeout: 1,
                    elapsed: 0,
                })
            }),
            ("metadata", |b| {
                b.metadata.push(NodeMeta {
                    pos: RelPos { x: 0, y: 0, z: 0 },
                    vars: Vec::new(),
                    inventory: Default::default(),
                })
            }),
        ];
        for (field, edit) in edits {
            let mut changed = base.clone();
            edit(&mut changed);
            let mut told = 0;
            for v in &VIEWS {
                let same = (v.same)(&base, &changed);
                let renders_same = (v.render)(&base, pos) == (v.render)(&changed, pos);
                assert!(
                    !same || renders_same,
                    "{}: a change of {field} changes its render, but `same` says it is the same",
                    v.name
                );
                told += usize::from(!same);
            }
            assert_eq!(
                told > 0,
                field != "metadata",
                "{field}: which views tell the change"
            );
        }
    }

    /// A block changed through one view keeps the renders of the views the change did not
    /// touch (a restore writes five views a block), and what it shows is what a fresh
    /// decode shows.
    #[test]
    fn an_edit_keeps_the_renders_of_views_it_did_not_change() {
        let (_dir, path) = map_with(&[(BlockPos { x: 0, y: 0, z: 0 }, "default:stone")]);
        let tree = open(&path);
        let file = |name: &str| at(&["blocks", "0,0,0", name]);
        let before: Vec<Vec<u8>> = super::VIEWS
            .iter()
            .map(|v| tree.read(&file(v.name)).expect("reads").to_vec())
            .collect();
        let pos = BlockPos { x: 0, y: 0, z: 0 };
        let nodes_before = tree
            .blocks
            .get(pos)
            .expect("cached")
            .view("nodes.cubeset", |_| panic!("rendered by the reads above"));
        let header = String::from_utf8(before[0].clone()).expect("text");
        let edited = header.replace("timestamp = undefined", "timestamp = 77");
        assert_ne!(edited, header, "the test edits the timestamp");
        tree.write(&file("block.txt"), edited.as_bytes())
            .expect("writes");
        let c = tree.blocks.get(pos).expect("cached");
        let nodes_after = c.view("nodes.cubeset", |_| panic!("kept, not rendered again"));
        assert!(Arc::ptr_eq(&nodes_before, &nodes_after));
        drop(c);
        let fresh = open(&path);
        for (v, old) in super::VIEWS.iter().zip(&before) {
            let now = tree.read(&file(v.name)).expect("reads");
            assert_eq!(
                *now,
                *fresh.read(&file(v.name)).expect("reads"),
                "{}",
                v.name
            );
            assert_eq!(*now != *old, v.name == "block.txt", "{} changed", v.name);
        }
    }

    /// What a walk with attributes sees of a block folder: its listing, the stat of each
    /// entry, and the listing of `meta/`.
    fn shown(tree: &LuantiTree, block: &str) -> Vec<(String, Stat)> {
        let folder = at(&["blocks", block]);
        let mut out = Vec::new();
        tree.list(&folder, 0, &mut |e| {
            out.push((format!("listed {}", e.name), e.stat.clone()));
            true
        })
        .expect("lists the block");
        for name in out
            .clone()
            .iter()
            .filter_map(|(n, _)| n.strip_prefix("listed "))
        {
            let mut p = folder.clone();
            p.push(name.to_string());
            out.push((name.to_string(), tree.stat(&p).expect("stat")));
        }
        let mut meta = folder.clone();
        meta.push("meta".into());
        tree.list(&meta, 0, &mut |e| {
            out.push((format!("meta/{}", e.name), e.stat.clone()));
            true
        })
        .expect("lists meta");
        out
    }

    /// Block folders are numbered in the order `blocks/` lists them, the map store's key
    /// order, for both SQLite layouts: `find` visits a large folder in inode order, and reads
    /// ahead serve a walk in key order only.
    #[test]
    fn block_folders_are_numbered_in_listing_order() {
        let mut positions = Vec::new();
        for x in [-3i16, 0, 2] {
            for y in [-1i16, 0, 5] {
                for z in [-2i16, 0, 1] {
                    positions.push((BlockPos { x, y, z }, "test:a"));
                }
            }
        }
        let (dir, path) = map_with(&positions);
        std::env::set_var("WORLDFS_STATE_DIR", dir.path());
        let xyz = dir.path().join("xyz");
        std::fs::create_dir(&xyz).expect("a folder");
        let xyz_map = xyz.join("map.sqlite");
        let c = rusqlite::Connection::open(&xyz_map).expect("a database");
        c.execute_batch(
            "CREATE TABLE blocks (x INTEGER, y INTEGER, z INTEGER, data BLOB NOT NULL, \
             PRIMARY KEY (x, z, y))",
        )
        .expect("the table of x, y, z columns");
        for (p, n) in &positions {
            c.execute(
                "INSERT INTO blocks VALUES (?1, ?2, ?3, ?4)",
                rusqlite::params![p.x, p.y, p.z, blob(n)],
            )
            .expect("a block");
        }
        for map in [&path, &xyz_map] {
            let tree = open(map);
            let numbers = tree.numbering().expect("block folders are numbered");
            let mut listed = Vec::new();
            tree.list(&at(&["blocks"]), 0, &mut |e| {
                listed.push(numbers.number(&e.name).expect("a block folder's number"));
                true
            })
            .expect("lists blocks");
            assert_eq!(listed.len(), positions.len());
            assert!(
                listed.windows(2).all(|w| w[0] < w[1]),
                "{}: numbers in listing order: {listed:?}",
                map.display()
            );
        }
    }

    /// The stats a second walk takes from the blocks' summaries (sizes, times, sources,
    /// modes, `meta/` listings) are those the decoded blocks gave, with times set on files,
    /// node metadata and node folders made by mkdir; a block whose summary tells all is not
    /// decoded again.
    #[test]
    fn a_second_walk_shows_from_summaries_what_the_decoded_blocks_showed() {
        let (a, b, c) = (
            BlockPos { x: 0, y: 0, z: 0 },
            BlockPos { x: 1, y: 0, z: 0 },
            BlockPos { x: 2, y: 0, z: 0 },
        );
        let (dir, path) = map_with(&[(a, "test:a"), (b, "test:b"), (c, "test:c")]);
        std::env::set_var("WORLDFS_STATE_DIR", dir.path());
        let tree = open(&path);
        let set = UNIX_EPOCH + Duration::from_secs(1_400_000_000);
        tree.mkdir(&at(&["blocks", "0,0,0", "meta", "4,5,6"]))
            .expect("a node folder made");
        tree.mkdir(&at(&["blocks", "1,0,0", "meta", "1,2,3"]))
            .expect("a node folder");
        tree.write(
            &at(&["blocks", "1,0,0", "meta", "1,2,3", "fields", "infotext"]),
            b"hello\n",
        )
        .expect("a field written");
        tree.set_mtime(&at(&["blocks", "2,0,0", "light.txt"]), set)
            .expect("a time set");
        let blocks = ["0,0,0", "1,0,0", "2,0,0"];
        let first: Vec<_> = blocks.iter().map(|b| shown(&tree, b)).collect();
        assert!(first[2]
            .iter()
            .any(|(n, s)| n == "light.txt" && s.mtime == set));
        tree.blocks.drop_decoded();
        let again = shown(&tree, "2,0,0");
        assert_eq!(tree.blocks.decoded(), 0, "2,0,0 was not decoded again");
        assert_eq!(again, first[2]);
        let second: Vec<_> = blocks.iter().map(|b| shown(&tree, b)).collect();
        assert_eq!(second, first);
    }

    /// A later mount lists and stats blocks from the summaries an earlier one kept on disk,
    /// as their decoded blocks show them, without decoding them; a block with node metadata
    /// is decoded only to list its `meta/`.
    #[test]
    fn a_later_mount_shows_from_summaries_kept_on_disk() {
        use crate::luanti::cache::new_block;
        use crate::luanti::codec::block::{MetaVar, NodeMeta, RelPos};
        use crate::luanti::summary_file::SummaryFile;
        let (a, b, c) = (
            BlockPos { x: 0, y: 0, z: 0 },
            BlockPos { x: -1, y: 2, z: 0 },
            BlockPos { x: 3, y: 0, z: -4 },
        );
        let (dir, path) = map_with(&[(a, "test:a"), (b, "test:b")]);
        let mut with_meta = new_block();
        with_meta.names = vec!["test:chest".into()];
        with_meta.metadata = vec![NodeMeta {
            pos: RelPos::from_index(273).expect("a node"),
            vars: vec![MetaVar {
                key: b"infotext".to_vec(),
                value: b"hello".to_vec(),
                private: false,
            }],
            inventory: Default::default(),
        }];
        let encoded = crate::luanti::codec::encode_block(&with_meta).expect("encodes");
        MapStore::open(&path, false)
            .expect("another writer")
            .commit(&[(c, Some(encoded))])
            .expect("its commit");
        let file = dir.path().join("summaries.sqlite");
        let mount = || {
            let mut tree = open(&path);
            tree.blocks
                .keep_summaries_in(SummaryFile::at(&file, 1, true).expect("opens"));
            tree
        };
        let names = ["0,0,0", "-1,2,0", "3,0,-4"];
        let first = mount();
        let before: Vec<_> = names.iter().map(|n| shown(&first, n)).collect();
        assert!(before[2].iter().any(|(n, _)| n.starts_with("meta/")));
        drop(first);
        let second = mount();
        for (i, n) in names.iter().enumerate().take(2) {
            assert_eq!(shown(&second, n), before[i]);
        }
        let views: Vec<_> = before[2]
            .iter()
            .filter(|(n, _)| !n.starts_with("meta/"))
            .cloned()
            .collect();
        let c_views: Vec<_> = shown(&second, "3,0,-4")
            .into_iter()
            .filter(|(n, _)| !n.starts_with("meta/"))
            .collect();
        assert_eq!(c_views, views);
        assert_eq!(
            second.blocks.decoded(),
            1,
            "only 3,0,-4 decoded, for its meta/"
        );
        assert_eq!(shown(&second, "3,0,-4"), before[2]);
    }

    /// A summary is for the stored bytes it was made from: after another writer changes the
    /// block, its stats are those of the new bytes.
    #[test]
    fn a_summary_is_not_used_once_another_writer_changed_the_block() {
        let a = BlockPos { x: 0, y: 0, z: 0 };
        let (dir, path) = map_with(&[(a, "test:a")]);
        std::env::set_var("WORLDFS_STATE_DIR", dir.path());
        let tree = open(&path);
        let nodes = at(&["blocks", "0,0,0", "nodes.cubeset"]);
        let before = tree.stat(&nodes).expect("stat");
        tree.blocks.drop_decoded();
        assert_eq!(tree.stat(&nodes).expect("stat again"), before);
        assert_eq!(tree.blocks.decoded(), 0);
        MapStore::open(&path, false)
            .expect("another writer")
            .commit(&[(a, Some(blob("test:a_much_longer_node_name")))])
            .expect("its commit");
        std::thread::sleep(Duration::from_millis(100));
        let after = tree.stat(&nodes).expect("stat after");
        assert_eq!(after.size, tree.read(&nodes).expect("read").len() as u64);
        assert_ne!(after.size, before.size);
        assert_ne!(after.source, before.source);
    }

    /// rsync sets a block folder's time while it still writes in the block: a time set
    /// while an edit of the block commits stands (the edit writes back the times it kept
    /// only under the lock the setting takes).
    #[test]
    fn a_time_set_while_an_edit_commits_stands() {
        let pos = BlockPos { x: 0, y: 0, z: 0 };
        let (dir, path) = map_with(&[(pos, "test:a")]);
        std::env::set_var("WORLDFS_STATE_DIR", dir.path());
        let options = Options {
            read_only: false,
            cache_bytes: 1 << 20,
        };
        let tree = Arc::new(LuantiTree::open(&path, &options).expect("opens"));
        let folder = vec!["blocks".to_string(), "0,0,0".to_string()];
        let (first, second) = (
            UNIX_EPOCH + Duration::from_secs(1_400_000_000),
            UNIX_EPOCH + Duration::from_secs(1_500_000_000),
        );
        tree.set_mtime(&folder, first).expect("the first time");
        let setter = Arc::new(Mutex::new(None));
        let (t, s, f) = (tree.clone(), setter.clone(), folder.clone());
        tree.blocks.in_commit.set(move |_| {
            let handle = std::thread::spawn(move || t.set_mtime(&f, second));
            std::thread::sleep(Duration::from_millis(300));
            *s.lock().expect("setter") = Some(handle);
        });
        tree.modify(pos, |b| {
            b.names = vec!["test:b".to_string()];
            Ok(())
        })
        .expect("the edit");
        let handle = setter.lock().expect("setter").take().expect("the hook ran");
        handle.join().expect("joins").expect("the second time");
        assert_eq!(tree.stat(&folder).expect("stat").mtime, second);
    }
}
