//! Removals of stored files, held back for a moment.
//!
//! `install`, `mv` from another file system and `cp --remove-destination` replace a file by
//! removing it and creating it again. Were the removal committed at once, a new text that
//! does not parse would fail its close with the object already gone from the store (a
//! player, a chest's inventory, `world.mt`). So `unlink` of a stored file only checks that
//! the tree would remove it ([`crate::vfs::Tree::check_remove`]) and hides the name from
//! every process; the removal itself is committed a moment later ([`WINDOW`], by the
//! watcher), or at once when something needs it done (a `rmdir` or a rename around it, a
//! `mkdir` or link at its name, the unmount). A file created at the name before then takes
//! the removal's place: its commit replaces the stored object, and a failed commit leaves
//! the object stored, as a failed save of any file does. A crash inside the window leaves the
//! object stored, as if the removal had come after it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::error::{lock, Result};

/// How long a removal waits for the name to be created again before it is committed.
pub const WINDOW: Duration = Duration::from_secs(1);

/// One removal held back: who removed the file, and when.
struct Removal {
    pid: u32,
    /// When it was held back, or when its last commit failed (it is tried again a
    /// [`WINDOW`] later).
    at: Instant,
    /// Failed commits so far (at [`TRIES`], it is given up).
    failures: u32,
    /// Chosen for a commit under way.
    in_flight: bool,
}

/// How many times a removal is tried before it is given up (the file stays stored, and the
/// unmount names it).
pub const TRIES: u32 = 3;

/// The removals held back, by path (ordered, so the paths below a folder are one range).
///
/// A removal stays here (its name hidden) until the tree removed the file: whoever commits
/// removals holds `committing` from choosing them until the tree is done, and
/// [`Removals::cancel`] takes it too, so a file created at a name whose removal is being
/// committed waits for it, and the removal never deletes what the new file commits. A
/// removal whose commit failed stays, and is tried again.
///
/// Lock order: `committing`, then `pending`.
#[derive(Default)]
pub struct Removals {
    pending: Mutex<BTreeMap<Vec<String>, Removal>>,
    committing: Mutex<()>,
    /// Names whose removal a new file cancelled, while that file is being written: removing
    /// the new file before it committed removes the object too.
    replaced: Mutex<BTreeSet<Vec<String>>>,
    /// Removals given up, with why (reported at the unmount).
    given_up: Mutex<Vec<(Vec<String>, String)>>,
}

impl Removals {
    /// Holds back the removal of `path` by process `pid`.
    pub fn add(&self, path: &[String], pid: u32) -> Result<()> {
        lock(&self.pending)?.insert(
            path.to_vec(),
            Removal {
                pid,
                at: Instant::now(),
                failures: 0,
                in_flight: false,
            },
        );
        Ok(())
    }

    /// Whether the removal of `path` is held back (the name is hidden).
    pub fn holds(&self, path: &[String]) -> Result<bool> {
        Ok(lock(&self.pending)?.contains_key(path))
    }

    /// The names of folder `dir` whose removal is held back.
    pub fn names_in(&self, dir: &[String]) -> Result<Vec<String>> {
        Ok(lock(&self.pending)?
            .range(dir.to_vec()..)
            .take_while(|(p, _)| p.starts_with(dir))
            .filter(|(p, _)| p.len() == dir.len() + 1)
            .filter_map(|(p, _)| p.last().cloned())
            .collect())
    }

    /// Drops the removal of `path` without committing it, for a new file that takes its
    /// place (waiting while removals are being committed); true when one was held back, and
    /// then `path` is marked replaced until [`Removals::replaced_done`].
    pub fn cancel(&self, path: &[String]) -> Result<bool> {
        loop {
            {
                let mut pending = lock(&self.pending)?;
                match pending.get(path) {
                    None => return Ok(false),
                    Some(r) if !r.in_flight => {
                        pending.remove(path);
                        lock(&self.replaced)?.insert(path.to_vec());
                        return Ok(true);
                    }
                    Some(_) => {}
                }
            }
            // Its commit is under way: wait for it (only then; other names' commits do not
            // hold a create up), then look again.
            drop(lock(&self.committing)?);
        }
    }

    /// The new file at `path` committed, or its text failed (the object stays, as for any
    /// failed save): the removal it replaced is over. True when `path` was marked replaced.
    pub fn replaced_done(&self, path: &[String]) -> Result<bool> {
        Ok(lock(&self.replaced)?.remove(path))
    }

