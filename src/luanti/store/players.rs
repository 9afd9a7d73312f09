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

/// What every backend of the players does (one implementation per backend:
/// `players_sqlite.rs`, `players_files.rs`, `players_leveldb.rs`, `players_postgres.rs`).
pub trait PlayerBackend: Send {
    /// The backend's name in `world.mt` (`sqlite3`, `files`, `leveldb`, `postgresql`).
    fn backend(&self) -> &'static str;

    /// The names of all players, sorted.
    fn list(&self) -> Result<Vec<String>>;

    /// Loads one player (`ENOENT` when there is none of that name).
    fn load(&self, name: &str) -> Result<Player>;

    /// Replaces an existing player (`ENOENT` when there is none of that name).
    fn save(&mut self, player: &Player) -> Result<()>;

    /// Adds a new player (`EEXIST` when the name is taken).
    fn create(&mut self, player: &Player) -> Result<()>;

    /// Deletes a player with everything stored for it.
    fn delete(&mut self, name: &str) -> Result<()>;
}

/// The players of a world, in whichever backend `world.mt` names: every question of
/// [`PlayerBackend`] is asked of it directly (it dereferences to its backend).
pub struct PlayerStore(Box<dyn PlayerBackend>);

impl std::ops::Deref for PlayerStore {
    type Target = dyn PlayerBackend;

    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}

impl std::ops::DerefMut for PlayerStore {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut *self.0
    }
}

impl PlayerStore {
    /// The players kept by `backend`.
    pub fn new(backend: impl PlayerBackend + 'static) -> PlayerStore {
        PlayerStore(Box::new(backend))
    }

    /// Opens the backend `world.mt` names. A missing `players.sqlite` is created only when
    /// writing is allowed (the engine would create it on start, too).
    pub fn open(world: &Path, world_mt: &WorldMt, read_only: bool) -> Result<PlayerStore> {
        match world_mt.backend("player_backend") {
            Backend::Files => Ok(PlayerStore::new(FilesPlayers::new(&world.join("players")))),
            Backend::Sqlite3 => {
                let path = world.join("players.sqlite");
                let store = if read_only || path.exists() {
                    SqlitePlayers::open(&path, read_only)?
                } else {
                    SqlitePlayers::open_or_create(&path)?
                };
                Ok(PlayerStore::new(store))
            }
            Backend::LevelDb => Ok(PlayerStore::new(LevelDbPlayers::open(
                &world.join("players.db"),
                read_only,
                // Never over tables whose CURRENT is gone: LevelDB would delete them.
                !read_only && crate::luanti::store::leveldb::may_create(&world.join("players.db")),
            )?)),
            Backend::Postgresql => Ok(PlayerStore::new(PostgresPlayers::open(world_mt)?)),
            other => Err(other.unsupported("player")),
        }
    }
}
