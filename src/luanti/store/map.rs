//! The map of a Luanti world, whatever backend stores it.
//!
//! The engine keeps blocks in the database `world.mt` names with `backend` (missing:
//! `sqlite3`). [`MapStore`] opens that one and offers the same operations on every backend,
//! so the tree, the cache and the write-back never know which one they talk to: one variant
//! per backend, each in its own file (`map_sqlite.rs`, …), one match arm per backend in each
//! method. What the backends share lives here: the listing page ([`Listed`]), a change
//! ([`Change`]), the bounds on what one read may hold, and the engine's integer position.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::luanti::codec::block::BlockPos;
use crate::luanti::store::map_leveldb::LevelDbMap;
use crate::luanti::store::map_postgres::PostgresMap;
use crate::luanti::store::map_redis::RedisMap;
use crate::luanti::store::map_seeded::SeededMap;
use crate::luanti::store::map_sqlite::SqliteMap;
use crate::luanti::store::world_mt::{Backend, WorldMt};

/// One stored block as listed: its position, its ordering key and optionally its blob.
pub struct Listed {
    pub pos: BlockPos,
    /// A stable key in listing order, usable as a resume point for [`MapStore::list`].
    pub key: u64,
    pub data: Option<Vec<u8>>,
    /// Shown from a `readonly_backend` seed: it cannot be changed.
    pub from_seed: bool,
}

/// A change to commit: a new blob, or `None` to delete the block.
pub type Change = (BlockPos, Option<Vec<u8>>);

/// A transaction open on the map that takes new blobs one at a time (see
/// [`MapStore::commit_stream`]), so that a change of many blocks never holds them all.
pub trait Stream {
    /// The stored blob of one block, as the store held it when the transaction began (a
    /// blob [`Stream::put`] into this transaction is not seen before the commit).
    fn get(&mut self, pos: BlockPos) -> Result<Option<Vec<u8>>>;
    /// Makes `data` the blob of the block at `pos` once the transaction commits.
    fn put(&mut self, pos: BlockPos, data: &[u8]) -> Result<()>;
}

/// What runs inside a streamed commit (not generic: the map of a `readonly_backend` world
/// holds a map, whose streamed commit would otherwise be made for ever more closure types).
pub type Produce<'a> = Box<dyn FnOnce(&mut dyn Stream) -> Result<()> + 'a>;

pub use crate::luanti::codec::MAX_STORED;

/// The error for a stored block longer than [`MAX_STORED`] (`length`: its bytes, when the
/// store tells): the block exists, is listed as broken with this reason, and can be removed.
pub fn too_large(pos: BlockPos, length: Option<u64>) -> Error {
    let has = length.map_or_else(|| "more than that".to_string(), |n| format!("{n} bytes"));
    Error::stored_too_large(format!(
        "block {},{},{}: its stored data has {has}; at most {MAX_STORED} bytes are read",
        pos.x, pos.y, pos.z
    ))
}

/// The most data bytes one [`MapStore::list`] call returns: a page stops early past it, so a
/// listing holds at most this much of a store's rows at once (512 hostile rows of 8 MiB each
/// would otherwise take 4 GiB).
pub const LIST_BYTES: usize = 32 << 20;

/// The engine's integer position (`getBlockAsInteger`).
pub fn pos_to_int(p: BlockPos) -> i64 {
    i64::from(p.z) * 0x100_0000 + i64::from(p.y) * 0x1000 + i64::from(p.x)
}

/// The engine's `getIntegerAsBlock`.
pub fn int_to_pos(i: i64) -> BlockPos {
    fn unsigned_to_signed(i: i64, max_positive: i64) -> i64 {
        if i < max_positive {
            i
        } else {
            i - 2 * max_positive
        }
    }
    let x = unsigned_to_signed(i.rem_euclid(4096), 2048);
    let i = (i - x).div_euclid(4096);
    let y = unsigned_to_signed(i.rem_euclid(4096), 2048);
    let i = (i - y).div_euclid(4096);
    let z = unsigned_to_signed(i.rem_euclid(4096), 2048);
    BlockPos {
        x: x as i16,
        y: y as i16,
        z: z as i16,
    }
}

