//! The inode table: inode numbers ⇄ (parent, name), with the kernel's lookup counts.
//!
//! Paths are not stored whole; each node keeps its parent and its own name, so renaming a
//! directory moves its whole subtree at once and memory stays proportional to what the kernel
//! currently remembers (nodes are dropped when the kernel forgets them). Each node also keeps
//! the attributes the kernel was last given for it, so the core can tell the kernel exactly
//! which of its cached inodes changed (see `vfs::kernel_cache`).
//!
//! What the kernel may keep is bounded by what a node costs here (`--max-inodes`), so a node
//! holds only what the core compares ([`Attrs`], not a whole [`Stat`]), the rare disk file
//! identities live beside the nodes, and the names every block folder repeats
//! (`nodes.cubeset`, `meta`, …) are one shared string each ([`Names`]): 181 bytes per
//! inode instead of 280, measured by `cargo bench --bench inode_memory`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::SystemTime;

use lru::LruCache;

use crate::vfs::tree::{Kind, Stat};

/// The root inode.
pub const ROOT: u64 = 1;

struct Node {
    parent: u64,
    name: Arc<str>,
    nlookup: u64,
    /// The attributes the kernel holds for this inode with a long time to live, if any.
    kept: Option<Attrs>,
    /// Whether the kernel may hold this folder's listing until told (see `vfs::kernel_cache`).
    listed: bool,
}

/// What the core compares of the attributes the kernel keeps (see `vfs::kernel::same`) and
/// the source they were derived from ([`Stat::source`]). Kept attributes are never volatile
/// and never of a disk file with an owner of its own: those the kernel keeps only briefly.
#[derive(Clone, Copy)]
struct Attrs {
    size: u64,
    mtime: SystemTime,
    source: u64,
    perm: u16,
    kind: Kind,
    has_source: bool,
}

impl Attrs {
    fn of(stat: &Stat) -> Attrs {
        Attrs {
            size: stat.size,
            mtime: stat.mtime,
            source: stat.source.unwrap_or_default(),
            perm: stat.perm,
            kind: stat.kind,
            has_source: stat.source.is_some(),
        }
    }

    fn stat(&self) -> Stat {
        Stat {
            kind: self.kind,
            size: self.size,
            mtime: self.mtime,
            perm: self.perm,
            volatile: false,
            source: self.has_source.then_some(self.source),
            owner: None,
            file: None,
        }
    }
}

/// How many distinct names [`Names`] shares at most.
const SHARED_NAMES: usize = 1024;

/// One string for each name many folders hold (`nodes.cubeset` of every block folder): the
/// names looked up lately, at most [`SHARED_NAMES`]. A name seen once (a block folder's)
/// soon gives way to those seen again and again.
struct Names(LruCache<Arc<str>, ()>);

impl Names {
    fn new() -> Names {
        Names(LruCache::new(
            NonZeroUsize::new(SHARED_NAMES).unwrap_or(NonZeroUsize::MIN),
        ))
    }

    fn get(&mut self, name: &str) -> Arc<str> {
        if let Some((shared, ())) = self.0.get_key_value(name) {
            let shared = shared.clone();
            self.0.promote(name);
            return shared;
        }
        let new: Arc<str> = Arc::from(name);
        self.0.put(new.clone(), ());
        new
    }
}

/// An inode the kernel holds attributes of, as [`Inodes::kept_below`] returns it.
pub struct Kept {
    pub ino: u64,
    pub parent: u64,
    pub name: Arc<str>,
    pub stat: Stat,
}

/// Inode numbers for paths the kernel knows.
pub struct Inodes {
    nodes: HashMap<u64, Node>,
    /// Ordered, so the children of a folder are one range.
    by_name: BTreeMap<(u64, Arc<str>), u64>,
    /// The file on disk each inode that is one stands for (see [`Stat::file`]).
    files: HashMap<u64, u64>,
    names: Names,
    next: u64,
}

impl Default for Inodes {
    fn default() -> Self {
        let mut nodes = HashMap::new();
        nodes.insert(
            ROOT,
            Node {
                parent: ROOT,
                name: Arc::from(""),
                nlookup: 1,
                kept: None,
                listed: false,
            },
        );
        Inodes {
            nodes,
            by_name: BTreeMap::new(),
            files: HashMap::new(),
            names: Names::new(),
            next: ROOT + 1,
        }
    }
}

