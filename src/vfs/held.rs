//! Text the core holds for files the tree does not store: scratch files and text a commit did
//! not take.
//!
//! Such text can be large (a failed save of a big block, an editor's copy of a big file) and
//! lives until it is removed or the mount ends, so above [`MEMORY_LIMIT`] it goes to a private
//! file in the state folder: memory stays bounded however much text is held. At unmount the
//! text no commit took is saved to a recovery folder ([`save_private`]), so nothing written is
//! lost. Every file made here is created new (`O_EXCL`, never through a symlink) and readable
//! by its owner only, since held text may be a copy of a secret (`auth.txt`).

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};

/// Held text up to this size stays in memory; larger text goes to a file.
pub const MEMORY_LIMIT: usize = 64 << 10;

/// Where held text larger than [`MEMORY_LIMIT`] goes.
pub struct Spill {
    /// A folder of this daemon's own (`None`: everything stays in memory).
    dir: Option<PathBuf>,
    next: AtomicU64,
}

/// Held text: in memory or in a file of the spill folder (removed when dropped).
pub enum Text {
    Memory(Vec<u8>),
    /// `path` is `root` followed by the path of the file the text was held for, so that
    /// text a killed daemon left behind says what it was (see `mount::keep_orphaned_held`).
    File {
        root: PathBuf,
        path: PathBuf,
        len: u64,
    },
}

/// Makes `dir` and its missing parents, readable by the owner only.
pub fn private_dir(dir: &Path) -> Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| Error::from(e).context(dir.display()))
}

/// Writes `data` to the new file `path` (fails if it exists or is a symlink), mode 0600.
pub fn save_private(path: &Path, data: &[u8]) -> Result<()> {
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| Error::from(e).context(path.display()))?;
    f.write_all(data)
        .and_then(|()| f.sync_all())
        .map_err(|e| Error::from(e).context(path.display()))
}

impl Spill {
    /// Spills into `dir` (made on first use, mode 0700), or nowhere.
    pub fn new(dir: Option<PathBuf>) -> Spill {
        Spill {
            dir,
            next: AtomicU64::new(1),
        }
    }

    /// Holds `data`, the text of the mount's file `at`: in memory when small or when it
    /// cannot be written out (logged), else in `DIR/N/AT`.
    pub fn hold(&self, at: &[String], data: Vec<u8>) -> Text {
        let Some(dir) = self.dir.as_ref().filter(|_| data.len() > MEMORY_LIMIT) else {
            return Text::Memory(data);
        };
        let root = dir.join(self.next.fetch_add(1, Ordering::Relaxed).to_string());
        let mut path = root.clone();
        path.extend(at);
        let written = path
            .parent()
            .map_or(Ok(()), private_dir)
            .and_then(|()| save_private(&path, &data));
        match written {
            Ok(()) => Text::File {
                root,
                path,
                len: data.len() as u64,
            },
            Err(e) => {
                remove_up_to(&path, &root);
                log::warn!("cannot move held text out of memory: {e}");
                Text::Memory(data)
            }
        }
    }

    /// The folder it spills into, if any.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// Removes the spill folder (after every held text is dropped).
    pub fn remove(&self) {
        if let Some(dir) = &self.dir {
            let _ = fs::remove_dir(dir);
        }
    }
}

impl Text {
    /// Its size in bytes.
    pub fn len(&self) -> u64 {
        match self {
            Text::Memory(d) => d.len() as u64,
            Text::File { len, .. } => *len,
        }
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// All of its bytes.
    pub fn bytes(&self) -> Result<Vec<u8>> {
        match self {
            Text::Memory(d) => Ok(d.clone()),
            Text::File { path, .. } => {
                fs::read(path).map_err(|e| Error::from(e).context(path.display()))
            }
        }
    }

    /// Saves a copy to the new file `dest` (mode 0600).
    pub fn save(&self, dest: &Path) -> Result<()> {
        save_private(dest, &self.bytes()?)
    }

    /// The file it was held for moved to the mount's `at` (a folder above it was renamed):
    /// a spilled text's file is renamed to say so; where that fails (logged) it keeps its
    /// old name and its bytes.
    pub fn move_to(&mut self, at: &[String]) {
        let Text::File { root, path, .. } = self else {
            return;
        };
        let mut dest = root.clone();
        dest.extend(at);
        if dest == *path {
            return;
        }
        let moved = dest.parent().map_or(Ok(()), private_dir).and_then(|()| {
            fs::rename(&*path, &dest).map_err(|e| Error::from(e).context(dest.display()))
        });
        match moved {
            Ok(()) => {
                let old = std::mem::replace(path, dest);
                remove_up_to(&old, root);
            }
            Err(e) => log::warn!("held text keeps its old name: {e}"),
        }
    }
}

/// Removes the file `path` and its empty folders up to `root`, which it is below.
fn remove_up_to(path: &Path, root: &Path) {
    let _ = fs::remove_file(path);
    let mut dir = path.parent();
    while let Some(d) = dir.filter(|d| d.starts_with(root)) {
        if fs::remove_dir(d).is_err() {
            break;
        }
        dir = d.parent();
    }
}

impl Drop for Text {
    fn drop(&mut self) {
        if let Text::File { root, path, .. } = self {
            remove_up_to(path, root);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn large_text_goes_to_a_private_file_removed_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let spill = Spill::new(Some(dir.path().join("held")));
        let at = [
            "blocks".to_string(),
            "0,0,0".to_string(),
            "nodes.cubeset".to_string(),
        ];
        let small = spill.hold(&at, b"tiny".to_vec());
        assert!(matches!(small, Text::Memory(_)));
        let big = vec![7u8; MEMORY_LIMIT + 1];
        let held = spill.hold(&at, big.clone());
        let Text::File { path, .. } = &held else {
            panic!("large text stayed in memory");
        };
        let path = path.clone();
        assert!(
            path.ends_with("blocks/0,0,0/nodes.cubeset"),
            "{}: the name does not say whose text it is",
            path.display()
        );
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let folder = fs::metadata(dir.path().join("held")).unwrap();
        assert_eq!(folder.permissions().mode() & 0o777, 0o700);
        assert_eq!(held.len(), big.len() as u64);
        assert_eq!(held.bytes().unwrap(), big);
        let mut held = held;
        let moved = ["mods".to_string(), "m".to_string(), "big".to_string()];
        held.move_to(&moved);
        let Text::File { path: now, .. } = &held else {
            panic!("moved text left its file");
        };
        assert!(now.ends_with("mods/m/big"), "{}", now.display());
        assert!(!path.exists() && !path.parent().unwrap().exists());
        assert_eq!(held.bytes().unwrap(), big);
        let path = now.clone();
        drop(held);
        assert!(!path.exists());
        assert_eq!(fs::read_dir(dir.path().join("held")).unwrap().count(), 0);
        spill.remove();
        assert!(!dir.path().join("held").exists());
    }

    #[test]
    fn saving_never_replaces_a_file_or_follows_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        fs::write(&target, b"keep").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let text = Text::Memory(b"secret".to_vec());
        assert!(text.save(&link).is_err());
        assert!(text.save(&target).is_err());
        assert_eq!(fs::read(&target).unwrap(), b"keep");
        let new = dir.path().join("new");
        text.save(&new).unwrap();
        assert_eq!(fs::read(&new).unwrap(), b"secret");
        assert_eq!(
            fs::metadata(&new).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
}
