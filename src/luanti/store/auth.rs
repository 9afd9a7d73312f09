//! Luanti auth: auth.txt lines from auth.sqlite, LevelDB's auth.db, PostgreSQL or the real
//! auth.txt.
//!
//! [`AuthStore`] opens the backend `world.mt` names (`auth_backend`, missing = `files`),
//! renders every player as one auth.txt view, and applies an edited view: the text is parsed
//! strictly first (nothing is stored when a line is wrong or a player appears twice), then
//! compared with the store and only the difference written, in one transaction or one
//! atomic file replacement. Password hashes are text that passes through unchanged unless the
//! line's password field was edited.

use std::collections::HashMap;
use std::path::Path;

use crate::error::Result;
pub use crate::luanti::codec::auth_line::{parse_auth, read_auth_file, render_auth, AuthEntry};
use crate::luanti::store::auth_files::FilesAuth;
use crate::luanti::store::auth_leveldb::LevelDbAuth;
use crate::luanti::store::auth_postgres::PostgresAuth;
use crate::luanti::store::auth_sqlite::SqliteAuth;
use crate::luanti::store::world_mt::{Backend, WorldMt};

/// What applying an edited auth.txt changed, by player name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthChanges {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    /// Players whose password, privileges or last login changed.
    pub changed: Vec<String>,
}

impl AuthChanges {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

/// The difference between stored and edited entries. Privileges are compared as sets.
pub fn diff(current: &[AuthEntry], edited: &[AuthEntry]) -> AuthChanges {
    let before: HashMap<&str, &AuthEntry> = current.iter().map(|e| (e.name.as_str(), e)).collect();
    let after: HashMap<&str, &AuthEntry> = edited.iter().map(|e| (e.name.as_str(), e)).collect();
    let mut changes = AuthChanges::default();
    for entry in current {
        if !after.contains_key(entry.name.as_str()) {
            changes.removed.push(entry.name.clone());
        }
    }
    for entry in edited {
        match before.get(entry.name.as_str()) {
            None => changes.added.push(entry.name.clone()),
            Some(old) => {
                let mut a = old.privileges.clone();
                let mut b = entry.privileges.clone();
                a.sort();
                b.sort();
                if old.password != entry.password || old.last_login != entry.last_login || a != b {
                    changes.changed.push(entry.name.clone());
                }
            }
        }
    }
    changes
}

/// What every backend of the auth data does (one implementation per backend:
/// `auth_sqlite.rs`, `auth_files.rs`, `auth_leveldb.rs`, `auth_postgres.rs`).
pub trait AuthBackend: Send {
    /// The backend's name in `world.mt` (`sqlite3`, `files`, `leveldb`, `postgresql`).
    fn backend(&self) -> &'static str;

    /// Every player's entry: sorted by name from auth.sqlite, in file order from auth.txt.
    fn entries(&self) -> Result<Vec<AuthEntry>>;

    /// A token that changes whenever the entries may have changed by another program's
    /// hand (the caller notes its own changes): SQLite's data version, the auth file's
    /// stamp, the LevelDB folder's files' stamp, a hash of the PostgreSQL rows' versions
    /// computed by the server; `None` where none can be had (PostgreSQL before its tables
    /// exist or when the query fails: the caller renders).
    fn version(&self) -> Option<u64>;

    /// Applies the difference between the stored entries and `edited`.
    fn apply(&mut self, edited: &[AuthEntry]) -> Result<AuthChanges>;
}

/// The auth data of a world, in whichever backend `world.mt` names: every question of
/// [`AuthBackend`] is asked of it directly (it dereferences to its backend).
pub struct AuthStore(Box<dyn AuthBackend>);

impl std::ops::Deref for AuthStore {
    type Target = dyn AuthBackend;

    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}

impl AuthStore {
    /// The auth data kept by `backend`.
    pub fn new(backend: impl AuthBackend + 'static) -> AuthStore {
        AuthStore(Box::new(backend))
    }

    /// Opens the backend `world.mt` names. A missing `auth.sqlite` is created only when
    /// writing is allowed.
    pub fn open(world: &Path, world_mt: &WorldMt, read_only: bool) -> Result<AuthStore> {
        match world_mt.backend("auth_backend") {
            Backend::Files => Ok(AuthStore::new(FilesAuth::new(&world.join("auth.txt")))),
            Backend::Sqlite3 => {
                let path = world.join("auth.sqlite");
                let store = if read_only || path.exists() {
                    SqliteAuth::open(&path, read_only)?
                } else {
                    SqliteAuth::open_or_create(&path)?
                };
                Ok(AuthStore::new(store))
            }
            Backend::LevelDb => Ok(AuthStore::new(LevelDbAuth::open(
                &world.join("auth.db"),
                read_only,
                // Never over tables whose CURRENT is gone: LevelDB would delete them.
                !read_only && crate::luanti::store::leveldb::may_create(&world.join("auth.db")),
            )?)),
            Backend::Postgresql => Ok(AuthStore::new(PostgresAuth::open(world_mt)?)),
            other => Err(other.unsupported("auth")),
        }
    }

    /// The auth.txt view.
    pub fn render(&self) -> Result<Vec<u8>> {
        Ok(render_auth(&self.entries()?))
    }

    /// Parses an edited auth.txt and applies the difference to the store.
    pub fn apply(&mut self, text: &[u8]) -> Result<AuthChanges> {
        let edited = parse_auth(text)?;
        self.0.apply(&edited)
    }
}
