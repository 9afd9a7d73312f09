//! Whole-world questions of a Survivalcraft world, answered in-process (docs/tree.md "index/"):
//! which chunks hold a block id; and the pure edits of its renames (a block id replaced in a
//! chunk, an item id in an inventory slot).
//!
//! Walking `chunks/*/blocks.cubeset` through the mount costs the kernel's price per file and
//! renders every chunk as text; reading and decoding the chunks in-process costs a fraction
//! of that. So the question is answered by one parallel scan of every stored chunk
//! ([`crate::storekit::scan`], bounded bytes in flight). Nothing is scanned at mount; the first
//! question scans. Items need no scan: every inventory lives in Project.xml, which the tree
//! holds parsed.
//!
//! The answer is kept true without rescanning after our own commits: [`Objects`] tells the
//! index of each chunk commit with its generation before and after ([`ChunkWatch`]), and an
//! answer current before the commit is updated for the committed chunks only. Any other
//! change of the generation (another program changed the world folder, seen by
//! [`Objects::underneath`]) leaves the answer out of date: the next question scans again. An
//! answer larger than the cache budget is used for the question that made it and not kept.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::error::Result;
use crate::storekit::answers::{self, Answers, Start};
use crate::storekit::scan;
use crate::survivalcraft::cache::{ChunkWatch, Objects};
use crate::survivalcraft::codec::chunk::{Cell, Chunk, ChunkPos};
use crate::survivalcraft::views::inventory::ValueLayout;

/// Chunks per page read by a scan (a page also ends at [`PAGE_BYTES`]).
const PAGE_CHUNKS: usize = 64;

/// Stored bytes per page read by a scan, about.
const PAGE_BYTES: usize = 2 << 20;

/// The block ids a chunk's cells hold, ascending.
pub fn block_ids(chunk: &Chunk) -> Vec<u16> {
    let mut seen = [false; 1 << 16];
    for c in chunk.cells() {
        seen[usize::from(c.id)] = true;
    }
    (0..=u16::MAX).filter(|&id| seen[usize::from(id)]).collect()
}

/// `chunk` with block id `from` replaced by `to` in every cell (data and light kept; the
/// stored top height of each changed column follows, as a `blocks.cubeset` edit does);
/// `None` when no cell holds `from`.
pub fn replace_block(chunk: &Chunk, from: u16, to: u16) -> Option<Chunk> {
    if from == to || !chunk.cells().iter().any(|c| c.id == from) {
        return None;
    }
    let cells: Vec<Cell> = chunk
        .cells()
        .iter()
        .map(|&c| {
            if c.id == from {
                Cell { id: to, ..c }
            } else {
                c
            }
        })
        .collect();
    let mut out = Chunk::from_parts(chunk.format(), cells, chunk.columns().to_vec()).ok()?;
    out.follow_tops(chunk);
    Some(out)
}

/// The bits of an inventory slot's contents (a block value) that hold the block id.
fn id_mask(layout: ValueLayout) -> i32 {
    match layout {
        ValueLayout::Bits16 => 0xFF,
        ValueLayout::Bits32 => 0x3FF,
    }
}

/// The block id of an inventory slot's contents.
pub fn item_id(contents: i32, layout: ValueLayout) -> u16 {
    (contents & id_mask(layout)) as u16
}

/// `contents` holding block id `to` instead of its own (data and every other bit kept).
pub fn with_item_id(contents: i32, layout: ValueLayout, to: u16) -> i32 {
    (contents & !id_mask(layout)) | (i32::from(to) & id_mask(layout))
}

/// The block id a file name of `index/blocks/` or `index/items/` names: a decimal number
/// written as the mount writes it (no sign, no leading zero) of at most `max`.
pub fn parse_id(name: &str, max: u16) -> Option<u16> {
    let id: u16 = name.parse().ok()?;
    (id.to_string() == name && id <= max).then_some(id)
}

/// The kept answer: block id → the chunks holding it.
#[derive(Default, Clone)]
pub struct Answer {
    pub blocks: BTreeMap<u16, BTreeSet<ChunkPos>>,
    /// Chunks that do not decode (they hold nothing in the answer) → why.
    pub broken: BTreeMap<ChunkPos, String>,
    /// Changes whenever the answer does: the folders of `index/` show it in their mtime.
    pub generation: u64,
    /// The [`Objects::generation`] the answer is true for: a change made from it (a
    /// rename) is refused when the world changed since ([`Objects::modify_chunks`]).
    pub version: u64,
}

impl Answer {
    fn add(&mut self, pos: ChunkPos, ids: &[u16]) {
        for &id in ids {
            self.blocks.entry(id).or_default().insert(pos);
        }
    }

    /// Forgets what the chunk at `pos` contributed.
    fn remove(&mut self, pos: ChunkPos) {
        self.broken.remove(&pos);
        self.blocks.retain(|_, set| {
            set.remove(&pos);
            !set.is_empty()
        });
    }

    /// About how many bytes the answer holds.
    pub fn weight(&self) -> usize {
        const ENTRY: usize = 48;
        let blocks: usize = self.blocks.values().map(|s| ENTRY * (1 + s.len())).sum();
        let broken: usize = self.broken.values().map(|r| r.len() + ENTRY).sum();
        blocks + broken
    }
}

/// The whole-world questions of one world.
pub struct Index {
    answers: Answers<Answer>,
    budget: usize,
}

impl answers::Answer for Answer {
    fn stamp(&mut self, version: u64, generation: u64) {
        self.version = version;
        self.generation = generation;
    }
}

