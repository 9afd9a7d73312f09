//! `mod_storage.sqlite`: `entries(modname TEXT, key BLOB, value BLOB, PRIMARY KEY(modname,
//! key))`. Keys and values are arbitrary bytes. The engine binds keys as BLOBs, but a row
//! written as TEXT by some other tool would not equal the same bytes as a BLOB in SQLite, so
//! lookups match both forms, and a write replaces both.

use std::path::Path;

use rusqlite::types::ValueRef;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use crate::error::{Error, Result};
use crate::luanti::store::mod_storage::{not_found, ModStorageBackend};
use crate::luanti::store::sqlite;
use crate::luanti::store::token;

/// The schema a new `mod_storage.sqlite` gets (the engine's).
const CREATE_SCHEMA: &str = "CREATE TABLE IF NOT EXISTS `entries` (
	`modname` TEXT NOT NULL,
	`key` BLOB NOT NULL,
	`value` BLOB NOT NULL,
	PRIMARY KEY (`modname`, `key`)
);
";

/// Both forms of a key: as stored by the engine (BLOB) and as TEXT.
const KEY_MATCH: &str = "`modname` = ?1 AND `key` IN (?2, CAST(?2 AS TEXT))";

/// An open `mod_storage.sqlite`.
pub struct SqliteModStorage {
    conn: Connection,
}

fn bytes(value: ValueRef<'_>) -> Result<Vec<u8>> {
    match value {
        ValueRef::Text(t) | ValueRef::Blob(t) => Ok(t.to_vec()),
        ValueRef::Null => Ok(Vec::new()),
        ValueRef::Integer(i) => Ok(i.to_string().into_bytes()),
        ValueRef::Real(f) => Ok(f.to_string().into_bytes()),
    }
}

impl SqliteModStorage {
    /// Opens an existing database.
    pub fn open(path: &Path, read_only: bool) -> Result<SqliteModStorage> {
        Ok(SqliteModStorage {
            conn: sqlite::open(path, read_only)?,
        })
    }

    /// Opens the database, creating it when it does not exist.
    pub fn open_or_create(path: &Path) -> Result<SqliteModStorage> {
        Ok(SqliteModStorage {
            conn: sqlite::open_or_create(path, CREATE_SCHEMA)?,
        })
    }

    /// SQLite's `PRAGMA data_version`: changes when another connection commits.
    pub fn data_version(&self) -> Result<i64> {
        sqlite::data_version(&self.conn)
    }

    fn write_checked(
        &mut self,
        modname: &str,
        key: &[u8],
        value: &[u8],
        exclusive: bool,
    ) -> Result<()> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let removed = tx.execute(
            &format!("DELETE FROM `entries` WHERE {KEY_MATCH}"),
            params![modname, key],
        )?;
        if exclusive && removed > 0 {
            return Err(Error::exists(format!(
                "mod storage {modname}: key {:?} exists",
                String::from_utf8_lossy(key)
            )));
        }
        tx.execute(
            "INSERT INTO `entries` (`modname`, `key`, `value`) VALUES (?1, ?2, ?3)",
            params![modname, key, value],
        )?;
        tx.commit()?;
        Ok(())
    }
}

impl ModStorageBackend for SqliteModStorage {
    fn backend(&self) -> &'static str {
        "sqlite3"
    }

    fn version(&self, _modname: &str, _key: &[u8]) -> Option<u64> {
        self.data_version().ok().map(token)
    }

    /// Mods with at least one entry, sorted.
    fn list_mods(&self) -> Result<Vec<String>> {
        let mut stmt = self
            .conn
            .prepare("SELECT DISTINCT `modname` FROM `entries` ORDER BY `modname`")?;
        let mut rows = stmt.query([])?;
        let mut mods = Vec::new();
        while let Some(row) = rows.next()? {
            let name = String::from_utf8(bytes(row.get_ref(0)?)?)
                .map_err(|_| Error::corrupt("mod_storage.sqlite: a mod name is not UTF-8"))?;
            mods.push(name);
        }
        Ok(mods)
    }

    /// The keys of one mod, sorted by their bytes.
    fn list_keys(&self, modname: &str) -> Result<Vec<Vec<u8>>> {
        let mut stmt = self
            .conn
            .prepare("SELECT `key` FROM `entries` WHERE `modname` = ?1")?;
        let mut rows = stmt.query([modname])?;
        let mut keys = Vec::new();
        while let Some(row) = rows.next()? {
            keys.push(bytes(row.get_ref(0)?)?);
        }
        keys.sort();
        keys.dedup();
        Ok(keys)
    }

    /// The value of one entry.
    fn read(&self, modname: &str, key: &[u8]) -> Result<Vec<u8>> {
        let value = self
            .conn
            .query_row(
                &format!("SELECT `value` FROM `entries` WHERE {KEY_MATCH} LIMIT 1"),
                params![modname, key],
                |r| Ok(bytes(r.get_ref(0)?)),
            )
            .optional()?;
        match value {
            Some(v) => v,
            None => Err(not_found(modname, key)),
        }
    }

    /// Sets an entry (creating or replacing it) in one transaction.
    fn write(&mut self, modname: &str, key: &[u8], value: &[u8]) -> Result<()> {
        self.write_checked(modname, key, value, false)
    }

    /// Adds an entry that must not exist yet.
    fn create(&mut self, modname: &str, key: &[u8], value: &[u8]) -> Result<()> {
        self.write_checked(modname, key, value, true)
    }

    /// Deletes one entry.
    fn delete(&mut self, modname: &str, key: &[u8]) -> Result<()> {
        let removed = self.conn.execute(
            &format!("DELETE FROM `entries` WHERE {KEY_MATCH}"),
            params![modname, key],
        )?;
        if removed == 0 {
            return Err(not_found(modname, key));
        }
        Ok(())
    }
}
