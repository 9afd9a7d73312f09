//! The one error type of worldfs.
//!
//! Every layer (codecs, views, stores, trees, the FUSE adapter) returns this type. It carries
//! the errno the FUSE adapter replies with and the human message the log and the CLI print,
//! so a parse error deep in a codec reaches the user as "file, line, reason" and the
//! application as `EINVAL`, without any layer knowing about the ones above it.
//!
//! Messages quote what they reject, and what is rejected may be anything a file holds (a
//! 50 MB "word" in a view): quoted input is cut with [`excerpt`], and a message is never
//! longer than [`MAX_MESSAGE`] characters however it was made. An error that a layer has
//! logged already is marked ([`Error::logged`]) so the layers above do not log it again.

use std::borrow::Cow;
use std::fmt;
use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// An error with its errno and a human-readable message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    errno: i32,
    message: String,
    /// Whether this error was written to the log where it happened.
    logged: bool,
    /// What went wrong, where the errno alone does not tell.
    kind: ErrorKind,
}

/// What an error means beyond its errno.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ErrorKind {
    /// Nothing more than the errno says.
    Other,
    /// The store holds no such object (a player, a mod storage key, an auth entry): an
    /// answer about the data, unlike an `ENOENT` from the operating system (a file or
    /// folder gone), which is a failure.
    NoSuchObject,
    /// A stored object larger than what is read of it (a map block row past its bound).
    StoredTooLarge,
}

/// The most characters a message keeps; the rest is replaced by "…".
pub const MAX_MESSAGE: usize = 1000;
/// The most characters of input [`excerpt`] quotes.
pub const MAX_QUOTED: usize = 80;

/// `text` cut to [`MAX_QUOTED`] characters, ending in "…" when cut: for quoting input in a
/// message.
pub fn excerpt(text: &str) -> Cow<'_, str> {
    cut(text, MAX_QUOTED)
}

/// `text` cut to `max` characters, ending in "…" when cut.
fn cut(text: &str, max: usize) -> Cow<'_, str> {
    match text.char_indices().nth(max) {
        None => Cow::Borrowed(text),
        Some((end, _)) => Cow::Owned(format!("{}…", &text[..end])),
    }
}

/// The result type used throughout worldfs.
pub type Result<T> = std::result::Result<T, Error>;

// The one lock-poisoning policy. A lock is poisoned only when a thread panicked holding it,
// and the daemon does not panic outside tests (lib.rs denies unwrap, expect and panic), so a
// poisoned lock is a bug met: the operation that meets it fails with `EIO` naming the lock
// ([`lock`], [`lock_named`], [`read`], [`write`]), and the daemon goes on serving the rest.
// An operation that answers nothing (a forget, a note to a cache, a connection put back in
// its pool) fails by doing nothing: `if let Ok(guard) = m.lock()`.
// One exception, [`recover`]: a lock whose state is whole between any two statements (a
// cache's map, a sidecar's connection, a counter) is taken as it is.

/// Locks `m`; a lock poisoned by a panicking thread is an error (`EIO`) for this operation,
/// not a panic of the daemon.
pub fn lock<T>(m: &Mutex<T>) -> Result<MutexGuard<'_, T>> {
    lock_named(m, "internal")
}

/// [`lock`], the error naming the lock (`what`: "block", "index scan").
pub fn lock_named<'a, T>(m: &'a Mutex<T>, what: &str) -> Result<MutexGuard<'a, T>> {
    m.lock()
        .map_err(|_| Error::corrupt(format!("{what} lock poisoned")))
}

/// Takes `l` for reading, as [`lock_named`].
pub fn read<'a, T>(l: &'a RwLock<T>, what: &str) -> Result<RwLockReadGuard<'a, T>> {
    l.read()
        .map_err(|_| Error::corrupt(format!("{what} lock poisoned")))
}

