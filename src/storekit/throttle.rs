//! A rate limit for "did the store change underneath?" checks: every tree asks on each
//! operation, but looks (a `PRAGMA data_version`, a file's size and mtime) at most once per
//! interval.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Says yes at most once per interval (and on the first call).
pub struct Throttle {
    interval_ms: u64,
    started: Instant,
    /// Milliseconds since `started` of the last yes, plus one; 0 = never.
    last: AtomicU64,
}

impl Throttle {
    /// A throttle letting one call through per `interval`.
    pub fn new(interval: Duration) -> Throttle {
        Throttle {
            interval_ms: u64::try_from(interval.as_millis()).unwrap_or(u64::MAX),
            started: Instant::now(),
            last: AtomicU64::new(0),
        }
    }

    /// Whether the caller should look now.
    pub fn due(&self) -> bool {
        let now = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX) + 1;
        let last = self.last.load(Ordering::Relaxed);
        if last != 0 && now.saturating_sub(last) < self.interval_ms {
            return false;
        }
        self.last.store(now, Ordering::Relaxed);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lets_one_call_through_per_interval() {
        let t = Throttle::new(Duration::from_secs(3600));
        assert!(t.due());
        assert!(!t.due());
        let t = Throttle::new(Duration::ZERO);
        assert!(t.due());
        assert!(t.due());
    }
}
