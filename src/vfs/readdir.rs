//! Directory listings: the tree's entries (after `.` and `..`, their cookies shifted by 2),
//! without those the core hides, then the files the core holds that the tree does not list,
//! each under a cookie assigned once, so a paged listing neither skips nor repeats one while
//! other held files come and go.

use crate::error::{Error, Result};
use crate::vfs::core::Vfs;
use crate::vfs::inodes::ROOT;
use crate::vfs::naming::{display_path, listed_child};
use crate::vfs::tree::{Kind, Stat, MAX_TREE_COOKIE};

/// The inode number plain readdir shows for a name not looked up yet: a stand-in, since the
/// kernel looks the name up before any use.
const STAND_IN_INO: u64 = u64::MAX >> 1;

/// A directory entry produced by [`Vfs::readdir`].
pub struct DirEntry<'a> {
    pub ino: u64,
    pub offset: u64,
    pub name: &'a str,
    pub stat: &'a Stat,
}

/// The folder being listed and how.
struct Listing<'a> {
    ino: u64,
    dir: &'a [String],
    /// The cookie to resume after.
    offset: u64,
    /// Readdirplus: each entry counts as a kernel lookup.
    plus: bool,
}

impl Vfs {
    /// Streams the entries of directory `ino` after `offset`, as process `pid` sees them, to
    /// `sink` until it returns false. With `plus`, each entry counts as a kernel lookup
    /// (readdirplus).
    pub fn readdir(
        &self,
        ino: u64,
        offset: u64,
        plus: bool,
        pid: u32,
        sink: &mut dyn FnMut(DirEntry<'_>) -> bool,
    ) -> Result<()> {
        let dir = self.path_of(ino)?;
        self.listing_call(ino, &dir);
        let dir_stat = self.stat_path(&dir)?;
        if dir_stat.kind != Kind::Dir {
            return Err(Error::not_dir("not a directory"));
        }
        // Whether this call hands out an entry: the one that hands out none is the last.
        let mut given = false;
        let sink = &mut |e: DirEntry<'_>| {
            given = true;
            sink(e)
        };
        if !Self::list_dots(ino, offset, &dir_stat, sink) {
            return Ok(());
        }
        let listing = Listing {
            ino,
            dir: &dir,
            offset,
            plus,
        };
        if offset <= MAX_TREE_COOKIE + 2 && !self.list_tree(&listing, pid, sink)? {
            return Ok(());
        }
        self.list_held(&listing, sink)?;
        if !given {
            self.listing_ended(ino, &dir);
        }
        Ok(())
    }

