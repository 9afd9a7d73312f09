//! Block summaries kept on disk, so that a block whose stored bytes have not changed is not
//! decoded again to be listed by a later mount, or after its summary left memory.
//!
//! The summaries in memory ([`crate::luanti::summaries`]) take three sixteenths of
//! `--cache-size`: 40,853 blocks with the default. A pass in name order over a world with more blocks (every
//! `rsync` pass) drops each of them before the next pass comes back to it, and a backup that
//! mounts for each run (a cron job) starts every run with none. So summaries are also written
//! to a sidecar of the store in the state directory (`*.summaries.sqlite`, beside the
//! recorded times' own, so that neither waits for the other; never in the world), by block
//! position, with the hash of the stored bytes they were made from, and read
//! back when memory has none. A summary read from disk is used exactly as one kept in memory:
//! only once the block's stored bytes were seen to hash the same.
//!
//! Views are rendered by worldfs's own code, which another version may change, so a row
//! holds the hash of the sources of the code that wrote it ([`build`]) and is used by code
//! built from the same sources only; the first mount by other code empties the table.
//!
//! Rows are keyed x, then y, then z, so the blocks of one column (one x and y, every z) are
//! neighbours: a walk in name order (every `rsync` pass, `ls` in the C locale) asks for a
//! column's blocks one after another (`-1,2,-1`, `-1,2,-10`, …), and a second miss in the
//! same column reads the whole column at once ([`COLUMNS`] kept; a walk in another order
//! reads rows one by one, as before). What a column read holds is as good as a row read
//! later: a summary is used only for the stored bytes it names.
//!
//! Rows are written in groups of [`WRITE_BATCH`], at `fsync` and at unmount. A full group
//! is written by a thread of its own on a connection of its own, so a walk's first pass
//! (`find` decodes every block once) hands its summaries over and goes on (it waits only if
//! the next group fills before the last is written, and at `fsync`), and a lookup reads the
//! rows already written (the file's log lets it) or finds the summary in a group not written
//! yet. They are a
//! cache: a crash of the daemon loses at most the two groups not written yet (a crash of the
//! machine may also lose groups written since the log was last folded), which costs only
//! decoding those blocks again; a sidecar that cannot be opened, read or written (logged once) leaves the
//! summaries in memory only. A read-only mount keeps them too: the sidecar is the user's,
//! never the world's.

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension};

use crate::luanti::codec::block::BlockPos;
use crate::luanti::store::map::AxisOrder;
use crate::luanti::summaries::Summary;
use crate::storekit::mtimes::{content_hash_parts, fold_log, open_sidecar, sidecar_file};

/// How long a write waits for another mount of the same world writing its summaries: they
/// are a cache, and a request thread waits.
const BUSY_TIMEOUT: Duration = Duration::from_millis(100);

/// How many changed summaries wait before they are written: as many as a table of 8,192
/// slots holds (seven eighths of it, 7,168), less room for those put by other requests
/// while one waits for the writer (up to 128 request threads); about 0.76 MiB. While a group
/// is written (about 0.64 MiB, sorted) the next fills, and a request that fills it waits for
/// the write: at most two groups (and one summary a request thread) are held, about 1.4 MiB,
/// outside `--cache-size`. A group
/// is written in key order
/// and rewrites every page of the table it lands on: a walk in another order than the key's
/// (`find` goes in the map's order) puts each row of a small group on a page of its own. With
/// groups of 1,024 written by the request threads, a first `find` walk of 131,383 blocks
/// wrote 596,596 pages of 4 KiB (log and file) and waited for 314 `fsync`s.
pub const WRITE_BATCH: usize = 7040;

/// Columns read whole kept at once (two readers by name, each a column at a time, and the
/// one each left).
const COLUMNS: usize = 4;

/// The most rows a column read keeps (every z the engine can load); a column with more is
/// read row by row. At most about 360 KiB a column.
const COLUMN_ROWS: usize = 4096;

/// The summaries on disk of one column of blocks (one x and y), read at once.
struct Column {
    x: i16,
    y: i16,
    /// `(z, summary)`, ascending z: every row the column had when read.
    rows: Vec<(i16, Summary)>,
}

impl Column {
    fn holds(&self, pos: BlockPos) -> bool {
        (self.x, self.y) == (pos.x, pos.y)
    }

