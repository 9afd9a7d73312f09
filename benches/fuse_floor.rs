//! The FUSE floor, for `scripts/bench`: what reading a tree shaped like a mounted Luanti
//! world costs when the filesystem behind it does no work at all.
//!
//! `cargo bench --bench fuse_floor -- MOUNTPOINT BLOCKS SIZE [--cached|--kept] [--no-open]` mounts, in the
//! foreground until unmounted, a filesystem held in memory: `blocks/` with BLOCKS folders, each
//! holding `nodes.cubeset` of SIZE bytes, four small views and an empty `meta/` folder, as
//! `worldfs` lists a block (with `.` and `..` in every listing, as `worldfs` lists them). It
//! answers every request from arrays, with the kernel settings of
//! `worldfs` (4 request threads on cloned descriptors, readdirplus chosen by the kernel, names
//! cached 1 s, file attributes not cached), save one: it leaves opening folders to the kernel
//! (`FUSE_NO_OPENDIR_SUPPORT`), which `worldfs` does not (docs/semantics.md "Kernel
//! caching, kept true"), so the kernel sends it no OPENDIR and RELEASEDIR and keeps its
//! listings. With `--cached` it also lets the kernel cache file attributes for 1 s and
//! skips the close-time FLUSH (`FOPEN_NOFLUSH`):
//! the fewest requests per file read a FUSE filesystem can ask for. With `--kept` it also
//! lets the kernel keep names and attributes for an hour: what a second pass over the tree
//! (an incremental `rsync -a`, a second `grep -r`) costs when the kernel keeps everything it
//! may (names, attributes, pages, and listings of folders it opens itself), so that each file
//! read still costs its open and release and nothing else. With `--no-open` it answers OPEN
//! with `ENOSYS`: the kernel then opens files itself, sends no OPEN, FLUSH or RELEASE, and
//! keeps their pages, so a kept file costs no request at all. That is below what `worldfs`
//! can ask for, since its handles (a reader reads the text of its open, a writer's text is
//! checked at close) need the OPEN and the RELEASE.
//!
//! The walks of `scripts/bench` over this mount are a lower bound for the same walks over a
//! `worldfs` mount: the difference between the two is what `worldfs` itself costs.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use fuser::{
    Config, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    InitFlags, KernelConfig, LockOwner, MountOption, OpenFlags, ReplyAttr, ReplyData,
    ReplyDirectory, ReplyDirectoryPlus, ReplyEntry, ReplyOpen, Request, SessionACL,
};

const ROOT: u64 = 1;
const BLOCKS: u64 = 2;
/// Inodes per block folder: the folder, its five files and `meta/`.
const PER_BLOCK: u64 = 7;
const FIRST_BLOCK: u64 = 3;
/// The files of a block folder, as `worldfs` lists them, after `meta/`.
const FILES: [&str; 5] = [
    "block.txt",
    "light.txt",
    "nodes.cubeset",
    "objects.txt",
    "timers.txt",
];
/// Size of the small views.
const SMALL: u64 = 120;
const NAMES_TTL: Duration = Duration::from_secs(1);
/// How long names and attributes are kept with `--kept`.
const KEPT_TTL: Duration = Duration::from_secs(3600);

/// What the kernel may keep.
#[derive(Clone, Copy, PartialEq)]
enum Keep {
    /// Names 1 s, file attributes not at all, every close flushed: worldfs's settings.
    Names,
    /// Also file attributes 1 s, pages across opens, no FLUSH.
    Cached,
    /// Also names and attributes for an hour.
    Kept,
}

/// What an inode is.
enum Node {
    Root,
    Blocks,
    BlockDir(u64),
    File(usize),
    Meta,
}

struct NullFs {
    blocks: u64,
    size: u64,
    keep: Keep,
    /// Content of every file: `size` bytes of text, the small views read a prefix.
    content: Vec<u8>,
    /// Answer OPEN with ENOSYS (`--no-open`): the kernel then opens files itself, sends no
    /// OPEN or RELEASE, and keeps their pages.
    no_open: bool,
}

