//! Plain files of a real folder shown in the tree (a Luanti world's `world.mt`, `env_meta.txt`,
//! a Survivalcraft `Project.xml`): read and written as they are, replaced atomically
//! (temporary file, fsync, rename) so a crash leaves the old or the new file.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use crate::error::{Error, Result};
use crate::vfs::tree::{Entry, Kind, Stat};

/// The regular files of one folder, minus the ones the tree shows otherwise.
pub struct FolderFiles {
    dir: PathBuf,
    hidden: fn(&str) -> bool,
    read_only: bool,
}

impl FolderFiles {
    /// The files of `dir` for which `hidden` is false.
    pub fn new(dir: &Path, hidden: fn(&str) -> bool, read_only: bool) -> FolderFiles {
        FolderFiles {
            dir: dir.to_path_buf(),
            hidden,
            read_only,
        }
    }

    fn path(&self, name: &str) -> Result<PathBuf> {
        if (self.hidden)(name) || name.starts_with(".worldfs-") {
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
                if !(self.hidden)(&name) && !name.starts_with(".worldfs-") {
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

    /// Stat of one file.
    pub fn stat(&self, name: &str) -> Result<Stat> {
        let md = fs::metadata(self.path(name)?)?;
        if !md.is_file() {
            return Err(Error::not_found(format!("{name}: not a regular file")));
        }
        Ok(Stat {
            kind: Kind::File,
            size: md.len(),
            mtime: md.modified()?,
            perm: if self.read_only { 0o444 } else { 0o644 },
        })
    }

    /// Content of one file.
    pub fn read(&self, name: &str) -> Result<Arc<Vec<u8>>> {
        Ok(Arc::new(fs::read(self.path(name)?)?))
    }

    /// Atomically replaces (or creates) one file.
    pub fn write(&self, name: &str, data: &[u8]) -> Result<()> {
        self.check_writable()?;
        let target = self.path(name)?;
        let tmp = self.dir.join(format!(".worldfs-{name}.tmp"));
        let mut f = fs::File::create(&tmp)?;
        f.write_all(data)?;
        f.sync_all()?;
        if let Ok(md) = fs::metadata(&target) {
            fs::set_permissions(&tmp, md.permissions())?;
        }
        fs::rename(&tmp, &target)?;
        if let Ok(d) = fs::File::open(&self.dir) {
            let _ = d.sync_all();
        }
        Ok(())
    }

    /// Removes one file.
    pub fn remove(&self, name: &str) -> Result<()> {
        self.check_writable()?;
        fs::remove_file(self.path(name)?)?;
        Ok(())
    }

    /// Renames one file inside the folder.
    pub fn rename(&self, from: &str, to: &str) -> Result<()> {
        self.check_writable()?;
        fs::rename(self.path(from)?, self.path(to)?)?;
        Ok(())
    }

    /// Sets one file's mtime.
    pub fn set_mtime(&self, name: &str, mtime: SystemTime) -> Result<()> {
        self.check_writable()?;
        let f = fs::OpenOptions::new().write(true).open(self.path(name)?)?;
        f.set_modified(mtime)?;
        Ok(())
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
    }
}
