//! Folders just made by `mkdir`, as seen by the process that made them.
//!
//! A tree shows fixed entries in every folder of a kind: a Luanti block folder always holds
//! `nodes.cubeset`, `meta`, and so on, even right after `mkdir` made it. `cp -r` (and Python's
//! `copytree`) fill a folder they just made by creating each entry with `O_EXCL` or `mkdir`,
//! which fails on an entry that already exists. So, for a while, the process that made a
//! folder does not see the entries of it that it has not written yet; every other process
//! sees the folder as it is.

use std::collections::{HashMap, HashSet};
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

/// The folders recently made by `mkdir`, by path.
#[derive(Default)]
pub struct FreshDirs {
    dirs: Mutex<HashMap<Vec<String>, Fresh>>,
}

impl FreshDirs {
    /// Process `pid` made folder `dir`.
    pub fn made(&self, dir: &[String], pid: u32) {
        if pid == 0 {
            return;
        }
        if let Ok(mut d) = self.dirs.lock() {
            d.retain(|_, f| f.made.elapsed() < WINDOW);
            d.insert(
                dir.to_vec(),
                Fresh {
                    pid,
                    made: Instant::now(),
                    shown: HashSet::new(),
                },
            );
        }
    }

    /// Whether entry `name` of folder `dir` is hidden from process `pid`.
    pub fn hidden(&self, dir: &[String], name: &str, pid: u32) -> bool {
        self.dirs.lock().is_ok_and(|d| {
            d.get(dir).is_some_and(|f| {
                f.pid == pid && f.made.elapsed() < WINDOW && !f.shown.contains(name)
            })
        })
    }

    /// Entry `name` of folder `dir` was written: nobody has it hidden any more.
    pub fn show(&self, dir: &[String], name: &str) {
        if let Ok(mut d) = self.dirs.lock() {
            if let Some(f) = d.get_mut(dir) {
                f.shown.insert(name.to_string());
            }
        }
    }

    /// Folder `dir` was removed or moved away: forget it and the folders below it.
    pub fn removed(&self, dir: &[String]) {
        if let Ok(mut d) = self.dirs.lock() {
            d.retain(|p, _| !p.starts_with(dir));
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
}
