//! `--snapshot`: a read-only mount of the whole world as it was at one moment, while a
//! server goes on writing it, without ever blocking the server.
//!
//! Set once, before the tree opens (a daemon serves one mount). From then on:
//! - every SQLite connection is opened inside a read transaction held for its life, which
//!   in WAL mode reads the database as it was when the transaction began, whatever is
//!   committed after. In rollback-journal mode (the engine's default) a reader holding a
//!   transaction keeps the writer from committing, and the engine gives up on a database
//!   locked for 3 seconds: such a database is refused. The map keeps one connection (no
//!   pool), so that all its reads share one moment; each database is its own moment.
//! - every PostgreSQL connection to one database runs in the same `REPEATABLE READ`
//!   snapshot: the first connection to a database exports it (`pg_export_snapshot`) and
//!   is held, in its transaction, for the mount's life; every later one, from any store of
//!   the mount, imports it (`SET TRANSACTION SNAPSHOT`). Readers never block writers there.
//!
//! Backends that cannot hold a moment (LevelDB, Redis, the files backends) are refused by
//! the tree when they hold data (see `LuantiTree::open`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use rusqlite::Connection;

use crate::error::{Error, Result};

static ON: AtomicBool = AtomicBool::new(false);

/// The exported snapshots: (database, snapshot id, the exporting connection, held).
static EXPORTED: Mutex<Vec<(String, String, postgres::Client)>> = Mutex::new(Vec::new());

/// Makes this process's stores read one moment (see the module documentation).
pub fn start() {
    ON.store(true, Ordering::SeqCst);
}

/// Whether the stores read one moment.
pub fn on() -> bool {
    ON.load(Ordering::SeqCst)
}

/// Whether the SQLite database at `path` is in another journal mode than WAL (looked at
/// without changing it; one that cannot be read is left to its opening to report).
pub fn not_in_wal_mode(path: &std::path::Path) -> bool {
    let flags =
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
    Connection::open_with_flags(path, flags)
        .and_then(|c| c.query_row("PRAGMA journal_mode", [], |r| r.get::<_, String>(0)))
        .is_ok_and(|mode| !mode.eq_ignore_ascii_case("wal"))
}

/// Begins the read transaction `conn` (on `path`) keeps for its life; refuses a database
/// not in WAL mode, with the reason and what to do.
pub fn begin_sqlite(conn: &Connection, path: &std::path::Path) -> Result<()> {
    let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(Error::new(
            libc::EPERM,
            format!(
                "{0}: --snapshot needs SQLite's WAL mode, and this database is in {mode} mode \
                 (the engine's default), where a reader holding a moment would block the \
                 server's saves; stop the server, run `sqlite3 {0} 'PRAGMA journal_mode=WAL'` \
                 (the engine keeps WAL mode from then on), and start the server again",
                path.display()
            ),
        ));
    }
    // A read transaction begins at its first read, and holds that moment until it ends.
    conn.execute_batch("BEGIN")?;
    conn.query_row("SELECT COUNT(*) FROM sqlite_master", [], |r| {
        r.get::<_, i64>(0)
    })?;
    Ok(())
}

/// Puts `client` (connected by `connect` to `database`) into the mount's snapshot of that
/// database, exporting it first from a connection of its own if none is yet.
pub fn begin_postgres(
    client: &mut postgres::Client,
    database: &str,
    connect: impl FnOnce() -> Result<postgres::Client>,
) -> Result<()> {
    let pg = |e: postgres::Error| Error::new(libc::EIO, format!("PostgreSQL: {e}"));
    const BEGIN: &str = "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY";
    let mut exported = crate::error::lock_named(&EXPORTED, "snapshots")?;
    let id = match exported.iter().find(|(d, _, _)| d == database) {
        Some((_, id, _)) => id.clone(),
        None => {
            let mut holder = connect()?;
            holder.batch_execute(BEGIN).map_err(pg)?;
            let id: String = holder
                .query_one("SELECT pg_export_snapshot()", &[])
                .map_err(pg)?
                .get(0);
            log::info!("--snapshot: {database} read as of snapshot {id}");
            exported.push((database.to_string(), id.clone(), holder));
            id
        }
    };
    drop(exported);
    client.batch_execute(BEGIN).map_err(pg)?;
    // The id comes from the server (hex digits and dashes); quoted all the same.
    let quoted = id.replace('\'', "''");
    client
        .batch_execute(&format!("SET TRANSACTION SNAPSHOT '{quoted}'"))
        .map_err(|e| {
            Error::new(
                libc::EIO,
                format!(
                    "PostgreSQL ({database}): the mount's snapshot is gone ({e}): the server \
                     restarted or ended the connection holding it; mount again"
                ),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A database in rollback-journal mode is refused, naming WAL and what to do; one in
    /// WAL mode reads the moment its transaction began, whatever is committed after.
    #[test]
    fn sqlite_reads_one_moment_in_wal_mode_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("map.sqlite");
        let writer = Connection::open(&path).unwrap();
        writer
            .execute_batch("CREATE TABLE t(v); INSERT INTO t VALUES (1);")
            .unwrap();
        let reader = Connection::open(&path).unwrap();
        let e = begin_sqlite(&reader, &path).unwrap_err();
        assert_eq!(e.errno(), libc::EPERM);
        assert!(e.to_string().contains("WAL"), "{e}");
        drop(reader);
        writer
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0))
            .unwrap();
        let reader = Connection::open(&path).unwrap();
        begin_sqlite(&reader, &path).unwrap();
        writer.execute_batch("UPDATE t SET v = 2").unwrap();
        let v: i64 = reader
            .query_row("SELECT v FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(v, 1, "the moment the transaction began");
        let now: i64 = Connection::open(&path)
            .unwrap()
            .query_row("SELECT v FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(now, 2, "the writer was not blocked");
    }
}
