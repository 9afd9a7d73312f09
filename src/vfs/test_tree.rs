//! Tests only: a small [`Tree`] of files in memory that the core's unit tests run on.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::{lock, Error, Result};
use crate::vfs::core::Vfs;
pub use crate::vfs::inodes::ROOT;
use crate::vfs::paths::OpenMode;
use crate::vfs::race_hook::RaceHook;
use crate::vfs::tree::{
    stream, Changed, Entry, Kind, NewFile, Numbering, Pin, Removal, Stat, Tree,
};

/// Folders of files, keyed by their path (`d/f`): `d` exists, `mkdir` makes a folder
/// holding a fixed file `fixed` (like a block's views). A file's content must start with
/// `ok` to be committed; a file named `auth` has mode 0600. `links` holds symbolic
/// links (key and target).
#[derive(Default)]
pub struct Files {
    pub files: Mutex<HashMap<String, Vec<u8>>>,
    pub links: Mutex<HashMap<String, Vec<u8>>>,
    pub dirs: Mutex<Vec<String>>,
    pub writes: Mutex<Vec<Vec<u8>>>,
    pub mtimes: Mutex<HashMap<String, SystemTime>>,
    /// Whether the tree refuses changes (a TVDA disk turns read-only at a refused commit).
    pub read_only: AtomicBool,
    /// What [`Tree::underneath`] says: tests bump it to stand for another program's change.
    pub underneath: AtomicU64,
    /// Whether stats of files in `d` carry a [`Stat::source`]: a hash of every file in `d`
    /// (`d` is one object, as [`Tree::change_scope`] says).
    pub sources: AtomicBool,
    /// How many times [`Tree::stat`] was called.
    pub stats: AtomicU64,
    /// How many times [`Tree::read`] was called.
    pub reads: AtomicU64,
    /// How many times [`Tree::set_mtime`] was called.
    pub times_set: AtomicU64,
    /// The text [`Tree::read`] last gave of each file, given again while the file holds the
    /// same bytes (as the trees' caches of rendered text do).
    pub shown: Mutex<HashMap<String, Arc<Vec<u8>>>>,
    /// Whether listings of folders other than `e` are kept ([`Tree::listing_kept`]).
    pub kept_listings: AtomicBool,
    /// A step [`Tree::read`] runs first (another program's change racing a read).
    pub on_read: RaceHook<Files>,
    /// What [`Tree::source_files`] names, by top-level name (`None`: the root).
    pub on_disk: HashMap<Option<String>, Vec<std::path::PathBuf>>,
    /// Whether the tree numbers `d` and its files `f`, `g`, `h` ([`Tree::numbering`]).
    pub numbered: AtomicBool,
    /// What [`Tree::take_changed_objects`] names after a change in `all/`, which changes
    /// the whole tree (`None`: not known); those with entries, once.
    pub whole: Mutex<Option<Vec<Changed>>>,
}

/// Numbers `d` (the root's one numbered entry) and `f`, `g`, `h` in it.
struct DNumbers;

impl Numbering for DNumbers {
    fn dir(&self) -> &'static [&'static str] {
        &[]
    }
    fn number(&self, name: &str) -> Option<u64> {
        (name == "d").then_some(7)
    }
    fn name(&self, n: u64) -> Option<String> {
        (n == 7).then(|| "d".to_string())
    }
    fn fixed(&self) -> &'static [&'static str] {
        &["f", "g", "h"]
    }
}

impl Files {
    fn is_dir(&self, path: &[String]) -> Result<bool> {
        let key = path.join("/");
        Ok(path.is_empty() || key == "d" || lock(&self.dirs)?.contains(&key))
    }

    fn file_key(&self, path: &[String]) -> Result<String> {
        match path.split_last() {
            Some((_, dir)) if self.is_dir(dir)? => Ok(path.join("/")),
            _ => Err(Error::not_found("no such folder")),
        }
    }
}

