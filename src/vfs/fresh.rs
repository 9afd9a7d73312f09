//! Folders just made by `mkdir`, as seen by the process that made them.
//!
//! A tree shows fixed entries in every folder of a kind: a Luanti block folder always holds
//! `nodes.cubeset`, `meta`, and so on, even right after `mkdir` made it. `cp -r` (and Python's
//! `copytree`) fill a folder they just made by creating each entry with `O_EXCL` or `mkdir`,
//! which fails on an entry that already exists. So, for a while, the process that made a
//! folder does not see the entries of it that it has not written yet; every other process
//! sees the folder as it is.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a made folder hides its unwritten entries from its maker.
const WINDOW: Duration = Duration::from_secs(60);

struct Fresh {
    pid: u32,
    made: Instant,
    /// Entries written (created, renamed in, made) since.
    shown: HashSet<String>,
}

/// The folders recently made by `mkdir`, by path, and in the order they were made (so
/// expired ones are dropped from the front, not by a scan of all at every `mkdir`: a restore
/// makes tens of thousands of folders within the window).
#[derive(Default)]
pub struct FreshDirs {
    dirs: Mutex<Made>,
}

#[derive(Default)]
struct Made {
    /// Ordered, so the folders below a path are one range (a rename of any file asks).
    by_path: BTreeMap<Vec<String>, Fresh>,
    /// Oldest first; an entry whose folder was removed or made again since is skipped.
    order: VecDeque<(Instant, Vec<String>)>,
}

impl FreshDirs {
    /// Process `pid` made folder `dir`.
    pub fn made(&self, dir: &[String], pid: u32) {
        if pid == 0 {
            return;
        }
        if let Ok(mut d) = self.dirs.lock() {
            let now = Instant::now();
            while let Some((made, path)) = d.order.front().cloned() {
                if now.duration_since(made) < WINDOW {
                    break;
                }
                d.order.pop_front();
                if d.by_path.get(&path).is_some_and(|f| f.made == made) {
                    d.by_path.remove(&path);
                }
            }
            d.order.push_back((now, dir.to_vec()));
            d.by_path.insert(
                dir.to_vec(),
                Fresh {
                    pid,
                    made: now,
                    shown: HashSet::new(),
                },
            );
        }
    }

    /// Whether entry `name` of folder `dir` is hidden from process `pid`.
    pub fn hidden(&self, dir: &[String], name: &str, pid: u32) -> bool {
        self.dirs.lock().is_ok_and(|d| {
            d.by_path.get(dir).is_some_and(|f| {
                f.pid == pid && f.made.elapsed() < WINDOW && !f.shown.contains(name)
            })
        })
    }

    /// Entry `name` of folder `dir` was written: nobody has it hidden any more.
    pub fn show(&self, dir: &[String], name: &str) {
        if let Ok(mut d) = self.dirs.lock() {
            if let Some(f) = d.by_path.get_mut(dir) {
                f.shown.insert(name.to_string());
            }
        }
    }

    /// Folder `dir` was removed or moved away: forget it and the folders below it.
    pub fn removed(&self, dir: &[String]) {
        if let Ok(mut d) = self.dirs.lock() {
            let below: Vec<Vec<String>> = d
                .by_path
                .range(dir.to_vec()..)
                .take_while(|(p, _)| p.starts_with(dir))
                .map(|(p, _)| p.clone())
                .collect();
            for p in below {
                d.by_path.remove(&p);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Vec<String> {
        s.split('/').map(String::from).collect()
    }

    #[test]
    fn hides_unwritten_entries_from_the_maker_only() {
        let f = FreshDirs::default();
        f.made(&p("blocks/1,0,1"), 42);
        assert!(f.hidden(&p("blocks/1,0,1"), "nodes.cubeset", 42));
        assert!(!f.hidden(&p("blocks/1,0,1"), "nodes.cubeset", 7));
        assert!(!f.hidden(&p("blocks/0,0,0"), "nodes.cubeset", 42));
        f.show(&p("blocks/1,0,1"), "nodes.cubeset");
        assert!(!f.hidden(&p("blocks/1,0,1"), "nodes.cubeset", 42));
        assert!(f.hidden(&p("blocks/1,0,1"), "meta", 42));
        f.made(&p("blocks/1,0,1/meta"), 42);
        f.removed(&p("blocks/1,0,1"));
        assert!(!f.hidden(&p("blocks/1,0,1"), "meta", 42));
        assert!(!f.hidden(&p("blocks/1,0,1/meta"), "1,10,1", 42));
        f.made(&p("x"), 0);
        assert!(
            !f.hidden(&p("x"), "y", 0),
            "kernel-internal requests see everything"
        );
    }

    #[test]
    fn removal_forgets_exactly_the_folders_below_and_many_folders_stay_cheap() {
        let f = FreshDirs::default();
        for i in 0..50_000 {
            f.made(&p(&format!("blocks/{i},0,0")), 42);
        }
        f.made(&p("blocks/1,0,0/meta"), 42);
        f.made(&p("blocks/1,0,0 /meta"), 42);
        // A rename of a file asks for a removal of its path: nothing is below it.
        for i in 0..50_000 {
            f.removed(&p(&format!("blocks/{i},0,0/.nodes.cubeset.tmp")));
        }
        f.removed(&p("blocks/1,0,0"));
        assert!(!f.hidden(&p("blocks/1,0,0"), "meta", 42));
        assert!(!f.hidden(&p("blocks/1,0,0/meta"), "x", 42));
        assert!(
            f.hidden(&p("blocks/1,0,0 /meta"), "x", 42),
            "a sibling whose name starts alike stays"
        );
        assert!(f.hidden(&p("blocks/10,0,0"), "meta", 42));
        // Made again after a removal: hidden again, from its new time.
        f.made(&p("blocks/1,0,0"), 42);
        assert!(f.hidden(&p("blocks/1,0,0"), "meta", 42));
    }
}
