//! Helpers shared by the Survivalcraft tests: the samples folder, the 1.27 `.scworld`
//! sample and unpacking it, copying a world folder writable, and reading the stores' ints.

#![allow(dead_code)]

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

/// `shared/samples/survivalcraft`; panics when the samples are missing.
pub fn samples() -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/samples/survivalcraft");
    assert!(
        p.is_dir(),
        "Survivalcraft samples missing: {} (see shared/samples)",
        p.display()
    );
    p
}

/// The 1.27 `Chunks.dat` world, packed.
pub fn ardoitia() -> PathBuf {
    let p = samples().join("padillah-ScWorldEditor/Ardoitia.scworld");
    assert!(p.is_file(), "Survivalcraft sample missing: {}", p.display());
    p
}

/// Unzips a .scworld into a fresh folder (test-time copy, never committed).
pub fn unpack(scworld: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut zip = zip::ZipArchive::new(fs::File::open(scworld).unwrap()).unwrap();
    for i in 0..zip.len() {
        let mut e = zip.by_index(i).unwrap();
        let mut buf = Vec::new();
        e.read_to_end(&mut buf).unwrap();
        fs::write(dir.path().join(e.name()), buf).unwrap();
    }
    dir
}

/// Copies a folder tree; the copies are writable even where the samples are not.
pub fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            fs::copy(e.path(), to.join(e.file_name())).unwrap();
            let mut perm = fs::metadata(to.join(e.file_name())).unwrap().permissions();
            #[allow(clippy::permissions_set_readonly_false)]
            perm.set_readonly(false);
            fs::set_permissions(to.join(e.file_name()), perm).unwrap();
        }
    }
}

/// The little-endian Int32 at `at`.
pub fn i32_at(d: &[u8], at: usize) -> i32 {
    i32::from_le_bytes(d[at..at + 4].try_into().unwrap())
}
