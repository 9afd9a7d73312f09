//! Luanti mod storage: mod_storage.sqlite, PostgreSQL and the files backend.
//!
//! [`ModStorage`] opens the backend `world.mt` names (`mod_storage_backend`, missing =
//! `files`) and exposes entries the way the mount shows them, `mod_storage/MOD/KEY`: list the
//! mods, list a mod's keys, read, write, create and delete one entry. Keys and values are
//! bytes; the mount escapes keys into file names with `crate::names`.

use std::path::Path;

use crate::error::Result;
use crate::luanti::store::mod_storage_files::FilesModStorage;
use crate::luanti::store::mod_storage_postgres::PostgresModStorage;
use crate::luanti::store::mod_storage_sqlite::SqliteModStorage;
use crate::luanti::store::world_mt::{Backend, WorldMt};

/// What every backend of the mod storage does (one implementation per backend:
/// `mod_storage_sqlite.rs`, `mod_storage_files.rs`, `mod_storage_postgres.rs`).
pub trait ModStorageBackend: Send {
    /// The backend's name in `world.mt` (`sqlite3`, `files`, `postgresql`).
    fn backend(&self) -> &'static str;

    /// The mods that have entries, sorted.
    fn list_mods(&self) -> Result<Vec<String>>;

    /// The keys of one mod's entries, sorted.
    fn list_keys(&self, modname: &str) -> Result<Vec<Vec<u8>>>;

    /// A token that changes whenever another program may have changed entry `key` of
    /// `modname` (the caller notes its own changes): SQLite's data version, the stamp of the
    /// mod's file, the row's `xmin` in PostgreSQL (the transaction that wrote its version);
    /// `None` where none can be had. Lets a `stat` of a large value skip reading it.
    fn version(&self, modname: &str, key: &[u8]) -> Option<u64>;

    /// The value of one entry (`ENOENT` when there is none).
    fn read(&self, modname: &str, key: &[u8]) -> Result<Vec<u8>>;

    /// Sets an entry, creating or replacing it.
    fn write(&mut self, modname: &str, key: &[u8], value: &[u8]) -> Result<()>;

    /// Adds an entry that must not exist yet (`EEXIST`).
    fn create(&mut self, modname: &str, key: &[u8], value: &[u8]) -> Result<()>;

    /// Deletes one entry (`ENOENT` when there is none).
    fn delete(&mut self, modname: &str, key: &[u8]) -> Result<()>;

    /// Forgets a mod that has no entries left (the files backend removes its empty file);
    /// in a database a mod without rows does not exist anyway.
    fn remove_mod(&mut self, modname: &str) -> Result<()> {
        if self.list_keys(modname)?.is_empty() {
            Ok(())
        } else {
            Err(crate::error::Error::not_empty(format!(
                "mod storage {modname}: has entries"
            )))
        }
    }
}

/// The error of a key no entry has (`ENOENT`, as a store's "no such object").
pub fn not_found(modname: &str, key: &[u8]) -> crate::error::Error {
    crate::error::Error::no_such_object(format!(
        "mod storage {modname}: no key {:?}",
        String::from_utf8_lossy(key)
    ))
}

/// The mod storage of a world, in whichever backend `world.mt` names: every question of
/// [`ModStorageBackend`] is asked of it directly (it dereferences to its backend).
pub struct ModStorage(Box<dyn ModStorageBackend>);

impl std::ops::Deref for ModStorage {
    type Target = dyn ModStorageBackend;

    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}

impl std::ops::DerefMut for ModStorage {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut *self.0
    }
}

impl ModStorage {
    /// The mod storage kept by `backend`.
    pub fn new(backend: impl ModStorageBackend + 'static) -> ModStorage {
        ModStorage(Box::new(backend))
    }

    /// Opens the backend `world.mt` names. A missing `mod_storage.sqlite` is created only when
    /// writing is allowed.
    pub fn open(world: &Path, world_mt: &WorldMt, read_only: bool) -> Result<ModStorage> {
        match world_mt.backend("mod_storage_backend") {
            Backend::Files => Ok(ModStorage::new(FilesModStorage::new(
                &world.join("mod_storage"),
            ))),
            Backend::Sqlite3 => {
                let path = world.join("mod_storage.sqlite");
                let store = if read_only || path.exists() {
                    SqliteModStorage::open(&path, read_only)?
                } else {
                    SqliteModStorage::open_or_create(&path)?
                };
                Ok(ModStorage::new(store))
            }
            Backend::Postgresql => Ok(ModStorage::new(PostgresModStorage::open(world_mt)?)),
            other => Err(other.unsupported("mod storage")),
        }
    }
}