    /// `.` and `..`, those after `offset`; false when `sink` is full.
    fn list_dots(
        ino: u64,
        offset: u64,
        dir_stat: &Stat,
        sink: &mut dyn FnMut(DirEntry<'_>) -> bool,
    ) -> bool {
        let dots = [(ino, 1, "."), (ROOT, 2, "..")];
        dots.into_iter()
            .filter(|&(_, cookie, _)| offset < cookie)
            .all(|(ino, cookie, name)| {
                sink(DirEntry {
                    ino,
                    offset: cookie,
                    name,
                    stat: dir_stat,
                })
            })
    }

    /// The tree's entries after the listing's offset, without those hidden from `pid` (in a
    /// folder it just made) and those moved aside; false when `sink` is full.
    fn list_tree(
        &self,
        listing: &Listing<'_>,
        pid: u32,
        sink: &mut dyn FnMut(DirEntry<'_>) -> bool,
    ) -> Result<bool> {
        let dir = listing.dir;
        let aside_here = self.aside_in(dir)?;
        let mut full = false;
        let after = listing.offset.saturating_sub(2);
        self.tree
            .list(dir, after, &mut |e| {
                if self.fresh.hidden(dir, &e.name, pid) || aside_here.contains(&e.name) {
                    return true;
                }
                let ok = self.offer(listing, &e.name, e.cookie + 2, &e.stat, sink);
                if !ok {
                    full = true;
                }
                ok
            })
            .map_err(|e| e.context(display_path(dir)))?;
        Ok(!full)
    }

    /// Core-held files of the folder that the tree does not list, after the tree's, in the
    /// order of their stable cookies.
    fn list_held(
        &self,
        listing: &Listing<'_>,
        sink: &mut dyn FnMut(DirEntry<'_>) -> bool,
    ) -> Result<()> {
        let dir = listing.dir;
        let extra = self.paths.held_in(dir, listing.offset)?;
        for (cookie, name, stat, scratch) in extra {
            if !scratch && self.tree.stat(&listed_child(dir, &name)).is_ok() {
                continue;
            }
            if !self.offer(listing, &name, cookie, &stat, sink) {
                break;
            }
        }
        Ok(())
    }

    /// Hands one entry to `sink`; false when it is full (then a readdirplus lookup of the
    /// entry is undone).
    fn offer(
        &self,
        listing: &Listing<'_>,
        name: &str,
        cookie: u64,
        stat: &Stat,
        sink: &mut dyn FnMut(DirEntry<'_>) -> bool,
    ) -> bool {
        let child_ino = self.entry_ino(listing.ino, name, listing.plus, stat.file);
        let shown = self.shown(&listed_child(listing.dir, name), stat.clone());
        let stat = &shown;
        // Readdirplus hands the kernel attributes it may keep: those of a file are made exact
        // (a tree may list approximate ones); one that cannot be is not kept.
        let exact;
        let stat = if listing.plus && stat.kind == Kind::File && !stat.volatile {
            exact = self
                .stat_path(&listed_child(listing.dir, name))
                .unwrap_or_else(|_| Stat {
                    volatile: true,
                    ..stat.clone()
                });
            &exact
        } else {
            stat
        };
        let ok = sink(DirEntry {
            ino: child_ino,
            offset: cookie,
            name,
            stat,
        });
        if !ok && listing.plus {
            self.forget(child_ino, 1);
        }
        ok
    }

    pub(super) fn entry_ino(&self, parent: u64, name: &str, plus: bool, file: Option<u64>) -> u64 {
        if plus {
            if let Ok(mut t) = self.inodes.write() {
                return t.lookup(parent, name, file);
            }
        } else if let Ok(t) = self.inodes.read() {
            if let Some(ino) = t.find(parent, name) {
                return ino;
            }
        }
        STAND_IN_INO
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::test_tree::*;

    /// Lists `d` two entries per call, running `between` after each call.
    fn paged_listing(vfs: &Vfs, mut between: impl FnMut(usize)) -> Vec<String> {
        let d = dir_ino(vfs);
        let mut seen = Vec::new();
        let mut offset = 0;
        for page in 0..100 {
            let mut got = 0;
            vfs.readdir(d, offset, false, 1, &mut |e| {
                if got == 2 {
                    return false;
                }
                got += 1;
                offset = e.offset;
                seen.push(e.name.to_string());
                true
            })
            .unwrap();
            if got == 0 {
                break;
            }
            between(page);
        }
        seen
    }

    #[test]
    fn listing_cookies_of_held_files_stay_stable_while_files_come_and_go() {
        let (_tree, vfs, _) = setup();
        let d = dir_ino(&vfs);
        for n in ["b.tmp", "d.tmp", "f.tmp", "h.tmp"] {
            let (_, _, fh) = vfs.create(d, n, 0o644).unwrap();
            vfs.release(fh).unwrap();
        }
        let seen = paged_listing(&vfs, |page| {
            // Between pages: a new name sorting first, and a removed one already listed.
            if page < 3 {
                let (_, _, fh) = vfs.create(d, &format!("a{page}.tmp"), 0o644).unwrap();
                vfs.release(fh).unwrap();
            }
            if page == 1 {
                vfs.unlink(d, "b.tmp").unwrap();
            }
        });
        for n in ["d.tmp", "f.tmp", "h.tmp"] {
            assert_eq!(
                seen.iter().filter(|s| *s == n).count(),
                1,
                "{n} in {seen:?}"
            );
        }
    }
}
