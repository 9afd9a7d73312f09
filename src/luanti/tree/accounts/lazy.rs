//! A backend store opened on first use: reading a world never creates a database, and a
//! store whose database file does not exist yet reads as empty until the first write (so
//! does a LevelDB folder whose creation was killed before it held data, as for the engine,
//! which creates the database over it). A
//! store on a PostgreSQL server is connected to on first use too: a server that is down
//! fails the calls that need it, not the mount. A database file (or LevelDB folder)
//! replaced under the mount (put back from a backup by `rsync` or `mv`) or removed is opened
//! again on its next use, so no save goes into the old, unlinked file.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::lock;
use crate::error::Result;
use crate::luanti::store::leveldb::unfinished_creation;
use crate::luanti::store::snapshot;
use crate::luanti::store::sqlite::file_id;
use crate::luanti::store::world_mt::{Backend, WorldMt};

/// The label of a store on a PostgreSQL server (always there: the engine creates its tables
/// when it connects).
const POSTGRESQL: &str = "PostgreSQL";

pub(super) type Opener<S> = fn(&Path, &WorldMt, bool) -> Result<S>;

/// A store opened on first use. While its database file does not exist, reads see no data
/// and only a write creates it.
pub(super) struct Lazy<S> {
    world: PathBuf,
    world_mt: WorldMt,
    read_only: bool,
    database: Option<PathBuf>,
    /// Whether `database` is a LevelDB folder.
    leveldb: bool,
    /// What holds the data in the world folder (`players.sqlite`, `auth.txt`, …).
    pub(super) label: String,
    open: Opener<S>,
    store: Mutex<Option<Opened<S>>>,
}

/// An open store, with the identity of the database it was opened on (see [`file_id`];
/// `None` for a store without one in the world folder).
struct Opened<S> {
    on: Option<(u64, u64)>,
    store: S,
}

impl<S> Lazy<S> {
    /// The store for `key`'s backend, or `None` when worldfs cannot open that backend.
    pub(super) fn new(
        world: &Path,
        world_mt: &WorldMt,
        read_only: bool,
        key: &str,
        (database_file, leveldb, files_label): (&str, Option<&str>, &str),
        open: Opener<S>,
    ) -> Option<Lazy<S>> {
        let (database, label) = match (world_mt.backend(key), leveldb) {
            (Backend::Sqlite3, _) => (Some(world.join(database_file)), database_file),
            (Backend::LevelDb, Some(folder)) => (Some(world.join(folder)), folder),
            (Backend::Files, _) => (None, files_label),
            (Backend::Postgresql, _) => (None, POSTGRESQL),
            _ => return None,
        };
        Some(Lazy {
            world: world.to_path_buf(),
            world_mt: world_mt.clone(),
            read_only,
            database,
            leveldb: matches!(world_mt.backend(key), Backend::LevelDb),
            label: label.to_string(),
            open,
            store: Mutex::new(None),
        })
    }

    /// Whether what holds the data exists in the world folder (the database, or the
    /// files backend's file or folder).
    pub(super) fn stored(&self) -> bool {
        self.label == POSTGRESQL
            || std::fs::symlink_metadata(self.world.join(self.label.trim_end_matches('/'))).is_ok()
    }

    /// Whether the database holds no data yet: its file does not exist, or its LevelDB
    /// folder is what a killed creation left ([`unfinished_creation`]).
    fn no_database_yet(&self) -> bool {
        self.database
            .as_deref()
            .is_some_and(|p| !p.exists() || (self.leveldb && unfinished_creation(p)))
    }

    /// The identity of the database file now (`None` without one).
    pub(super) fn database_id(&self) -> Option<(u64, u64)> {
        self.database.as_deref().and_then(file_id)
    }

    /// Opens the store now, unless its database does not exist: a `--snapshot` mount reads
    /// each store as of the mount, and never opens one later (see [`Lazy::with`]).
    pub(super) fn open_for_snapshot(&self) -> Result<()> {
        let mut guard = lock(&self.store)?;
        if guard.is_none() && !self.no_database_yet() {
            let on = self.database_id();
            let store = (self.open)(&self.world, &self.world_mt, self.read_only)?;
            *guard = Some(Opened { on, store });
        }
        Ok(())
    }

    /// Runs `f` on the store; `absent` gives the answer while a database to be read does
    /// not exist.
    pub(super) fn with<R>(
        &self,
        write: bool,
        absent: impl FnOnce() -> Result<R>,
        f: impl FnOnce(&mut S) -> Result<R>,
    ) -> Result<R> {
        let mut guard = lock(&self.store)?;
        if snapshot::on() {
            // What was opened at the mount, whatever happened at its path since.
            return match guard.as_mut() {
                Some(opened) => f(&mut opened.store),
                None => absent(),
            };
        }
        let now = self.database.as_deref().and_then(file_id);
        if let (Some(database), Some(opened)) = (&self.database, guard.as_ref()) {
            if opened.on != now {
                log::warn!(
                    "{}: replaced or removed under the mount; opening it again",
                    database.display()
                );
                *guard = None;
            }
        }
        if guard.is_none() {
            if !write && self.no_database_yet() {
                return absent();
            }
            // Taken before opening, so that a file replaced in between is followed; one the
            // opener creates is taken after.
            let before = self.database.as_deref().and_then(file_id);
            let store = (self.open)(&self.world, &self.world_mt, self.read_only)?;
            let on = before.or_else(|| self.database.as_deref().and_then(file_id));
            *guard = Some(Opened { on, store });
        }
        match guard.as_mut() {
            Some(opened) => f(&mut opened.store),
            None => absent(),
        }
    }
}