impl NullFs {
    fn node(&self, ino: u64) -> Option<Node> {
        match ino {
            ROOT => Some(Node::Root),
            BLOCKS => Some(Node::Blocks),
            i if i >= FIRST_BLOCK && i < FIRST_BLOCK + self.blocks * PER_BLOCK => {
                let b = (i - FIRST_BLOCK) / PER_BLOCK;
                Some(match (i - FIRST_BLOCK) % PER_BLOCK {
                    0 => Node::BlockDir(b),
                    6 => Node::Meta,
                    f => Node::File(f as usize - 1),
                })
            }
            _ => None,
        }
    }

    fn block_ino(b: u64) -> u64 {
        FIRST_BLOCK + b * PER_BLOCK
    }

    fn file_size(&self, file: usize) -> u64 {
        if FILES[file] == "nodes.cubeset" {
            self.size
        } else {
            SMALL
        }
    }

    fn attr(&self, ino: u64) -> Option<(FileAttr, Duration)> {
        let (kind, size) = match self.node(ino)? {
            Node::File(f) => (FileType::RegularFile, self.file_size(f)),
            _ => (FileType::Directory, 0),
        };
        let ttl = self.names_ttl(kind == FileType::Directory);
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let attr = FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: size.div_ceil(512),
            atime: t,
            mtime: t,
            ctime: t,
            crtime: t,
            kind,
            perm: if kind == FileType::Directory {
                0o755
            } else {
                0o644
            },
            nlink: if kind == FileType::Directory { 2 } else { 1 },
            uid: 0,
            gid: 0,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        };
        Some((attr, ttl))
    }

    /// How long the kernel may keep a name, and the attributes of a folder (`dir`) or file.
    fn names_ttl(&self, dir: bool) -> Duration {
        match self.keep {
            Keep::Kept => KEPT_TTL,
            Keep::Cached => NAMES_TTL,
            Keep::Names if dir => NAMES_TTL,
            Keep::Names => Duration::ZERO,
        }
    }

    /// The block folder's name for block `b`: coordinates like worldfs's.
    fn block_name(b: u64) -> String {
        let (x, rest) = (b % 64, b / 64);
        let (y, z) = (rest % 32, rest / 32);
        format!("{},{},{}", x as i64 - 32, y as i64 - 16, z as i64 - 64)
    }

    fn block_of(&self, name: &str) -> Option<u64> {
        let mut it = name.split(',').map(|p| p.parse::<i64>().ok());
        let (x, y, z) = (it.next()??, it.next()??, it.next()??);
        let b = u64::try_from(((z + 64) * 32 + (y + 16)) * 64 + (x + 32)).ok()?;
        (b < self.blocks && Self::block_name(b) == name).then_some(b)
    }

    /// The entries of a folder after the cookie `offset`: `.` and `..` (cookies 1 and 2, as
    /// `worldfs` lists them: the kernel adds none, and programs expect them), then its
    /// children; each as (inode, cookie, kind, name) until `each` says the reply is full.
    fn entries(
        &self,
        ino: u64,
        offset: u64,
        each: &mut dyn FnMut(u64, u64, FileType, &str) -> bool,
    ) {
        let parent = match self.node(ino) {
            Some(Node::Root | Node::Blocks) => ROOT,
            Some(Node::BlockDir(_)) => BLOCKS,
            Some(Node::Meta) => ino - (PER_BLOCK - 1),
            _ => return,
        };
        for (cookie, i, name) in [(1, ino, "."), (2, parent, "..")] {
            if offset < cookie && each(i, cookie, FileType::Directory, name) {
                return;
            }
        }
        let mut next = offset.max(2);
        self.children(ino, next - 2, &mut |i, kind, name| {
            next += 1;
            each(i, next, kind, name)
        });
    }

    /// The children of a folder: (inode, kind, name), in listing order.
    fn children(&self, ino: u64, from: u64, each: &mut dyn FnMut(u64, FileType, &str) -> bool) {
        match self.node(ino) {
            Some(Node::Root) if from == 0 => {
                each(BLOCKS, FileType::Directory, "blocks");
            }
            Some(Node::Blocks) => {
                for b in from..self.blocks {
                    if each(
                        Self::block_ino(b),
                        FileType::Directory,
                        &Self::block_name(b),
                    ) {
                        return;
                    }
                }
            }
            Some(Node::BlockDir(b)) => {
                let base = Self::block_ino(b);
                for i in from..6 {
                    let full = if i == 0 {
                        each(base + 6, FileType::Directory, "meta")
                    } else {
                        each(base + i, FileType::RegularFile, FILES[i as usize - 1])
                    };
                    if full {
                        return;
                    }
                }
            }
            _ => {}
        }
    }
}

