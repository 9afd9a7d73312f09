//! Writable temporary copies of the samples (the samples themselves are never written) and
//! the daemon's state folder for tests that open trees.

use std::fs;
use std::path::{Path, PathBuf};

use super::samples;

/// Points `WORLDFS_STATE_DIR` at one temporary folder for the whole test binary.
pub fn state_dir() {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    let d = DIR.get_or_init(|| tempfile::tempdir().unwrap());
    std::env::set_var("WORLDFS_STATE_DIR", d.path());
}

/// Makes `path` writable (a copy keeps the sample's permissions).
fn writable(path: &Path) {
    let mut perm = fs::metadata(path).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perm.set_readonly(false);
    fs::set_permissions(path, perm).unwrap();
}

/// Copies a folder tree; the copies are writable even where the samples are not.
pub fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            fs::copy(e.path(), &target).unwrap();
            writable(&target);
        }
    }
}

/// A writable copy of a world (folder or disk file) in `tmp`, under its own name.
pub fn copy_into(world: &Path, tmp: &Path) -> PathBuf {
    let dest = tmp.join(world.file_name().unwrap());
    if world.is_dir() {
        copy_dir(world, &dest);
    } else {
        fs::copy(world, &dest).unwrap();
        writable(&dest);
    }
    dest
}

/// A writable copy of the sample file `rel` named `name` in a new temporary folder.
pub fn copy_sample(rel: &str, name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    fs::copy(samples::path(rel), &path).unwrap();
    writable(&path);
    (dir, path)
}
