//! Who may do what through the mount: every path shows the owner and no more permission than
//! what it is shown from on disk (issue 35, "`--allow-other` shows more than the disk
//! allows").
//!
//! The kernel checks permissions (`default_permissions`, with `--allow-other`; on a mount of
//! one user the adapter checks what the kernel leaves to it, `vfs::permission`) against the
//! owner and mode the core reports, so those must be the disk's: the mount's root takes the world folder's
//! owner and mode (the sticky bit included, which the kernel then enforces on the root's
//! files as on disk), a view takes the owner of the database it shows and, for its group
//! and others, at most the permission bits the database gives them (a map at 0600 shows
//! its blocks 0600 and their folders 0700, read and searched only by that user; the owner,
//! who may change the database's mode at will, keeps what the tree shows), and a file of
//! the world folder keeps its own owner and mode
//! ([`crate::storekit::folder`]). Without a file to follow (a tree that names none, a database on
//! a server) a path is shown as the tree says, owned by the mount's user.
//!
//! The owner and mode of each source are read once, at the first use, and kept for the
//! mount's life, as the kernel keeps the attributes it was given: a `chmod` or `chown` of the
//! world folder or a database while it is mounted shows after a remount.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::vfs::tree::{Kind, Owner, Stat, Tree};

/// The owner and mode of the file or folder a top-level name is shown from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Source {
    owner: Owner,
    /// Permission bits, sticky bit included.
    perm: u32,
    dir: bool,
}

/// The files paths are shown from, read at their first use (a handful: the world folder and
/// its databases), searched in place with no allocation on the way of every stat.
#[derive(Default)]
pub(super) struct Access {
    sources: Mutex<Vec<(PathBuf, Option<Source>)>>,
}

impl Access {
    /// `stat` of `path` as shown: with the owner of its first source and, for group and
    /// others, no permission that any of its sources refuses them. A source that cannot be
    /// read gives group and others nothing.
    pub(super) fn shown(&self, tree: &dyn Tree, path: &[String], mut stat: Stat) -> Stat {
        if stat.owner.is_some() {
            return stat;
        }
        let sources = tree.source_files(path.first().map(String::as_str));
        let Some((first, rest)) = sources.split_first() else {
            return stat;
        };
        let first = self.source(first);
        stat.owner = first.map(|s| s.owner);
        if stat.kind == Kind::Symlink {
            return stat;
        }
        let read_only = stat.perm & 0o222 == 0;
        match first {
            // The root is the world folder: its own bits.
            Some(src) if path.is_empty() && src.dir => stat.perm = (src.perm & 0o1777) as u16,
            _ => {
                // The group and others get at most what the sources give them; the owner,
                // who may change a source's mode at will, what the tree gives (a sample
                // disk at 0444 that root mounts read-write shows its files 0644 to root).
                let allowed = std::iter::once(first)
                    .chain(rest.iter().map(|p| self.source(p)))
                    .fold(0o077, |allowed, src| {
                        allowed & src.map_or(0, Source::others)
                    });
                stat.perm &= (allowed | 0o700) as u16;
            }
        }
        if read_only {
            stat.perm &= !0o222;
        }
        stat
    }

    fn source(&self, path: &Path) -> Option<Source> {
        if let Ok(sources) = self.sources.lock() {
            if let Some((_, known)) = sources.iter().find(|(p, _)| p == path) {
                return *known;
            }
        }
        let found = std::fs::metadata(path)
            .map_err(|e| {
                log::warn!(
                    "{}: {e}; what it shows is for its owner only",
                    path.display()
                )
            })
            .ok()
            .map(|m| Source {
                owner: Owner {
                    uid: m.uid(),
                    gid: m.gid(),
                },
                perm: m.mode() & 0o1777,
                dir: m.is_dir(),
            });
        if let Ok(mut sources) = self.sources.lock() {
            if !sources.iter().any(|(p, _)| p == path) {
                sources.push((path.to_path_buf(), found));
            }
        }
        found
    }
}

impl Source {
    /// The group's and others' bits a folder or file shown from this source may have: its
    /// own, and search where they may read a source that is a file.
    fn others(self) -> u32 {
        let bits = self.perm & 0o077;
        if self.dir {
            bits
        } else {
            bits | (bits & 0o044) >> 2
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::test_tree::Files;
    use std::os::unix::fs::PermissionsExt;
    use std::time::UNIX_EPOCH;

    fn path(p: &str) -> Vec<String> {
        p.split('/')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn paths_show_their_sources_owner_and_no_more_than_its_permissions() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("world");
        std::fs::create_dir(&folder).unwrap();
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let db = folder.join("map.sqlite");
        std::fs::write(&db, b"").unwrap();
        std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o600)).unwrap();
        let mut tree = Files::default();
        tree.on_disk.extend([
            (None, vec![folder.clone()]),
            (Some("d".to_string()), vec![db.clone()]),
            (Some("both".to_string()), vec![db.clone(), folder.clone()]),
            (Some("gone".to_string()), vec![folder.join("missing")]),
        ]);
        let access = Access::default();
        let me = Owner {
            uid: std::fs::metadata(&db).unwrap().uid(),
            gid: std::fs::metadata(&db).unwrap().gid(),
        };
        let root = access.shown(&tree, &[], Stat::dir(UNIX_EPOCH, false));
        assert_eq!(
            (root.perm, root.owner),
            (0o1777, Some(me)),
            "the world folder's own bits"
        );
        let ro_root = access.shown(&tree, &[], Stat::dir(UNIX_EPOCH, true));
        assert_eq!(ro_root.perm, 0o1555, "read-only: no write bit");
        let f = access.shown(&tree, &path("d/f"), Stat::file(1, UNIX_EPOCH, false));
        assert_eq!((f.perm, f.owner), (0o600, Some(me)));
        let d = access.shown(&tree, &path("d/sub"), Stat::dir(UNIX_EPOCH, false));
        assert_eq!(
            d.perm, 0o700,
            "a folder of a 0600 database: searched by its owner only"
        );
        let link = access.shown(&tree, &path("d/l"), Stat::symlink(3, UNIX_EPOCH));
        assert_eq!(link.perm, 0o777);
        // A real file keeps its own owner and mode; a name without a source is as the tree says.
        let own = Stat {
            owner: Some(Owner {
                uid: 4242,
                gid: 4242,
            }),
            ..Stat::file(1, UNIX_EPOCH, false)
        };
        assert_eq!(access.shown(&tree, &path("d/own"), own.clone()), own);
        let other = Stat::file(1, UNIX_EPOCH, false);
        assert_eq!(access.shown(&tree, &path("x/f"), other.clone()), other);
        // Several sources: group and others get what every one gives them.
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o755)).unwrap();
        let both =
            Access::default().shown(&tree, &path("both/f"), Stat::file(1, UNIX_EPOCH, false));
        assert_eq!(both.perm, 0o600, "a 0600 database and a 0755 folder");
        // A source that cannot be read: for the mount's user only.
        let gone = access.shown(&tree, &path("gone/sub"), Stat::dir(UNIX_EPOCH, false));
        assert_eq!((gone.perm, gone.owner), (0o700, None));
        // Read once: a chmod on disk while mounted shows after a remount.
        std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
        let f = access.shown(&tree, &path("d/f"), Stat::file(1, UNIX_EPOCH, false));
        assert_eq!(f.perm, 0o600);
        let f = Access::default().shown(&tree, &path("d/f"), Stat::file(1, UNIX_EPOCH, false));
        assert_eq!(f.perm, 0o644);
    }
}
