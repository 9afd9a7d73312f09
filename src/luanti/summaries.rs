//! What the stats of a block folder's entries take from the decoded block, kept after the
//! block leaves the cache: each view's size and content hash, and the hash of the `meta/`
//! listing.
//!
//! A listing of a block folder with attributes (`ls -l`, `find`, every pass of `rsync`)
//! needs the exact size of every view, which takes decoding the block and rendering its five
//! views. The decoded-block cache holds a few thousand blocks; a world's second pass (an
//! incremental backup, `ls -l` again) finds them gone and decoded and rendered everything
//! again. A summary is about a hundred bytes a block, so three sixteenths of `--cache-size` keep one
//! for tens of thousands of blocks (40,853 with the default 32 MiB), and the stats come from
//! it while the block's stored bytes are unchanged.
//!
//! A summary names the hash of the stored bytes it was computed from, and views are rendered
//! from those bytes alone (and the block's position), so it is never stale: it is used only
//! after the stored bytes were seen to hash the same, once per generation of the cache
//! (which moves with every commit of ours and every change another writer made; see
//! [`crate::luanti::cache::Blocks::summary`]). What is not in the stored bytes (the times
//! recorded for entries, node folders made by `mkdir` before they hold anything) is looked
//! up as for a decoded block.
//!
//! Summaries are also kept on disk ([`crate::luanti::summary_file`]): one that left memory,
//! or was made by an earlier mount, is read back from there when memory has none.

use std::num::NonZeroUsize;
use std::sync::Mutex;

use lru::LruCache;

use crate::luanti::codec::block::BlockPos;
use crate::luanti::summary_file::SummaryFile;

/// The views of a block folder (see `tree::blocks::VIEWS`).
pub const VIEW_COUNT: usize = 5;

/// What one kept summary weighs with the map's own (its node and slot): 88 bytes of
/// summary (`size_of`), its key, two links and the allocator's rounding, and a slot.
pub const SUMMARY_BYTES: usize = 154;

/// A size no view has (the codec bounds a block and its views to tens of MiB): not known.
const UNKNOWN: u32 = u32::MAX;

/// What the stats of one block's entries need, for the stored bytes hashing to `hash`.
#[derive(Clone, Copy)]
pub struct Summary {
    /// The hash of the stored bytes the rest was computed from.
    pub hash: u64,
    sizes: [u32; VIEW_COUNT],
    hashes: [u64; VIEW_COUNT],
    /// Bit `i`: `hashes[i]` is known.
    hashed: u8,
    /// The hash of the `meta/` listing of the stored nodes, and whether it lists any.
    meta: Option<(u64, bool)>,
}

impl Summary {
    pub(crate) fn new(hash: u64) -> Summary {
        Summary {
            hash,
            sizes: [UNKNOWN; VIEW_COUNT],
            hashes: [0; VIEW_COUNT],
            hashed: 0,
            meta: None,
        }
    }

    /// The size of view `i`, if known.
    pub fn size(&self, i: usize) -> Option<u64> {
        self.sizes
            .get(i)
            .filter(|&&s| s != UNKNOWN)
            .map(|&s| u64::from(s))
    }

    /// The content hash of view `i`, if known.
    pub fn view_hash(&self, i: usize) -> Option<u64> {
        (i < VIEW_COUNT && self.hashed & (1 << i) != 0).then(|| self.hashes[i])
    }

    /// The hash of the `meta/` listing of the stored nodes, if known.
    pub fn meta(&self) -> Option<u64> {
        self.meta.map(|(hash, _)| hash)
    }

    /// Whether the block is known to store no node metadata (its `meta/` lists nothing
    /// stored).
    pub fn no_nodes(&self) -> bool {
        self.meta.is_some_and(|(_, any)| !any)
    }

    /// Notes view `i`'s size and, when it was computed, its content hash.
    pub fn set_view(&mut self, i: usize, size: usize, hash: Option<u64>) {
        let Some(slot) = self.sizes.get_mut(i) else {
            return;
        };
        *slot = u32::try_from(size)
            .ok()
            .filter(|&s| s != UNKNOWN)
            .unwrap_or(UNKNOWN);
        if let Some(h) = hash {
            self.hashes[i] = h;
            self.hashed |= 1 << i;
        }
    }

    /// Notes the hash of the `meta/` listing of the stored nodes and how many it lists.
    pub fn set_meta(&mut self, hash: u64, nodes: usize) {
        self.meta = Some((hash, nodes > 0));
    }

    /// What is kept on disk of it (the hash of the stored bytes is kept beside it).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(ENCODED);
        for size in self.sizes {
            out.extend_from_slice(&size.to_le_bytes());
        }
        for hash in self.hashes {
            out.extend_from_slice(&hash.to_le_bytes());
        }
        out.push(self.hashed);
        let (flag, listing) = match self.meta {
            None => (0, 0),
            Some((h, false)) => (1, h),
            Some((h, true)) => (2, h),
        };
        out.push(flag);
        out.extend_from_slice(&listing.to_le_bytes());
        out
    }

    /// The summary of the stored bytes hashing to `hash` that [`Summary::encode`] wrote as
    /// `data`; `None` when `data` is not such a summary.
    pub fn decode(hash: u64, data: &[u8]) -> Option<Summary> {
        if data.len() != ENCODED {
            return None;
        }
        let u32_at = |i: usize| data.get(i..i + 4)?.try_into().ok().map(u32::from_le_bytes);
        let u64_at = |i: usize| data.get(i..i + 8)?.try_into().ok().map(u64::from_le_bytes);
        let mut s = Summary::new(hash);
        for i in 0..VIEW_COUNT {
            s.sizes[i] = u32_at(4 * i)?;
            s.hashes[i] = u64_at(4 * VIEW_COUNT + 8 * i)?;
        }
        let at = 12 * VIEW_COUNT;
        s.hashed = *data.get(at)?;
        if s.hashed >> VIEW_COUNT != 0 {
            return None;
        }
        let listing = u64_at(at + 2)?;
        s.meta = match data.get(at + 1)? {
            0 if listing == 0 => None,
            1 => Some((listing, false)),
            2 => Some((listing, true)),
            _ => return None,
        };
        Some(s)
    }
}

