//! A TEVD disk (v2, old v3, current v3) as a directory tree: list, read, write, create,
//! remove and rename, staged in memory and committed by one crash-safe rewrite.
//!
//! The tree is what the directory entries list, starting at the root (ID 0); entries no
//! directory lists (tsvm's boot sector, ID 1, is its own parent) are kept untouched but not
//! shown. Listings of a hostile or broken disk can form cycles (a directory listing itself
//! or an ancestor) or repeat entries, which would make an endless tree that `find` or
//! `cp -r` never leave: each directory is shown only in the first listing that reaches it
//! from the root (breadth first), and a listing shows each ID and each name once (a name's
//! first entry, the one a lookup finds). What is stored is kept as it is. Names are shown escaped with `crate::names` so any stored name is a valid file
//! name. A commit writes the header (fresh disk CRC), every entry in its old order (new
//! ones last; unchanged ones copied byte for byte) and the footer into a temporary file
//! renamed over the disk, so a crash leaves the old or the new disk; with no staged change
//! nothing is written.
//!
//! A TEVD disk is only ever rewritten whole, so any damage is found before anything is
//! staged: opening a disk for writing verifies every entry CRC, the disk CRC and that every
//! ID a directory lists has an entry. A damaged disk (the scan itself refuses bytes that are
//! not entries) is never written: every change fails with `EROFS` and says why.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::hash::{BuildHasher, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::bytes::{read_vec, ReadAt};
use crate::error::{Error, Result};
use crate::names::{escape, unescape};
use crate::storekit::replace::write_atomic_with;
use crate::tvda::codec::tvda::disk_crc;
use crate::tvda::store::{open_disk, Stamp, NEW_DISK_MODE};

use crate::tvda::codec::tevd::{
    decode_dir, dir_content, file_content, scan, tevd_entry_crc, Layout, TevdEntryHeader,
    TevdHeader, TevdKind, NAME_LEN,
};

/// ID of the root directory.
pub const TEVD_ROOT: i32 = 0;

/// What an entry is, as the tree shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    /// Entry ID.
    pub id: i32,
    /// Parent ID as stored.
    pub parent: i32,
    /// Entry kind.
    pub kind: TevdKind,
    /// The name, escaped into a valid file name.
    pub name: String,
    /// File size in bytes (uncompressed for compressed files), or the child count.
    pub size: u64,
    /// Creation time, Unix seconds.
    pub ctime: u64,
    /// Modification time, Unix seconds.
    pub mtime: u64,
}

/// What `TevdDisk::create_node` makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NewNode {
    /// An empty file.
    File,
    /// An empty directory.
    Directory,
}

/// What `TevdDisk::check` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TevdCheck {
    /// Entries whose stored CRC does not match their content.
    pub bad_entry_crcs: Vec<i32>,
    /// Whether the header's disk CRC matches the entries.
    pub disk_crc_ok: bool,
    /// Directory listings naming IDs that have no entry.
    pub dangling: Vec<String>,
}

impl TevdCheck {
    /// Why the disk must not be written, if it must not.
    pub fn damage(&self) -> Option<String> {
        if let [id, ..] = self.bad_entry_crcs.as_slice() {
            return Some(format!(
                "{} entries fail their CRC (first: {id})",
                self.bad_entry_crcs.len()
            ));
        }
        if let Some(d) = self.dangling.first() {
            return Some(d.clone());
        }
        (!self.disk_crc_ok).then(|| "the disk CRC does not match the entries".to_string())
    }
}

#[derive(Debug, Clone)]
enum Body {
    /// Serialized content still in the disk file at this offset and length.
    Stored(u64, u64),
    /// Serialized content in memory.
    Owned(Vec<u8>),
}

#[derive(Debug, Clone)]
struct Node {
    header: TevdEntryHeader,
    body: Body,
    /// Children of a directory, in listing order.
    children: Vec<i32>,
    /// The original entry bytes (offset, length) while nothing about the entry changed.
    original: Option<(u64, u64)>,
}

impl Node {
    fn touch(&mut self, now: u64) {
        self.header.mtime = now;
        self.original = None;
    }

    fn set_content(&mut self, content: Vec<u8>, now: u64) {
        self.header.crc = tevd_entry_crc(&content);
        self.body = Body::Owned(content);
        self.touch(now);
    }
}

/// An open TEVD disk.
#[derive(Debug)]
pub struct TevdDisk {
    path: PathBuf,
    file: File,
    writable: bool,
    header: TevdHeader,
    footer: Vec<u8>,
    nodes: Vec<Node>,
    index: HashMap<i32, usize>,
    /// The directory each shown directory is listed in (its home); see the module doc.
    homes: HashMap<i32, i32>,
    pending: bool,
    stamp: Stamp,
    /// Why the disk must not be written (found when it was opened for writing).
    damage: Option<String>,
}

