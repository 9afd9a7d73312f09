//! A throwaway PostgreSQL server for the tests, and worlds the engine moved into it.
//!
//! `scripts/test` starts one server (`scripts/pg-server`) for the whole run and names it in
//! `WORLDFS_PG`; a test binary run without it starts its own (stopped when the binary
//! exits). A test never skips for want of a server: when none can be started, it fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

use super::engine::{mkworld_with, ENGINE_LOCK};

const ENGINE: &str = "/usr/games/minetestserver";

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/pg-server")
}

/// A server of our own, in its own folder: stopped and removed when dropped.
pub struct OwnServer {
    pub dir: PathBuf,
    pub connection: String,
}

impl OwnServer {
    /// Starts a new server (stopped at the latest when this process exits).
    pub fn start() -> OwnServer {
        let dir = tempfile::Builder::new()
            .prefix("worldfs-pg")
            .tempdir_in("/tmp")
            .unwrap()
            .keep();
        let out = Command::new(script())
            .arg("start")
            .arg(&dir)
            .arg(std::process::id().to_string())
            .stderr(Stdio::inherit())
            .output()
            .expect("running scripts/pg-server");
        assert!(
            out.status.success(),
            "scripts/pg-server could not start a PostgreSQL server (is the postgresql package \
             installed? scripts/install-deps)"
        );
        let connection = String::from_utf8(out.stdout).unwrap().trim().to_string();
        OwnServer { dir, connection }
    }

    fn run(&self, what: &str) {
        let status = Command::new(script())
            .arg(what)
            .arg(&self.dir)
            .status()
            .unwrap();
        assert!(status.success(), "pg-server {what}");
    }

    /// Stops the server, keeping its data.
    pub fn pause(&self) {
        self.run("pause");
    }

    /// Starts it again.
    pub fn resume(&self) {
        self.run("resume");
    }
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        let _ = Command::new(script()).arg("stop").arg(&self.dir).status();
    }
}

/// The connection string (to the database `postgres`) of the run's server.
pub fn server() -> &'static str {
    static SERVER: OnceLock<String> = OnceLock::new();
    static OWN: OnceLock<OwnServer> = OnceLock::new();
    SERVER.get_or_init(|| match std::env::var("WORLDFS_PG") {
        Ok(c) if !c.is_empty() => c,
        _ => OWN.get_or_init(OwnServer::start).connection.clone(),
    })
}

/// `connection` with its database replaced by `db`.
pub fn with_db(connection: &str, db: &str) -> String {
    let mut words: Vec<String> = connection
        .split_whitespace()
        .filter(|w| !w.starts_with("dbname="))
        .map(str::to_string)
        .collect();
    words.push(format!("dbname={db}"));
    words.join(" ")
}

/// A new, empty database on `connection`'s server; its connection string.
pub fn database_on(connection: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let name = format!(
        "t{}_{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
    );
    let mut client = postgres::Client::connect(connection, postgres::NoTls)
        .expect("connecting to the test PostgreSQL server");
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .unwrap();
    with_db(connection, &name)
}

/// A new, empty database on the run's server.
pub fn database() -> String {
    database_on(server())
}

/// Appends `key = value` to `world/world.mt`.
pub fn set(world: &Path, key: &str, value: &str) {
    let path = world.join("world.mt");
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str(&format!("{key} = {value}\n"));
    std::fs::write(&path, text).unwrap();
}

/// Lets the engine migrate `what` (`--migrate`, `--migrate-players`, …) of `world` to
/// PostgreSQL; asserts that it reports success.
pub fn migrate(world: &Path, flag: &str) {
    let log = world.join("migrate.log");
    let status = Command::new("flock")
        .arg(ENGINE_LOCK)
        .arg(ENGINE)
        .arg("--world")
        .arg(world)
        .arg(flag)
        .arg("postgresql")
        .arg("--logfile")
        .arg(&log)
        .current_dir(world)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run minetestserver");
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        status.success() && text.contains("Successfully migrated"),
        "engine {flag} postgresql failed:\n{text}"
    );
    std::fs::remove_file(&log).unwrap();
}

/// A world the engine generated (radius 1, players and auth in SQLite) in `parent/name`,
/// and an untouched copy of it in `parent/name.sqlite`; then the engine moved the map of
/// the first into a new database, which it names in `world.mt`.
pub fn engine_world(parent: &Path, name: &str) -> (PathBuf, PathBuf) {
    let world = mkworld_with(parent, name, "sqlite3", "sqlite3");
    let copy = parent.join(format!("{name}.sqlite"));
    let status = Command::new("cp")
        .arg("-r")
        .arg(&world)
        .arg(&copy)
        .status()
        .unwrap();
    assert!(status.success());
    set(&world, "pgsql_connection", &database());
    migrate(&world, "--migrate");
    (world, copy)
}
