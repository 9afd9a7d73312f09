//! `world.mt`: which backend stores the map, players, auth and mod storage.
//!
//! The engine reads `world.mt` with the Settings syntax and no terminator. A world without
//! `player_backend` or `auth_backend` is treated as `files` (and the engine rewrites the
//! file; worldfs never does); a missing `mod_storage_backend` is `files` too, a missing map
//! `backend` is `sqlite3`. A world folder without any `world.mt` gets one naming `sqlite3`
//! for all four when the engine starts on it (`loadGameConfAndInitWorld` in
//! `src/content/subgames.cpp`). worldfs reads each store of such a folder where its data is
//! (`players.sqlite` or `players/`, `auth.sqlite` or `auth.txt`, `mod_storage.sqlite` or
//! `mod_storage/`), and as `sqlite3` where there is none: nothing on disk is hidden from the
//! mount (and from a backup through it), and a store made through the mount is the one the
//! engine will read.

use std::io::Read;
use std::path::Path;

use crate::error::{Error, Result};
use crate::luanti::codec::settings::{self, Mode, Value};
use crate::storekit::replace::open_no_follow;

/// The settings of a `world.mt` file (last occurrence of a key wins, as in the engine).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorldMt {
    entries: Vec<(String, String)>,
    /// Keys whose value is a `{ … }` group (not a backend or a connection: see
    /// [`WorldMt::store_group`]).
    groups: Vec<String>,
    /// There was no `world.mt`: the backend of each store, found from its data on disk.
    absent: Option<Vec<(&'static str, Backend)>>,
}

/// The backend settings of the stores besides the map, and the data each backend keeps in
/// the world folder: `sqlite3` and `files`.
const ACCOUNT_STORES: [(&str, &str, &str); 3] = [
    ("player_backend", "players.sqlite", "players"),
    ("auth_backend", "auth.sqlite", "auth.txt"),
    ("mod_storage_backend", "mod_storage.sqlite", "mod_storage"),
];

/// A storage backend named in `world.mt`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    Sqlite3,
    Files,
    Postgresql,
    LevelDb,
    Redis,
    /// `dummy`, or a name the engine does not know either.
    Other(String),
}

impl WorldMt {
    /// Parses the text of a `world.mt`; lines the engine would skip are skipped.
    pub fn parse(text: &[u8]) -> Result<WorldMt> {
        let parsed = settings::parse(text, None, Mode::Lenient)?;
        let mut entries = Vec::new();
        let mut groups = Vec::new();
        for e in parsed.entries {
            match e.value {
                Value::Text(v) => entries.push((e.key, v)),
                Value::Group(_) => groups.push(e.key),
            }
        }
        Ok(WorldMt {
            entries,
            groups,
            absent: None,
        })
    }

    /// Reads `WORLD/world.mt`; a world without one has no settings. A `world.mt` that is a
    /// link is refused, never read through: its errors would quote the target's lines.
    pub fn read(world: &Path) -> Result<WorldMt> {
        let path = world.join("world.mt");
        let mut file = match open_no_follow(&path, false) {
            Ok(file) => file,
            Err(e) if e.errno() == libc::ENOENT => {
                let found = ACCOUNT_STORES
                    .iter()
                    .map(|&(key, sqlite, files)| {
                        let backend = if world.join(sqlite).exists() {
                            Backend::Sqlite3
                        } else if std::fs::symlink_metadata(world.join(files)).is_ok() {
                            Backend::Files
                        } else {
                            Backend::Sqlite3
                        };
                        (key, backend)
                    })
                    .collect();
                return Ok(WorldMt {
                    entries: Vec::new(),
                    groups: Vec::new(),
                    absent: Some(found),
                });
            }
            Err(e) => return Err(e),
        };
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|e| Error::from(e).context(path.display()))?;
        Self::parse(&bytes).map_err(|e| e.context(path.display()))
    }

    /// Every setting, in file order.
    pub fn settings(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// The value of `key`, if set.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The backend named by `key` (`player_backend`, `auth_backend`,
    /// `mod_storage_backend`); `files` when unset, as the engine treats it. Without a
    /// `world.mt`, where the store's data is (see the module docs).
    pub fn backend(&self, key: &str) -> Backend {
        match (self.get(key), &self.absent) {
            (Some(name), _) => Backend::named(name),
            (None, Some(found)) => found
                .iter()
                .find(|(k, _)| *k == key)
                .map_or(Backend::Sqlite3, |(_, b)| b.clone()),
            (None, None) => Backend::Files,
        }
    }

    /// A setting of where data is stored that is given as a `{ … }` group (the engine
    /// refuses to start on it; this parser would read past it).
    pub fn store_group(&self) -> Option<&str> {
        self.groups
            .iter()
            .map(String::as_str)
            .find(|key| is_store_setting(key))
    }

    /// The map backend (`backend`); `sqlite3` when unset, as the engine treats it.
    pub fn map_backend(&self) -> Backend {
        match self.get("backend") {
            None => Backend::Sqlite3,
            Some(name) => Backend::named(name),
        }
    }
}