/// Takes `l` for writing, as [`lock_named`].
pub fn write<'a, T>(l: &'a RwLock<T>, what: &str) -> Result<RwLockWriteGuard<'a, T>> {
    l.write()
        .map_err(|_| Error::corrupt(format!("{what} lock poisoned")))
}

/// Locks `m` whatever a panicking thread left: only for state that is whole between any two
/// statements (see the policy above).
pub fn recover<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Error {
    /// An error with an explicit errno.
    pub fn new(errno: i32, message: impl Into<String>) -> Self {
        let message = message.into();
        let message = match cut(&message, MAX_MESSAGE) {
            Cow::Borrowed(_) => message,
            Cow::Owned(cut) => cut,
        };
        Error {
            errno,
            message,
            logged: false,
            kind: ErrorKind::Other,
        }
    }

    /// Input the user wrote that cannot be accepted (`EINVAL`).
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(libc::EINVAL, message)
    }

    /// Input rejected at a position of a text file (`EINVAL`), line and column from 1.
    pub fn at(line: usize, column: usize, message: impl fmt::Display) -> Self {
        Self::invalid(format!("line {line}, column {column}: {message}"))
    }

    /// Stored data that cannot be decoded (`EIO`).
    pub fn corrupt(message: impl Into<String>) -> Self {
        Self::new(libc::EIO, message)
    }

    /// A format or version worldfs does not handle (`EOPNOTSUPP`).
    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::new(libc::EOPNOTSUPP, message)
    }

    /// No such object (`ENOENT`).
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(libc::ENOENT, message)
    }

    /// A directory where a file is needed (`EISDIR`).
    pub fn is_dir(message: impl Into<String>) -> Self {
        Self::new(libc::EISDIR, message)
    }

    /// Not a directory where one is needed (`ENOTDIR`).
    pub fn not_dir(message: impl Into<String>) -> Self {
        Self::new(libc::ENOTDIR, message)
    }

    /// A directory that still holds entries (`ENOTEMPTY`).
    pub fn not_empty(message: impl Into<String>) -> Self {
        Self::new(libc::ENOTEMPTY, message)
    }

    /// The store holds no object of that name (a player, a key, an auth entry): `ENOENT`,
    /// told apart from the operating system's by [`Error::is_no_such_object`].
    pub fn no_such_object(message: impl Into<String>) -> Self {
        Error {
            kind: ErrorKind::NoSuchObject,
            ..Self::not_found(message)
        }
    }

    /// Whether this is the store's answer that it holds no such object (made by
    /// [`Error::no_such_object`]), not a failure.
    pub fn is_no_such_object(&self) -> bool {
        self.kind == ErrorKind::NoSuchObject
    }

    /// A stored object larger than what is read of it (`EIO`): it exists, its content
    /// cannot be shown, and it can still be removed ([`Error::is_stored_too_large`]).
    pub fn stored_too_large(message: impl Into<String>) -> Self {
        Error {
            kind: ErrorKind::StoredTooLarge,
            ..Self::corrupt(message)
        }
    }

    /// Whether this is [`Error::stored_too_large`].
    pub fn is_stored_too_large(&self) -> bool {
        self.kind == ErrorKind::StoredTooLarge
    }

    /// The object exists already (`EEXIST`).
    pub fn exists(message: impl Into<String>) -> Self {
        Self::new(libc::EEXIST, message)
    }

    /// The operation is not allowed on this object (`EPERM`).
    pub fn not_permitted(message: impl Into<String>) -> Self {
        Self::new(libc::EPERM, message)
    }

    /// The mount or store is read-only (`EROFS`).
    pub fn read_only(message: impl Into<String>) -> Self {
        Self::new(libc::EROFS, message)
    }

    /// The errno to report to the kernel.
    pub fn errno(&self) -> i32 {
        self.errno
    }

    /// The human-readable message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Prefixes the message with where the error happened (a path, a block position).
    pub fn context(mut self, what: impl fmt::Display) -> Self {
        let what = what.to_string();
        self.message = format!("{}: {}", cut(&what, MAX_MESSAGE), self.message);
        self
    }

    /// Marks the error as written to the log already (by the layer that handled it).
    pub fn logged(mut self) -> Self {
        self.logged = true;
        self
    }

    /// Whether the error was written to the log already.
    pub fn is_logged(&self) -> bool {
        self.logged
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::new(e.raw_os_error().unwrap_or(libc::EIO), e.to_string())
    }
}

