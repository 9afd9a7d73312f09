//! The contract between the filesystem core and a game's tree.
//!
//! A tree maps paths (lists of file names below the mount root) to decoded objects. It knows
//! the formats and the store; it knows nothing of inodes, handles or FUSE. Every write is a
//! whole file: the core buffers what applications write and hands the tree the complete new
//! content on close or fsync, which the tree parses, re-encodes and commits atomically.
//!
//! A tree may also show symbolic links (the links of a world folder): a link is a
//! [`Kind::Symlink`] whose target is read with [`Tree::readlink`], never with [`Tree::read`],
//! so no code path can mistake a target for content or read through a link.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::{Error, Result};

/// How a game's tree is opened (the mount's options).
pub struct Options {
    /// Refuse every change (`--read-only`).
    pub read_only: bool,
    /// About how many bytes of decoded objects the tree's cache keeps.
    pub cache_bytes: usize,
}

/// The error of a path that names nothing (`ENOENT`).
pub fn not_found(path: &TreePath) -> Error {
    Error::not_found(format!("{}: no such file or directory", path.join("/")))
}

/// 2020-01-01T00:00:00Z: the time of folders that have none of their own; hash-derived
/// times lie in the 194 days before it.
pub const BASE_SECS: u64 = 1_577_836_800;

/// The time of folders that have none of their own: the base of the derived times (see
/// [`derived_mtime`](crate::storekit::mtimes::derived_mtime)).
pub fn base_time() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(BASE_SECS)
}

/// A path below the mount root, one file name per component.
pub type TreePath = [String];

/// What a tree keeps of a file's source at a reader's open (see [`Tree::pin`]).
pub type Pin = Arc<dyn std::any::Any + Send + Sync>;

/// Inode numbers a tree computes from what a folder is (a block's position), for the many
/// folders of one kind in one folder (`blocks/`) and the fixed entries each of them holds
/// (its views): the core then keeps nothing per inode for them, so the kernel may keep the
/// names and attributes of a whole world while the daemon keeps a few bytes per folder
/// (see `vfs::inodes`).
pub trait Numbering: Send + Sync {
    /// The folder whose entries are numbered (`["blocks"]`).
    fn dir(&self) -> &'static [&'static str];
    /// The number of the entry `name` of [`Numbering::dir`] (below 2^48), when `name` is the
    /// one way of writing a folder the tree numbers; `None` makes it an ordinary inode.
    fn number(&self, name: &str) -> Option<u64>;
    /// The name of the entry numbered `n` (the inverse of [`Numbering::number`]).
    fn name(&self, n: u64) -> Option<String>;
    /// The entries every numbered folder may hold under fixed names (at most 14; an entry a
    /// folder lacks is simply never looked up). Never files on disk.
    fn fixed(&self) -> &'static [&'static str];
}

/// An object a change of the whole tree changed, as [`Tree::take_changed_objects`] names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Changed {
    /// Its path, as [`Tree::change_scope`] names an object (a block folder), or a folder
    /// below which anything may have changed (`index`).
    pub path: Vec<String>,
    /// Which of its fixed entries changed, when the tree knows (`None`: anything at or
    /// below it may have changed).
    pub entries: Option<ChangedEntries>,
}

/// Which fixed entries ([`Numbering::fixed`]) of a changed object changed, and the source
/// ([`Stat::source`]) its stats were derived from before and after the change. The object
/// itself changed too (its time); everything else at and below it shows what it showed
/// when its source was `before` (the same attributes, the same bytes). So what the kernel
/// keeps of those, if derived from `before`, stays true and is now derived from `after`;
/// kept from any other source (another program's change just before), it is dropped.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ChangedEntries {
    pub names: Vec<&'static str>,
    pub before: u64,
    pub after: u64,
}

impl Changed {
    /// Object `path`, anything at or below which may have changed.
    pub fn whole(path: Vec<String>) -> Changed {
        Changed {
            path,
            entries: None,
        }
    }
}

