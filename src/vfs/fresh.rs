//! Folders just made by `mkdir`, as seen by the process that made them.
//!
//! A tree shows fixed entries in every folder of a kind: a Luanti block folder always holds
//! `nodes.cubeset`, `meta`, and so on, even right after `mkdir` made it. `cp -r` (and Python's
//! `copytree`) fill a folder they just made by creating each entry with `O_EXCL` or `mkdir`,
//! which fails on an entry that already exists. So, for a while, the process that made a
//! folder does not see the entries of it that it has not written yet; every other process
//! sees the folder as it is. The maker's forks that run the same program count as the maker:
//! `rsync`'s generator makes the folders and its fork, the receiver, writes the files (it
//! opens a file it replaces to compare, which for a new block's file would cost five
//! requests and a render for nothing). A child that runs another program (a script's
//! `mkdir`, then `sed -i` on a file of the folder) sees the folder as it is.
//!
//! A file the tree keeps showing after it was removed (a block's `light.txt`: `rm` resets it
//! or changes nothing) is hidden the same way from the process that removed it, until it
//! writes it: `mv` from another file system, `cp --remove-destination` and `install` remove
//! the destination, then create it with `O_EXCL`, which would fail on the file still there.
//!
//! Memory stays bounded whatever a restore makes: at most [`MOST`] folders are remembered
//! (the oldest made is forgotten first), each as one shared path string. `cp -r` fills a
//! folder right after making it, and one block folder holds at most 4,096 metadata nodes
//! (three folders each), so the bound is never reached inside one copy; rsync makes every
//! folder first and fills them later, and a folder it made long before does not need hiding
//! (it writes each file under a temporary name and renames it over what is there).

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long a made folder hides its unwritten entries from its maker after it was made, or
/// after something was last written into it or below it.
const WINDOW: Duration = Duration::from_secs(60);

/// How old a folder's window must be before a write below it starts it again.
const RENEW_AFTER: Duration = Duration::from_secs(5);

/// How many removed files are remembered at most (the oldest forgotten first).
const MOST_GONE: usize = 1024;

/// How many made folders are remembered at most: above the 12,290 folders `cp -r` makes for
/// a block with 4,096 metadata nodes (its folder, `meta/`, and each `meta/POS/` with its
/// `fields/` and `private/`), so a copy of any one block keeps them all.
pub const MOST: usize = 16_384;

struct Fresh {
    pid: u32,
    made: Instant,
    /// Entries written (created, renamed in, made) since.
    shown: Vec<Box<str>>,
}

/// The folders recently made by `mkdir`, by path, and in the order they were made (so
/// expired ones are dropped from the front, not by a scan of all at every `mkdir`: a restore
/// makes tens of thousands of folders within the window).
#[derive(Default)]
pub struct FreshDirs {
    dirs: Mutex<Made>,
    /// Whether a process is a fork of another running the same program (the adapter reads
    /// it from `/proc`).
    fork_of: OnceLock<ForkOf>,
}

/// `fork_of(pid, maker)`: whether process `pid` is a fork of process `maker` that runs the
/// same program.
pub type ForkOf = Box<dyn Fn(u32, u32) -> bool + Send + Sync>;

#[derive(Default)]
struct Made {
    /// By path joined with `/` (one string shared with `order`); ordered, so the folders
    /// below a path are one range (a rename of any file asks).
    by_path: BTreeMap<Arc<str>, Fresh>,
    /// Oldest first; an entry whose folder was removed or made again since is skipped.
    order: VecDeque<(Instant, Arc<str>)>,
    /// Files removed that the tree still shows: when, by which process, their path.
    gone: VecDeque<(Instant, u32, String)>,
}

fn key(dir: &[String]) -> String {
    dir.join("/")
}

/// The key of entry `name` of folder `dir`.
fn gone_key(dir: &[String], name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{}/{name}", key(dir))
    }
}

impl Made {
    /// Starts the window of the fresh folder `path` again (at most once per [`RENEW_AFTER`],
    /// so the order queue does not grow with every write).
    fn renew(&mut self, path: &str, now: Instant) {
        let Some((path, f)) = self.by_path.get_key_value(path) else {
            return;
        };
        let age = now.saturating_duration_since(f.made);
        if age < RENEW_AFTER || age >= WINDOW {
            return;
        }
        let path = path.clone();
        if let Some(f) = self.by_path.get_mut(&path) {
            f.made = now;
        }
        self.order.push_back((now, path));
    }

