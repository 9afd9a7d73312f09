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
//!
//! That still bounds what the kernel may keep far below a world's count of files, so a tree
//! may number the many folders of one kind itself ([`Numbering`]: `blocks/X,Y,Z` by its
//! position) and their fixed entries (a block's views): such an inode's number says what it
//! is, so the table holds no node for it and ignores its forgets. What the kernel keeps of
//! them is followed per folder ([`Unit`]: whether it keeps the folder's attributes and which
//! fixed entries', and the source they were derived from), a few bytes per block instead of seven nodes. A numbered
//! inode moved or removed gets a node like any other (its number then stands for that node,
//! and the name it left gets an ordinary inode when looked up again).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::SystemTime;

use lru::LruCache;

use crate::vfs::kernel::same;
use crate::vfs::tree::{Kind, Numbering, Stat};

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
    /// Attributes the kernel keeps that the table does not know (a numbered file's, when it
    /// gets a node): never the same as a stat, so a re-check tells the kernel to drop them.
    const UNKNOWN: Attrs = Attrs {
        size: u64::MAX,
        mtime: SystemTime::UNIX_EPOCH,
        source: 0,
        perm: u16::MAX,
        kind: Kind::File,
        has_source: false,
    };

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

/// Numbered inodes (see [`Numbering`]) are this plus the folder's number (below 2^48)
/// times [`SLOTS`], plus 0 for the folder itself or 1 + the index of a fixed entry: all below
/// 2^53, so programs that hold inode numbers in a double (Node.js) keep them apart, and far
/// above any number the table allocates.
const NUMBERED: u64 = 1 << 52;

/// Inode numbers per numbered folder: the folder and up to [`MOST_FIXED`] fixed entries
/// (the last slot's bit in [`Unit::kept`] is [`MIXED`]).
const SLOTS: u64 = 16;

/// The most fixed entries a numbered folder may hold.
const MOST_FIXED: usize = SLOTS as usize - 2;

/// How many numbered folders the kernel may keep attributes in per inode of the budget
/// (`--max-inodes`): a [`Unit`] costs about a tenth of a node.
pub const UNITS_PER_INODE: usize = 8;

/// Whether `ino` is a number the tree computed (see [`Numbering`]), node or not.
pub fn is_numbered(ino: u64) -> bool {
    ino >> 52 == 1
}

fn folder_of(ino: u64) -> u64 {
    ino & !(SLOTS - 1)
}

fn slot_of(ino: u64) -> u64 {
    ino & (SLOTS - 1)
}

/// What the kernel keeps of one numbered folder and its fixed entries: 16 bytes.
#[derive(Default)]
struct Unit {
    /// The folder (bit 0) and fixed entries (bit: slot) whose attributes the kernel keeps;
    /// [`MIXED`] says they came from different sources (another program changed the
    /// folder's object in between: the next re-check drops them all).
    kept: u16,
    /// The folders among the folder (bit 0) and its fixed entries whose listings the
    /// kernel keeps.
    listed: u16,
    /// When it was last used, on the table's clock (the oldest are shed first).
    used: u32,
    /// The source ([`Stat::source`]) the kept attributes were derived from.
    source: u64,
}

/// [`Unit::kept`]'s bit for "from different sources": the last slot's, which no fixed
/// entry has.
const MIXED: u16 = 1 << (SLOTS - 1);

impl Unit {
    /// Whether the kernel keeps attributes of any fixed entry.
    fn keeps_any(&self) -> bool {
        self.kept & !MIXED != 0
    }

    /// The one source the kept attributes were derived from, if they share one.
    fn source(&self) -> Option<u64> {
        (self.kept & MIXED == 0).then_some(self.source)
    }

    /// Whether the unit follows nothing any more.
    fn is_empty(&self) -> bool {
        !self.keeps_any() && self.listed == 0
    }
}

/// An inode the kernel holds attributes of, as [`Inodes::kept_below`] returns it.
pub struct Kept {
    pub ino: u64,
    pub parent: u64,
    pub name: Arc<str>,
    /// The attributes the kernel keeps, when the table holds them; not for a numbered
    /// entry, whose [`Kept::source`] stands for them.
    pub stat: Option<Stat>,
    /// What the kept attributes were derived from ([`Stat::source`]).
    pub source: Option<u64>,
}

