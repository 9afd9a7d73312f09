//! Whole-world questions of a Terrarum disk, answered in-process (docs/tree.md "index/"): which
//! chunk files hold a tile, which inventory slots hold an item.
//!
//! Walking `chunks/*/*.cubeset` through the mount renders every chunk as text at the
//! kernel's price per file; decompressing the chunk entries in-process costs a fraction of
//! that. So a question is answered by one parallel scan of the disk's entries of its kind
//! ([`crate::storekit::scan`], bounded bytes in flight): the chunk entries for tiles, entry -1
//! and the actor entries for items. Nothing is scanned at mount. Tiles are kept by number
//! and named at each question from the world JSON, so an edit of `tileNumberToNameMap`
//! leaves the answer true.
//!
//! The answer is kept true without rescanning after our own commits: the tree gives every
//! commit's changes to [`Index::committed`] with its generation before and after, and an
//! answer current before the commit is updated for the changed entries only. Another
//! program's change of the disk (the tree reloads it, a new generation) leaves the answer
//! out of date: the next question scans again. An answer larger than the cache budget is
//! used for the question that made it and not kept.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::storekit::answers::{self, Answers, Start};
use crate::storekit::scan;
use crate::tvda::codec::chunk::{decode_chunk, parse_chunk_entry_id, Layer};
use crate::tvda::store::tvda::Change;
use crate::tvda::views::inventory::item_pairs;
use crate::tvda::views::names::ACTOR_IDS;

/// Entries per page read by a scan.
const PAGE_ENTRIES: usize = 64;

/// The kinds of question a scan answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Tiles,
    Items,
}

/// Whether entry `id` holds facts of `kind`: chunks hold tiles; entry -1 and the actors
/// hold inventories.
pub fn holds(kind: Kind, id: i64) -> bool {
    match kind {
        Kind::Tiles => chunk_of(id).is_some(),
        Kind::Items => id == -1 || ACTOR_IDS.contains(&id),
    }
}

/// The layer and chunk number of a chunk entry.
pub fn chunk_of(id: i64) -> Option<(Layer, u32)> {
    let (layer, no) = parse_chunk_entry_id(id)?;
    Some((Layer::from_index(layer)?, no))
}

/// One item of an inventory: the entry holding it, its place in the item list (from 1) and
/// its quantity.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Slot {
    pub entry: i64,
    pub slot: u32,
    pub qty: i64,
}

/// What an entry contributes to the answer of one kind.
enum Facts {
    /// The tile numbers a chunk holds.
    Tiles(Vec<u16>),
    /// The items of an inventory, in list order.
    Items(Vec<(String, i64)>),
}

/// The facts of entry `id` of `kind` stored as `stored`.
fn facts(kind: Kind, id: i64, stored: &[u8]) -> Result<Facts> {
    match kind {
        Kind::Tiles => {
            let (layer, _) = chunk_of(id).ok_or_else(|| Error::corrupt("not a chunk"))?;
            let (_, tiles) = decode_chunk(layer, stored)?;
            let mut numbers: Vec<u16> = tiles.iter().map(|t| t.number).collect();
            numbers.sort_unstable();
            numbers.dedup();
            Ok(Facts::Tiles(numbers))
        }
        Kind::Items => Ok(Facts::Items(item_pairs(stored)?.unwrap_or_default())),
    }
}

/// The answers of the kinds scanned so far.
#[derive(Default, Clone)]
pub struct Answer {
    /// Tile number → the chunk entries holding it (layer, chunk number).
    pub tiles: Option<BTreeMap<u16, BTreeSet<(Layer, u32)>>>,
    /// Item ID → the inventory slots holding it.
    pub items: Option<BTreeMap<String, BTreeSet<Slot>>>,
    /// Entries that do not decode → why (they hold nothing in the answer).
    pub broken: BTreeMap<i64, String>,
    /// Changes whenever the answer does: the folders of `index/` show it in their mtime.
    pub generation: u64,
    /// The disk's generation ([`EntrySource::generation`]) the answer is true for: a rename
    /// made from it is refused when the disk changed since.
    pub version: u64,
}

