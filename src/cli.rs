//! The command line (clap). `man/worldfs.1` is generated from this definition and a test
//! keeps the two in sync.

use std::path::PathBuf;

use clap::{ArgAction, Args, Parser, Subcommand};

/// Mount a Luanti world as a tree of readable, writable files.
#[derive(Parser, Debug)]
#[command(
    name = "worldfs",
    version,
    about = "Mount a voxel-game world as a tree of readable, writable files",
    long_about = "worldfs mounts a game world as a directory tree of decoded text files: a \
Luanti (Minetest) world folder (map in map.sqlite, PostgreSQL, LevelDB or Redis) or map.sqlite (map blocks \
as Cubeset node grids, light, headers, node metadata, inventories, timers, static objects, \
players, auth, mod storage), a Terrarum TVDA or TEVD disk, or a Survivalcraft world. Edit the files with any tool; each file is \
parsed and re-encoded when it is closed, and committed to the world's store then, or for \
Luanti blocks within a second (at once on fsync; -o sync commits each close). Never write while \
the game runs on the world.",
    after_help = "Examples:\n  worldfs mount ~/.minetest/worlds/world /mnt/world\n  ls /mnt/world/index/nodes/default:chest\n  worldfs unmount /mnt/world\n  worldfs check ~/.minetest/worlds/world"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Mount a world; returns once the mount is ready (the daemon keeps running).
    Mount(MountArgs),
    /// Unmount; returns after every pending change is committed and the daemon exited. Text
    /// whose commit failed is saved in the state folder: each is named on stderr ("not
    /// committed: PATH (saved in FILE)") and the exit status is 1. A mount whose daemon was
    /// killed is detached even while programs still hold files in it.
    Unmount {
        /// The mount point.
        mountpoint: PathBuf,
    },
    /// What a mount is doing: writes waiting for their commit, texts held because their
    /// commit failed (each with its reason: file, line, column), the latest errors, and
    /// whether it is read-only or its store is in a state of its own. Exit status 0:
    /// nothing held or failing; 1: texts held or the store failing; 2: no worldfs daemon
    /// answers for the mount point.
    Status {
        /// The mount point.
        mountpoint: PathBuf,
    },
    /// Decode, re-encode and decode again every block; report the broken ones.
    Check {
        /// A world: Luanti folder or map.sqlite, Survivalcraft folder, TVDA/TEVD disk.
        source: PathBuf,
    },
    /// Show format, schema, block counts per serialization version and backends.
    Info {
        /// A world: Luanti folder or map.sqlite, Survivalcraft folder, TVDA/TEVD disk.
        source: PathBuf,
    },
    /// Rewrite a Terrarum TVDA disk without the dead entries appended saves leave behind
    /// (refused while it is mounted).
    Compact {
        /// A TVDA disk file.
        source: PathBuf,
    },
}

/// Options of `worldfs mount`.
#[derive(Args, Debug)]
pub struct MountArgs {
    /// A world: Luanti folder or map.sqlite, Survivalcraft folder or .scworld, TVDA/TEVD disk,
    /// or a file holding a Terrarum backup's header.txt (made into a new, empty disk).
    pub source: PathBuf,
    /// An existing empty folder to mount on (see -o nonempty).
    pub mountpoint: PathBuf,
    /// Refuse all writes; only short read transactions (safe beside a running server).
    /// Without it, the mount locks the world: a second read-write mount of it is refused.
    #[arg(long)]
    pub read_only: bool,
    /// Read-only, and the whole world (map, players, auth, mod storage) as it was at one
    /// moment, whatever a running server writes meanwhile, never blocking it: for a
    /// consistent backup of a running Luanti server. Needs the stores in PostgreSQL (one
    /// snapshot for all the stores in one database) or SQLite in WAL mode (a read transaction per database, held while
    /// mounted: the WAL grows until the mount ends; each database is its own moment); any
    /// other store holding data is refused with the reason.
    #[arg(long, conflicts_with = "create")]
    pub snapshot: bool,
    /// Make an empty or missing folder a new Luanti world of game GAMEID (default minetest)
    /// before mounting it: a world.mt naming sqlite3 for every store, as the engine writes
    /// for a new world; each database is made by the first write (a restore of a backup
    /// into it, for example). A folder that already is a world is mounted as it is; any
    /// other folder with files in it is refused. Not with --read-only or --snapshot.
    #[arg(long, value_name = "GAMEID", num_args = 0..=1, require_equals = true,
          default_missing_value = "minetest", conflicts_with = "read_only")]
    pub create: Option<String>,
    /// Stay in the foreground (log to stderr) instead of running as a daemon.
    #[arg(short, long)]
    pub foreground: bool,
    /// Memory for decoded blocks, in MiB (for Luanti, three sixteenths of it keep block
    /// summaries: what the attributes of a block's files need, so a second pass does not
    /// decode again; they are also kept on disk, in the state folder; three sixteenths keep
    /// the hashes of the blocks read since the last change, so a second pass does not read
    /// them again).
    #[arg(long, default_value_t = 32, value_name = "MIB")]
    pub cache_size: usize,
    /// Let other users access the mount (needs user_allow_other in /etc/fuse.conf, unless
    /// root mounts). Each user gets what the disk gives them: the root shows the world
    /// folder's owner and mode, each view its database's owner and, for group and others,
    /// at most what the database gives them, checked by the kernel (default_permissions;
    /// without --allow-other, worldfs checks what the kernel leaves to it).
    #[arg(long)]
    pub allow_other: bool,
    /// Extra mount options passed to the kernel (comma-separated, repeatable); `nonempty`
    /// mounts on a folder that is not empty (its files are hidden while mounted); `sync`
    /// commits each close of a Luanti block file in its own transaction before the close
    /// returns (by default closes are grouped into one transaction when writing pauses for
    /// 100 ms, at the latest after 1 s, and on fsync, unmount and SIGTERM).
    #[arg(short = 'o', value_name = "OPTION", action = ArgAction::Append)]
    pub options: Vec<String>,
    /// Inodes the daemon keeps for the kernel before asking it to forget the oldest ones
    /// (about 180 bytes each with what the kernel was told; Luanti's block folders and their
    /// views are numbered from the block's position and cost none, only about 60 bytes per
    /// block whose files the kernel keeps, up to 8 times N blocks); bounds memory on walks of
    /// huge worlds. Above a world's count, an incremental rsync runs from the kernel's
    /// caches.
    #[arg(long, default_value_t = 20_000, value_name = "N")]
    pub max_inodes: usize,
    /// Request-handling threads (at least 2: a change's cache invalidation, sent from a
    /// request thread, can wait for a page that another request, a read or a write, holds;
    /// N threads let N-1 such waits happen at once, the default 4 three).
    #[arg(long, default_value_t = 4, value_name = "N",
          value_parser = clap::value_parser!(u16).range(2..))]
    pub threads: u16,
    /// More log output (-v info, -vv debug); RUST_LOG overrides.
    #[arg(short, long, action = ArgAction::Count)]
    pub verbose: u8,
    /// Log file of the daemon (default: worldfs.log in the state directory).
    #[arg(long, value_name = "FILE")]
    pub log_file: Option<PathBuf>,
}
