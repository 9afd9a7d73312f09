//! The fuser adapter: translates kernel requests into [`Vfs`] calls and results into
//! replies. It holds no format knowledge and no state of its own beyond the mount's owner
//! and which process each calling thread belongs to ([`Callers`]).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use fuser::{
    AccessFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation,
    INodeNo, InitFlags, KernelConfig, LockOwner, Notifier, OpenAccMode, OpenFlags, RenameFlags,
    ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry,
    ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};

use crate::callers::Callers;
use crate::error::Error;
use crate::vfs::kernel::{Keeping, KernelCache};
use crate::vfs::permission::{self, Want};
use crate::vfs::tree::Owner;
use crate::vfs::{Kind, OpenMode, Stat, Vfs};

/// How long the kernel may cache the names and attributes of what the core keeps true (see
/// `vfs::kernel_cache`; pages and listings stay until it is told): it is told at once of
/// every change, so this only has to outlast an incremental backup's pass.
const KEPT_TTL: Duration = Duration::from_secs(3600);

/// How long the kernel may cache names and folder attributes the core does not keep true.
/// Such files' attributes are not cached at all (TTL 0).
const ENTRY_TTL: Duration = Duration::from_secs(1);

/// The adapter over a core.
pub struct WorldFs {
    vfs: Arc<Vfs>,
    uid: u32,
    gid: u32,
    /// Whether the kernel can open folders itself (`FUSE_NO_OPENDIR_SUPPORT`).
    kernel_opens_folders: bool,
    /// Whether the kernel checks owners and modes (`default_permissions`, with
    /// `--allow-other`); if not, the adapter checks what the kernel leaves to it.
    kernel_checks: bool,
    /// The process of a request's thread: the core's views that depend on who asks are per
    /// process.
    callers: Arc<Callers>,
}

impl WorldFs {
    /// An adapter whose files belong to `uid`/`gid` (the mounting user); `kernel_checks`:
    /// the kernel checks owners and modes itself (`default_permissions`).
    pub fn new(vfs: Arc<Vfs>, uid: u32, gid: u32, kernel_checks: bool) -> WorldFs {
        let callers = Arc::new(Callers::default());
        let forks = callers.clone();
        vfs.set_fork_of(Box::new(move |pid, of| forks.forked_from(pid, of)));
        WorldFs {
            vfs,
            uid,
            gid,
            kernel_opens_folders: false,
            kernel_checks,
            callers,
        }
    }

    /// Makes the user of `req` the owner of `ino`, which it just made with attributes `made`
    /// ([`Vfs::set_owner`]); the attributes of `ino` then. What the mount's own user makes
    /// is left as before (a file replaced keeps its owner, a new one is the daemon's). What
    /// was made stays made when giving it away fails (the failure is logged; it shows the
    /// owner it has).
    fn made_by(&self, req: &Request, ino: u64, made: Stat) -> Stat {
        let owner = Owner {
            uid: req.uid(),
            gid: req.gid(),
        };
        if owner.uid == self.uid {
            return made;
        }
        self.vfs.set_owner(ino, owner).unwrap_or_else(|e| {
            log::warn!("giving what uid {} made its owner: {e}", owner.uid);
            made
        })
    }

    /// `chown` of `ino` by the user of `req`: the parts not given stay as shown. The rules
    /// of `chown(2)` are checked here (the kernel checks them only with `--allow-other`).
    fn chown(
        &self,
        req: &Request,
        ino: u64,
        fh: Option<u64>,
        uid: Option<u32>,
        gid: Option<u32>,
    ) -> Result<(), Error> {
        let now = self.vfs.getattr(ino, fh)?.owner.unwrap_or(Owner {
            uid: self.uid,
            gid: self.gid,
        });
        let owner = Owner {
            uid: uid.unwrap_or(now.uid),
            gid: gid.unwrap_or(now.gid),
        };
        if owner == now {
            return Ok(());
        }
        let caller = Owner {
            uid: req.uid(),
            gid: req.gid(),
        };
        let groups = if caller.uid != 0 && owner.gid != now.gid && owner.gid != caller.gid {
            self.callers.groups(req.pid())
        } else {
            Vec::new()
        };
        if !permission::may_chown(now, owner, caller, &groups) {
            return Err(Error::new(
                libc::EPERM,
                format!(
                    "chown to {}:{}: only root gives a file away, and its owner only to a group of its own",
                    owner.uid, owner.gid
                ),
            ));
        }
        self.vfs.set_owner(ino, owner).map(|_| ())
    }