impl Filesystem for NullFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let _ = config.add_capabilities(
            InitFlags::FUSE_DO_READDIRPLUS
                | InitFlags::FUSE_READDIRPLUS_AUTO
                | InitFlags::FUSE_NO_OPENDIR_SUPPORT,
        );
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let name = name.to_str().unwrap_or("");
        let ino = match self.node(parent.0) {
            Some(Node::Root) if name == "blocks" => Some(BLOCKS),
            Some(Node::Blocks) => self.block_of(name).map(Self::block_ino),
            Some(Node::BlockDir(b)) if name == "meta" => Some(Self::block_ino(b) + 6),
            Some(Node::BlockDir(b)) => FILES
                .iter()
                .position(|f| *f == name)
                .map(|f| Self::block_ino(b) + 1 + f as u64),
            _ => None,
        };
        match ino.and_then(|i| self.attr(i)) {
            Some((attr, ttl)) => {
                reply.entry_with_ttls(&ttl, &self.names_ttl(true), &attr, Generation(0))
            }
            None => reply.error(Errno::from_i32(libc::ENOENT)),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.attr(ino.0) {
            Some((attr, ttl)) => reply.attr(&ttl, &attr),
            None => reply.error(Errno::from_i32(libc::ENOENT)),
        }
    }

    fn open(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        if self.no_open {
            return reply.error(Errno::from_i32(libc::ENOSYS));
        }
        let flags = if self.keep != Keep::Names {
            FopenFlags::FOPEN_KEEP_CACHE | FopenFlags::FOPEN_NOFLUSH
        } else {
            FopenFlags::empty()
        };
        reply.opened(FileHandle(1), flags);
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let len = match self.node(ino.0) {
            Some(Node::File(f)) => self.file_size(f),
            _ => return reply.error(Errno::from_i32(libc::EISDIR)),
        };
        let start = offset.min(len) as usize;
        let end = (offset.saturating_add(u64::from(size))).min(len) as usize;
        reply.data(&self.content[start..end]);
    }

    fn opendir(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        reply.error(Errno::from_i32(libc::ENOSYS));
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        self.entries(ino.0, offset, &mut |i, next, kind, name| {
            reply.add(INodeNo(i), next, kind, name)
        });
        reply.ok();
    }

    fn readdirplus(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        self.entries(
            ino.0,
            offset,
            &mut |i, next, _kind, name| match self.attr(i) {
                Some((attr, ttl)) => reply.add(INodeNo(i), next, name, &ttl, &attr, Generation(0)),
                None => true,
            },
        );
        reply.ok();
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let keep = if args.iter().any(|a| a == "--kept") {
        Keep::Kept
    } else if args.iter().any(|a| a == "--cached") {
        Keep::Cached
    } else {
        Keep::Names
    };
    let plain: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let (Some(mnt), Some(Ok(blocks)), Some(Ok(size))) = (
        plain.first(),
        plain.get(1).map(|n| n.parse::<u64>()),
        plain.get(2).map(|n| n.parse::<u64>()),
    ) else {
        eprintln!(
            "usage: cargo bench --bench fuse_floor -- MOUNTPOINT BLOCKS SIZE [--cached|--kept] [--no-open]"
        );
        return ExitCode::FAILURE;
    };
    // Block names encode up to 64 × 32 × 128 positions.
    let blocks = blocks.min(64 * 32 * 128);
    let content = (0..size.max(SMALL))
        .map(|i| {
            if i % 64 == 63 {
                b'\n'
            } else {
                b'a' + (i % 26) as u8
            }
        })
        .collect();
    let fs = NullFs {
        blocks,
        size,
        keep,
        content,
        no_open: args.iter().any(|a| a == "--no-open"),
    };
    // RUST_LOG=fuser=debug logs one line per request (scripts/count-requests counts them).
    env_logger::init();
    let mut config = Config::default();
    config.mount_options = vec![MountOption::FSName("fuse-floor".into())];
    config.acl = SessionACL::Owner;
    config.n_threads = Some(4);
    config.clone_fd = true;
    match fuser::mount(fs, PathBuf::from(mnt.as_str()), &config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fuse_floor: {e}");
            ExitCode::FAILURE
        }
    }
}