impl TevdDisk {
    /// Opens a disk: scans every entry header and reads the directory listings.
    pub fn open(path: &Path, writable: bool) -> Result<TevdDisk> {
        let (file, stamp) = open_disk(path, writable, false)?;
        let found = scan(&file, stamp.len).map_err(|e| e.context(path.display()))?;
        let mut nodes: Vec<Node> = Vec::with_capacity(found.records.len());
        let mut index = HashMap::new();
        for r in found.records {
            let children = if r.header.kind == TevdKind::Directory {
                decode_dir(&read_vec(&file, r.content_offset(), r.content_len)?)?
            } else {
                Vec::new()
            };
            let node = Node {
                body: Body::Stored(r.content_offset(), r.content_len),
                original: Some((r.offset, r.end() - r.offset)),
                children,
                header: r.header,
            };
            // A repeated ID: the last occurrence wins, in the place of the first.
            match index.get(&node.header.id) {
                Some(&i) => {
                    if let Some(slot) = nodes.get_mut(i) {
                        *slot = node;
                    }
                }
                None => {
                    index.insert(node.header.id, nodes.len());
                    nodes.push(node);
                }
            }
        }
        let mut disk = TevdDisk {
            path: path.to_path_buf(),
            file,
            writable,
            header: found.header,
            footer: found.footer,
            nodes,
            index,
            homes: HashMap::new(),
            pending: false,
            stamp,
            damage: None,
        };
        disk.node(TEVD_ROOT)
            .ok()
            .filter(|n| n.header.kind == TevdKind::Directory)
            .ok_or_else(|| Error::corrupt(format!("{}: no root directory", path.display())))?;
        disk.place();
        if writable {
            disk.damage = disk.check()?.damage();
            if let Some(why) = &disk.damage {
                log::error!(
                    "{}: damaged ({why}); nothing will be written to it",
                    path.display()
                );
            }
        }
        Ok(disk)
    }

    /// Writes a new, empty current-v3 disk at `path` and opens it.
    pub fn create(path: &Path, name: &str, capacity: u64, now: u64) -> Result<TevdDisk> {
        let mut header = TevdHeader::new_v3(name, capacity)?;
        let content = dir_content(&[])?;
        let root = TevdEntryHeader {
            id: TEVD_ROOT,
            parent: TEVD_ROOT,
            kind: TevdKind::Directory,
            name: b"(root)".to_vec(),
            ctime: now,
            mtime: now,
            crc: tevd_entry_crc(&content),
        };
        header.set_disk_crc(disk_crc([root.crc]));
        let mut bytes = header.bytes().to_vec();
        root.encode(&mut bytes)?;
        bytes.extend_from_slice(&content);
        write_atomic_with(path, NEW_DISK_MODE, |out| Ok(out.write_all(&bytes)?))?;
        TevdDisk::open(path, true)
    }

    /// The header.
    pub fn header(&self) -> &TevdHeader {
        &self.header
    }

    /// The layout (v2, old v3, current v3).
    pub fn layout(&self) -> Layout {
        self.header.layout()
    }

    fn node(&self, id: i32) -> Result<&Node> {
        self.index
            .get(&id)
            .and_then(|&i| self.nodes.get(i))
            .ok_or_else(|| Error::not_found(format!("no entry {id}")))
    }

    fn node_mut(&mut self, id: i32) -> Result<&mut Node> {
        self.index
            .get(&id)
            .and_then(|&i| self.nodes.get_mut(i))
            .ok_or_else(|| Error::not_found(format!("no entry {id}")))
    }

    /// Every entry ID in file order, unreachable ones included.
    pub fn ids(&self) -> Vec<i32> {
        self.nodes.iter().map(|n| n.header.id).collect()
    }

    /// What entry `id` is.
    pub fn info(&self, id: i32) -> Result<NodeInfo> {
        let n = self.node(id)?;
        let size = match (&n.header.kind, &n.body) {
            (TevdKind::Directory, _) => n.children.len() as u64,
            (TevdKind::File, Body::Stored(_, len)) => len.saturating_sub(6),
            (TevdKind::File, Body::Owned(c)) => (c.len() as u64).saturating_sub(6),
            (TevdKind::Symlink, _) => 4,
            (TevdKind::Compressed, Body::Stored(off, _)) => {
                let mut sizes = [0u8; 12];
                ReadAt::read_exact_at(&self.file, &mut sizes, *off)?;
                crate::bytes::Reader::new(sizes.get(6..).unwrap_or(&[])).u48("file size")?
            }
            (TevdKind::Compressed, Body::Owned(_)) => 0,
        };
        Ok(NodeInfo {
            id,
            parent: n.header.parent,
            kind: n.header.kind,
            name: escape(&n.header.name),
            size,
            ctime: n.header.ctime,
            mtime: n.header.mtime,
        })
    }