    /// Whether the user of `req` may have `want` of `ino`, by the owner and mode shown, where
    /// the kernel does not check them (a mount of one user), as the kernel would: root may
    /// do anything it would let it. A read of a numbered inode (a block's view, whose tree
    /// lets its owner read it always) is not looked at, so a walk pays nothing for it.
    fn may(&self, req: &Request, ino: u64, want: Want) -> Result<(), Errno> {
        if self.kernel_checks
            || req.uid() == 0
            || (!want.write && crate::vfs::inodes::is_numbered(ino))
        {
            return Ok(());
        }
        let s = self
            .vfs
            .getattr(ino, None)
            .map_err(|e| fail(&self.vfs, "permission check", &e))?;
        if self.permits(req, ino, &s, want) {
            Ok(())
        } else {
            Err(Errno::EACCES)
        }
    }

    /// Whether the user of `req` may add or remove entries of folder `dir` (write and search
    /// permission, as the kernel's `may_create` and `may_delete` ask; it still applies the
    /// sticky bit itself), where the kernel does not check modes.
    fn may_change_in(&self, req: &Request, dir: u64) -> Result<(), Errno> {
        self.may(
            req,
            dir,
            Want {
                write: true,
                execute: true,
                ..Want::default()
            },
        )
    }

    /// Whether the user of `req` may have `want` of `ino`, whose attributes are `s`.
    fn permits(&self, req: &Request, ino: u64, s: &Stat, want: Want) -> bool {
        let attr = self.attr(ino, s);
        let owner = Owner {
            uid: attr.uid,
            gid: attr.gid,
        };
        let caller = Owner {
            uid: req.uid(),
            gid: req.gid(),
        };
        // A group that is not the caller's own counts when the caller is in it: read from
        // `/proc` only then (a file of another user's, shown with its group's bits).
        let groups = if caller.uid != 0
            && caller.uid != owner.uid
            && !permission::in_group(owner, caller, &[])
        {
            self.callers.groups(req.pid())
        } else {
            Vec::new()
        };
        permission::permits(attr.perm, owner, s.kind == Kind::Dir, caller, &groups, want)
    }

    /// The process a request comes from.
    fn who(&self, req: &Request) -> u32 {
        self.callers.process(req.pid())
    }

    fn attr(&self, ino: u64, s: &Stat) -> FileAttr {
        let nlink = if s.kind == Kind::Dir { 2 } else { 1 };
        FileAttr {
            ino: INodeNo(ino),
            size: s.size,
            blocks: s.size.div_ceil(512),
            atime: s.mtime,
            mtime: s.mtime,
            ctime: s.mtime,
            crtime: s.mtime,
            kind: file_type(s.kind),
            perm: s.perm,
            nlink,
            uid: s.owner.map_or(self.uid, |o| o.uid),
            gid: s.owner.map_or(self.gid, |o| o.gid),
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }

    /// How long the kernel may keep the attributes `s` of `ino` and its name, computed
    /// after `Vfs::kernel_epoch` said `since`.
    fn ttls(&self, ino: u64, s: &Stat, since: u64) -> (Duration, Duration) {
        match self.vfs.kernel_keeps(ino, s, since) {
            Keeping::Kept => (KEPT_TTL, KEPT_TTL),
            Keeping::Never => (Duration::ZERO, Duration::ZERO),
            Keeping::Briefly => match s.kind {
                Kind::Dir => (ENTRY_TTL, ENTRY_TTL),
                Kind::File | Kind::Symlink => (Duration::ZERO, ENTRY_TTL),
            },
        }
    }

    /// Replies with the name of `ino` and its attributes `s`, kept as long as they may be.
    fn entry(&self, reply: ReplyEntry, ino: u64, s: &Stat, since: u64) {
        let (ttl, name_ttl) = self.ttls(ino, s, since);
        reply.entry_with_ttls(&ttl, &name_ttl, &self.attr(ino, s), Generation(0));
    }
}

/// The kernel's caches, reached through fuser's notifications.
pub struct KernelNotifier(pub Notifier);

impl KernelCache for KernelNotifier {
    fn inval_inode(&self, ino: u64) -> std::io::Result<()> {
        self.0.inval_inode(INodeNo(ino), 0, 0)
    }

