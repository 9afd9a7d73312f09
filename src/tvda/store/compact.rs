//! `worldfs compact DISK`: rewrite a TVDA disk the way a full save does, without the
//! discarded and shadowed entries that appends (the game's autosave, worldfs commits) leave
//! behind, with a fresh root listing and disk CRC.
//!
//! It refuses while the disk is mounted (the mount holds a shared lock on the file) and
//! writes through a temporary file renamed over the disk, so a crash leaves the old or the
//! new disk. A disk with nothing to drop is left untouched.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use crate::error::{Error, Result};
use crate::storekit::lock::StoreLock;
use crate::tvda::store::format::{sniff, DiskFormat};
use crate::tvda::store::tvda::Disk;

fn out_err(e: std::io::Error) -> Error {
    Error::from(e).context("writing the report")
}

/// Compacts the TVDA disk at `source`, reporting the sizes to `out`.
pub fn compact(source: &Path, out: &mut dyn Write) -> Result<ExitCode> {
    match sniff(source)? {
        Some(DiskFormat::Tvda) => {}
        Some(DiskFormat::Tevd) => {
            return Err(Error::unsupported(format!(
                "{}: a TEVD disk keeps no dead entries; there is nothing to compact",
                source.display()
            )))
        }
        None => {
            return Err(Error::unsupported(format!(
                "{}: not a TVDA disk",
                source.display()
            )))
        }
    }
    let _lock = StoreLock::exclusive(source)?;
    let mut disk = Disk::open(source, true)?;
    let before = std::fs::metadata(source)?.len();
    let dead = disk.dead_bytes();
    disk.compact()?;
    let after = std::fs::metadata(source)?.len();
    if after == before && dead == 0 {
        writeln!(
            out,
            "{}: already compact ({before} bytes)",
            source.display()
        )
    } else {
        writeln!(
            out,
            "{}: {before} -> {after} bytes ({dead} dead bytes dropped)",
            source.display()
        )
    }
    .map_err(out_err)?;
    Ok(ExitCode::SUCCESS)
}