impl Kept {
    /// Whether `now` is what the kernel keeps: the same attributes, or for a numbered entry
    /// the same source (its attributes follow from its source, and every change the core
    /// makes drops what the kernel keeps of it).
    pub fn agrees(&self, now: &Stat) -> bool {
        match &self.stat {
            Some(kept) => same(now, kept),
            None => !now.volatile && now.source.is_some() && now.source == self.source,
        }
    }
}

/// What the kernel is told to drop when a numbered folder's [`Unit`] is shed: the
/// attributes (and pages, and listings) of `inodes`, and the names `entries` (folder, name).
#[derive(Default)]
pub struct Shed {
    pub inodes: Vec<u64>,
    pub entries: Vec<(u64, String)>,
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
    /// How the tree numbers inodes itself, if it does.
    numbering: Option<Arc<dyn Numbering>>,
    /// What the kernel keeps of numbered folders, by the folder's inode.
    units: HashMap<u64, Unit>,
    /// Counts uses of units (see [`Unit::used`]; it wraps after 2^32, which misorders the
    /// oldest once).
    clock: u32,
}

impl Default for Inodes {
    fn default() -> Self {
        Inodes::new(None)
    }
}

impl Inodes {
    /// A table holding the root, with the tree's own numbering if it has one.
    pub fn new(numbering: Option<Arc<dyn Numbering>>) -> Inodes {
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
            numbering,
            units: HashMap::new(),
            clock: 0,
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
            match self.nodes.get(&cur) {
                Some(node) => {
                    parts.push(node.name.to_string());
                    cur = node.parent;
                }
                None => {
                    let (parent, name) = self.numbered_entry(cur)?;
                    parts.push(name);
                    cur = parent;
                }
            }
            if parts.len() > MAX_DEPTH {
                return None;
            }
        }
        parts.reverse();
        Some(parts)
    }

    /// The folder and name of numbered inode `ino` that has no node.
    fn numbered_entry(&self, ino: u64) -> Option<(u64, String)> {
        if !is_numbered(ino) {
            return None;
        }
        let numbering = self.numbering.as_ref()?;
        match slot_of(ino) {
            0 => Some((
                self.numbered_dir()?,
                numbering.name((ino & !NUMBERED) / SLOTS)?,
            )),
            s if s as usize <= MOST_FIXED => Some((
                folder_of(ino),
                numbering.fixed().get(s as usize - 1)?.to_string(),
            )),
            _ => None,
        }
    }

    /// The inode of the folder whose entries are numbered, while the kernel knows it.
    fn numbered_dir(&self) -> Option<u64> {
        let numbering = self.numbering.as_ref()?;
        numbering.dir().iter().try_fold(ROOT, |ino, name| {
            self.by_name.get(&(ino, Arc::from(*name))).copied()
        })
    }

    /// The number the tree gives `name` in `parent`, unless a node holds that number (a
    /// numbered inode moved or removed: the name then gets an ordinary inode).
    fn computed(&self, parent: u64, name: &str) -> Option<u64> {
        let numbering = self.numbering.as_ref()?;
        let ino = if is_numbered(parent) && slot_of(parent) == 0 {
            let i = numbering
                .fixed()
                .iter()
                .take(MOST_FIXED)
                .position(|f| *f == name)?;
            parent + 1 + i as u64
        } else if self.numbered_dir() == Some(parent) {
            let n = numbering.number(name).filter(|n| *n < 1 << 48)?;
            NUMBERED | (n * SLOTS)
        } else {
            return None;
        };
        (!self.nodes.contains_key(&ino)).then_some(ino)
    }

    /// The inode of `name` in `parent`, if the kernel knows it (a numbered one, if it may).
    pub fn find(&self, parent: u64, name: &str) -> Option<u64> {
        self.by_name
            .get(&(parent, Arc::from(name)))
            .copied()
            .or_else(|| self.computed(parent, name))
    }

    /// The inode of `name` in `parent`, allocating one; counts one kernel lookup. `file`
    /// says which file on disk the name now stands for (see [`Stat::file`]): when it is
    /// another than the inode's, the old inode loses its name (a reader holding it goes on
    /// reading the old file, as on disk) and the name gets a new inode. A numbered name
    /// gets its number, and nothing is counted.
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
        if file.is_none() {
            if let Some(ino) = self.computed(parent, name) {
                self.clock = self.clock.wrapping_add(1);
                if let Some(unit) = self.units.get_mut(&folder_of(ino)) {
                    unit.used = self.clock;
                }
                return ino;
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
        ino == ROOT || self.nodes.contains_key(&ino) || self.numbered_entry(ino).is_some()
    }

    /// Whether `ino` still has its name (it loses it to a removal, or to another file put
    /// at its path: see [`Inodes::lookup`]).
    pub fn named(&self, ino: u64) -> bool {
        if ino == ROOT {
            return true;
        }
        match self.nodes.get(&ino) {
            Some(node) => self.by_name.get(&(node.parent, node.name.clone())) == Some(&ino),
            None => self.numbered_entry(ino).is_some_and(|(parent, name)| {
                self.by_name
                    .get(&(parent, Arc::from(name)))
                    .map_or(true, |&held| held == ino)
            }),
        }
    }

    /// The kernel forgot `n` lookups of `ino` (numbered inodes without a node count none).
    /// The node of a numbered inode that still has its name stays: its lookups before it had
    /// a node were not counted, so a forget of them (even one sent before a later lookup
    /// and rename, and handled after) must not send its number back to the path it left.
    pub fn forget(&mut self, ino: u64, n: u64) {
        if ino == ROOT {
            return;
        }
        let named_number = is_numbered(ino) && self.named(ino);
        let gone = match self.nodes.get_mut(&ino) {
            Some(node) => {
                node.nlookup = node.nlookup.saturating_sub(n);
                node.nlookup == 0 && !named_number
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

    /// Gives numbered inode `ino` a node at `name` in `parent`, counted as one lookup: its
    /// number now stands for that node (see [`Inodes::forget`]). What its folder's unit
    /// noted of it goes to the node: a kept listing, and kept attributes as
    /// [`Attrs::UNKNOWN`], so the re-check of the change that made the node (a rename, a
    /// removal) tells the kernel to drop them.
    fn numbered_node(&mut self, ino: u64, parent: u64, name: &str) {
        let name = self.names.get(name);
        let bit = 1u16 << slot_of(ino);
        let (kept, listed) = match self.units.get_mut(&folder_of(ino)) {
            Some(unit) => {
                let had = (unit.kept & bit != 0, unit.listed & bit != 0);
                unit.kept &= !bit | MIXED;
                unit.listed &= !bit;
                if unit.is_empty() {
                    self.units.remove(&folder_of(ino));
                }
                had
            }
            None => (false, false),
        };
        self.nodes.insert(
            ino,
            Node {
                parent,
                name,
                nlookup: 1,
                kept: kept.then_some(Attrs::UNKNOWN),
                listed,
            },
        );
    }

    /// `name` in `parent` no longer exists (the inode lives on until forgotten, nameless).
    pub fn unlink(&mut self, parent: u64, name: &str) {
        if self.by_name.remove(&(parent, Arc::from(name))).is_none() {
            if let Some(ino) = self.computed(parent, name) {
                self.numbered_node(ino, parent, name);
            }
        }
    }

    /// Moves the entry `name` of `parent` to `new_name` of `new_parent`, replacing whatever
    /// was there (a numbered inode replaced keeps no node: it is nameless while the moved
    /// inode holds its name, since the kernel may never have known it, as when a restore's
    /// rsync renames its temporary file over a view of a block folder it made).
    pub fn rename(&mut self, parent: u64, name: &str, new_parent: u64, new_name: &str) {
        let new_key: (u64, Arc<str>) = (new_parent, self.names.get(new_name));
        self.by_name.remove(&new_key);
        let moved = match self.by_name.remove(&(parent, Arc::from(name))) {
            Some(ino) => Some(ino),
            None => self.computed(parent, name).inspect(|&ino| {
                self.numbered_node(ino, parent, name);
            }),
        };
        if let Some(ino) = moved {
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

    /// The folder holding `ino`, if known.
    fn parent_of(&self, ino: u64) -> Option<u64> {
        match self.nodes.get(&ino) {
            Some(node) => Some(node.parent),
            None => self.numbered_entry(ino).map(|(parent, _)| parent),
        }
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
            match self.parent_of(cur) {
                Some(parent) => cur = parent,
                None => return false,
            }
        }
        false
    }

    /// When more than `most` numbered folders have units, sheds the oldest down to three
    /// quarters of `most`: what the kernel keeps of them is no longer followed, so it is told
    /// to drop it: the attributes, pages and listings of their kept inodes, and the folders'
    /// names, which take their entries' names along (a folder the kernel still holds, a
    /// shell's working folder, keeps them, but their attributes it asks for again, and
    /// that follows them again). One name per folder: a shed of a whole world's folders
    /// stays a few megabytes.
    pub fn shed_units(&mut self, most: usize) -> Shed {
        let mut shed = Shed::default();
        if self.units.len() <= most {
            return shed;
        }
        let excess = self.units.len() - most * 3 / 4;
        let mut old: Vec<(u32, u64)> = self.units.iter().map(|(&f, u)| (u.used, f)).collect();
        old.select_nth_unstable(excess - 1);
        old.truncate(excess);
        for (_, folder) in old {
            let Some(unit) = self.units.remove(&folder) else {
                continue;
            };
            for slot in 0..SLOTS {
                let bit = 1u16 << slot;
                if ((unit.kept & !MIXED) | unit.listed) & bit == 0 {
                    continue;
                }
                shed.inodes.push(folder + slot);
            }
            if let Some(entry) = self.entry_of(folder) {
                shed.entries.push(entry);
            }
        }
        shed
    }

    /// The folder and name of `ino`.
    fn entry_of(&self, ino: u64) -> Option<(u64, String)> {
        match self.nodes.get(&ino) {
            Some(node) => Some((node.parent, node.name.to_string())),
            None => self.numbered_entry(ino),
        }
    }

    /// Notes the attributes the kernel was given for `ino`: kept when `stat` is not
    /// volatile (the kernel then caches them for long), else forgotten. False when they are
    /// not kept (volatile, an inode the table does not know, or a numbered entry without a
    /// source to follow): the kernel must then not keep them for long.
    pub fn keep(&mut self, ino: u64, stat: &Stat) -> bool {
        if let Some(node) = self.nodes.get_mut(&ino) {
            // A folder with a node is not kept: its time may follow what the table does not
            // see (see `Vfs::kernel_keeps`).
            let keep = !stat.volatile && stat.kind != Kind::Dir;
            node.kept = keep.then(|| Attrs::of(stat));
            return keep;
        }
        match stat.source.filter(|_| !stat.volatile) {
            Some(source) if is_numbered(ino) && self.knows(ino) => {
                self.clock = self.clock.wrapping_add(1);
                let unit = self.units.entry(folder_of(ino)).or_default();
                if !unit.keeps_any() {
                    unit.kept = 0;
                    unit.source = source;
                } else if unit.source != source {
                    unit.kept |= MIXED;
                }
                unit.kept |= 1 << slot_of(ino);
                unit.used = self.clock;
                true
            }
            _ => {
                self.unkeep(ino);
                false
            }
        }
    }

    /// The kernel keeps nothing of numbered inode `ino` any more.
    fn unkeep(&mut self, ino: u64) {
        if !is_numbered(ino) {
            return;
        }
        let folder = folder_of(ino);
        if let Some(unit) = self.units.get_mut(&folder) {
            unit.kept &= !(1 << slot_of(ino));
            if unit.is_empty() {
                self.units.remove(&folder);
            }
        }
    }

    /// Replaces what the kernel keeps of `ino` (`None`: nothing, until it is served again).
    pub fn set_kept(&mut self, ino: u64, stat: Option<Stat>) {
        if let Some(node) = self.nodes.get_mut(&ino) {
            node.kept = stat.as_ref().map(Attrs::of);
            return;
        }
        match stat {
            Some(stat) => {
                self.keep(ino, &stat);
            }
            None => self.unkeep(ino),
        }
    }

    /// What the kernel keeps of numbered folder `folder` and its fixed entries, derived
    /// from source `before`, is now derived from `after` (a change moved the folder's
    /// source and left them as they were): true when so, or when it keeps nothing of them;
    /// false, changing nothing, when what it keeps came from another source or from
    /// several.
    pub fn carry_source(&mut self, folder: u64, before: u64, after: u64) -> bool {
        match self.units.get_mut(&folder_of(folder)) {
            Some(unit) if unit.keeps_any() => {
                if unit.source() != Some(before) {
                    return false;
                }
                unit.source = after;
                true
            }
            _ => true,
        }
    }

    /// `ino`, if the kernel keeps its attributes.
    pub fn kept_one(&self, ino: u64) -> Option<Kept> {
        if let Some(node) = self.nodes.get(&ino) {
            let kept = node.kept.as_ref()?;
            return Some(Kept {
                ino,
                parent: node.parent,
                name: node.name.clone(),
                stat: Some(kept.stat()),
                source: kept.has_source.then_some(kept.source),
            });
        }
        let unit = self.units.get(&folder_of(ino))?;
        if !is_numbered(ino) || unit.kept & (1 << slot_of(ino)) == 0 {
            return None;
        }
        let (parent, name) = self.numbered_entry(ino)?;
        Some(Kept {
            ino,
            parent,
            name: Arc::from(name),
            stat: None,
            source: unit.source(),
        })
    }

    /// The inodes at and below `ino` whose attributes the kernel keeps, or all of them when
    /// `ino` is `None`.
    pub fn kept_below(&self, ino: Option<u64>) -> Vec<Kept> {
        match ino {
            None => self
                .nodes
                .keys()
                .copied()
                .chain(self.unit_inodes())
                .filter_map(|i| self.kept_one(i))
                .collect(),
            Some(top) => self
                .subtree(top)
                .into_iter()
                .filter_map(|i| self.kept_one(i))
                .collect(),
        }
    }

    /// The numbered inodes (without a node) of every unit: its folder and fixed entries.
    fn unit_inodes(&self) -> impl Iterator<Item = u64> + '_ {
        self.units
            .keys()
            .flat_map(|&f| (0..SLOTS).map(move |s| f + s))
            .filter(|i| !self.nodes.contains_key(i))
    }

    /// `ino` and every inode below it.
    fn subtree(&self, top: u64) -> Vec<u64> {
        let mut found = Vec::new();
        let mut todo = vec![top];
        let numbered_dir = self.numbered_dir();
        let fixed = self
            .numbering
            .as_ref()
            .map_or(0, |n| n.fixed().len() as u64);
        // A table with a loop (a bug) must not loop here: no walk visits more than all nodes
        // and every numbered inode of the folders above them or in units.
        let mut budget = (self.nodes.len() + self.units.len()) * (SLOTS as usize + 1);
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
            if is_numbered(dir) && slot_of(dir) == 0 {
                todo.extend(
                    (1..=fixed)
                        .map(|s| dir + s)
                        .filter(|i| !self.nodes.contains_key(i)),
                );
            }
            if Some(dir) == numbered_dir {
                // Numbered folders the kernel keeps something of: in a unit, or in a node
                // below one (`meta/`'s entries), whose parent is numbered.
                let mut folders: HashSet<u64> = self.units.keys().copied().collect();
                folders.extend(
                    self.by_name
                        .range((NUMBERED, Arc::from(""))..)
                        .map(|((parent, _), _)| folder_of(*parent))
                        .filter(|&f| is_numbered(f)),
                );
                todo.extend(folders.into_iter().filter(|f| !self.nodes.contains_key(f)));
            }
        }
        found
    }

    /// Notes that the kernel may keep the listing of folder `ino` until told.
    pub fn set_listed(&mut self, ino: u64) {
        if let Some(node) = self.nodes.get_mut(&ino) {
            node.listed = true;
        } else if self.numbered_entry(ino).is_some() {
            self.clock = self.clock.wrapping_add(1);
            let unit = self.units.entry(folder_of(ino)).or_default();
            unit.listed |= 1 << slot_of(ino);
            unit.used = self.clock;
        }
    }

    /// The folders among `inos`, and at and below `below` (everywhere when `Some(None)`),
    /// whose listings the kernel may keep; they are no longer noted as kept, since the
    /// caller tells the kernel to drop them.
    pub fn take_listed(&mut self, inos: &[u64], below: Option<Option<u64>>) -> Vec<u64> {
        let mut candidates: Vec<u64> = inos.to_vec();
        match below {
            Some(Some(top)) => candidates.extend(self.subtree(top)),
            Some(None) => {
                candidates.extend(self.nodes.keys().copied());
                let numbered: Vec<u64> = self.unit_inodes().collect();
                candidates.extend(numbered);
            }
            None => {}
        }
        candidates
            .into_iter()
            .filter(|ino| match self.nodes.get_mut(ino) {
                Some(n) => std::mem::take(&mut n.listed),
                None => self.take_unit_listed(*ino),
            })
            .collect()
    }

    /// Whether the kernel kept the listing of numbered folder `ino`; it no longer does.
    fn take_unit_listed(&mut self, ino: u64) -> bool {
        if !is_numbered(ino) {
            return false;
        }
        let folder = folder_of(ino);
        let Some(unit) = self.units.get_mut(&folder) else {
            return false;
        };
        let bit = 1u16 << slot_of(ino);
        let was = unit.listed & bit != 0;
        unit.listed &= !bit;
        if unit.is_empty() {
            self.units.remove(&folder);
        }
        was
    }

    /// Number of inodes held (for tests and memory accounting).
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Number of numbered folders whose kept state is followed.
    pub fn units(&self) -> usize {
        self.units.len()
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
    /// Numbers the entries `0`, `1`, … of `blocks/`, with fixed entries `a.txt`, `b.txt` and
    /// `meta`.
    struct Numbers;

    impl Numbering for Numbers {
        fn dir(&self) -> &'static [&'static str] {
            &["blocks"]
        }
        fn number(&self, name: &str) -> Option<u64> {
            name.parse::<u64>().ok().filter(|n| n.to_string() == name)
        }
        fn name(&self, n: u64) -> Option<String> {
            Some(n.to_string())
        }
        fn fixed(&self) -> &'static [&'static str] {
            &["a.txt", "b.txt", "meta"]
        }
    }

    fn numbered() -> (Inodes, u64) {
        let mut t = Inodes::new(Some(Arc::new(Numbers)));
        let blocks = t.lookup(ROOT, "blocks", None);
        (t, blocks)
    }

    fn stat(source: u64) -> Stat {
        Stat {
            source: Some(source),
            ..Stat::file(3, SystemTime::UNIX_EPOCH, false)
        }
    }

    #[test]
    fn numbered_entries_cost_no_node_and_their_numbers_say_where_they_are() {
        let (mut t, blocks) = numbered();
        let b = t.lookup(blocks, "5", None);
        let a = t.lookup(b, "a.txt", None);
        let meta = t.lookup(b, "meta", None);
        let inside = t.lookup(meta, "0,0,0", None);
        assert!(b >= NUMBERED && a == b + 1 && meta == b + 3);
        assert_eq!(t.len(), 3, "root, blocks, and the node below meta");
        assert_eq!(t.path(a).unwrap(), ["blocks", "5", "a.txt"]);
        assert_eq!(t.path(inside).unwrap(), ["blocks", "5", "meta", "0,0,0"]);
        assert_eq!(t.find(blocks, "5"), Some(b));
        assert_eq!(t.lookup(blocks, "5", None), b, "the same number again");
        t.forget(b, 10);
        t.forget(a, 10);
        assert_eq!(
            t.path(a).unwrap(),
            ["blocks", "5", "a.txt"],
            "forgets change nothing"
        );
        // Not numbered: another name in a numbered folder, one written another way, files on
        // disk, and names anywhere else.
        for (dir, name) in [(b, "error.txt"), (blocks, "05"), (ROOT, "5")] {
            assert!(t.lookup(dir, name, None) < NUMBERED, "{name}");
        }
        assert!(t.lookup(blocks, "6", Some(1)) < NUMBERED);
        assert!(t.named(a) && t.knows(a));
    }

    #[test]
    fn a_numbered_folder_moved_takes_its_fixed_entries_and_leaves_its_name_to_a_new_inode() {
        let (mut t, blocks) = numbered();
        let five = t.lookup(blocks, "5", None);
        let six = t.lookup(blocks, "6", None);
        let a = t.lookup(five, "a.txt", None);
        t.rename(blocks, "5", blocks, "6");
        assert_eq!(t.path(five).unwrap(), ["blocks", "6"]);
        assert_eq!(
            t.path(a).unwrap(),
            ["blocks", "6", "a.txt"],
            "its files follow it"
        );
        assert!(
            t.named(five) && !t.named(six),
            "the folder it replaced has no name"
        );
        assert_eq!(t.find(blocks, "6"), Some(five));
        let new_five = t.lookup(blocks, "5", None);
        assert!(new_five != five && new_five < NUMBERED, "an ordinary inode");
        // Removed: nameless, with the path it had; looked up again, an ordinary inode.
        let seven = t.lookup(blocks, "7", None);
        t.unlink(blocks, "7");
        assert!(!t.named(seven));
        assert_eq!(t.path(seven).unwrap(), ["blocks", "7"]);
        assert!(t.lookup(blocks, "7", None) < NUMBERED);
        t.forget(seven, 1);
        assert_eq!(
            t.path(seven).unwrap(),
            ["blocks", "7"],
            "a number again once forgotten"
        );
    }

    #[test]
    fn a_moved_numbered_folder_keeps_its_node_through_forgets_and_brings_what_was_kept() {
        let (mut t, blocks) = numbered();
        let five = t.lookup(blocks, "5", None);
        let a = t.lookup(five, "a.txt", None);
        assert!(t.keep(a, &stat(9)));
        t.set_listed(five);
        t.rename(blocks, "5", blocks, "6");
        // A forget of lookups made before the move (uncounted) changes nothing while the
        // folder has its name.
        t.forget(five, 7);
        assert_eq!(t.path(five).unwrap(), ["blocks", "6"]);
        assert_eq!(
            t.take_listed(&[five], None),
            [five],
            "its kept listing came along"
        );
        // A file moved aside: its kept attributes are unknown to its node, so a re-check
        // tells the kernel.
        t.rename(five, "a.txt", five, "a.txt~");
        let k = t.kept_one(a).unwrap();
        assert!(!k.agrees(&stat(9)), "{:?}", k.source);
        // Removed, it goes with the kernel's forget.
        t.unlink(blocks, "6");
        t.forget(five, 1);
        assert_eq!(t.path(five).unwrap(), ["blocks", "5"]);
    }

    #[test]
    fn a_recheck_of_everything_reaches_what_is_kept_below_a_numbered_folder() {
        let (mut t, blocks) = numbered();
        let b = t.lookup(blocks, "5", None);
        let meta = t.lookup(b, "meta", None);
        let node = t.lookup(meta, "0,0,0", None);
        let field = t.lookup(node, "text", None);
        assert!(t.keep(field, &Stat::file(3, SystemTime::UNIX_EPOCH, false)));
        assert_eq!(t.units(), 0, "nothing kept of the folder's own entries");
        for top in [ROOT, blocks] {
            let found: Vec<u64> = t.kept_below(Some(top)).iter().map(|k| k.ino).collect();
            assert_eq!(found, [field], "from {top}");
        }
    }

    #[test]
    fn what_the_kernel_keeps_of_numbered_files_is_followed_per_folder_by_source() {
        let (mut t, blocks) = numbered();
        let b = t.lookup(blocks, "5", None);
        let (a, bt) = (t.lookup(b, "a.txt", None), t.lookup(b, "b.txt", None));
        assert!(
            !t.keep(b, &Stat::dir(SystemTime::UNIX_EPOCH, false)),
            "folders: no"
        );
        assert!(
            !t.keep(a, &Stat::file(3, SystemTime::UNIX_EPOCH, false)),
            "no source: no"
        );
        assert!(t.keep(a, &stat(9)) && t.keep(bt, &stat(9)));
        assert_eq!(t.units(), 1);
        let k = t.kept_one(a).unwrap();
        assert!(k.stat.is_none() && k.source == Some(9) && &*k.name == "a.txt");
        assert!(k.agrees(&stat(9)) && !k.agrees(&stat(8)));
        let mut below: Vec<u64> = t.kept_below(Some(b)).iter().map(|k| k.ino).collect();
        below.sort();
        assert_eq!(below, [a, bt]);
        assert_eq!(t.kept_below(Some(blocks)).len(), 2, "found from above too");
        assert_eq!(t.kept_below(None).len(), 2);
        // Served from another source (another program's change in between): no source
        // stands for both.
        t.keep(bt, &stat(10));
        assert_eq!(t.kept_one(a).unwrap().source, None);
        t.set_kept(a, None);
        t.set_kept(bt, None);
        assert_eq!(t.units(), 0, "nothing kept, nothing followed");
        t.set_listed(b);
        assert_eq!(t.take_listed(&[], Some(Some(blocks))), [b]);
        assert!(t.take_listed(&[], Some(None)).is_empty());
    }

    #[test]
    fn a_numbered_folder_and_its_fixed_folders_are_followed_like_its_files() {
        let (mut t, blocks) = numbered();
        let b = t.lookup(blocks, "5", None);
        let (a, meta) = (t.lookup(b, "a.txt", None), t.lookup(b, "meta", None));
        let dir = |source| Stat {
            source: Some(source),
            ..Stat::dir(SystemTime::UNIX_EPOCH, false)
        };
        assert!(t.keep(b, &dir(9)) && t.keep(meta, &dir(9)) && t.keep(a, &stat(9)));
        assert_eq!((t.units(), t.len()), (1, 2), "no node for them");
        let k = t.kept_one(b).unwrap();
        assert!(k.stat.is_none() && k.source == Some(9));
        assert_eq!((k.parent, &*k.name), (blocks, "5"));
        let mut below: Vec<u64> = t.kept_below(Some(blocks)).iter().map(|k| k.ino).collect();
        below.sort();
        assert_eq!(below, [b, a, meta]);
        // The folder's own bit is not the one for "from different sources".
        t.set_kept(a, None);
        t.set_kept(meta, None);
        assert_eq!(t.kept_one(b).unwrap().source, Some(9));
        t.keep(meta, &dir(10));
        assert_eq!(t.kept_one(b).unwrap().source, None, "now mixed");
        // Shed, the folder's attributes go with its name.
        let shed = t.shed_units(0);
        assert_eq!(shed.entries, [(blocks, "5".to_string())]);
        assert!(shed.inodes.contains(&b) && shed.inodes.contains(&meta));
        // Moved, the folder has a node, and a folder with a node is not kept.
        assert!(t.keep(b, &dir(9)));
        t.rename(blocks, "5", blocks, "6");
        assert!(!t.keep(b, &dir(9)));
        assert!(t.kept_one(b).is_none());
    }

    #[test]
    fn the_oldest_numbered_folders_are_shed_with_what_the_kernel_keeps_of_them() {
        let (mut t, blocks) = numbered();
        for i in 0..8 {
            let b = t.lookup(blocks, &i.to_string(), None);
            let a = t.lookup(b, "a.txt", None);
            t.keep(a, &stat(i));
        }
        let first = t.lookup(blocks, "0", None);
        assert!(t.shed_units(8).inodes.is_empty());
        let shed = t.shed_units(4);
        // 8 → 3: folders 1 to 5 (0 was looked up again last), their names and their kept
        // files' attributes.
        let mut names: Vec<String> = shed.entries.iter().map(|(_, n)| n.clone()).collect();
        names.sort();
        assert_eq!(names, ["1", "2", "3", "4", "5"]);
        assert_eq!(shed.inodes.len(), 5);
        assert_eq!(t.units(), 3);
        assert!(t.kept_one(first + 1).is_some());
    }
}