/// File, directory or symbolic link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Dir,
    File,
    /// A symbolic link, shown as a link and never followed by worldfs (the kernel follows
    /// it, through [`Tree::readlink`], when a program opens the path).
    Symlink,
}

/// What the core needs to know of an existing path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    pub kind: Kind,
    /// Exact size in bytes of the file's content (0 for directories; the length of the
    /// target for links, as `lstat` shows).
    pub size: u64,
    pub mtime: SystemTime,
    /// Permission bits (e.g. 0o644, 0o600 for secrets, 0o755 for directories).
    pub perm: u16,
    /// Shown from something other programs may change without the tree noticing (a file of
    /// the world folder, a player row read afresh on each use): the kernel may keep it only
    /// briefly. Everything else the kernel keeps until the core tells it that it changed
    /// (see [`Tree::underneath`] and [`Tree::change_scope`]).
    pub volatile: bool,
    /// What the stat was derived from, when the tree can tell it cheaply (a hash of a
    /// block's stored bytes): while [`Tree::source_of`] gives the same, the stat is still
    /// true, so a re-check after another program's change skips it without computing it
    /// again. `None`: the stat is computed again on every re-check.
    pub source: Option<u64>,
    /// The owner shown: a file of a real folder keeps its own; `None` stands for the owner
    /// of what the path is shown from ([`Tree::source_files`]), or of the mount.
    pub owner: Option<Owner>,
    /// Which file of a real folder it is (a hash of its device and inode number on disk):
    /// when another program puts a new file at the path, the kernel is given a new inode for
    /// it, so a reader of the old file reads it whole, as on disk. `None` for what the tree
    /// renders.
    pub file: Option<u64>,
}

/// A user and group, as on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    pub uid: u32,
    pub gid: u32,
}

impl Stat {
    /// A directory: mode 0755, or 0555 on a read-only mount.
    pub fn dir(mtime: SystemTime, read_only: bool) -> Stat {
        Stat {
            kind: Kind::Dir,
            size: 0,
            mtime,
            perm: if read_only { 0o555 } else { 0o755 },
            volatile: false,
            source: None,
            owner: None,
            file: None,
        }
    }

    /// A file of `size` bytes: mode 0644, or 0444 on a read-only mount.
    pub fn file(size: u64, mtime: SystemTime, read_only: bool) -> Stat {
        Stat {
            kind: Kind::File,
            size,
            mtime,
            perm: if read_only { 0o444 } else { 0o644 },
            volatile: false,
            source: None,
            owner: None,
            file: None,
        }
    }

    /// A symbolic link whose target is `len` bytes long: mode 0777, as Linux shows links.
    pub fn symlink(len: u64, mtime: SystemTime) -> Stat {
        Stat {
            kind: Kind::Symlink,
            size: len,
            mtime,
            perm: 0o777,
            volatile: false,
            source: None,
            owner: None,
            file: None,
        }
    }
}

/// One directory entry; `cookie` resumes a listing just after this entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub cookie: u64,
    pub stat: Stat,
}

/// The largest cookie a tree may hand out; larger ones belong to the core.
pub const MAX_TREE_COOKIE: u64 = 1 << 62;

/// What a new file name in a directory becomes when an application creates it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NewFile {
    /// A new object of the tree (a metadata field, a player, a world file); committed on close.
    Object,
    /// A scratch file held by the core (editor swap files, `sed -i` and rsync temporaries).
    Scratch,
}

/// What [`Tree::check_remove`] says a removal would do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removal {
    /// Deletes or resets what the tree stores at a path whose new text it checks (a player,
    /// a field, a chest's inventory, `world.mt`): held back a moment, so that a file created
    /// again there whose text fails leaves the object stored.
    Checked,
    /// Changes nothing stored (a block's view), removes a file that takes any bytes (a
    /// world-folder file, a file of a TEVD disk), or removes an object shown under several
    /// names (a Terrarum entry, which a removal held back by name could not follow): done
    /// at once.
    AtOnce,
}

