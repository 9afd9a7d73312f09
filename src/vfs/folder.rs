//! Plain files of a real folder shown in the tree (a Luanti world's `world.mt`, `env_meta.txt`,
//! a Survivalcraft `Project.xml`): read and written as they are, replaced atomically
//! ([`crate::vfs::replace`]) so a crash leaves the old or the new file.
//!
//! Files show their own permission bits (a `world.mt` of mode 0600 holding a database
//! password stays 0600 through the mount, also with `--allow-other`), less the write bits on
//! a read-only mount, and a replaced file keeps its mode.
//!
//! Symbolic links in the folder are shown as links and never followed: anyone who can write
//! to a world folder could point one at any file of the user running worldfs. A link is
//! listed from `lstat` (mode 0777, size the target's length), its target is read with
//! `readlinkat` exactly as stored, and removing, renaming, touching or creating one acts on
//! the link itself (`unlinkat`, `renameat`, `utimensat` without following, `symlinkat`, all
//! in the folder's descriptor). Reading or writing a link's name as a file fails with
//! `ELOOP` (the kernel resolves links before it opens, so through a mount that only happens
//! by a race), and a whole-file replacement never follows one ([`crate::vfs::replace`]).

use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions};
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use nix::fcntl::{readlinkat, renameat};
use nix::sys::stat::{utimensat, UtimensatFlags};
use nix::sys::time::TimeSpec;
use nix::unistd::{symlinkat, unlinkat, UnlinkatFlags};

use crate::error::{Error, Result};
use crate::vfs::mtimes::content_hash;
use crate::vfs::replace::{is_temp_name, open_no_follow, remove_all_leftovers, write_atomic};
use crate::vfs::tree::{Entry, Kind, Stat, MAX_TREE_COOKIE};

/// Mode of a file created through the mount (less the umask).
const NEW_FILE_MODE: u32 = 0o644;

/// The regular files and links of one folder, minus the ones the tree shows otherwise.
pub struct FolderFiles {
    dir: PathBuf,
    hidden: fn(&str) -> bool,
    read_only: bool,
}

/// An error of a `*at` call on `name`.
fn at_error(name: &str, e: nix::errno::Errno) -> Error {
    Error::new(e as i32, format!("{name}: {e}"))
}

/// The listing cookie of the file `name`: its hash, in `first_cookie..` below
/// [`MAX_TREE_COOKIE`].
fn name_cookie(first_cookie: u64, name: &str) -> u64 {
    first_cookie + content_hash(name.as_bytes()) % (MAX_TREE_COOKIE / 2)
}

impl FolderFiles {
    /// The files of `dir` for which `hidden` is false. Read-write, the temporary files a
    /// crash left in `dir` are removed first.
    pub fn new(dir: &Path, hidden: fn(&str) -> bool, read_only: bool) -> FolderFiles {
        if !read_only {
            if let Err(e) = remove_all_leftovers(dir) {
                log::warn!(
                    "{}: cannot remove leftover temporary files: {e}",
                    dir.display()
                );
            }
        }
        FolderFiles {
            dir: dir.to_path_buf(),
            hidden,
            read_only,
        }
    }

    /// Whether `name` is one the folder shows (not hidden, not a temporary of worldfs).
    fn shown(&self, name: &str) -> bool {
        !(self.hidden)(name) && !is_temp_name(name)
    }

    fn path(&self, name: &str) -> Result<PathBuf> {
        if !self.shown(name) {
            return Err(Error::not_found(format!(
                "{name}: not a file of the world folder"
            )));
        }
        Ok(self.dir.join(name))
    }

    /// The folder itself, for the `*at` calls that act on its entries by name.
    fn open_dir(&self) -> Result<File> {
        OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
            .open(&self.dir)
            .map_err(|e| Error::from(e).context(self.dir.display()))
    }

    fn check_writable(&self) -> Result<()> {
        if self.read_only {
            return Err(Error::read_only("the mount is read-only"));
        }
        Ok(())
    }

