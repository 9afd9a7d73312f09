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

/// The mod storage of a world, in whichever backend holds it.
pub enum ModStorage {
    Sqlite(SqliteModStorage),
    Files(FilesModStorage),
    Postgres(PostgresModStorage),
}

impl ModStorage {
    /// Opens the backend `world.mt` names. A missing `mod_storage.sqlite` is created only when
    /// writing is allowed.
    pub fn open(world: &Path, world_mt: &WorldMt, read_only: bool) -> Result<ModStorage> {
        match world_mt.backend("mod_storage_backend") {
            Backend::Files => Ok(ModStorage::Files(FilesModStorage::new(
                &world.join("mod_storage"),
            ))),
            Backend::Sqlite3 => {
                let path = world.join("mod_storage.sqlite");
                let store = if read_only || path.exists() {
                    SqliteModStorage::open(&path, read_only)?
                } else {
                    SqliteModStorage::open_or_create(&path)?
                };
                Ok(ModStorage::Sqlite(store))
            }
            Backend::Postgresql => Ok(ModStorage::Postgres(PostgresModStorage::open(world_mt)?)),
            other => Err(other.unsupported("mod storage")),
        }
    }

    /// The mods that have entries (files backend: a file), sorted.
    pub fn list_mods(&self) -> Result<Vec<String>> {
        match self {
            ModStorage::Sqlite(s) => s.list_mods(),
            ModStorage::Files(f) => f.list_mods(),
            ModStorage::Postgres(p) => p.list_mods(),
        }
    }

    /// One mod's keys, sorted by their bytes.
    pub fn list_keys(&self, modname: &str) -> Result<Vec<Vec<u8>>> {
        match self {
            ModStorage::Sqlite(s) => s.list_keys(modname),
            ModStorage::Files(f) => f.list_keys(modname),
            ModStorage::Postgres(p) => p.list_keys(modname),
        }
    }

    /// A token that changes whenever another program may have changed entry `key` of
    /// `modname` (the caller notes its own changes): SQLite's data version, the stamp of the
    /// mod's file, the row's `xmin` in PostgreSQL (the transaction that wrote its version);
    /// `None` where none can be had. Lets a `stat` of a large value skip reading it.
    pub fn version(&self, modname: &str, key: &[u8]) -> Option<u64> {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        match self {
            ModStorage::Sqlite(s) => s.data_version().ok()?.hash(&mut h),
            ModStorage::Files(f) => f.stamp(modname)?.hash(&mut h),
            ModStorage::Postgres(p) => p.row_version(modname, key).ok()?.hash(&mut h),
        }
        Some(h.finish())
    }

    /// The value of one entry (`ENOENT` when there is none).
    pub fn read(&self, modname: &str, key: &[u8]) -> Result<Vec<u8>> {
        match self {
            ModStorage::Sqlite(s) => s.read(modname, key),
            ModStorage::Files(f) => f.read(modname, key),
            ModStorage::Postgres(p) => p.read(modname, key),
        }
    }

    /// Sets an entry, creating or replacing it.
    pub fn write(&mut self, modname: &str, key: &[u8], value: &[u8]) -> Result<()> {
        match self {
            ModStorage::Sqlite(s) => s.write(modname, key, value),
            ModStorage::Files(f) => f.write(modname, key, value),
            ModStorage::Postgres(p) => p.write(modname, key, value),
        }
    }

    /// Adds an entry that must not exist yet (`EEXIST`).
    pub fn create(&mut self, modname: &str, key: &[u8], value: &[u8]) -> Result<()> {
        match self {
            ModStorage::Sqlite(s) => s.create(modname, key, value),
            ModStorage::Files(f) => f.create(modname, key, value),
            ModStorage::Postgres(p) => p.create(modname, key, value),
        }
    }

    /// Deletes one entry (`ENOENT` when there is none).
    pub fn delete(&mut self, modname: &str, key: &[u8]) -> Result<()> {
        match self {
            ModStorage::Sqlite(s) => s.delete(modname, key),
            ModStorage::Files(f) => f.delete(modname, key),
            ModStorage::Postgres(p) => p.delete(modname, key),
        }
    }
    /// Forgets a mod that has no entries left: the files backend removes its (empty) file;
    /// in a database a mod without rows does not exist anyway.
    pub fn remove_mod(&mut self, modname: &str) -> Result<()> {
        match self {
            ModStorage::Sqlite(_) | ModStorage::Postgres(_) => {
                if self.list_keys(modname)?.is_empty() {
                    Ok(())
                } else {
                    Err(crate::error::Error::not_empty(format!(
                        "mod storage {modname}: has entries"
                    )))
                }
            }
            ModStorage::Files(f) => f.remove_mod(modname),
        }
    }
}