impl Files {
    /// Renames a folder `mkdir` made, with what it holds, over nothing or over a made folder
    /// holding only its fixed file (else `ENOTEMPTY`); whether `from` is such a folder.
    fn rename_made_folder(&self, from: &[String], to: &[String]) -> Result<bool> {
        let (fk, tk) = (from.join("/"), to.join("/"));
        let mut dirs = lock(&self.dirs)?;
        let Some(at) = dirs.iter().position(|d| *d == fk) else {
            return Ok(false);
        };
        if tk.starts_with(&format!("{fk}/")) {
            return Err(Error::invalid("a folder moved into itself"));
        }
        let mut files = lock(&self.files)?;
        let (from_prefix, to_prefix) = (format!("{fk}/"), format!("{tk}/"));
        if let Some(over) = dirs.iter().position(|d| *d == tk) {
            let fixed = format!("{tk}/fixed");
            if files
                .keys()
                .any(|k| k.starts_with(&to_prefix) && *k != fixed)
            {
                return Err(Error::not_empty("holds files"));
            }
            files.remove(&fixed);
            dirs.remove(over);
        }
        let at = dirs.iter().position(|d| *d == fk).unwrap_or(at);
        dirs[at] = tk.clone();
        let moved: Vec<String> = files
            .keys()
            .filter(|k| k.starts_with(&from_prefix))
            .cloned()
            .collect();
        for k in moved {
            if let Some(v) = files.remove(&k) {
                files.insert(format!("{to_prefix}{}", &k[from_prefix.len()..]), v);
            }
        }
        Ok(true)
    }
}