    /// Forgets the oldest folder (`order`'s front) when it expired or when `full`; true
    /// when one was looked at.
    fn drop_oldest(&mut self, now: Instant, full: bool) -> bool {
        let Some((made, _)) = self.order.front() else {
            return false;
        };
        if !full && now.duration_since(*made) < WINDOW {
            return false;
        }
        if let Some((made, path)) = self.order.pop_front() {
            if self.by_path.get(&path).is_some_and(|f| f.made == made) {
                self.by_path.remove(&path);
            }
        }
        true
    }
}

impl FreshDirs {
    /// Process `pid` made folder `dir`.
    pub fn made(&self, dir: &[String], pid: u32) {
        self.made_at(dir, pid, Instant::now());
    }

    fn made_at(&self, dir: &[String], pid: u32, now: Instant) {
        if pid == 0 {
            return;
        }
        if let Ok(mut d) = self.dirs.lock() {
            while d.drop_oldest(now, false) {}
            while d.by_path.len() >= MOST && d.drop_oldest(now, true) {}
            let path: Arc<str> = Arc::from(key(dir));
            d.order.push_back((now, path.clone()));
            d.by_path.insert(
                path,
                Fresh {
                    pid,
                    made: now,
                    shown: Vec::new(),
                },
            );
        }
    }

    /// Process `pid` removed the file at `path`, which the tree still shows.
    pub fn unlinked(&self, path: &[String], pid: u32) {
        if pid == 0 {
            return;
        }
        if let Ok(mut d) = self.dirs.lock() {
            let now = Instant::now();
            while d
                .gone
                .front()
                .is_some_and(|(at, _, _)| now.saturating_duration_since(*at) >= WINDOW)
                || d.gone.len() >= MOST_GONE
            {
                d.gone.pop_front();
            }
            d.gone.push_back((now, pid, key(path)));
        }
    }

    /// Whether any entry of any folder may be hidden from some process (cheap: no path is
    /// built).
    pub fn hides_any(&self) -> bool {
        self.dirs
            .lock()
            .map_or(true, |d| !d.by_path.is_empty() || !d.gone.is_empty())
    }

    /// Whether entry `name` of folder `dir` is hidden from process `pid`.
    pub fn hidden(&self, dir: &[String], name: &str, pid: u32) -> bool {
        self.hidden_at(dir, name, Some(pid), Instant::now())
    }

    /// Whether entry `name` of folder `dir` is hidden from some process.
    pub fn hidden_from_some(&self, dir: &[String], name: &str) -> bool {
        self.hidden_at(dir, name, None, Instant::now())
    }

    /// Tells how to find whether a process is a fork of another (the first call counts).
    pub fn set_fork_of(&self, fork_of: ForkOf) {
        let _ = self.fork_of.set(fork_of);
    }

    /// Whether entry `name` of folder `dir` is hidden from process `pid` (`None`: from any):
    /// from the process that made the folder or removed the file, and from its forks that
    /// run the same program.
    fn hidden_at(&self, dir: &[String], name: &str, pid: Option<u32>, now: Instant) -> bool {
        let from = |by: u32| {
            pid.map_or(true, |pid| {
                pid == by || self.fork_of.get().is_some_and(|f| f(pid, by))
            })
        };
        self.dirs.lock().is_ok_and(|d| {
            if d.by_path.is_empty() && d.gone.is_empty() {
                return false;
            }
            let fresh = d.by_path.get(key(dir).as_str()).is_some_and(|f| {
                now.saturating_duration_since(f.made) < WINDOW
                    && !f.shown.iter().any(|s| &**s == name)
                    && from(f.pid)
            });
            fresh
                || (!d.gone.is_empty() && {
                    let path = gone_key(dir, name);
                    d.gone.iter().any(|(at, by, p)| {
                        *p == path && now.saturating_duration_since(*at) < WINDOW && from(*by)
                    })
                })
        })
    }

    /// Whether a process may have an entry of folder `dir` hidden (it made the folder, or
    /// removed an entry of it, within the window): then the folder's listing depends on
    /// who asks.
    pub fn hides_in(&self, dir: &[String]) -> bool {
        let now = Instant::now();
        let dir = key(dir);
        self.dirs.lock().is_ok_and(|d| {
            d.by_path
                .get(dir.as_str())
                .is_some_and(|f| now.saturating_duration_since(f.made) < WINDOW)
                || d.gone.iter().any(|(at, _, p)| {
                    now.saturating_duration_since(*at) < WINDOW
                        && p.rsplit_once('/').map_or("", |(parent, _)| parent) == dir
                })
        })
    }