/// A game's tree. All methods may be called from many threads at once.
pub trait Tree: Send + Sync + 'static {
    /// The object at `path`, or `Error::not_found`.
    fn stat(&self, path: &TreePath) -> Result<Stat>;

    /// Streams the entries of directory `dir` whose cookie is greater than `after` (0 = from
    /// the start), in cookie order, to `sink`, until `sink` returns false (buffer full) or the
    /// directory ends. Cookies are stable: the same entry always has the same cookie, between
    /// 1 and [`MAX_TREE_COOKIE`]. The stat of a directory entry is exact; that of a file entry
    /// may leave size and mtime approximate (the FUSE adapter never lets the kernel cache file
    /// attributes, so it asks [`Tree::stat`] before any use), which spares rendering every
    /// file of a folder just to list it.
    fn list(&self, dir: &TreePath, after: u64, sink: &mut dyn FnMut(Entry) -> bool) -> Result<()>;

    /// The whole content of the file at `path` (not of a link: a tree refuses that with
    /// `ELOOP`).
    fn read(&self, path: &TreePath) -> Result<Arc<Vec<u8>>>;

    /// Replaces the content of the file at `path` (creating the object when `classify` says
    /// `Object`) and commits it. On error nothing is stored.
    fn write(&self, path: &TreePath, data: &[u8]) -> Result<()>;

    /// [`Tree::write`], for a file whose modification time was set before it was committed
    /// (`rsync` sets it on its temporary file, then renames that over the file): a store
    /// that keeps a time with each object (a Terrarum disk entry) stamps it with `mtime`
    /// instead of the commit's time. Trees that keep times only beside their stores (see
    /// [`crate::storekit::mtimes`]) keep this default; the core sets the time after either.
    fn write_dated(&self, path: &TreePath, data: &[u8], _mtime: SystemTime) -> Result<()> {
        self.write(path, data)
    }

    /// Parses `data` as the new content of the file at `path` the way [`Tree::write`] does,
    /// and fails as it would on bad input, without storing anything. The core asks this when
    /// it must answer a close without committing (see `Vfs::flush`).
    fn check(&self, path: &TreePath, data: &[u8]) -> Result<()>;

    /// What creating the file `name` in `dir` would make.
    fn classify(&self, dir: &TreePath, name: &str) -> Result<NewFile>;

    /// Whether a file may be created or written at `path`: `Err` with the reason where the
    /// tree shows answers nothing writes (`index/`), so the core refuses at the create, the
    /// open for writing or the truncation, and never holds text there. Trees that take
    /// writes everywhere keep this default.
    fn writable_at(&self, _path: &TreePath) -> Result<()> {
        Ok(())
    }

    /// Removes the file at `path` (deletes the object it shows, or resets a file that
    /// cannot be absent, such as a block's `light.txt`, which is then a no-op).
    fn remove(&self, path: &TreePath) -> Result<()>;

    /// Whether [`Tree::remove`] would take `path`, changing nothing: the error it would give
    /// for a file it refuses to remove (or a folder, or nothing there), else what the
    /// removal would do. The core holds back a [`Removal::Checked`] one for a moment (see
    /// [`crate::vfs::removals`]).
    fn check_remove(&self, path: &TreePath) -> Result<Removal>;

    /// Creates the directory at `path`.
    fn mkdir(&self, path: &TreePath) -> Result<()>;

    /// Removes the directory at `path` and the object it shows.
    fn rmdir(&self, path: &TreePath) -> Result<()>;

    /// Renames an object inside the tree (a block folder, a field, a world file).
    fn rename(&self, from: &TreePath, to: &TreePath) -> Result<()>;

    /// Sets the modification time of the object at `path` (rsync, `touch -d`).
    fn set_mtime(&self, path: &TreePath, mtime: SystemTime) -> Result<()>;

    /// The files or folders on disk whose owner and permission bits guard what is shown
    /// under the top-level name `top` (`None`: the mount's root): the world folder for the
    /// root, the database a view shows for the view (every database an answer of `index/`
    /// reads). The core shows the first one's owner, and gives group and others no
    /// permission that one of them does not give them (a map at 0600 shows its blocks 0600
    /// and their folders 0700), so that with `--allow-other` nobody reads through the
    /// mount what the disk refuses them ([`crate::vfs::access`]). None (the default, and
    /// for names that are real files with their own owner and mode): shown as the tree
    /// says, owned by the mount's user.
    fn source_files(&self, _top: Option<&str>) -> &[std::path::PathBuf] {
        &[]
    }

    /// Gives the file, folder or link at `path` the owner `owner`: the user who created it
    /// through the mount. Trees whose objects live in a store keep this default, which
    /// ignores it (they show the store's owner); the real folders a tree shows
    /// ([`crate::storekit::folder`]) set it on disk when worldfs runs as root.
    fn set_owner(&self, _path: &TreePath, _owner: Owner) -> Result<()> {
        Ok(())
    }

    /// Sets the permission bits of the object at `path` (`chmod`, and the mode a file was
    /// created with). Trees whose objects have fixed modes keep this default, which ignores
    /// it; the real folders a tree shows ([`crate::storekit::folder`]) set it on disk.
    fn set_perm(&self, _path: &TreePath, _perm: u16) -> Result<()> {
        Ok(())
    }

    /// How many leading components of `path` name the object a change at `path` may change
    /// (a block folder for any file of a block, whose other views it changes too); the core
    /// re-checks what the kernel holds below it after each change it makes. 0 means the
    /// whole tree. Trees whose files change alone keep this default, the path itself.
    fn change_scope(&self, path: &TreePath) -> usize {
        path.len()
    }

    /// After changes of the whole tree (a [`Tree::change_scope`] of 0, as a rename under a
    /// Luanti world's `index/`), the objects they changed, if the tree knows them all: each
    /// object as [`Tree::change_scope`] names one (a block folder), and folders below which
    /// anything may have changed (`index`). Each call gives what changed since the last,
    /// counting only changes already made. The core then tells the kernel of those and of
    /// the folders above them, and keeps the rest. `None` (the default): not known, so
    /// everything the kernel keeps is re-checked. An object whose changed entries the tree
    /// knows ([`Changed::entries`]) costs the kernel only those.
    fn take_changed_objects(&self) -> Option<Box<dyn Iterator<Item = Changed> + '_>> {
        None
    }

    /// Looks (at most once per short interval) whether another program changed the stores
    /// underneath, and returns a number that changes whenever it did. The core polls it and
    /// re-checks everything the kernel keeps when it changes. `None`: the tree cannot tell,
    /// so the kernel keeps nothing of it for long (the default).
    fn underneath(&self) -> Option<u64> {
        None
    }

    /// Whether the listing of folder `dir` changes only with what the core is told of: a
    /// change it makes below or above the folder, a change of the folder's entries through
    /// the kernel (which then drops its cached listing itself), or a change
    /// [`Tree::underneath`] reports. The kernel may then keep the listing until the core
    /// tells it otherwise; other listings (world-folder files on disk, accounts read afresh,
    /// listings derived from the whole map) it keeps for at most a tick of the watcher. The
    /// default: none.
    fn listing_kept(&self, _dir: &TreePath) -> bool {
        false
    }

    /// Keeps what the text of the file at `path`, as `stat` describes it, is made from, so
    /// that [`Tree::read_pinned`] renders that very text later: a reader's open whose pages
    /// the kernel keeps then renders nothing, and reads (if the kernel asks for any) still
    /// get the text of the open, whatever changed since. `None` (the default, and whenever
    /// the tree cannot hold exactly what `stat` describes): the core reads the text at open.
    fn pin(&self, _path: &TreePath, _stat: &Stat) -> Option<Pin> {
        None
    }

    /// The text of the file at `path` as it was when [`Tree::pin`] gave `pin` (never the
    /// text of now: a tree that pins nothing keeps this default, an error).
    fn read_pinned(&self, path: &TreePath, _pin: &Pin) -> Result<Arc<Vec<u8>>> {
        Err(Error::new(
            libc::EIO,
            format!("{}: this tree keeps no text for later", path.join("/")),
        ))
    }

    /// How the tree numbers inodes itself (see [`Numbering`]); `None` (the default): the
    /// core numbers every inode as the kernel looks it up.
    fn numbering(&self) -> Option<Arc<dyn Numbering>> {
        None
    }

    /// What the stats at `path` are derived from now (see [`Stat::source`]), read cheaply
    /// (a block's stored bytes hashed, not decoded): `None` when the tree cannot tell (the
    /// default), `Some(None)` when the object is gone.
    fn source_of(&self, _path: &TreePath) -> Option<Option<u64>> {
        None
    }

    /// Whether the tree refuses all writes. The core refuses every change while it does (a
    /// tree may turn read-only while mounted, as a damaged TVDA disk does).
    fn read_only(&self) -> bool;

    /// Commits every change the tree holds back (see `-o sync` in docs/semantics.md), and writes
    /// the mtime records waiting (see [`crate::storekit::mtimes`]): `fsync` of any file, unmount
    /// and SIGTERM call it, and return only once it did. Trees that commit each change at
    /// once and record no times keep this default.
    fn sync(&self) -> Result<()> {
        Ok(())
    }

    /// The state of the tree's stores where it is not the plain one, for `worldfs status`:
    /// each note says whether it fails every use, and what to say (a database followed
    /// after it was replaced, one that cannot be followed). Trees with no such state keep
    /// this default.
    fn notes(&self) -> Vec<(bool, String)> {
        Vec::new()
    }

    /// The paths whose changes the tree still holds back (a [`Tree::sync`] failed): they are
    /// lost when the daemon ends, and reported as not committed. Trees that commit each
    /// change at once keep this default.
    fn uncommitted(&self) -> Vec<String> {
        Vec::new()
    }

    /// The error every change meets while [`Tree::read_only`] (`EROFS`); a tree that knows
    /// more of why it is read-only says it.
    fn read_only_error(&self) -> Error {
        Error::read_only("the mount is read-only")
    }

    /// The target of the symbolic link at `path`, byte for byte as stored (never resolved).
    /// Trees without links keep this default, `EINVAL` as `readlink` of a non-link gives.
    fn readlink(&self, path: &TreePath) -> Result<Vec<u8>> {
        Err(not_a_link(path))
    }

    /// Creates a symbolic link at `path` pointing to `target` (`ln -s`). Trees that hold
    /// no links keep this default, `EPERM`.
    fn symlink(&self, path: &TreePath, _target: &[u8]) -> Result<()> {
        Err(no_link_here(path))
    }
}

/// The error of [`Tree::readlink`] on a path that is not a link (`EINVAL`).
pub fn not_a_link(path: &TreePath) -> Error {
    Error::invalid(format!("{}: not a symbolic link", path.join("/")))
}

/// The error of [`Tree::symlink`] where a tree holds no links (`EPERM`).
pub fn no_link_here(path: &TreePath) -> Error {
    Error::not_permitted(format!(
        "{}: symbolic links can only be made among the world folder's files",
        path.join("/")
    ))
}

/// Streams a folder's `entries` (any order) whose cookie is greater than `after` to `sink`, in
/// cookie order, until `sink` returns false: [`Tree::list`] for small folders held whole.
pub fn stream(mut entries: Vec<Entry>, after: u64, sink: &mut dyn FnMut(Entry) -> bool) {
    entries.sort_by_key(|e| e.cookie);
    for e in entries {
        if e.cookie > after && !sink(e) {
            return;
        }
    }
}
