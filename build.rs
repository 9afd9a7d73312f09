//! Gives the code a number that changes with its sources (`WORLDFS_SOURCE_HASH`): the Luanti
//! block summaries kept on disk (`src/luanti/summary_file.rs`) hold the sizes of rendered
//! views, and are used only by code built from the same sources as the code that wrote
//! them. Two builds of the same sources render alike; any change to a source file or to
//! the locked dependencies gives another number.

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=Cargo.lock");
    let mut files = Vec::new();
    collect(Path::new("src"), &mut files);
    files.sort();
    files.push(PathBuf::from("Cargo.lock"));
    // FNV-1a, 64 bit, over each file's name and contents.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for file in &files {
        let name = file.to_string_lossy();
        let contents = std::fs::read(file).unwrap_or_default();
        for &b in name.as_bytes().iter().chain(&[0]).chain(&contents) {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    println!("cargo:rustc-env=WORLDFS_SOURCE_HASH={hash:016x}");
}

/// Every file below `dir`.
fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, out);
        } else {
            out.push(path);
        }
    }
}
