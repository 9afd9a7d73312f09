//! The files auth backend: `WORLD/auth.txt`, replaced as a whole through a temporary file
//! and a rename (as the engine's `writeAuthFile` does), mode 0600 when created.

use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::luanti::codec::auth_line::{read_auth_file, render_auth, AuthEntry};
use crate::luanti::store::auth::AuthBackend;
use crate::luanti::store::auth::{diff, AuthChanges};
use crate::luanti::store::token;
use crate::storekit::replace::{read_no_follow, write_atomic};

/// The mode of a new auth.txt: it holds password hashes.
const FILE_MODE: u32 = 0o600;

/// A world's `auth.txt`.
pub struct FilesAuth {
    path: PathBuf,
}

impl FilesAuth {
    /// The backend for the file at `path` (usually `WORLD/auth.txt`); a missing file has no
    /// entries and is created by the first change.
    pub fn new(path: &Path) -> FilesAuth {
        FilesAuth {
            path: path.to_path_buf(),
        }
    }

    /// The file's identity, size and modification time, which change with every write of
    /// it (`None` while it does not exist).
    pub fn stamp(&self) -> Option<(u64, u64, u64, i64, i64)> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::symlink_metadata(&self.path).ok()?;
        Some((m.dev(), m.ino(), m.size(), m.mtime(), m.mtime_nsec()))
    }
}

impl AuthBackend for FilesAuth {
    fn backend(&self) -> &'static str {
        "files"
    }

    fn version(&self) -> Option<u64> {
        self.stamp().map(token)
    }

    /// The entries in file order.
    fn entries(&self) -> Result<Vec<AuthEntry>> {
        match read_no_follow(&self.path) {
            Ok(bytes) => read_auth_file(&bytes).map_err(|e| e.context(self.path.display())),
            Err(e) if e.errno() == libc::ENOENT => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    /// Writes the edited entries (already parsed and checked) when they differ from the file.
    fn apply(&mut self, edited: &[AuthEntry]) -> Result<AuthChanges> {
        let current = self.entries()?;
        let changes = diff(&current, edited);
        if current.as_slice() != edited {
            write_atomic(&self.path, &render_auth(edited), FILE_MODE)?;
        }
        Ok(changes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_auth_txt_that_is_a_link_is_never_read_through() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, b"root:HASH:server\n").unwrap();
        let world = dir.path().join("world");
        std::fs::create_dir(&world).unwrap();
        std::os::unix::fs::symlink(&secret, world.join("auth.txt")).unwrap();
        let e = FilesAuth::new(&world.join("auth.txt"))
            .entries()
            .unwrap_err();
        assert_eq!(e.errno(), libc::ELOOP, "{e}");
        assert!(FilesAuth::new(&world.join("missing.txt"))
            .entries()
            .unwrap()
            .is_empty());
    }
}