impl Answer {
    fn has(&self, kind: Kind) -> bool {
        match kind {
            Kind::Tiles => self.tiles.is_some(),
            Kind::Items => self.items.is_some(),
        }
    }

    fn start(&mut self, kind: Kind) {
        match kind {
            Kind::Tiles => self.tiles = Some(BTreeMap::new()),
            Kind::Items => self.items = Some(BTreeMap::new()),
        }
    }

    fn add(&mut self, id: i64, facts: Facts) {
        match facts {
            Facts::Tiles(numbers) => {
                if let (Some(tiles), Some(chunk)) = (&mut self.tiles, chunk_of(id)) {
                    for n in numbers {
                        tiles.entry(n).or_default().insert(chunk);
                    }
                }
            }
            Facts::Items(pairs) => {
                if let Some(items) = &mut self.items {
                    for (i, (item, qty)) in pairs.into_iter().enumerate() {
                        items.entry(item).or_default().insert(Slot {
                            entry: id,
                            slot: i as u32 + 1,
                            qty,
                        });
                    }
                }
            }
        }
    }

    /// Forgets what entry `id` contributed.
    fn remove(&mut self, id: i64) {
        self.broken.remove(&id);
        if let (Some(tiles), Some(chunk)) = (&mut self.tiles, chunk_of(id)) {
            tiles.retain(|_, set| {
                set.remove(&chunk);
                !set.is_empty()
            });
        }
        if let Some(items) = &mut self.items {
            items.retain(|_, slots| {
                slots.retain(|s| s.entry != id);
                !slots.is_empty()
            });
        }
    }

    /// Takes entry `id` as now stored as `stored` (`None`: removed).
    fn update(&mut self, id: i64, stored: Option<&[u8]>) {
        self.remove(id);
        let Some(stored) = stored else { return };
        for kind in [Kind::Tiles, Kind::Items] {
            if self.has(kind) && holds(kind, id) {
                match facts(kind, id, stored) {
                    Ok(f) => self.add(id, f),
                    Err(e) => {
                        self.broken.insert(id, e.to_string());
                    }
                }
            }
        }
    }

    /// About how many bytes the answer holds.
    pub fn weight(&self) -> usize {
        const ENTRY: usize = 48;
        let tiles: usize = self
            .tiles
            .iter()
            .flatten()
            .map(|(_, s)| ENTRY * (1 + s.len()))
            .sum();
        let items: usize = self
            .items
            .iter()
            .flatten()
            .map(|(n, s)| n.len() + ENTRY * (1 + s.len()))
            .sum();
        let broken: usize = self.broken.values().map(|r| r.len() + ENTRY).sum();
        tiles + items + broken
    }
}

/// Reads the stored bytes of entries for a scan (the tree's disk, under its lock).
pub trait EntrySource: Sync {
    /// The generation of the disk (see [`Index`]) and the IDs of its live file entries.
    fn entry_ids(&self) -> Result<(u64, Vec<i64>)>;
    /// The stored bytes of each of `ids` (or why one cannot be read).
    fn read_entries(&self, ids: &[i64]) -> Result<Vec<(i64, Result<Vec<u8>>)>>;
    /// The generation of the disk now.
    fn generation(&self) -> Result<u64>;
}

/// A scanned entry: its ID, and why its bytes could not be read.
type Read = (i64, Option<String>);

