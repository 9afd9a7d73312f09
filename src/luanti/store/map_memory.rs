//! A map held in memory: the [`MapBackend`] the tests of the layers above the stores
//! (caches, write-back, `index/`) use when what they test is not a database, so they need
//! no file and no server. It keeps the contract of every backend: a listing in key order
//! (the engine's `getBlockAsInteger` order, as SQLite's), a version that moves with every
//! commit, and commits that change every block or none.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

use crate::error::{lock, Error, Result};
use crate::luanti::codec::block::BlockPos;
use crate::luanti::store::map::{
    int_to_pos, pos_to_int, push_listed, Change, Listed, MapBackend, Produce, Select, Stream,
    POS_MIN,
};

/// The blocks, by `getBlockAsInteger`, and the version.
#[derive(Default)]
struct Blocks {
    by_pos: BTreeMap<i64, Vec<u8>>,
    version: i64,
}

/// A map in memory (see the module documentation).
#[derive(Default)]
pub struct MemoryMap {
    blocks: Mutex<Blocks>,
    read_only: bool,
}

impl MemoryMap {
    fn writable(&self) -> Result<()> {
        if self.read_only {
            return Err(Error::read_only("the map is read-only"));
        }
        Ok(())
    }
}

/// Listing keys are positive: `getBlockAsInteger` shifted past its smallest value.
fn key(n: i64) -> u64 {
    (n - POS_MIN + 1) as u64
}

/// A transaction: the blocks put, applied together at its end.
struct Transaction<'a> {
    blocks: &'a Blocks,
    put: Vec<(i64, Vec<u8>)>,
}

impl Stream for Transaction<'_> {
    fn get(&mut self, pos: BlockPos) -> Result<Option<Vec<u8>>> {
        Ok(self.blocks.by_pos.get(&pos_to_int(pos)).cloned())
    }

    fn put(&mut self, pos: BlockPos, data: &[u8]) -> Result<()> {
        self.put.push((pos_to_int(pos), data.to_vec()));
        Ok(())
    }
}

impl MapBackend for MemoryMap {
    fn describe(&self) -> Vec<(&'static str, String)> {
        vec![("backend", "memory".to_string())]
    }

    fn identity(&self) -> PathBuf {
        PathBuf::from("memory")
    }

    fn get(&self, pos: BlockPos) -> Result<Option<Vec<u8>>> {
        Ok(lock(&self.blocks)?.by_pos.get(&pos_to_int(pos)).cloned())
    }

    fn key_of(&self, pos: BlockPos) -> u64 {
        key(pos_to_int(pos))
    }

    fn list(&self, after: u64, limit: usize, with_data: bool) -> Result<Vec<Listed>> {
        let blocks = lock(&self.blocks)?;
        let (mut out, mut bytes) = (Vec::new(), 0usize);
        for (&n, data) in blocks.by_pos.iter().filter(|(&n, _)| key(n) > after) {
            let listed = Listed {
                pos: int_to_pos(n),
                key: key(n),
                data: with_data.then(|| data.clone()),
                from_seed: false,
            };
            if push_listed(&mut out, &mut bytes, listed) || out.len() >= limit {
                break;
            }
        }
        Ok(out)
    }

    fn out_of_range(&self) -> Result<u64> {
        Ok(0)
    }

    fn count(&self) -> Result<u64> {
        Ok(lock(&self.blocks)?.by_pos.len() as u64)
    }

    fn data_version(&self) -> Result<i64> {
        Ok(lock(&self.blocks)?.version)
    }

    fn read_only(&self) -> bool {
        self.read_only
    }

    fn commit_stream(&self, produce: Produce<'_>) -> Result<()> {
        self.writable()?;
        let mut blocks = lock(&self.blocks)?;
        let mut tx = Transaction {
            blocks: &blocks,
            put: Vec::new(),
        };
        produce(&mut tx)?;
        let put = tx.put;
        blocks.by_pos.extend(put);
        blocks.version += 1;
        Ok(())
    }

    fn commit_selected(&self, changes: Vec<Change>, select: Select<'_>) -> Result<Vec<Change>> {
        self.writable()?;
        let changes = select(changes)?;
        let mut blocks = lock(&self.blocks)?;
        for (pos, data) in &changes {
            match data {
                Some(d) => blocks.by_pos.insert(pos_to_int(*pos), d.clone()),
                None => blocks.by_pos.remove(&pos_to_int(*pos)),
            };
        }
        blocks.version += 1;
        Ok(changes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::luanti::store::map::MapStore;

    fn pos(x: i16) -> BlockPos {
        BlockPos { x, y: 0, z: 0 }
    }

    #[test]
    fn it_lists_in_key_order_in_pages_and_commits_all_or_nothing() {
        let map = MapStore::new(MemoryMap::default());
        map.commit(&[(pos(3), Some(vec![3])), (pos(-1), Some(vec![1]))])
            .unwrap();
        let v = map.data_version().unwrap();
        let first = map.list(0, 1, true).unwrap();
        assert_eq!(first.len(), 1);
        assert_eq!(
            (first[0].pos, first[0].data.clone()),
            (pos(-1), Some(vec![1]))
        );
        let rest = map.list(first[0].key, 10, false).unwrap();
        assert_eq!(rest.iter().map(|l| l.pos).collect::<Vec<_>>(), vec![pos(3)]);
        // A failed selection commits nothing and keeps the version.
        let e = map.commit_selected(vec![(pos(3), None)], |_, _| Err(Error::invalid("no")));
        assert!(e.is_err());
        assert_eq!((map.count().unwrap(), map.data_version().unwrap()), (2, v));
        let ro = MapStore::new(MemoryMap {
            read_only: true,
            ..MemoryMap::default()
        });
        assert_eq!(
            ro.commit(&[(pos(5), None)]).unwrap_err().errno(),
            libc::EROFS
        );
    }
}
