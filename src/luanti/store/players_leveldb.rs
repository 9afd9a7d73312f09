//! `players.db`: the players of a world kept in LevelDB (`player_backend = leveldb`).
//!
//! As the engine's `PlayerDatabaseLevelDB` (`src/database/database-leveldb.cpp`): one
//! record per player, keyed by the name, in the binary form of
//! [`leveldb_records`](crate::luanti::codec::leveldb_records). Each save, creation or
//! removal is one synced LevelDB write. While the mount holds the database no server can
//! open it (see [`leveldb`](super::leveldb)).

use std::path::Path;

use crate::error::{Error, Result};
use crate::luanti::codec::leveldb_records::{decode_player, encode_player};
use crate::luanti::codec::player::Player;
use crate::luanti::store::leveldb::Db;
use crate::luanti::store::players::PlayerBackend;

/// An open `players.db`.
pub struct LevelDbPlayers {
    db: Db,
    read_only: bool,
}

impl LevelDbPlayers {
    /// Opens the database, creating it when `create` (as the engine would on start).
    pub fn open(path: &Path, read_only: bool, create: bool) -> Result<LevelDbPlayers> {
        Ok(LevelDbPlayers {
            db: Db::open(path, create)?,
            read_only,
        })
    }

    fn writable(&self) -> Result<()> {
        if self.read_only {
            return Err(Error::read_only("the mount is read-only"));
        }
        Ok(())
    }

    fn put(&self, player: &Player) -> Result<()> {
        player.validate()?;
        let record = encode_player(player)?;
        self.db
            .write(&[(player.name.as_bytes(), Some(record.as_slice()))])
    }
}

impl PlayerBackend for LevelDbPlayers {
    fn backend(&self) -> &'static str {
        "leveldb"
    }

    /// The names of all players, sorted (LevelDB's order). A key that is not UTF-8 is no
    /// name the engine can log in with: it is left out, with a warning.
    fn list(&self) -> Result<Vec<String>> {
        let mut names = Vec::new();
        self.db.scan(None, false, |key, _| {
            match std::str::from_utf8(key) {
                Ok(name) => names.push(name.to_string()),
                Err(_) => log::warn!(
                    "{}: a player key that is not UTF-8 is not shown",
                    self.db.path().display()
                ),
            }
            Ok(true)
        })?;
        Ok(names)
    }

    /// Loads one player (`ENOENT` when there is none of that name).
    fn load(&self, name: &str) -> Result<Player> {
        let record = self
            .db
            .get(name.as_bytes())?
            .ok_or_else(|| Error::no_such_object(format!("no player {name:?}")))?;
        decode_player(name, &record)
            .map_err(|e| e.context(format!("{}: player {name:?}", self.db.path().display())))
    }

    /// Replaces an existing player (`ENOENT` when there is none of that name).
    fn save(&mut self, player: &Player) -> Result<()> {
        self.writable()?;
        if self.db.get(player.name.as_bytes())?.is_none() {
            return Err(Error::no_such_object(format!(
                "no player {:?}",
                player.name
            )));
        }
        self.put(player)
    }

    /// Adds a new player (`EEXIST` when the name is taken).
    fn create(&mut self, player: &Player) -> Result<()> {
        self.writable()?;
        if self.db.get(player.name.as_bytes())?.is_some() {
            return Err(Error::exists(format!("player {:?} exists", player.name)));
        }
        self.put(player)
    }

    /// Deletes a player.
    fn delete(&mut self, name: &str) -> Result<()> {
        self.writable()?;
        if self.db.get(name.as_bytes())?.is_none() {
            return Err(Error::no_such_object(format!("no player {name:?}")));
        }
        self.db.write(&[(name.as_bytes(), None)])
    }
}
