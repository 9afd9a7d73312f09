//! `map.db`: the block store of a Luanti world kept in LevelDB (`backend = leveldb`).
//!
//! What the engine does (`src/database/database-leveldb.cpp`, 5.6.1 and still today): one
//! LevelDB database in `WORLD/map.db`, opened with `create_if_missing`; a block's key is
//! `i64tos(getBlockAsInteger(pos))`, the decimal text of the same integer `map.sqlite`'s
//! `pos` column holds, and its value the serialized block, written with `Put` and removed
//! with `Delete`. `listAllLoadableBlocks` parses every key with `stoi64`, but `loadBlock`
//! only ever asks for the canonical decimal text, so a key that is not exactly that text of
//! a position in range (`007`, `12abc`, anything else) is never loaded: such keys are left
//! out of the listing and counted in [`LevelDbMap::out_of_range`], as `map.sqlite`'s rows
//! of impossible positions are. The engine never read any other form of key.
//!
//! Commits: every commit is one LevelDB write batch, synced, so a crash leaves each block
//! of it old or new together. A streamed commit (a rename of `index/`) fills one batch too:
//! LevelDB has no larger atomic unit, and a batch is kept in memory until it is written.
//!
//! Listing order: LevelDB iterates its keys bytewise, so `"-1" < "-10" < "0" < "1" <
//! "10" < "2"`. The listing follows that order, never sorting anything itself, and its
//! resume keys must follow it too: a key's text has at most 12 characters out of `-0-9`, so
//! each character packed as a nibble (`-` = 1, `0`…`9` = 2…11, a missing character 0)
//! gives a `u64` in the same order as the text ([`listing_key`]); a page seeks the
//! iterator to the text of its `after` and reads at most `limit` keys (and
//! [`LIST_BYTES`] of values): memory is bounded whatever the
//! size of the map.
//!
//! One process: LevelDB lets one process open a database at a time (its `LOCK` file), so a
//! mount of a world whose server runs fails clearly, naming that file, and while a mount
//! holds the database no other writer can change it ([`LevelDbMap::data_version`] never
//! changes). LevelDB has no read-only mode: a read-only mount changes no block, but opening
//! the database lets LevelDB replay its log into a table, as the engine's open does.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use crate::error::{Error, Result};
use crate::luanti::codec::block::BlockPos;
use crate::luanti::store::leveldb::{may_create, unfinished_creation, Batch, Db};
use crate::luanti::store::map::{block_key, parse_block_key};
use crate::luanti::store::map::{
    too_large, Change, Listed, Produce, Stream, LIST_BYTES, MAX_STORED,
};
use crate::luanti::store::map::{MapBackend, Select};

/// The listing key of a block key's text: its characters as nibbles, in the same order.
/// `None` for a text that is no block key (longer than 12 characters or other characters).
fn listing_key(text: &[u8]) -> Option<u64> {
    if text.is_empty() || text.len() > 12 {
        return None;
    }
    let mut key = 0u64;
    for i in 0..12 {
        let nibble = match text.get(i) {
            None => 0,
            Some(b'-') => 1,
            Some(c @ b'0'..=b'9') => u64::from(c - b'0') + 2,
            Some(_) => return None,
        };
        key = (key << 4) | nibble;
    }
    Some(key)
}

/// The text a listing key was made of.
fn listing_text(key: u64) -> Vec<u8> {
    (0..12)
        .rev()
        .map(|i| (key >> (4 * i)) & 0xF)
        .take_while(|&n| n != 0)
        .map(|n| if n == 1 { b'-' } else { b'0' + (n - 2) as u8 })
        .collect()
}

/// An open `map.db`.
pub struct LevelDbMap {
    path: PathBuf,
    read_only: bool,
    /// Unset while the database does not exist: the first commit creates it, as the engine
    /// would on start.
    db: OnceLock<Db>,
    /// Held through a commit, so what its `select` reads stays true until the write.
    writer: Mutex<()>,
}

