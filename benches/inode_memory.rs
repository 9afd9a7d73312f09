//! What an inode the kernel keeps costs the daemon, for `--max-inodes` (issue 37: the
//! budget bounds what the kernel may keep of a world).
//!
//! `cargo bench --bench inode_memory [-- BLOCKS]` fills an inode table as a walk of BLOCKS
//! block folders (default 30,000) leaves it: each folder with its five views and `meta/`,
//! every file's attributes kept. Prints the bytes per inode the process grew by (resident
//! memory, `/proc/self/statm`), and the time per lookup.

use std::time::{Instant, SystemTime};

use worldfs::vfs::inodes::{Inodes, ROOT};
use worldfs::vfs::tree::Stat;

const ENTRIES: [&str; 6] = [
    "block.txt",
    "light.txt",
    "meta",
    "nodes.cubeset",
    "objects.txt",
    "timers.txt",
];

fn resident() -> Option<usize> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: usize = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

fn main() {
    let blocks: u64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(30_000);
    let before = resident().unwrap_or_default();
    let started = Instant::now();
    let mut t = Inodes::default();
    let folder = t.lookup(ROOT, "blocks", None);
    let mtime = SystemTime::now();
    for b in 0..blocks {
        let name = format!("{},{},{}", b % 64, b / 4096, b / 64 % 64);
        let dir = t.lookup(folder, &name, None);
        for entry in ENTRIES {
            let ino = t.lookup(dir, entry, None);
            t.keep(
                ino,
                &Stat {
                    source: Some(b),
                    ..Stat::file(100 + b, mtime, false)
                },
            );
        }
    }
    let took = started.elapsed();
    let after = resident().unwrap_or_default();
    let n = t.len();
    println!(
        "{n} inodes: {} bytes each, {:.0} ns per lookup",
        after.saturating_sub(before) / n.max(1),
        took.as_nanos() as f64 / n.max(1) as f64
    );
}
