//! Stable modification times for objects whose container keeps none.
//!
//! rsync's quick check compares size and mtime, so an object's mtime must stay put while it
//! is unchanged and move when it changes. Stored blocks carry no usable time (most Luanti
//! timestamps are undefined), and a database file's mtime moves with every write. So:
//! - an object committed through worldfs gets the commit time (or the time rsync/touch set),
//!   remembered with a hash of the stored bytes in a small sidecar database in the user's
//!   state directory (never in the world folder);
//! - any other object gets a time derived from a hash of its stored bytes, a whole number of
//!   seconds before 2020-01-01: the same bytes always give the same time, in every world and
//!   across remounts, and other bytes (another writer changed it) give another time.
//!
//! Records are read from the sidecar when asked for, not loaded at mount: a restore or a
//! rename through worldfs records every object of a world, and memory must stay bounded for
//! any world size. A record's [`Key`] names a group and an item in it (a Luanti block and one
//! of its files): the records of a group are read together, in one query, because a walk asks
//! for a block folder's and then each of its files' one after another (per item, a walk of a
//! world whose every file has a record made a sidecar query per stat, and took 1.55× what it
//! took without records). The groups asked for or written lately (found or not) are kept, at
//! most [`CACHED`] records and groups.
//!
//! Sidecars written before records were grouped hold them in a table by item alone
//! ([`LEGACY_TABLE`]); they are still read, after the grouped ones, so no time recorded then
//! moves; new records go to the grouped table only.
//!
//! Records are written to the sidecar in groups, as the map's blocks are: a restore records
//! six times per block (its commit, then rsync setting each file's time), and a transaction
//! each cost a tenth of the daemon's time. A record waits about [`WRITE_AFTER`] (a writer
//! thread looks twice as often), or until [`UNWRITTEN_MAX`] wait, and is written at [`Mtimes::flush`]
//! (`fsync`, unmount), before each commit of a store that asked for it ([`Mtimes::writer`])
//! and when the records are dropped. Waiting records answer questions first; a crash loses
//! at most those of the last [`WRITE_AFTER`], whose objects then show derived times.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rusqlite::{params, Connection, DatabaseName, OpenFlags, OptionalExtension};

pub use crate::vfs::tree::BASE_SECS;

/// FNV-1a, 64 bit: a fast, stable hash of stored bytes.
pub fn content_hash(data: &[u8]) -> u64 {
    content_hash_parts(&[data])
}