    /// Finds each directory's home: the first listing reaching it, breadth first from the
    /// root. Called whenever listings change.
    fn place(&mut self) {
        let mut homes = HashMap::new();
        let mut queue = std::collections::VecDeque::from([TEVD_ROOT]);
        while let Some(d) = queue.pop_front() {
            for &c in self.node(d).map(|n| n.children.as_slice()).unwrap_or(&[]) {
                let is_dir = self
                    .node(c)
                    .is_ok_and(|n| n.header.kind == TevdKind::Directory);
                if is_dir && c != TEVD_ROOT && !homes.contains_key(&c) {
                    homes.insert(c, d);
                    queue.push_back(c);
                }
            }
        }
        self.homes = homes;
    }

    /// The children directory `dir` shows, in listing order: entries that exist, each ID and
    /// each name once, directories only in their home.
    fn shown(&self, dir: i32) -> Result<Vec<&Node>> {
        let d = self.node(dir)?;
        if d.header.kind != TevdKind::Directory {
            return Err(Error::not_dir(format!("entry {dir} is not a directory")));
        }
        let (mut ids, mut names) = (HashSet::new(), HashSet::new());
        Ok(d.children
            .iter()
            .filter_map(|c| self.node(*c).ok())
            .filter(|n| {
                n.header.kind != TevdKind::Directory || self.homes.get(&n.header.id) == Some(&dir)
            })
            .filter(|n| ids.insert(n.header.id) && names.insert(n.header.name.as_slice()))
            .collect())
    }

    /// The entries directory `dir` shows, in listing order (see the module doc).
    pub fn list(&self, dir: i32) -> Result<Vec<NodeInfo>> {
        Ok(self
            .shown(dir)?
            .iter()
            .filter_map(|n| self.info(n.header.id).ok())
            .collect())
    }

    /// The entry named `name` (escaped form) in directory `dir`.
    pub fn lookup(&self, dir: i32, name: &str) -> Result<i32> {
        let raw = unescape(name)?;
        self.shown(dir)?
            .iter()
            .find(|n| n.header.name == raw)
            .map(|n| n.header.id)
            .ok_or_else(|| Error::not_found(format!("no {name} in directory {dir}")))
    }

    /// The entry at a `/`-separated path from the root ("" is the root).
    pub fn resolve(&self, path: &str) -> Result<i32> {
        path.split('/')
            .filter(|p| !p.is_empty())
            .try_fold(TEVD_ROOT, |dir, name| self.lookup(dir, name))
    }

    /// The bytes of file `id`.
    pub fn read(&self, id: i32) -> Result<Vec<u8>> {
        let n = self.node(id)?;
        match n.header.kind {
            TevdKind::File => {}
            TevdKind::Compressed => {
                return Err(Error::unsupported(
                    "compressed TEVD files (type 0x11) are not supported",
                ))
            }
            _ => return Err(Error::invalid(format!("entry {id} is not a file"))),
        }
        match &n.body {
            Body::Stored(off, len) => read_vec(&self.file, off + 6, len.saturating_sub(6)),
            Body::Owned(c) => Ok(c.get(6..).unwrap_or(&[]).to_vec()),
        }
    }

    /// The target ID of symlink `id`.
    pub fn symlink_target(&self, id: i32) -> Result<i32> {
        let n = self.node(id)?;
        if n.header.kind != TevdKind::Symlink {
            return Err(Error::invalid(format!("entry {id} is not a symlink")));
        }
        let content = match &n.body {
            Body::Stored(off, len) => read_vec(&self.file, *off, *len)?,
            Body::Owned(c) => c.clone(),
        };
        crate::bytes::Reader::new(&content).i32("symlink target")
    }

    /// Why the disk must not be written, when it was opened for writing and is damaged.
    pub fn damage(&self) -> Option<&str> {
        self.damage.as_deref()
    }