/// Adds a listed block to a page; whether the page is full ([`LIST_BYTES`] of data).
pub(crate) fn push_listed(out: &mut Vec<Listed>, bytes: &mut usize, listed: Listed) -> bool {
    *bytes += listed.data.as_ref().map_or(0, Vec::len);
    out.push(listed);
    *bytes >= LIST_BYTES
}

/// Whether a page of `listed` rows asked with `limit` is the last one of a listing.
pub(crate) fn is_last_page(listed: &[Listed], limit: usize) -> bool {
    let bytes: usize = listed
        .iter()
        .map(|l| l.data.as_ref().map_or(0, Vec::len))
        .sum();
    listed.len() < limit && bytes < LIST_BYTES
}

/// The map of a world, in whichever backend holds it (one per mount: the variants' sizes
/// do not matter).
#[allow(clippy::large_enum_variant)]
pub enum MapStore {
    Sqlite(SqliteMap),
    LevelDb(LevelDbMap),
    Redis(RedisMap),
    Postgres(PostgresMap),
    /// A map with a `readonly_backend` seed under it.
    Seeded(SeededMap),
}

impl MapStore {
    /// Opens the map of `source`: a map database file (SQLite), or a world folder whose
    /// `world.mt` names the backend (`backend`; missing: `sqlite3`, the engine's default).
    /// A world folder without `map.sqlite` yet is an empty SQLite map until the first
    /// commit creates it (a restore starts from a folder holding the backup's `world.mt`).
    pub fn open(source: &Path, read_only: bool) -> Result<MapStore> {
        if !source.is_dir() {
            return Ok(MapStore::Sqlite(SqliteMap::open(source, read_only)?));
        }
        let world_mt = WorldMt::read(source)?;
        let main = Self::open_backend(source, &world_mt, &world_mt.map_backend(), read_only)?;
        let Some(name) = world_mt.get("readonly_backend") else {
            return Ok(main);
        };
        // The engine opens it with the same settings in WORLD/readonly (src/map.cpp).
        let dir = source.join("readonly");
        let seed = match Backend::named(name) {
            b @ (Backend::Sqlite3 | Backend::LevelDb) => {
                Self::open_backend(&dir, &world_mt, &b, true)?
            }
            other => {
                return Err(other
                    .unsupported("readonly map")
                    .context(format!("{}: world.mt", source.display())))
            }
        };
        Ok(MapStore::Seeded(SeededMap::new(
            main,
            seed,
            format!("{} ({name})", dir.display()),
        )?))
    }

    /// Opens the map `backend` names for the world folder `source`.
    fn open_backend(
        source: &Path,
        world_mt: &WorldMt,
        backend: &Backend,
        read_only: bool,
    ) -> Result<MapStore> {
        match backend {
            Backend::Sqlite3 => Ok(MapStore::Sqlite(SqliteMap::open(
                &source.join("map.sqlite"),
                read_only,
            )?)),
            Backend::LevelDb => Ok(MapStore::LevelDb(LevelDbMap::open(
                &source.join("map.db"),
                read_only,
            )?)),
            Backend::Redis => Ok(MapStore::Redis(
                RedisMap::open(world_mt, read_only)
                    .map_err(|e| e.context(format!("{}: world.mt", source.display())))?,
            )),
            Backend::Postgresql => Ok(MapStore::Postgres(PostgresMap::open(world_mt, read_only)?)),
            other => Err(other
                .unsupported("map")
                .context(format!("{}: world.mt", source.display()))),
        }
    }

    /// `key: value` lines for `worldfs info`: the backend, where the map is and its layout.
    /// Never a password.
    pub fn describe(&self) -> Vec<(&'static str, String)> {
        match self {
            MapStore::Sqlite(s) => s.describe(),
            MapStore::LevelDb(s) => s.describe(),
            MapStore::Redis(s) => s.describe(),
            MapStore::Postgres(p) => p.describe(),
            MapStore::Seeded(p) => p.describe(),
        }
    }

    /// A path naming this map for the sidecars kept per store (times of blocks): the
    /// database file, or a name made of where a server keeps it.
    pub fn identity(&self) -> PathBuf {
        match self {
            MapStore::Sqlite(s) => s.path().to_path_buf(),
            MapStore::LevelDb(s) => s.path().to_path_buf(),
            MapStore::Redis(s) => s.identity(),
            MapStore::Postgres(p) => PathBuf::from(format!("postgresql {}", p.shown())),
            MapStore::Seeded(p) => p.identity(),
        }
    }