/// The deepest path an inode may have: the depth the mount shows
/// ([`crate::vfs::naming::DEEPEST`]) and one more, for the entries a listing of its deepest
/// folders names. A deeper chain (a folder the kernel knows things in, moved deeper; or a
/// loop) has no path, so no request walks more than this many names.
const MAX_DEPTH: usize = crate::vfs::naming::DEEPEST + 1;

impl Inodes {
    /// The path of an inode, or `None` when the inode is unknown.
    pub fn path(&self, ino: u64) -> Option<Vec<String>> {
        let mut parts = Vec::new();
        let mut cur = ino;
        while cur != ROOT {
            let node = self.nodes.get(&cur)?;
            parts.push(node.name.to_string());
            cur = node.parent;
            if parts.len() > MAX_DEPTH {
                return None;
            }
        }
        parts.reverse();
        Some(parts)
    }

    /// The inode of `name` in `parent`, if the kernel knows it.
    pub fn find(&self, parent: u64, name: &str) -> Option<u64> {
        self.by_name.get(&(parent, Arc::from(name))).copied()
    }

    /// The inode of `name` in `parent`, allocating one; counts one kernel lookup. `file`
    /// says which file on disk the name now stands for (see [`Stat::file`]): when it is
    /// another than the inode's, the old inode loses its name (a reader holding it goes on
    /// reading the old file, as on disk) and the name gets a new inode.
    pub fn lookup(&mut self, parent: u64, name: &str, file: Option<u64>) -> u64 {
        let key: (u64, Arc<str>) = (parent, self.names.get(name));
        if let Some(&ino) = self.by_name.get(&key) {
            let had = self.files.get(&ino).copied();
            match self.nodes.get_mut(&ino) {
                Some(_) if had.is_some() && file.is_some() && had != file => {}
                Some(node) => {
                    node.nlookup += 1;
                    if let Some(f) = file {
                        self.files.insert(ino, f);
                    }
                    return ino;
                }
                None => return ino,
            }
        }
        let ino = self.next;
        self.next += 1;
        self.nodes.insert(
            ino,
            Node {
                parent,
                name: key.1.clone(),
                nlookup: 1,
                kept: None,
                listed: false,
            },
        );
        if let Some(f) = file {
            self.files.insert(ino, f);
        }
        self.by_name.insert(key, ino);
        ino
    }

    /// The inode at `path`, if the kernel knows it.
    fn at(&self, path: &[String]) -> Option<u64> {
        path.iter().try_fold(ROOT, |ino, name| self.find(ino, name))
    }

    /// Which file on disk the inode at `path` stands for, if it is a real folder's file.
    pub fn file_at(&self, path: &[String]) -> Option<u64> {
        self.at(path).and_then(|ino| self.files.get(&ino).copied())
    }

    /// The inode at `path` now stands for `file` (the mount itself put it there: a commit
    /// renames a new file over the name), so the mount's own saves never look like another
    /// file to the kernel.
    pub fn set_file(&mut self, path: &[String], file: Option<u64>) {
        if let Some(ino) = self.at(path).filter(|ino| self.nodes.contains_key(ino)) {
            match file {
                Some(f) => self.files.insert(ino, f),
                None => self.files.remove(&ino),
            };
        }
    }

    /// Takes the name from `ino` (its file was replaced on disk while a handle held it): the
    /// next lookup of the name gets a new inode.
    pub fn unname(&mut self, ino: u64) {
        if let Some(node) = self.nodes.get(&ino) {
            let key = (node.parent, node.name.clone());
            if self.by_name.get(&key) == Some(&ino) {
                self.by_name.remove(&key);
            }
        }
    }

    /// Whether `ino` is a known inode (with a path or not).
    pub fn knows(&self, ino: u64) -> bool {
        ino == ROOT || self.nodes.contains_key(&ino)
    }

