//! Keys marked within a time window, e.g. the blocks whose `block.txt` was written through
//! the mount in the last minute. A restore marks thousands within the window and asks on
//! every write, so expiry goes oldest first and costs nothing per ask beyond the keys that
//! expired (scanning every key on each ask made restores quadratic).

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::time::{Duration, Instant};

/// Keys marked within the last `window`.
pub struct Recent<K> {
    window: Duration,
    /// When each key was marked last.
    marked: HashMap<K, Instant>,
    /// Oldest first; an entry whose key was marked again since is skipped.
    order: VecDeque<(Instant, K)>,
}

impl<K: Hash + Eq + Clone> Recent<K> {
    pub fn new(window: Duration) -> Recent<K> {
        Recent {
            window,
            marked: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    /// Marks `key` now.
    pub fn mark(&mut self, key: K) {
        let now = Instant::now();
        self.expire(now);
        self.marked.insert(key.clone(), now);
        self.order.push_back((now, key));
    }

    /// Whether `key` was marked within the window.
    pub fn contains(&mut self, key: &K) -> bool {
        self.expire(Instant::now());
        self.marked.contains_key(key)
    }

    fn expire(&mut self, now: Instant) {
        while let Some((at, _)) = self.order.front() {
            if now.duration_since(*at) < self.window {
                break;
            }
            if let Some((at, key)) = self.order.pop_front() {
                if self.marked.get(&key) == Some(&at) {
                    self.marked.remove(&key);
                }
            }
        }
    }

    /// Keys held (marked within the window, or not yet expired).
    #[cfg(test)]
    fn held(&self) -> usize {
        self.order.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_stay_for_the_window_from_their_last_mark_and_then_go() {
        let mut r = Recent::new(Duration::from_millis(1000));
        r.mark(1);
        std::thread::sleep(Duration::from_millis(600));
        r.mark(2);
        r.mark(1);
        assert!(r.contains(&1) && r.contains(&2) && !r.contains(&3));
        std::thread::sleep(Duration::from_millis(600));
        assert!(r.contains(&1), "marked again 600 ms ago");
        assert!(r.contains(&2));
        std::thread::sleep(Duration::from_millis(600));
        assert!(!r.contains(&1) && !r.contains(&2));
        assert_eq!(r.held(), 0, "everything expired is forgotten");
    }
}