    fn inval_entry(&self, parent: u64, name: &str) -> std::io::Result<()> {
        self.0.inval_entry(INodeNo(parent), OsStr::new(name))
    }
}

fn file_type(kind: Kind) -> FileType {
    match kind {
        Kind::Dir => FileType::Directory,
        Kind::File => FileType::RegularFile,
        Kind::Symlink => FileType::Symlink,
    }
}

fn errno(e: &Error) -> Errno {
    Errno::from_i32(e.errno())
}

/// Logs at a level fitting the error (unless the core logged it already, as it does a failed
/// commit), notes it for `worldfs status` unless it is a plain answer about the tree, and
/// converts it for the kernel.
fn fail(vfs: &Vfs, op: &str, e: &Error) -> Errno {
    match e.errno() {
        libc::ENOENT | libc::EEXIST | libc::ENOTEMPTY => log::debug!("{op}: {e}"),
        _ => {
            if e.is_logged() {
                log::debug!("{op}: {e}");
            } else {
                log::warn!("{op}: {e}");
            }
            vfs.report().error(format!("{op}: {e}"));
        }
    }
    errno(e)
}

fn name_str<'a>(name: &'a OsStr, op: &str) -> Result<&'a str, Errno> {
    name.to_str().ok_or_else(|| {
        log::warn!("{op}: file name {name:?} is not UTF-8");
        Errno::from_i32(libc::EINVAL)
    })
}

fn to_time(t: TimeOrNow) -> SystemTime {
    match t {
        TimeOrNow::SpecificTime(t) => t,
        TimeOrNow::Now => SystemTime::now(),
    }
}

