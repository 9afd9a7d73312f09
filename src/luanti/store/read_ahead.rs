//! Reading ahead of walks, for map stores where every read is a statement or a round trip.
//!
//! A walk through the mount (`find`, `cp -r`, `grep -r`, readers by name in `ls` order)
//! visits `blocks/` in its listing order, which is the store's key order, and asks for each
//! block several times (the folder's stat, its listing, the file read). Against PostgreSQL
//! each ask is a round trip, which made a walk of a PostgreSQL world twice as slow as the same
//! walk of its SQLite copy; against SQLite each is a statement with a read transaction of its
//! own (a file lock, a look at the journal), about a tenth of a walk's time in the daemon. So
//! a read that misses fetches, in the same statement, the blocks that follow in key order,
//! and later asks within that range are answered from memory: a *stream*. A stream whose rows
//! were all used up to its last (a walk) is followed by a longer one (up to the store's
//! [`Windows::max`]); lone reads (an editor, a random `cat`, `rsync`'s name order) read
//! [`Windows::first`] rows. A few streams are kept (two readers walking at once, `find`
//! ahead of `xargs cat`), each of at most twice [`MAX_BYTES`] (its first row, and at most
//! `MAX_BYTES` after it; a larger first row is answered, not kept), so memory stays bounded.
//!
//! What is read ahead is as fresh as a block cached decoded: it is dropped when the store's
//! change token ([`MapBackend::others_version`](super::map::MapBackend::others_version), which
//! the cache looks at before reads, at most every 50 ms) moves or when we commit, and a range
//! read across either is not kept. Only reads that show blocks use it; the write path (the
//! checks before a commit) reads the store itself.

use std::collections::VecDeque;
use std::sync::Mutex;

use crate::error::Result;

/// How many rows a store's reads ahead fetch.
#[derive(Clone, Copy)]
pub struct Windows {
    /// Rows read by a miss that follows no walk.
    pub first: usize,
    /// The most rows one read ahead fetches.
    pub max: usize,
}

/// For a server, where each read is a round trip: a lone read fetches a few blocks more.
pub const SERVER: Windows = Windows {
    first: 16,
    max: 256,
};

/// For a local database, where a statement costs little more than the rows it reads: a lone
/// read fetches its block alone (`rsync` walks in name order, not key order).
pub const LOCAL: Windows = Windows { first: 1, max: 64 };
/// The most data bytes a read ahead keeps.
pub const MAX_BYTES: usize = 1 << 20;
/// Streams kept at once.
const STREAMS: usize = 4;

/// What a fill read: rows in key order from the asked key, and how far they are complete.
pub struct Filled {
    /// `(key, blob)`, keys ascending, none below the asked key.
    pub rows: Vec<(u64, Vec<u8>)>,
    /// Every stored block whose key lies between the asked key and this one (inclusive) is in
    /// `rows`.
    pub complete_to: u64,
}

/// One range of keys read at once.
struct Stream {
    from: u64,
    to: u64,
    rows: Vec<(u64, Vec<u8>)>,
    /// Asks answered by this stream (the first one included).
    hits: usize,
    /// Rows this stream's fill asked for.
    window: usize,
    /// The greatest key asked of this stream.
    top: u64,
}

impl Stream {
    fn holds(&self, key: u64) -> bool {
        self.from <= key && key <= self.to
    }

    /// Whether it was walked through: asked for at least as often as it has rows, up to its
    /// last row.
    fn walked(&self) -> bool {
        self.hits >= self.rows.len().max(1)
            && self.rows.last().map_or(true, |(k, _)| self.top >= *k)
    }
}

#[derive(Default)]
struct Inner {
    /// The change token last seen; rows read under another are dropped.
    version: Option<i64>,
    /// Our commits so far; a range read across one is not kept.
    commits: u64,
    /// Least recently used first.
    streams: VecDeque<Stream>,
}

/// The streams of one store.
pub struct ReadAhead {
    inner: Mutex<Inner>,
    windows: Windows,
}

impl Default for ReadAhead {
    fn default() -> Self {
        ReadAhead::new(SERVER)
    }
}

impl ReadAhead {
    /// Streams read with `windows`.
    pub fn new(windows: Windows) -> ReadAhead {
        ReadAhead {
            inner: Mutex::default(),
            windows,
        }
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        crate::error::recover(&self.inner)
    }

