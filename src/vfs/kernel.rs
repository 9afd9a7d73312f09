//! What the core knows of the kernel's caches: the notifications it can send
//! ([`KernelCache`]), how long the kernel may keep a name ([`Keeping`]), the listings under
//! way and the re-checks made lately. The core's operations on them are in
//! [`kernel_cache`](crate::vfs::kernel_cache); this module is below the core and imports
//! nothing of it.

use std::collections::VecDeque;
use std::time::Duration;

use crate::vfs::tree::Stat;

/// How often the watcher looks for other programs' changes and sends pending name drops.
pub const WATCH_INTERVAL: Duration = Duration::from_millis(200);

/// How many numbered folders (see `vfs::inodes`) stay kept across another program's change:
/// each costs a look at its source then.
pub const WATCHED_UNITS: usize = 4096;

/// The kernel's caches, as the FUSE adapter reaches them (fuser's `Notifier`).
pub trait KernelCache: Send + Sync {
    /// Drops the kernel's attributes and cached pages of `ino`.
    fn inval_inode(&self, ino: u64) -> std::io::Result<()>;
    /// Drops the kernel's name `name` in folder `parent`.
    fn inval_entry(&self, parent: u64, name: &str) -> std::io::Result<()>;
}

/// How long the kernel may keep an inode's name and attributes ([`Vfs::kernel_keeps`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keeping {
    /// Until it is told they changed: the core keeps them true.
    Kept,
    /// A short while at most (the core does not follow them).
    Briefly,
    /// Not at all: some process does not see this name.
    Never,
}

/// How many unfinished listings are remembered at most (see [`Vfs::listing_call`]).
pub(super) const MOST_LISTINGS: usize = 4096;

/// A listing of a folder under way, as the kernel caches it.
pub struct Listing {
    /// [`Vfs::kernel_epoch`] when its first call started.
    pub(super) since: u64,
    /// Whether a call served a view that depends on who asks.
    pub(super) personal: bool,
}

/// How many re-checks [`RecheckLog`] remembers: a stat computed across more is not kept.
pub(super) const LOGGED_RECHECKS: usize = 64;

/// Where the latest re-checks looked (see [`Vfs::kernel_keeps`]).
#[derive(Default)]
pub struct RecheckLog {
    /// Each re-check's number and the path of the object it re-checked, whose inodes and
    /// the folders above it it looked at (`None`: every inode).
    pub(super) recent: VecDeque<(u64, Option<Vec<String>>)>,
}

impl RecheckLog {
    /// Whether a re-check numbered after `since` (up to `now`) may have concerned the inode
    /// at `path` (`None`: unknown): one at or below it or above it, or one forgotten.
    pub(super) fn may_concern(&self, since: u64, now: u64, path: Option<&[String]>) -> bool {
        let Some(path) = path else {
            return true;
        };
        let mut seen = 0u64;
        let concerned = self
            .recent
            .iter()
            .filter(|(n, _)| *n > since)
            .inspect(|_| seen += 1)
            .any(|(_, scope)| match scope {
                None => true,
                Some(s) => path.starts_with(s) || s.starts_with(path),
            });
        concerned || seen < now.saturating_sub(since)
    }
}

/// Whether the kernel's copy of the attributes is still right.
pub(super) fn same(now: &Stat, kept: &Stat) -> bool {
    now.kind == kept.kind
        && now.size == kept.size
        && now.mtime == kept.mtime
        && now.perm == kept.perm
        && !now.volatile
}
