//! One parallel pass over every object of a store, with bounded memory: what the `index/`
//! trees of every game answer their whole-world questions from (docs/tree.md "index/").
//!
//! Walking the mount's files costs the kernel's price per file; reading and decoding the
//! objects in-process costs a fraction of that. So one thread reads pages of stored bytes
//! (the caller's page source, the only access to the store), worker threads (one per core,
//! at least two) decode them into facts, and the calling thread merges the facts into its
//! answer. At most a byte limit of stored bytes is held at once (plus one page), so a scan's
//! memory does not grow with the world.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Condvar, Mutex};

use crate::error::{Error, Result};

/// Bytes of stored objects a scan holds at most at once (read and not yet decoded), beyond
/// one page.
pub const SCAN_BYTES: usize = 16 << 20;

/// How many threads decode: one per core, at least two.
pub fn workers() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .max(2)
}

/// The bytes a scan holds in flight: the reader waits while a page would take them past the
/// limit (a page always goes when nothing else is in flight).
struct InFlight {
    limit: usize,
    /// Bytes held, and whether the scan ended.
    state: Mutex<(usize, bool)>,
    freed: Condvar,
    /// The most bytes held at once.
    peak: AtomicUsize,
}

impl InFlight {
    fn new(limit: usize) -> InFlight {
        InFlight {
            limit,
            state: Mutex::new((0, false)),
            freed: Condvar::new(),
            peak: AtomicUsize::new(0),
        }
    }

    /// Takes `n` bytes, waiting for room; false once the scan ended (no one decodes).
    fn take(&self, n: usize) -> bool {
        let Ok(mut st) = self.state.lock() else {
            return false;
        };
        while !st.1 && st.0 > 0 && st.0 + n > self.limit {
            st = match self.freed.wait(st) {
                Ok(st) => st,
                Err(_) => return false,
            };
        }
        st.0 += n;
        self.peak.fetch_max(st.0, Ordering::Relaxed);
        !st.1
    }

    fn give(&self, n: usize) {
        if let Ok(mut st) = self.state.lock() {
            st.0 = st.0.saturating_sub(n);
        }
        self.freed.notify_all();
    }

    /// No more decoding: a waiting reader stops.
    fn close(&self) {
        if let Ok(mut st) = self.state.lock() {
            st.1 = true;
        }
        self.freed.notify_all();
    }
}

/// A page of stored objects: each object's key and stored bytes.
pub type Page<K> = Vec<(K, Vec<u8>)>;

/// Scans a store: `next_page` (called on one reading thread until it returns `None`) gives
/// pages of stored objects, `decode` (on `workers` threads) makes each object's facts, and
/// `merge` (on the calling thread) takes them, in no particular order. At most `max_bytes`
/// of stored bytes are held at once beyond one page. Returns the most bytes held at once;
/// fails with the first error of `next_page`.
pub fn run<K, F>(
    workers: usize,
    max_bytes: usize,
    next_page: impl FnMut() -> Result<Option<Page<K>>> + Send,
    decode: impl Fn(K, Vec<u8>) -> F + Sync,
    mut merge: impl FnMut(F),
) -> Result<usize>
where
    K: Send,
    F: Send,
{
    let workers = workers.max(1);
    let (page_tx, page_rx) = mpsc::sync_channel::<(usize, Page<K>)>(workers);
    let page_rx = Mutex::new(page_rx);
    let (out_tx, out_rx) = mpsc::sync_channel::<Vec<F>>(workers);
    let in_flight = InFlight::new(max_bytes);
    let in_flight = &in_flight;
    let decode = &decode;
    std::thread::scope(|s| -> Result<usize> {
        for _ in 0..workers {
            let out_tx = out_tx.clone();
            let page_rx = &page_rx;
            s.spawn(move || loop {
                let page = match page_rx.lock() {
                    Ok(rx) => rx.recv(),
                    Err(_) => return,
                };
                let Ok((bytes, page)) = page else { return };
                let facts: Vec<F> = page.into_iter().map(|(k, b)| decode(k, b)).collect();
                in_flight.give(bytes);
                if out_tx.send(facts).is_err() {
                    return;
                }
            });
        }
        drop(out_tx);
        let mut next_page = next_page;
        let reader = s.spawn(move || -> Result<()> {
            while let Some(page) = next_page()? {
                let bytes = page.iter().map(|(_, b)| b.len()).sum();
                if !in_flight.take(bytes) || page_tx.send((bytes, page)).is_err() {
                    return Ok(());
                }
            }
            Ok(())
        });
        for facts in out_rx {
            facts.into_iter().for_each(&mut merge);
        }
        in_flight.close();
        reader
            .join()
            .map_err(|_| Error::corrupt("the scanning thread panicked"))??;
        Ok(in_flight.peak.load(Ordering::Relaxed))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pages of `pages` objects of `size` bytes each, keyed by their number.
    fn source(
        pages: usize,
        per_page: usize,
        size: usize,
    ) -> impl FnMut() -> Result<Option<Page<usize>>> {
        let mut next = 0;
        move || {
            if next == pages {
                return Ok(None);
            }
            let page = (0..per_page)
                .map(|i| (next * per_page + i, vec![(i % 251) as u8; size]))
                .collect();
            next += 1;
            Ok(Some(page))
        }
    }

    /// Every object is decoded and merged once, whatever the limit, and the bytes held at
    /// once stay within the limit (one page when the limit is smaller than a page).
    #[test]
    fn every_object_is_merged_once_with_bounded_bytes_in_flight() {
        let (pages, per_page, size) = (40, 8, 1000);
        let page = per_page * size;
        for limit in [1, page, 3 * page, usize::MAX] {
            let mut seen = vec![0u32; pages * per_page];
            let peak = run(
                2,
                limit,
                source(pages, per_page, size),
                |k, b| (k, b.len()),
                |(k, n)| {
                    assert_eq!(n, size);
                    seen[k] += 1;
                },
            )
            .unwrap();
            assert!(seen.iter().all(|&n| n == 1), "limit {limit}");
            assert!(peak > 0);
            if limit < usize::MAX {
                assert!(peak <= limit.max(page), "limit {limit}: {peak} bytes held");
            }
        }
    }

    #[test]
    fn a_failing_page_source_fails_the_scan() {
        let mut n = 0;
        let result = run(
            2,
            SCAN_BYTES,
            move || {
                n += 1;
                if n > 3 {
                    Err(Error::corrupt("unreadable"))
                } else {
                    Ok(Some(vec![(n, vec![0u8; 10])]))
                }
            },
            |k, _| k,
            |_| {},
        );
        assert!(result.is_err());
    }
}
