//! In-process walks over every block of a Luanti world, for `scripts/bench`.
//!
//! `cargo bench --bench walk -- WORLD [--runs N] [--only floor,codec,tree]` times, on one
//! world, best of N runs each (all three walks unless `--only` names some):
//! * `floor`: every blob read from SQLite (paged listing) and decompressed, nothing else
//!   ([`codec::decompress_only`]) — the least any walk of the world can cost;
//! * `codec`: the same reads, each blob decoded and its `nodes.cubeset` rendered, with the
//!   decode and render shares timed separately;
//! * `tree`: the mounted tree without FUSE: `blocks/` listed through [`Tree::list`] and every
//!   `blocks/X,Y,Z/nodes.cubeset` read through [`Tree::read`] with the default cache; the
//!   process's peak RSS is reported after it.
//!
//! Output is one `key value` line per figure (seconds, counts, bytes), read by the script;
//! each walk has a best wall time (`_s`) and a best CPU time (`_cpu_s`, steadier on a busy
//! machine). The decode and render shares are the wall times of the last codec run.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use worldfs::luanti::codec;
use worldfs::luanti::store::map::MapStore;
use worldfs::luanti::tree::LuantiTree;
use worldfs::luanti::views;
use worldfs::vfs::tree::Options;
use worldfs::vfs::Tree;
use worldfs::Result;

/// Blocks per listing page, as the mounted tree pages `blocks/`.
const PAGE: usize = 512;
/// The default `--cache-size` of `worldfs mount`, in bytes.
const DEFAULT_CACHE: usize = 32 << 20;

/// What one walk counted: blocks and bytes produced.
#[derive(Default, Clone, Copy)]
struct Count {
    blocks: u64,
    bytes: u64,
}

/// Calls `each` with every stored blob of the world, in listing order.
fn for_each_blob(store: &MapStore, mut each: impl FnMut(&[u8]) -> Result<()>) -> Result<u64> {
    let mut after = 0;
    let mut blocks = 0;
    loop {
        let page = store.list(after, PAGE, true)?;
        let Some(last) = page.last() else {
            return Ok(blocks);
        };
        after = last.key;
        for listed in &page {
            each(listed.data.as_deref().unwrap_or_default())?;
            blocks += 1;
        }
    }
}

fn floor(store: &MapStore) -> Result<Count> {
    let mut bytes = 0u64;
    let blocks = for_each_blob(store, |blob| {
        bytes += codec::decompress_only(blob)? as u64;
        Ok(())
    })?;
    Ok(Count { blocks, bytes })
}

/// The codec walk; also returns the time spent decoding and rendering.
fn codec_walk(store: &MapStore) -> Result<(Count, Duration, Duration)> {
    let (mut bytes, mut decode, mut render) = (0u64, Duration::ZERO, Duration::ZERO);
    let blocks = for_each_blob(store, |blob| {
        let t0 = Instant::now();
        let block = codec::decode_block(blob)?;
        let t1 = Instant::now();
        let text = views::render_nodes(&block);
        decode += t1 - t0;
        render += t1.elapsed();
        bytes += black_box(text).len() as u64;
        Ok(())
    })?;
    Ok((Count { blocks, bytes }, decode, render))
}

fn tree_walk(world: &Path) -> Result<Count> {
    let tree = LuantiTree::open(
        world,
        &Options {
            read_only: true,
            cache_bytes: DEFAULT_CACHE,
        },
    )?;
    let mut names = Vec::new();
    tree.list(&["blocks".to_string()], 0, &mut |e| {
        names.push(e.name);
        true
    })?;
    let mut count = Count::default();
    for name in names {
        let path = ["blocks".to_string(), name, "nodes.cubeset".to_string()];
        count.bytes += tree.read(&path)?.len() as u64;
        count.blocks += 1;
    }
    Ok(count)
}

