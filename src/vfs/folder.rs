//! Plain files of a real folder shown in the tree (a Luanti world's `world.mt`, `env_meta.txt`,
//! a Survivalcraft `Project.xml`): read and written as they are, replaced atomically
//! ([`crate::vfs::replace`]) so a crash leaves the old or the new file.
//!
//! Files show their own permission bits (a `world.mt` of mode 0600 holding a database
//! password stays 0600 through the mount, also with `--allow-other`), less the write bits on
//! a read-only mount, and a replaced file keeps its mode. Links in the folder are never
//! followed: anyone who can write to a world folder could point one at any file of the
//! user running worldfs. The tree contract has no symlink kind, so links are left out of the
//! listing and opening, writing, renaming or touching one by name fails with `ELOOP`.

use std::fs;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use nix::sys::stat::{utimensat, UtimensatFlags};
use nix::sys::time::TimeSpec;

use crate::error::{Error, Result};
use crate::vfs::replace::{
    is_temp_name, link_refused, open_no_follow, remove_all_leftovers, write_atomic,
};
use crate::vfs::tree::{Entry, Kind, Stat};

/// Mode of a file created through the mount (less the umask).
const NEW_FILE_MODE: u32 = 0o644;

/// The regular files of one folder, minus the ones the tree shows otherwise.
pub struct FolderFiles {
    dir: PathBuf,
    hidden: fn(&str) -> bool,
    read_only: bool,
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

    fn path(&self, name: &str) -> Result<PathBuf> {
        if (self.hidden)(name) || is_temp_name(name) {
            return Err(Error::not_found(format!(
                "{name}: not a file of the world folder"
            )));
        }
        Ok(self.dir.join(name))
    }

    fn check_writable(&self) -> Result<()> {
        if self.read_only {
            return Err(Error::read_only("the mount is read-only"));
        }
        Ok(())
    }

    /// The visible regular files, sorted by name.
    pub fn names(&self) -> Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(&self.dir)? {
            let entry = entry?;
            if !entry.file_type()?.is_file() {
                continue;
            }
            if let Ok(name) = entry.file_name().into_string() {
                if !(self.hidden)(&name) && !is_temp_name(&name) {
                    names.push(name);
                }
            }
        }
        names.sort();
        Ok(names)
    }

    /// The visible files as listing entries, cookies counting up from `first_cookie`.
    pub fn entries(&self, first_cookie: u64) -> Result<Vec<Entry>> {
        let mut entries = Vec::new();
        for (i, name) in self.names()?.into_iter().enumerate() {
            if let Ok(stat) = self.stat(&name) {
                entries.push(Entry {
                    name,
                    cookie: first_cookie + i as u64,
                    stat,
                });
            }
        }
        Ok(entries)
    }

    /// The path of an existing regular file (not a link) of the folder, and its metadata.
    fn existing(&self, name: &str) -> Result<(PathBuf, fs::Metadata)> {
        let path = self.path(name)?;
        let md = fs::symlink_metadata(&path).map_err(|e| Error::from(e).context(name))?;
        if md.file_type().is_symlink() {
            return Err(link_refused(&path));
        }
        if !md.is_file() {
            return Err(Error::not_found(format!("{name}: not a regular file")));
        }
        Ok((path, md))
    }

    /// Stat of one file: its size, mtime and own permission bits.
    pub fn stat(&self, name: &str) -> Result<Stat> {
        let (_, md) = self.existing(name)?;
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

    /// Content of one file.
    pub fn read(&self, name: &str) -> Result<Arc<Vec<u8>>> {
        let mut f = open_no_follow(&self.path(name)?, false)?;
        let mut data = Vec::new();
        f.read_to_end(&mut data)?;
        Ok(Arc::new(data))
    }

    /// Atomically replaces (or creates) one file, keeping its mode.
    pub fn write(&self, name: &str, data: &[u8]) -> Result<()> {
        self.check_writable()?;
        write_atomic(&self.path(name)?, data, NEW_FILE_MODE)
    }

    /// Removes one file.
    pub fn remove(&self, name: &str) -> Result<()> {
        self.check_writable()?;
        let (path, _) = self.existing(name)?;
        fs::remove_file(path)?;
        Ok(())
    }

    /// Renames one file inside the folder.
    pub fn rename(&self, from: &str, to: &str) -> Result<()> {
        self.check_writable()?;
        let (from, _) = self.existing(from)?;
        fs::rename(from, self.path(to)?)?;
        Ok(())
    }

    /// Sets one file's mtime (of the file itself, never of what a link points to).
    pub fn set_mtime(&self, name: &str, mtime: SystemTime) -> Result<()> {
        self.check_writable()?;
        let (path, _) = self.existing(name)?;
        let mtime = match mtime.duration_since(SystemTime::UNIX_EPOCH) {
            Ok(after) => TimeSpec::from_duration(after),
            Err(before) => -TimeSpec::from_duration(before.duration()),
        };
        utimensat(
            None,
            &path,
            &TimeSpec::UTIME_OMIT,
            &mtime,
            UtimensatFlags::NoFollowSymlink,
        )
        .map_err(|e| Error::new(e as i32, format!("{name}: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn links_in_the_folder_are_never_followed() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().unwrap();
        let world = dir.path().join("world");
        fs::create_dir(&world).unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, b"secret").unwrap();
        fs::write(world.join("env_meta.txt"), b"time = 1\n").unwrap();
        let f = FolderFiles::new(&world, |_| false, false);
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
        assert_eq!(
            f.names().unwrap(),
            vec!["env_meta.txt"],
            "links are not listed"
        );
        for e in [
            f.stat("linked.txt").unwrap_err(),
            f.read("linked.txt").unwrap_err(),
            f.write("linked.txt", b"x").unwrap_err(),
            f.set_mtime("linked.txt", SystemTime::UNIX_EPOCH)
                .unwrap_err(),
            f.rename("linked.txt", "other.txt").unwrap_err(),
        ] {
            assert_eq!(e.errno(), libc::ELOOP, "{e}");
            assert!(e.message().contains("symbolic link"), "{e}");
        }
        assert_eq!(fs::read(&victim).unwrap(), b"secret");
        assert!(fs::symlink_metadata(world.join("linked.txt"))
            .unwrap()
            .file_type()
            .is_symlink());
        assert_ne!(
            fs::metadata(&victim).unwrap().modified().unwrap(),
            SystemTime::UNIX_EPOCH
        );
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
