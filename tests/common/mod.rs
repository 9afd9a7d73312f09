//! What the integration tests share. Each test file declares `mod common;` and uses the
//! submodules it needs; the example fixtures of the mount tests include it as well.
//!
//! - [`samples`]: the one list of the real sample files, by path.
//! - [`fixtures`]: one world of each game with a file and its good and bad edits.
//! - [`scratch`]: writable temporary copies of samples and the daemon's state folder.
//! - [`engine`]: the real Luanti engine (world generator, probe, migrations).
//! - [`postgres`]: a throwaway PostgreSQL server and worlds the engine moved into it.
//! - [`redis_server`]: throwaway Redis servers (the one of `scripts/test`, or our own).
//! - [`mapblock`]: the one generator of synthetic Luanti map blocks.
//! - [`maps`]: reading every block of a `map.sqlite` and the codec round trip.
//! - [`survivalcraft`], [`tvda`]: helpers of those games' stores.
//! - [`hostile`], [`luanti_hostile`]: the hostile store corpora (also written by the
//!   examples `hostile_fixture` and `luanti_hostile` for the mount tests).

pub mod engine;
pub mod fixtures;
pub mod hostile;
pub mod luanti_hostile;
pub mod mapblock;
pub mod maps;
pub mod postgres;
pub mod redis_server;
pub mod samples;
pub mod scratch;
pub mod survivalcraft;
pub mod tvda;