    fn check_writable(&self) -> Result<()> {
        if !self.writable {
            return Err(Error::read_only(format!(
                "{} is open read-only",
                self.path.display()
            )));
        }
        if let Some(why) = &self.damage {
            return Err(Error::read_only(format!(
                "{} is damaged ({why}); it is left as it is: run `worldfs check`",
                self.path.display()
            )));
        }
        if self.header.read_only() {
            return Err(Error::read_only(format!(
                "{} is write-protected",
                self.path.display()
            )));
        }
        Ok(())
    }

    /// Stages new contents for file `id`.
    pub fn write(&mut self, id: i32, data: &[u8], now: u64) -> Result<()> {
        self.check_writable()?;
        if self.read(id)? == data {
            return Ok(());
        }
        let content = file_content(data)?;
        self.node_mut(id)?.set_content(content, now);
        self.pending = true;
        Ok(())
    }

    fn valid_name(&self, dir: i32, name: &str) -> Result<Vec<u8>> {
        let raw = unescape(name)?;
        if raw.is_empty() || raw.len() > NAME_LEN || raw.contains(&0) {
            return Err(Error::invalid(format!(
                "{name:?}: a TEVD name has 1 to 256 bytes and no NUL"
            )));
        }
        if self.node(dir)?.header.kind != TevdKind::Directory {
            return Err(Error::not_dir(format!("entry {dir} is not a directory")));
        }
        Ok(raw)
    }

    fn new_id(&self) -> i32 {
        let state = std::collections::hash_map::RandomState::new();
        let mut salt = self.nodes.len() as u64;
        loop {
            let mut h = state.build_hasher();
            h.write_u64(salt);
            let id = h.finish() as i32;
            if !matches!(id, 0 | 1 | -16843010) && !self.index.contains_key(&id) {
                return id;
            }
            salt = salt.wrapping_add(1);
        }
    }

    fn set_children(&mut self, dir: i32, children: Vec<i32>, now: u64) -> Result<()> {
        let content = dir_content(&children)?;
        let d = self.node_mut(dir)?;
        d.children = children;
        d.set_content(content, now);
        Ok(())
    }

    /// Stages a new empty file or directory `name` in `dir`; returns its ID.
    pub fn create_node(&mut self, dir: i32, name: &str, kind: NewNode, now: u64) -> Result<i32> {
        self.check_writable()?;
        let raw = self.valid_name(dir, name)?;
        if self.lookup(dir, name).is_ok() {
            return Err(Error::exists(format!("{name} exists")));
        }
        let id = self.new_id();
        let (kind, content) = match kind {
            NewNode::File => (TevdKind::File, file_content(&[])?),
            NewNode::Directory => (TevdKind::Directory, dir_content(&[])?),
        };
        let mut children = self.node(dir)?.children.clone();
        children.push(id);
        self.set_children(dir, children, now)?;
        self.index.insert(id, self.nodes.len());
        self.nodes.push(Node {
            header: TevdEntryHeader {
                id,
                parent: dir,
                kind,
                name: raw,
                ctime: now,
                mtime: now,
                crc: tevd_entry_crc(&content),
            },
            body: Body::Owned(content),
            children: Vec::new(),
            original: None,
        });
        self.place();
        self.pending = true;
        Ok(id)
    }

    fn unlink(&mut self, id: i32, now: u64) -> Result<()> {
        let dirs: Vec<i32> = self
            .nodes
            .iter()
            .filter(|n| n.children.contains(&id))
            .map(|n| n.header.id)
            .collect();
        for dir in dirs {
            let children = self
                .node(dir)?
                .children
                .iter()
                .copied()
                .filter(|&c| c != id)
                .collect();
            self.set_children(dir, children, now)?;
        }
        Ok(())
    }