/// Scans the entries of `ids` for `kind` into `answer`.
fn scan_into(source: &dyn EntrySource, kind: Kind, ids: &[i64], answer: &mut Answer) -> Result<()> {
    answer.start(kind);
    let mut pages = ids.chunks(PAGE_ENTRIES);
    let next_page = || -> Result<Option<scan::Page<Read>>> {
        let Some(page) = pages.next() else {
            return Ok(None);
        };
        Ok(Some(
            source
                .read_entries(page)?
                .into_iter()
                .map(|(id, bytes)| match bytes {
                    Ok(b) => ((id, None), b),
                    Err(e) => ((id, Some(e.to_string())), Vec::new()),
                })
                .collect(),
        ))
    };
    let decode = |(id, unreadable): Read, stored: Vec<u8>| {
        let f = match unreadable {
            Some(why) => Err(why),
            None => facts(kind, id, &stored).map_err(|e| e.to_string()),
        };
        (id, f)
    };
    scan::run(
        scan::workers(),
        scan::SCAN_BYTES,
        next_page,
        decode,
        |(id, f)| match f {
            Ok(f) => answer.add(id, f),
            Err(why) => {
                log::warn!("index: entry {id} does not decode ({why}); it holds nothing in index/");
                answer.broken.insert(id, why);
            }
        },
    )?;
    Ok(())
}

/// The whole-world questions of one disk.
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

impl Index {
    /// An index keeping answers up to `budget` bytes. Nothing is scanned yet.
    pub fn new(budget: usize) -> Index {
        Index {
            answers: Answers::default(),
            budget,
        }
    }

    /// How many scans ran so far.
    pub fn scans(&self) -> u64 {
        self.answers.scans()
    }

    /// The answer holding `kind`, true for the disk as stored now.
    pub fn answer(&self, source: &dyn EntrySource, kind: Kind) -> Result<Arc<Answer>> {
        self.answers.answer(
            "the disk's entries",
            || source.entry_ids(),
            |kept| match kept {
                Some(answer) if answer.has(kind) => Start::Answered(answer.clone()),
                Some(answer) => Start::From(Answer::clone(answer)),
                None => Start::From(Answer::default()),
            },
            |answer, ids: Vec<i64>| {
                let ids: Vec<i64> = ids.into_iter().filter(|&id| holds(kind, id)).collect();
                scan_into(source, kind, &ids, answer)
            },
            || source.generation(),
            |answer| answers::fits(answer.weight(), self.budget),
        )
    }

    /// Our commit of `changes` took the disk from generation `before` to `after`: an
    /// answer true before it is updated for the changed entries, any other dropped.
    pub fn committed(&self, before: u64, after: u64, changes: &[Change]) {
        self.answers.committed(before, after, |answer| {
            for change in changes {
                match change {
                    Change::Put { id, data } => answer.update(*id, Some(data)),
                    Change::Remove { id } => answer.update(*id, None),
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tvda::codec::chunk::{chunk_entry_id, encode_chunk, Tile, CHUNK_TILES};
    use crate::tvda::codec::compress::Codec;

    #[test]
    fn entries_hold_the_facts_of_their_kind() {
        let chunk = chunk_entry_id(2, 7).unwrap();
        assert!(holds(Kind::Tiles, chunk) && !holds(Kind::Items, chunk));
        assert!(holds(Kind::Items, -1) && holds(Kind::Items, 0x1000_0000));
        assert!(!holds(Kind::Tiles, -1) && !holds(Kind::Items, -4));
        let mut tiles = vec![Tile { number: 5, meta: 1 }; CHUNK_TILES];
        tiles[3].number = 2;
        let stored = encode_chunk(Layer::Ores, Codec::Zstd, &tiles).unwrap();
        let mut a = Answer::default();
        a.start(Kind::Tiles);
        a.update(chunk, Some(&stored));
        let t = a.tiles.as_ref().unwrap();
        assert_eq!(t.keys().copied().collect::<Vec<_>>(), vec![2, 5]);
        assert!(t[&5].contains(&(Layer::Ores, 7)));
        a.update(chunk, Some(b"not a chunk"));
        assert!(a.tiles.as_ref().unwrap().is_empty());
        assert!(a.broken.contains_key(&chunk));
        a.update(chunk, None);
        assert!(a.broken.is_empty());
    }
}
