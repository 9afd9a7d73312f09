//! Mod storage in PostgreSQL (`mod_storage_backend = postgresql`,
//! `pgsql_mod_storage_connection`).
//!
//! As `ModStorageDatabasePostgreSQL` in the engine's `src/database/database-postgresql.cpp`
//! (engines after 5.6; Debian's 5.6 cannot keep mod storage in PostgreSQL): one table
//! `mod_storage(modname TEXT, key BYTEA, value BYTEA, PRIMARY KEY (modname, key))`, written
//! with the engine's upsert (`set`: `INSERT … ON CONFLICT ON CONSTRAINT mod_storage_pkey DO
//! UPDATE SET value = …`) and deleted with its `remove`. Keys and values are bytes.

use crate::error::{Error, Result};
use crate::luanti::store::mod_storage::{not_found, ModStorageBackend};
use crate::luanti::store::postgres::{create_tables, error, no_table, Server};
use crate::luanti::store::token;
use crate::luanti::store::world_mt::WorldMt;

/// The engine's table (`ModStorageDatabasePostgreSQL::createDatabase`).
const TABLES: [(&str, &str); 1] = [(
    "mod_storage",
    "CREATE TABLE mod_storage (modname TEXT NOT NULL,key BYTEA NOT NULL,value BYTEA NOT NULL,\
     PRIMARY KEY (modname, key));",
)];

/// The engine's `set` and `remove`.
const SET: &str = "INSERT INTO mod_storage (modname, key, value) VALUES ($1, $2::bytea, \
    $3::bytea) ON CONFLICT ON CONSTRAINT mod_storage_pkey DO UPDATE SET value = $3::bytea";
const REMOVE: &str = "DELETE FROM mod_storage WHERE modname = $1 AND key = $2::bytea";

/// Mod storage in PostgreSQL.
pub struct PostgresModStorage {
    server: Server,
}

impl PostgresModStorage {
    /// Connects to the server `pgsql_mod_storage_connection` names.
    pub fn open(world_mt: &WorldMt) -> Result<PostgresModStorage> {
        Ok(PostgresModStorage {
            server: Server::open(world_mt, "pgsql_mod_storage_connection")?,
        })
    }

    /// The `xmin` of the entry's row (`None` when there is none): every committed write of
    /// it makes a row version with a new one.
    pub fn row_version(&self, modname: &str, key: &[u8]) -> Result<Option<String>> {
        self.server.read(|c| {
            match c.query_opt(
                "SELECT xmin::text FROM mod_storage WHERE modname = $1 AND key = $2::bytea",
                &[&modname, &key],
            ) {
                Ok(row) => Ok(row.map(|r| r.get::<_, String>(0))),
                Err(e) if no_table(&e) => Ok(None),
                Err(e) => Err(error(e)),
            }
        })
    }

    fn set(&mut self, modname: &str, key: &[u8], value: &[u8], exclusive: bool) -> Result<()> {
        self.server.write(|c| {
            let mut tx = c.transaction().map_err(error)?;
            create_tables(&mut tx, &TABLES)?;
            if exclusive {
                let found = tx
                    .query_opt(
                        "SELECT true FROM mod_storage WHERE modname = $1 AND key = $2::bytea \
                         FOR UPDATE",
                        &[&modname, &key],
                    )
                    .map_err(error)?;
                if found.is_some() {
                    return Err(Error::exists(format!(
                        "mod storage {modname}: key {:?} exists",
                        String::from_utf8_lossy(key)
                    )));
                }
            }
            tx.execute(SET, &[&modname, &key, &value]).map_err(error)?;
            tx.commit().map_err(error)
        })
    }
}

impl ModStorageBackend for PostgresModStorage {
    fn backend(&self) -> &'static str {
        "postgresql"
    }

    fn version(&self, modname: &str, key: &[u8]) -> Option<u64> {
        self.row_version(modname, key).ok().map(token)
    }

    /// Mods with at least one entry, sorted.
    fn list_mods(&self) -> Result<Vec<String>> {
        self.server.read(
            |c| match c.query("SELECT DISTINCT modname FROM mod_storage", &[]) {
                Ok(rows) => {
                    let mut mods: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
                    mods.sort();
                    Ok(mods)
                }
                Err(e) if no_table(&e) => Ok(Vec::new()),
                Err(e) => Err(error(e)),
            },
        )
    }

    /// The keys of one mod, sorted by their bytes.
    fn list_keys(&self, modname: &str) -> Result<Vec<Vec<u8>>> {
        self.server.read(|c| {
            match c.query(
                "SELECT key FROM mod_storage WHERE modname = $1",
                &[&modname],
            ) {
                Ok(rows) => {
                    let mut keys: Vec<Vec<u8>> = rows.iter().map(|r| r.get(0)).collect();
                    keys.sort();
                    Ok(keys)
                }
                Err(e) if no_table(&e) => Ok(Vec::new()),
                Err(e) => Err(error(e)),
            }
        })
    }

    /// The value of one entry.
    fn read(&self, modname: &str, key: &[u8]) -> Result<Vec<u8>> {
        let value = self.server.read(|c| {
            match c.query_opt(
                "SELECT value FROM mod_storage WHERE modname = $1 AND key = $2::bytea",
                &[&modname, &key],
            ) {
                Ok(row) => Ok(row.map(|r| r.get::<_, Vec<u8>>(0))),
                Err(e) if no_table(&e) => Ok(None),
                Err(e) => Err(error(e)),
            }
        })?;
        value.ok_or_else(|| not_found(modname, key))
    }

    /// Sets an entry (creating or replacing it) in one transaction.
    fn write(&mut self, modname: &str, key: &[u8], value: &[u8]) -> Result<()> {
        self.set(modname, key, value, false)
    }

    /// Adds an entry that must not exist yet.
    fn create(&mut self, modname: &str, key: &[u8], value: &[u8]) -> Result<()> {
        self.set(modname, key, value, true)
    }

    /// Deletes one entry.
    fn delete(&mut self, modname: &str, key: &[u8]) -> Result<()> {
        let removed = self
            .server
            .write(|c| match c.execute(REMOVE, &[&modname, &key]) {
                Ok(n) => Ok(n),
                Err(e) if no_table(&e) => Ok(0),
                Err(e) => Err(error(e)),
            })?;
        if removed == 0 {
            return Err(not_found(modname, key));
        }
        Ok(())
    }
}
