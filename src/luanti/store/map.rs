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
    /// A stable key in listing order, usable as a resume point for [`MapBackend::list`].
    pub key: u64,
    pub data: Option<Vec<u8>>,
    /// Shown from a `readonly_backend` seed: it cannot be changed.
    pub from_seed: bool,
}

/// A change to commit: a new blob, or `None` to delete the block.
pub type Change = (BlockPos, Option<Vec<u8>>);

/// A transaction open on the map that takes new blobs one at a time (see
/// [`MapBackend::commit_stream`]), so that a change of many blocks never holds them all.
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

/// The most data bytes one [`MapBackend::list`] call returns: a page stops early past it, so a
/// listing holds at most this much of a store's rows at once (512 hostile rows of 8 MiB each
/// would otherwise take 4 GiB).
pub const LIST_BYTES: usize = 32 << 20;

/// The engine's integer position (`getBlockAsInteger`).
pub fn pos_to_int(p: BlockPos) -> i64 {
    i64::from(p.z) * 0x100_0000 + i64::from(p.y) * 0x1000 + i64::from(p.x)
}

/// The smallest and largest `pos` of a block the engine can load: `pos` is a balanced
/// base-4096 number of three digits, so exactly the integers between these two are the
/// `getBlockAsInteger` of some position, each of exactly one. Any other row (out of range,
/// or not an integer) is never loaded by the engine, and `getIntegerAsBlock` would wrap it
/// onto the position of another block.
pub const POS_MIN: i64 = -2048 * 0x100_0000 - 2048 * 0x1000 - 2048;
pub const POS_MAX: i64 = 2047 * 0x100_0000 + 2047 * 0x1000 + 2047;

/// Which coordinate of a block varies slowest in a backend's key order, then which next:
/// the order its listing follows and its reads ahead fetch. Block folders are numbered in
/// the same order ([`AxisOrder::number`]), because `find` (gnulib's fts) visits a large
/// folder's entries sorted by inode number: a walk numbered so visits the store in key order
/// and reads ahead serve it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AxisOrder {
    /// z, then y, then x: the engine's integer position (`pos` of SQLite, and the
    /// backends keyed by it).
    Zyx,
    /// x, then z, then y: SQLite's table of `x`, `y`, `z` columns (primary key `(x, z, y)`).
    Xzy,
    /// x, then y, then z: PostgreSQL's primary key `(posX, posY, posZ)`.
    Xyz,
}

impl AxisOrder {
    /// The coordinates of `pos`, slowest first.
    fn digits(self, p: BlockPos) -> [i16; 3] {
        match self {
            AxisOrder::Zyx => [p.z, p.y, p.x],
            AxisOrder::Xzy => [p.x, p.z, p.y],
            AxisOrder::Xyz => [p.x, p.y, p.z],
        }
    }

    /// A number below 2^48 for each position, ascending in this order (each coordinate
    /// offset by 32768, sixteen bits each, the slowest highest).
    pub fn number(self, p: BlockPos) -> u64 {
        let bits = |c: i16| u64::from((i32::from(c) + 32768) as u16);
        let [a, b, c] = self.digits(p);
        bits(a) << 32 | bits(b) << 16 | bits(c)
    }

    /// The position numbered by the low 48 bits of `n` ([`AxisOrder::number`]).
    pub fn pos(self, n: u64) -> BlockPos {
        let coord = |shift: u32| (((n >> shift) & 0xFFFF) as i32 - 32768) as i16;
        let (a, b, c) = (coord(32), coord(16), coord(0));
        match self {
            AxisOrder::Zyx => BlockPos { x: c, y: b, z: a },
            AxisOrder::Xzy => BlockPos { x: a, y: c, z: b },
            AxisOrder::Xyz => BlockPos { x: a, y: b, z: c },
        }
    }
}

/// The engine's key of a block in LevelDB and Redis: `i64tos(getBlockAsInteger(pos))`.
pub fn block_key(pos: BlockPos) -> String {
    pos_to_int(pos).to_string()
}