    /// Sets the summary at `z` (a row added or replaced).
    fn set(&mut self, z: i16, s: Summary) {
        match self.rows.binary_search_by_key(&z, |(z, _)| *z) {
            Ok(i) => self.rows[i].1 = s,
            Err(i) => self.rows.insert(i, (z, s)),
        }
    }

    /// What the column read for `pos`, which it holds: `None`, no row.
    fn get(&self, z: i16) -> Option<Summary> {
        self.rows
            .binary_search_by_key(&z, |(z, _)| *z)
            .ok()
            .map(|i| self.rows[i].1)
    }
}

/// The column read lately, and the column of the last row read alone.
#[derive(Default)]
struct Columns {
    kept: VecDeque<Column>,
    last_miss: Option<(i16, i16)>,
}

/// Changed summaries on their way to disk.
#[derive(Default)]
struct Pending {
    /// Not written yet.
    unwritten: HashMap<BlockPos, Summary>,
    /// The group being written, in key order (empty: none): its rows are on disk once it
    /// is emptied.
    writing: Arc<Vec<(BlockPos, Summary)>>,
    /// How many groups were written: a column read during which one was is not kept (the
    /// group's rows may be neither in what it read nor on their way any more).
    groups: u64,
}

impl Pending {
    /// The summary of the block at `pos` on its way to disk, the last put.
    fn get(&self, pos: BlockPos) -> Option<Summary> {
        self.unwritten.get(&pos).copied().or_else(|| {
            self.writing
                .binary_search_by_key(&key(pos), |(at, _)| key(*at))
                .ok()
                .map(|i| self.writing[i].1)
        })
    }
}

/// What writes summaries: shared with the thread that writes a group.
struct Writer {
    pending: Mutex<Pending>,
    /// Signalled when a group was written.
    group_written: Condvar,
    /// The connection that writes, apart from the one that reads.
    conn: Mutex<Connection>,
    build: i64,
    failed: Arc<AtomicBool>,
}

impl Writer {
    fn pending(&self) -> MutexGuard<'_, Pending> {
        crate::error::recover(&self.pending)
    }

    /// Waits until no group is being written.
    fn idle<'a>(&self, mut p: MutexGuard<'a, Pending>) -> MutexGuard<'a, Pending> {
        while !p.writing.is_empty() {
            p = self
                .group_written
                .wait(p)
                .unwrap_or_else(|e| e.into_inner());
        }
        p
    }

    /// Writes the group taken (in key order: neighbours in the table one after another),
    /// then lets the next be taken (also if the write panicked: nothing waits forever).
    fn write_group(&self) {
        struct Done<'a>(&'a Writer);
        impl Drop for Done<'_> {
            fn drop(&mut self) {
                let mut p = self.0.pending();
                p.writing = Arc::default();
                p.groups += 1;
                self.0.group_written.notify_all();
            }
        }
        let _done = Done(self);
        let rows = Arc::clone(&self.pending().writing);
        let written =
            crate::error::recover(&self.conn)
                .transaction()
                .and_then(|tx| {
                    for (pos, s) in rows.iter() {
                        tx.prepare_cached(
                        "REPLACE INTO summaries (pos, hash, build, data) VALUES (?1, ?2, ?3, ?4)",
                    )?
                    .execute(params![key(*pos), s.hash as i64, self.build, s.encode()])?;
                    }
                    tx.commit()
                });
        if let Err(e) = written {
            failed_once(&self.failed, &e);
        }
    }
}

/// The summaries of one store's blocks in its sidecar.
pub struct SummaryFile {
    /// The connection that reads.
    conn: Mutex<Connection>,
    /// The build whose rows are used and written (see [`build`]).
    build: i64,
    /// What writes summaries (`None`: the sidecar could only be opened for reading).
    writer: Option<Arc<Writer>>,
    /// Whether the sidecar held rows of this build when it was opened.
    rows_at_open: bool,
    /// The blocks whose summaries this mount wrote, one bit per hash of their position (a
    /// bit may stand for several blocks): without rows at open, only those are looked up,
    /// so the first walk of a world asks the disk for nothing it never wrote.
    written: Box<[AtomicU64]>,
    /// Columns read whole (see the module's doc).
    columns: Mutex<Columns>,
    /// Queries made by lookups.
    #[cfg(test)]
    queries: std::sync::atomic::AtomicUsize,
    /// A read or write failed (logged once).
    failed: Arc<AtomicBool>,
}