/// The backend settings, what each stores, and the setting naming its PostgreSQL database.
const BACKENDS: [(&str, &str, &str); 4] = [
    ("backend", "the map", "pgsql_connection"),
    ("player_backend", "players", "pgsql_player_connection"),
    ("auth_backend", "auth data", "pgsql_auth_connection"),
    (
        "mod_storage_backend",
        "mod storage",
        "pgsql_mod_storage_connection",
    ),
];

/// The settings naming the Redis hash that holds the map.
const REDIS_SETTINGS: [&str; 4] = [
    "redis_address",
    "redis_port",
    "redis_hash",
    "redis_password",
];

/// Whether [`WorldMt::store_change`] may compare `key`.
pub fn is_store_setting(key: &str) -> bool {
    key == "readonly_backend"
        || REDIS_SETTINGS.contains(&key)
        || BACKENDS
            .iter()
            .any(|(backend, _, pgsql)| key == *backend || key == *pgsql)
}

impl WorldMt {
    /// The backend `key` names, read as the engine reads it.
    fn backend_of(&self, key: &str) -> Backend {
        match key {
            "backend" => self.map_backend(),
            _ => self.backend(key),
        }
    }

    /// How `new` moves the world's data elsewhere than `self` says it is (another backend,
    /// or another database of a backend in use), or `None` when both name the same stores.
    /// Settings of backends not in use (a `pgsql_connection` added before a migration) are
    /// not compared. Names the setting and the backends, never a connection string's value
    /// (it may hold a password).
    pub fn store_change(&self, new: &WorldMt) -> Option<String> {
        let mut in_use = vec!["readonly_backend"];
        for (key, what, pgsql) in BACKENDS {
            let (old, new) = (self.backend_of(key), new.backend_of(key));
            if old != new {
                return Some(format!(
                    "{what}: stored in {}, and this names {} ({key})",
                    old.name(),
                    new.name()
                ));
            }
            match old {
                Backend::Postgresql => in_use.push(pgsql),
                Backend::Redis => in_use.extend(REDIS_SETTINGS),
                _ => {}
            }
        }
        in_use
            .into_iter()
            .find(|key| self.get(key) != new.get(key))
            .map(|key| format!("it changes {key}"))
    }
}

impl Backend {
    /// The backend of a name as `world.mt` spells it.
    pub fn named(name: &str) -> Backend {
        match name {
            "files" => Backend::Files,
            "sqlite3" => Backend::Sqlite3,
            "postgresql" => Backend::Postgresql,
            "leveldb" => Backend::LevelDb,
            "redis" => Backend::Redis,
            other => Backend::Other(other.to_string()),
        }
    }

    /// The name as `world.mt` spells it.
    pub fn name(&self) -> &str {
        match self {
            Backend::Sqlite3 => "sqlite3",
            Backend::Files => "files",
            Backend::Postgresql => "postgresql",
            Backend::LevelDb => "leveldb",
            Backend::Redis => "redis",
            Backend::Other(name) => name,
        }
    }

    /// The error for a backend worldfs cannot open.
    pub fn unsupported(&self, what: &str) -> Error {
        Error::unsupported(format!("{what} backend {:?} is not supported", self.name()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_world_mt_that_is_a_link_is_refused_not_read_through() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, b"password = hunter2\n").unwrap();
        let world = dir.path().join("world");
        std::fs::create_dir(&world).unwrap();
        std::os::unix::fs::symlink(&secret, world.join("world.mt")).unwrap();
        let e = WorldMt::read(&world).unwrap_err();
        assert_eq!(e.errno(), libc::ELOOP, "{e}");
        assert!(!e.to_string().contains("hunter2"), "{e}");
        std::fs::remove_file(world.join("world.mt")).unwrap();
        assert_eq!(WorldMt::read(&world).unwrap().settings().count(), 0);
    }

    #[test]
    fn backends_default_to_files() {
        let mt = WorldMt::parse(
            b"gameid = minetest\nplayer_backend = sqlite3\nauth_backend = leveldb\nnonsense\n",
        )
        .unwrap();
        assert_eq!(mt.backend("player_backend"), Backend::Sqlite3);
        assert_eq!(mt.backend("auth_backend"), Backend::LevelDb);
        assert_eq!(mt.backend("mod_storage_backend"), Backend::Files);
        assert_eq!(mt.map_backend(), Backend::Sqlite3);
        assert_eq!(mt.get("gameid"), Some("minetest"));
    }
}