    /// Whether `ino` still has its name (it loses it to a removal, or to another file put
    /// at its path: see [`Inodes::lookup`]).
    pub fn named(&self, ino: u64) -> bool {
        ino == ROOT
            || self.nodes.get(&ino).is_some_and(|node| {
                self.by_name.get(&(node.parent, node.name.clone())) == Some(&ino)
            })
    }

    /// The kernel forgot `n` lookups of `ino`.
    pub fn forget(&mut self, ino: u64, n: u64) {
        if ino == ROOT {
            return;
        }
        let gone = match self.nodes.get_mut(&ino) {
            Some(node) => {
                node.nlookup = node.nlookup.saturating_sub(n);
                node.nlookup == 0
            }
            None => false,
        };
        if gone {
            self.files.remove(&ino);
            if let Some(node) = self.nodes.remove(&ino) {
                let key = (node.parent, node.name);
                if self.by_name.get(&key) == Some(&ino) {
                    self.by_name.remove(&key);
                }
            }
        }
    }

    /// `name` in `parent` no longer exists (the inode lives on until forgotten, nameless).
    pub fn unlink(&mut self, parent: u64, name: &str) {
        self.by_name.remove(&(parent, Arc::from(name)));
    }

    /// Moves the entry `name` of `parent` to `new_name` of `new_parent`, replacing whatever
    /// was there.
    pub fn rename(&mut self, parent: u64, name: &str, new_parent: u64, new_name: &str) {
        let new_key: (u64, Arc<str>) = (new_parent, self.names.get(new_name));
        self.by_name.remove(&new_key);
        if let Some(ino) = self.by_name.remove(&(parent, Arc::from(name))) {
            if let Some(node) = self.nodes.get_mut(&ino) {
                node.parent = new_parent;
                node.name = new_key.1.clone();
            }
            self.by_name.insert(new_key, ino);
        }
    }

    /// When more than `budget` inodes are held: the entries (parent, name) of the oldest
    /// ones below the top level, enough to come back to three quarters of the budget. The
    /// kernel is asked to drop those names; it then forgets their inodes (and their
    /// subtrees), which keeps this table bounded on walks of any size. An entry whose folder
    /// is dropped too is left out: dropping the folder's name drops what is below it, so a
    /// walked block folder costs the kernel one notification instead of one per file. A
    /// folder already named in `sent_before` (the last call's inodes) that is still held
    /// (a shell's working folder: the kernel drops its name but keeps it) does not stand for
    /// its entries again: they are named one by one.
    ///
    /// Returns `(inode, folder, name)` of each entry to drop.
    pub fn over_budget(
        &self,
        budget: usize,
        sent_before: &HashSet<u64>,
    ) -> Vec<(u64, u64, Arc<str>)> {
        if self.nodes.len() <= budget {
            return Vec::new();
        }
        let excess = self.nodes.len() - budget * 3 / 4;
        let mut old: Vec<(u64, u64, &Arc<str>)> = self
            .nodes
            .iter()
            .filter(|(&ino, n)| ino != ROOT && n.parent != ROOT)
            .map(|(&ino, n)| (ino, n.parent, &n.name))
            .collect();
        let excess = excess.min(old.len());
        if excess == 0 {
            return Vec::new();
        }
        old.select_nth_unstable_by_key(excess - 1, |&(ino, _, _)| ino);
        old.truncate(excess);
        let dropped: HashSet<u64> = old
            .iter()
            .map(|&(ino, _, _)| ino)
            .filter(|ino| !sent_before.contains(ino))
            .collect();
        old.into_iter()
            .filter(|&(_, parent, _)| !self.below_any(parent, &dropped))
            .map(|(ino, p, n)| (ino, p, n.clone()))
            .collect()
    }

    /// Whether `ino` or a folder above it is in `set`.
    fn below_any(&self, ino: u64, set: &HashSet<u64>) -> bool {
        let mut cur = ino;
        for _ in 0..MAX_DEPTH {
            if cur == ROOT {
                return false;
            }
            if set.contains(&cur) {
                return true;
            }
            match self.nodes.get(&cur) {
                Some(node) => cur = node.parent,
                None => return false,
            }
        }
        false
    }