/// The length of an encoded summary: sizes, hashes, which hashes are known, the `meta/`
/// listing.
const ENCODED: usize = 12 * VIEW_COUNT + 2 + 8;

/// The summaries of the blocks shown last, by position, and those kept on disk.
pub struct Summaries {
    /// `None`: no summary for the block (known absent from disk, or made for other bytes).
    kept: Mutex<LruCache<BlockPos, Option<Summary>>>,
    file: Option<SummaryFile>,
}

impl Summaries {
    /// Summaries weighing at most `bytes` in memory (at least one is kept), and those kept
    /// in `file`.
    pub fn weighing(bytes: usize, file: Option<SummaryFile>) -> Summaries {
        Summaries::keeping(bytes / SUMMARY_BYTES, file)
    }

    /// Summaries of at most `n` blocks in memory, and those kept in `file`.
    pub fn keeping(n: usize, file: Option<SummaryFile>) -> Summaries {
        Summaries {
            kept: Mutex::new(LruCache::new(
                NonZeroUsize::new(n).unwrap_or(NonZeroUsize::MIN),
            )),
            file,
        }
    }

    /// The summary of the block at `pos`, whatever bytes it names: from memory, else from
    /// disk (and then kept in memory, as is its absence).
    pub fn get(&self, pos: BlockPos) -> Option<Summary> {
        if let Some(known) = self.kept.lock().ok()?.get(&pos) {
            return *known;
        }
        let found = self.file.as_ref()?.get(pos);
        let mut kept = self.kept.lock().ok()?;
        if !kept.contains(&pos) {
            kept.put(pos, found);
        }
        found
    }

    /// Drops the summary of the block at `pos` (it was made for other bytes).
    pub fn forget(&self, pos: BlockPos) {
        if let Ok(mut kept) = self.kept.lock() {
            kept.put(pos, None);
        }
    }

    /// Adds to the summary of the stored bytes hashing to `hash` at `pos` (starting one, or
    /// replacing one for other bytes); written to disk when that changed what is kept there.
    pub fn note(&self, pos: BlockPos, hash: u64, fill: impl FnOnce(&mut Summary)) {
        let before = self.get(pos).filter(|s| s.hash == hash);
        let mut s = before.unwrap_or_else(|| Summary::new(hash));
        fill(&mut s);
        if let Ok(mut kept) = self.kept.lock() {
            kept.put(pos, Some(s));
        }
        if let Some(file) = &self.file {
            if before.map_or(true, |b| b.encode() != s.encode()) {
                file.put(pos, s);
            }
        }
    }

    /// How many summaries wait to go to disk (tests).
    #[cfg(test)]
    pub(crate) fn file_waiting(&self) -> usize {
        self.file.as_ref().map_or(0, SummaryFile::waiting)
    }

    /// Writes the summaries waiting to go to disk now (and folds the sidecar's log).
    pub fn flush(&self) {
        if let Some(file) = &self.file {
            file.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(x: i16) -> BlockPos {
        BlockPos { x, y: 0, z: 0 }
    }

    #[test]
    fn a_summary_keeps_what_was_noted_for_the_same_bytes_only() {
        let s = Summaries::keeping(10, None);
        s.note(pos(1), 7, |s| s.set_view(2, 1234, None));
        s.note(pos(1), 7, |s| s.set_view(0, 10, Some(99)));
        assert!(!s.get(pos(1)).expect("kept").no_nodes());
        s.note(pos(1), 7, |s| s.set_meta(5, 0));
        let got = s.get(pos(1)).expect("kept");
        assert_eq!((got.size(2), got.view_hash(2)), (Some(1234), None));
        assert_eq!((got.size(0), got.view_hash(0)), (Some(10), Some(99)));
        assert_eq!(
            (got.size(1), got.meta(), got.no_nodes()),
            (None, Some(5), true)
        );
        s.note(pos(1), 7, |s| s.set_meta(6, 2));
        assert!(!s.get(pos(1)).expect("kept").no_nodes());
        // Other bytes at the same place start afresh.
        s.note(pos(1), 8, |s| s.set_view(1, 3, None));
        let got = s.get(pos(1)).expect("kept");
        assert_eq!(
            (got.hash, got.size(2), got.size(1), got.meta()),
            (8, None, Some(3), None)
        );
        s.forget(pos(1));
        assert!(s.get(pos(1)).is_none());
    }

    #[test]
    fn a_summary_weighs_what_its_memory_share_counts() {
        assert_eq!(std::mem::size_of::<Summary>(), 88, "see SUMMARY_BYTES");
    }

    #[test]
    fn summaries_are_bounded_and_out_of_range_views_are_ignored() {
        let s = Summaries::keeping(2, None);
        for x in 0..3 {
            s.note(pos(x), 1, |s| s.set_view(VIEW_COUNT, 1, Some(1)));
        }
        assert!(s.get(pos(0)).is_none());
        let got = s.get(pos(2)).expect("kept");
        assert_eq!(
            (got.size(VIEW_COUNT), got.view_hash(VIEW_COUNT)),
            (None, None)
        );
        // A size that does not fit is not known rather than wrong.
        s.note(pos(2), 1, |s| s.set_view(0, usize::MAX, None));
        assert_eq!(s.get(pos(2)).and_then(|g| g.size(0)), None);
    }
}
