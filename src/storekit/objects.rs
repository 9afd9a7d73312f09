//! The cache of decoded objects every game's tree uses: bounded by the memory its objects
//! really hold, and race-free against commits.
//!
//! The race it closes: a reader reads an object's stored bytes, a commit changes the object
//! and drops it from the cache, then the reader caches what it decoded from the old bytes.
//! The stale object would be served from then on, and the next edit, made to the stale
//! object, would revert the commit. Two counters, read under the cache's lock as a
//! [`Ticket`] *before* the store is read, prevent it:
//!
//! - `commits` counts our own commits. [`ObjectCache::committed`] bumps it and drops the
//!   committed keys in one step, after the store shows the commit (the caller holds its
//!   commit lock). An insert whose ticket is older than the last commit is refused: what it
//!   read may predate the commit. (It may also postdate it; refusing then only costs a
//!   decode later.)
//! - `epoch` counts changes made by other programs, whose keys are unknown
//!   ([`ObjectCache::changed_underneath`]). Entries remember the epoch in which their stored
//!   bytes were last seen to hash to the hash they were decoded from; an entry of an older
//!   epoch is checked against the store (read and hashed, not decoded) before it is used
//!   again, and kept when its bytes did not change.
//!
//! Entries are immutable `Arc`s weighed by [`Weigh::weight`], what they really hold; an
//! object may grow (rendered views cached inside it), and [`ObjectCache::reweigh`] then
//! counts it again. Least recently used entries are evicted past the capacity; an evicted
//! object is freed as soon as no open file holds it. This is the model of Luanti's block
//! cache (`Cached::seen_in`), made generic so every game can use one implementation.
//!
//! An object heavier than the whole cache is refused, unless the cache was made with
//! [`ObjectCache::keeping_oversized`]: then it is kept alone (everything else is evicted)
//! until [`ObjectCache::drop_oversized`], so a file of a huge object is not decoded again on
//! every read, and the caller drops it before decoding the next object, so at most one such
//! object is in memory at a time.
//!
//! [`Views`] holds the rendered text views of one cached object, each rendered once.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard};

use lru::LruCache;

use crate::error::Result;

/// Memory of one cache entry besides its value: key, hash, LRU links and allocator slack.
const ENTRY_OVERHEAD: usize = 96;

/// How many bytes of memory a cached object holds.
pub trait Weigh {
    /// The bytes this object holds, heap included.
    fn weight(&self) -> usize;
}

impl Weigh for Vec<u8> {
    fn weight(&self) -> usize {
        std::mem::size_of::<Vec<u8>>() + self.capacity()
    }
}

impl Weigh for u64 {
    fn weight(&self) -> usize {
        std::mem::size_of::<u64>()
    }
}

struct Slot<V> {
    value: Arc<V>,
    /// Hash of the stored bytes the value was decoded from.
    hash: u64,
    /// The epoch in which the stored bytes were last seen to hash to `hash`.
    seen: u64,
    weight: usize,
}

struct Inner<K: Hash + Eq, V> {
    lru: LruCache<K, Slot<V>>,
    used: usize,
    commits: u64,
    epoch: u64,
    /// The entry heavier than the capacity kept by a cache made with
    /// [`ObjectCache::keeping_oversized`].
    oversized: Option<K>,
}

impl<K: Hash + Eq, V> Inner<K, V> {
    fn drop_key(&mut self, key: &K) {
        if let Some(slot) = self.lru.pop(key) {
            self.used -= slot.weight;
        }
    }

    /// Evicts least recently used entries past `capacity`, but never the last one when
    /// `keep_last` (the newest entry, which alone may weigh more than the capacity).
    fn evict(&mut self, capacity: usize, keep_last: bool) {
        while self.used > capacity && !(keep_last && self.lru.len() == 1) {
            match self.lru.pop_lru() {
                Some((_, slot)) => self.used -= slot.weight,
                None => break,
            }
        }
    }
}

