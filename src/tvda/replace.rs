//! Crash-safe replacement of a whole disk file: write a temporary file beside it, fsync it,
//! rename it over the original and fsync the directory. A crash at any moment leaves either
//! the old file or the new one under the original name; a leftover temporary file is
//! overwritten by the next replacement.

use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The temporary file used while replacing `path`.
pub fn temp_path(path: &Path) -> Result<PathBuf> {
    let name = path
        .file_name()
        .ok_or_else(|| Error::invalid(format!("{} has no file name", path.display())))?;
    let mut tmp = std::ffi::OsString::from(".");
    tmp.push(name);
    tmp.push(".worldfs-tmp");
    Ok(path.with_file_name(tmp))
}

/// Replaces `path` with what `write` produces; the original's permissions are kept.
pub fn replace_file(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> Result<()>,
) -> Result<()> {
    let tmp = temp_path(path)?;
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)
        .map_err(|e| Error::from(e).context(tmp.display()))?;
    if let Ok(meta) = fs::metadata(path) {
        file.set_permissions(meta.permissions())?;
    }
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let written = write(&mut out).and_then(|()| {
        out.flush()?;
        out.get_ref().sync_all()?;
        Ok(())
    });
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    drop(out);
    fs::rename(&tmp, path).map_err(|e| Error::from(e).context(path.display()))?;
    sync_dir(path)
}

/// Fsyncs the directory holding `path`, so a rename survives a crash.
fn sync_dir(path: &Path) -> Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()?;
    Ok(())
}