    /// The blob stored under `key`: from a stream holding `key`, or read with `fill(key,
    /// rows)`, which reads up to `rows` rows from `key` on in one go.
    pub fn get(
        &self,
        key: u64,
        fill: impl FnOnce(u64, usize) -> Result<Filled>,
    ) -> Result<Option<Vec<u8>>> {
        let (window, version, commits) = {
            let mut inner = self.inner();
            if let Some(i) = inner.streams.iter().position(|s| s.holds(key)) {
                if let Some(mut s) = inner.streams.remove(i) {
                    s.hits += 1;
                    s.top = s.top.max(key);
                    let found = s
                        .rows
                        .binary_search_by_key(&key, |(k, _)| *k)
                        .ok()
                        .map(|j| s.rows[j].1.clone());
                    inner.streams.push_back(s);
                    return Ok(found);
                }
            }
            let window = match behind(&inner.streams, key) {
                Some(i) if inner.streams[i].walked() => {
                    (inner.streams[i].window * 2).min(self.windows.max)
                }
                _ => self.windows.first,
            };
            (window, inner.version, inner.commits)
        };
        let filled = fill(key, window)?;
        let found = filled
            .rows
            .first()
            .filter(|(k, _)| *k == key)
            .map(|(_, d)| d.clone());
        let (mut rows, mut from) = (filled.rows, key);
        if rows.first().is_some_and(|(_, d)| d.len() > MAX_BYTES) {
            // A row that large is answered, not kept (the next ask reads it again).
            rows.remove(0);
            from = key.saturating_add(1);
        }
        let mut inner = self.inner();
        if inner.version == version && inner.commits == commits && from <= filled.complete_to {
            if let Some(i) = behind(&inner.streams, key).filter(|&i| inner.streams[i].walked()) {
                inner.streams.remove(i);
            }
            inner.streams.push_back(Stream {
                from,
                to: filled.complete_to,
                rows,
                hits: 1,
                window,
                top: key,
            });
            while inner.streams.len() > STREAMS {
                inner.streams.pop_front();
            }
        }
        Ok(found)
    }

    /// The store's change token is `version`: when it moved, everything read is dropped.
    pub fn seen_version(&self, version: i64) {
        let mut inner = self.inner();
        if inner.version != Some(version) {
            inner.version = Some(version);
            inner.streams.clear();
        }
    }

    /// We committed (or tried to): everything read is dropped, and ranges being read now
    /// are not kept.
    pub fn committed(&self) {
        let mut inner = self.inner();
        inner.commits += 1;
        inner.streams.clear();
    }

    /// Data bytes held.
    #[cfg(test)]
    fn bytes(&self) -> usize {
        let inner = self.inner();
        inner
            .streams
            .iter()
            .flat_map(|s| s.rows.iter())
            .map(|(_, d)| d.len())
            .sum()
    }
}

