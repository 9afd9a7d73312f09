//! Which process a request comes from.
//!
//! The kernel hands a FUSE request the id of the calling thread. The core's views that
//! depend on who asks (a folder's fixed files hidden from the process that just made it, a
//! removed file from its remover: `vfs::fresh`) are per process: `cp -r` in a thread pool,
//! or any program whose threads share the work, makes a folder in one thread and fills it
//! from another. So the adapter names the thread's process (its thread group, `Tgid` in
//! `/proc/TID/status`) before asking the core.
//!
//! Reading `/proc` costs a system call or three, so each answer is kept for a second: a
//! thread's process never changes, and a thread id is not handed to a new thread within a
//! second (ids are reused only after the kernel has counted up to `pid_max`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a thread's process is kept.
const KEEP: Duration = Duration::from_secs(1);

/// How many threads' processes are kept at most (all forgotten when full).
const MOST: usize = 4096;

/// Thread ids to process ids, read from `/proc` and kept for [`KEEP`].
#[derive(Default)]
pub struct Callers {
    known: Mutex<HashMap<u32, (u32, Instant)>>,
}

impl Callers {
    /// The process of thread `tid` (itself when `/proc` does not say: the thread is gone,
    /// or `/proc` is not mounted; 0, the kernel's own requests, stays 0).
    pub fn process(&self, tid: u32) -> u32 {
        if tid == 0 {
            return 0;
        }
        let now = Instant::now();
        if let Ok(known) = self.known.lock() {
            if let Some(&(pid, at)) = known.get(&tid) {
                if now.saturating_duration_since(at) < KEEP {
                    return pid;
                }
            }
        }
        let pid = process_of(tid).unwrap_or(tid);
        if let Ok(mut known) = self.known.lock() {
            if known.len() >= MOST {
                known.clear();
            }
            known.insert(tid, (pid, now));
        }
        pid
    }
}

/// The thread group of thread `tid`, from `/proc/TID/status`.
fn process_of(tid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread_id() -> u32 {
        // SAFETY: gettid takes no arguments and cannot fail.
        unsafe { libc::gettid() as u32 }
    }

    #[test]
    fn a_thread_is_named_by_its_process() {
        let callers = Callers::default();
        let me = std::process::id();
        assert_eq!(callers.process(me), me);
        assert_eq!(callers.process(0), 0);
        let (tid, seen) = std::thread::scope(|s| {
            s.spawn(|| {
                let tid = thread_id();
                (tid, callers.process(tid))
            })
            .join()
            .unwrap()
        });
        assert_ne!(tid, me, "a spawned thread has an id of its own");
        assert_eq!(seen, me);
        // The thread is gone: its answer is kept for a while; unknown, a thread is itself.
        assert_eq!(callers.process(tid), me);
        assert_eq!(process_of(tid), None);
        assert_eq!(Callers::default().process(tid), tid);
    }
}