/// The state of the cache when a read of the store began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket {
    commits: u64,
    epoch: u64,
}

/// What the cache holds for a key.
pub enum Lookup<V> {
    /// An object known to match the store.
    Fresh(Arc<V>),
    /// An object from before a change underneath: use it only if the stored bytes still
    /// hash to `hash` (then [`ObjectCache::confirm`] it).
    Recheck { value: Arc<V>, hash: u64 },
    /// Nothing cached.
    Missing,
}

/// A cache of decoded objects holding at most `capacity` bytes (see the module doc).
pub struct ObjectCache<K: Hash + Eq, V> {
    inner: Mutex<Inner<K, V>>,
    capacity: usize,
    /// Whether an object heavier than the capacity is kept (alone) rather than refused.
    keep_oversized: bool,
}

impl<K: Hash + Eq + Clone, V: Weigh> ObjectCache<K, V> {
    /// An empty cache of `capacity` bytes.
    pub fn new(capacity: usize) -> Self {
        ObjectCache {
            inner: Mutex::new(Inner {
                lru: LruCache::unbounded(),
                used: 0,
                commits: 0,
                epoch: 0,
                oversized: None,
            }),
            capacity,
            keep_oversized: false,
        }
    }

    /// An empty cache of `capacity` bytes that keeps one object heavier than the capacity
    /// (alone) until [`ObjectCache::drop_oversized`] (see the module doc).
    pub fn keeping_oversized(capacity: usize) -> Self {
        ObjectCache {
            keep_oversized: true,
            ..ObjectCache::new(capacity)
        }
    }

    /// Drops the object kept because it weighs more than the capacity; whether there was one
    /// (its memory is then free once no open file holds it).
    pub fn drop_oversized(&self) -> bool {
        let mut inner = self.lock();
        let Some(key) = inner.oversized.take() else {
            return false;
        };
        inner.drop_key(&key);
        true
    }

    /// A number that changes with every commit and every change underneath: what a caller
    /// derived from the store (a listing) is current while it stays the same.
    pub fn generation(&self) -> u64 {
        let inner = self.lock();
        inner.commits.wrapping_add(inner.epoch)
    }