/// The stream ending closest below `key` (the one a walk reaching `key` came through).
fn behind(streams: &VecDeque<Stream>, key: u64) -> Option<usize> {
    streams
        .iter()
        .enumerate()
        .filter(|(_, s)| s.to < key)
        .max_by_key(|(_, s)| s.to)
        .map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::collections::BTreeMap;

    /// A store of `n` blocks at even keys 2, 4, …; its fill reads rows as a server would,
    /// cut at MAX_BYTES beyond the first row, and counts its round trips.
    struct Server {
        rows: RefCell<BTreeMap<u64, Vec<u8>>>,
        trips: RefCell<usize>,
    }

    impl Server {
        fn new(n: u64, size: usize) -> Server {
            let rows = (1..=n).map(|i| (2 * i, vec![i as u8; size])).collect();
            Server {
                rows: RefCell::new(rows),
                trips: RefCell::new(0),
            }
        }

        fn fill(&self, from: u64, limit: usize) -> Result<Filled> {
            *self.trips.borrow_mut() += 1;
            let mut out: Vec<(u64, Vec<u8>)> = Vec::new();
            let mut bytes = 0;
            for (k, d) in self.rows.borrow().range(from..).take(limit) {
                if !out.is_empty() && bytes + d.len() > MAX_BYTES {
                    let complete_to = out.last().map_or(from, |(k, _)| *k);
                    return Ok(Filled {
                        rows: out,
                        complete_to,
                    });
                }
                bytes += if out.is_empty() { 0 } else { d.len() };
                out.push((*k, d.clone()));
            }
            let complete_to = if out.len() < limit {
                u64::MAX
            } else {
                out.last().map_or(from, |(k, _)| *k)
            };
            Ok(Filled {
                rows: out,
                complete_to,
            })
        }

        fn exact(&self, key: u64) -> Option<Vec<u8>> {
            self.rows.borrow().get(&key).cloned()
        }
    }

    #[test]
    fn a_walk_in_key_order_costs_a_round_trip_per_window_and_answers_exactly() {
        let server = Server::new(5000, 100);
        let ahead = ReadAhead::default();
        for key in 1..=10_001 {
            for _ in 0..3 {
                let got = ahead.get(key, |f, n| server.fill(f, n)).unwrap();
                assert_eq!(got, server.exact(key), "key {key}");
            }
        }
        let trips = *server.trips.borrow();
        assert!(
            trips < 5000 / SERVER.max + 10,
            "{trips} round trips for 5000 blocks"
        );
        assert!(ahead.bytes() <= STREAMS * (MAX_BYTES + 100));
    }

    #[test]
    fn lone_reads_fetch_a_short_window_and_two_walks_keep_their_streams() {
        let server = Server::new(100_000, 10);
        let ahead = ReadAhead::default();
        for key in [90_000u64, 20_000, 150_000, 40] {
            assert_eq!(
                ahead.get(key, |f, n| server.fill(f, n)).unwrap(),
                server.exact(key)
            );
        }
        let inner = ahead.inner();
        assert!(inner.streams.iter().all(|s| s.window == SERVER.first));
        drop(inner);
        // Two walks interleaved, over different parts of the map.
        let before = *server.trips.borrow();
        for i in 0..4000u64 {
            for key in [2 * i + 2, 100_000 + 2 * i] {
                assert_eq!(
                    ahead.get(key, |f, n| server.fill(f, n)).unwrap(),
                    server.exact(key)
                );
                assert_eq!(
                    ahead.get(key, |f, n| server.fill(f, n)).unwrap(),
                    server.exact(key)
                );
            }
        }
        let trips = *server.trips.borrow() - before;
        assert!(trips < 2 * (4000 / SERVER.max + 10), "{trips} round trips");
    }

    /// A walk in another order than the keys' (`rsync` goes by name) reads its blocks about
    /// one at a time, as a walk in key order still reads them a window at a time.
    #[test]
    fn local_windows_grow_only_for_walks_in_key_order() {
        let server = Server::new(2000, 10);
        let ahead = ReadAhead::new(LOCAL);
        let read = RefCell::new(0usize);
        let fill = |f, n| {
            let filled = server.fill(f, n)?;
            *read.borrow_mut() += filled.rows.len();
            Ok(filled)
        };
        for i in 0..2000u64 {
            let key = 2 * (1 + (i * 787) % 2000);
            for _ in 0..2 {
                assert_eq!(ahead.get(key, fill).unwrap(), server.exact(key));
            }
        }
        assert!(*read.borrow() < 3 * 2000, "{} rows read", read.borrow());
        let trips = *server.trips.borrow();
        for key in (2..=4000).step_by(2) {
            assert_eq!(ahead.get(key, fill).unwrap(), server.exact(key));
        }
        let trips = *server.trips.borrow() - trips;
        assert!(trips < 2000 / LOCAL.max + 20, "{trips} statements");
    }

    #[test]
    fn a_row_larger_than_a_stream_is_answered_and_not_kept() {
        let server = Server::new(10, 10);
        server.rows.borrow_mut().insert(4, vec![3; MAX_BYTES + 1]);
        let ahead = ReadAhead::default();
        for _ in 0..2 {
            let got = ahead.get(4, |f, n| server.fill(f, n)).unwrap();
            assert_eq!(got.map(|d| d.len()), Some(MAX_BYTES + 1));
        }
        assert_eq!(*server.trips.borrow(), 2, "asked twice, read twice");
        assert!(ahead.bytes() <= MAX_BYTES);
        assert_eq!(
            ahead.get(6, |f, n| server.fill(f, n)).unwrap(),
            Some(vec![3; 10])
        );
        assert_eq!(*server.trips.borrow(), 2, "the rows after it were kept");
    }

    #[test]
    fn a_moved_change_token_or_our_commit_drops_what_was_read() {
        let server = Server::new(100, 10);
        let ahead = ReadAhead::default();
        ahead.seen_version(1);
        assert_eq!(
            ahead.get(2, |f, n| server.fill(f, n)).unwrap(),
            Some(vec![1; 10])
        );
        server.rows.borrow_mut().insert(4, vec![9; 3]);
        server.rows.borrow_mut().insert(5, vec![7; 3]);
        server.rows.borrow_mut().remove(&6);
        ahead.seen_version(1);
        assert_eq!(
            ahead.get(4, |f, n| server.fill(f, n)).unwrap(),
            Some(vec![2; 10]),
            "same token: what was read stands"
        );
        ahead.seen_version(2);
        assert_eq!(
            ahead.get(4, |f, n| server.fill(f, n)).unwrap(),
            Some(vec![9; 3])
        );
        assert_eq!(
            ahead.get(5, |f, n| server.fill(f, n)).unwrap(),
            Some(vec![7; 3])
        );
        server.rows.borrow_mut().insert(6, vec![1]);
        ahead.committed();
        assert_eq!(
            ahead.get(6, |f, n| server.fill(f, n)).unwrap(),
            Some(vec![1])
        );
    }

    #[test]
    fn a_range_read_across_a_commit_or_a_new_token_is_not_kept() {
        let server = Server::new(100, 10);
        let ahead = ReadAhead::default();
        let got = ahead
            .get(2, |f, n| {
                let filled = server.fill(f, n);
                ahead.committed();
                filled
            })
            .unwrap();
        assert_eq!(got, Some(vec![1; 10]));
        server.rows.borrow_mut().insert(4, vec![5]);
        assert_eq!(
            ahead.get(4, |f, n| server.fill(f, n)).unwrap(),
            Some(vec![5])
        );
        ahead
            .get(50, |f, n| {
                let filled = server.fill(f, n);
                ahead.seen_version(7);
                filled
            })
            .unwrap();
        server.rows.borrow_mut().insert(52, vec![5]);
        assert_eq!(
            ahead.get(52, |f, n| server.fill(f, n)).unwrap(),
            Some(vec![5])
        );
    }
}