/// A chunk a scan read: its position, and why its bytes could not be read.
type Read = (ChunkPos, Option<String>);

/// Scans every chunk of `objects` into a new answer.
fn scan_all(objects: &Objects) -> Result<Answer> {
    let positions = objects.sorted_chunks()?;
    let format = objects.format();
    let mut next = 0;
    let pages = || -> Result<Option<scan::Page<Read>>> {
        let mut page = Vec::new();
        let mut bytes = 0;
        while let Some(&pos) = positions.get(next) {
            if page.len() >= PAGE_CHUNKS || bytes >= PAGE_BYTES {
                break;
            }
            next += 1;
            match objects.read_raw(pos) {
                Ok(raw) => {
                    bytes += raw.len();
                    page.push(((pos, None), raw));
                }
                Err(e) => page.push(((pos, Some(e.to_string())), Vec::new())),
            }
        }
        Ok((!page.is_empty()).then_some(page))
    };
    let decode = |(pos, unreadable): Read, raw: Vec<u8>| {
        let ids = match unreadable {
            Some(why) => Err(why),
            None => crate::survivalcraft::codec::decode_chunk(format, &raw)
                .map(|c| block_ids(&c))
                .map_err(|e| e.to_string()),
        };
        (pos, ids)
    };
    let mut answer = Answer::default();
    scan::run(
        scan::workers(),
        scan::SCAN_BYTES,
        pages,
        decode,
        |(pos, ids)| match ids {
            Ok(ids) => answer.add(pos, &ids),
            Err(why) => {
                answer.broken.insert(pos, why);
            }
        },
    )?;
    for (pos, why) in &answer.broken {
        log::warn!("index: chunk {pos} does not decode ({why}); it holds nothing in index/");
    }
    Ok(answer)
}

impl Index {
    /// The index of `objects`, keeping answers up to `budget` bytes. Nothing is scanned yet.
    pub fn new(objects: &Objects, budget: usize) -> Arc<Index> {
        let index = Arc::new(Index {
            answers: Answers::default(),
            budget,
        });
        objects.watch(Arc::downgrade(&index) as std::sync::Weak<dyn ChunkWatch>);
        index
    }

    /// How many scans ran so far.
    pub fn scans(&self) -> u64 {
        self.answers.scans()
    }

    /// The answer, true for the world as stored now (looking first whether another program
    /// changed it, at most every [`crate::survivalcraft::cache::REFRESH_INTERVAL_MS`]).
    pub fn answer(&self, objects: &Objects) -> Result<Arc<Answer>> {
        objects.underneath();
        self.answers.answer(
            "the world's chunks",
            || Ok((objects.generation(), ())),
            |kept| match kept {
                Some(answer) => Start::Answered(answer.clone()),
                None => Start::From(Answer::default()),
            },
            |answer, ()| {
                *answer = scan_all(objects)?;
                Ok(())
            },
            || Ok(objects.generation()),
            |answer| answers::fits(answer.weight(), self.budget),
        )
    }
}

impl ChunkWatch for Index {
    fn committed(&self, before: u64, after: u64, chunks: &[(ChunkPos, Vec<u16>)]) {
        self.answers.committed(before, after, |answer| {
            for (pos, ids) in chunks {
                answer.remove(*pos);
                answer.add(*pos, ids);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::survivalcraft::codec::format::TerrainFormat;

    #[test]
    fn a_block_is_replaced_keeping_data_and_light_and_tops_follow() {
        let mut c = Chunk::empty(TerrainFormat::Chunks32h);
        let cell = |id, data| Cell { id, light: 7, data };
        c.set_cell(1, 10, 2, cell(45, 3)).unwrap();
        c.set_cell(1, 20, 2, cell(8, 0)).unwrap();
        c.set_cell(3, 5, 3, cell(45, 0)).unwrap();
        assert_eq!(block_ids(&c), vec![0, 8, 45]);
        assert!(replace_block(&c, 46, 5).is_none());
        let r = replace_block(&c, 45, 64).unwrap();
        assert_eq!(r.cell(1, 10, 2), Some(cell(64, 3)));
        assert_eq!(r.cell(3, 5, 3), Some(cell(64, 0)));
        assert_eq!(r.cell(1, 20, 2), Some(cell(8, 0)));
        assert_eq!(block_ids(&r), vec![0, 8, 64]);
        // The top of a changed column follows its cells; the others keep theirs.
        let air = replace_block(&c, 45, 0).unwrap();
        assert_eq!(air.column(1, 2).unwrap().top, 20);
        assert_eq!(air.column(0, 0).unwrap().top, 0);
    }

    #[test]
    fn item_ids_are_replaced_keeping_the_other_bits() {
        let v = 45 | (5 << 14);
        assert_eq!(item_id(v, ValueLayout::Bits32), 45);
        assert_eq!(with_item_id(v, ValueLayout::Bits32, 64), 64 | (5 << 14));
        let v16 = 45 | (3 << 12);
        assert_eq!(item_id(v16, ValueLayout::Bits16), 45);
        assert_eq!(with_item_id(v16, ValueLayout::Bits16, 200), 200 | (3 << 12));
    }

    #[test]
    fn ids_are_canonical_decimal_numbers_within_the_format() {
        assert_eq!(parse_id("45", 1023), Some(45));
        assert_eq!(parse_id("0", 1023), Some(0));
        for bad in ["045", "+45", "-1", "1024", "", "4 5", "0x2d", "Chest"] {
            assert_eq!(parse_id(bad, 1023), None, "{bad}");
        }
        assert_eq!(parse_id("256", 255), None);
    }
}