/// What identifies the code that renders views: a hash of the sources it was built from
/// (`build.rs`), so a summary written by other code is never used.
pub fn build() -> i64 {
    u64::from_str_radix(env!("WORLDFS_SOURCE_HASH"), 16).unwrap_or(0) as i64
}

/// Bits in [`SummaryFile::written`]: 128 KiB, about one bit in eight set after a walk of a
/// world of 131,383 blocks.
const WRITTEN_BITS: usize = 1 << 20;

/// The key of a block's row: x, then y, then z (see the module's doc).
fn key(pos: BlockPos) -> i64 {
    AxisOrder::Xyz.number(pos) as i64
}

/// The word and bit of [`SummaryFile::written`] that stand for the block at `pos`.
fn written_bit(pos: BlockPos) -> (usize, u64) {
    let i = (content_hash_parts(&[&key(pos).to_le_bytes()]) as usize) % WRITTEN_BITS;
    (i / 64, 1 << (i % 64))
}

impl SummaryFile {
    /// The summaries kept for the store at `store_path` (`None`, logged, when there is no
    /// sidecar to keep them in): read-write where the sidecar can be written, else read-only.
    pub fn open(store_path: &Path) -> Option<SummaryFile> {
        let file = sidecar_file(store_path, "summaries")?;
        let build = build();
        match Self::at(&file, build, true).or_else(|_| Self::at(&file, build, false)) {
            Ok(f) => f,
            Err(e) => {
                log::warn!(
                    "block summaries at {} unavailable ({e}): they are kept in memory only",
                    file.display()
                );
                None
            }
        }
    }