/// [`content_hash`] of the parts joined, without joining them (a key built of a number and a
/// name, hashed on every stat, costs no allocation).
pub fn content_hash_parts(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in parts.iter().flat_map(|p| p.iter()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// How far before [`BASE_SECS`] derived times spread (about 194 days), so different
/// contents show different times.
const DERIVED_SPREAD_SECS: u64 = 1 << 24;

/// How long a write to the times database waits for another writer.
const BUSY_TIMEOUT: Duration = Duration::from_secs(2);

/// The time shown for bytes never committed through worldfs.
pub fn derived_mtime(hash: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(BASE_SECS - (hash % DERIVED_SPREAD_SECS))
}

/// How many records and groups (and known absences) are kept in memory: about 3 MiB. A
/// Luanti block restored through worldfs counts about 7 (its group, its own record, its
/// files'): when the memory is full it is cleared, and each group asked for again costs one
/// query.
const CACHED: usize = 1 << 16;

/// The table of sidecars written before records were grouped: `key` is the item, or the
/// group for its own record ([`Key::legacy`]).
const LEGACY_TABLE: &str = "mtimes";

/// The item of a group's own record: a block's or a chunk's, as against its files'.
pub const SELF: u64 = 0;

/// Where a record is kept: a group, read from the sidecar at once, and an item in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Key {
    pub group: u64,
    pub item: u64,
}

impl Key {
    /// The item `item` of group `group`; an item that happens to be [`SELF`] is moved to 1,
    /// so it cannot stand for the group's own record.
    pub fn item(group: u64, item: u64) -> Key {
        Key {
            group,
            item: item.max(1),
        }
    }

    /// The key the sidecars written before grouping kept the record under.
    fn legacy(self) -> u64 {
        if self.item == SELF {
            self.group
        } else {
            self.item
        }
    }
}

/// An object with no group of its own (a player file, a TVDA entry): a group of one.
impl From<u64> for Key {
    fn from(group: u64) -> Key {
        Key { group, item: SELF }
    }
}

/// The sidecar's own page cache, in KiB (SQLite's default is 2 MiB).
const SIDECAR_CACHE_KIB: u32 = 512;

/// How long a record may wait before it is written to the sidecar.
const WRITE_AFTER: Duration = Duration::from_millis(500);

/// How many records may wait before they are written to the sidecar.
const UNWRITTEN_MAX: usize = 4096;

/// A record: the hash of the bytes it was recorded for and the time, in ns since the epoch.
type Record = (u64, i64);

/// Recorded commit times of one store.
pub struct Mtimes {
    shared: Arc<Shared>,
}

/// What [`Mtimes`] shares with its writer thread.
struct Shared {
    /// The sidecar: read-write, or read-only for a read-only mount; `None` when there is
    /// none (then `cache` holds every record made, until unmount).
    conn: Option<Mutex<Connection>>,
    /// Whether the sidecar has the grouped table (a read-only one may have the legacy only).
    grouped: bool,
    /// Groups asked for or written lately.
    cache: Mutex<Groups>,
    /// Records not written to the sidecar yet (the newest of each key); asked before
    /// `cache`. They leave it only once written, and kept in `cache` where their group is.
    unwritten: Mutex<Unwritten>,
    /// Whether the sidecar holds records in [`LEGACY_TABLE`], to be asked after the grouped.
    legacy: bool,
    /// Set once the writer thread runs.
    writer: OnceLock<()>,
    /// A read of the sidecar failed (logged once).
    read_failed: AtomicBool,
    /// Queries of the sidecar made by lookups.
    #[cfg(test)]
    queries: std::sync::atomic::AtomicUsize,
    /// Whether the sidecar may hold any record: while it holds none (a world never written
    /// through worldfs), nothing is looked up, so walks cost what they cost without it.
    any: AtomicBool,
}

/// The groups kept in memory, each whole: every record the grouped table holds for it, and
/// what [`LEGACY_TABLE`] was asked for its items (`None`: none there), sorted by item (a
/// block may have thousands of files). An item a kept group lacks has no record, unless the
/// legacy table, not asked yet, holds one.
#[derive(Default)]
struct Groups {
    groups: HashMap<u64, Vec<(u64, Option<Record>)>>,
    /// Groups and items kept: the bound.
    len: usize,
}

impl Groups {
    /// What group `key.group`, if kept, says of the item: `Some(None)`, no record.
    fn get(&self, key: Key, legacy: bool) -> Option<Option<Record>> {
        let items = self.groups.get(&key.group)?;
        match find(items, key.item) {
            Some(r) => Some(r),
            None if legacy => None,
            None => Some(None),
        }
    }

    /// Keeps what is known of an item of a kept group (`make`: of any group, making it:
    /// when there is no sidecar, memory holds every group whole).
    fn set(&mut self, key: Key, record: Option<Record>, make: bool) {
        let items = match self.groups.get_mut(&key.group) {
            Some(items) => items,
            None if make => {
                self.len += 1;
                self.groups.entry(key.group).or_default()
            }
            None => return,
        };
        match items.binary_search_by_key(&key.item, |&(item, _)| item) {
            Ok(at) => items[at].1 = record,
            Err(at) => {
                items.insert(at, (key.item, record));
                self.len += 1;
            }
        }
    }
}

/// What the items of a kept group (sorted by item) hold for `item`: `None`, not there.
fn find(items: &[(u64, Option<Record>)], item: u64) -> Option<Option<Record>> {
    items
        .binary_search_by_key(&item, |&(i, _)| i)
        .ok()
        .map(|at| items[at].1)
}

#[derive(Default)]
struct Unwritten {
    records: HashMap<Key, Record>,
    /// When the oldest of them was made.
    since: Option<Instant>,
    /// Records whose write failed, kept in memory only (at most [`CACHED`]; their objects
    /// show derived times once forgotten, or after a restart), until a write of their key
    /// succeeds.
    unsaved: HashMap<Key, Record>,
}

impl Unwritten {
    /// The newest record of `key` not in the sidecar.
    fn get(&self, key: &Key) -> Option<Record> {
        self.records
            .get(key)
            .or_else(|| self.unsaved.get(key))
            .copied()
    }
}

/// Where sidecars live: `$WORLDFS_STATE_DIR`, else `$XDG_STATE_HOME/worldfs`, else
/// `~/.local/state/worldfs`.
pub fn state_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("WORLDFS_STATE_DIR") {
        return Some(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_STATE_HOME") {
        return Some(PathBuf::from(d).join("worldfs"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state/worldfs"))
}

/// The name of the store at `path` that picks its sidecar: the same for every mount of the
/// store, whether the path is given relative or absolute, through a symlink or not, and
/// whether the store exists yet or not (a restore into a world folder holding only
/// `world.mt` creates `map.sqlite` on its first write; the next mount must find the times
/// that restore recorded).
fn identity(path: &Path) -> PathBuf {
    if let Ok(p) = path.canonicalize() {
        return p;
    }
    let folder = match path.parent() {
        Some(f) if !f.as_os_str().is_empty() => f,
        _ => Path::new("."),
    };
    match (folder.canonicalize(), path.file_name()) {
        (Ok(f), Some(name)) => f.join(name),
        _ => std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()),
    }
}

/// The sidecar `kind` of the store at `store_path` in the state directory (`None`: no
/// state directory): one file per store and kind (`mtimes`: the recorded times;
/// `summaries`: the Luanti block summaries), `HASH.KIND.sqlite`.
pub fn sidecar_file(store_path: &Path, kind: &str) -> Option<PathBuf> {
    let identity = identity(store_path);
    state_dir().map(|d| {
        d.join(format!(
            "{:016x}.{kind}.sqlite",
            content_hash(identity.to_string_lossy().as_bytes())
        ))
    })
}

/// A connection to the sidecar `file`: read-only (`None` when there is none yet), or
/// read-write, creating it.
pub fn open_sidecar(file: &Path, read_only: bool) -> rusqlite::Result<Option<Connection>> {
    if read_only {
        if !file.exists() {
            return Ok(None);
        }
        // A kill of a read-write mount inside a commit of times leaves a journal only a
        // writer can roll back; where that fails, the read below says why.
        if let Err(e) = crate::storekit::journal::roll_back_cut_commit(file, BUSY_TIMEOUT) {
            log::warn!("{e}");
        }
        let conn = Connection::open_with_flags(file, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        conn.execute_batch(&format!("PRAGMA cache_size = -{SIDECAR_CACHE_KIB}"))?;
        return Ok(Some(conn));
    }
    if let Some(dir) = file.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let conn = Connection::open(file)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    // Records are written at every close; a commit that waits for the disk each time
    // would cost more than the close itself (the map's commits are grouped for that
    // reason). In WAL mode with synchronous NORMAL the file stays sound after a crash,
    // which loses at most the last records: those objects show derived times.
    conn.execute_batch(&format!(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA cache_size = -{SIDECAR_CACHE_KIB}"
    ))?;
    Ok(Some(conn))
}

/// Folds a sidecar's write-ahead log into the file and empties it (at `fsync` and unmount).
/// The daemon exits without closing its connections, which would leave the log beside the
/// file: megabytes of it after a walk, read again by the next mount. It never waits: while
/// another program reads the sidecar, the log stays until the next time (logged at debug
/// level); `busy` is the connection's wait for its other uses, set back after.
pub fn fold_log(conn: &Connection, busy: Duration) {
    if conn.is_readonly(DatabaseName::Main).unwrap_or(true) {
        return;
    }
    let folded = conn.busy_timeout(Duration::ZERO).and_then(|()| {
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
            r.get::<_, i64>(0)
        })
    });
    if let Err(e) = conn.busy_timeout(busy) {
        log::warn!("sidecar connection: {e}");
    }
    match folded {
        Ok(0) => {}
        Ok(_) => log::debug!("sidecar log not folded: another program reads the sidecar"),
        Err(e) => log::debug!("sidecar log not folded: {e}"),
    }
}

fn to_ns(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

impl Mtimes {
    /// The records for the store at `store_path`; in-memory only when the state directory
    /// cannot be used (logged), none kept for a read-only mount without a sidecar.
    pub fn open(store_path: &Path, read_only: bool) -> Mtimes {
        Self::with_sidecar(sidecar_file(store_path, "mtimes").as_deref(), read_only)
    }

    /// The records of sidecar `file` (`None`: in memory only).
    fn with_sidecar(file: Option<&Path>, read_only: bool) -> Mtimes {
        let mut sidecar = None;
        if let Some(file) = file {
            match Self::connect(file, read_only) {
                Ok(c) => sidecar = c,
                Err(e) => log::warn!(
                    "mtime records at {} unavailable ({e}); edited objects keep their times only until unmount",
                    file.display()
                ),
            }
        }
        let (conn, tables) = match sidecar {
            Some((conn, tables)) => (Some(conn), tables),
            None => (None, Tables::default()),
        };
        // Unknown (an error): looked up as if it held some.
        let any = match &conn {
            Some(c) => {
                tables.legacy
                    || (tables.grouped
                        && c.query_row("SELECT EXISTS (SELECT 1 FROM times)", [], |r| r.get(0))
                            .unwrap_or(true))
            }
            None => true,
        };
        Mtimes {
            shared: Arc::new(Shared {
                conn: conn.map(Mutex::new),
                grouped: tables.grouped,
                legacy: tables.legacy,
                cache: Mutex::new(Groups::default()),
                unwritten: Mutex::new(Unwritten::default()),
                writer: OnceLock::new(),
                read_failed: AtomicBool::new(false),
                #[cfg(test)]
                queries: Default::default(),
                any: AtomicBool::new(any),
            }),
        }
    }

    /// The sidecar at `file` and which tables it has (`None`: a read-only mount and no
    /// sidecar, or one without records).
    fn connect(file: &Path, read_only: bool) -> rusqlite::Result<Option<(Connection, Tables)>> {
        let Some(conn) = open_sidecar(file, read_only)? else {
            return Ok(None);
        };
        let has_table = |name: &str| -> rusqlite::Result<bool> {
            conn.query_row(
                "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1)",
                [name],
                |r| r.get(0),
            )
        };
        let legacy = has_table(LEGACY_TABLE)?
            && conn.query_row(
                &format!("SELECT EXISTS (SELECT 1 FROM {LEGACY_TABLE})"),
                [],
                |r| r.get(0),
            )?;
        if read_only {
            // A sidecar without a times' table (a mount that ended before it made it) has
            // none to read, and asking it would fail on every lookup.
            let grouped = has_table("times")?;
            return Ok((grouped || legacy).then_some((conn, Tables { grouped, legacy })));
        }
        conn.execute(
            "CREATE TABLE IF NOT EXISTS times (grp INTEGER NOT NULL, item INTEGER NOT NULL, hash INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, PRIMARY KEY (grp, item)) WITHOUT ROWID",
            [],
        )?;
        let grouped = true;
        Ok(Some((conn, Tables { grouped, legacy })))
    }

    /// The mtime of the object `key` whose stored bytes hash to `hash`.
    pub fn mtime(&self, key: impl Into<Key>, hash: u64) -> SystemTime {
        self.recorded(key, hash)
            .unwrap_or_else(|| derived_mtime(hash))
    }

    /// The time recorded for `key` if it was recorded for bytes hashing to `hash`.
    pub fn recorded(&self, key: impl Into<Key>, hash: u64) -> Option<SystemTime> {
        let (h, ns) = self.shared.lookup(key.into())?;
        (h == hash).then(|| UNIX_EPOCH + Duration::from_nanos(u64::try_from(ns).unwrap_or(0)))
    }

    /// Whether any time is recorded for object `key` (whatever its bytes).
    pub fn has(&self, key: impl Into<Key>) -> bool {
        self.shared.lookup(key.into()).is_some()
    }

    /// Records that object `key` now has bytes hashing to `hash`, modified at `t`.
    pub fn record(&self, key: impl Into<Key>, hash: u64, t: SystemTime) {
        self.record_all(&[(key.into(), hash, t)]);
    }

    /// Records several `(key, hash, time)` at once; they are written to the sidecar with
    /// the others waiting (see the module docs).
    pub fn record_all<K: Into<Key> + Copy>(&self, entries: &[(K, u64, SystemTime)]) {
        if entries.is_empty() {
            return;
        }
        let shared = &self.shared;
        shared.any.store(true, Ordering::Release);
        let records = entries
            .iter()
            .map(|&(key, hash, t)| (key.into(), (hash, to_ns(t))));
        if shared.conn.is_none() {
            shared.keep(records);
            return;
        }
        let due = match shared.unwritten.lock() {
            Ok(mut u) => {
                u.records.extend(records);
                let now = Instant::now();
                let since = *u.since.get_or_insert(now);
                u.records.len() >= UNWRITTEN_MAX || now.duration_since(since) >= WRITE_AFTER
            }
            Err(_) => return,
        };
        Shared::start_writer(shared);
        if due {
            shared.write();
        }
    }

    /// What writes every waiting record to the sidecar when called (one transaction; the
    /// log stays, see [`Mtimes::flush`]), for a store to call before it commits.
    pub fn writer(&self) -> Box<dyn Fn() + Send + Sync> {
        let shared = self.shared.clone();
        Box::new(move || shared.write())
    }

    /// Writes every waiting record to the sidecar now, and folds its log into it (`fsync`,
    /// unmount: folding waits for the disk).
    pub fn flush(&self) {
        self.shared.write();
        if let Some(conn) = &self.shared.conn {
            fold_log(&crate::error::recover(conn), BUSY_TIMEOUT);
        }
    }
}

/// Which tables of records a sidecar has.
#[derive(Default)]
struct Tables {
    /// `times`, by group and item.
    grouped: bool,
    /// [`LEGACY_TABLE`], with records in it.
    legacy: bool,
}

impl Drop for Mtimes {
    fn drop(&mut self) {
        self.shared.write();
    }
}

impl Shared {
    /// The record of `key`: waiting, or from memory, else from the sidecar, with the rest of
    /// its group (and then kept).
    fn lookup(&self, key: Key) -> Option<Record> {
        if !self.any.load(Ordering::Acquire) {
            return None;
        }
        let waiting = |s: &Shared| s.unwritten.lock().ok()?.get(&key);
        let kept = |s: &Shared| s.cache.lock().ok()?.get(key, s.legacy);
        if let Some(r) = waiting(self) {
            return Some(r);
        }
        if let Some(known) = kept(self) {
            return known;
        }
        let conn = self.conn.as_ref()?;
        // The sidecar and `cache` change only under the connection's lock (here and in
        // `write`), and a record leaves `unwritten` only once written and kept: what is read
        // here cannot stand for a newer record.
        let c = conn.lock().ok()?;
        if let Some(r) = waiting(self) {
            return Some(r);
        }
        if let Some(known) = kept(self) {
            return known;
        }
        match self.read(&c, key) {
            Ok(found) => found,
            Err(e) => {
                if !self.read_failed.swap(true, Ordering::Relaxed) {
                    log::warn!(
                        "could not read an mtime record ({e}): such objects show derived times"
                    );
                }
                None
            }
        }
    }

    /// Reads the record of `key` from the sidecar, its group's first unless kept, and keeps
    /// what it read; the caller holds the connection's lock.
    fn read(&self, c: &Connection, key: Key) -> rusqlite::Result<Option<Record>> {
        let kept = self
            .cache
            .lock()
            .ok()
            .and_then(|g| g.groups.get(&key.group).map(|items| find(items, key.item)));
        let in_group = match kept {
            Some(found) => found,
            None => {
                let mut items = Vec::new();
                if self.grouped {
                    #[cfg(test)]
                    self.queries.fetch_add(1, Ordering::Relaxed);
                    let mut st =
                        c.prepare_cached("SELECT item, hash, mtime_ns FROM times WHERE grp = ?1")?;
                    let rows = st.query_map([key.group as i64], |r| {
                        Ok((
                            r.get::<_, i64>(0)? as u64,
                            Some((r.get::<_, i64>(1)? as u64, r.get::<_, i64>(2)?)),
                        ))
                    })?;
                    for row in rows {
                        items.push(row?);
                    }
                }
                items.sort_unstable_by_key(|&(item, _)| item);
                let found = find(&items, key.item);
                self.keep_group(key.group, items);
                found
            }
        };
        if let Some(known) = in_group {
            return Ok(known);
        }
        if !self.legacy {
            return Ok(None);
        }
        // Not in the grouped table: a sidecar written before grouping may hold it.
        #[cfg(test)]
        self.queries.fetch_add(1, Ordering::Relaxed);
        let found = c
            .prepare_cached(&format!(
                "SELECT hash, mtime_ns FROM {LEGACY_TABLE} WHERE key = ?1"
            ))?
            .query_row([key.legacy() as i64], |r| {
                Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)?))
            })
            .optional()?;
        self.keep_item(key, found);
        Ok(found)
    }

    /// Makes room for `n` more groups and records: forgets every kept group when the memory
    /// would be full (the sidecar still has them, waiting ones are in `unwritten`). Without
    /// a sidecar nothing is forgotten: memory is all there is.
    fn room(&self, groups: &mut Groups, n: usize) {
        if self.conn.is_some() && groups.len + n > CACHED {
            groups.groups.clear();
            groups.groups.shrink_to(CACHED / 4);
            groups.len = 0;
        }
    }

    /// Keeps group `group` whole, as the sidecar holds it.
    fn keep_group(&self, group: u64, items: Vec<(u64, Option<Record>)>) {
        if let Ok(mut g) = self.cache.lock() {
            self.room(&mut g, items.len() + 1);
            g.len += items.len() + 1;
            if let Some(old) = g.groups.insert(group, items) {
                g.len -= old.len() + 1;
            }
        }
    }

    /// Keeps what the legacy table holds for an item of a kept group.
    fn keep_item(&self, key: Key, record: Option<Record>) {
        if let Ok(mut g) = self.cache.lock() {
            self.room(&mut g, 1);
            g.set(key, record, false);
        }
    }

    /// Keeps records just written (or, without a sidecar, made) where their group is kept;
    /// without a sidecar, every group.
    fn keep(&self, records: impl IntoIterator<Item = (Key, Record)>) {
        let make = self.conn.is_none();
        if let Ok(mut g) = self.cache.lock() {
            for (key, record) in records {
                if make || g.groups.contains_key(&key.group) {
                    self.room(&mut g, 2);
                    g.set(key, Some(record), make);
                }
            }
        }
    }

    /// Writes the waiting records in one transaction. A failed write is logged, and the
    /// records are kept in memory only (see [`Unwritten::unsaved`]).
    fn write(&self) {
        let Some(conn) = &self.conn else { return };
        // A panic under the lock leaves at worst a transaction open: the write below then
        // fails and is logged, and the records still leave `unwritten`.
        let mut c = crate::error::recover(conn);
        let mut records: Vec<(Key, Record)> = match self.unwritten.lock() {
            Ok(u) if !u.records.is_empty() => u.records.iter().map(|(k, r)| (*k, *r)).collect(),
            _ => return,
        };
        // In the table's order: each page of it is then read and written once.
        records.sort_unstable_by_key(|(k, _)| (k.group as i64, k.item as i64));
        let stored = c.transaction().and_then(|tx| {
            for &(key, (hash, ns)) in &records {
                tx.prepare_cached(
                    "REPLACE INTO times (grp, item, hash, mtime_ns) VALUES (?1, ?2, ?3, ?4)",
                )?
                .execute(params![
                    key.group as i64,
                    key.item as i64,
                    hash as i64,
                    ns
                ])?;
            }
            tx.commit()
        });
        let saved = match stored {
            Ok(()) => true,
            Err(e) => {
                log::warn!("could not record mtimes ({e}): they are kept in memory only");
                false
            }
        };
        if saved {
            self.keep(records.iter().copied());
        }
        if let Ok(mut u) = self.unwritten.lock() {
            for (key, record) in &records {
                if u.records.get(key) == Some(record) {
                    u.records.remove(key);
                }
                if saved {
                    u.unsaved.remove(key);
                } else {
                    if u.unsaved.len() >= CACHED {
                        u.unsaved.clear();
                    }
                    u.unsaved.insert(*key, *record);
                }
            }
            u.since = (!u.records.is_empty()).then(Instant::now);
        }
    }

    /// Writes the waiting records once the oldest waited [`WRITE_AFTER`].
    fn write_if_due(&self) {
        let due = match self.unwritten.lock() {
            Ok(u) => u.since.is_some_and(|t| t.elapsed() >= WRITE_AFTER),
            Err(_) => false,
        };
        if due {
            self.write();
        }
    }

    /// Starts the thread that writes records which waited long enough; it ends with the
    /// records.
    fn start_writer(shared: &Arc<Shared>) {
        shared.writer.get_or_init(|| {
            let weak = Arc::downgrade(shared);
            let spawned = std::thread::Builder::new()
                .name("worldfs-mtimes".into())
                .spawn(move || loop {
                    std::thread::sleep(WRITE_AFTER / 2);
                    match weak.upgrade() {
                        Some(shared) => shared.write_if_due(),
                        None => return,
                    }
                });
            if let Err(e) = spawned {
                log::warn!("no thread to write mtime records ({e}): they are written in groups as they come");
            }
        });
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn a_hash_of_parts_is_the_hash_of_the_parts_joined() {
        let parts: [&[u8]; 4] = [b"12345", b"/", b"", b"nodes.cubeset"];
        assert_eq!(
            content_hash_parts(&parts),
            content_hash(b"12345/nodes.cubeset")
        );
        assert_eq!(content_hash_parts(&[]), content_hash(b""));
    }

    #[test]
    fn recorded_times_survive_reopen_and_follow_content() {
        let dir = tempfile::tempdir().unwrap();
        let sidecar = dir.path().join("map.mtimes.sqlite");
        let m = Mtimes::with_sidecar(Some(&sidecar), false);
        let h = content_hash(b"blob");
        assert_eq!(m.mtime(7, h), derived_mtime(h));
        assert!(derived_mtime(h) < UNIX_EPOCH + Duration::from_secs(BASE_SECS + 1));
        let t = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        m.record(7, h, t);
        drop(m);
        let m = Mtimes::with_sidecar(Some(&sidecar), true);
        assert_eq!(m.mtime(7, h), t);
        let other = content_hash(b"changed by the game");
        assert_eq!(m.mtime(7, other), derived_mtime(other));
        assert_ne!(derived_mtime(h), derived_mtime(other));
    }

    /// The size of the write-ahead log beside `sidecar` (0 when there is none).
    pub(crate) fn log_len(sidecar: &Path) -> u64 {
        let mut wal = sidecar.as_os_str().to_owned();
        wal.push("-wal");
        std::fs::metadata(wal).map_or(0, |m| m.len())
    }

    /// A sidecar in `dir`, its records (read-write), and a time to record.
    fn sidecar_in(dir: &Path) -> (PathBuf, Mtimes, SystemTime) {
        let sidecar = dir.join("map.mtimes.sqlite");
        let m = Mtimes::with_sidecar(Some(&sidecar), false);
        (sidecar, m, UNIX_EPOCH + Duration::from_secs(1_800_000_000))
    }

    /// A flush while another program reads the sidecar does not wait for it (a fold that
    /// waited would hold every lookup of the mount for the 2 s busy timeout), and loses
    /// nothing: the log is folded at a later flush.
    #[test]
    fn a_flush_never_waits_for_a_reader_of_the_sidecar() {
        let dir = tempfile::tempdir().unwrap();
        let (sidecar, m, t) = sidecar_in(dir.path());
        m.record(1, 1, t);
        m.flush();
        let reader = Connection::open(&sidecar).unwrap();
        reader.execute_batch("BEGIN").unwrap();
        let n: i64 = reader
            .query_row("SELECT count(*) FROM times", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 1);
        m.record(2, 2, t);
        let start = Instant::now();
        m.flush();
        assert!(
            start.elapsed() < BUSY_TIMEOUT / 2,
            "waited {:?} for the reader",
            start.elapsed()
        );
        assert!(log_len(&sidecar) > 0, "the reader keeps the log");
        reader.execute_batch("COMMIT").unwrap();
        m.flush();
        assert_eq!(log_len(&sidecar), 0);
        drop(m);
        let m = Mtimes::with_sidecar(Some(&sidecar), true);
        assert_eq!((m.mtime(1, 1), m.mtime(2, 2)), (t, t));
    }

    /// `fsync` and unmount leave no log beside the sidecar, and lose nothing.
    #[test]
    fn a_flush_folds_the_log_into_the_sidecar() {
        let dir = tempfile::tempdir().unwrap();
        let (sidecar, m, t) = sidecar_in(dir.path());
        for key in 0..5000 {
            m.record(key, key, t);
        }
        m.shared.write();
        assert!(log_len(&sidecar) > 0, "written to the log first");
        m.flush();
        assert_eq!(log_len(&sidecar), 0);
        drop(m);
        let m = Mtimes::with_sidecar(Some(&sidecar), true);
        assert_eq!(m.mtime(4999, 4999), t);
    }

    /// A read-only mount of a world whose sidecar has no times' table reads no times from
    /// it: before, every lookup tried a statement on a table that is not there (when the
    /// block summaries shared the file, a remount's incremental rsync of a 131,383-block
    /// world took 81 s instead of 53).
    #[test]
    fn a_read_only_sidecar_without_times_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let sidecar = dir.path().join("map.mtimes.sqlite");
        Connection::open(&sidecar)
            .and_then(|c| c.execute("CREATE TABLE summaries (pos INTEGER PRIMARY KEY)", []))
            .unwrap();
        let m = Mtimes::with_sidecar(Some(&sidecar), true);
        assert!(m.shared.conn.is_none());
        let h = content_hash(b"blob");
        assert_eq!(m.mtime(7, h), derived_mtime(h));
        assert!(!m.shared.read_failed.load(Ordering::Relaxed));
    }

    #[test]
    fn a_record_reads_back_while_other_threads_ask_for_it() {
        let dir = tempfile::tempdir().unwrap();
        let sidecar = dir.path().join("race.mtimes.sqlite");
        let m = std::sync::Arc::new(Mtimes::with_sidecar(Some(&sidecar), false));
        m.record(u64::MAX, 1, UNIX_EPOCH);
        let current = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let done = std::sync::Arc::new(AtomicBool::new(false));
        let askers: Vec<_> = (0..2)
            .map(|_| {
                let (m, current, done) = (m.clone(), current.clone(), done.clone());
                std::thread::spawn(move || {
                    while !done.load(Ordering::Relaxed) {
                        m.has(current.load(Ordering::Relaxed));
                    }
                })
            })
            .collect();
        let t = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let mut lost = 0;
        for k in 1..(UNWRITTEN_MAX as u64 * 3) {
            current.store(k, Ordering::Relaxed);
            m.record(k, k, t);
            if m.recorded(k, k) != Some(t) {
                lost += 1;
            }
        }
        done.store(true, Ordering::Relaxed);
        for a in askers {
            a.join().unwrap();
        }
        assert_eq!(
            lost, 0,
            "records read back as absent right after they were written"
        );
    }

    #[test]
    fn memory_stays_bounded_however_many_objects_are_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let sidecar = dir.path().join("many.mtimes.sqlite");
        let m = Mtimes::with_sidecar(Some(&sidecar), false);
        assert!(
            !m.shared.any.load(Ordering::Relaxed),
            "a new sidecar holds no record"
        );
        assert!(!m.has(1));
        let n = CACHED as u64 * 2 + 7;
        let t = |k: u64| UNIX_EPOCH + Duration::from_secs(1_800_000_000 + k);
        let all: Vec<(u64, u64, SystemTime)> = (0..n).map(|k| (k, k ^ 0xabc, t(k))).collect();
        for part in all.chunks(1000) {
            m.record_all(part);
        }
        assert!(m.shared.cache.lock().unwrap().len <= CACHED);
        for k in (0..n).step_by(97).chain([0, n - 1]) {
            assert_eq!(m.recorded(k, k ^ 0xabc), Some(t(k)), "record {k}");
            assert!(m.has(k));
        }
        assert!(!m.has(n), "a key never recorded");
        assert!(m.shared.cache.lock().unwrap().len <= CACHED);
        drop(m);
        let m = Mtimes::with_sidecar(Some(&sidecar), true);
        assert_eq!(m.recorded(n - 1, (n - 1) ^ 0xabc), Some(t(n - 1)));
        assert_eq!(m.recorded(3, 0), None, "recorded for other bytes");
        assert!(
            m.shared.cache.lock().unwrap().len <= 4,
            "nothing is loaded at open: two groups of one were asked for"
        );
    }

    /// The records of a group come from the sidecar in one query, found or not: a stat of
    /// a block's folder and of each of its files costs one query, not one each (a walk of a
    /// world restored through worldfs took 1.55x the walk of a world without records).
    #[test]
    fn a_group_is_read_from_the_sidecar_in_one_query() {
        let dir = tempfile::tempdir().unwrap();
        let (sidecar, m, t) = sidecar_in(dir.path());
        let group = 0x1234_5678_9abc;
        let items: Vec<(Key, u64, SystemTime)> = std::iter::once((Key::from(group), 5, t))
            .chain((10..20).map(|i| (Key::item(group, i), i * 3, t)))
            .chain([(Key::from(group + 1), 6, t)])
            .collect();
        m.record_all(&items);
        drop(m);
        let m = Mtimes::with_sidecar(Some(&sidecar), true);
        assert_eq!(m.recorded(group, 5), Some(t));
        for i in 10..20 {
            assert_eq!(m.recorded(Key::item(group, i), i * 3), Some(t), "item {i}");
            assert_eq!(m.recorded(Key::item(group, i), i), None, "other bytes");
        }
        assert!(!m.has(Key::item(group, 20)), "an item never recorded");
        assert_eq!(m.shared.queries.load(Ordering::Relaxed), 1);
        assert!(!m.has(Key::item(group + 2, 1)), "a group never recorded");
        assert!(!m.has(group + 2), "known absent with its group");
        assert_eq!(m.recorded(group + 1, 6), Some(t));
        assert_eq!(m.shared.queries.load(Ordering::Relaxed), 3);
        assert_eq!(
            Key::item(group, SELF),
            Key::item(group, 1),
            "no item is the group's own"
        );
    }

    /// A sidecar written before records were grouped keeps every time it holds: a block's
    /// own record under its key, a file's under the file's key. New records go to the
    /// grouped table and win over the old ones.
    #[test]
    fn records_written_before_grouping_still_count() {
        let dir = tempfile::tempdir().unwrap();
        let sidecar = dir.path().join("old.mtimes.sqlite");
        let t = |s: u64| UNIX_EPOCH + Duration::from_secs(1_800_000_000 + s);
        let (group, file) = (77u64, 0xfeed_f00d_u64);
        {
            let old = Connection::open(&sidecar).unwrap();
            old.execute_batch(
                "CREATE TABLE mtimes (key INTEGER PRIMARY KEY, hash INTEGER NOT NULL, mtime_ns INTEGER NOT NULL)",
            )
            .unwrap();
            for (key, hash, s) in [(group, 1u64, 1u64), (file, 2, 2)] {
                old.execute(
                    "INSERT INTO mtimes VALUES (?1, ?2, ?3)",
                    params![key as i64, hash as i64, to_ns(t(s))],
                )
                .unwrap();
            }
        }
        let m = Mtimes::with_sidecar(Some(&sidecar), true);
        assert!(
            m.shared.conn.is_some(),
            "read-only, the old table alone is read"
        );
        assert_eq!(m.recorded(group, 1), Some(t(1)));
        assert_eq!(m.recorded(Key::item(group, file), 2), Some(t(2)));
        assert!(!m.has(Key::item(group, file + 1)));
        drop(m);
        let m = Mtimes::with_sidecar(Some(&sidecar), false);
        assert_eq!(m.recorded(Key::item(group, file), 2), Some(t(2)));
        m.record(Key::item(group, file), 3, t(3));
        assert_eq!(m.recorded(Key::item(group, file), 3), Some(t(3)), "waiting");
        m.flush();
        assert_eq!(m.recorded(Key::item(group, file), 3), Some(t(3)), "written");
        assert_eq!(m.recorded(Key::item(group, file), 2), None, "over the old");
        drop(m);
        let m = Mtimes::with_sidecar(Some(&sidecar), true);
        assert_eq!(
            m.recorded(Key::item(group, file), 3),
            Some(t(3)),
            "the new record"
        );
        assert_eq!(
            m.recorded(Key::item(group, file), 2),
            None,
            "the old one is stale"
        );
        assert_eq!(
            m.recorded(group, 1),
            Some(t(1)),
            "the group's own, old record"
        );
        let asked = m.shared.queries.load(Ordering::Relaxed);
        assert_eq!(m.recorded(group, 1), Some(t(1)));
        assert!(!m.has(Key::item(group, file + 1)));
        assert!(!m.has(Key::item(group, file + 1)));
        assert_eq!(
            m.shared.queries.load(Ordering::Relaxed),
            asked + 1,
            "what the old table answered is kept, found or not"
        );
    }

    /// A record whose write fails (another program holds the sidecar past the busy
    /// timeout) still answers, whether its group was read or not, until a later write of
    /// its key succeeds.
    #[test]
    fn a_record_whose_write_failed_still_answers() {
        let dir = tempfile::tempdir().unwrap();
        let (sidecar, m, t) = sidecar_in(dir.path());
        let later = t + Duration::from_secs(5);
        m.record(Key::item(1, 2), 20, t);
        m.flush();
        assert_eq!(m.recorded(Key::from(1), 10), None, "group 1 read");
        let holder = Connection::open(&sidecar).unwrap();
        holder.execute_batch("BEGIN EXCLUSIVE").unwrap();
        m.record(Key::from(1), 10, t);
        m.record(Key::item(7, 3), 30, t);
        m.shared.write();
        for (key, hash) in [
            (Key::from(1), 10),
            (Key::item(7, 3), 30),
            (Key::item(1, 2), 20),
        ] {
            assert_eq!(
                m.recorded(key, hash),
                Some(t),
                "{key:?} after the failed write"
            );
        }
        holder.execute_batch("COMMIT").unwrap();
        m.record(Key::item(7, 3), 31, later);
        m.shared.write();
        assert_eq!(
            m.recorded(Key::item(7, 3), 31),
            Some(later),
            "the newer, written"
        );
        assert!(!m
            .shared
            .unwritten
            .lock()
            .unwrap()
            .unsaved
            .contains_key(&Key::item(7, 3)));
        assert_eq!(m.recorded(Key::from(1), 10), Some(t), "still in memory");
    }

    /// Groups of many items, and the old table's answers, stay within the bound.
    #[test]
    fn groups_and_old_answers_stay_within_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let sidecar = dir.path().join("bound.mtimes.sqlite");
        Connection::open(&sidecar)
            .unwrap()
            .execute_batch(
                "CREATE TABLE mtimes (key INTEGER PRIMARY KEY, hash INTEGER NOT NULL, mtime_ns INTEGER NOT NULL);
                 INSERT INTO mtimes VALUES (5, 5, 5)",
            )
            .unwrap();
        let m = Mtimes::with_sidecar(Some(&sidecar), false);
        let t = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        assert!(m.shared.legacy);
        let groups = CACHED as u64 / 4;
        let records: Vec<(Key, u64, SystemTime)> = (0..groups)
            .flat_map(|g| (1..=6).map(move |i| (Key::item(g, i), g + i, t)))
            .collect();
        for part in records.chunks(5000) {
            m.record_all(part);
        }
        m.flush();
        for g in 0..groups {
            for i in 1..=8 {
                let expected = (i <= 6).then_some(t);
                assert_eq!(m.recorded(Key::item(g, i), g + i), expected, "{g}/{i}");
            }
            assert!(m.shared.cache.lock().unwrap().len <= CACHED);
        }
        assert_eq!(m.recorded(5, 5), Some(UNIX_EPOCH + Duration::from_nanos(5)));
    }

    /// Records wait in memory and answer at once; they reach the sidecar in one group when
    /// flushed, when the records are dropped, and on their own within about `WRITE_AFTER`.
    #[test]
    fn waiting_records_answer_at_once_and_reach_the_sidecar() {
        let dir = tempfile::tempdir().unwrap();
        let sidecar = dir.path().join("wait.mtimes.sqlite");
        let in_sidecar = |key: u64| {
            Connection::open_with_flags(&sidecar, OpenFlags::SQLITE_OPEN_READ_ONLY)
                .unwrap()
                .query_row(
                    "SELECT mtime_ns FROM times WHERE grp = ?1 AND item = 0",
                    [key as i64],
                    |r| r.get::<_, i64>(0),
                )
                .optional()
                .unwrap()
        };
        let t = |s: u64| UNIX_EPOCH + Duration::from_secs(1_800_000_000 + s);
        let m = Mtimes::with_sidecar(Some(&sidecar), false);
        m.record(1, 10, t(1));
        m.record(1, 11, t(2));
        assert_eq!(m.recorded(1, 11), Some(t(2)), "the newest waiting record");
        assert_eq!(m.recorded(1, 10), None);
        assert_eq!(in_sidecar(1), None, "not written yet");
        m.flush();
        assert_eq!(in_sidecar(1), Some(to_ns(t(2))));
        assert_eq!(m.recorded(1, 11), Some(t(2)));

        m.record(2, 20, t(3));
        std::thread::sleep(WRITE_AFTER * 3);
        assert_eq!(
            in_sidecar(2),
            Some(to_ns(t(3))),
            "written by the writer thread"
        );

        m.record(3, 30, t(4));
        drop(m);
        assert_eq!(in_sidecar(3), Some(to_ns(t(4))), "written when dropped");
        let m = Mtimes::with_sidecar(Some(&sidecar), true);
        assert_eq!(m.recorded(3, 30), Some(t(4)));
    }

    /// A store that does not exist yet (a restore's first mount) and the same store once it
    /// exists, named relative or absolute, pick the same sidecar.
    #[test]
    fn a_store_keeps_its_sidecar_once_it_exists_however_it_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let world = dir.path().join("w");
        std::fs::create_dir(&world).unwrap();
        let before = identity(&world.join("map.sqlite"));
        std::fs::write(world.join("map.sqlite"), b"x").unwrap();
        assert_eq!(identity(&world.join("map.sqlite")), before);
        assert_eq!(identity(&world.join("./map.sqlite")), before);
        let cwd = std::env::current_dir().unwrap();
        let relative = pathdiff(&world.join("map.sqlite"), &cwd);
        assert_eq!(identity(&relative), before, "{}", relative.display());
        std::fs::remove_file(world.join("map.sqlite")).unwrap();
        assert_eq!(identity(&relative), before, "absent, relative");
        assert!(before.is_absolute());
    }

    /// `path` relative to `base` (both absolute), through `..` where needed.
    fn pathdiff(path: &Path, base: &Path) -> PathBuf {
        let (p, b): (Vec<_>, Vec<_>) = (path.components().collect(), base.components().collect());
        let common = p.iter().zip(&b).take_while(|(x, y)| x == y).count();
        let mut out: PathBuf = b[common..].iter().map(|_| "..").collect();
        out.extend(&p[common..]);
        out
    }
}
