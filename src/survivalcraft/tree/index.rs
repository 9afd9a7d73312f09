//! The `index/` part of the mounted Survivalcraft tree (docs/tree.md "index/"): whole-world answers
//! shown as folders of links and text files. Which chunks hold a block comes from
//! [`Index`]; which slots hold an item from the parsed Project.xml, read at each question.
//!
//! ```text
//! index/blocks/ID/CX,CZ   -> ../../../chunks/CX,CZ, one link per chunk holding block id ID
//! index/items/ID          PATH COMPONENT SLOT COUNT, one line per slot holding block id ID
//! ```
//!
//! IDs are the decimal block ids `blocks.cubeset` and the inventory files show (names are a
//! reading aid that differs between game versions). Renames: `mv index/blocks/A
//! index/blocks/B` replaces block A by B in every chunk holding it, in one commit of the
//! chunk store; `mv index/items/A index/items/B` replaces it in every inventory slot, in one
//! commit of Project.xml.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{chunk_cookie, holders, HolderKind, SurvivalcraftTree, INVENTORY};
use crate::error::{Error, Result};
use crate::index_tree::{self, Shown};
use crate::survivalcraft::codec::chunk::ChunkPos;
use crate::survivalcraft::codec::project::{self, Inventory, ProjectInfo};
use crate::survivalcraft::index::{item_id, parse_id, replace_block, with_item_id, Answer};
use crate::vfs::tree::{base_time, not_found, Entry, TreePath};

/// The top-level folder of the answers.
pub const INDEX: &str = "index";

/// The folders of `index/`, in listing order.
const FOLDERS: [&str; 2] = ["blocks", "items"];

/// How many times a rename asks its question again when the world changed under it.
const RENAME_TRIES: usize = 3;

/// Where a path below `index/` points.
pub(super) enum At {
    Top,
    Folder(&'static str),
    Block(u16),
    BlockLink(ChunkPos),
    Item(u16),
}

/// The target of the link to the chunk at `pos` in `index/blocks/ID/`.
fn chunk_target(pos: ChunkPos) -> String {
    format!("../../../chunks/{pos}")
}

/// The first chunk position whose cookie may be greater than `cookie` (the inverse of
/// [`chunk_cookie`], rounded down).
fn chunk_after(cookie: u64) -> ChunkPos {
    const HALF: i64 = 1 << 30;
    let c = cookie.saturating_sub(1);
    let x = (c >> 31) as i64 - HALF;
    let z = (c & ((1 << 31) - 1)) as i64 - HALF;
    let clamp = |v: i64| v.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32;
    ChunkPos::new(clamp(x), clamp(z))
}

impl SurvivalcraftTree {
    fn index_answer(&self) -> Result<Arc<Answer>> {
        self.index.answer(&self.objects)
    }

    /// Parses a path below `index/` (`parts` without `index`).
    pub(super) fn index_at(&self, path: &TreePath, parts: &[&str]) -> Result<At> {
        let nf = || not_found(path);
        let max = self.objects.format().max_id();
        Ok(match parts {
            [] => At::Top,
            [f] => At::Folder(FOLDERS.iter().find(|x| *x == f).copied().ok_or_else(nf)?),
            ["blocks", id, rest @ ..] => {
                let id = parse_id(id, max).ok_or_else(nf)?;
                let answer = self.index_answer()?;
                let chunks = answer.blocks.get(&id).ok_or_else(nf)?;
                match rest {
                    [] => At::Block(id),
                    [c] => {
                        let pos: ChunkPos = c.parse().map_err(|_| nf())?;
                        if !chunks.contains(&pos) {
                            return Err(nf());
                        }
                        At::BlockLink(pos)
                    }
                    _ => return Err(nf()),
                }
            }
            ["items", id] => {
                let id = parse_id(id, max).ok_or_else(nf)?;
                if !self.item_lines()?.contains_key(&id) {
                    return Err(nf());
                }
                At::Item(id)
            }
            _ => return Err(nf()),
        })
    }