    /// The summaries of `build` in the sidecar `file`, written to when `writable` (`None`
    /// when it is read-only and there is none to read).
    pub(crate) fn at(
        file: &Path,
        build: i64,
        writable: bool,
    ) -> rusqlite::Result<Option<SummaryFile>> {
        let Some(mut conn) = open_sidecar(file, !writable)? else {
            return Ok(None);
        };
        conn.busy_timeout(BUSY_TIMEOUT)?;
        let failed = Arc::new(AtomicBool::new(false));
        let mut writer = None;
        if writable {
            conn.execute_batch(
                "CREATE TABLE IF NOT EXISTS summaries (pos INTEGER PRIMARY KEY, \
                 hash INTEGER NOT NULL, build INTEGER NOT NULL, data BLOB NOT NULL);
                 CREATE TABLE IF NOT EXISTS summaries_build (build INTEGER NOT NULL)",
            )?;
            let tx = conn.transaction()?;
            let last: Option<i64> = tx
                .query_row("SELECT build FROM summaries_build", [], |r| r.get(0))
                .optional()?;
            if last != Some(build) {
                // Other code's rows are of no use (rows of another mount running other
                // code at once are never used either: every lookup asks for this build's).
                tx.execute("DELETE FROM summaries", [])?;
                tx.execute("DELETE FROM summaries_build", [])?;
                tx.execute("INSERT INTO summaries_build (build) VALUES (?1)", [build])?;
            }
            tx.commit()?;
            if let Some(c) = open_sidecar(file, false)? {
                c.busy_timeout(BUSY_TIMEOUT)?;
                writer = Some(Arc::new(Writer {
                    pending: Mutex::new(Pending::default()),
                    group_written: Condvar::new(),
                    conn: Mutex::new(c),
                    build,
                    failed: Arc::clone(&failed),
                }));
            }
        }
        // A read-only sidecar without the table has nothing for us.
        let rows_at_open = conn
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM summaries WHERE build = ?1)",
                [build],
                |r| r.get(0),
            )
            .unwrap_or(false);
        Ok(Some(SummaryFile {
            conn: Mutex::new(conn),
            build,
            writer,
            rows_at_open,
            written: (0..WRITTEN_BITS / 64).map(|_| AtomicU64::new(0)).collect(),
            columns: Mutex::new(Columns::default()),
            #[cfg(test)]
            queries: std::sync::atomic::AtomicUsize::new(0),
            failed,
        }))
    }

    /// The summary kept for the block at `pos`, whatever bytes it names.
    pub fn get(&self, pos: BlockPos) -> Option<Summary> {
        if let Some(w) = &self.writer {
            if let Some(s) = w.pending().get(pos) {
                return Some(s);
            }
        }
        if !self.rows_at_open && !self.maybe_written(pos) {
            return None;
        }
        let whole_column = {
            let mut columns = crate::error::recover(&self.columns);
            if let Some(c) = columns.kept.iter().find(|c| c.holds(pos)) {
                return c.get(pos.z);
            }
            let again = columns.last_miss == Some((pos.x, pos.y));
            columns.last_miss = Some((pos.x, pos.y));
            again
        };
        // Asked after the summaries on their way: what was not among them any more was
        // committed before, and a read begun now sees it.
        let c = crate::error::recover(&self.conn);
        #[cfg(test)]
        self.queries.fetch_add(1, Ordering::Relaxed);
        if whole_column {
            let groups = self.writer.as_ref().map(|w| w.pending().groups);
            match self.read_column(&c, pos) {
                Ok(Some(mut column)) => {
                    // Kept under the columns' lock from here: a summary put from now on
                    // finds the column and changes it; one put before is on its way, and
                    // newer than any row the read found, or was written before the read
                    // began, unless a group was written during the read.
                    let mut columns = crate::error::recover(&self.columns);
                    let mut keep = true;
                    if let Some(w) = &self.writer {
                        let p = w.pending();
                        keep = Some(p.groups) == groups;
                        let writing = p.writing.iter().map(|(at, s)| (at, s));
                        for (at, s) in writing.chain(p.unwritten.iter()) {
                            if column.holds(*at) {
                                column.set(at.z, *s);
                            }
                        }
                    }
                    let found = column.get(pos.z);
                    if keep {
                        columns.kept.push_back(column);
                        while columns.kept.len() > COLUMNS {
                            columns.kept.pop_front();
                        }
                    }
                    return found;
                }
                Ok(None) => {}
                Err(e) => {
                    failed_once(&self.failed, &e);
                    return None;
                }
            }
        }
        let row = c
            .prepare_cached("SELECT hash, data FROM summaries WHERE pos = ?1 AND build = ?2")
            .and_then(|mut st| {
                st.query_row(params![key(pos), self.build], |r| {
                    Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?))
                })
                .optional()
            });
        match row {
            Ok(row) => row.and_then(|(hash, data)| Summary::decode(hash as u64, &data)),
            Err(e) => {
                failed_once(&self.failed, &e);
                None
            }
        }
    }

    /// Every row of the column of `pos` (`None`: more than [`COLUMN_ROWS`]).
    fn read_column(&self, c: &Connection, pos: BlockPos) -> rusqlite::Result<Option<Column>> {
        let at = |z: i16| key(BlockPos { z, ..pos });
        let mut st = c.prepare_cached(
            "SELECT pos, hash, data FROM summaries WHERE pos BETWEEN ?1 AND ?2 AND build = ?3 \
             ORDER BY pos LIMIT ?4",
        )?;
        let mut rows = Vec::new();
        let mut found = st.query(params![
            at(i16::MIN),
            at(i16::MAX),
            self.build,
            COLUMN_ROWS as i64 + 1
        ])?;
        while let Some(r) = found.next()? {
            let z = AxisOrder::Xyz.pos(r.get::<_, i64>(0)? as u64).z;
            if let Some(s) = Summary::decode(r.get::<_, i64>(1)? as u64, &r.get::<_, Vec<u8>>(2)?) {
                rows.push((z, s));
            }
        }
        Ok((rows.len() <= COLUMN_ROWS).then_some(Column {
            x: pos.x,
            y: pos.y,
            rows,
        }))
    }

    /// Keeps `s` as the summary of the block at `pos` (written with its group: a full group
    /// by a thread of its own, once the group before is written).
    pub fn put(&self, pos: BlockPos, s: Summary) {
        let Some(w) = &self.writer else {
            return;
        };
        // On its way and in a kept column at once (two puts of one block leave both on the
        // last); a column read meanwhile lays what is on its way over what it read (`get`).
        let full = {
            let mut columns = crate::error::recover(&self.columns);
            let mut p = w.pending();
            p.unwritten.insert(pos, s);
            if let Some(c) = columns.kept.iter_mut().find(|c| c.holds(pos)) {
                c.set(pos.z, s);
            }
            p.unwritten.len() >= WRITE_BATCH
        };
        if !full {
            return;
        }
        let due = {
            let mut p = w.idle(w.pending());
            // Another request may have taken the group while this one waited.
            p.unwritten.len() >= WRITE_BATCH && self.take_group(&mut p)
        };
        if due {
            let writing = Arc::clone(w);
            let spawned = std::thread::Builder::new()
                .name("worldfs-summaries".into())
                .spawn(move || writing.write_group());
            if spawned.is_err() {
                w.write_group();
            }
        }
    }

    /// Makes the waiting summaries the group being written (false: none wait).
    fn take_group(&self, p: &mut Pending) -> bool {
        if p.unwritten.is_empty() {
            return false;
        }
        // Marked before they are on disk: a lookup finds them among those being written
        // until they are.
        for pos in p.unwritten.keys() {
            let (word, bit) = written_bit(*pos);
            self.written[word].fetch_or(bit, Ordering::Release);
        }
        let mut group: Vec<(BlockPos, Summary)> = p.unwritten.drain().collect();
        group.sort_unstable_by_key(|(pos, _)| key(*pos));
        p.writing = Arc::new(group);
        true
    }

    /// How many changed summaries wait to be written (tests).
    #[cfg(test)]
    pub(crate) fn waiting(&self) -> usize {
        self.writer
            .as_ref()
            .map_or(0, |w| w.pending().unwritten.len())
    }

    /// Writes the waiting summaries now and folds the sidecar's log into it (`fsync`,
    /// unmount).
    pub fn flush(&self) {
        self.write();
        if let Some(w) = &self.writer {
            fold_log(&crate::error::recover(&w.conn), BUSY_TIMEOUT);
        }
    }

    /// Writes the waiting summaries now (after the group being written, if any).
    pub fn write(&self) {
        let Some(w) = &self.writer else {
            return;
        };
        let due = {
            let mut p = w.idle(w.pending());
            self.take_group(&mut p)
        };
        if due {
            w.write_group();
        }
    }

    /// Whether this mount may have written the summary of the block at `pos`.
    fn maybe_written(&self, pos: BlockPos) -> bool {
        let (word, bit) = written_bit(pos);
        self.written[word].load(Ordering::Acquire) & bit != 0
    }
}