/// This process's CPU time (user + system).
fn cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec, which lives on our stack.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    Duration::new(
        u64::try_from(ts.tv_sec).unwrap_or(0),
        u32::try_from(ts.tv_nsec).unwrap_or(0),
    )
}

/// The best wall and CPU times of a walk over several runs, and its last result.
struct Best<T> {
    wall: Duration,
    cpu: Duration,
    last: Option<T>,
}

impl<T> Best<T> {
    fn new() -> Self {
        Best {
            wall: Duration::MAX,
            cpu: Duration::MAX,
            last: None,
        }
    }

    fn run(&mut self, walk: impl FnOnce() -> Result<T>) -> Result<()> {
        let (wall, cpu) = (Instant::now(), cpu_time());
        let value = walk()?;
        self.cpu = self.cpu.min(cpu_time().saturating_sub(cpu));
        self.wall = self.wall.min(wall.elapsed());
        self.last = Some(value);
        Ok(())
    }

    fn print(&self, name: &str) -> Option<&T> {
        let last = self.last.as_ref()?;
        println!("{name}_s {:.6}", self.wall.as_secs_f64());
        println!("{name}_cpu_s {:.6}", self.cpu.as_secs_f64());
        Some(last)
    }
}

/// Runs the wanted walks `runs` times, interleaved so that a change in the machine's load
/// affects all of them alike, and prints the best times of each.
fn run(world: &Path, runs: usize, only: &[String]) -> Result<()> {
    let wanted = |walk: &str| only.is_empty() || only.iter().any(|w| w == walk);
    let store = MapStore::open(world, true)?;
    // Warm the page cache so that every walk reads the database from memory.
    floor(&store)?;
    let (mut f, mut c, mut t) = (Best::new(), Best::new(), Best::new());
    for _ in 0..runs.max(1) {
        if wanted("floor") {
            f.run(|| floor(&store))?;
        }
        if wanted("codec") {
            c.run(|| codec_walk(&store))?;
        }
        if wanted("tree") {
            t.run(|| tree_walk(world))?;
        }
    }
    if let Some(count) = f.print("floor") {
        println!("blocks {}", count.blocks);
        println!("floor_bytes {}", count.bytes);
    }
    if let Some((count, decode, render)) = c.print("codec") {
        println!("codec_decode_s {:.6}", decode.as_secs_f64());
        println!("codec_render_s {:.6}", render.as_secs_f64());
        println!("cubeset_bytes {}", count.bytes);
    }
    if let Some(count) = t.print("tree") {
        println!("tree_blocks {}", count.blocks);
        println!("tree_bytes {}", count.bytes);
        println!("peak_rss_kib {}", peak_rss_kib());
    }
    Ok(())
}

/// This process's peak resident set (VmHWM) in KiB, 0 when unknown.
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn main() -> ExitCode {
    let mut world: Option<PathBuf> = None;
    let mut runs = 2;
    let mut only: Vec<String> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            // cargo bench passes --bench to every bench binary.
            "--bench" => {}
            "--runs" => match args.next().and_then(|n| n.parse().ok()) {
                Some(n) => runs = n,
                None => {
                    eprintln!("walk: --runs needs a number");
                    return ExitCode::FAILURE;
                }
            },
            "--only" => match args.next() {
                Some(list) => only.extend(list.split(',').map(str::to_string)),
                None => {
                    eprintln!("walk: --only needs floor, codec and/or tree");
                    return ExitCode::FAILURE;
                }
            },
            a if world.is_none() && !a.starts_with('-') => world = Some(PathBuf::from(a)),
            a => {
                eprintln!("walk: unexpected argument {a}");
                return ExitCode::FAILURE;
            }
        }
    }
    let Some(world) = world else {
        eprintln!("usage: cargo bench --bench walk -- WORLD [--runs N] [--only floor,codec,tree]");
        return ExitCode::FAILURE;
    };
    match run(&world, runs, &only) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("walk: {e}");
            ExitCode::FAILURE
        }
    }
}
