//! SQLite commits cut off by a kill, rolled back before a read-only connection reads.
//!
//! A writer killed inside a commit (the engine, or this daemon) leaves `NAME-journal`
//! holding the pages as they were before it: a "hot" journal. SQLite rolls it back at the
//! next read of any connection that may write; a read-only connection cannot, and fails
//! every statement with "attempt to write a readonly database". So a world a kill left so
//! could be loaded by the engine but not mounted, checked or described. Before a read-only
//! connection is opened, [`roll_back_cut_commit`] lets a read-write one read once. That is
//! safe beside a running writer: SQLite rolls back only a journal no process holds a lock
//! for, and otherwise the read just waits for the writer's commit, as any reader does.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use crate::error::{Error, Result};

/// The rollback journal of the database `path`.
fn journal_of(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push("-journal");
    PathBuf::from(name)
}

/// Rolls back the commit a kill cut off in the database `path`, if its journal is there and
/// not empty (whether it is hot, SQLite decides). True when a journal was there and the
/// database then read. A journal of a commit in progress (another process, or this one)
/// is left to its writer: the read waits at most `busy` for it, and where it is still busy
/// this gives `false` and the read-only connection goes on as it would have. Fails, naming
/// the journal and what to do, only where the database cannot be opened for writing; other
/// errors are SQLite's own.
pub fn roll_back_cut_commit(path: &Path, busy: Duration) -> Result<bool> {
    let journal = journal_of(path);
    if std::fs::metadata(&journal).map_or(true, |m| !m.is_file() || m.len() == 0) {
        return Ok(false);
    }
    let read = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .and_then(|conn| {
        conn.busy_timeout(busy)?;
        conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| {
            r.get::<_, i64>(0)
        })
    });
    let e = match read {
        Ok(_) => {
            if !journal.exists() {
                log::info!(
                    "{}: its journal is gone (a commit cut off was rolled back, or one in \
                     progress ended)",
                    path.display()
                );
            }
            return Ok(true);
        }
        Err(e) => e,
    };
    use rusqlite::ErrorCode::{
        CannotOpen, DatabaseBusy, DatabaseLocked, PermissionDenied, ReadOnly,
    };
    match e.sqlite_error_code() {
        Some(DatabaseBusy | DatabaseLocked) => Ok(false),
        Some(ReadOnly | CannotOpen | PermissionDenied) => Err(Error::new(
            libc::EROFS,
            format!(
                "{}: a commit was cut off (its journal {} is left) and cannot be rolled back \
                 here ({e}): open the world once where it can be written (the game, or a \
                 mount without --read-only)",
                path.display(),
                journal.display()
            ),
        )),
        _ => Err(Error::from(e).context(path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A database whose last commit a kill cut off, made at `path`: a copy of a database and
    /// its journal taken while a transaction is half written to the file (a tiny page cache
    /// spills the changed pages before the commit), as a kill at that moment leaves them.
    fn cut_off(path: &Path) {
        let live = path.with_extension("live");
        let conn = Connection::open(&live).unwrap();
        conn.execute_batch(
            "CREATE TABLE t (v BLOB); INSERT INTO t VALUES (zeroblob(4096)), (zeroblob(4096));
             PRAGMA cache_size = 1; BEGIN; UPDATE t SET v = randomblob(4096);
             INSERT INTO t SELECT randomblob(4096) FROM t, t AS u, t AS w;",
        )
        .unwrap();
        std::fs::copy(&live, path).unwrap();
        std::fs::copy(journal_of(&live), journal_of(path)).unwrap();
        conn.execute_batch("ROLLBACK").unwrap();
    }

    #[test]
    fn a_commit_in_progress_is_left_to_its_writer() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("map.sqlite");
        let conn = Connection::open(&db).unwrap();
        conn.execute_batch(
            "CREATE TABLE t (v BLOB); INSERT INTO t VALUES (zeroblob(4096)), (zeroblob(4096));
             PRAGMA cache_size = 1; BEGIN EXCLUSIVE; UPDATE t SET v = randomblob(4096);
             INSERT INTO t SELECT randomblob(4096) FROM t, t AS u, t AS w;",
        )
        .unwrap();
        assert!(journal_of(&db).metadata().unwrap().len() > 0);
        assert!(!roll_back_cut_commit(&db, Duration::from_millis(50)).unwrap());
        conn.execute_batch("COMMIT").unwrap();
        assert!(!journal_of(&db).exists());
    }

    #[test]
    fn a_cut_off_commit_is_rolled_back_so_a_read_only_connection_reads() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("map.sqlite");
        cut_off(&db);
        assert!(
            journal_of(&db).metadata().unwrap().len() > 0,
            "a hot journal"
        );
        let read_only = || {
            Connection::open_with_flags(&db, OpenFlags::SQLITE_OPEN_READ_ONLY)
                .unwrap()
                .query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0))
        };
        let e = read_only().unwrap_err();
        assert!(e.to_string().contains("readonly"), "{e}");
        assert!(roll_back_cut_commit(&db, Duration::from_secs(1)).unwrap());
        assert_eq!(read_only().unwrap(), 2, "the rows as before the cut commit");
        assert!(!roll_back_cut_commit(&db, Duration::from_secs(1)).unwrap());
    }
}