impl LevelDbMap {
    /// Opens `WORLD/map.db`. A database another process holds fails naming its `LOCK`. A
    /// folder a killed creation left (see [`unfinished_creation`]) is no database yet, as
    /// none is: the first commit creates it, as the engine's start would.
    pub fn open(path: &Path, read_only: bool) -> Result<LevelDbMap> {
        let store = LevelDbMap {
            path: path.to_path_buf(),
            read_only,
            db: OnceLock::new(),
            writer: Mutex::new(()),
        };
        if std::fs::symlink_metadata(path).is_ok() && !unfinished_creation(path) {
            let _ = store.db.set(Db::open(path, false)?);
        }
        Ok(store)
    }

    /// The database folder.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl MapBackend for LevelDbMap {
    fn identity(&self) -> PathBuf {
        self.path().to_path_buf()
    }
    /// `key: value` lines for `worldfs info`.
    fn describe(&self) -> Vec<(&'static str, String)> {
        vec![
            ("format", "Luanti world (LevelDB map.db)".to_string()),
            ("map", self.path.display().to_string()),
        ]
    }

    /// The stored blob of one block.
    fn get(&self, pos: BlockPos) -> Result<Option<Vec<u8>>> {
        let Some(db) = self.db.get() else {
            return Ok(None);
        };
        let data = db.get(block_key(pos).as_bytes())?;
        match data {
            Some(d) if d.len() > MAX_STORED => Err(too_large(pos, Some(d.len() as u64))),
            other => Ok(other),
        }
    }

    /// The listing key of a position.
    fn key_of(&self, pos: BlockPos) -> u64 {
        listing_key(block_key(pos).as_bytes()).unwrap_or(0)
    }

    /// Up to `limit` blocks with a listing key greater than `after` (0 = from the start),
    /// in key order, with their blobs when `with_data` (`None` for one longer than
    /// [`MAX_STORED`]); a page stops early past [`LIST_BYTES`] of data.
    fn list(&self, after: u64, limit: usize, with_data: bool) -> Result<Vec<Listed>> {
        let Some(db) = self.db.get() else {
            return Ok(Vec::new());
        };
        let start = (after != 0).then(|| listing_text(after));
        let (mut out, mut bytes) = (Vec::new(), 0usize);
        db.scan(start.as_deref(), with_data, |key, value| {
            if out.len() >= limit || bytes >= LIST_BYTES {
                return Ok(false);
            }
            if start.as_deref() == Some(key) {
                return Ok(true);
            }
            let (Some(pos), Some(k)) = (parse_block_key(key), listing_key(key)) else {
                return Ok(true);
            };
            let data = value.and_then(|v| (v.len() <= MAX_STORED).then(|| v.to_vec()));
            bytes += data.as_ref().map_or(0, Vec::len);
            out.push(Listed {
                pos,
                key: k,
                data,
                from_seed: false,
            });
            Ok(true)
        })?;
        Ok(out)
    }

    /// The number of keys that are no block the engine can load (left out of listings).
    fn out_of_range(&self) -> Result<u64> {
        let mut n = 0;
        if let Some(db) = self.db.get() {
            db.scan(None, false, |key, _| {
                n += u64::from(parse_block_key(key).is_none());
                Ok(true)
            })?;
        }
        Ok(n)
    }

    /// The number of keys.
    fn count(&self) -> Result<u64> {
        let mut n = 0;
        if let Some(db) = self.db.get() {
            db.scan(None, false, |_, _| {
                n += 1;
                Ok(true)
            })?;
        }
        Ok(n)
    }

    /// Never changes: while we hold the database, no other process can write it.
    fn data_version(&self) -> Result<i64> {
        Ok(0)
    }

    /// Whether the store refuses every change.
    fn read_only(&self) -> bool {
        self.read_only
    }