    /// Notes the attributes the kernel was given for `ino`: kept when `stat` is not
    /// volatile (the kernel then caches them for long), else forgotten.
    pub fn keep(&mut self, ino: u64, stat: &Stat) {
        if let Some(node) = self.nodes.get_mut(&ino) {
            node.kept = (!stat.volatile).then(|| Attrs::of(stat));
        }
    }

    /// Replaces what the kernel keeps of `ino` (`None`: nothing, until it is served again).
    pub fn set_kept(&mut self, ino: u64, stat: Option<Stat>) {
        if let Some(node) = self.nodes.get_mut(&ino) {
            node.kept = stat.as_ref().map(Attrs::of);
        }
    }

    /// `ino`, if the kernel keeps its attributes.
    pub fn kept_one(&self, ino: u64) -> Option<Kept> {
        let node = self.nodes.get(&ino)?;
        Some(Kept {
            ino,
            parent: node.parent,
            name: node.name.clone(),
            stat: node.kept.as_ref()?.stat(),
        })
    }

    /// The inodes at and below `ino` whose attributes the kernel keeps, or all of them when
    /// `ino` is `None`.
    pub fn kept_below(&self, ino: Option<u64>) -> Vec<Kept> {
        match ino {
            None => self
                .nodes
                .keys()
                .filter_map(|&i| self.kept_one(i))
                .collect(),
            Some(top) => self
                .subtree(top)
                .into_iter()
                .filter_map(|i| self.kept_one(i))
                .collect(),
        }
    }

    /// `ino` and every inode below it.
    fn subtree(&self, top: u64) -> Vec<u64> {
        let mut found = Vec::new();
        let mut todo = vec![top];
        // A table with a loop (a bug) must not loop here: no walk visits more than all nodes.
        let mut budget = self.nodes.len();
        while let Some(dir) = todo.pop() {
            if budget == 0 {
                break;
            }
            budget -= 1;
            found.push(dir);
            let children = self
                .by_name
                .range((dir, Arc::from(""))..)
                .take_while(|((parent, _), _)| *parent == dir)
                .map(|(_, &child)| child);
            todo.extend(children);
        }
        found
    }

    /// Notes that the kernel may keep the listing of folder `ino` until told.
    pub fn set_listed(&mut self, ino: u64) {
        if let Some(node) = self.nodes.get_mut(&ino) {
            node.listed = true;
        }
    }

    /// The folders among `inos`, and at and below `below` (everywhere when `Some(None)`),
    /// whose listings the kernel may keep; they are no longer noted as kept, since the
    /// caller tells the kernel to drop them.
    pub fn take_listed(&mut self, inos: &[u64], below: Option<Option<u64>>) -> Vec<u64> {
        let mut candidates: Vec<u64> = inos.to_vec();
        match below {
            Some(Some(top)) => candidates.extend(self.subtree(top)),
            Some(None) => candidates.extend(self.nodes.keys().copied()),
            None => {}
        }
        candidates
            .into_iter()
            .filter(|ino| {
                self.nodes
                    .get_mut(ino)
                    .is_some_and(|n| std::mem::take(&mut n.listed))
            })
            .collect()
    }