    /// The stored blob of one block.
    pub fn get(&self, pos: BlockPos) -> Result<Option<Vec<u8>>> {
        match self {
            MapStore::Sqlite(s) => s.get(pos),
            MapStore::LevelDb(s) => s.get(pos),
            MapStore::Redis(s) => s.get(pos),
            MapStore::Postgres(p) => p.get(pos),
            MapStore::Seeded(p) => p.get(pos),
        }
    }

    /// The stored blob of one block, for showing it: may come from what was read ahead of a
    /// walk (SQLite and PostgreSQL, see [`read_ahead`](super::read_ahead)), as fresh as the last look at
    /// [`MapStore::data_version`]. Checks before a commit use [`MapStore::get`].
    pub fn read_ahead(&self, pos: BlockPos) -> Result<Option<Vec<u8>>> {
        match self {
            MapStore::Postgres(p) => p.read_ahead(pos),
            MapStore::Seeded(p) => p.read_ahead(pos),
            MapStore::Sqlite(s) => s.read_ahead(pos),
            _ => self.get(pos),
        }
    }

    /// Whether the block at `pos` is shown from a `readonly_backend` seed (and so cannot be
    /// changed).
    pub fn from_seed(&self, pos: BlockPos) -> Result<bool> {
        match self {
            MapStore::Seeded(p) => p.from_seed(pos),
            _ => Ok(false),
        }
    }

    /// The listing key of a position (for resuming a listing just after it).
    pub fn key_of(&self, pos: BlockPos) -> u64 {
        match self {
            MapStore::Sqlite(s) => s.key_of(pos),
            MapStore::LevelDb(s) => s.key_of(pos),
            MapStore::Redis(s) => s.key_of(pos),
            MapStore::Postgres(p) => p.key_of(pos),
            MapStore::Seeded(p) => p.key_of(pos),
        }
    }

    /// Up to `limit` blocks with a key greater than `after` (0 = from the start), in key
    /// order; with their blobs when `with_data`. One short read per call, so a listing
    /// streams with bounded memory and never holds a lock long.
    ///
    /// A page holding [`LIST_BYTES`] of data ends early, before `limit` rows: the listing
    /// goes on after its last key.
    pub fn list(&self, after: u64, limit: usize, with_data: bool) -> Result<Vec<Listed>> {
        match self {
            MapStore::Sqlite(s) => s.list(after, limit, with_data),
            MapStore::LevelDb(s) => s.list(after, limit, with_data),
            MapStore::Redis(s) => s.list(after, limit, with_data),
            MapStore::Postgres(p) => p.list(after, limit, with_data),
            MapStore::Seeded(p) => p.list(after, limit, with_data),
        }
    }

    /// The number of stored entries whose key is no block the engine can load (left out of
    /// listings).
    pub fn out_of_range(&self) -> Result<u64> {
        match self {
            MapStore::Sqlite(s) => s.out_of_range(),
            MapStore::LevelDb(s) => s.out_of_range(),
            MapStore::Redis(s) => s.out_of_range(),
            MapStore::Postgres(p) => p.out_of_range(),
            MapStore::Seeded(p) => p.out_of_range(),
        }
    }

    /// Number of stored blocks.
    pub fn count(&self) -> Result<u64> {
        match self {
            MapStore::Sqlite(s) => s.count(),
            MapStore::LevelDb(s) => s.count(),
            MapStore::Redis(s) => s.count(),
            MapStore::Postgres(p) => p.count(),
            MapStore::Seeded(p) => p.count(),
        }
    }

    /// A token that changes whenever the store may have changed: another writer (another
    /// process, or our own writer) committed. It may also change when nothing did.
    pub fn data_version(&self) -> Result<i64> {
        match self {
            MapStore::Sqlite(s) => s.data_version(),
            MapStore::LevelDb(s) => s.data_version(),
            MapStore::Redis(s) => s.data_version(),
            MapStore::Postgres(p) => p.data_version(),
            MapStore::Seeded(p) => p.data_version(),
        }
    }

