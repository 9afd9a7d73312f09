//! Luanti players: the player file format, players.sqlite (both schemas), LevelDB's
//! players.db, PostgreSQL and the files backend.
//!
//! [`PlayerStore`] opens whichever backend `world.mt` names (`player_backend`, missing =
//! `files`) and offers the same operations on both, so `players/NAME` in the mount is the same
//! text file whatever stores it. This module also holds the Settings syntax and the `world.mt`
//! reader, which auth and mod storage use too.

use std::path::Path;

use crate::error::Result;
pub use crate::luanti::codec::player::{parse_player, read_player_file, render_player, Player};
use crate::luanti::store::players_files::FilesPlayers;
use crate::luanti::store::players_leveldb::LevelDbPlayers;
use crate::luanti::store::players_postgres::PostgresPlayers;
use crate::luanti::store::players_sqlite::SqlitePlayers;
use crate::luanti::store::world_mt::{Backend, WorldMt};

/// The players of a world, in whichever backend holds them.
pub enum PlayerStore {
    Sqlite(SqlitePlayers),
    Files(FilesPlayers),
    LevelDb(LevelDbPlayers),
    Postgres(PostgresPlayers),
}

impl PlayerStore {
    /// Opens the backend `world.mt` names. A missing `players.sqlite` is created only when
    /// writing is allowed (the engine would create it on start, too).
    pub fn open(world: &Path, world_mt: &WorldMt, read_only: bool) -> Result<PlayerStore> {
        match world_mt.backend("player_backend") {
            Backend::Files => Ok(PlayerStore::Files(FilesPlayers::new(
                &world.join("players"),
            ))),
            Backend::Sqlite3 => {
                let path = world.join("players.sqlite");
                let store = if read_only || path.exists() {
                    SqlitePlayers::open(&path, read_only)?
                } else {
                    SqlitePlayers::open_or_create(&path)?
                };
                Ok(PlayerStore::Sqlite(store))
            }
            Backend::LevelDb => Ok(PlayerStore::LevelDb(LevelDbPlayers::open(
                &world.join("players.db"),
                read_only,
                !read_only,
            )?)),
            Backend::Postgresql => Ok(PlayerStore::Postgres(PostgresPlayers::open(world_mt)?)),
            other => Err(other.unsupported("player")),
        }
    }

    /// The names of all players, sorted.
    pub fn list(&self) -> Result<Vec<String>> {
        match self {
            PlayerStore::Sqlite(s) => s.list(),
            PlayerStore::Files(f) => f.list(),
            PlayerStore::LevelDb(l) => l.list(),
            PlayerStore::Postgres(p) => p.list(),
        }
    }

    /// Loads one player (`ENOENT` when there is none of that name).
    pub fn load(&self, name: &str) -> Result<Player> {
        match self {
            PlayerStore::Sqlite(s) => s.load(name),
            PlayerStore::Files(f) => f.load(name),
            PlayerStore::LevelDb(l) => l.load(name),
            PlayerStore::Postgres(p) => p.load(name),
        }
    }

    /// Replaces an existing player (`ENOENT` when there is none of that name).
    pub fn save(&mut self, player: &Player) -> Result<()> {
        match self {
            PlayerStore::Sqlite(s) => s.save(player),
            PlayerStore::Files(f) => f.save(player),
            PlayerStore::LevelDb(l) => l.save(player),
            PlayerStore::Postgres(p) => p.save(player),
        }
    }

    /// Adds a new player (`EEXIST` when the name is taken).
    pub fn create(&mut self, player: &Player) -> Result<()> {
        match self {
            PlayerStore::Sqlite(s) => s.create(player),
            PlayerStore::Files(f) => f.create(player),
            PlayerStore::LevelDb(l) => l.create(player),
            PlayerStore::Postgres(p) => p.create(player),
        }
    }

    /// Deletes a player with everything stored for it.
    pub fn delete(&mut self, name: &str) -> Result<()> {
        match self {
            PlayerStore::Sqlite(s) => s.delete(name),
            PlayerStore::Files(f) => f.delete(name),
            PlayerStore::LevelDb(l) => l.delete(name),
            PlayerStore::Postgres(p) => p.delete(name),
        }
    }
}
