//! Auth in PostgreSQL (`auth_backend = postgresql`, `pgsql_auth_connection`).
//!
//! As `AuthDatabasePostgreSQL` in the engine's `src/database/database-postgresql.cpp`:
//! tables `auth(id SERIAL, name TEXT UNIQUE, password TEXT, last_login INT)` and
//! `user_privileges(id, privilege)` (deleted with their `auth` row by `ON DELETE CASCADE`).
//! An edited auth.txt is applied as a difference in one transaction, with the engine's
//! statements: `auth_delete` for a removed player, `auth_write` then `auth_delete_privs` and
//! `auth_write_privs` for a changed one, `auth_create … RETURNING id` and its privileges for
//! a new one.

use std::collections::HashMap;
use std::sync::Mutex;

use postgres::GenericClient;

use crate::error::{lock, Error, Result};
use crate::luanti::codec::auth_line::AuthEntry;
use crate::luanti::store::auth::AuthBackend;
use crate::luanti::store::auth::{diff, AuthChanges};
use crate::luanti::store::postgres::{create_tables, error, no_table, Server};
use crate::luanti::store::token;
use crate::luanti::store::world_mt::WorldMt;

/// The engine's tables (`AuthDatabasePostgreSQL::createDatabase`).
const TABLES: [(&str, &str); 2] = [
    (
        "auth",
        "CREATE TABLE auth (id SERIAL,name TEXT UNIQUE,password TEXT,\
         last_login INT NOT NULL DEFAULT 0,PRIMARY KEY (id));",
    ),
    (
        "user_privileges",
        "CREATE TABLE user_privileges (id INT,privilege TEXT,PRIMARY KEY (id, privilege),\
         CONSTRAINT fk_id FOREIGN KEY (id) REFERENCES auth (id) ON DELETE CASCADE);",
    ),
];

/// Auth data in PostgreSQL.
pub struct PostgresAuth {
    server: Server,
    /// The last stamp, with the server's snapshot it was computed in (see
    /// [`PostgresAuth::stamp`]).
    kept: Mutex<Option<(String, String)>>,
}

/// The stamp of the tables and the snapshot of the statement that computed it.
const STAMP: &str = "SELECT txid_current_snapshot()::text, \
    (SELECT md5(coalesce(string_agg(id::text || ':' || xmin::text, ',' ORDER BY id), '')) \
     FROM auth) || (SELECT md5(coalesce(string_agg(id::text || ':' || xmin::text || ':' || \
     privilege, ',' ORDER BY id, privilege), '')) FROM user_privileges)";

impl PostgresAuth {
    /// Connects to the server `pgsql_auth_connection` names.
    pub fn open(world_mt: &WorldMt) -> Result<PostgresAuth> {
        Ok(PostgresAuth {
            server: Server::open(world_mt, "pgsql_auth_connection")?,
            kept: Mutex::new(None),
        })
    }

    /// The server and database, without the password.
    pub fn shown(&self) -> &str {
        self.server.shown()
    }

    /// A token of the tables' content: a hash, computed by the server, of every row's id and
    /// `xmin` (the transaction that wrote that version of the row). Any committed insert,
    /// update or delete changes it (a new row version always has a new `xmin`; a deleted one
    /// is gone from the list), so a stat of auth.txt needs one aggregate query, not the
    /// accounts sent over and rendered. `None` before the tables exist.
    ///
    /// The scan runs again only when the server's snapshot moved since the last one (a
    /// transaction that wrote anything in the cluster ended or began): the kernel asks for
    /// auth.txt's attributes before each read call, and a server's million accounts must
    /// not be scanned for each.
    pub fn stamp(&self) -> Result<Option<String>> {
        let now: String = self.server.read(|c| {
            c.query_one("SELECT txid_current_snapshot()::text", &[])
                .map(|r| r.get(0))
                .map_err(error)
        })?;
        if let Some((snapshot, stamp)) = lock(&self.kept)?.as_ref() {
            if *snapshot == now {
                return Ok(Some(stamp.clone()));
            }
        }
        let computed = self.server.read(|c| match c.query_one(STAMP, &[]) {
            Ok(row) => Ok(row
                .get::<_, Option<String>>(1)
                .map(|stamp| (row.get::<_, String>(0), stamp))),
            Err(e) if no_table(&e) => Ok(None),
            Err(e) => Err(error(e)),
        })?;
        let stamp = computed.as_ref().map(|(_, stamp)| stamp.clone());
        *lock(&self.kept)? = computed;
        Ok(stamp)
    }
}

