//! Connecting to the PostgreSQL databases of a world (map, players, auth, mod storage) one
//! way, as the engine does (`Database_PostgreSQL` in `src/database/database-postgresql.cpp`).
//!
//! `world.mt` gives each a libpq connection string (`pgsql_connection = host=… port=…
//! user=… password=… dbname=…`); the `postgres` crate reads the same `key=value` format. A
//! string without `host` connects as libpq built by Debian does, on the Unix socket in
//! `/var/run/postgresql`. The password never leaves the parsed configuration: what is shown
//! (`worldfs info`, every error and log line) is [`Server::shown`], the host, port, database
//! and user only.
//!
//! A server that goes away during a mount costs the calls that needed it (`EIO`, with a log
//! line); a connection found broken is dropped and the next call connects again, so the
//! mount recovers when the server is back. Every change is one transaction, so a connection
//! lost before its commit leaves nothing half-written.

use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use postgres::{Client, Config, NoTls};

use crate::error::{Error, Result};
use crate::luanti::store::world_mt::WorldMt;

/// How long connecting may take when the string names no `connect_timeout`: a server that
/// is down fails the mount quickly.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a statement waits for a lock another session holds (a server running on the
/// world, inside its save transaction) before failing, as the SQLite stores' busy timeout.
const LOCK_TIMEOUT: &str = "SET lock_timeout = '2s'";

/// The most connections kept open for reuse per database.
const POOL: usize = 4;

/// Where libpq as Debian builds it connects when no host is given.
const DEFAULT_SOCKET: &str = "/var/run/postgresql";

/// A database server and database, from a `world.mt` connection string.
pub struct Server {
    /// Boxed: a configuration is large, and stores are variants of enums.
    config: Box<Config>,
    shown: String,
    idle: Mutex<Vec<Client>>,
    /// Whether the last connection attempt failed (logged once per outage).
    down: AtomicBool,
}

/// A PostgreSQL error as an `EIO` naming the server (never the password).
pub fn error(e: postgres::Error) -> Error {
    Error::new(libc::EIO, format!("PostgreSQL: {}", chain(&e)))
}

/// An error with its causes (`error connecting to server: No such file or directory`).
fn chain(e: &postgres::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let more = s.to_string();
        if !text.contains(&more) {
            text.push_str(&format!(": {more}"));
        }
        source = s.source();
    }
    text
}

/// Whether a failure says a table does not exist (yet): the engine creates its tables when
/// it connects, so a database without them holds nothing.
pub fn no_table(e: &postgres::Error) -> bool {
    e.code() == Some(&postgres::error::SqlState::UNDEFINED_TABLE)
}

/// Creates each `(table, definition)` that does not exist, as the engine's
/// `createTableIfNotExists` does (inside the caller's transaction).
pub fn create_tables(tx: &mut postgres::Transaction<'_>, tables: &[(&str, &str)]) -> Result<()> {
    for (table, definition) in tables {
        let absent: bool = tx
            .query_one("SELECT to_regclass($1::text) IS NULL", &[table])
            .map_err(error)?
            .get(0);
        if absent {
            tx.batch_execute(definition).map_err(error)?;
        }
    }
    Ok(())
}

impl Server {
    /// The server of the `world.mt` setting `key` (`pgsql_connection`, …); connects once, so
    /// a server that is down or refuses us fails here, with the host and database named.
    pub fn open(world_mt: &WorldMt, key: &str) -> Result<Server> {
        let text = world_mt.get(key).ok_or_else(|| {
            Error::invalid(format!(
                "world.mt: set {key} (host=… port=… user=… password=… dbname=…) to use the \
                 postgresql backend"
            ))
        })?;
        let server = Server::parse(text).map_err(|e| e.context(format!("world.mt: {key}")))?;
        let client = server.connect()?;
        server.release(client);
        Ok(server)
    }