    /// The visible regular files and links, sorted by name.
    pub fn names(&self) -> Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(&self.dir)? {
            let entry = entry?;
            let kind = entry.file_type()?;
            if !kind.is_file() && !kind.is_symlink() {
                continue;
            }
            if let Ok(name) = entry.file_name().into_string() {
                if self.shown(&name) {
                    names.push(name);
                }
            }
        }
        names.sort();
        Ok(names)
    }

    /// The visible files as listing entries. Each cookie comes from the file's name (at least
    /// `first_cookie`), so it stays the same while other files come and go: a listing paged
    /// across a `create` or an `unlink` neither skips nor repeats a file.
    pub fn entries(&self, first_cookie: u64) -> Result<Vec<Entry>> {
        let mut entries = Vec::new();
        let mut used = std::collections::BTreeSet::new();
        for name in self.names()? {
            if let Ok(stat) = self.stat(&name) {
                let mut cookie = name_cookie(first_cookie, &name);
                while !used.insert(cookie) {
                    cookie += 1;
                }
                entries.push(Entry { name, cookie, stat });
            }
        }
        Ok(entries)
    }

    /// The metadata (`lstat`: of a link itself) of an existing regular file or link.
    fn existing(&self, name: &str) -> Result<fs::Metadata> {
        let path = self.path(name)?;
        let md = fs::symlink_metadata(&path).map_err(|e| Error::from(e).context(name))?;
        if !md.is_file() && !md.file_type().is_symlink() {
            return Err(Error::not_found(format!("{name}: not a regular file")));
        }
        Ok(md)
    }

    /// Stat of one file (its size, mtime and own permission bits) or link.
    pub fn stat(&self, name: &str) -> Result<Stat> {
        let md = self.existing(name)?;
        if md.file_type().is_symlink() {
            return Ok(Stat::symlink(md.len(), md.modified()?));
        }
        let mut perm = (md.mode() & 0o777) as u16;
        if self.read_only {
            perm &= !0o222;
        }
        Ok(Stat {
            kind: Kind::File,
            size: md.len(),
            mtime: md.modified()?,
            perm,
        })
    }

    /// Content of one file (a link is refused with `ELOOP`).
    pub fn read(&self, name: &str) -> Result<Arc<Vec<u8>>> {
        let mut f = open_no_follow(&self.path(name)?, false)?;
        let mut data = Vec::new();
        f.read_to_end(&mut data)?;
        Ok(Arc::new(data))
    }

    /// The target of one link, as stored.
    pub fn readlink(&self, name: &str) -> Result<Vec<u8>> {
        self.path(name)?;
        let dir = self.open_dir()?;
        readlinkat(Some(dir.as_raw_fd()), name)
            .map(OsStringExt::into_vec)
            .map_err(|e| at_error(name, e))
    }

    /// Atomically replaces (or creates) one file, keeping its mode (a link is refused).
    pub fn write(&self, name: &str, data: &[u8]) -> Result<()> {
        self.check_writable()?;
        write_atomic(&self.path(name)?, data, NEW_FILE_MODE)
    }

    /// Creates link `name` pointing to `target`.
    pub fn symlink(&self, name: &str, target: &[u8]) -> Result<()> {
        self.check_writable()?;
        if !self.shown(name) {
            return Err(Error::not_permitted(format!(
                "{name}: a name of the world folder the tree shows otherwise or uses itself"
            )));
        }
        let dir = self.open_dir()?;
        symlinkat(OsStr::from_bytes(target), Some(dir.as_raw_fd()), name)
            .map_err(|e| at_error(name, e))?;
        dir.sync_all()?;
        Ok(())
    }

    /// Removes one file or link (never what a link points to).
    pub fn remove(&self, name: &str) -> Result<()> {
        self.check_writable()?;
        self.existing(name)?;
        let dir = self.open_dir()?;
        unlinkat(Some(dir.as_raw_fd()), name, UnlinkatFlags::NoRemoveDir)
            .map_err(|e| at_error(name, e))?;
        dir.sync_all()?;
        Ok(())
    }

    /// Renames one file or link inside the folder.
    pub fn rename(&self, from: &str, to: &str) -> Result<()> {
        self.check_writable()?;
        self.existing(from)?;
        self.path(to)?;
        let dir = self.open_dir()?;
        let fd = Some(dir.as_raw_fd());
        renameat(fd, from, fd, to).map_err(|e| at_error(from, e))?;
        dir.sync_all()?;
        Ok(())
    }

    /// Sets one file's mtime (of the file or link itself, never of what a link points to).
    pub fn set_mtime(&self, name: &str, mtime: SystemTime) -> Result<()> {
        self.check_writable()?;
        self.existing(name)?;
        let mtime = match mtime.duration_since(SystemTime::UNIX_EPOCH) {
            Ok(after) => TimeSpec::from_duration(after),
            Err(before) => -TimeSpec::from_duration(before.duration()),
        };
        let dir = self.open_dir()?;
        utimensat(
            Some(dir.as_raw_fd()),
            name,
            &TimeSpec::UTIME_OMIT,
            &mtime,
            UtimensatFlags::NoFollowSymlink,
        )
        .map_err(|e| at_error(name, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_stay_the_same_while_files_come_and_go() {
        let dir = tempfile::tempdir().unwrap();
        for n in ["b.txt", "d.txt", "f.txt"] {
            fs::write(dir.path().join(n), n).unwrap();
        }
        let f = FolderFiles::new(dir.path(), |_| false, false);
        let cookies = |f: &FolderFiles| -> Vec<(String, u64)> {
            let mut e: Vec<_> = f
                .entries(5)
                .unwrap()
                .into_iter()
                .map(|e| (e.name, e.cookie))
                .collect();
            e.sort();
            e
        };
        let before = cookies(&f);
        assert!(before.iter().all(|(_, c)| *c >= 5 && *c <= MAX_TREE_COOKIE));
        // A listing resumed after a create or an unlink finds every other file where it was.
        fs::write(dir.path().join("a.txt"), "new").unwrap();
        fs::remove_file(dir.path().join("d.txt")).unwrap();
        let after = cookies(&f);
        for (name, cookie) in &before {
            if name != "d.txt" {
                assert!(after.contains(&(name.clone(), *cookie)), "{name}");
            }
        }
    }

    #[test]
    fn lists_reads_writes_and_hides() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("world.mt"), "gameid = minetest\n").unwrap();
        fs::write(dir.path().join("map.sqlite"), "db").unwrap();
        fs::create_dir(dir.path().join("worldmods")).unwrap();
        let f = FolderFiles::new(dir.path(), |n| n.starts_with("map.sqlite"), false);
        assert_eq!(f.names().unwrap(), vec!["world.mt"]);
        assert!(f.stat("map.sqlite").is_err());
        f.write("world.mt", b"gameid = other\n").unwrap();
        assert_eq!(&**f.read("world.mt").unwrap(), b"gameid = other\n");
        assert_eq!(f.names().unwrap(), vec!["world.mt"], "no temporary left");
        let ro = FolderFiles::new(dir.path(), |_| false, true);
        assert_eq!(ro.write("world.mt", b"x").unwrap_err().errno(), libc::EROFS);
        let left = dir.path().join(".worldfs-world.mt.123.4.tmp");
        fs::write(&left, b"half").unwrap();
        FolderFiles::new(dir.path(), |_| false, true);
        assert!(left.exists(), "a read-only mount removes nothing");
        FolderFiles::new(dir.path(), |_| false, false);
        assert!(
            !left.exists(),
            "a crash's leftover is removed at a read-write mount"
        );
    }

    #[test]
    fn links_in_the_folder_are_shown_as_links_and_never_followed() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().unwrap();
        let world = dir.path().join("world");
        fs::create_dir(&world).unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, b"secret").unwrap();
        fs::write(world.join("env_meta.txt"), b"time = 1\n").unwrap();
        let f = FolderFiles::new(&world, |n| n.starts_with("map.sqlite"), false);
        // Planted while mounted: the old fixed temporary name, and a world file.
        symlink(&victim, world.join(".worldfs-env_meta.txt.tmp")).unwrap();
        symlink(&victim, world.join("linked.txt")).unwrap();
        f.write("env_meta.txt", b"time = 2\n").unwrap();
        assert_eq!(
            fs::read(&victim).unwrap(),
            b"secret",
            "the planted link was followed"
        );
        assert_eq!(&**f.read("env_meta.txt").unwrap(), b"time = 2\n");
        assert_eq!(f.names().unwrap(), vec!["env_meta.txt", "linked.txt"]);
        let target = victim.as_os_str().as_encoded_bytes().to_vec();
        let st = f.stat("linked.txt").unwrap();
        assert_eq!(st.kind, Kind::Symlink);
        assert_eq!(
            st.size,
            target.len() as u64,
            "lstat size: the target's length"
        );
        assert_eq!(st.perm, 0o777);
        let listed = f.entries(1).unwrap();
        assert_eq!(listed[1].name, "linked.txt");
        assert_eq!(listed[1].stat.kind, Kind::Symlink);
        assert_eq!(f.readlink("linked.txt").unwrap(), target);
        assert_eq!(
            f.readlink("env_meta.txt").unwrap_err().errno(),
            libc::EINVAL
        );
        // Reading or writing a link as a file never goes through it.
        for e in [
            f.read("linked.txt").unwrap_err(),
            f.write("linked.txt", b"x").unwrap_err(),
        ] {
            assert_eq!(e.errno(), libc::ELOOP, "{e}");
            assert!(e.message().contains("symbolic link"), "{e}");
        }
        // Touching a link sets the link's own time.
        f.set_mtime("linked.txt", SystemTime::UNIX_EPOCH).unwrap();
        assert_eq!(
            fs::symlink_metadata(world.join("linked.txt"))
                .unwrap()
                .modified()
                .unwrap(),
            SystemTime::UNIX_EPOCH
        );
        assert_ne!(
            fs::metadata(&victim).unwrap().modified().unwrap(),
            SystemTime::UNIX_EPOCH
        );
        // Renaming moves the link, removing removes the link: the target stays.
        f.rename("linked.txt", "moved.txt").unwrap();
        assert!(fs::symlink_metadata(world.join("linked.txt")).is_err());
        assert_eq!(f.readlink("moved.txt").unwrap(), target);
        f.remove("moved.txt").unwrap();
        assert!(fs::symlink_metadata(world.join("moved.txt")).is_err());
        assert_eq!(fs::read(&victim).unwrap(), b"secret");
        assert_eq!(f.names().unwrap(), vec!["env_meta.txt"]);
        // A link named like a file the tree shows otherwise stays hidden and untouched.
        symlink(&victim, world.join("map.sqlite")).unwrap();
        assert_eq!(f.names().unwrap(), vec!["env_meta.txt"]);
        for e in [
            f.stat("map.sqlite").unwrap_err(),
            f.readlink("map.sqlite").unwrap_err(),
            f.remove("map.sqlite").unwrap_err(),
        ] {
            assert_eq!(e.errno(), libc::ENOENT, "{e}");
        }
        assert!(fs::symlink_metadata(world.join("map.sqlite")).is_ok());
    }

    #[test]
    fn links_are_made_in_the_folder_as_given() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("world.mt"), b"gameid = x\n").unwrap();
        let f = FolderFiles::new(dir.path(), |n| n.starts_with("map.sqlite"), false);
        let odd: &[u8] = b"../outside/\xff name";
        f.symlink("odd", odd).unwrap();
        f.symlink("rel", b"world.mt").unwrap();
        let made = fs::read_link(dir.path().join("odd")).unwrap();
        assert_eq!(
            made.as_os_str().as_bytes(),
            odd,
            "the target is stored as given"
        );
        assert_eq!(f.readlink("odd").unwrap(), odd);
        assert_eq!(f.stat("rel").unwrap().kind, Kind::Symlink);
        assert_eq!(f.stat("rel").unwrap().size, 8);
        assert_eq!(
            f.symlink("world.mt", b"x").unwrap_err().errno(),
            libc::EEXIST
        );
        assert_eq!(
            f.symlink("map.sqlite", b"x").unwrap_err().errno(),
            libc::EPERM
        );
        assert_eq!(
            f.symlink(".worldfs-a.1.2.tmp", b"x").unwrap_err().errno(),
            libc::EPERM
        );
        assert_eq!(&**f.read("world.mt").unwrap(), b"gameid = x\n");
        let ro = FolderFiles::new(dir.path(), |_| false, true);
        assert_eq!(ro.symlink("new", b"x").unwrap_err().errno(), libc::EROFS);
        assert_eq!(ro.remove("odd").unwrap_err().errno(), libc::EROFS);
        assert_eq!(ro.readlink("odd").unwrap(), odd);
    }

    #[test]
    fn files_show_and_keep_their_own_mode() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("world.mt");
        fs::write(&secret, b"pgsql_connection = password=x\n").unwrap();
        fs::set_permissions(&secret, fs::Permissions::from_mode(0o600)).unwrap();
        fs::write(dir.path().join("run.sh"), b"#!/bin/sh\n").unwrap();
        fs::set_permissions(dir.path().join("run.sh"), fs::Permissions::from_mode(0o750)).unwrap();
        let f = FolderFiles::new(dir.path(), |_| false, false);
        assert_eq!(f.stat("world.mt").unwrap().perm, 0o600);
        assert_eq!(f.stat("run.sh").unwrap().perm, 0o750);
        let listed: Vec<u16> = f.entries(1).unwrap().iter().map(|e| e.stat.perm).collect();
        assert_eq!(listed, vec![0o750, 0o600]);
        f.write("world.mt", b"pgsql_connection = password=y\n")
            .unwrap();
        let mode = fs::metadata(&secret).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o600, "the replaced file keeps its mode");
        assert_eq!(f.stat("world.mt").unwrap().perm, 0o600);
        let ro = FolderFiles::new(dir.path(), |_| false, true);
        assert_eq!(ro.stat("world.mt").unwrap().perm, 0o400);
        assert_eq!(ro.stat("run.sh").unwrap().perm, 0o550);
    }
}