/// SQLite's extended result code SQLITE_READONLY_DBMOVED (`SQLITE_READONLY | 4 << 8`).
const READONLY_DBMOVED: std::os::raw::c_int = 8 | (4 << 8);

impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Self {
        let errno = match &e {
            rusqlite::Error::SqliteFailure(f, _) => match f.code {
                rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked => {
                    libc::EBUSY
                }
                // SQLITE_READONLY_DBMOVED: the file was renamed or replaced while open; the
                // database is not read-only.
                rusqlite::ErrorCode::ReadOnly if f.extended_code == READONLY_DBMOVED => libc::EIO,
                rusqlite::ErrorCode::ReadOnly => libc::EROFS,
                rusqlite::ErrorCode::DiskFull => libc::ENOSPC,
                rusqlite::ErrorCode::PermissionDenied => libc::EACCES,
                _ => libc::EIO,
            },
            _ => libc::EIO,
        };
        if let rusqlite::Error::SqliteFailure(f, _) = &e {
            if f.extended_code == READONLY_DBMOVED {
                return Error::new(
                    errno,
                    format!("sqlite: {e} (the database file was replaced or moved while open)"),
                );
            }
        }
        Error::new(errno, format!("sqlite: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_prefixes_and_keeps_errno() {
        let e = Error::at(3, 7, "unknown character 'q'").context("blocks/0,0,0/nodes.cubeset");
        assert_eq!(e.errno(), libc::EINVAL);
        assert_eq!(
            e.to_string(),
            "blocks/0,0,0/nodes.cubeset: line 3, column 7: unknown character 'q'"
        );
    }

    /// A 50 MB token reaches the message (and the log) as a short excerpt.
    #[test]
    fn messages_are_capped() {
        let token = "x".repeat(50 << 20);
        let quoted = Error::at(2, 5, format!("`{}` is not a light value", excerpt(&token)));
        assert!(quoted.message().len() < 200, "{}", quoted.message().len());
        assert!(quoted.message().contains(&format!("`{}…`", "x".repeat(80))));
        let raw = Error::invalid(format!("`{token}` is not a light value"))
            .context("blocks/0,0,0/light.txt");
        assert!(
            raw.message().len() < 2 * MAX_MESSAGE * 3,
            "{}",
            raw.message().len()
        );
        assert!(raw.message().starts_with("blocks/0,0,0/light.txt: `xxx"));
        assert!(raw.message().ends_with('…'));
        let short = "ünïcödé".repeat(20);
        assert_eq!(excerpt(&short).chars().count(), MAX_QUOTED + 1);
        assert_eq!(excerpt("short"), "short");
    }

    #[test]
    fn no_such_object_is_enoent_told_apart_from_the_systems() {
        let absent = Error::no_such_object("no player \"x\"").context("players/x");
        assert_eq!(absent.errno(), libc::ENOENT);
        assert!(absent.is_no_such_object(), "context keeps the kind");
        let os: Error = std::io::Error::from_raw_os_error(libc::ENOENT).into();
        assert_eq!(os.errno(), libc::ENOENT);
        assert!(!os.is_no_such_object());
        assert!(!Error::not_found("gone").is_no_such_object());
    }

    #[test]
    fn io_errors_keep_their_errno() {
        let e: Error = std::io::Error::from_raw_os_error(libc::ENOSPC).into();
        assert_eq!(e.errno(), libc::ENOSPC);
    }
}