    /// A streamed commit (see [`MapBackend::commit_stream`]): the blobs put go into one write
    /// batch, applied atomically at the end. LevelDB has no larger atomic unit than a batch,
    /// and a batch lives in memory: it holds a copy of every blob put (as stored, compressed)
    /// until the write. No other process can write the database while we hold it, and no
    /// other commit of ours runs meanwhile.
    ///
    /// [`MapBackend::commit_stream`]: crate::luanti::store::map::MapBackend::commit_stream
    fn commit_stream(&self, produce: Produce<'_>) -> Result<()> {
        if self.read_only {
            return Err(Error::read_only("the mount is read-only"));
        }
        let _guard = crate::error::lock_named(&self.writer, "map store writer")?;
        struct Batched<'a> {
            map: &'a LevelDbMap,
            batch: Batch,
        }
        impl Stream for Batched<'_> {
            fn get(&mut self, pos: BlockPos) -> Result<Option<Vec<u8>>> {
                self.map.get(pos)
            }
            fn put(&mut self, pos: BlockPos, data: &[u8]) -> Result<()> {
                self.batch.put(block_key(pos).as_bytes(), data);
                Ok(())
            }
        }
        let mut batched = Batched {
            map: self,
            batch: Batch::default(),
        };
        produce(&mut batched)?;
        if self.db.get().is_none() {
            let _ = self.db.set(Db::open(&self.path, may_create(&self.path))?);
        }
        let db = self
            .db
            .get()
            .ok_or_else(|| Error::corrupt("map store unavailable"))?;
        db.write_batch(batched.batch)
    }

    /// Commits in one write batch the changes `select` keeps, and returns them; no other
    /// commit runs between `select` and the write.
    fn commit_selected(&self, changes: Vec<Change>, select: Select<'_>) -> Result<Vec<Change>> {
        if self.read_only {
            return Err(Error::read_only("the mount is read-only"));
        }
        let _guard = crate::error::lock_named(&self.writer, "map store writer")?;
        if self.db.get().is_none() {
            let _ = self.db.set(Db::open(&self.path, may_create(&self.path))?);
        }
        let db = self
            .db
            .get()
            .ok_or_else(|| Error::corrupt("map store unavailable"))?;
        let changes = select(changes)?;
        let keys: Vec<String> = changes.iter().map(|(pos, _)| block_key(*pos)).collect();
        let writes: Vec<(&[u8], Option<&[u8]>)> = keys
            .iter()
            .zip(&changes)
            .map(|(k, (_, data))| (k.as_bytes(), data.as_deref()))
            .collect();
        db.write(&writes)?;
        Ok(changes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pos(x: i16, y: i16, z: i16) -> BlockPos {
        BlockPos { x, y, z }
    }

    #[test]
    fn keys_are_the_engines_decimal_integers() {
        assert_eq!(block_key(pos(0, 0, 0)), "0");
        assert_eq!(block_key(pos(-1, 0, 0)), "-1");
        assert_eq!(block_key(pos(1, 2, 3)), "50339841");
        for bad in [
            &b"007"[..],
            b"-0",
            b"12abc",
            b"",
            b" 1",
            b"+1",
            b"99999999999",
        ] {
            assert_eq!(
                parse_block_key(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(parse_block_key(b"50339841"), Some(pos(1, 2, 3)));
    }

    proptest! {
        #[test]
        fn listing_keys_keep_the_order_of_the_text(
            a in (-2048i16..2048, -2048i16..2048, -2048i16..2048),
            b in (-2048i16..2048, -2048i16..2048, -2048i16..2048),
        ) {
            let (ta, tb) = (block_key(pos(a.0, a.1, a.2)), block_key(pos(b.0, b.1, b.2)));
            let (ka, kb) = (listing_key(ta.as_bytes()).unwrap(), listing_key(tb.as_bytes()).unwrap());
            prop_assert_eq!(ta.as_bytes().cmp(tb.as_bytes()), ka.cmp(&kb));
            prop_assert_eq!(listing_text(ka), ta.as_bytes().to_vec());
            prop_assert!(ka != 0);
        }
    }

    /// A creation killed before LevelDB wrote `CURRENT` leaves a folder that is no database
    /// yet: it opens as an empty map and the first commit creates the database. A folder
    /// without `CURRENT` that holds a table is refused, not created over.
    #[test]
    fn a_killed_creation_is_no_database_yet() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("map.db");
        crate::luanti::store::leveldb::tests::killed_creation(&path);
        assert!(may_create(&path) && may_create(&dir.path().join("none.db")));
        let store = LevelDbMap::open(&path, false).expect("opens as no database yet");
        assert_eq!(store.list(0, 10, true).unwrap().len(), 0);
        let block = vec![(pos(1, 2, 3), Some(vec![7u8]))];
        store.commit_selected(block, Box::new(Ok)).unwrap();
        drop(store);
        let again = LevelDbMap::open(&path, true).unwrap();
        assert_eq!(again.get(pos(1, 2, 3)).unwrap(), Some(vec![7u8]));
        drop(again);

        let damaged = dir.path().join("damaged.db");
        std::fs::create_dir(&damaged).unwrap();
        std::fs::write(damaged.join("000005.ldb"), b"a table").unwrap();
        assert!(!unfinished_creation(&damaged) && !may_create(&damaged));
        assert!(
            LevelDbMap::open(&damaged, false).is_err(),
            "damage is an error"
        );
        assert!(
            damaged.join("000005.ldb").exists(),
            "and nothing is created over it"
        );
        let logged = dir.path().join("logged.db");
        std::fs::create_dir(&logged).unwrap();
        std::fs::write(logged.join("000003.log"), b"records").unwrap();
        assert!(!may_create(&logged), "a log with records is data too");
    }

    #[test]
    fn store_list_page_and_delete() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("map.db");
        let store = LevelDbMap::open(&path, false).unwrap();
        assert_eq!(store.list(0, 10, true).unwrap().len(), 0);
        assert!(!path.exists(), "created by the first commit only");
        let blocks: Vec<Change> = [(-3, 1, 2), (0, 0, 0), (5, -7, -1), (0, 1, 0), (-1, 0, 0)]
            .iter()
            .map(|&(x, y, z)| (pos(x, y, z), Some(vec![x as u8, y as u8, z as u8])))
            .collect();
        store.commit_selected(blocks, Box::new(Ok)).unwrap();
        assert_eq!(store.count().unwrap(), 5);
        assert_eq!(store.get(pos(5, -7, -1)).unwrap(), Some(vec![5, 249, 255]));
        assert_eq!(store.get(pos(9, 9, 9)).unwrap(), None);
        let mut seen = Vec::new();
        let mut after = 0;
        loop {
            let page = store.list(after, 2, true).unwrap();
            let Some(last) = page.last() else { break };
            after = last.key;
            for l in &page {
                assert_eq!(store.key_of(l.pos), l.key);
                assert_eq!(l.data, store.get(l.pos).unwrap());
            }
            seen.extend(page.into_iter().map(|l| block_key(l.pos)));
        }
        let mut sorted = seen.clone();
        sorted.sort();
        assert_eq!(seen, sorted, "bytewise order");
        assert_eq!(seen.len(), 5);
        store
            .commit_selected(vec![(pos(0, 0, 0), None)], Box::new(Ok))
            .unwrap();
        assert_eq!(store.count().unwrap(), 4);
        drop(store);
        let ro = LevelDbMap::open(&path, true).unwrap();
        assert_eq!(ro.get(pos(-1, 0, 0)).unwrap(), Some(vec![255, 0, 0]));
        assert_eq!(
            ro.commit_selected(vec![(pos(0, 0, 0), None)], Box::new(Ok))
                .unwrap_err()
                .errno(),
            libc::EROFS
        );
    }

    #[test]
    fn keys_the_engine_never_loads_are_left_out_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("map.db");
        let db = Db::open(&path, true).unwrap();
        db.write(&[
            (b"0", Some(b"a")),
            (b"007", Some(b"b")),
            (b"12abc", Some(b"c")),
            (b"99999999999999", Some(b"d")),
            (b"1", Some(b"e")),
            (b"\xff", Some(b"f")),
        ])
        .unwrap();
        drop(db);
        let store = LevelDbMap::open(&path, true).unwrap();
        for page in [1, 2, 100] {
            let mut got = Vec::new();
            let mut after = 0;
            loop {
                let rows = store.list(after, page, true).unwrap();
                let Some(last) = rows.last() else { break };
                after = last.key;
                got.extend(rows.into_iter().map(|l| (l.pos, l.data)));
            }
            assert_eq!(
                got,
                vec![
                    (pos(0, 0, 0), Some(b"a".to_vec())),
                    (pos(1, 0, 0), Some(b"e".to_vec()))
                ]
            );
        }
        assert_eq!(store.out_of_range().unwrap(), 4);
        assert_eq!(store.count().unwrap(), 6);
    }

    #[test]
    fn a_map_a_running_server_holds_is_refused_naming_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("map.db");
        let held = Db::open(&path, true).unwrap();
        let e = LevelDbMap::open(&path, true).err().unwrap();
        assert_eq!(e.errno(), libc::EBUSY);
        assert!(e.message().contains("map.db/LOCK"), "{e}");
        drop(held);
    }
}