    /// Stages removing `id` (a file, symlink or empty directory).
    pub fn remove(&mut self, id: i32, now: u64) -> Result<()> {
        self.check_writable()?;
        if id == TEVD_ROOT {
            return Err(Error::not_permitted("the root directory cannot be removed"));
        }
        if self.node(id)?.header.kind == TevdKind::Directory && !self.shown(id)?.is_empty() {
            return Err(Error::not_empty(format!("directory {id} is not empty")));
        }
        self.unlink(id, now)?;
        self.nodes.retain(|n| n.header.id != id);
        self.index = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.header.id, i))
            .collect();
        self.place();
        self.pending = true;
        Ok(())
    }

    /// Stages moving `id` to `name` in `dir`; an existing file or symlink there is replaced.
    pub fn rename(&mut self, id: i32, dir: i32, name: &str, now: u64) -> Result<()> {
        self.check_writable()?;
        if id == TEVD_ROOT {
            return Err(Error::not_permitted("the root directory cannot be renamed"));
        }
        let raw = self.valid_name(dir, name)?;
        // Up the shown tree (homes hold no cycle), not the stored parent fields, which a
        // broken disk can get wrong.
        let mut up = Some(dir);
        while let Some(d) = up {
            if d == id {
                return Err(Error::invalid("cannot move a directory into itself"));
            }
            up = self.homes.get(&d).copied();
        }
        if let Ok(existing) = self.lookup(dir, name) {
            if existing == id {
                return Ok(());
            }
            if self.node(existing)?.header.kind == TevdKind::Directory {
                return Err(Error::exists(format!("{name} is a directory")));
            }
            self.remove(existing, now)?;
        }
        self.unlink(id, now)?;
        let mut children = self.node(dir)?.children.clone();
        children.push(id);
        self.set_children(dir, children, now)?;
        let n = self.node_mut(id)?;
        n.header.name = raw;
        n.header.parent = dir;
        n.original = None;
        self.place();
        self.pending = true;
        Ok(())
    }

    /// Whether changes are staged.
    pub fn has_pending(&self) -> bool {
        self.pending
    }

    /// Drops the staged changes by re-reading the disk.
    pub fn rollback(&mut self) -> Result<()> {
        *self = TevdDisk::open(&self.path, self.writable)?;
        Ok(())
    }

    /// Whether the file changed since it was opened or committed.
    pub fn changed_on_disk(&self) -> Result<bool> {
        Ok(Stamp::of_path(&self.path)? != self.stamp)
    }

    /// Writes the staged changes as one crash-safe rewrite.
    pub fn commit(&mut self) -> Result<()> {
        if !self.pending {
            return Ok(());
        }
        self.check_writable()?;
        if self.changed_on_disk()? {
            return Err(Error::new(
                libc::EBUSY,
                format!("{} changed on disk since it was read", self.path.display()),
            ));
        }
        let mut header = self.header.clone();
        header.set_disk_crc(disk_crc(self.nodes.iter().map(|n| n.header.crc)));
        let size = header.bytes().len() as u64
            + self
                .nodes
                .iter()
                .map(|n| match (&n.original, &n.body) {
                    (Some((_, len)), _) => *len,
                    (None, Body::Stored(_, len)) => 281 + len,
                    (None, Body::Owned(c)) => 281 + c.len() as u64,
                })
                .sum::<u64>()
            + self.footer.len() as u64;
        let capacity = header.capacity();
        if capacity > 0 && size > capacity {
            return Err(Error::new(
                libc::ENOSPC,
                format!(
                    "{} would grow to {size} bytes, past its capacity of {capacity}",
                    self.path.display()
                ),
            ));
        }
        let (file, nodes, footer) = (&self.file, &self.nodes, &self.footer);
        write_atomic_with(&self.path, NEW_DISK_MODE, |out| {
            out.write_all(header.bytes())?;
            for n in nodes {
                let copy = |out: &mut dyn Write, off: u64, len: u64| -> Result<()> {
                    Ok(out.write_all(&read_vec(file, off, len)?)?)
                };
                match (&n.original, &n.body) {
                    (Some((off, len)), _) => copy(out, *off, *len)?,
                    (None, body) => {
                        let mut head = Vec::with_capacity(281);
                        n.header.encode(&mut head)?;
                        out.write_all(&head)?;
                        match body {
                            Body::Stored(off, len) => copy(out, *off, *len)?,
                            Body::Owned(c) => out.write_all(c)?,
                        }
                    }
                }
            }
            out.write_all(footer)?;
            Ok(())
        })
        .map_err(|e| e.context(self.path.display()))?;
        *self = TevdDisk::open(&self.path, self.writable)?;
        Ok(())
    }

    /// Verifies every entry CRC and the disk CRC.
    pub fn check(&self) -> Result<TevdCheck> {
        let mut bad = Vec::new();
        for n in &self.nodes {
            let content = match &n.body {
                Body::Stored(off, len) => read_vec(&self.file, *off, *len)?,
                Body::Owned(c) => c.clone(),
            };
            if tevd_entry_crc(&content) != n.header.crc {
                bad.push(n.header.id);
            }
        }
        let mut dangling = Vec::new();
        for n in &self.nodes {
            for c in n.children.iter().filter(|c| !self.index.contains_key(c)) {
                dangling.push(format!(
                    "directory {} lists entry {c}, which the disk does not hold",
                    n.header.id
                ));
            }
        }
        Ok(TevdCheck {
            bad_entry_crcs: bad,
            disk_crc_ok: self.header.disk_crc()
                == disk_crc(self.nodes.iter().map(|n| n.header.crc)),
            dangling,
        })
    }
}