    /// Entry `name` of folder `dir` was written: nobody has it hidden any more.
    pub fn show(&self, dir: &[String], name: &str) {
        self.show_at(dir, name, Instant::now());
    }

    fn show_at(&self, dir: &[String], name: &str, now: Instant) {
        if let Ok(mut d) = self.dirs.lock() {
            if !d.gone.is_empty() {
                let path = gone_key(dir, name);
                d.gone.retain(|(_, _, p)| *p != path);
            }
            if let Some(f) = d.by_path.get_mut(key(dir).as_str()) {
                if !f.shown.iter().any(|s| &**s == name) {
                    f.shown.push(name.into());
                }
            }
            // Its maker is still filling it: it and the made folders above it stay fresh
            // (`cp -r` of a block with thousands of metadata nodes fills `meta/` for minutes
            // before it writes the block's own files).
            for depth in 1..=dir.len() {
                d.renew(&key(&dir[..depth]), now);
            }
        }
    }

    /// Folder `dir` was removed or moved away: forget it and the folders below it.
    pub fn removed(&self, dir: &[String]) {
        let top = key(dir);
        let below_prefix = format!("{top}/");
        if let Ok(mut d) = self.dirs.lock() {
            // Every path starting with `top` sorts in one range from `top` on; of those, the
            // folder itself and the paths below it (a sibling "top x" starts alike).
            let below: Vec<Arc<str>> = d
                .by_path
                .range::<str, _>((Bound::Included(top.as_str()), Bound::Unbounded))
                .take_while(|(p, _)| p.starts_with(top.as_str()))
                .filter(|(p, _)| &***p == top.as_str() || p.starts_with(&below_prefix))
                .map(|(p, _)| p.clone())
                .collect();
            for p in below {
                d.by_path.remove(&p);
            }
            d.gone
                .retain(|(_, _, p)| *p != top && !p.starts_with(&below_prefix));
        }
    }

