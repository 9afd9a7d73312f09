//! Reading ahead of walks, for map stores where every read is a round trip to a server.
//!
//! A walk through the mount (`find`, `rsync`, `cp -r`, `grep -r`) visits `blocks/` in its
//! listing order, which is the store's key order, and asks for each block several times (the
//! folder's stat, its listing, the file read). Against SQLite each ask is a cheap local read;
//! against PostgreSQL each is a round trip, which made a walk of a PostgreSQL world twice as
//! slow as the same walk of its SQLite copy. So a read that misses fetches, in the same round
//! trip, the blocks that follow in key order, and later asks within that range are answered
//! from memory: a *stream*. A stream whose rows were used (a walk) is followed by a longer
//! one (up to [`MAX_ROWS`]); lone reads (an editor, a random `cat`) read [`FIRST_ROWS`]. A
//! few streams are kept (two readers walking at once, `find` ahead of `xargs cat`), each of
//! at most [`MAX_BYTES`] (a larger first row is answered, not kept), so memory stays
//! bounded.
//!
//! What is read ahead is as fresh as a block cached decoded: it is dropped when the store's
//! change token ([`MapStore::data_version`](super::map::MapStore::data_version), which the
//! cache looks at before reads, at most every 50 ms) moves or when we commit, and a range
//! read across either is not kept. Only reads that show blocks use it; the write path (the
//! checks before a commit) reads the store itself.

use std::collections::VecDeque;
use std::sync::Mutex;

use crate::error::Result;

/// Rows read by a miss that follows no walk.
pub const FIRST_ROWS: usize = 16;
/// The most rows one read ahead fetches.
pub const MAX_ROWS: usize = 256;
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
}

impl Stream {
    fn holds(&self, key: u64) -> bool {
        self.from <= key && key <= self.to
    }

    /// Whether it was walked through: asked for at least as often as it has rows.
    fn walked(&self) -> bool {
        self.hits >= self.rows.len().max(2)
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
#[derive(Default)]
pub struct ReadAhead {
    inner: Mutex<Inner>,
}

impl ReadAhead {
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
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
                Some(i) if inner.streams[i].walked() => (inner.streams[i].window * 2).min(MAX_ROWS),
                _ => FIRST_ROWS,
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
            trips < 5000 / MAX_ROWS + 10,
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
        assert!(inner.streams.iter().all(|s| s.window == FIRST_ROWS));
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
        assert!(trips < 2 * (4000 / MAX_ROWS + 10), "{trips} round trips");
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
