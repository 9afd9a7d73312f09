//! Maps for the unit tests of the Luanti layers: one place that knows how a test makes a
//! map holding the blocks it needs, in memory ([`memory_with`]) where what it tests is not
//! the database, or as a `map.sqlite` ([`map_with`]) where it is (another writer, a file
//! replaced, a sidecar beside it).

use std::path::PathBuf;

use crate::luanti::cache::new_block;
use crate::luanti::codec;
use crate::luanti::codec::block::BlockPos;
use crate::luanti::store::map::{Change, MapStore};
use crate::luanti::store::map_memory::MemoryMap;

/// The stored bytes of a new block whose every node is `name`.
pub fn blob(name: &str) -> Vec<u8> {
    let mut b = new_block();
    b.names = vec![name.to_string()];
    codec::encode_block(&b).expect("a new block encodes")
}

/// A map in memory holding, at each position, an all-`name` block.
pub fn memory_with(blocks: &[(BlockPos, &str)]) -> MapStore {
    let map = MapStore::new(MemoryMap::default());
    let changes: Vec<Change> = blocks.iter().map(|(p, n)| (*p, Some(blob(n)))).collect();
    map.commit(&changes).expect("first commit");
    map
}

/// A `map.sqlite` in a new temporary folder holding, at each position, an all-`name` block.
pub fn map_with(blocks: &[(BlockPos, &str)]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("map.sqlite");
    rusqlite::Connection::open(&path)
        .and_then(|c| c.execute("CREATE TABLE blocks (pos INT PRIMARY KEY, data BLOB)", []))
        .expect("a map database");
    let changes: Vec<Change> = blocks.iter().map(|(p, n)| (*p, Some(blob(n)))).collect();
    MapStore::open(&path, false)
        .expect("writer")
        .commit(&changes)
        .expect("first commit");
    (dir, path)
}
