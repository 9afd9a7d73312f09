//! What an inode the kernel keeps costs the daemon, for `--max-inodes` (issue 37: the
//! budget bounds what the kernel may keep of a world).
//!
//! `cargo bench --bench inode_memory [-- BLOCKS]` fills an inode table as a walk of BLOCKS
//! block folders (default 30,000) leaves it: each folder with its five views and `meta/`,
//! every file's attributes kept. Prints the bytes per inode the process grew by (resident
//! memory, `/proc/self/statm`), and the time per lookup: first with the block folders and
//! their entries numbered as the Luanti tree numbers them (`vfs::tree::Numbering`: the table
//! then follows one unit per block folder), then with a node for every inode.

use std::time::{Instant, SystemTime};

use std::sync::Arc;

use worldfs::luanti::store::map::AxisOrder;
use worldfs::luanti::tree::BlockNumbers;
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
    let numbered = fill(
        Inodes::new(Some(Arc::new(BlockNumbers(AxisOrder::Zyx)))),
        blocks,
    );
    let inodes = blocks * (ENTRIES.len() as u64 + 1);
    println!(
        "numbered: {} block folders followed ({} nodes): {} bytes per block folder ({} per inode the kernel keeps), {:.0} ns per lookup",
        numbered.units,
        numbered.nodes,
        numbered.grew / blocks.max(1) as usize,
        numbered.grew / inodes.max(1) as usize,
        numbered.took_ns / inodes.max(1) as f64
    );
    let plain = fill(Inodes::default(), blocks);
    println!(
        "{} inodes: {} bytes each, {:.0} ns per lookup",
        plain.nodes,
        plain.grew / plain.nodes.max(1),
        plain.took_ns / plain.nodes.max(1) as f64
    );
}

struct Filled {
    /// The table, kept while the next one is measured.
    _table: Inodes,
    nodes: usize,
    units: usize,
    grew: usize,
    took_ns: f64,
}

/// Looks up `blocks` block folders and their entries in `t`, keeping every file's attributes.
fn fill(mut t: Inodes, blocks: u64) -> Filled {
    let before = resident().unwrap_or_default();
    let started = Instant::now();
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
    let took_ns = started.elapsed().as_nanos() as f64;
    let grew = resident().unwrap_or_default().saturating_sub(before);
    Filled {
        nodes: t.len(),
        units: t.units(),
        grew,
        took_ns,
        _table: t,
    }
}
