//! The hashes of stored blocks seen in the current generation of the block cache, so that a
//! stat does not read a block's stored bytes again to learn what it already learned.
//!
//! A block file's stat is made of the block's stored bytes (their hash is its
//! [`Stat::source`](crate::vfs::tree::Stat::source), and picks the block's summary). While the
//! decoded block is cached, or its summary is in memory, the hash is known; past that, every
//! stat read the block from the map again. A second pass over a world larger than the
//! summaries in memory (an incremental `rsync`, where the kernel asks for every file's
//! attributes again on a read-write mount; a second `grep`, whose opens check the block's
//! source) read every block once per file.
//!
//! What was seen is used while the generation of the cache it was read in lasts: every commit
//! of ours moves it once the store shows the commit, and so does every change of another
//! writer that [`Blocks::refresh`](crate::luanti::cache::Blocks::refresh) sees (at most 50 ms
//! late), as for cached blocks and summaries, which were trusted the same way before. A hash
//! read under an older generation (before a commit, noted after it) is not kept, and the
//! entries of an older generation are dropped when the first of a newer one is noted (none
//! is answered meanwhile).
//!
//! It is bounded: at most [`StoredHashes::capacity`] blocks (all of a world of 229,376 blocks
//! in the 6 MiB of the default `--cache-size`: about 19 bytes a block); past that, blocks
//! are read as before. A pass in name order over a larger world keeps its first blocks rather
//! than churning through all of them, so each pass still skips that many reads.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::luanti::codec::block::BlockPos;

/// What one slot of the table weighs: its key and hash (16 bytes) and its control byte.
const SLOT_BYTES: usize = 17;

/// What was seen of the stored bytes of the block at a position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seen {
    /// The hash of the stored bytes.
    pub hash: u64,
    /// They come from a `readonly_backend` seed.
    pub from_seed: bool,
}

struct Inner {
    /// The generation the entries were seen in (`None`: none yet).
    generation: Option<u64>,
    /// By position (48 bits) and whether the bytes come from the seed (bit 48).
    seen: HashMap<u64, u64>,
}

/// The stored hashes seen in the current generation (see the module docs).
pub struct StoredHashes {
    inner: Mutex<Inner>,
    capacity: usize,
}

/// The key of the block at `pos`, its bytes from the seed or not.
fn key(pos: BlockPos, from_seed: bool) -> u64 {
    u64::from(pos.x as u16)
        | u64::from(pos.y as u16) << 16
        | u64::from(pos.z as u16) << 32
        | u64::from(from_seed) << 48
}

impl StoredHashes {
    /// A record weighing at most `bytes`: the most entries a hash table whose slots fit in
    /// `bytes` holds (it grows by doubling, up to seven eighths full).
    pub fn weighing(bytes: usize) -> StoredHashes {
        let mut slots = 8usize;
        while slots.saturating_mul(2).saturating_mul(SLOT_BYTES) <= bytes {
            slots *= 2;
        }
        StoredHashes {
            inner: Mutex::new(Inner {
                generation: None,
                seen: HashMap::new(),
            }),
            capacity: slots / 8 * 7,
        }
    }

    /// How many blocks it holds at most.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        crate::error::recover(&self.inner)
    }

    /// What was seen of the block at `pos` in `generation` (`None`: not seen then).
    pub fn get(&self, pos: BlockPos, generation: u64) -> Option<Seen> {
        let inner = self.inner();
        if inner.generation != Some(generation) {
            return None;
        }
        [false, true].into_iter().find_map(|from_seed| {
            inner
                .seen
                .get(&key(pos, from_seed))
                .map(|&hash| Seen { hash, from_seed })
        })
    }

    /// Notes that the stored bytes of the block at `pos`, read after `generation` was
    /// taken, are `seen`: kept while the generation is still `generation`.
    pub fn put(&self, pos: BlockPos, generation: u64, seen: Seen) {
        let mut inner = self.inner();
        match inner.generation {
            Some(g) if g == generation => {}
            // Read before a change we already moved on from.
            Some(g) if g > generation => return,
            _ => {
                inner.seen.clear();
                inner.generation = Some(generation);
            }
        }
        if inner.seen.contains_key(&key(pos, !seen.from_seed)) {
            // The block moved between the seed and the main map within a generation (another
            // writer, not seen yet): nothing is kept rather than a removal's marker, which
            // could make the table grow past its bound.
            inner.seen.clear();
            inner.generation = None;
            return;
        }
        if inner.seen.len() < self.capacity || inner.seen.contains_key(&key(pos, seen.from_seed)) {
            inner.seen.insert(key(pos, seen.from_seed), seen.hash);
        }
    }

    /// How many blocks are held (tests).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.inner().seen.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(x: i16, y: i16, z: i16) -> BlockPos {
        BlockPos { x, y, z }
    }

    fn seen(hash: u64, from_seed: bool) -> Seen {
        Seen { hash, from_seed }
    }

    #[test]
    fn what_was_seen_holds_for_its_generation_only() {
        let r = StoredHashes::weighing(1 << 20);
        let (a, b) = (pos(-1, 2, -3), pos(-1, 2, 3));
        r.put(a, 5, seen(10, false));
        r.put(b, 5, seen(11, true));
        assert_eq!(r.get(a, 5), Some(seen(10, false)));
        assert_eq!(r.get(b, 5), Some(seen(11, true)));
        assert_eq!(r.get(pos(1, 2, 3), 5), None);
        assert_eq!(r.get(a, 6), None, "another generation");
        // Read before the generation moved, noted after: not kept.
        r.put(a, 6, seen(20, false));
        r.put(b, 5, seen(13, false));
        assert_eq!((r.get(a, 6), r.get(b, 6)), (Some(seen(20, false)), None));
        assert_eq!(r.len(), 1, "the older generation's entries are gone");
        // A block seen from the other side of the seed in the same generation: nothing
        // seen is trusted any more.
        r.put(b, 6, seen(11, true));
        r.put(b, 6, seen(12, false));
        assert_eq!((r.get(a, 6), r.get(b, 6), r.len()), (None, None, 0));
        r.put(b, 6, seen(12, false));
        assert_eq!(r.get(b, 6), Some(seen(12, false)));
    }

    #[test]
    fn it_is_bounded_and_keeps_what_it_saw_first() {
        let r = StoredHashes::weighing(1000);
        let cap = r.capacity();
        assert_eq!(
            cap, 28,
            "32 slots of 17 bytes fit in 1000 bytes; 7/8 of them"
        );
        for x in 0..(2 * cap) as i16 {
            r.put(pos(x, 0, 0), 1, seen(x as u64, false));
        }
        assert_eq!(r.len(), cap);
        assert_eq!(r.get(pos(0, 0, 0), 1), Some(seen(0, false)));
        assert_eq!(r.get(pos(cap as i16, 0, 0), 1), None);
        // A block already held is updated even when full.
        r.put(pos(1, 0, 0), 1, seen(99, false));
        assert_eq!(r.get(pos(1, 0, 0), 1), Some(seen(99, false)));
        assert_eq!(
            StoredHashes::weighing(6 << 20).capacity(),
            229_376,
            "the share of the default --cache-size (3/16 of 32 MiB)"
        );
    }
}
