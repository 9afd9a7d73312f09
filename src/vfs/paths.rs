//! A path's state in the core: the file being written there ([`OpenFile`], shared by every
//! handle opened on it meanwhile), the text held there that the tree does not store
//! ([`Overlay`]: a scratch file, a new object not committed yet, text a commit did not
//! take), and where a tree file moved aside went.

use std::time::SystemTime;

use crate::error::Error;
use crate::vfs::buffer::Buffer;
use crate::vfs::held::Text;
use crate::vfs::naming::{display_path, MAX_FILE_SIZE};
use crate::vfs::tree::{Kind, Owner, Stat, MAX_TREE_COOKIE};

/// The content of a file while handles are open on it.
pub(super) struct OpenFile {
    pub(super) path: Vec<String>,
    /// Removed or replaced while open: what its handles write goes nowhere.
    pub(super) detached: bool,
    /// Shared with the tree's rendered text until a handle writes (copied then).
    pub(super) data: Buffer,
    pub(super) dirty: bool,
    pub(super) mtime: SystemTime,
    /// A time set on the file while it held unsaved writes (`cp -a` sets it before its
    /// `close()`): applied after the commit, unless a later write cleared it.
    pub(super) set_mtime: Option<SystemTime>,
    pub(super) perm: u16,
    /// Its owner when known: the file's own (a real folder's file) or its creator's
    /// ([`Vfs::set_owner`]), given to the file on disk at its commit.
    pub(super) owner: Option<Owner>,
    /// A write past [`MAX_FILE_SIZE`] failed: the buffer lacks what came after, so it is
    /// never stored or held anywhere (its commits fail with `EFBIG` and drop it, a rename
    /// of it fails) until a truncation says what the file holds.
    pub(super) cut: bool,
    /// Which file on disk its text was read from, for a real folder's file (see
    /// [`Stat::file`]): when the path shows another, its handles keep showing this one.
    pub(super) file: Option<u64>,
    /// Where its commits go.
    pub(super) home: Home,
    pub(super) handles: usize,
    pub(super) writers: usize,
}

/// Why a cut file (see [`OpenFile::cut`]) is not taken.
pub(super) fn cut_error(path: &[String]) -> Error {
    Error::new(
        libc::EFBIG,
        format!(
            "{}: a write past {} MiB failed, so the file is not all there",
            display_path(path),
            MAX_FILE_SIZE >> 20
        ),
    )
}

impl OpenFile {
    /// Whether a new handle on its path shares this buffer (it is being written).
    pub(super) fn shared(&self) -> bool {
        !self.detached && (self.writers > 0 || self.dirty)
    }

    pub(super) fn stat(&self) -> Stat {
        Stat {
            kind: Kind::File,
            size: self.data.len() as u64,
            mtime: self.mtime,
            perm: self.perm,
            // While it holds unsaved writes it changes only through the kernel's own requests
            // on it (which return or drop its attributes) and at its commit (after which the
            // kernel is told). Once committed and still open (after `fsync`, or one of two
            // descriptors closed) the tree may hold another form of its text (canonical),
            // which its last close does not announce: then it is not kept. Scratch text is
            // committed as it is.
            volatile: self.home == Home::Tree && !self.dirty,
            source: None,
            owner: self.owner,
            file: None,
        }
    }
}

/// Where the content of an open file is committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Home {
    /// To the tree, which parses and stores it.
    Tree,
    /// To the text the core holds (a scratch file): never to the tree.
    Core,
}

/// A file whose content lives in the core rather than in the tree.
pub(super) struct Overlay {
    pub(super) text: Text,
    pub(super) mtime: SystemTime,
    /// An explicitly set mtime (utimens), carried to the tree when the file is committed.
    pub(super) set_mtime: Option<SystemTime>,
    pub(super) perm: u16,
    /// What it is: a scratch file, a new object, or text a commit did not take.
    pub(super) held: Held,
    /// Its listing cookie: assigned once, so a paged listing neither skips nor repeats it
    /// when other held files come and go.
    pub(super) cookie: u64,
    /// Who created it, when that is known ([`Vfs::set_owner`]): given to the file on disk
    /// when it is committed (a real folder's file; objects of a store have its owner).
    pub(super) owner: Option<Owner>,
}

/// What a file the core holds is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Held {
    /// A scratch file (an editor's swap file, a tool's temporary, a tree file moved aside):
    /// lives only in the core while mounted; still there at unmount, it is stored under its
    /// name where the tree can hold it ([`Vfs::store_scratch`]), else dropped.
    Scratch,
    /// A new object created and not committed yet: its first commit stores it.
    New,
    /// Text a commit did not take, shown at the path of the file it was for (the store
    /// unchanged): reported, and saved for recovery at unmount.
    Failed,
    /// Text a commit did not take, renamed to a name the tree does not store: held there
    /// like a scratch file, and still saved for recovery at unmount.
    FailedScratch,
}

impl Held {
    /// Lives only in the core: commits update the held text, never the tree.
    pub(super) fn is_scratch(self) -> bool {
        matches!(self, Held::Scratch | Held::FailedScratch)
    }

    /// Holds text no commit took.
    pub(super) fn is_unsaved(self) -> bool {
        matches!(self, Held::Failed | Held::FailedScratch)
    }

    /// What it becomes when renamed to a name the tree does not store.
    pub(super) fn renamed_to_scratch(self) -> Held {
        if self.is_unsaved() {
            Held::FailedScratch
        } else {
            Held::Scratch
        }
    }
}

pub(super) fn overlay_stat(o: &Overlay) -> Stat {
    Stat {
        kind: Kind::File,
        size: o.text.len(),
        mtime: o.mtime,
        perm: o.perm,
        // Like a file being written, it changes only through the kernel's requests and
        // commits the kernel is told of; text a commit did not take is shown afresh.
        volatile: o.held.is_unsaved(),
        source: None,
        owner: o.owner,
        file: None,
    }
}

/// The listing cookie of the first file held by the core (after the tree's and `.`, `..`).
pub(super) const FIRST_HELD_COOKIE: u64 = MAX_TREE_COOKIE + 3;