    /// Held while removals chosen by [`Removals::below`] or [`Removals::older`] are
    /// committed.
    pub fn committing(&self) -> Result<MutexGuard<'_, ()>> {
        lock(&self.committing)
    }

    /// The removals at or below `path`, to commit now, with who removed them (they stay
    /// held until [`Removals::done`]).
    pub fn below(&self, path: &[String]) -> Result<Vec<(Vec<String>, u32)>> {
        Ok(lock(&self.pending)?
            .range_mut(path.to_vec()..)
            .take_while(|(p, _)| p.starts_with(path))
            .map(|(p, r)| {
                r.in_flight = true;
                (p.clone(), r.pid)
            })
            .collect())
    }

    /// The removals held back for at least `age`, to commit now.
    pub fn older(&self, age: Duration) -> Result<Vec<(Vec<String>, u32)>> {
        Ok(lock(&self.pending)?
            .iter_mut()
            .filter(|(_, r)| r.at.elapsed() >= age)
            .map(|(p, r)| {
                r.in_flight = true;
                (p.clone(), r.pid)
            })
            .collect())
    }

    /// The tree removed `path` (or failed to, `Err(reason)`: it stays held and is tried
    /// again a [`WINDOW`] later, up to [`TRIES`] times; then it is given up).
    pub fn done(&self, path: &[String], outcome: std::result::Result<(), String>) -> Result<()> {
        let mut pending = lock(&self.pending)?;
        let Some(r) = pending.get_mut(path) else {
            return Ok(());
        };
        r.in_flight = false;
        match outcome {
            Ok(()) => {
                pending.remove(path);
            }
            Err(reason) => {
                r.at = Instant::now();
                r.failures += 1;
                if r.failures >= TRIES {
                    pending.remove(path);
                    lock(&self.given_up)?.push((path.to_vec(), reason));
                }
            }
        }
        Ok(())
    }

    /// The removals given up, with why (reported at the unmount: the files stay stored).
    pub fn given_up(&self) -> Result<Vec<(Vec<String>, String)>> {
        Ok(lock(&self.given_up)?.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Vec<String> {
        s.split('/').map(String::from).collect()
    }

    #[test]
    fn removals_are_found_by_folder_and_below_a_path_or_by_age_until_done() {
        let r = Removals::default();
        r.add(&p("a/b/c"), 1).unwrap();
        r.add(&p("a/b/d"), 2).unwrap();
        r.add(&p("a/bb"), 3).unwrap();
        r.add(&p("a/b/e/f"), 4).unwrap();
        assert_eq!(r.names_in(&p("a/b")).unwrap(), vec!["c", "d"]);
        assert_eq!(r.names_in(&p("a")).unwrap(), vec!["bb"]);
        assert!(r.cancel(&p("a/bb")).unwrap());
        assert!(!r.cancel(&p("a/bb")).unwrap());
        assert!(r.replaced_done(&p("a/bb")).unwrap());
        assert!(!r.replaced_done(&p("a/bb")).unwrap());
        let below: Vec<u32> = r
            .below(&p("a/b"))
            .unwrap()
            .into_iter()
            .map(|(_, pid)| pid)
            .collect();
        assert_eq!(below, vec![1, 2, 4], "a/bb is not below a/b");
        assert!(r.holds(&p("a/b/c")).unwrap(), "held until done");
        r.done(&p("a/b/c"), Ok(())).unwrap();
        assert!(!r.holds(&p("a/b/c")).unwrap());
        r.done(&p("a/b/d"), Err("locked".into())).unwrap();
        assert!(r.holds(&p("a/b/d")).unwrap(), "a failed removal stays held");
        assert!(!r
            .older(Duration::from_secs(60))
            .unwrap()
            .iter()
            .any(|(x, _)| *x == p("a/b/d")));
        assert_eq!(r.older(Duration::ZERO).unwrap().len(), 2);
        for _ in 1..TRIES {
            assert!(r.given_up().unwrap().is_empty());
            r.done(&p("a/b/d"), Err("locked".into())).unwrap();
        }
        assert!(
            !r.holds(&p("a/b/d")).unwrap(),
            "given up after {TRIES} tries"
        );
        assert_eq!(
            r.given_up().unwrap(),
            vec![(p("a/b/d"), "locked".to_string())]
        );
    }
}
