//! The FUSE write floor, for `scripts/bench`: what restoring a backup into a mount costs when
//! the filesystem behind it does no work at all.
//!
//! `cargo bench --bench write_floor -- MOUNTPOINT [--writeback]` mounts, in the foreground until unmounted,
//! an empty filesystem held in memory that takes whatever is written into it: folders, files
//! and links get inode numbers, names, modes, times and sizes; the bytes written are counted
//! and dropped. It asks the kernel for the fewest requests a writable FUSE filesystem can:
//! names and attributes cached 1 s, folders opened by the kernel, no FLUSH (the first one is
//! answered `ENOSYS`, and the kernel sends none again), 4 request threads on cloned
//! descriptors as `worldfs` has. An `rsync -a` of a backup into this mount is the lower bound
//! for the same restore into a `worldfs` mount, which also decodes, validates and commits
//! what it is given. With `--writeback` the kernel also caches what is written
//! (`FUSE_WRITEBACK_CACHE`) and sends it later, in larger writes.

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use fuser::{
    Config, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    InitFlags, KernelConfig, LockOwner, MountOption, OpenFlags, RenameFlags, ReplyAttr,
    ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyOpen,
    ReplyWrite, Request, SessionACL, TimeOrNow, WriteFlags,
};

const ROOT: u64 = 1;
const TTL: Duration = Duration::from_secs(1);

/// One inode: where it is and what `stat` shows of it.
struct Node {
    parent: u64,
    name: Vec<u8>,
    attr: FileAttr,
    target: Vec<u8>,
}

/// The whole tree; children of a folder are one range of `names`.
struct State {
    nodes: HashMap<u64, Node>,
    names: BTreeMap<(u64, Vec<u8>), u64>,
    next: u64,
}

struct MemFs {
    state: Mutex<State>,
    uid: u32,
    gid: u32,
    /// Let the kernel cache writes (`--writeback`: `FUSE_WRITEBACK_CACHE`).
    writeback: bool,
}

fn enoent() -> Errno {
    Errno::from_i32(libc::ENOENT)
}

fn time(t: TimeOrNow) -> SystemTime {
    match t {
        TimeOrNow::SpecificTime(t) => t,
        TimeOrNow::Now => SystemTime::now(),
    }
}

impl MemFs {
    fn new(uid: u32, gid: u32) -> MemFs {
        let fs = MemFs {
            state: Mutex::new(State {
                nodes: HashMap::new(),
                names: BTreeMap::new(),
                next: ROOT + 1,
            }),
            uid,
            gid,
            writeback: false,
        };
        let root = fs.attr(ROOT, FileType::Directory, 0o755);
        if let Ok(mut s) = fs.state.lock() {
            s.nodes.insert(
                ROOT,
                Node {
                    parent: ROOT,
                    name: Vec::new(),
                    attr: root,
                    target: Vec::new(),
                },
            );
        }
        fs
    }

