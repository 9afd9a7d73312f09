//! A map with a read-only seed database: `readonly_backend` in `world.mt`.
//!
//! What the engine does (`ServerMap::ServerMap` and `ServerMap::loadBlock` in
//! `src/map.cpp`, 5.6.1): when `world.mt` sets `readonly_backend`, a second database of that
//! backend is opened in `WORLD/readonly/` (`readonly/map.sqlite`, `readonly/map.db`). A block
//! is loaded from the main map; only when the main map has no data for it (no row, or an
//! empty one) is it loaded from the read-only one. The engine never writes the read-only
//! database: a block it loaded from there and changed is saved to the main map. Its
//! `listAllLoadableBlocks` lists both.
//!
//! So here: [`SeededMap::get`] answers as `loadBlock`, the listing is the union of both (the
//! main map's block where both have one), and a block only the seed holds is read-only: a
//! commit touching one fails with `EROFS`, writing nothing. Both databases must list in the
//! same key order (the same kind of key: `sqlite3` with `sqlite3` of the same schema,
//! `leveldb` with `leveldb`); the listing merges two bounded pages at a time.

use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::luanti::codec::block::BlockPos;
use crate::luanti::store::map::{AxisOrder, MapBackend, Select};
use crate::luanti::store::map::{Change, Listed, MapStore, Produce, Stream, LIST_BYTES};

/// A main map over a read-only seed map.
pub struct SeededMap {
    main: Box<MapStore>,
    seed: Box<MapStore>,
    /// Where the seed is, for messages.
    seed_name: String,
}

/// Positions whose keys tell whether two stores list in the same order.
const PROBES: [BlockPos; 4] = [
    BlockPos { x: 0, y: 0, z: 0 },
    BlockPos { x: -1, y: 2, z: -3 },
    BlockPos { x: 5, y: -7, z: 9 },
    BlockPos {
        x: -2048,
        y: 2047,
        z: 100,
    },
];

/// A listed block of the seed, marked as such.
fn seeded(mut l: Listed) -> Listed {
    l.from_seed = true;
    l
}

fn has_data(data: &Option<Vec<u8>>) -> bool {
    data.as_ref().is_some_and(|d| !d.is_empty())
}

impl SeededMap {
    /// `main` over `seed`; fails when the two do not list in the same order.
    pub fn new(main: MapStore, seed: MapStore, seed_name: String) -> Result<SeededMap> {
        if PROBES.iter().any(|&p| main.key_of(p) != seed.key_of(p)) {
            return Err(Error::unsupported(format!(
                "the read-only map {seed_name} keeps its blocks in another order than the main \
                 map; worldfs shows a readonly_backend only of the main map's kind"
            )));
        }
        Ok(SeededMap {
            main: Box::new(main),
            seed: Box::new(seed),
            seed_name,
        })
    }
}

impl SeededMap {
    /// The error of a change of a block read from the read-only map.
    fn seed_block(&self, pos: BlockPos) -> Error {
        Error::read_only(format!(
            "block {},{},{} is read from the read-only map {} (readonly_backend): the engine \
             never writes that one",
            pos.x, pos.y, pos.z, self.seed_name
        ))
    }
}

impl MapBackend for SeededMap {
    /// `key: value` lines for `worldfs info`.
    fn describe(&self) -> Vec<(&'static str, String)> {
        let mut lines = self.main.describe();
        for (k, v) in self.seed.describe() {
            if k == "map" {
                lines.push(("readonly map", v));
            }
        }
        lines
    }

    /// The main map's identity.
    fn identity(&self) -> PathBuf {
        self.main.identity()
    }

    /// The block as the engine loads it: the main map's, else the seed's.
    fn get(&self, pos: BlockPos) -> Result<Option<Vec<u8>>> {
        let main = self.main.get(pos)?;
        if has_data(&main) {
            return Ok(main);
        }
        let seed = self.seed.get(pos)?;
        Ok(if has_data(&seed) { seed } else { main })
    }