/// Logs the first failure to read or write the sidecar.
fn failed_once(failed: &AtomicBool, e: &rusqlite::Error) {
    if !failed.swap(true, Ordering::Relaxed) {
        log::warn!("block summaries on disk unavailable ({e}): blocks are decoded to be listed");
    }
}

impl Drop for SummaryFile {
    fn drop(&mut self) {
        self.write();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::luanti::summaries::Summaries;

    fn pos(x: i16) -> BlockPos {
        BlockPos { x, y: -3, z: 7 }
    }

    fn opened(file: &Path, build: i64) -> SummaryFile {
        SummaryFile::at(file, build, true)
            .expect("opens")
            .expect("a sidecar")
    }

    /// A walk in name order reads a column's rows at its second miss in that column, and
    /// answers the rest of the column from it (a block with no row too); a walk in the
    /// database's order (x changing from one block to the next) reads row by row. Both
    /// answer what was written, and a summary changed since the column was read is the new.
    #[test]
    fn a_second_miss_in_a_column_reads_the_column() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("s.sqlite");
        let at = |x: i16, y: i16, z: i16| BlockPos { x, y, z };
        let summary = |p: BlockPos| {
            let mut s = Summary::new(key(p) as u64);
            s.set_view(2, (p.z + 100) as usize, None);
            s
        };
        let f = opened(&file, 1);
        let zs: Vec<i16> = (-12..12).filter(|z| *z != 3).collect();
        for x in [-1, 0, 7] {
            for &z in &zs {
                f.put(at(x, 2, z), summary(at(x, 2, z)));
            }
        }
        f.flush();
        drop(f);
        let f = opened(&file, 1);
        let queries = |f: &SummaryFile| f.queries.load(Ordering::Relaxed);
        // Name order: z as text sorts -1, -10, -11, -12, -2, …
        let mut by_name: Vec<i16> = (-12..12).collect();
        by_name.sort_by_key(|z| z.to_string());
        for (i, &z) in by_name.iter().enumerate() {
            let got = f.get(at(-1, 2, z)).map(|s| s.encode());
            let want = (z != 3).then(|| summary(at(-1, 2, z)).encode());
            assert_eq!(got, want, "z {z}");
            assert_eq!(queries(&f), (i + 1).min(2), "after z {z}");
        }
        let mut changed = summary(at(-1, 2, 5));
        changed.set_view(0, 77, None);
        f.put(at(-1, 2, 5), changed);
        f.write();
        assert_eq!(
            f.get(at(-1, 2, 5)).map(|s| s.encode()),
            Some(changed.encode())
        );
        let before = queries(&f);
        for &z in &zs[..4] {
            for x in [0, 7] {
                assert_eq!(
                    f.get(at(x, 2, z)).map(|s| s.encode()),
                    Some(summary(at(x, 2, z)).encode())
                );
            }
        }
        assert_eq!(
            queries(&f) - before,
            8,
            "one row a block in the database's order"
        );
    }