impl Filesystem for WorldFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // O_TRUNC arrives with open() instead of as a separate truncate that would commit an
        // empty file; readdirplus answers `ls -l` and `find` in one pass.
        // With READDIRPLUS_AUTO the kernel asks for attributes only when a program stats what
        // it lists (`ls -l`), not for `find` or `grep -r`.
        // AUTO_INVAL_DATA: attributes fetched again with a new mtime drop the file's
        // cached pages (a second guard beside the core's own invalidations).
        let wanted = InitFlags::FUSE_ATOMIC_O_TRUNC
            | InitFlags::FUSE_AUTO_INVAL_DATA
            | InitFlags::FUSE_DO_READDIRPLUS
            | InitFlags::FUSE_READDIRPLUS_AUTO;
        if let Err(missing) = config.add_capabilities(wanted) {
            log::warn!("kernel lacks FUSE capabilities {missing:?}");
        }
        self.kernel_opens_folders = config
            .capabilities()
            .contains(InitFlags::FUSE_NO_OPENDIR_SUPPORT);
        Ok(())
    }

    fn destroy(&mut self) {
        // What fails here stays held as text no commit took; the daemon saves it on exit.
        let failed = self.vfs.commit_all();
        if failed > 0 {
            log::error!("{failed} file(s) could not be committed at unmount");
        }
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let since = self.vfs.kernel_epoch();
        let name = match name_str(name, "lookup") {
            Ok(n) => n,
            Err(e) => return reply.error(e),
        };
        match self.vfs.lookup(parent.0, name, self.who(req)) {
            Ok((ino, s)) => self.entry(reply, ino, &s, since),
            Err(e) => reply.error(fail(&self.vfs, "lookup", &e)),
        }
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.vfs.forget(ino.0, nlookup);
    }

    /// `access(2)`, asked only without `default_permissions` (a mount without
    /// `--allow-other`): the caller's class of the owner and mode the core shows.
    fn access(&self, req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        let s = match self.vfs.getattr(ino.0, None) {
            Ok(s) => s,
            Err(e) => return reply.error(fail(&self.vfs, "access", &e)),
        };
        let want = Want {
            read: mask.contains(AccessFlags::R_OK),
            write: mask.contains(AccessFlags::W_OK),
            execute: mask.contains(AccessFlags::X_OK),
        };
        if self.permits(req, ino.0, &s, want) {
            reply.ok();
        } else {
            reply.error(Errno::EACCES);
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        let since = self.vfs.kernel_epoch();
        match self.vfs.getattr(ino.0, fh.map(|f| f.0)) {
            Ok(s) => reply.attr(&self.ttls(ino.0, &s, since).0, &self.attr(ino.0, &s)),
            Err(e) => reply.error(fail(&self.vfs, "getattr", &e)),
        }
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let since = self.vfs.kernel_epoch();
        if size.is_some() && fh.is_none() {
            let write = Want {
                write: true,
                ..Want::default()
            };
            if let Err(e) = self.may(req, ino.0, write) {
                return reply.error(e);
            }
        }
        // The modes and owners of tree files are fixed (chmod/chown succeed without effect
        // there, so `cp -p` and `rsync -a` work); sizes, mtimes, the modes of files the core
        // holds and the owners of real folders' files are real.
        if uid.is_some() || gid.is_some() {
            match self.chown(req, ino.0, fh.map(|f| f.0), uid, gid) {
                Ok(()) => {}
                // Refused to the caller, as on disk: not the mount's failure.
                Err(e) if e.errno() == libc::EPERM => return reply.error(Errno::EPERM),
                Err(e) => return reply.error(fail(&self.vfs, "chown", &e)),
            }
        }
        let fh = fh.map(|f| f.0);
        self.vfs
            .setattr_replying(ino.0, fh, size, mtime.map(to_time), mode, |r| match r {
                Ok(s) => reply.attr(&self.ttls(ino.0, &s, since).0, &self.attr(ino.0, &s)),
                Err(e) => reply.error(fail(&self.vfs, "setattr", &e)),
            });
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        let since = self.vfs.kernel_epoch();
        if let Err(e) = self.may_change_in(req, parent.0) {
            return reply.error(e);
        }
        let name = match name_str(name, "mkdir") {
            Ok(n) => n,
            Err(e) => return reply.error(e),
        };
        let result = self
            .vfs
            .mkdir(parent.0, name, self.who(req))
            .map(|(ino, s)| (ino, self.made_by(req, ino, s)));
        match result {
            Ok((ino, s)) => self.entry(reply, ino, &s, since),
            Err(e) => reply.error(fail(&self.vfs, "mkdir", &e)),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.vfs.readlink(ino.0) {
            Ok(target) => reply.data(&target),
            Err(e) => reply.error(fail(&self.vfs, "readlink", &e)),
        }
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let since = self.vfs.kernel_epoch();
        if let Err(e) = self.may_change_in(req, parent.0) {
            return reply.error(e);
        }
        let name = match name_str(link_name, "symlink") {
            Ok(n) => n,
            Err(e) => return reply.error(e),
        };
        let target = target.as_os_str().as_bytes();
        let result = self
            .vfs
            .symlink(parent.0, name, target, self.who(req))
            .map(|(ino, s)| (ino, self.made_by(req, ino, s)));
        match result {
            Ok((ino, s)) => self.entry(reply, ino, &s, since),
            Err(e) => reply.error(fail(&self.vfs, "symlink", &e)),
        }
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        if let Err(e) = self.may_change_in(req, parent.0) {
            return reply.error(e);
        }
        let name = match name_str(name, "unlink") {
            Ok(n) => n,
            Err(e) => return reply.error(e),
        };
        let result = self.vfs.unlink_as(parent.0, name, self.who(req));
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(fail(&self.vfs, "unlink", &e)),
        }
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        if let Err(e) = self.may_change_in(req, parent.0) {
            return reply.error(e);
        }
        let name = match name_str(name, "rmdir") {
            Ok(n) => n,
            Err(e) => return reply.error(e),
        };
        let result = self.vfs.rmdir(parent.0, name);
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(fail(&self.vfs, "rmdir", &e)),
        }
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        if !flags.is_empty() {
            return reply.error(Errno::from_i32(libc::EINVAL));
        }
        for dir in [parent.0, newparent.0] {
            if let Err(e) = self.may_change_in(req, dir) {
                return reply.error(e);
            }
        }
        let (name, newname) = match (name_str(name, "rename"), name_str(newname, "rename")) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(e), _) | (_, Err(e)) => return reply.error(e),
        };
        let result = self.vfs.rename(parent.0, name, newparent.0, newname);
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(fail(&self.vfs, "rename", &e)),
        }
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let mode = OpenMode {
            write: flags.acc_mode() != OpenAccMode::O_RDONLY,
            truncate: flags.0 & libc::O_TRUNC != 0,
            append: flags.0 & libc::O_APPEND != 0,
        };
        let want = Want {
            read: flags.acc_mode() != OpenAccMode::O_WRONLY,
            write: mode.write || mode.truncate,
            execute: false,
        };
        if let Err(e) = self.may(req, ino.0, want) {
            return reply.error(e);
        }
        // A handle opened for reading is never dirty, so its close has nothing to commit:
        // FOPEN_NOFLUSH spares the kernel's FLUSH round trip on every close of a read.
        // FOPEN_KEEP_CACHE where the core keeps the kernel's pages true. An open may find
        // that the kernel keeps attributes of another version: it is told before the reply.
        let result = self.vfs.open_keeping(ino.0, mode);
        match result {
            Ok((fh, keep)) => {
                let mut open_flags = FopenFlags::empty();
                if !mode.write {
                    open_flags |= FopenFlags::FOPEN_NOFLUSH;
                }
                if keep {
                    open_flags |= FopenFlags::FOPEN_KEEP_CACHE;
                }
                reply.opened(FileHandle(fh), open_flags)
            }
            Err(e) => reply.error(fail(&self.vfs, "open", &e)),
        }
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let since = self.vfs.kernel_epoch();
        if let Err(e) = self.may_change_in(req, parent.0) {
            return reply.error(e);
        }
        let name = match name_str(name, "create") {
            Ok(n) => n,
            Err(e) => return reply.error(e),
        };
        let result = self
            .vfs
            .create(parent.0, name, mode)
            .map(|(ino, s, fh)| (ino, self.made_by(req, ino, s), fh));
        match result {
            // The close of a copier's temporary commits nothing: no FLUSH round trip.
            Ok((ino, s, fh)) => reply.created(
                &self.ttls(ino, &s, since).0,
                &self.attr(ino, &s),
                Generation(0),
                FileHandle(fh),
                if self.vfs.closes_quietly(fh) {
                    FopenFlags::FOPEN_NOFLUSH
                } else {
                    FopenFlags::empty()
                },
            ),
            Err(e) => reply.error(fail(&self.vfs, "create", &e)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match self.vfs.read(fh.0, offset, size) {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(fail(&self.vfs, "read", &e)),
        }
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let append = flags.0 & libc::O_APPEND != 0;
        match self.vfs.write(fh.0, offset, data, append) {
            Ok(n) => reply.written(u32::try_from(n).unwrap_or(u32::MAX)),
            Err(e) => reply.error(fail(&self.vfs, "write", &e)),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        let result = self.vfs.flush(fh.0);
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(fail(&self.vfs, "close", &e)),
        }
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let result = self.vfs.release(fh.0);
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(fail(&self.vfs, "release", &e)),
        }
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let result = self.vfs.fsync(fh.0);
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(fail(&self.vfs, "fsync", &e)),
        }
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let result = self.vfs.sync();
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(fail(&self.vfs, "fsync", &e)),
        }
    }

    /// Directories keep no state here (listings resume from stable cookies). Where the core
    /// keeps the kernel's caches true, opendir is left to the kernel: `ENOSYS` makes it open
    /// every folder itself from then on (no OPENDIR and RELEASEDIR round trips) and cache
    /// the listings it reads, which the core drops whenever they may have changed (see
    /// `Vfs::listing_served`). Otherwise every listing asks worldfs.
    fn opendir(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        if self.kernel_opens_folders && self.vfs.keeps_kernel_cache() {
            return reply.error(Errno::from_i32(libc::ENOSYS));
        }
        reply.opened(FileHandle(0), FopenFlags::empty());
    }

    fn readdir(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let result = self
            .vfs
            .readdir(ino.0, offset, false, self.who(req), &mut |e| {
                !reply.add(INodeNo(e.ino), e.offset, file_type(e.stat.kind), e.name)
            });
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(fail(&self.vfs, "readdir", &e)),
        }
    }

    fn readdirplus(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        let since = self.vfs.kernel_epoch();
        let result = self
            .vfs
            .readdir(ino.0, offset, true, self.who(req), &mut |e| {
                let attr = self.attr(e.ino, e.stat);
                !reply.add(
                    INodeNo(e.ino),
                    e.offset,
                    e.name,
                    &self.ttls(e.ino, e.stat, since).0,
                    &attr,
                    Generation(0),
                )
            });
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(fail(&self.vfs, "readdirplus", &e)),
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        reply.statfs(0, 0, 0, 0, 0, 4096, 255, 4096);
    }
}
