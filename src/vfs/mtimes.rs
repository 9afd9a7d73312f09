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
//! any world size. The records asked for or written lately (found or not) are kept, at most
//! [`CACHED`] of them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{params, Connection, OpenFlags, OptionalExtension};

/// 2020-01-01T00:00:00Z: hash-derived times lie in the 194 days before it.
pub const BASE_SECS: u64 = 1_577_836_800;

/// FNV-1a, 64 bit: a fast, stable hash of stored bytes.
pub fn content_hash(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in data {
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

/// How many records (and known absences) are kept in memory: about 3 MiB (a restore of
/// 10,000 blocks asks for about 60,000 again and again; clearing a smaller memory each time
/// it fills would read them all from the sidecar).
const CACHED: usize = 1 << 16;

/// The sidecar's own page cache, in KiB (SQLite's default is 2 MiB).
const SIDECAR_CACHE_KIB: u32 = 512;

/// A record: the hash of the bytes it was recorded for and the time, in ns since the epoch.
type Record = (u64, i64);

/// Recorded commit times of one store.
pub struct Mtimes {
    /// The sidecar: read-write, or read-only for a read-only mount; `None` when there is
    /// none (then `cache` holds every record made, until unmount).
    conn: Option<Mutex<Connection>>,
    /// Records asked for or written lately; `None`: the sidecar has none for the key.
    cache: Mutex<HashMap<u64, Option<Record>>>,
    /// A read of the sidecar failed (logged once).
    read_failed: AtomicBool,
    /// Whether the sidecar may hold any record: while it holds none (a world never written
    /// through worldfs), nothing is looked up, so walks cost what they cost without it.
    any: AtomicBool,
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

fn to_ns(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

impl Mtimes {
    /// The records for the store at `store_path`; in-memory only when the state directory
    /// cannot be used (logged), none kept for a read-only mount without a sidecar.
    pub fn open(store_path: &Path, read_only: bool) -> Mtimes {
        let identity = store_path
            .canonicalize()
            .unwrap_or_else(|_| store_path.to_path_buf());
        let file = state_dir().map(|d| {
            d.join(format!(
                "{:016x}.mtimes.sqlite",
                content_hash(identity.to_string_lossy().as_bytes())
            ))
        });
        Self::with_sidecar(file.as_deref(), read_only)
    }

    /// The records of sidecar `file` (`None`: in memory only).
    fn with_sidecar(file: Option<&Path>, read_only: bool) -> Mtimes {
        let mut conn = None;
        if let Some(file) = file {
            match Self::connect(file, read_only) {
                Ok(c) => conn = c,
                Err(e) => log::warn!(
                    "mtime records at {} unavailable ({e}); edited objects keep their times only until unmount",
                    file.display()
                ),
            }
        }
        // Unknown (an error): looked up as if it held some.
        let any = match &conn {
            Some(c) => c
                .query_row("SELECT EXISTS (SELECT 1 FROM mtimes)", [], |r| r.get(0))
                .unwrap_or(true),
            None => true,
        };
        Mtimes {
            conn: conn.map(Mutex::new),
            cache: Mutex::new(HashMap::new()),
            read_failed: AtomicBool::new(false),
            any: AtomicBool::new(any),
        }
    }

    fn connect(file: &Path, read_only: bool) -> rusqlite::Result<Option<Connection>> {
        if read_only {
            if !file.exists() {
                return Ok(None);
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
        conn.execute(
            "CREATE TABLE IF NOT EXISTS mtimes (key INTEGER PRIMARY KEY, hash INTEGER NOT NULL, mtime_ns INTEGER NOT NULL)",
            [],
        )?;
        Ok(Some(conn))
    }

    /// The record of `key`: from memory, else from the sidecar (and then kept).
    fn lookup(&self, key: u64) -> Option<Record> {
        if !self.any.load(Ordering::Acquire) {
            return None;
        }
        if let Some(&known) = self.cache.lock().ok()?.get(&key) {
            return known;
        }
        let conn = self.conn.as_ref()?;
        // The cache changes only under the connection's lock (here and in `record_all`), so
        // what is read here cannot overwrite a record written meanwhile.
        let c = conn.lock().ok()?;
        if let Some(&known) = self.cache.lock().ok()?.get(&key) {
            return known;
        }
        let found = {
            let row = c
                .prepare_cached("SELECT hash, mtime_ns FROM mtimes WHERE key = ?1")
                .and_then(|mut st| {
                    st.query_row([key as i64], |r| {
                        Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)?))
                    })
                    .optional()
                });
            match row {
                Ok(r) => r,
                Err(e) => {
                    if !self.read_failed.swap(true, Ordering::Relaxed) {
                        log::warn!(
                            "could not read an mtime record ({e}): such objects show derived times"
                        );
                    }
                    return None;
                }
            }
        };
        self.keep(&[(key, found)]);
        drop(c);
        found
    }

    /// Keeps what the sidecar holds for these keys; forgets every kept record first when
    /// the memory is full (the sidecar still has them). Without a sidecar nothing is
    /// forgotten: memory is all there is.
    fn keep(&self, records: &[(u64, Option<Record>)]) {
        if let Ok(mut c) = self.cache.lock() {
            if self.conn.is_some() && c.len() + records.len() > CACHED {
                c.clear();
                c.shrink_to(CACHED);
            }
            c.extend(records.iter().copied());
        }
    }

    /// The mtime of the object `key` whose stored bytes hash to `hash`.
    pub fn mtime(&self, key: u64, hash: u64) -> SystemTime {
        self.recorded(key, hash)
            .unwrap_or_else(|| derived_mtime(hash))
    }

    /// The time recorded for `key` if it was recorded for bytes hashing to `hash`.
    pub fn recorded(&self, key: u64, hash: u64) -> Option<SystemTime> {
        let (h, ns) = self.lookup(key)?;
        (h == hash).then(|| UNIX_EPOCH + Duration::from_nanos(u64::try_from(ns).unwrap_or(0)))
    }

    /// Whether any time is recorded for object `key` (whatever its bytes).
    pub fn has(&self, key: u64) -> bool {
        self.lookup(key).is_some()
    }

    /// Records that object `key` now has bytes hashing to `hash`, modified at `t`.
    pub fn record(&self, key: u64, hash: u64, t: SystemTime) {
        self.record_all(&[(key, hash, t)]);
    }

    /// Records several `(key, hash, time)` at once (one transaction in the sidecar).
    pub fn record_all(&self, entries: &[(u64, u64, SystemTime)]) {
        if entries.is_empty() {
            return;
        }
        self.any.store(true, Ordering::Release);
        let records: Vec<(u64, Option<Record>)> = entries
            .iter()
            .map(|&(key, hash, t)| (key, Some((hash, to_ns(t)))))
            .collect();
        let Some(conn) = &self.conn else {
            self.keep(&records);
            return;
        };
        {
            if let Ok(mut c) = conn.lock() {
                let stored = c.transaction().and_then(|tx| {
                    for &(key, hash, t) in entries {
                        tx.prepare_cached(
                            "REPLACE INTO mtimes (key, hash, mtime_ns) VALUES (?1, ?2, ?3)",
                        )?
                        .execute(params![
                            key as i64,
                            hash as i64,
                            to_ns(t)
                        ])?;
                    }
                    tx.commit()
                });
                if let Err(e) = stored {
                    log::warn!("could not record mtimes: {e}");
                }
                self.keep(&records);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        for k in 1..3000u64 {
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
            !m.any.load(Ordering::Relaxed),
            "a new sidecar holds no record"
        );
        assert!(!m.has(1));
        let n = CACHED as u64 * 2 + 7;
        let t = |k: u64| UNIX_EPOCH + Duration::from_secs(1_800_000_000 + k);
        let all: Vec<(u64, u64, SystemTime)> = (0..n).map(|k| (k, k ^ 0xabc, t(k))).collect();
        for part in all.chunks(1000) {
            m.record_all(part);
        }
        assert!(m.cache.lock().unwrap().len() <= CACHED);
        for k in (0..n).step_by(97).chain([0, n - 1]) {
            assert_eq!(m.recorded(k, k ^ 0xabc), Some(t(k)), "record {k}");
            assert!(m.has(k));
        }
        assert!(!m.has(n), "a key never recorded");
        assert!(m.cache.lock().unwrap().len() <= CACHED);
        drop(m);
        let m = Mtimes::with_sidecar(Some(&sidecar), true);
        assert_eq!(m.recorded(n - 1, (n - 1) ^ 0xabc), Some(t(n - 1)));
        assert_eq!(m.recorded(3, 0), None, "recorded for other bytes");
        assert!(
            m.cache.lock().unwrap().len() <= 2,
            "nothing is loaded at open"
        );
    }
}