impl Tree for Files {
    fn source_files(&self, top: Option<&str>) -> &[std::path::PathBuf] {
        self.on_disk
            .get(&top.map(str::to_string))
            .map_or(&[], Vec::as_slice)
    }
    fn stat(&self, path: &[String]) -> Result<Stat> {
        self.stats.fetch_add(1, Ordering::Relaxed);
        if self.is_dir(path)? {
            // `d` is one object: its stat is made of it, as a block folder's is.
            return Ok(Stat {
                source: self.source_of(path).flatten(),
                ..Stat::dir(UNIX_EPOCH, false)
            });
        }
        let key = self.file_key(path)?;
        if let Some(target) = lock(&self.links)?.get(&key) {
            return Ok(Stat::symlink(target.len() as u64, UNIX_EPOCH));
        }
        let source = if key.starts_with("d/") {
            self.source_of(&["d".to_string()]).flatten()
        } else {
            None
        };
        let files = lock(&self.files)?;
        let data = files
            .get(&key)
            .ok_or_else(|| Error::not_found("no such file"))?;
        Ok(Stat {
            kind: Kind::File,
            size: data.len() as u64,
            mtime: lock(&self.mtimes)?.get(&key).copied().unwrap_or(UNIX_EPOCH),
            perm: if key.ends_with("/auth") { 0o600 } else { 0o644 },
            volatile: false,
            source,
            owner: None,
            file: None,
        })
    }
    fn list(&self, dir: &[String], after: u64, sink: &mut dyn FnMut(Entry) -> bool) -> Result<()> {
        let prefix = format!("{}/", dir.join("/"));
        let mut names: Vec<String> = lock(&self.files)?
            .keys()
            .filter_map(|k| k.strip_prefix(&prefix))
            .filter(|n| !n.contains('/'))
            .map(str::to_string)
            .collect();
        names.sort();
        let mut entries = Vec::new();
        for (i, name) in names.into_iter().enumerate() {
            let mut path = dir.to_vec();
            path.push(name.clone());
            let stat = self.stat(&path)?;
            entries.push(Entry {
                name,
                cookie: i as u64 + 1,
                stat,
            });
        }
        stream(entries, after, sink);
        Ok(())
    }
    fn listing_kept(&self, dir: &[String]) -> bool {
        self.kept_listings.load(Ordering::Relaxed) && dir.first().is_some_and(|d| d != "e")
    }
    fn read(&self, path: &[String]) -> Result<Arc<Vec<u8>>> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.on_read.run(self);
        let key = self.file_key(path)?;
        let files = lock(&self.files)?;
        let data = files
            .get(&key)
            .ok_or_else(|| Error::not_found("no such file"))?;
        let mut shown = lock(&self.shown)?;
        match shown.get(&key) {
            Some(text) if **text == *data => Ok(text.clone()),
            _ => {
                let text = Arc::new(data.clone());
                shown.insert(key, text.clone());
                Ok(text)
            }
        }
    }
    fn write(&self, path: &[String], data: &[u8]) -> Result<()> {
        let key = self.file_key(path)?;
        if !data.starts_with(b"ok") {
            return Err(Error::at(1, 1, "expected `ok`"));
        }
        lock(&self.writes)?.push(data.to_vec());
        lock(&self.files)?.insert(key, data.to_vec());
        Ok(())
    }
    fn check(&self, path: &[String], data: &[u8]) -> Result<()> {
        self.file_key(path)?;
        if !data.starts_with(b"ok") {
            return Err(Error::at(1, 1, "expected `ok`"));
        }
        Ok(())
    }
    fn classify(&self, _: &[String], name: &str) -> Result<NewFile> {
        Ok(if crate::storekit::scratch::looks_like_scratch(name) {
            NewFile::Scratch
        } else {
            NewFile::Object
        })
    }
    fn check_remove(&self, path: &[String]) -> Result<Removal> {
        match self.stat(path)?.kind {
            Kind::Dir => Err(Error::is_dir("is a directory")),
            _ => Ok(Removal::Checked),
        }
    }
    fn remove(&self, path: &[String]) -> Result<()> {
        let key = self.file_key(path)?;
        if lock(&self.links)?.remove(&key).is_none() {
            lock(&self.files)?.remove(&key);
        }
        Ok(())
    }
    fn mkdir(&self, path: &[String]) -> Result<()> {
        let key = path.join("/");
        lock(&self.dirs)?.push(key.clone());
        lock(&self.files)?.insert(format!("{key}/fixed"), b"ok fixed".to_vec());
        Ok(())
    }
    /// Removes a folder `mkdir` made, with its fixed file (as a block's folder goes with its
    /// views); one holding other files is not empty. `d` stays: its removal removes nothing.
    fn rmdir(&self, path: &[String]) -> Result<()> {
        let key = path.join("/");
        if key == "d" {
            return Ok(());
        }
        let mut dirs = lock(&self.dirs)?;
        let at = dirs
            .iter()
            .position(|d| *d == key)
            .ok_or_else(|| Error::not_found("no such folder"))?;
        let mut files = lock(&self.files)?;
        let (prefix, fixed) = (format!("{key}/"), format!("{key}/fixed"));
        if files.keys().any(|k| k.starts_with(&prefix) && *k != fixed) {
            return Err(Error::not_empty("holds files"));
        }
        files.remove(&fixed);
        dirs.remove(at);
        Ok(())
    }
    fn rename(&self, from: &[String], to: &[String]) -> Result<()> {
        if from.first().is_some_and(|d| d == "all") && to.last().is_some_and(|n| n == "refused") {
            return Err(Error::invalid("refused after a part of it was done"));
        }
        if self.rename_made_folder(from, to)? {
            return Ok(());
        }
        let (from, to) = (self.file_key(from)?, self.file_key(to)?);
        let mut links = lock(&self.links)?;
        if let Some(target) = links.remove(&from) {
            lock(&self.files)?.remove(&to);
            links.insert(to, target);
            return Ok(());
        }
        links.remove(&to);
        let mut files = lock(&self.files)?;
        let data = files
            .remove(&from)
            .ok_or_else(|| Error::not_found("no such file"))?;
        files.insert(to, data);
        Ok(())
    }
    fn set_mtime(&self, path: &[String], mtime: SystemTime) -> Result<()> {
        self.times_set.fetch_add(1, Ordering::Relaxed);
        lock(&self.mtimes)?.insert(self.file_key(path)?, mtime);
        Ok(())
    }
    /// Every file of `d` changes with any other (like a block's views); a change in `all`
    /// may change the whole tree (like a rename under a Luanti world's `index/`).
    fn change_scope(&self, path: &[String]) -> usize {
        if path.first().is_some_and(|d| d == "d") {
            1
        } else if path.first().is_some_and(|d| d == "all") {
            0
        } else {
            path.len()
        }
    }

    fn underneath(&self) -> Option<u64> {
        Some(self.underneath.load(Ordering::Relaxed))
    }

    fn take_changed_objects(&self) -> Option<Box<dyn Iterator<Item = Changed> + '_>> {
        let mut whole = lock(&self.whole).ok()?;
        let named = whole.clone()?;
        // Named with their entries once, as a Luanti tree names a changed block's views.
        if let Some(w) = whole.as_mut() {
            w.retain(|c| c.entries.is_none());
        }
        Some(Box::new(named.into_iter()))
    }

    fn numbering(&self) -> Option<Arc<dyn Numbering>> {
        self.numbered
            .load(Ordering::Relaxed)
            .then(|| Arc::new(DNumbers) as Arc<dyn Numbering>)
    }

    fn source_of(&self, path: &[String]) -> Option<Option<u64>> {
        if !self.sources.load(Ordering::Relaxed) || path != ["d"] {
            return None;
        }
        Some(Some(d_source(&*lock(&self.files).ok()?)))
    }

    /// A file of `d` keeps its bytes, when they are those `stat` was made of.
    fn pin(&self, path: &[String], stat: &Stat) -> Option<Pin> {
        let key = self.file_key(path).ok()?;
        let files = lock(&self.files).ok()?;
        let made_of = stat.source? == d_source(&files) && key.starts_with("d/");
        let bytes = files.get(&key).filter(|_| made_of)?;
        Some(Arc::new(bytes.clone()))
    }

    fn read_pinned(&self, _path: &[String], pin: &Pin) -> Result<Arc<Vec<u8>>> {
        pin.downcast_ref::<Vec<u8>>()
            .map(|bytes| Arc::new(bytes.clone()))
            .ok_or_else(|| Error::invalid("not a pin of this tree"))
    }

    fn read_only(&self) -> bool {
        self.read_only.load(Ordering::Relaxed)
    }
    fn readlink(&self, path: &[String]) -> Result<Vec<u8>> {
        lock(&self.links)?
            .get(&self.file_key(path)?)
            .cloned()
            .ok_or_else(|| Error::invalid("not a link"))
    }
    fn symlink(&self, path: &[String], target: &[u8]) -> Result<()> {
        lock(&self.links)?.insert(self.file_key(path)?, target.to_vec());
        Ok(())
    }
}

