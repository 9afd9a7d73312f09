//! Read access to one stored file, whether it is a plain file of a world folder or an
//! entry of a `.scworld` ZIP.
//!
//! A ZIP entry is deflated and cannot be read at an offset, so the first read past its
//! beginning extracts it once to an anonymous temporary file; reading just the start (a
//! directory at open) streams only those bytes. Memory use stays bounded either way.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{Arc, Mutex};

use zip::ZipArchive;

use crate::error::{lock, Error, Result};

/// A shared, opened `.scworld` archive.
pub(crate) type Archive = Arc<Mutex<ZipArchive<File>>>;

/// One stored file.
pub(crate) enum Blob {
    /// A plain file.
    File(File),
    /// A ZIP entry, extracted on the first read past its start.
    Entry {
        archive: Archive,
        name: String,
        size: u64,
        extracted: Mutex<Option<File>>,
    },
}

fn zip_error(e: zip::result::ZipError) -> Error {
    Error::corrupt(format!("zip: {e}"))
}

impl Blob {
    /// Whether this is the file now at `path` (the same inode): false when another program
    /// replaced it (or removed it) since it was opened. An entry of an archive is never.
    pub(crate) fn is_at(&self, path: &Path) -> Result<bool> {
        use std::os::unix::fs::MetadataExt;
        let Blob::File(f) = self else {
            return Ok(false);
        };
        let open = f.metadata()?;
        Ok(std::fs::symlink_metadata(path)
            .is_ok_and(|now| now.dev() == open.dev() && now.ino() == open.ino()))
    }

    /// An archive entry by name.
    pub(crate) fn entry(archive: &Archive, name: &str) -> Result<Blob> {
        let size = lock(archive)?.by_name(name).map_err(zip_error)?.size();
        Ok(Blob::Entry {
            archive: archive.clone(),
            name: name.to_string(),
            size,
            extracted: Mutex::new(None),
        })
    }

    /// Length in bytes.
    pub(crate) fn len(&self) -> Result<u64> {
        match self {
            Blob::File(f) => Ok(f.metadata()?.len()),
            Blob::Entry { size, .. } => Ok(*size),
        }
    }

    /// Up to `n` bytes from the start (fewer if the file is shorter).
    pub(crate) fn head(&self, n: usize) -> Result<Vec<u8>> {
        match self {
            Blob::File(f) => {
                let len = f.metadata()?.len().min(n as u64) as usize;
                self.read_at(0, len)
            }
            Blob::Entry { archive, name, .. } => {
                let mut a = lock(archive)?;
                let entry = a.by_name(name).map_err(zip_error)?;
                let mut out = Vec::with_capacity(n.min(1 << 20));
                entry
                    .take(n as u64)
                    .read_to_end(&mut out)
                    .map_err(|e| Error::corrupt(format!("zip entry {name}: {e}")))?;
                Ok(out)
            }
        }
    }

    /// Exactly `len` bytes at `offset`; a short file is a corrupt-data error.
    pub(crate) fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let total = self.len()?;
        if offset
            .checked_add(len as u64)
            .map_or(true, |end| end > total)
        {
            return Err(Error::corrupt(format!(
                "{len} bytes at {offset} are past the end of the file ({total} bytes)"
            )));
        }
        let mut buf = vec![0u8; len];
        match self {
            Blob::File(f) => f.read_exact_at(&mut buf, offset)?,
            Blob::Entry {
                archive,
                name,
                extracted,
                size,
            } => {
                let mut slot = lock(extracted)?;
                if slot.is_none() {
                    let mut tmp = tempfile::tempfile()?;
                    let mut a = lock(archive)?;
                    let entry = a.by_name(name).map_err(zip_error)?;
                    std::io::copy(&mut entry.take(*size), &mut tmp)
                        .map_err(|e| Error::corrupt(format!("zip entry {name}: {e}")))?;
                    *slot = Some(tmp);
                }
                if let Some(f) = slot.as_ref() {
                    f.read_exact_at(&mut buf, offset)?;
                }
            }
        }
        Ok(buf)
    }

    /// The whole content (bounded by `max` bytes).
    pub(crate) fn read_all(&self, max: u64) -> Result<Vec<u8>> {
        let len = self.len()?;
        if len > max {
            return Err(Error::corrupt(format!(
                "file of {len} bytes is larger than {max}"
            )));
        }
        self.read_at(0, len as usize)
    }
}
