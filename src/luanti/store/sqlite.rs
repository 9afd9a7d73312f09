//! Opening a world's SQLite databases (map, players, auth, mod storage) one way: existing
//! files only unless creating, the one busy timeout (shorter than the engine's 3 s give-up,
//! so our statement fails before the engine's does), and `PRAGMA data_version` to notice
//! commits by another process.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, DatabaseName, OpenFlags};

use crate::error::{Error, Result};
use crate::vfs::replace;

/// How long a statement waits for a lock held by another process.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(2);

/// Opens an existing database.
pub fn open(path: &Path, read_only: bool) -> Result<Connection> {
    let flags = if read_only {
        OpenFlags::SQLITE_OPEN_READ_ONLY
    } else {
        OpenFlags::SQLITE_OPEN_READ_WRITE
    } | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)
        .map_err(|e| Error::from(e).context(path.display()))?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
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