    /// A token that changes whenever another program may have committed; `None` when it
    /// cannot be told now (ask again later). Only SQLite (with or without a seed map) tells
    /// our own commits from others' (see [`SqliteMap::others_version`]); the other backends give
    /// [`MapStore::data_version`], which changes for ours too.
    pub fn others_version(&self) -> Result<Option<i64>> {
        match self {
            MapStore::Sqlite(s) => s.others_version(),
            MapStore::Seeded(s) => s.others_version(),
            _ => self.data_version().map(Some),
        }
    }

    /// Whether the store refuses every change.
    pub fn read_only(&self) -> bool {
        match self {
            MapStore::Sqlite(s) => s.read_only(),
            MapStore::LevelDb(s) => s.read_only(),
            MapStore::Redis(s) => s.read_only(),
            MapStore::Postgres(p) => p.read_only(),
            MapStore::Seeded(p) => p.read_only(),
        }
    }

    /// Commits all changes in one transaction: every block ends up old or new together.
    pub fn commit(&self, changes: &[Change]) -> Result<()> {
        self.commit_selected(changes.to_vec(), |_, all| Ok(all))
            .map(drop)
    }

    /// Runs `produce` inside one transaction that takes blobs as they are produced: when it
    /// returns `Ok`, every blob it put is committed together; when it fails (or the commit
    /// does), nothing is changed. Other writers are kept out from the start (as far as the
    /// backend can: see each one's `commit_stream`), so what `produce` reads stays true
    /// until the commit. How much of the put blobs is held in memory until the commit
    /// depends on the backend: SQLite keeps them in a temporary file, Redis and PostgreSQL
    /// on the server (each is sent as it comes); a LevelDB write batch holds them.
    pub fn commit_stream(&self, produce: Produce<'_>) -> Result<()> {
        match self {
            MapStore::Sqlite(s) => s.commit_stream(produce),
            MapStore::LevelDb(s) => s.commit_stream(produce),
            MapStore::Redis(s) => s.commit_stream(produce),
            MapStore::Postgres(p) => p.commit_stream(produce),
            MapStore::Seeded(p) => p.commit_stream(produce),
        }
    }

    /// Commits in one transaction the changes `select` keeps, and returns them. `select` runs
    /// once the transaction keeps every other writer out until it ends, so what `select`
    /// reads of the store ([`MapStore::get`], `data_version`) stays true until the commit.
    pub fn commit_selected(
        &self,
        changes: Vec<Change>,
        select: impl FnOnce(&MapStore, Vec<Change>) -> Result<Vec<Change>>,
    ) -> Result<Vec<Change>> {
        let select = |changes| select(self, changes);
        match self {
            MapStore::Sqlite(s) => s.commit_selected(changes, select),
            MapStore::LevelDb(s) => s.commit_selected(changes, select),
            MapStore::Redis(s) => s.commit_selected(changes, select),
            MapStore::Postgres(p) => p.commit_selected(changes, select),
            MapStore::Seeded(p) => p.commit_selected(changes, select),
        }
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
    fn integer_positions_match_the_engine() {
        assert_eq!(pos_to_int(pos(0, 0, 0)), 0);
        assert_eq!(pos_to_int(pos(-1, 0, 0)), -1);
        assert_eq!(int_to_pos(-1), pos(-1, 0, 0));
        assert_eq!(
            int_to_pos(pos_to_int(pos(-2048, 2047, -7))),
            pos(-2048, 2047, -7)
        );
    }

    proptest! {
        #[test]
        fn integer_positions_round_trip(x in -2048i16..2048, y in -2048i16..2048, z in -2048i16..2048) {
            prop_assert_eq!(int_to_pos(pos_to_int(pos(x, y, z))), pos(x, y, z));
        }
    }

    #[test]
    fn the_map_backend_of_world_mt_is_followed() {
        let dir = tempfile::tempdir().unwrap();
        let e = |text: &str| {
            std::fs::write(dir.path().join("world.mt"), text).unwrap();
            MapStore::open(dir.path(), true)
                .err()
                .map(|e| e.to_string())
        };
        assert_eq!(e("gameid = minetest\n"), None, "missing: sqlite3");
        assert_eq!(e("backend = sqlite3\n"), None);
        let other = e("backend = dummy\n").unwrap();
        assert!(other.contains("map backend \"dummy\""), "{other}");
        assert!(other.contains("world.mt"), "{other}");
    }
}
