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

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::error::{lock, Result};

/// How long a removal waits for the name to be created again before it is committed.
pub const WINDOW: Duration = Duration::from_secs(1);

/// One removal held back: who removed the file, and when.
struct Removal {
    pid: u32,
    at: Instant,
}

/// The removals held back, by path (ordered, so the paths below a folder are one range).
///
/// Lock order: `committing`, then `pending`. Whoever commits removals holds `committing`
/// from taking them until the tree removed them, and [`Removals::cancel`] takes it too: a
/// file created at a name whose removal was just taken waits until the removal is done, so
/// the removal can never delete what the new file commits.
#[derive(Default)]
pub struct Removals {
    pending: Mutex<BTreeMap<Vec<String>, Removal>>,
    committing: Mutex<()>,
}

impl Removals {
    /// Holds back the removal of `path` by process `pid`.
    pub fn add(&self, path: &[String], pid: u32) -> Result<()> {
        lock(&self.pending)?.insert(
            path.to_vec(),
            Removal {
                pid,
                at: Instant::now(),
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

    /// Drops the removal of `path` without committing it (a new file takes its place);
    /// true when one was held back.
    pub fn cancel(&self, path: &[String]) -> Result<bool> {
        let _committing = lock(&self.committing)?;
        Ok(lock(&self.pending)?.remove(path).is_some())
    }

    /// Held while removals taken by [`Removals::take_below`] or [`Removals::take_older`]
    /// are committed.
    pub fn committing(&self) -> Result<MutexGuard<'_, ()>> {
        lock(&self.committing)
    }

    /// Takes the removals at or below `path`, for committing now, with who removed them.
    pub fn take_below(&self, path: &[String]) -> Result<Vec<(Vec<String>, u32)>> {
        let mut pending = lock(&self.pending)?;
        let below: Vec<Vec<String>> = pending
            .range(path.to_vec()..)
            .take_while(|(p, _)| p.starts_with(path))
            .map(|(p, _)| p.clone())
            .collect();
        Ok(below
            .into_iter()
            .filter_map(|p| pending.remove(&p).map(|r| (p, r.pid)))
            .collect())
    }

    /// Takes the removals held back for at least `age`, for committing now.
    pub fn take_older(&self, age: Duration) -> Result<Vec<(Vec<String>, u32)>> {
        let mut pending = lock(&self.pending)?;
        let due: Vec<Vec<String>> = pending
            .iter()
            .filter(|(_, r)| r.at.elapsed() >= age)
            .map(|(p, _)| p.clone())
            .collect();
        Ok(due
            .into_iter()
            .filter_map(|p| pending.remove(&p).map(|r| (p, r.pid)))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Vec<String> {
        s.split('/').map(String::from).collect()
    }

    #[test]
    fn removals_are_found_by_folder_and_taken_below_a_path_or_by_age() {
        let r = Removals::default();
        r.add(&p("a/b/c"), 1).unwrap();
        r.add(&p("a/b/d"), 2).unwrap();
        r.add(&p("a/bb"), 3).unwrap();
        r.add(&p("a/b/e/f"), 4).unwrap();
        assert_eq!(r.names_in(&p("a/b")).unwrap(), vec!["c", "d"]);
        assert_eq!(r.names_in(&p("a")).unwrap(), vec!["bb"]);
        assert!(r.holds(&p("a/bb")).unwrap());
        assert!(r.cancel(&p("a/bb")).unwrap());
        assert!(!r.cancel(&p("a/bb")).unwrap());
        let below: Vec<u32> = r
            .take_below(&p("a/b"))
            .unwrap()
            .into_iter()
            .map(|(_, pid)| pid)
            .collect();
        assert_eq!(below, vec![1, 2, 4], "a/bb is not below a/b");
        r.add(&p("x"), 5).unwrap();
        assert!(r.take_older(Duration::from_secs(60)).unwrap().is_empty());
        assert_eq!(r.take_older(Duration::ZERO).unwrap(), vec![(p("x"), 5)]);
        assert!(!r.holds(&p("x")).unwrap());
    }
}