    /// As [`SeededMap::get`], for showing a block (see [`MapBackend::read_ahead`]).
    fn read_ahead(&self, pos: BlockPos) -> Result<Option<Vec<u8>>> {
        let main = self.main.read_ahead(pos)?;
        if has_data(&main) {
            return Ok(main);
        }
        let seed = self.seed.read_ahead(pos)?;
        Ok(if has_data(&seed) { seed } else { main })
    }

    /// Whether `pos` is shown from the seed (and so cannot be changed).
    fn seeded_at(&self, pos: BlockPos) -> Result<bool> {
        Ok(!has_data(&self.main.get(pos)?) && has_data(&self.seed.get(pos)?))
    }

    fn check_writable(&self, pos: BlockPos) -> Result<()> {
        if self.seeded_at(pos)? {
            return Err(self.seed_block(pos));
        }
        Ok(())
    }

    /// The main map's listing key.
    fn key_of(&self, pos: BlockPos) -> u64 {
        self.main.key_of(pos)
    }

    fn axis_order(&self) -> AxisOrder {
        self.main.axis_order()
    }

    /// Up to `limit` blocks of either map after `after`, in key order, the main map's where
    /// both hold one. Each round reads one bounded page of each and keeps only what both
    /// pages cover, so a page of the result is full unless the listing ends.
    fn list(&self, after: u64, limit: usize, with_data: bool) -> Result<Vec<Listed>> {
        let mut out: Vec<Listed> = Vec::new();
        let mut bytes = 0usize;
        let mut cursor = after;
        while out.len() < limit && bytes < LIST_BYTES {
            let want = limit - out.len();
            let a = self.main.list(cursor, want, with_data)?;
            let b = self.seed.list(cursor, want, with_data)?;
            let end = |page: &[Listed]| {
                let last = crate::luanti::store::map::is_last_page(page, want);
                (!last).then(|| page.last().map_or(u64::MAX, |l| l.key))
            };
            let cut = [end(&a), end(&b)].into_iter().flatten().min();
            let both_ended = cut.is_none();
            let cut = cut.unwrap_or(u64::MAX);
            let mut merged: Vec<Listed> = Vec::new();
            let (mut a, mut b) = (a.into_iter().peekable(), b.into_iter().peekable());
            loop {
                let next = match (a.peek(), b.peek()) {
                    (Some(x), Some(y)) if x.key == y.key => {
                        let x = a.next();
                        let y = b.next();
                        match (x, y) {
                            (Some(x), Some(y)) if with_data && !has_data(&x.data) => {
                                Some(seeded(y))
                            }
                            (Some(x), _) => Some(x),
                            _ => None,
                        }
                    }
                    (Some(x), Some(y)) if x.key < y.key => a.next(),
                    (Some(_), Some(_)) => b.next().map(seeded),
                    (Some(_), None) => a.next(),
                    (None, Some(_)) => b.next().map(seeded),
                    (None, None) => None,
                };
                match next {
                    Some(l) if l.key <= cut => merged.push(l),
                    _ => break,
                }
            }
            let Some(last) = merged.last().map(|l| l.key) else {
                break;
            };
            cursor = last;
            for l in merged {
                if out.len() >= limit || bytes >= LIST_BYTES {
                    break;
                }
                bytes += l.data.as_ref().map_or(0, Vec::len);
                out.push(l);
            }
            if both_ended {
                break;
            }
        }
        Ok(out)
    }

    /// Both maps' entries the engine never loads.
    fn out_of_range(&self) -> Result<u64> {
        Ok(self.main.out_of_range()? + self.seed.out_of_range()?)
    }

    /// Both maps' counts added (a block in both counts twice: this is for progress bars).
    fn count(&self) -> Result<u64> {
        Ok(self.main.count()? + self.seed.count()?)
    }

    /// Changes when either map changed.
    fn data_version(&self) -> Result<i64> {
        Ok(self.main.data_version()? ^ self.seed.data_version()?.rotate_left(32))
    }