    /// Parses a libpq `key=value` connection string.
    pub fn parse(text: &str) -> Result<Server> {
        let mut config = Config::from_str(text)
            .map_err(|e| Error::invalid(format!("not a PostgreSQL connection string: {e}")))?;
        if config.get_hosts().is_empty() {
            config.host(DEFAULT_SOCKET);
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        let shown = shown(&config);
        Ok(Server {
            config: Box::new(config),
            shown,
            idle: Mutex::new(Vec::new()),
            down: AtomicBool::new(false),
        })
    }

    /// Host, port, database and user, for messages: never the password.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// A new connection. The first failure of an outage and the first success after it
    /// are logged.
    fn connect(&self) -> Result<Client> {
        let mut client = self.connect_plain()?;
        if super::snapshot::on() {
            super::snapshot::begin_postgres(&mut client, &self.shown, || self.connect_plain())?;
        }
        Ok(client)
    }

    /// A new connection, outside any snapshot.
    fn connect_plain(&self) -> Result<Client> {
        let connected = self.config.connect(NoTls).and_then(|mut client| {
            client.batch_execute(LOCK_TIMEOUT)?;
            Ok(client)
        });
        match connected {
            Ok(client) => {
                if self.down.swap(false, Ordering::Relaxed) {
                    log::warn!("PostgreSQL ({}): connected again", self.shown);
                }
                Ok(client)
            }
            Err(e) => {
                let e = Error::new(
                    libc::EIO,
                    format!(
                        "cannot connect to PostgreSQL ({}): {}",
                        self.shown,
                        chain(&e)
                    ),
                );
                if !self.down.swap(true, Ordering::Relaxed) {
                    log::error!("{e}; the calls that need it fail until it is back");
                }
                Err(e)
            }
        }
    }

    fn release(&self, client: Client) {
        if client.is_closed() {
            return;
        }
        if let Ok(mut idle) = self.idle.lock() {
            if idle.len() < POOL {
                idle.push(client);
            }
        }
    }

    /// Runs the read `f` on a connection (a kept one, or a new one). A kept connection that
    /// proves broken (the server restarted since) is dropped and `f` runs again on a new
    /// one; a failure on a new connection is the call's, logged when the connection broke.
    pub fn read<T>(&self, mut f: impl FnMut(&mut Client) -> Result<T>) -> Result<T> {
        let snapshot = super::snapshot::on();
        // In a snapshot every connection stays in its transaction, which a failed statement
        // (even one the caller answers, as a missing table) would abort for good: each read
        // is rolled back to a savepoint after it.
        let mut f = |client: &mut Client| -> Result<T> {
            if !snapshot {
                return f(client);
            }
            client
                .batch_execute("SAVEPOINT worldfs_read")
                .map_err(error)?;
            let result = f(client);
            client
                .batch_execute("ROLLBACK TO SAVEPOINT worldfs_read; RELEASE SAVEPOINT worldfs_read")
                .map_err(error)?;
            result
        };
        if let Some(mut client) = self.kept() {
            let result = f(&mut client);
            if result.is_ok() || !client.is_closed() {
                self.release(client);
                return result.map_err(|e| self.named(e));
            }
        }
        let mut client = self.connect()?;
        let result = f(&mut client);
        self.done(client, result)
    }

    /// Runs the write `f` (one transaction) on a connection checked alive first, so that a
    /// transaction is never begun on a connection the server closed meanwhile. Never run
    /// twice: a transaction that failed is rolled back by the server, and the call fails.
    pub fn write<T>(&self, f: impl FnOnce(&mut Client) -> Result<T>) -> Result<T> {
        let alive = self
            .kept()
            .and_then(|mut c| c.is_valid(CONNECT_TIMEOUT).is_ok().then_some(c));
        let mut client = match alive {
            Some(c) => c,
            None => self.connect()?,
        };
        let result = f(&mut client);
        self.done(client, result)
    }

    /// A failure of the server named by host and database (other errors as they are).
    fn named(&self, e: Error) -> Error {
        if e.errno() == libc::EIO {
            e.context(&self.shown)
        } else {
            e
        }
    }

    fn kept(&self) -> Option<Client> {
        let client = self.idle.lock().map(|mut p| p.pop()).unwrap_or(None)?;
        (!client.is_closed()).then_some(client)
    }

    /// Keeps `client` for reuse unless it broke (then logs the failure).
    fn done<T>(&self, client: Client, result: Result<T>) -> Result<T> {
        let result = result.map_err(|e| self.named(e));
        match &result {
            Err(e) if client.is_closed() => {
                log::error!("{e}; the connection is lost, the next call connects again");
            }
            _ => self.release(client),
        }
        result
    }
}

/// `host=… port=… dbname=… user=…` of a configuration.
fn shown(config: &Config) -> String {
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .map(|h| match h {
            postgres::config::Host::Tcp(name) => name.clone(),
            postgres::config::Host::Unix(path) => path.display().to_string(),
        })
        .collect();
    let mut out = format!("host={}", hosts.join(","));
    if !config.get_ports().is_empty() {
        let ports: Vec<String> = config.get_ports().iter().map(u16::to_string).collect();
        out.push_str(&format!(" port={}", ports.join(",")));
    }
    if let Some(db) = config.get_dbname() {
        out.push_str(&format!(" dbname={db}"));
    }
    if let Some(user) = config.get_user() {
        out.push_str(&format!(" user={user}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shown_server_never_holds_the_password() {
        let s = Server::parse(
            "host=db.example port=5433 user=mt password=hunter2 dbname=world connect_timeout=1",
        )
        .unwrap();
        assert_eq!(s.shown(), "host=db.example port=5433 dbname=world user=mt");
        let s = Server::parse("user=mt password='hunter 2' dbname=w").unwrap();
        assert_eq!(s.shown(), "host=/var/run/postgresql dbname=w user=mt");
        let e = Server::parse("host=x password=hunter2 nonsense=1")
            .err()
            .unwrap();
        assert!(!e.to_string().contains("hunter2"), "{e}");
    }

    #[test]
    fn a_missing_connection_string_names_the_setting() {
        let mt = WorldMt::parse(b"backend = postgresql\n").unwrap();
        let e = Server::open(&mt, "pgsql_connection").err().unwrap();
        assert!(e.to_string().contains("set pgsql_connection"), "{e}");
    }
}