    /// `fsync` and unmount leave no log beside the sidecar, and lose no row.
    #[test]
    fn a_flush_folds_the_log_into_the_sidecar() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("s.sqlite");
        let f = opened(&file, 1);
        let mut s = Summary::new(5);
        s.set_meta(9, 2);
        for x in 0..2000 {
            f.put(pos(x), s);
        }
        f.write();
        assert!(
            crate::storekit::mtimes::tests::log_len(&file) > 0,
            "a group went to the log"
        );
        f.flush();
        assert_eq!(crate::storekit::mtimes::tests::log_len(&file), 0);
        drop(f);
        let again = opened(&file, 1);
        assert_eq!(again.get(pos(1999)).map(|r| r.encode()), Some(s.encode()));
    }

    /// A full group goes to disk on a thread of its own: while it is written (here held up
    /// by taking the writer's connection), its summaries are found, and one put again is
    /// found as put last; a column read meanwhile holds what was on its way, so it answers
    /// the same once the group is written; every row is then on disk, the one put again as
    /// put last.
    #[test]
    fn full_groups_are_written_aside_and_found_meanwhile() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("s.sqlite");
        let column = |z: i16| BlockPos { x: 7, y: 5, z };
        let f = opened(&file, 1);
        f.put(column(-500), Summary::new(1));
        f.flush();
        drop(f);
        let f = opened(&file, 1);
        let at = |i: usize| BlockPos {
            x: (i % 128) as i16,
            y: 5,
            z: (i / 128) as i16,
        };
        let summary = |i: usize, size: usize| {
            let mut s = Summary::new(i as u64);
            s.set_view(1, size, None);
            s
        };
        let writer = f.writer.as_ref().expect("writable");
        let held = writer.conn.lock().expect("the writer's connection");
        for i in 0..WRITE_BATCH {
            f.put(at(i), summary(i, 1));
        }
        assert_eq!(f.waiting(), 0, "the group was taken");
        assert!(!writer.pending().writing.is_empty(), "and is being written");
        f.put(at(7), summary(7, 2));
        for i in (0..WRITE_BATCH).step_by(61).chain([7]) {
            let size = if i == 7 { 2 } else { 1 };
            assert_eq!(
                f.get(at(i)).map(|s| s.encode()),
                Some(summary(i, size).encode()),
                "block {i} while its group is written"
            );
        }
        // Two misses in the column of block 7 read it from disk (one row there).
        assert!(f.get(column(-1)).is_none());
        assert!(f.get(column(-2)).is_none());
        drop(held);
        f.write();
        assert!(writer.pending().writing.is_empty());
        assert_eq!(f.waiting(), 0);
        for (i, size) in [(7, 2), (7 + 128, 1), (7 + 256, 1)] {
            assert_eq!(
                f.get(at(i)).map(|s| s.encode()),
                Some(summary(i, size).encode()),
                "block {i} from the column read while it was on its way"
            );
        }
        drop(f);
        let rows: i64 = Connection::open(&file)
            .and_then(|c| c.query_row("SELECT COUNT(*) FROM summaries", [], |r| r.get(0)))
            .expect("counts");
        assert_eq!(rows, WRITE_BATCH as i64 + 1, "every summary is on disk");
        let again = opened(&file, 1);
        for i in (0..WRITE_BATCH).step_by(89).chain([7]) {
            let size = if i == 7 { 2 } else { 1 };
            assert_eq!(
                again.get(at(i)).map(|s| s.encode()),
                Some(summary(i, size).encode())
            );
        }
    }

    /// What one mount noted is read back by the next mount of the same build, and by no
    /// other build; a new build empties the table of the old one's rows.
    #[test]
    fn summaries_outlast_the_mount_for_the_same_build_only() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("s.sqlite");
        let first = Summaries::keeping(1, Some(opened(&file, 1)));
        first.note(pos(1), 11, |s| {
            s.set_view(0, 10, Some(5));
            s.set_view(2, 1 << 20, None);
            s.set_meta(9, 2);
        });
        // Past memory (it keeps one): written with the others at drop.
        first.note(pos(2), 22, |s| s.set_meta(8, 0));
        let noted = (first.get(pos(1)), first.get(pos(2)));
        drop(first);
        let again = Summaries::keeping(10, Some(opened(&file, 1)));
        for (p, want) in [(pos(1), noted.0), (pos(2), noted.1)] {
            let got = again.get(p).expect("kept on disk");
            let want = want.expect("noted");
            assert_eq!((got.hash, got.encode()), (want.hash, want.encode()));
        }
        assert!(again.get(pos(3)).is_none());
        drop(again);
        let other = Summaries::keeping(10, Some(opened(&file, 2)));
        assert!(
            other.get(pos(1)).is_none(),
            "another build renders otherwise"
        );
        drop(other);
        let rows: i64 = Connection::open(&file)
            .and_then(|c| c.query_row("SELECT COUNT(*) FROM summaries", [], |r| r.get(0)))
            .expect("counts");
        assert_eq!(rows, 0, "the old build's rows are gone");
    }

    /// In a mount that found no rows on disk, a summary written and then dropped from
    /// memory is read back from disk; one never written is not looked up.
    #[test]
    fn a_summary_written_by_this_mount_is_read_back_once_memory_dropped_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("s.sqlite");
        let f = opened(&file, 1);
        assert!(!f.rows_at_open);
        let s = Summaries::keeping(1, Some(f));
        s.note(pos(1), 11, |s| s.set_view(1, 3, None));
        s.flush();
        s.note(pos(2), 12, |s| s.set_view(1, 4, None));
        let back = s.get(pos(1)).expect("read back from disk");
        assert_eq!((back.hash, back.size(1)), (11, Some(3)));
        assert!(s.get(pos(3)).is_none());
    }

    /// A summary noted again unchanged is not written again; a changed one is.
    #[test]
    fn only_changed_summaries_wait_to_be_written() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("s.sqlite");
        let s = Summaries::keeping(10, Some(opened(&file, 1)));
        s.note(pos(1), 11, |s| s.set_view(1, 3, None));
        s.flush();
        s.note(pos(1), 11, |s| s.set_view(1, 3, None));
        let waiting = |s: &Summaries| s.file_waiting();
        assert_eq!(waiting(&s), 0);
        s.note(pos(1), 11, |s| s.set_view(4, 3, None));
        assert_eq!(waiting(&s), 1);
    }

    /// A sidecar opened read-only (another user's state folder, a read-only disk) is read,
    /// never written.
    #[test]
    fn a_read_only_sidecar_is_read_and_not_written() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("s.sqlite");
        assert!(SummaryFile::at(&file, 1, false).expect("opens").is_none());
        let s = Summaries::keeping(10, Some(opened(&file, 1)));
        s.note(pos(1), 11, |s| s.set_view(1, 3, None));
        drop(s);
        let ro = SummaryFile::at(&file, 1, false)
            .expect("opens")
            .expect("a sidecar");
        let s = Summaries::keeping(10, Some(ro));
        assert!(s.get(pos(1)).is_some());
        s.note(pos(2), 12, |s| s.set_view(1, 3, None));
        assert_eq!(s.file_waiting(), 0);
        drop(s);
        let s = Summaries::keeping(10, Some(opened(&file, 1)));
        assert!(s.get(pos(2)).is_none());
    }

    /// Whatever bytes a row holds, reading it does not panic, and only a summary's length
    /// reads as one.
    #[test]
    fn any_row_bytes_read_without_panic() {
        let mut state = 0x1234_5678_9abc_def0u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let good = {
            let s = Summaries::keeping(1, None);
            s.note(pos(1), 1, |s| s.set_meta(3, 1));
            s.get(pos(1)).expect("noted").encode()
        };
        for _ in 0..20_000 {
            let len = (next() % 96) as usize;
            let mut data: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            if next() % 4 == 0 {
                data = good.clone();
                let i = (next() as usize) % data.len();
                data[i] = next() as u8;
            }
            if let Some(s) = Summary::decode(1, &data) {
                assert_eq!(data.len(), good.len());
                assert_eq!(s.encode(), data, "what reads writes back the same");
            }
        }
    }
}