/// The source of every file in `d` (one object): a hash of their names and bytes.
pub fn d_source(files: &HashMap<String, Vec<u8>>) -> u64 {
    let mut in_d: Vec<_> = files.iter().filter(|(k, _)| k.starts_with("d/")).collect();
    in_d.sort();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    std::hash::Hash::hash(&in_d, &mut h);
    std::hash::Hasher::finish(&h)
}

pub fn setup() -> (Arc<Files>, Vfs, u64) {
    setup_numbered(false)
}

/// [`setup`], with `d` and its files numbered by the tree when `numbered`.
pub fn setup_numbered(numbered: bool) -> (Arc<Files>, Vfs, u64) {
    let tree = Arc::new(Files::default());
    tree.numbered.store(numbered, Ordering::Relaxed);
    lock(&tree.files)
        .unwrap()
        .insert("d/f".into(), b"ok old".to_vec());
    let vfs = Vfs::new(tree.clone(), None);
    let (ino, _) = vfs.lookup(ROOT, "d", 1).unwrap();
    let (f, _) = vfs.lookup(ino, "f", 1).unwrap();
    (tree, vfs, f)
}

pub const TRUNC: OpenMode = OpenMode {
    write: true,
    truncate: true,
    append: false,
};
pub const RW: OpenMode = OpenMode {
    write: true,
    truncate: false,
    append: false,
};

pub fn dir_ino(vfs: &Vfs) -> u64 {
    vfs.lookup(ROOT, "d", 1).unwrap().0
}

pub fn stored(tree: &Files, name: &str) -> Option<Vec<u8>> {
    lock(&tree.files).unwrap().get(name).cloned()
}

/// Stores `data` as file `name` of the tree, as another program would (not through the core).
pub fn store(tree: &Files, name: &str, data: &[u8]) {
    lock(&tree.files)
        .unwrap()
        .insert(name.into(), data.to_vec());
}

pub fn read_all(vfs: &Vfs, ino: u64) -> Vec<u8> {
    let fh = vfs.open(ino, OpenMode::default()).unwrap();
    let data = vfs.read(fh, 0, 1 << 20).unwrap().to_vec();
    vfs.release(fh).unwrap();
    data
}

/// Leaves `bad` as the pending text of `d/f` (its commit failed).
pub fn fail_a_save(vfs: &Vfs, f: u64) {
    let fh = vfs.open(f, TRUNC).unwrap();
    vfs.write(fh, 0, b"bad", false).unwrap();
    assert_eq!(vfs.flush(fh).unwrap_err().errno(), libc::EINVAL);
    vfs.release(fh).unwrap();
}