    /// As [`MapBackend::others_version`], of both maps (each drops what it read ahead when its
    /// own token moves).
    fn others_version(&self) -> Result<Option<i64>> {
        let main = self.main.others_version()?;
        let seed = self.seed.others_version()?;
        Ok(main.zip(seed).map(|(m, s)| m ^ s.rotate_left(32)))
    }

    /// Whether the main map refuses every change.
    fn read_only(&self) -> bool {
        self.main.read_only()
    }

    /// A streamed commit of the main map (see [`MapBackend::commit_stream`]): a block read
    /// from the read-only map cannot be put (the commit fails with `EROFS`, nothing
    /// changed); reads see the main map, then the read-only one.
    fn commit_stream(&self, produce: Produce<'_>) -> Result<()> {
        struct Over<'a> {
            map: &'a SeededMap,
            main: &'a mut dyn Stream,
        }
        impl Stream for Over<'_> {
            fn get(&mut self, pos: BlockPos) -> Result<Option<Vec<u8>>> {
                let main = self.main.get(pos)?;
                if has_data(&main) {
                    return Ok(main);
                }
                let seed = self.map.seed.get(pos)?;
                Ok(if has_data(&seed) { seed } else { main })
            }
            fn put(&mut self, pos: BlockPos, data: &[u8]) -> Result<()> {
                if !has_data(&self.main.get(pos)?) && has_data(&self.map.seed.get(pos)?) {
                    return Err(self.map.seed_block(pos));
                }
                self.main.put(pos, data)
            }
        }
        self.main
            .commit_stream(Box::new(|main| produce(&mut Over { map: self, main })))
    }

    /// Commits to the main map; a change of a block only the seed holds fails with `EROFS`
    /// before anything is written.
    fn commit_selected(&self, changes: Vec<Change>, select: Select<'_>) -> Result<Vec<Change>> {
        for (pos, _) in &changes {
            if self.seeded_at(*pos)? {
                return Err(self.seed_block(*pos));
            }
        }
        MapBackend::commit_selected(&**self.main, changes, select)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(dir: &std::path::Path, name: &str, blocks: &[Change]) -> std::path::PathBuf {
        let path = dir.join(name);
        rusqlite::Connection::open(&path)
            .and_then(|c| c.execute("CREATE TABLE blocks (pos INT PRIMARY KEY, data BLOB)", []))
            .expect("a map database");
        MapStore::open(&path, false)
            .expect("writer")
            .commit(blocks)
            .expect("commit");
        path
    }

    /// What was read ahead of either map is dropped once the token shows another program's
    /// commit to it; our own commits leave the token as it is.
    #[test]
    fn another_writers_commit_to_either_map_is_read_afresh() {
        let dir = tempfile::tempdir().expect("temp dir");
        let at = |x| BlockPos { x, y: 0, z: 0 };
        let blocks: Vec<Change> = (0..8).map(|x| (at(x), Some(vec![x as u8]))).collect();
        let main = map(dir.path(), "main.sqlite", &blocks[..4]);
        let seed = map(dir.path(), "seed.sqlite", &blocks[4..]);
        let store = MapStore::new(
            SeededMap::new(
                MapStore::open(&main, false).expect("main"),
                MapStore::open(&seed, true).expect("seed"),
                "seed".into(),
            )
            .expect("seeded"),
        );
        let token = store.others_version().expect("token");
        store
            .commit(&[(at(1), Some(vec![11]))])
            .expect("our commit");
        assert_eq!(store.others_version().expect("token"), token);
        for x in 0..8 {
            store.read_ahead(at(x)).expect("read ahead");
        }
        for (path, x) in [(&main, 2), (&seed, 6)] {
            MapStore::open(path, false)
                .expect("another writer")
                .commit(&[(at(x), Some(vec![99]))])
                .expect("outside commit");
            assert_ne!(store.others_version().expect("token"), token);
            assert_eq!(store.read_ahead(at(x)).expect("read"), Some(vec![99]));
        }
    }
}
