//! The containers of a Luanti world and their transactions: for the map, players, auth and
//! mod storage one enum each over the backends `world.mt` can name ([`map`], [`players`],
//! [`auth`], [`mod_storage`]), with one file per backend.
//! [`postgres`] connects to every PostgreSQL database one way (no password ever shown),
//! [`sqlite`] opens every SQLite database one way (one busy timeout); [`world_mt`] reads the
//! backend names; [`write_back`] groups the map's commits. Formats are in `codec/`, never
//! here.

pub mod auth;
pub mod auth_files;
pub mod auth_leveldb;
pub mod auth_postgres;
pub mod auth_sqlite;
pub mod leveldb;
pub mod map;
pub mod map_leveldb;
#[cfg(test)]
pub mod map_memory;
pub mod map_postgres;
pub mod map_redis;
pub mod map_seeded;
pub mod map_sqlite;
pub mod mod_storage;
pub mod mod_storage_files;
pub mod mod_storage_postgres;
pub mod mod_storage_sqlite;
pub mod players;
pub mod players_files;
pub mod players_leveldb;
pub mod players_postgres;
pub mod players_sqlite;
pub mod postgres;
pub mod read_ahead;
pub mod snapshot;
pub mod sqlite;
pub mod world_mt;
pub mod write_back;

/// A backend's change token as a number (the `version` of the auth data and of a
/// mod-storage entry: equal while the token is).
pub fn token(t: impl std::hash::Hash) -> u64 {
    use std::hash::Hasher;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    t.hash(&mut h);
    h.finish()
}