/// The block whose LevelDB or Redis key is exactly `key` (the decimal text the engine
/// writes, nothing else: no sign on 0, no leading zeros, within range), if any.
pub fn parse_block_key(key: &[u8]) -> Option<BlockPos> {
    let text = std::str::from_utf8(key).ok()?;
    let n: i64 = text.parse().ok()?;
    (n.to_string() == text && (POS_MIN..=POS_MAX).contains(&n)).then(|| int_to_pos(n))
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

/// What every backend of the map does, each in its own way (one implementation per backend:
/// `map_sqlite.rs`, `map_leveldb.rs`, `map_redis.rs`, `map_postgres.rs`, and
/// `map_seeded.rs` for a map with a `readonly_backend` seed under it).
pub trait MapBackend: Send + Sync {
    /// `key: value` lines for `worldfs info`: the backend, where the map is and its layout.
    /// Never a password.
    fn describe(&self) -> Vec<(&'static str, String)>;

    /// The state of the map's store where it is not the plain one, for `worldfs status`:
    /// whether it fails every use, and what to say (a database followed after it was
    /// replaced, one that cannot be followed). Backends with no such state keep this default.
    fn condition(&self) -> Option<(bool, String)> {
        None
    }

    /// A path naming this map for the sidecars kept per store (times of blocks): the
    /// database file, or a name made of where a server keeps it.
    fn identity(&self) -> PathBuf;

    /// The stored blob of one block.
    fn get(&self, pos: BlockPos) -> Result<Option<Vec<u8>>>;

    /// The stored blob of one block, for showing it: may come from what was read ahead of a
    /// walk (SQLite and PostgreSQL, see [`read_ahead`](super::read_ahead)), as fresh as the
    /// last look at [`MapBackend::data_version`]. Checks before a commit use
    /// [`MapBackend::get`].
    fn read_ahead(&self, pos: BlockPos) -> Result<Option<Vec<u8>>> {
        self.get(pos)
    }

    /// Whether the block at `pos` is shown from a `readonly_backend` seed (and so cannot be
    /// changed).
    fn seeded_at(&self, _pos: BlockPos) -> Result<bool> {
        Ok(false)
    }

    /// Refuses (`EROFS`, with the reason) a change of the block at `pos` that no commit
    /// could store: one shown from a `readonly_backend` seed. Checked before a change is
    /// queued for a later commit, where a refusal would hold back every other block.
    fn check_writable(&self, _pos: BlockPos) -> Result<()> {
        Ok(())
    }

    /// The listing key of a position (for resuming a listing just after it).
    fn key_of(&self, pos: BlockPos) -> u64;

    /// The order of the coordinates in [`MapBackend::key_of`]'s order, where it follows
    /// one (LevelDB's keys are decimal text, whose order follows none; Redis lists in the
    /// engine's integer order).
    fn axis_order(&self) -> AxisOrder {
        AxisOrder::Zyx
    }

    /// Up to `limit` blocks with a key greater than `after` (0 = from the start), in key
    /// order; with their blobs when `with_data`. One short read per call, so a listing
    /// streams with bounded memory and never holds a lock long.
    ///
    /// A page holding [`LIST_BYTES`] of data ends early, before `limit` rows: the listing
    /// goes on after its last key.
    fn list(&self, after: u64, limit: usize, with_data: bool) -> Result<Vec<Listed>>;

    /// The number of stored entries whose key is no block the engine can load (left out of
    /// listings).
    fn out_of_range(&self) -> Result<u64>;

    /// Number of stored blocks.
    fn count(&self) -> Result<u64>;

    /// A token that changes whenever the store may have changed: another writer (another
    /// process, or our own writer) committed. It may also change when nothing did.
    fn data_version(&self) -> Result<i64>;

    /// A token that changes whenever another program may have committed; `None` when it
    /// cannot be told now (ask again later). Only SQLite (with or without a seed map) tells
    /// our own commits from others' (see `SqliteMap::others_version`); the other backends
    /// give [`MapBackend::data_version`], which changes for ours too.
    fn others_version(&self) -> Result<Option<i64>> {
        self.data_version().map(Some)
    }

    /// Whether the store refuses every change.
    fn read_only(&self) -> bool;

    /// Runs `produce` inside one transaction that takes blobs as they are produced: when it
    /// returns `Ok`, every blob it put is committed together; when it fails (or the commit
    /// does), nothing is changed. Other writers are kept out from the start (as far as the
    /// backend can: see each one's), so what `produce` reads stays true until the commit.
    /// How much of the put blobs is held in memory until the commit depends on the
    /// backend: SQLite keeps them in a temporary file, Redis and PostgreSQL on the server
    /// (each is sent as it comes); a LevelDB write batch holds them.
    fn commit_stream(&self, produce: Produce<'_>) -> Result<()>;

    /// Commits in one transaction the changes `select` keeps, and returns them. `select`
    /// runs once the transaction keeps every other writer out until it ends, so what it
    /// reads of the store (`get`, `data_version`) stays true until the commit.
    fn commit_selected(&self, changes: Vec<Change>, select: Select<'_>) -> Result<Vec<Change>>;
}

/// What [`MapBackend::commit_selected`] runs inside its transaction.
pub type Select<'a> = Box<dyn FnOnce(Vec<Change>) -> Result<Vec<Change>> + 'a>;

/// The map of a world, in whichever backend holds it: every question of [`MapBackend`] is
/// asked of it directly (it dereferences to its backend).
pub struct MapStore(Box<dyn MapBackend>);

impl std::ops::Deref for MapStore {
    type Target = dyn MapBackend;

    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}

impl MapStore {
    /// The map kept by `backend`.
    pub fn new(backend: impl MapBackend + 'static) -> MapStore {
        MapStore(Box::new(backend))
    }

    /// Opens the map of `source`: a map database file (SQLite), or a world folder whose
    /// `world.mt` names the backend (`backend`; missing: `sqlite3`, the engine's default).
    /// A world folder without `map.sqlite` yet is an empty SQLite map until the first
    /// commit creates it (a restore starts from a folder holding the backup's `world.mt`).
    pub fn open(source: &Path, read_only: bool) -> Result<MapStore> {
        if !source.is_dir() {
            return Ok(MapStore::new(SqliteMap::open(source, read_only)?));
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
        Ok(MapStore::new(SeededMap::new(
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
            Backend::Sqlite3 => Ok(MapStore::new(SqliteMap::open(
                &source.join("map.sqlite"),
                read_only,
            )?)),
            Backend::LevelDb => Ok(MapStore::new(LevelDbMap::open(
                &source.join("map.db"),
                read_only,
            )?)),
            Backend::Redis => Ok(MapStore::new(
                RedisMap::open(world_mt, read_only)
                    .map_err(|e| e.context(format!("{}: world.mt", source.display())))?,
            )),
            Backend::Postgresql => Ok(MapStore::new(PostgresMap::open(world_mt, read_only)?)),
            other => Err(other
                .unsupported("map")
                .context(format!("{}: world.mt", source.display()))),
        }
    }

    /// Commits all changes in one transaction: every block ends up old or new together.
    pub fn commit(&self, changes: &[Change]) -> Result<()> {
        self.commit_selected(changes.to_vec(), |_, all| Ok(all))
            .map(drop)
    }

    /// Commits in one transaction the changes `select` keeps, and returns them. `select` runs
    /// once the transaction keeps every other writer out until it ends, so what `select`
    /// reads of the store ([`MapBackend::get`], `data_version`) stays true until the commit.
    pub fn commit_selected(
        &self,
        changes: Vec<Change>,
        select: impl FnOnce(&MapStore, Vec<Change>) -> Result<Vec<Change>>,
    ) -> Result<Vec<Change>> {
        self.0
            .commit_selected(changes, Box::new(|changes| select(self, changes)))
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

        #[test]
        fn axis_orders_number_in_their_order(
            a in (-2048i16..2048, -2048i16..2048, -2048i16..2048),
            b in (-2048i16..2048, -2048i16..2048, -2048i16..2048),
            wide in any::<(i16, i16, i16)>(),
        ) {
            let (a, b) = (pos(a.0, a.1, a.2), pos(b.0, b.1, b.2));
            let zyx = AxisOrder::Zyx;
            prop_assert_eq!(zyx.number(a).cmp(&zyx.number(b)), pos_to_int(a).cmp(&pos_to_int(b)));
            let xyz = AxisOrder::Xyz;
            prop_assert_eq!(xyz.number(a).cmp(&xyz.number(b)), (a.x, a.y, a.z).cmp(&(b.x, b.y, b.z)));
            let xzy = AxisOrder::Xzy;
            prop_assert_eq!(xzy.number(a).cmp(&xzy.number(b)), (a.x, a.z, a.y).cmp(&(b.x, b.z, b.y)));
            let wide = pos(wide.0, wide.1, wide.2);
            for order in [zyx, xyz, xzy] {
                prop_assert!(order.number(wide) >> 48 == 0);
                prop_assert_eq!(order.pos(order.number(wide)), wide);
            }
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
