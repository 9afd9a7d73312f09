//! Which process a request comes from.
//!
//! The kernel hands a FUSE request the id of the calling thread. The core's views that
//! depend on who asks (a folder's fixed files hidden from the process that just made it, a
//! removed file from its remover: `vfs::fresh`) are per process: `cp -r` in a thread pool,
//! or any program whose threads share the work, makes a folder in one thread and fills it
//! from another. So the adapter names the thread's process (its thread group, `Tgid` in
//! `/proc/TID/status`) before asking the core, and tells the core a process's parent
//! (`PPid`) when it asks: `rsync` makes folders in one process and fills them from a child.
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

/// Thread ids to their process and its parent, read from `/proc` and kept for [`KEEP`].
#[derive(Default)]
pub struct Callers {
    known: Mutex<HashMap<u32, (Task, Instant)>>,
}

/// A thread's process and that process's parent (0 when `/proc` does not say).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Task {
    process: u32,
    parent: u32,
}

impl Callers {
    /// The process of thread `tid` (itself when `/proc` does not say: the thread is gone,
    /// or `/proc` is not mounted; 0, the kernel's own requests, stays 0).
    pub fn process(&self, tid: u32) -> u32 {
        self.task(tid).process
    }

    /// The parent of process `pid` (a process's first thread has its id), if `/proc` says.
    pub fn parent(&self, pid: u32) -> Option<u32> {
        Some(self.task(pid).parent).filter(|&p| p != 0)
    }

    fn task(&self, tid: u32) -> Task {
        if tid == 0 {
            return Task {
                process: 0,
                parent: 0,
            };
        }
        let now = Instant::now();
        if let Ok(known) = self.known.lock() {
            if let Some(&(task, at)) = known.get(&tid) {
                if now.saturating_duration_since(at) < KEEP {
                    return task;
                }
            }
        }
        let task = task_of(tid).unwrap_or(Task {
            process: tid,
            parent: 0,
        });
        if let Ok(mut known) = self.known.lock() {
            if known.len() >= MOST {
                known.clear();
            }
            known.insert(tid, (task, now));
        }
        task
    }

    /// The supplementary groups of thread `tid` (none when `/proc` does not say), for the
    /// rare request that needs them (a `chown` to another group): read each time.
    pub fn groups(&self, tid: u32) -> Vec<u32> {
        std::fs::read_to_string(format!("/proc/{tid}/status"))
            .ok()
            .and_then(|status| {
                status
                    .lines()
                    .find_map(|l| l.strip_prefix("Groups:"))
                    .map(|v| {
                        v.split_whitespace()
                            .filter_map(|g| g.parse().ok())
                            .collect()
                    })
            })
            .unwrap_or_default()
    }
}

/// The thread group of thread `tid` and its parent, from `/proc/TID/status`.
fn task_of(tid: u32) -> Option<Task> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
    };
    Some(Task {
        process: field("Tgid:")?,
        parent: field("PPid:").unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread_id() -> u32 {
        // SAFETY: gettid takes no arguments and cannot fail.
        unsafe { libc::gettid() as u32 }
    }

    #[test]
    fn a_process_is_named_with_its_parent() {
        let callers = Callers::default();
        let parent = std::os::unix::process::parent_id();
        assert_eq!(callers.parent(std::process::id()), Some(parent));
        assert_eq!(callers.parent(0), None);
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
        assert_eq!(task_of(tid), None);
        assert_eq!(Callers::default().process(tid), tid);
        assert_eq!(Callers::default().parent(tid), None);
    }
}