    fn lock(&self) -> MutexGuard<'_, Inner<K, V>> {
        // A panic while holding this lock leaves the map consistent (no user code runs
        // under it), so a poisoned lock is still usable.
        crate::error::recover(&self.inner)
    }

    /// Takes a ticket, then looks `key` up. Take it before reading the store.
    pub fn lookup(&self, key: &K) -> (Ticket, Lookup<V>) {
        let mut inner = self.lock();
        let ticket = Ticket {
            commits: inner.commits,
            epoch: inner.epoch,
        };
        let found = match inner.lru.get(key) {
            Some(slot) if slot.seen == ticket.epoch => Lookup::Fresh(slot.value.clone()),
            Some(slot) => Lookup::Recheck {
                value: slot.value.clone(),
                hash: slot.hash,
            },
            None => Lookup::Missing,
        };
        (ticket, found)
    }

    /// Notes that the stored bytes of `key`, read under `ticket`, still hash to `hash`.
    pub fn confirm(&self, key: &K, hash: u64, ticket: Ticket) {
        let mut inner = self.lock();
        if inner.commits != ticket.commits {
            return;
        }
        if let Some(slot) = inner.lru.get_mut(key).filter(|s| s.hash == hash) {
            slot.seen = slot.seen.max(ticket.epoch);
        }
    }

    /// Caches `value`, decoded from stored bytes hashing to `hash` that were read under
    /// `ticket`. Refused (false) when a commit happened since the ticket was taken.
    pub fn insert(&self, key: K, value: Arc<V>, hash: u64, ticket: Ticket) -> bool {
        let mut inner = self.lock();
        if inner.commits != ticket.commits {
            return false;
        }
        let weight = value.weight() + ENTRY_OVERHEAD;
        if weight > self.capacity {
            if !self.keep_oversized {
                // Never cache what alone exceeds the capacity; callers bound objects anyway.
                inner.drop_key(&key);
                return false;
            }
            inner.oversized = Some(key.clone());
        }
        let slot = Slot {
            value,
            hash,
            seen: ticket.epoch,
            weight,
        };
        if let Some(old) = inner.lru.put(key, slot) {
            inner.used -= old.weight;
        }
        inner.used += weight;
        inner.evict(self.capacity, self.keep_oversized);
        true
    }

    /// The object at `key`: cached, or read with `read` (under a ticket taken first), hashed
    /// with `hash` and decoded with `decode`, then cached unless a commit raced the read.
    pub fn get_or_load<R>(
        &self,
        key: &K,
        read: impl FnOnce() -> Result<R>,
        hash: impl FnOnce(&R) -> u64,
        decode: impl FnOnce(R) -> Result<V>,
    ) -> Result<Arc<V>> {
        let (ticket, found) = self.lookup(key);
        let stale = match found {
            Lookup::Fresh(value) => return Ok(value),
            Lookup::Recheck { value, hash } => Some((value, hash)),
            Lookup::Missing => None,
        };
        let raw = match read() {
            Ok(raw) => raw,
            Err(e) => {
                self.lock().drop_key(key);
                return Err(e);
            }
        };
        let h = hash(&raw);
        if let Some((value, old)) = stale {
            if old == h {
                self.confirm(key, h, ticket);
                return Ok(value);
            }
        }
        let value = Arc::new(decode(raw)?);
        self.insert(key.clone(), value.clone(), h, ticket);
        Ok(value)
    }

    /// Our commit of `keys` is visible in the store: refuses inserts read before it and
    /// drops those keys. Call with the commit lock held, after the store changed.
    pub fn committed<'a>(&self, keys: impl IntoIterator<Item = &'a K>)
    where
        K: 'a,
    {
        let mut inner = self.lock();
        inner.commits += 1;
        for key in keys {
            inner.drop_key(key);
        }
    }

    /// How many times [`ObjectCache::changed_underneath`] was called.
    pub fn underneath_seen(&self) -> u64 {
        self.lock().epoch
    }

    /// Another program changed the store, where is unknown: every entry is checked against
    /// its stored bytes before its next use.
    pub fn changed_underneath(&self) {
        self.lock().epoch += 1;
    }

    /// Drops everything (and refuses inserts read before).
    pub fn clear(&self) {
        let mut inner = self.lock();
        inner.commits += 1;
        inner.lru.clear();
        inner.used = 0;
    }

    /// Weighs the object at `key` again (it grew) and evicts as needed.
    pub fn reweigh(&self, key: &K) {
        let mut inner = self.lock();
        let Some(slot) = inner.lru.peek_mut(key) else {
            return;
        };
        let weight = slot.value.weight() + ENTRY_OVERHEAD;
        let old = std::mem::replace(&mut slot.weight, weight);
        inner.used = inner.used - old + weight;
        inner.evict(self.capacity, self.keep_oversized);
    }

    /// Bytes held by cached objects, as weighed.
    pub fn used(&self) -> usize {
        self.lock().used
    }

    /// Number of cached objects.
    pub fn len(&self) -> usize {
        self.lock().lru.len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The rendered views of one cached object by file name, each rendered on first use and
/// kept with the object (so the cache weighs them with it).
#[derive(Default)]
pub struct Views(Mutex<HashMap<&'static str, Arc<Vec<u8>>>>);

impl Views {
    /// The view `name`, rendered with `render` when it is not yet; whether it was rendered
    /// now (the object grew: [`ObjectCache::reweigh`] it).
    pub fn get_or_render(
        &self,
        name: &'static str,
        render: impl FnOnce() -> Vec<u8>,
    ) -> (Arc<Vec<u8>>, bool) {
        if let Ok(v) = self.0.lock() {
            if let Some(data) = v.get(name) {
                return (data.clone(), false);
            }
        }
        let data = Arc::new(render());
        if let Ok(mut v) = self.0.lock() {
            v.insert(name, data.clone());
        }
        (data, true)
    }

    /// The views rendered so far.
    pub fn rendered(&self) -> Vec<(&'static str, Arc<Vec<u8>>)> {
        crate::error::recover(&self.0)
            .iter()
            .map(|(&n, d)| (n, d.clone()))
            .collect()
    }

    /// Keeps `data` as the view `name` unless it is rendered already.
    pub fn keep(&self, name: &'static str, data: Arc<Vec<u8>>) {
        if let Ok(mut v) = self.0.lock() {
            v.entry(name).or_insert(data);
        }
    }
}

impl Weigh for Views {
    /// The rendered bytes plus what the map spends per view.
    fn weight(&self) -> usize {
        self.0
            .lock()
            .map(|v| v.values().map(|d| d.weight() + 64).sum())
            .unwrap_or(0)
    }
}

/// The capacity used when a cache is sized in MiB.
pub fn mib(n: usize) -> usize {
    n.saturating_mul(1 << 20)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    struct Store(Mutex<std::collections::HashMap<u32, Vec<u8>>>);

    impl Store {
        fn read(&self, k: u32) -> Result<Vec<u8>> {
            self.0
                .lock()
                .unwrap()
                .get(&k)
                .cloned()
                .ok_or_else(|| Error::not_found("gone"))
        }
        fn write(&self, k: u32, v: &[u8]) {
            self.0.lock().unwrap().insert(k, v.to_vec());
        }
    }

    fn hash(v: &[u8]) -> u64 {
        crate::storekit::mtimes::content_hash(v)
    }

    #[test]
    fn a_read_that_started_before_a_commit_cannot_cache_the_old_object() {
        // The interleaving of the report, step by step: a reader takes its ticket and reads
        // the old bytes; a commit writes the new bytes and drops the key; the reader then
        // tries to cache what it decoded from the old bytes.
        let store = Store(Mutex::new([(1, b"old".to_vec())].into()));
        let cache: ObjectCache<u32, Vec<u8>> = ObjectCache::new(1 << 20);
        let (ticket, found) = cache.lookup(&1);
        assert!(matches!(found, Lookup::Missing));
        let old = store.read(1).unwrap();
        store.write(1, b"new");
        cache.committed([&1]);
        assert!(!cache.insert(1, Arc::new(old.clone()), hash(&old), ticket));
        let got = cache
            .get_or_load(&1, || store.read(1), |v: &Vec<u8>| hash(v), Ok)
            .unwrap();
        assert_eq!(*got, b"new", "the next reader sees the commit");
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn a_read_cached_just_before_a_commit_is_dropped_by_it() {
        let store = Store(Mutex::new([(1, b"old".to_vec())].into()));
        let cache: ObjectCache<u32, Vec<u8>> = ObjectCache::new(1 << 20);
        assert_eq!(
            *cache
                .get_or_load(&1, || store.read(1), |v: &Vec<u8>| hash(v), Ok)
                .unwrap(),
            b"old"
        );
        store.write(1, b"new");
        cache.committed([&1]);
        assert_eq!(
            *cache
                .get_or_load(&1, || store.read(1), |v: &Vec<u8>| hash(v), Ok)
                .unwrap(),
            b"new"
        );
    }

    #[test]
    fn changes_underneath_are_rechecked_by_hash() {
        let store = Store(Mutex::new(
            [(1, b"one".to_vec()), (2, b"two".to_vec())].into(),
        ));
        let cache: ObjectCache<u32, Vec<u8>> = ObjectCache::new(1 << 20);
        let decodes = std::cell::Cell::new(0);
        let load = |k: u32| {
            cache
                .get_or_load(
                    &k,
                    || store.read(k),
                    |v: &Vec<u8>| hash(v),
                    |v| {
                        decodes.set(decodes.get() + 1);
                        Ok(v)
                    },
                )
                .unwrap()
        };
        load(1);
        load(2);
        assert_eq!(decodes.get(), 2);
        store.write(2, b"TWO");
        cache.changed_underneath();
        assert_eq!(*load(1), b"one");
        assert_eq!(decodes.get(), 2, "unchanged bytes: kept, not decoded again");
        assert_eq!(*load(2), b"TWO");
        assert_eq!(decodes.get(), 3);
        assert_eq!(*load(1), b"one");
        assert_eq!(decodes.get(), 3);
        store.0.lock().unwrap().remove(&1);
        cache.changed_underneath();
        assert!(cache
            .get_or_load(&1, || store.read(1), |v: &Vec<u8>| hash(v), Ok)
            .is_err());
        assert_eq!(cache.len(), 1, "a removed object is dropped");
    }

    #[test]
    fn weighs_what_objects_hold_and_evicts_past_capacity() {
        let cache: ObjectCache<u32, Vec<u8>> = ObjectCache::new(10_000);
        let t = cache.lookup(&0).0;
        for k in 0..10 {
            assert!(cache.insert(k, Arc::new(vec![0; 2_000]), 0, t));
            assert!(cache.used() <= 10_000);
        }
        assert_eq!(cache.len(), 4, "4 × (2000 + overhead) fit in 10000");
        assert!(
            !cache.insert(99, Arc::new(vec![0; 20_000]), 0, t),
            "larger than the whole cache"
        );
        assert_eq!(cache.len(), 4);
        cache.clear();
        assert_eq!((cache.len(), cache.used()), (0, 0));
        assert!(
            !cache.insert(1, Arc::new(vec![1]), 0, t),
            "cleared since the ticket"
        );
    }

    #[test]
    fn an_oversized_object_is_kept_alone_until_dropped_when_asked() {
        let plain: ObjectCache<u32, Vec<u8>> = ObjectCache::new(10_000);
        let t = plain.lookup(&0).0;
        assert!(!plain.insert(1, Arc::new(vec![0; 20_000]), 0, t));
        let cache: ObjectCache<u32, Vec<u8>> = ObjectCache::keeping_oversized(10_000);
        let t = cache.lookup(&0).0;
        assert!(!cache.drop_oversized(), "nothing oversized yet");
        for k in 0..3 {
            assert!(cache.insert(k, Arc::new(vec![0; 2_000]), 0, t));
        }
        assert!(cache.insert(9, Arc::new(vec![0; 20_000]), 0, t));
        assert_eq!(cache.len(), 1, "the others were evicted, the big one stays");
        assert!(matches!(cache.lookup(&9).1, Lookup::Fresh(_)));
        assert!(cache.insert(1, Arc::new(vec![0; 2_000]), 0, t));
        assert_eq!(cache.len(), 1, "the next object evicts it");
        assert!(cache.insert(9, Arc::new(vec![0; 20_000]), 0, t));
        assert!(cache.drop_oversized());
        assert!(cache.is_empty());
        assert_eq!(cache.used(), 0);
        assert!(!cache.drop_oversized(), "dropped once");
    }

    #[test]
    fn the_generation_changes_with_commits_and_changes_underneath() {
        let cache: ObjectCache<u32, Vec<u8>> = ObjectCache::new(10_000);
        let g0 = cache.generation();
        cache.committed([&1]);
        let g1 = cache.generation();
        assert_ne!(g0, g1);
        cache.changed_underneath();
        assert_ne!(cache.generation(), g1);
    }

    #[test]
    fn views_render_once_and_weigh_what_they_hold() {
        let views = Views::default();
        assert_eq!(views.weight(), 0);
        let (a, rendered) = views.get_or_render("a.txt", || b"hello".to_vec());
        assert!(rendered);
        let (b, rendered) = views.get_or_render("a.txt", || unreachable!("rendered once"));
        assert!(!rendered);
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(views.weight(), a.weight() + 64);
    }
}
