//! Survivalcraft helpers: unpacking a `.scworld` and reading the stores' ints.

use std::fs;
use std::io::Read;
use std::path::Path;

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

/// The little-endian Int32 at `at`.
pub fn i32_at(d: &[u8], at: usize) -> i32 {
    i32::from_le_bytes(d[at..at + 4].try_into().unwrap())
}