    /// Number of inodes held (for tests and memory accounting).
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether only the root is held.
    pub fn is_empty(&self) -> bool {
        self.nodes.len() <= 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_paths_renames_and_forgets() {
        let mut t = Inodes::default();
        let blocks = t.lookup(ROOT, "blocks", None);
        let b = t.lookup(blocks, "0,0,0", None);
        let f = t.lookup(b, "nodes.cubeset", None);
        assert_eq!(t.path(f).unwrap(), vec!["blocks", "0,0,0", "nodes.cubeset"]);
        assert_eq!(t.lookup(blocks, "0,0,0", None), b);
        t.rename(blocks, "0,0,0", blocks, "1,0,0");
        assert_eq!(t.path(f).unwrap(), vec!["blocks", "1,0,0", "nodes.cubeset"]);
        assert_eq!(t.find(blocks, "0,0,0"), None);
        t.forget(f, 1);
        assert_eq!(t.path(f), None);
        t.forget(b, 1);
        assert_eq!(
            t.path(b),
            Some(vec!["blocks".to_string(), "1,0,0".to_string()])
        );
        t.forget(b, 1);
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn the_oldest_entries_below_the_top_go_first_when_over_budget() {
        let mut t = Inodes::default();
        let blocks = t.lookup(ROOT, "blocks", None);
        for i in 0..10 {
            t.lookup(blocks, &format!("{i},0,0"), None);
        }
        assert!(t.over_budget(100, &HashSet::new()).is_empty());
        let mut drop: Vec<String> = t
            .over_budget(8, &HashSet::new())
            .iter()
            .map(|(_, _, n)| n.to_string())
            .collect();
        drop.sort();
        // 12 held (root, blocks, 10 blocks) → down to 6: the six oldest blocks, never `blocks`.
        assert_eq!(drop, ["0,0,0", "1,0,0", "2,0,0", "3,0,0", "4,0,0", "5,0,0"]);
    }

    #[test]
    fn another_file_at_a_path_is_a_new_inode_and_the_old_one_keeps_no_name() {
        let mut t = Inodes::default();
        let a = t.lookup(ROOT, "notes.txt", Some(1));
        assert_eq!(t.lookup(ROOT, "notes.txt", Some(1)), a, "the same file");
        assert_eq!(t.lookup(ROOT, "notes.txt", None), a, "unknown: the same");
        let b = t.lookup(ROOT, "notes.txt", Some(2));
        assert_ne!(a, b, "another file at the path");
        assert!(t.named(b) && !t.named(a));
        t.forget(a, 3);
        assert_eq!(
            t.find(ROOT, "notes.txt"),
            Some(b),
            "forgetting the old keeps the new"
        );
        assert!(t.named(b));
    }

    #[test]
    fn a_dropped_folder_takes_its_files_along_in_one_name() {
        let mut t = Inodes::default();
        let blocks = t.lookup(ROOT, "blocks", None);
        for i in 0..4 {
            let b = t.lookup(blocks, &format!("{i},0,0"), None);
            for f in ["block.txt", "nodes.cubeset", "meta"] {
                let f = t.lookup(b, f, None);
                if i == 0 && f == 6 {
                    t.lookup(f, "0,0,0", None);
                }
            }
        }
        assert_eq!(t.path(7).unwrap(), ["blocks", "0,0,0", "meta", "0,0,0"]);
        // 19 held → down to 8: the 11 oldest are blocks 0 and 1 (with a file in block 0's
        // `meta`), block 2's folder and its `block.txt`: dropping the three folders' names
        // drops them all.
        let drop: Vec<(u64, String)> = t
            .over_budget(11, &HashSet::new())
            .iter()
            .map(|(_, p, n)| (*p, n.to_string()))
            .collect();
        let mut names: Vec<&str> = drop
            .iter()
            .map(|(p, n)| {
                assert_eq!(*p, blocks);
                n.as_str()
            })
            .collect();
        names.sort();
        assert_eq!(names, ["0,0,0", "1,0,0", "2,0,0"]);
    }

    /// A folder the kernel keeps after its name was dropped (a shell's working folder) is
    /// named again, with its entries one by one, so they can still be dropped.
    #[test]
    fn a_folder_held_after_its_name_was_dropped_gives_up_its_entries_one_by_one() {
        let mut t = Inodes::default();
        let blocks = t.lookup(ROOT, "blocks", None);
        let held = t.lookup(blocks, "0,0,0", None);
        for f in 0..10 {
            t.lookup(held, &format!("f{f}"), None);
        }
        let first = t.over_budget(8, &HashSet::new());
        assert_eq!(first.len(), 1, "the folder stands for its files");
        let sent: HashSet<u64> = first.iter().map(|(ino, _, _)| *ino).collect();
        // The kernel forgot nothing: the folder is held.
        let again = t.over_budget(8, &sent);
        let mut names: Vec<(u64, String)> =
            again.iter().map(|(_, p, n)| (*p, n.to_string())).collect();
        names.sort();
        assert_eq!(names.len(), 7, "{names:?}");
        assert_eq!(names[0], (blocks, "0,0,0".to_string()));
        assert!(names[1..].iter().all(|(p, _)| *p == held));
    }
}
