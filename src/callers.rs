//! Which process a request comes from.
//!
//! The kernel hands a FUSE request the id of the calling thread. The core's views that
//! depend on who asks (a folder's fixed files hidden from the process that just made it, a
//! removed file from its remover: `vfs::fresh`) are per process: `cp -r` in a thread pool,
//! or any program whose threads share the work, makes a folder in one thread and fills it
//! from another. So the adapter names the thread's process (its thread group, `Tgid` in
//! `/proc/TID/status`) before asking the core, and tells the core when a process is a fork
//! of another running the same program (`PPid` and `Name`): `rsync` makes folders in one
//! process and fills them from its fork.
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

/// A thread's process, that process's parent (0 when `/proc` does not say) and the name of
/// the program it runs (the kernel's `comm`, at most 15 bytes; empty when unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Task {
    process: u32,
    parent: u32,
    program: [u8; 16],
}

impl Task {
    fn unknown(process: u32) -> Task {
        Task {
            process,
            parent: 0,
            program: [0; 16],
        }
    }
}

impl Callers {
    /// The process of thread `tid` (itself when `/proc` does not say: the thread is gone,
    /// or `/proc` is not mounted; 0, the kernel's own requests, stays 0).
    pub fn process(&self, tid: u32) -> u32 {
        self.task(tid).process
    }

    /// Whether process `pid` is a fork of process `of` that runs the same program: its child
    /// that started no other program (rsync's receiver, forked by its generator), as far as
    /// `/proc` tells while both run.
    pub fn forked_from(&self, pid: u32, of: u32) -> bool {
        let child = self.task(pid);
        child.parent == of
            && of != 0
            && child.program != [0; 16]
            && self.task(of).program == child.program
    }

    fn task(&self, tid: u32) -> Task {
        if tid == 0 {
            return Task::unknown(0);
        }
        let now = Instant::now();
        if let Ok(known) = self.known.lock() {
            if let Some(&(task, at)) = known.get(&tid) {
                if now.saturating_duration_since(at) < KEEP {
                    return task;
                }
            }
        }
        let task = task_of(tid).unwrap_or(Task::unknown(tid));
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

/// The thread group of thread `tid`, its parent and its program, from `/proc/TID/status`.
fn task_of(tid: u32) -> Option<Task> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    let line = |name: &str| status.lines().find_map(|l| l.strip_prefix(name));
    let field = |name: &str| line(name).and_then(|v| v.trim().parse().ok());
    let mut program = [0; 16];
    if let Some(name) = line("Name:") {
        let name = name.trim().as_bytes();
        let n = name.len().min(program.len());
        program[..n].copy_from_slice(&name[..n]);
    }
    Some(Task {
        process: field("Tgid:")?,
        parent: field("PPid:").unwrap_or(0),
        program,
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
    fn a_process_is_named_with_its_parent_and_a_fork_by_its_program() {
        let callers = Callers::default();
        let me = std::process::id();
        let parent = std::os::unix::process::parent_id();
        assert_eq!(callers.task(me).parent, parent);
        assert_eq!(callers.task(0).parent, 0);
        assert!(!callers.forked_from(me, 0));
        // A child that runs another program is not a fork of this one.
        let mut sleep = std::process::Command::new("sleep")
            .arg("10")
            .spawn()
            .unwrap();
        let child = sleep.id();
        assert_eq!(callers.task(child).parent, me);
        assert!(!callers.forked_from(child, me), "sleep is another program");
        sleep.kill().unwrap();
        sleep.wait().unwrap();
        // A fork that started no other program is. It is named after the thread that forks
        // it: this test's thread takes the process's name first (a thread of the test
        // harness has the test's).
        let name = std::ffi::CString::new(
            std::fs::read_to_string(format!("/proc/{me}/comm"))
                .unwrap()
                .trim_end(),
        )
        .unwrap();
        // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes.
        unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr()) };
        // SAFETY: the child only sleeps and exits (async-signal-safe calls).
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            unsafe {
                libc::sleep(10);
                libc::_exit(0);
            }
        }
        assert!(pid > 0);
        let fork = pid as u32;
        let seen = Callers::default().forked_from(fork, me);
        // SAFETY: signals and reaps the child forked above.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
        assert!(seen, "a fork runs the same program");
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
        assert_eq!(Callers::default().task(tid).parent, 0);
    }
}
