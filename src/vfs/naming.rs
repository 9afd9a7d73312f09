//! Names and paths as the core sees them: a path is one name per level below the mount's
//! root; the bounds a request's names and sizes are checked against (the depth shown, the
//! length of a name, the largest file) and the messages that name a path. The bottom of the
//! core: it imports nothing of it.

use crate::error::{Error, Result};

/// The largest file the core holds (writes and truncations past it fail with `EFBIG`).
pub const MAX_FILE_SIZE: u64 = 256 << 20;

/// The path shown in messages: `blocks/0,0,0/nodes.cubeset`.
pub fn display_path(path: &[String]) -> String {
    if path.is_empty() {
        "/".to_string()
    } else {
        path.join("/")
    }
}

/// The deepest path the mount shows, in names below its root. The core names what it holds
/// by path and a world folder's file is opened by its path, so a request costs time in the
/// length of its path; a bound on depth is a bound on that cost. A world folder nested
/// deeper (the games' own trees are a few levels) is shown to this depth, and a name below
/// it answers `ENAMETOOLONG`, as a path longer than `PATH_MAX` does on disk.
pub const DEEPEST: usize = 256;

/// The path of `name` in folder `dir`; `ENAMETOOLONG` below [`DEEPEST`].
pub(super) fn child(dir: &[String], name: &str) -> Result<Vec<String>> {
    if dir.len() >= DEEPEST {
        return Err(Error::new(
            libc::ENAMETOOLONG,
            format!(
                "{}/{name}: deeper than the {DEEPEST} levels the mount shows (read it in the world folder itself)",
                display_path(&dir[..3.min(dir.len())]) + "/…"
            ),
        ));
    }
    Ok(listed_child(dir, name))
}

/// The path of entry `name` of a listing of `dir` (listed whatever its depth).
pub(super) fn listed_child(dir: &[String], name: &str) -> Vec<String> {
    let mut p = dir.to_vec();
    p.push(name.to_string());
    p
}

/// `path` moved from below `from` to below `to`, if it is below `from`.
pub(super) fn rebased(path: &[String], from: &[String], to: &[String]) -> Option<Vec<String>> {
    (path.len() > from.len() && path.starts_with(from)).then(|| {
        let mut p = to.to_vec();
        p.extend_from_slice(&path[from.len()..]);
        p
    })
}

/// The longest file name (bytes) the kernel's other filesystems accept; longer names are
/// `ENAMETOOLONG`, as POSIX says, also for names that do not exist.
pub const NAME_MAX: usize = 255;

/// The permission bits of a mode (`chmod`, `create`), the sticky bit included (a world
/// folder's sub-folder keeps it, and the kernel enforces it as shown): the file type and the
/// set-id bits are not kept (the mount is nosuid).
const PERMISSION_BITS: u32 = 0o1777;

pub(super) fn permission_bits(mode: u32) -> u16 {
    (mode & PERMISSION_BITS) as u16
}

pub(super) fn check_length(name: &str) -> Result<()> {
    if name.len() > NAME_MAX {
        return Err(Error::new(
            libc::ENAMETOOLONG,
            format!("file name of {} bytes (at most {NAME_MAX})", name.len()),
        ));
    }
    Ok(())
}

pub(super) fn check_name(name: &str) -> Result<()> {
    check_length(name)?;
    if name.is_empty() || name == "." || name == ".." || name.contains('/') || name.contains('\0') {
        return Err(Error::invalid(format!("invalid file name {name:?}")));
    }
    Ok(())
}

pub(super) fn check_size(size: u64) -> Result<usize> {
    if size > MAX_FILE_SIZE {
        return Err(Error::new(
            libc::EFBIG,
            format!("file too large (limit {} MiB)", MAX_FILE_SIZE >> 20),
        ));
    }
    usize::try_from(size).map_err(|_| Error::new(libc::EFBIG, "file too large"))
}
