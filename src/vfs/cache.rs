//! A bounded LRU cache of decoded objects, shared by every game's tree.
//!
//! Entries are immutable snapshots (`Arc<V>`) weighed by an estimated cost in bytes; the cache
//! evicts least-recently-used entries past its capacity. Eviction is always safe because no
//! dirty state lives here: edits are buffered per open file by the core and committed to the
//! store on close, and only then is the new decoded object put into the cache.

use std::hash::Hash;
use std::sync::{Arc, Mutex};

use lru::LruCache;

struct Inner<K: Hash + Eq, V> {
    lru: LruCache<K, (Arc<V>, usize)>,
    used: usize,
}

/// A cost-bounded LRU cache.
pub struct Cache<K: Hash + Eq, V> {
    inner: Mutex<Inner<K, V>>,
    capacity: usize,
}

impl<K: Hash + Eq + Clone, V> Cache<K, V> {
    /// A cache holding at most `capacity` bytes of estimated cost.
    pub fn new(capacity: usize) -> Self {
        Cache {
            inner: Mutex::new(Inner {
                lru: LruCache::unbounded(),
                used: 0,
            }),
            capacity,
        }
    }

    /// The cached value for `key`, marking it recently used.
    pub fn get(&self, key: &K) -> Option<Arc<V>> {
        let mut inner = self.inner.lock().ok()?;
        inner.lru.get(key).map(|(v, _)| v.clone())
    }

    /// Caches `value` under `key` with an estimated `cost` in bytes, evicting as needed.
    pub fn insert(&self, key: K, value: Arc<V>, cost: usize) {
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        if let Some((_, old)) = inner.lru.put(key, (value, cost)) {
            inner.used -= old;
        }
        inner.used += cost;
        while inner.used > self.capacity && inner.lru.len() > 1 {
            match inner.lru.pop_lru() {
                Some((_, (_, c))) => inner.used -= c,
                None => break,
            }
        }
    }

    /// Drops `key`.
    pub fn remove(&self, key: &K) {
        if let Ok(mut inner) = self.inner.lock() {
            if let Some((_, c)) = inner.lru.pop(key) {
                inner.used -= c;
            }
        }
    }

    /// Drops everything (the store changed underneath).
    pub fn clear(&self) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.lru.clear();
            inner.used = 0;
        }
    }

    /// Number of cached entries.
    pub fn len(&self) -> usize {
        self.inner.lock().map(|i| i.lru.len()).unwrap_or(0)
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The capacity used when a cache is sized in MiB.
pub fn mib(n: usize) -> usize {
    n.saturating_mul(1 << 20)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_least_recently_used_past_capacity() {
        let c: Cache<u32, u32> = Cache::new(30);
        c.insert(1, Arc::new(1), 10);
        c.insert(2, Arc::new(2), 10);
        c.insert(3, Arc::new(3), 10);
        assert!(c.get(&1).is_some());
        c.insert(4, Arc::new(4), 10);
        assert!(c.get(&2).is_none(), "2 was least recently used");
        assert_eq!(c.len(), 3);
        c.remove(&1);
        assert_eq!(c.len(), 2);
        c.clear();
        assert!(c.is_empty());
    }
}
