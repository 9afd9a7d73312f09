//! Opening a world's SQLite databases (map, players, auth, mod storage) one way: existing
//! files only unless creating, the one busy timeout (shorter than the engine's 3 s give-up,
//! so our statement fails before the engine's does), and `PRAGMA data_version` to notice
//! commits by another process.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, DatabaseName, OpenFlags};

use crate::error::{Error, Result};
use crate::storekit::{journal, replace};

/// How long a statement waits for a lock held by another process.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(2);

/// Refuses a database path that holds something other than a regular file (following a
/// link, as SQLite does): SQLite would open a FIFO and block until a writer came, hanging
/// the mount, `info` or `check` for ever. Nothing there is fine (the caller decides).
fn only_regular(path: &Path) -> Result<()> {
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() => Err(Error::invalid(format!(
            "{}: not a regular file but a {} (a database is a regular file)",
            path.display(),
            kind_of(&m.file_type())
        ))),
        _ => Ok(()),
    }
}

/// What a file that is not a regular file is, for a message.
fn kind_of(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "folder"
    } else if t.is_fifo() {
        "FIFO"
    } else if t.is_socket() {
        "socket"
    } else if t.is_block_device() || t.is_char_device() {
        "device"
    } else {
        "special file"
    }
}

/// Opens an existing database (read-only: after rolling back a commit a kill cut off,
/// which a read-only connection cannot: see [`journal`]).
pub fn open(path: &Path, read_only: bool) -> Result<Connection> {
    only_regular(path)?;
    if read_only {
        journal::roll_back_cut_commit(path, BUSY_TIMEOUT)?;
    }
    let flags = if read_only {
        OpenFlags::SQLITE_OPEN_READ_ONLY
    } else {
        OpenFlags::SQLITE_OPEN_READ_WRITE
    } | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)
        .map_err(|e| Error::from(e).context(path.display()))?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    if read_only && super::snapshot::on() {
        super::snapshot::begin_sqlite(&conn, path)?;
    }
    Ok(conn)
}

/// Opens a database, creating it with `schema` (idempotent SQL) when needed. Never through
/// a link: a store is created where none exists, and a link planted under its name (even
/// one pointing nowhere yet) would have it created anywhere the user running worldfs can
/// write.
///
/// A database that does not exist appears whole or not at all ([`create_whole`]): SQLite
/// itself would first make an empty file under the name and then write the schema, and a
/// kill in between left a 0-byte `map.sqlite` that the next mount refused.
pub fn open_or_create(path: &Path, schema: &str) -> Result<Connection> {
    if std::fs::symlink_metadata(path).is_err() {
        match create_whole(path, schema) {
            Err(e) if e.errno() == libc::EEXIST => {}
            other => other?,
        }
    }
    only_regular(path)?;
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_NOFOLLOW;
    let conn = Connection::open_with_flags(path, flags)
        .map_err(|e| Error::from(e).context(path.display()))?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.execute_batch(schema)?;
    Ok(conn)
}

/// Creates the database `path`, which must not exist, holding `schema`: the schema is
/// applied to a database in memory, whose bytes go to the file through
/// [`replace::create_atomic`] (a temporary file, fsynced, renamed without replacing, the
/// folder fsynced). Mode 0644 less the umask, as SQLite creates files. `EEXIST` when
/// something took the name first.
fn create_whole(path: &Path, schema: &str) -> Result<()> {
    let memory = Connection::open_in_memory()?;
    memory.execute_batch(schema)?;
    let bytes = memory.serialize(DatabaseName::Main)?;
    replace::create_atomic(path, 0o644, |out| Ok(out.write_all(&bytes)?)).map(drop)
}

/// The identity (device, inode) of the file or folder at `path`, following a link as
/// SQLite does; `None` when there is none. A database replaced by rename (or removed) has
/// another, while a connection opened before goes on using the old file.
pub fn file_id(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// SQLite's `PRAGMA data_version`: changes when another connection commits.
pub fn data_version(conn: &Connection) -> Result<i64> {
    Ok(conn.query_row("PRAGMA data_version", [], |r| r.get(0))?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// Runs `f` on a thread and fails the test if it has not returned within 10 s (a FIFO
    /// opened for reading waits for a writer for ever).
    fn within_seconds<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(Duration::from_secs(10))
            .expect("the open blocked")
    }

    #[test]
    fn a_fifo_at_a_database_path_is_refused_without_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("map.sqlite");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
        for read_only in [true, false] {
            let path = fifo.clone();
            let e = within_seconds(move || open(&path, read_only).map(drop)).unwrap_err();
            assert_eq!(e.errno(), libc::EINVAL);
            assert!(e.message().contains("not a regular file but a FIFO"), "{e}");
        }
        let path = fifo.clone();
        let e = within_seconds(move || open_or_create(&path, "").map(drop)).unwrap_err();
        assert!(e.message().contains("FIFO"), "{e}");
        let world = dir.path().to_path_buf();
        std::fs::write(world.join("world.mt"), "gameid = minetest\n").unwrap();
        let e = within_seconds(move || {
            crate::luanti::store::map::MapStore::open(&world, true).map(drop)
        })
        .unwrap_err();
        assert!(
            e.message().contains("map.sqlite: not a regular file"),
            "{e}"
        );
    }
}
