//! `auth.sqlite`: tables `auth(id, name, password, last_login)` and
//! `user_privileges(id, privilege)`, in the current schema (TEXT NOT NULL) and the older one
//! (VARCHAR, nullable columns); the statements use only the column names both share.
//!
//! An edited auth.txt is applied as a difference inside one transaction: removed players lose
//! their row and privilege rows (deleted here, not left to `ON DELETE CASCADE`, which needs a
//! per-connection pragma), changed players get their row and, when the set changed, their
//! privileges rewritten, added players get a new id.

use std::collections::HashMap;
use std::path::Path;

use rusqlite::types::ValueRef;
use rusqlite::{params, Connection, TransactionBehavior};

use crate::error::{Error, Result};
use crate::luanti::codec::auth_line::AuthEntry;
use crate::luanti::store::auth::AuthBackend;
use crate::luanti::store::auth::{diff, AuthChanges};
use crate::luanti::store::sqlite;
use crate::luanti::store::token;

/// The schema a new `auth.sqlite` gets (the engine's current one).
const CREATE_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS `auth` (`id` INTEGER PRIMARY KEY AUTOINCREMENT,`name` TEXT UNIQUE NOT NULL,`password` TEXT NOT NULL,`last_login` INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS `user_privileges` (`id` INTEGER,`privilege` TEXT,PRIMARY KEY (id, privilege)CONSTRAINT fk_id FOREIGN KEY (id) REFERENCES auth (id) ON DELETE CASCADE);
";

/// An open `auth.sqlite`.
pub struct SqliteAuth {
    conn: Connection,
}

impl SqliteAuth {
    /// Opens an existing database.
    pub fn open(path: &Path, read_only: bool) -> Result<SqliteAuth> {
        Ok(SqliteAuth {
            conn: sqlite::open(path, read_only)?,
        })
    }

    /// Opens the database, creating it with the current schema when it does not exist.
    pub fn open_or_create(path: &Path) -> Result<SqliteAuth> {
        Ok(SqliteAuth {
            conn: sqlite::open_or_create(path, CREATE_SCHEMA)?,
        })
    }

    /// SQLite's `PRAGMA data_version`: changes when another connection commits.
    pub fn data_version(&self) -> Result<i64> {
        sqlite::data_version(&self.conn)
    }
}

fn text(value: ValueRef<'_>, what: &str) -> Result<String> {
    match value {
        ValueRef::Null => Ok(String::new()),
        ValueRef::Text(t) | ValueRef::Blob(t) => String::from_utf8(t.to_vec())
            .map_err(|_| Error::corrupt(format!("auth.sqlite: {what} is not UTF-8"))),
        ValueRef::Integer(i) => Ok(i.to_string()),
        ValueRef::Real(f) => Ok(f.to_string()),
    }
}

/// `(id, entry)` for every row, sorted by name; privileges sorted.
fn read_entries(conn: &Connection) -> Result<Vec<(i64, AuthEntry)>> {
    let mut privileges: HashMap<i64, Vec<String>> = HashMap::new();
    let mut stmt =
        conn.prepare("SELECT `id`, `privilege` FROM `user_privileges` ORDER BY `id`, `privilege`")?;
    let mut rows = stmt.query([])?;
    while let Some(row) = rows.next()? {
        let id: i64 = row.get(0)?;
        let privilege = text(row.get_ref(1)?, "privilege")?;
        privileges.entry(id).or_default().push(privilege);
    }
    let mut stmt =
        conn.prepare("SELECT `id`, `name`, `password`, `last_login` FROM `auth` ORDER BY `name`")?;
    let mut rows = stmt.query([])?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        let id: i64 = row.get(0)?;
        let entry = AuthEntry {
            name: text(row.get_ref(1)?, "name")?,
            password: text(row.get_ref(2)?, "password")?,
            privileges: privileges.remove(&id).unwrap_or_default(),
            last_login: match row.get_ref(3)? {
                ValueRef::Integer(i) => i,
                ValueRef::Null => 0,
                _ => return Err(Error::corrupt("auth.sqlite: last_login is not an integer")),
            },
        };
        entry
            .validate()
            .map_err(|m| Error::corrupt(format!("auth.sqlite id {id}: {m}")))?;
        out.push((id, entry));
    }
    Ok(out)
}

impl AuthBackend for SqliteAuth {
    fn backend(&self) -> &'static str {
        "sqlite3"
    }

    fn version(&self) -> Option<u64> {
        self.data_version().ok().map(token)
    }

    /// Every player, sorted by name, privileges sorted.
    fn entries(&self) -> Result<Vec<AuthEntry>> {
        Ok(read_entries(&self.conn)?
            .into_iter()
            .map(|(_, entry)| entry)
            .collect())
    }

    /// Applies the edited list of entries (already parsed and checked) in one transaction.
    fn apply(&mut self, edited: &[AuthEntry]) -> Result<AuthChanges> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let current = read_entries(&tx)?;
        let ids: HashMap<&str, i64> = current
            .iter()
            .map(|(id, e)| (e.name.as_str(), *id))
            .collect();
        let entries: Vec<AuthEntry> = current.iter().map(|(_, e)| e.clone()).collect();
        let changes = diff(&entries, edited);
        for name in &changes.removed {
            if let Some(id) = ids.get(name.as_str()) {
                tx.execute("DELETE FROM `user_privileges` WHERE `id` = ?1", [id])?;
                tx.execute("DELETE FROM `auth` WHERE `id` = ?1", [id])?;
            }
        }
        for entry in edited {
            let id = match ids.get(entry.name.as_str()) {
                Some(&id) if changes.changed.contains(&entry.name) => {
                    tx.execute(
                        "UPDATE `auth` SET `password` = ?1, `last_login` = ?2 WHERE `id` = ?3",
                        params![entry.password, entry.last_login, id],
                    )?;
                    tx.execute("DELETE FROM `user_privileges` WHERE `id` = ?1", [id])?;
                    id
                }
                Some(_) => continue,
                None => {
                    tx.execute(
                        "INSERT INTO `auth` (`name`, `password`, `last_login`) VALUES (?1, ?2, ?3)",
                        params![entry.name, entry.password, entry.last_login],
                    )?;
                    tx.last_insert_rowid()
                }
            };
            for privilege in &entry.privileges {
                tx.execute(
                    "INSERT OR IGNORE INTO `user_privileges` (`id`, `privilege`) VALUES (?1, ?2)",
                    params![id, privilege],
                )?;
            }
        }
        tx.commit()?;
        Ok(changes)
    }
}
