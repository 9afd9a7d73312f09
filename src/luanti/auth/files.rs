//! The files auth backend: `WORLD/auth.txt`, replaced as a whole through a temporary file
//! and a rename (as the engine's `writeAuthFile` does), mode 0600 when created.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::luanti::auth::line::{read_auth_file, render_auth, AuthEntry};
use crate::luanti::auth::{diff, AuthChanges};
use crate::vfs::replace::write_atomic;

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

    /// The entries in file order.
    pub fn entries(&self) -> Result<Vec<AuthEntry>> {
        match std::fs::read(&self.path) {
            Ok(bytes) => read_auth_file(&bytes).map_err(|e| e.context(self.path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(Error::from(e).context(self.path.display())),
        }
    }

    /// Writes the edited entries (already parsed and checked) when they differ from the file.
    pub fn apply(&mut self, edited: &[AuthEntry]) -> Result<AuthChanges> {
        let current = self.entries()?;
        let changes = diff(&current, edited);
        if current.as_slice() != edited {
            write_atomic(&self.path, &render_auth(edited), FILE_MODE)?;
        }
        Ok(changes)
    }
}