    fn attr(&self, ino: u64, kind: FileType, perm: u16) -> FileAttr {
        let now = SystemTime::now();
        FileAttr {
            ino: INodeNo(ino),
            size: 0,
            blocks: 0,
            atime: now,
            mtime: now,
            ctime: now,
            crtime: now,
            kind,
            perm,
            nlink: if kind == FileType::Directory { 2 } else { 1 },
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }

    /// Adds `name` in `parent` (an error if it exists) and returns its attributes.
    fn add(
        &self,
        parent: INodeNo,
        name: &OsStr,
        kind: FileType,
        mode: u32,
        target: &[u8],
    ) -> Result<FileAttr, Errno> {
        let mut s = self.state.lock().map_err(|_| Errno::from_i32(libc::EIO))?;
        let key = (parent.0, name.as_bytes().to_vec());
        if s.names.contains_key(&key) {
            return Err(Errno::from_i32(libc::EEXIST));
        }
        let ino = s.next;
        s.next += 1;
        let mut attr = self.attr(ino, kind, (mode & 0o7777) as u16);
        attr.size = target.len() as u64;
        s.names.insert(key, ino);
        s.nodes.insert(
            ino,
            Node {
                parent: parent.0,
                name: name.as_bytes().to_vec(),
                attr,
                target: target.to_vec(),
            },
        );
        Ok(attr)
    }

    /// Removes `name` from `parent`.
    fn remove(&self, parent: INodeNo, name: &OsStr) -> Result<(), Errno> {
        let mut s = self.state.lock().map_err(|_| Errno::from_i32(libc::EIO))?;
        let ino = s
            .names
            .remove(&(parent.0, name.as_bytes().to_vec()))
            .ok_or_else(enoent)?;
        s.nodes.remove(&ino);
        Ok(())
    }

    fn with_node<T>(&self, ino: INodeNo, f: impl FnOnce(&mut Node) -> T) -> Result<T, Errno> {
        let mut s = self.state.lock().map_err(|_| Errno::from_i32(libc::EIO))?;
        s.nodes.get_mut(&ino.0).map(f).ok_or_else(enoent)
    }

    /// The entries of folder `ino` after `offset` (their place in the folder, from 1).
    fn children(&self, ino: INodeNo, offset: u64) -> Vec<(u64, Vec<u8>, FileAttr)> {
        let Ok(s) = self.state.lock() else {
            return Vec::new();
        };
        s.names
            .range((ino.0, Vec::new())..)
            .take_while(|((p, _), _)| *p == ino.0)
            .enumerate()
            .skip(usize::try_from(offset).unwrap_or(usize::MAX))
            .filter_map(|(i, ((_, name), child))| {
                let attr = s.nodes.get(child)?.attr;
                Some((i as u64 + 1, name.clone(), attr))
            })
            .collect()
    }
}

impl Filesystem for MemFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let _ = config.add_capabilities(
            InitFlags::FUSE_ATOMIC_O_TRUNC
                | InitFlags::FUSE_DO_READDIRPLUS
                | InitFlags::FUSE_READDIRPLUS_AUTO
                | InitFlags::FUSE_NO_OPENDIR_SUPPORT,
        );
        if self.writeback {
            let _ = config.add_capabilities(InitFlags::FUSE_WRITEBACK_CACHE);
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let found = self.state.lock().ok().and_then(|s| {
            let ino = s.names.get(&(parent.0, name.as_bytes().to_vec()))?;
            Some(s.nodes.get(ino)?.attr)
        });
        match found {
            Some(attr) => reply.entry(&TTL, &attr, Generation(0)),
            None => reply.error(enoent()),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.with_node(ino, |n| n.attr) {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let result = self.with_node(ino, |n| {
            if let Some(m) = mode {
                n.attr.perm = (m & 0o7777) as u16;
            }
            if let Some(s) = size {
                n.attr.size = s;
            }
            if let Some(t) = atime {
                n.attr.atime = time(t);
            }
            if let Some(t) = mtime {
                n.attr.mtime = time(t);
            }
            n.attr
        });
        match result {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.with_node(ino, |n| n.target.clone()) {
            Ok(t) => reply.data(&t),
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        match self.add(parent, name, FileType::Directory, mode, b"") {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn symlink(
        &self,
        _req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let target = target.as_os_str().as_bytes();
        match self.add(parent, link_name, FileType::Symlink, 0o777, target) {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.remove(parent, name) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let ino = self
            .state
            .lock()
            .ok()
            .and_then(|s| s.names.get(&(parent.0, name.as_bytes().to_vec())).copied());
        if ino.is_some_and(|i| !self.children(INodeNo(i), 0).is_empty()) {
            return reply.error(Errno::from_i32(libc::ENOTEMPTY));
        }
        match self.remove(parent, name) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        _flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let Ok(mut s) = self.state.lock() else {
            return reply.error(Errno::from_i32(libc::EIO));
        };
        let Some(ino) = s.names.remove(&(parent.0, name.as_bytes().to_vec())) else {
            return reply.error(enoent());
        };
        let key = (newparent.0, newname.as_bytes().to_vec());
        if let Some(old) = s.names.insert(key, ino) {
            s.nodes.remove(&old);
        }
        if let Some(n) = s.nodes.get_mut(&ino) {
            n.parent = newparent.0;
            n.name = newname.as_bytes().to_vec();
        }
        reply.ok();
    }

    fn open(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        reply.opened(FileHandle(0), FopenFlags::FOPEN_KEEP_CACHE);
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        match self.add(parent, name, FileType::RegularFile, mode, b"") {
            Ok(attr) => reply.created(
                &TTL,
                &attr,
                Generation(0),
                FileHandle(0),
                FopenFlags::empty(),
            ),
            Err(e) => reply.error(e),
        }
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
        match self.with_node(ino, |n| n.attr.size) {
            Ok(len) => {
                let n = len.saturating_sub(offset).min(u64::from(size));
                reply.data(&vec![0; usize::try_from(n).unwrap_or(0)]);
            }
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let end = offset.saturating_add(data.len() as u64);
        let result = self.with_node(ino, |n| {
            n.attr.size = n.attr.size.max(end);
            n.attr.mtime = SystemTime::now();
        });
        match result {
            Ok(()) => reply.written(u32::try_from(data.len()).unwrap_or(u32::MAX)),
            Err(e) => reply.error(e),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.error(Errno::from_i32(libc::ENOSYS));
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        reply.ok();
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
        for (next, name, attr) in self.children(ino, offset) {
            if reply.add(attr.ino, next, attr.kind, OsStr::from_bytes(&name)) {
                break;
            }
        }
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
        for (next, name, attr) in self.children(ino, offset) {
            let name = OsStr::from_bytes(&name);
            if reply.add(attr.ino, next, name, &TTL, &attr, Generation(0)) {
                break;
            }
        }
        reply.ok();
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let writeback = args.iter().any(|a| a == "--writeback");
    let plain: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let [mnt] = plain.as_slice() else {
        eprintln!("usage: cargo bench --bench write_floor -- MOUNTPOINT [--writeback]");
        return ExitCode::FAILURE;
    };
    // SAFETY: getuid and getgid only read the process's ids.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    // RUST_LOG=fuser=debug logs one line per request (scripts/count-requests counts them).
    env_logger::init();
    let mut config = Config::default();
    config.mount_options = vec![MountOption::FSName("write-floor".into())];
    config.acl = SessionACL::Owner;
    config.n_threads = Some(4);
    config.clone_fd = true;
    let mut fs = MemFs::new(uid, gid);
    fs.writeback = writeback;
    match fuser::mount(fs, PathBuf::from(mnt.as_str()), &config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("write_floor: {e}");
            ExitCode::FAILURE
        }
    }
}
