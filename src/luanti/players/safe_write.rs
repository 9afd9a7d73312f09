//! Crash-safe replacement of a small file: write a temporary file beside it, fsync it, rename
//! it over the original and fsync the folder — the same thing the engine's
//! `fs::safeWriteToFile` does, so a crash leaves either the old or the new file, never half.
//!
//! Temporary files start with `.` and end with [`TEMP_SUFFIX`]; folder listings of the files
//! backends skip names starting with `.`, so a leftover one is never taken for a player or mod.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::error::{Error, Result};

/// The suffix of temporary files.
pub const TEMP_SUFFIX: &str = ".worldfs-tmp";

/// Replaces (or creates) `path` with `bytes`, keeping the permissions of an existing file; a
/// new file gets `new_mode` (less the umask).
pub fn write_atomic(path: &Path, bytes: &[u8], new_mode: u32) -> Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| Error::invalid(format!("{}: no parent folder", path.display())))?;
    let name = path
        .file_name()
        .ok_or_else(|| Error::invalid(format!("{}: no file name", path.display())))?;
    let mut temp_name = std::ffi::OsString::from(".");
    temp_name.push(name);
    temp_name.push(TEMP_SUFFIX);
    let temp = dir.join(temp_name);
    let result = (|| -> Result<()> {
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(new_mode)
            .open(&temp)?;
        file.write_all(bytes)?;
        if let Ok(meta) = fs::metadata(path) {
            file.set_permissions(meta.permissions())?;
        }
        file.sync_all()?;
        fs::rename(&temp, path)?;
        File::open(dir)?.sync_all()?;
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    result.map_err(|e| e.context(path.display()))
}

/// Removes `path` and makes the removal durable.
pub fn remove_durably(path: &Path) -> Result<()> {
    fs::remove_file(path).map_err(|e| Error::from(e).context(path.display()))?;
    if let Some(dir) = path.parent() {
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn replaces_and_keeps_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("auth.txt");
        fs::write(&path, b"old").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        write_atomic(&path, b"new", 0o644).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"new");
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
        let fresh = dir.path().join("fresh");
        write_atomic(&fresh, b"x", 0o600).unwrap();
        let mode = fs::metadata(&fresh).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}