/// `(id, entry)` for every row, sorted by name; privileges sorted.
fn read_entries(c: &mut impl GenericClient) -> Result<Vec<(i32, AuthEntry)>> {
    let privileges = match c.query(
        "SELECT id, privilege FROM user_privileges ORDER BY id, privilege",
        &[],
    ) {
        Ok(rows) => rows,
        Err(e) if no_table(&e) => return Ok(Vec::new()),
        Err(e) => return Err(error(e)),
    };
    let mut by_id: HashMap<i32, Vec<String>> = HashMap::new();
    for r in privileges {
        let privilege: Option<String> = r.get(1);
        by_id
            .entry(r.get(0))
            .or_default()
            .push(privilege.unwrap_or_default());
    }
    let rows = c
        .query("SELECT id, name, password, last_login FROM auth", &[])
        .map_err(error)?;
    let mut out = Vec::new();
    for r in rows {
        let id: i32 = r.get(0);
        let text = |i: usize| r.get::<_, Option<String>>(i).unwrap_or_default();
        let entry = AuthEntry {
            name: text(1),
            password: text(2),
            privileges: by_id.remove(&id).unwrap_or_default(),
            last_login: i64::from(r.get::<_, i32>(3)),
        };
        entry
            .validate()
            .map_err(|m| Error::corrupt(format!("auth id {id}: {m}")))?;
        out.push((id, entry));
    }
    out.sort_by(|a, b| a.1.name.cmp(&b.1.name));
    Ok(out)
}

impl AuthBackend for PostgresAuth {
    fn backend(&self) -> &'static str {
        "postgresql"
    }

    fn version(&self) -> Option<u64> {
        self.stamp().ok()?.map(token)
    }

    /// Every player, sorted by name, privileges sorted.
    fn entries(&self) -> Result<Vec<AuthEntry>> {
        let entries = self.server.read(read_entries)?;
        Ok(entries.into_iter().map(|(_, e)| e).collect())
    }

    /// Applies the edited list of entries (already parsed and checked) in one transaction.
    fn apply(&mut self, edited: &[AuthEntry]) -> Result<AuthChanges> {
        self.server.write(|c| {
            let mut tx = c.transaction().map_err(error)?;
            create_tables(&mut tx, &TABLES)?;
            tx.batch_execute("LOCK TABLE auth IN SHARE ROW EXCLUSIVE MODE")
                .map_err(error)?;
            let current = read_entries(&mut tx)?;
            let ids: HashMap<&str, i32> = current
                .iter()
                .map(|(id, e)| (e.name.as_str(), *id))
                .collect();
            let entries: Vec<AuthEntry> = current.iter().map(|(_, e)| e.clone()).collect();
            let changes = diff(&entries, edited);
            for name in &changes.removed {
                tx.execute("DELETE FROM auth WHERE name = $1", &[name])
                    .map_err(error)?;
            }
            for entry in edited {
                let last_login = i32::try_from(entry.last_login).map_err(|_| {
                    Error::invalid(format!(
                        "{}: last login {} does not fit the engine's INT column",
                        entry.name, entry.last_login
                    ))
                })?;
                let id = match ids.get(entry.name.as_str()) {
                    Some(&id) if changes.changed.contains(&entry.name) => {
                        tx.execute(
                            "UPDATE auth SET name = $1, password = $2, last_login = $3 WHERE id = $4",
                            &[&entry.name, &entry.password, &last_login, &id],
                        )
                        .map_err(error)?;
                        tx.execute("DELETE FROM user_privileges WHERE id = $1", &[&id])
                            .map_err(error)?;
                        id
                    }
                    Some(_) => continue,
                    None => tx
                        .query_one(
                            "INSERT INTO auth (name, password, last_login) VALUES ($1, $2, $3) \
                             RETURNING id",
                            &[&entry.name, &entry.password, &last_login],
                        )
                        .map_err(error)?
                        .get(0),
                };
                for privilege in &entry.privileges {
                    tx.execute(
                        "INSERT INTO user_privileges (id, privilege) VALUES ($1, $2) \
                         ON CONFLICT DO NOTHING",
                        &[&id, privilege],
                    )
                    .map_err(error)?;
                }
            }
            tx.commit().map_err(error)?;
            Ok(changes)
        })
    }
}