    /// How many made folders are remembered (tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.dirs.lock().map(|d| d.by_path.len()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Vec<String> {
        s.split('/').map(String::from).collect()
    }

    /// `mv` from another file system onto a block's `light.txt`: removed (the tree keeps
    /// it), then created with `O_EXCL` by the same process, which must not see it between.
    #[test]
    fn a_removed_file_the_tree_keeps_is_hidden_from_its_remover_until_written() {
        let f = FreshDirs::default();
        let light = p("blocks/1,0,1/light.txt");
        f.unlinked(&light, 42);
        assert!(f.hidden(&p("blocks/1,0,1"), "light.txt", 42));
        assert!(
            !f.hidden(&p("blocks/1,0,1"), "light.txt", 7),
            "others see it"
        );
        assert!(!f.hidden(&p("blocks/1,0,1"), "block.txt", 42));
        assert!(!f.hidden(&p("blocks/1,0,2"), "light.txt", 42));
        f.show(&p("blocks/1,0,1"), "light.txt");
        assert!(
            !f.hidden(&p("blocks/1,0,1"), "light.txt", 42),
            "written: shown"
        );
        f.unlinked(&light, 42);
        f.removed(&p("blocks/1,0,1"));
        assert!(
            !f.hidden(&p("blocks/1,0,1"), "light.txt", 42),
            "folder gone"
        );
        f.unlinked(&p("auth.txt"), 42);
        assert!(f.hidden(&[], "auth.txt", 42));
        f.unlinked(&p("x"), 0);
        assert!(!f.hidden(&[], "x", 0), "no process: nothing hidden");
        let now = Instant::now();
        assert!(
            !f.hidden_at(&[], "auth.txt", Some(42), now + WINDOW),
            "for a while only"
        );
        for i in 0..MOST_GONE + 10 {
            f.unlinked(&p(&format!("f{i}")), 42);
        }
        assert!(!f.hidden(&[], "f0", 42), "the oldest are forgotten");
        assert!(f.hidden(&[], &format!("f{}", MOST_GONE + 9), 42));
    }

    #[test]
    fn what_is_hidden_from_a_process_is_hidden_from_its_forks() {
        let f = FreshDirs::default();
        // 43 is a fork of 42 (rsync's generator and its receiver); 45 is a child of 42 that
        // runs another program; 44 is a fork of 7.
        f.set_fork_of(Box::new(|pid, of| matches!((pid, of), (43, 42) | (44, 7))));
        f.made(&p("blocks/1,0,1"), 42);
        f.unlinked(&p("blocks/0,0,0/light.txt"), 42);
        for pid in [42, 43] {
            assert!(f.hidden(&p("blocks/1,0,1"), "nodes.cubeset", pid));
            assert!(f.hidden(&p("blocks/0,0,0"), "light.txt", pid));
        }
        for pid in [7, 44, 45] {
            assert!(!f.hidden(&p("blocks/1,0,1"), "nodes.cubeset", pid));
            assert!(!f.hidden(&p("blocks/0,0,0"), "light.txt", pid));
        }
        // The maker's parent is not its fork.
        f.made(&p("blocks/2,0,1"), 43);
        assert!(!f.hidden(&p("blocks/2,0,1"), "nodes.cubeset", 42));
        f.show(&p("blocks/1,0,1"), "nodes.cubeset");
        assert!(!f.hidden(&p("blocks/1,0,1"), "nodes.cubeset", 43));
    }

    #[test]
    fn a_folder_with_an_entry_hidden_from_anyone_says_so() {
        let f = FreshDirs::default();
        assert!(!f.hides_in(&p("blocks/1,2,3")));
        f.made(&p("blocks/1,2,3"), 7);
        assert!(f.hides_in(&p("blocks/1,2,3")));
        assert!(!f.hides_in(&p("blocks")));
        f.unlinked(&p("blocks/4,5,6/light.txt"), 8);
        assert!(f.hides_in(&p("blocks/4,5,6")));
        f.show(&p("blocks/4,5,6"), "light.txt");
        assert!(!f.hides_in(&p("blocks/4,5,6")));
        f.unlinked(&p("auth.txt"), 8);
        assert!(f.hides_in(&[]));
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
        assert!(f.hidden(&p("blocks/49999,0,0"), "meta", 42));
        // Made again after a removal: hidden again, from its new time.
        f.made(&p("blocks/1,0,0"), 42);
        assert!(f.hidden(&p("blocks/1,0,0"), "meta", 42));
    }

    /// A folder whose maker keeps writing below it stays fresh past the window; one left
    /// alone for the window does not.
    #[test]
    fn writes_below_a_folder_keep_it_fresh() {
        let f = FreshDirs::default();
        let t0 = Instant::now();
        f.made_at(&p("blocks/0,0,0"), 42, t0);
        f.made_at(&p("blocks/1,0,0"), 42, t0);
        f.made_at(&p("blocks/0,0,0/meta"), 42, t0);
        for s in (10..=200).step_by(10) {
            let at = t0 + Duration::from_secs(s);
            f.made_at(&p(&format!("blocks/0,0,0/meta/{s},0,0")), 42, at);
            f.show_at(&p(&format!("blocks/0,0,0/meta/{s},0,0")), "fields", at);
        }
        let end = t0 + Duration::from_secs(205);
        assert!(f.hidden_at(&p("blocks/0,0,0"), "nodes.cubeset", Some(42), end));
        assert!(!f.hidden_at(&p("blocks/1,0,0"), "nodes.cubeset", Some(42), end));
        assert!(!f.hidden_at(&p("blocks/0,0,0"), "nodes.cubeset", Some(42), end + WINDOW));
    }

    /// `cp -r` of a block with 4,096 metadata nodes makes its folder, then 12,289 folders
    /// below it, and only then writes the block's `nodes.cubeset`: the block folder is still
    /// remembered. Beyond [`MOST`] the oldest folders are forgotten, so memory stays bounded.
    #[test]
    fn a_whole_block_copy_is_remembered_and_memory_stays_bounded() {
        let f = FreshDirs::default();
        f.made(&p("blocks/0,0,0"), 42);
        f.made(&p("blocks/0,0,0/meta"), 42);
        for i in 0..4096 {
            let node = format!("blocks/0,0,0/meta/{},{},{}", i % 16, i / 256, (i / 16) % 16);
            f.made(&p(&node), 42);
            f.made(&p(&format!("{node}/fields")), 42);
            f.made(&p(&format!("{node}/private")), 42);
        }
        assert!(f.hidden(&p("blocks/0,0,0"), "nodes.cubeset", 42));
        for i in 0..3 * MOST {
            f.made(&p(&format!("blocks/{i},1,0")), 42);
        }
        assert!(f.len() <= MOST, "{} folders remembered", f.len());
        assert!(
            !f.hidden(&p("blocks/0,0,0"), "nodes.cubeset", 42),
            "forgotten"
        );
        assert!(f.hidden(&p(&format!("blocks/{},1,0", 3 * MOST - 1)), "meta", 42));
    }
}