    /// Every block id in any inventory shown in the mount → the lines of its file.
    fn item_lines(&self) -> Result<BTreeMap<u16, Vec<u8>>> {
        let mut out: BTreeMap<u16, Vec<u8>> = BTreeMap::new();
        let Some(p) = self.objects.project()? else {
            return Ok(out);
        };
        let layout = self.layout();
        for kind in [HolderKind::Player, HolderKind::Container] {
            for (name, h) in holders(&p.info, kind) {
                for inv in &h.inventories {
                    for s in inv.slots.iter().filter(|s| s.count > 0) {
                        out.entry(item_id(s.contents, layout))
                            .or_default()
                            .extend_from_slice(
                                format!(
                                    "{}/{name}/{INVENTORY} {} {} {}\n",
                                    kind.dir(),
                                    inv.component,
                                    s.index,
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

    /// The block id a rename's target names (`to` is `index/FOLDER/B`), or why it names none.
    fn rename_target(&self, to: &TreePath) -> Result<u16> {
        let name = to.get(2).map(String::as_str).unwrap_or_default();
        let max = self.objects.format().max_id();
        parse_id(name, max).ok_or_else(|| {
            Error::invalid(format!(
                "{name}: not a block id of this world (a decimal number from 0 to {max})"
            ))
        })
    }

    /// `mv index/blocks/A index/blocks/B` (also as `mv` asks it when B exists:
    /// `index/blocks/B/A`) and `mv index/items/A index/items/B`.
    pub(super) fn index_rename(&self, from: &TreePath, to: &TreePath) -> Result<()> {
        let exdev = || index_tree::not_renamed(super::INDEX_RENAMES);
        let parts: Vec<&str> = from.iter().map(String::as_str).collect();
        let at = self.index_at(from, &parts[1..])?;
        let same_folder = |folder: &str| to.len() >= 3 && to[0] == INDEX && to[1] == folder;
        match at {
            At::Block(a) if same_folder("blocks") => {
                // `mv A B` with B an existing folder asks for B/A.
                if to.len() == 4 && to[3] != from[2] || to.len() > 4 {
                    return Err(exdev());
                }
                let b = self.rename_target(to)?;
                if a == b {
                    return Ok(());
                }
                self.rename_block(a, b)
            }
            At::Item(a) if same_folder("items") && to.len() == 3 => {
                let b = self.rename_target(to)?;
                if a == b {
                    return Ok(());
                }
                self.rename_item(a, b)
            }
            _ => Err(exdev()),
        }
    }

    /// Replaces block `a` by `b` in every chunk holding it, committed in one commit of the
    /// chunk store. The chunks come from the answer; when the world changed since it was
    /// made (the game saved just before, not yet seen), nothing is written and the question
    /// is asked again, so a chunk that just gained `a` is renamed too.
    fn rename_block(&self, a: u16, b: u16) -> Result<()> {
        let started = std::time::Instant::now();
        let what = format!("block {a} to {b}");
        // The views other than blocks.cubeset keep their times where they stay the same.
        let keep: Vec<(&'static str, crate::survivalcraft::cache::Render)> =
            super::views_for(self.objects.format())
                .filter(|v| v.name != "blocks.cubeset")
                .map(|v| (v.name, v.render))
                .collect();
        let mut tries = RENAME_TRIES;
        let changed = loop {
            let answer = self.index_answer()?;
            let chunks: Vec<ChunkPos> = answer
                .blocks
                .get(&a)
                .into_iter()
                .flatten()
                .copied()
                .collect();
            log::info!("index: renaming {what} in {} chunks", chunks.len());
            let done = self.objects.modify_chunks(
                (&chunks, answer.version),
                |c| replace_block(c, a, b),
                &keep,
                |done| log::info!("index: renaming {what}: {done} of {} chunks", chunks.len()),
            );
            tries -= 1;
            match done {
                Err(e) if e.errno() == libc::EAGAIN && tries > 0 => {
                    log::info!("index: {}; asking again", e.message());
                }
                other => break other?,
            }
        };
        log::info!(
            "index: renamed {what} in {changed} chunks, committed at once ({:.3} s)",
            started.elapsed().as_secs_f64()
        );
        Ok(())
    }

    /// Replaces item `a` by `b` in every inventory slot the mount shows, in one commit of
    /// Project.xml.
    fn rename_item(&self, a: u16, b: u16) -> Result<()> {
        let layout = self.layout();
        let mut holders_changed = 0;
        self.objects.modify_project(
            |p| {
                let mut xml = p.xml.to_vec();
                for kind in [HolderKind::Player, HolderKind::Container] {
                    for (_, h) in holders(&p.info, kind) {
                        let changed: Vec<Inventory> = h
                            .inventories
                            .iter()
                            .filter(|inv| {
                                inv.slots.iter().any(|s| item_id(s.contents, layout) == a)
                            })
                            .map(|inv| {
                                let mut inv = inv.clone();
                                for s in &mut inv.slots {
                                    if item_id(s.contents, layout) == a {
                                        s.contents = with_item_id(s.contents, layout, b);
                                    }
                                }
                                inv
                            })
                            .collect();
                        if !changed.is_empty() {
                            xml = project::write_inventories(&xml, &h.entity_id, &changed)?;
                            holders_changed += 1;
                        }
                    }
                }
                Ok(xml)
            },
            |info: &ProjectInfo| self.inventory_files(info),
        )?;
        log::info!(
            "index: renamed item {a} to {b} in {holders_changed} inventories, committed in Project.xml"
        );
        Ok(())
    }

    /// What the path `path` below `index/`, at `at`, shows.
    pub(super) fn index_shown(&self, path: &TreePath, at: &At) -> Result<Shown> {
        Ok(match at {
            At::BlockLink(pos) => Shown::Link(chunk_target(*pos)),
            At::Item(id) => Shown::Text(
                self.item_lines()?
                    .remove(id)
                    .ok_or_else(|| not_found(path))?,
            ),
            At::Folder("items") => Shown::Folder(index_tree::items_time(&self.item_lines()?)),
            At::Top => Shown::Folder(base_time()),
            _ => Shown::Folder(index_tree::answer_time(self.index_answer()?.generation)),
        })
    }

    pub(super) fn index_list(
        &self,
        at: &At,
        after: u64,
        sink: &mut dyn FnMut(Entry) -> bool,
    ) -> Result<()> {
        let entries: Vec<Entry> = match at {
            At::Top => index_tree::named(FOLDERS.map(String::from), self.dir_stat(base_time())),
            At::Folder("blocks") => {
                let answer = self.index_answer()?;
                let stat = self.dir_stat(index_tree::answer_time(answer.generation));
                answer
                    .blocks
                    .keys()
                    .map(|id| Entry {
                        name: id.to_string(),
                        cookie: u64::from(*id) + 1,
                        stat: stat.clone(),
                    })
                    .collect()
            }
            At::Folder(_) => index_tree::texts(
                self.item_lines()?
                    .iter()
                    .map(|(id, text)| (u64::from(*id) + 1, id.to_string(), text)),
            ),
            At::Block(id) => {
                let answer = self.index_answer()?;
                let chunks = answer
                    .blocks
                    .get(id)
                    .ok_or_else(|| Error::not_found("no such block"))?;
                // The chunks are in position order, which is their cookies' order.
                let links = chunks.range(chunk_after(after)..).filter_map(|&pos| {
                    Some((chunk_cookie(pos)?, pos.to_string(), chunk_target(pos)))
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
