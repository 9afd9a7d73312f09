//! A real folder shown in the tree as it is (a Luanti world's `world.mt`, `worldmods/`,
//! `schems/`, a Survivalcraft `Project.xml`): its files, sub-folders and links, read and
//! written as they are, files replaced atomically ([`crate::storekit::replace`]) so a crash
//! leaves the old or the new file.
//!
//! Files and folders show their own permission bits (a `world.mt` of mode 0600 holding a
//! database password stays 0600 through the mount, also with `--allow-other`), less the
//! write bits on a read-only mount; `chmod` sets them, a replaced file keeps its mode, and
//! mtimes are the ones on disk and can be set (`rsync -a`, `touch -d`). Other kinds of files
//! (FIFOs, sockets, devices) are not shown.
//!
//! Symbolic links are shown as links and never followed: anyone who can write to a world
//! folder could point one at any file of the user running worldfs. Every path is walked
//! from the folder's own descriptor, its sub-folders opened with `openat2` refusing any
//! link (`RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH`, a few KiB of names per call, and the
//! core names no path deeper than [`crate::vfs::naming::DEEPEST`]) or, where the kernel has
//! no `openat2`, one
//! name at a time with `O_NOFOLLOW | O_DIRECTORY`, and every operation acts on the last name with a `*at` call
//! in its folder's descriptor that does not follow it (`fstatat`, `openat` with
//! `O_NOFOLLOW`, `readlinkat`, `unlinkat`, `renameat`, `mkdirat`, `symlinkat`, `utimensat`
//! and `fchmodat` without following): a link, at the end of a path or in the middle, is
//! never gone through. Reading or writing a link's name as a file fails with `ELOOP` (the
//! kernel resolves links before it opens, so through a mount that only happens by a race),
//! and a whole-file replacement never follows one ([`crate::storekit::replace`]).
//!
//! The top level may hide names the tree shows otherwise (a Luanti world's `map.sqlite`,
//! the `blocks/` and `players/` views): those are neither listed nor reached here.

use std::ffi::OsStr;
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use nix::dir::Dir;
use nix::fcntl::{openat, openat2, readlinkat, renameat, AtFlags, OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::{
    fchmodat, fstatat, mkdirat, utimensat, FchmodatFlags, FileStat, Mode, SFlag, UtimensatFlags,
};
use nix::sys::time::TimeSpec;
use nix::unistd::{symlinkat, unlinkat, UnlinkatFlags};

use crate::error::{lock, Error, Result};
use crate::storekit::mtimes::content_hash;
use crate::storekit::replace::{
    is_temp_name, open_no_follow_at, remove_all_leftovers, write_atomic_at,
};
use crate::vfs::tree::{Entry, Kind, Owner, Stat, TreePath, MAX_TREE_COOKIE};

/// Mode of a file created through the mount, until the core sets the mode it was created
/// with (owner only meanwhile, so a secret is never readable by others even briefly).
const NEW_FILE_MODE: u32 = 0o600;
/// Mode of a folder created through the mount (less the umask), until `chmod`.
const NEW_DIR_MODE: u32 = 0o755;

/// The files, sub-folders and links of one real folder, minus the top-level names the tree
/// shows otherwise.
pub struct FolderFiles {
    dir: PathBuf,
    hidden: fn(&str) -> bool,
    read_only: bool,
    /// The names of the folders listed last, in cookie order, so a listing paged over many
    /// `readdir` calls reads a big folder once and stats only the entries each call returns.
    listings: Mutex<Vec<Listing>>,
    /// Entries looked at with `fstatat` (tests count them).
    #[cfg(test)]
    stats: std::sync::atomic::AtomicUsize,
    /// Folders read whole (tests count them).
    #[cfg(test)]
    reads: std::sync::atomic::AtomicUsize,
}

/// Folders whose names are kept between `readdir` calls (several listings may run at once).
const LISTINGS_KEPT: usize = 4;

/// How long a folder must have been unchanged for its names to be kept. A folder's change
/// time ticks coarsely (the kernel's clock tick), so an entry added in the same tick as a
/// listing would leave the time as it was: names read so soon after a change are not kept
/// (the rule of git's "racily clean" index entries).
const SETTLED: Duration = Duration::from_secs(1);

/// The shown names of one folder, in cookie order, while the folder is unchanged.
struct Listing {
    path: Vec<String>,
    /// The folder's inode and change time when it was read: any entry added, removed or
    /// renamed changes them.
    version: (u64, i64, i64),
    first_cookie: u64,
    names: Arc<Vec<(u64, String)>>,
}

/// An error of a `*at` call on `path`.
fn at_error(path: &TreePath, e: nix::errno::Errno) -> Error {
    Error::new(e as i32, format!("{}: {e}", path.join("/")))
}

/// At most this many bytes of folder names are opened in one call (below `PATH_MAX`).
const CHUNK_BYTES: usize = 3072;

/// `folders` cut into runs whose joined names stay under [`CHUNK_BYTES`] (a name alone is at
/// most 255 bytes).
fn chunks(folders: &[String]) -> impl Iterator<Item = &[String]> {
    let mut rest = folders;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut bytes = 0;
        let n = rest
            .iter()
            .take_while(|part| {
                bytes += part.len() + 1;
                bytes <= CHUNK_BYTES
            })
            .count()
            .max(1);
        let (chunk, after) = rest.split_at(n);
        rest = after;
        Some(chunk)
    })
}

/// Which file `st` is: its device and inode number, in one number.
fn file_id(st: &FileStat) -> u64 {
    st.st_dev.rotate_left(32) ^ st.st_ino
}

/// The listing cookie of the entry `name`: its hash, in `first_cookie..` below
/// [`MAX_TREE_COOKIE`].
fn name_cookie(first_cookie: u64, name: &str) -> u64 {
    first_cookie + content_hash(name.as_bytes()) % (MAX_TREE_COOKIE / 2)
}

/// The modification time of a stat.
fn mtime_of(st: &FileStat) -> SystemTime {
    let nanos = u32::try_from(st.st_mtime_nsec).unwrap_or(0);
    match u64::try_from(st.st_mtime) {
        Ok(secs) => UNIX_EPOCH + Duration::new(secs, nanos),
        Err(_) => UNIX_EPOCH - Duration::from_secs(st.st_mtime.unsigned_abs()),
    }
}

/// An open folder (of the shown folder, or below it) and the name of an entry in it.
struct At<'a> {
    dir: File,
    name: &'a str,
}

impl FolderFiles {
    /// The folder `dir`, less the top-level names for which `hidden` is true. Read-write,
    /// the temporary files a crash left in `dir` are removed first.
    pub fn new(dir: &Path, hidden: fn(&str) -> bool, read_only: bool) -> FolderFiles {
        if !read_only {
            if let Err(e) = remove_all_leftovers(dir) {
                log::warn!(
                    "{}: cannot remove leftover temporary files: {e}",
                    dir.display()
                );
            }
        }
        FolderFiles {
            dir: dir.to_path_buf(),
            hidden,
            read_only,
            listings: Mutex::new(Vec::new()),
            #[cfg(test)]
            stats: Default::default(),
            #[cfg(test)]
            reads: Default::default(),
        }
    }

    /// Whether `name` is shown at `depth` (0: the top level, where `hidden` applies).
    fn shown(&self, depth: usize, name: &str) -> bool {
        let odd = name.is_empty() || name == "." || name == ".." || name.contains('/');
        let hidden = depth == 0 && (self.hidden)(name);
        !(odd || hidden || is_temp_name(name))
    }

    /// The shown folder itself.
    fn open_root(&self) -> Result<File> {
        let fd = openat(
            None,
            &self.dir,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| Error::new(e as i32, format!("{}: {e}", self.dir.display())))?;
        // SAFETY: `openat` just returned this descriptor, which nothing else owns.
        Ok(unsafe { File::from_raw_fd(fd) })
    }

    /// The sub-folder `name` of `dir`, never through a link.
    fn open_sub(dir: &File, name: &str, path: &TreePath) -> Result<File> {
        let fd = openat(
            Some(dir.as_raw_fd()),
            name,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| match e {
            // A link or a file where a folder is expected: the path names nothing here.
            nix::errno::Errno::ELOOP | nix::errno::Errno::ENOTDIR => {
                Error::not_found(format!("{}: no such folder", path.join("/")))
            }
            e => at_error(path, e),
        })?;
        // SAFETY: `openat` just returned this descriptor, which nothing else owns.
        Ok(unsafe { File::from_raw_fd(fd) })
    }

    /// The folder holding the last name of `path`, walked from the top without following
    /// links, and that name. Every name on the way must be shown.
    fn at<'a>(&self, path: &'a TreePath) -> Result<At<'a>> {
        let (name, folders) = path
            .split_last()
            .ok_or_else(|| Error::invalid("the folder itself has no name"))?;
        let mut dir = self.open_root()?;
        for (depth, part) in path.iter().enumerate() {
            if !self.shown(depth, part) {
                return Err(Error::not_found(format!(
                    "{}: not a file of the world folder",
                    path.join("/")
                )));
            }
        }
        for chunk in chunks(folders) {
            dir = match Self::open_beneath(&dir, chunk, path) {
                Some(opened) => opened?,
                None => chunk
                    .iter()
                    .try_fold(dir, |dir, part| Self::open_sub(&dir, part, path))?,
            };
        }
        Ok(At { dir, name })
    }

    /// The folder `parts` below `dir` in one call, no link followed on the way (so a path's
    /// cost does not grow with its depth: one call for up to [`CHUNK_BYTES`] of names).
    /// `None` where the kernel cannot (no `openat2`): then each part is opened in turn.
    fn open_beneath(dir: &File, parts: &[String], path: &TreePath) -> Option<Result<File>> {
        let how = OpenHow::new()
            .flags(OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC)
            .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS | ResolveFlag::RESOLVE_BENEATH);
        match openat2(dir.as_raw_fd(), parts.join("/").as_str(), how) {
            // SAFETY: `openat2` just returned this descriptor, which nothing else owns.
            Ok(fd) => Some(Ok(unsafe { File::from_raw_fd(fd) })),
            // No `openat2` (or refused by a seccomp filter), or a folder on the way moved
            // while the kernel walked (it then refuses rather than guess): one name at a time.
            Err(
                nix::errno::Errno::ENOSYS
                | nix::errno::Errno::EPERM
                | nix::errno::Errno::E2BIG
                | nix::errno::Errno::EXDEV
                | nix::errno::Errno::EAGAIN,
            ) => None,
            // A link or a file where a folder is expected: the path names nothing here.
            Err(nix::errno::Errno::ELOOP | nix::errno::Errno::ENOTDIR) => Some(Err(
                Error::not_found(format!("{}: no such folder", path.join("/"))),
            )),
            Err(e) => Some(Err(at_error(path, e))),
        }
    }

    /// The folder `path` itself (the top for an empty path).
    fn open_dir(&self, path: &TreePath) -> Result<File> {
        if path.is_empty() {
            return self.open_root();
        }
        let at = self.at(path)?;
        Self::open_sub(&at.dir, at.name, path)
    }

    fn check_writable(&self) -> Result<()> {
        if self.read_only {
            return Err(Error::read_only("the mount is read-only"));
        }
        Ok(())
    }

    /// The `lstat` of `name` in `dir` as a tree stat: files, folders and links only.
    fn stat_in(&self, dir: &File, name: &str, path: &TreePath) -> Result<Stat> {
        let st = fstatat(Some(dir.as_raw_fd()), name, AtFlags::AT_SYMLINK_NOFOLLOW)
            .map_err(|e| at_error(path, e))?;
        let mtime = mtime_of(&st);
        let kind = match SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT {
            SFlag::S_IFLNK => return Ok(Stat::symlink(st.st_size as u64, mtime)),
            SFlag::S_IFREG => Kind::File,
            SFlag::S_IFDIR => Kind::Dir,
            _ => {
                return Err(Error::not_found(format!(
                    "{}: not a regular file, folder or link",
                    path.join("/")
                )))
            }
        };
        // The sticky bit is kept (the kernel enforces it, as on disk); set-id bits are not
        // shown (the mount is nosuid).
        let perm = (st.st_mode & 0o1777) as u16;
        Ok(Stat {
            kind,
            size: if kind == Kind::File {
                st.st_size as u64
            } else {
                0
            },
            mtime,
            perm,
            volatile: true,
            source: None,
            owner: Some(Owner {
                uid: st.st_uid,
                gid: st.st_gid,
            }),
            file: (kind == Kind::File).then(|| file_id(&st)),
        })
    }

    /// The stat of the file, folder or link at `path` (its own, as `lstat` gives).
    pub fn stat(&self, path: &TreePath) -> Result<Stat> {
        let at = self.at(path)?;
        self.stat_in(&at.dir, at.name, path)
    }

    /// The shown entries of the folder `path` (the top for an empty path). Each cookie comes
    /// from the entry's name (at least `first_cookie`), so it stays the same while other
    /// entries come and go: a listing paged across a `create` or an `unlink` neither skips
    /// nor repeats one.
    pub fn entries(&self, path: &TreePath, first_cookie: u64) -> Result<Vec<Entry>> {
        let mut entries = Vec::new();
        self.list(path, first_cookie, 0, &mut |e| {
            entries.push(e);
            true
        })?;
        Ok(entries)
    }

    /// Streams the entries of the folder `path` whose cookie is greater than `after`, in
    /// cookie order, until `sink` returns false ([`crate::vfs::Tree::list`]). The folder's
    /// names are read once while it is unchanged; only the entries sent are stat-ed.
    pub fn list(
        &self,
        path: &TreePath,
        first_cookie: u64,
        after: u64,
        sink: &mut dyn FnMut(Entry) -> bool,
    ) -> Result<()> {
        let dir = self.open_dir(path)?;
        let names = self.sorted_names(&dir, path, first_cookie)?;
        let start = names.partition_point(|(cookie, _)| *cookie <= after);
        for (cookie, name) in &names[start..] {
            let mut full = path.to_vec();
            full.push(name.clone());
            #[cfg(test)]
            self.stats
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            // An entry removed since the names were read is left out.
            if let Ok(stat) = self.stat_in(&dir, name, &full) {
                let entry = Entry {
                    name: name.clone(),
                    cookie: *cookie,
                    stat,
                };
                if !sink(entry) {
                    break;
                }
            }
        }
        Ok(())
    }

    /// The shown names of the open folder `dir` at `path` with their cookies, in cookie order:
    /// kept from an earlier call while the folder is unchanged, else read.
    fn sorted_names(
        &self,
        dir: &File,
        path: &TreePath,
        first_cookie: u64,
    ) -> Result<Arc<Vec<(u64, String)>>> {
        let st = nix::sys::stat::fstat(dir.as_raw_fd()).map_err(|e| at_error(path, e))?;
        let version = (st.st_ino, st.st_ctime, st.st_ctime_nsec);
        let fits = |l: &Listing| l.path == path && l.first_cookie == first_cookie;
        if let Some(l) = lock(&self.listings)?.iter().find(|l| fits(l)) {
            if l.version == version {
                return Ok(l.names.clone());
            }
        }
        let read_at = SystemTime::now();
        #[cfg(test)]
        self.reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let listed = dir.try_clone()?;
        let mut reader = Dir::from_fd(std::os::fd::IntoRawFd::into_raw_fd(listed))
            .map_err(|e| at_error(path, e))?;
        let mut names = Vec::new();
        for entry in reader.iter() {
            let entry = entry.map_err(|e| at_error(path, e))?;
            match entry.file_name().to_str() {
                Ok(name) => {
                    if self.shown(path.len(), name) {
                        names.push(name.to_string());
                    }
                }
                // The mount's names are text: one that is not is left out, and said so (a
                // backup through the mount does not hold it).
                Err(_) => log::warn!(
                    "{}/{}: not shown: the name is not UTF-8 text (rename it to back it up \
                     through the mount)",
                    path.join("/"),
                    String::from_utf8_lossy(entry.file_name().to_bytes())
                ),
            }
        }
        names.sort();
        let mut used = std::collections::BTreeSet::new();
        let mut cookies: Vec<(u64, String)> = names
            .into_iter()
            .map(|name| {
                let mut cookie = name_cookie(first_cookie, &name);
                while !used.insert(cookie) {
                    cookie += 1;
                }
                (cookie, name)
            })
            .collect();
        cookies.sort();
        let names = Arc::new(cookies);
        let changed = UNIX_EPOCH
            + Duration::new(
                u64::try_from(st.st_ctime).unwrap_or(0),
                u32::try_from(st.st_ctime_nsec).unwrap_or(0),
            );
        if changed + SETTLED > read_at {
            return Ok(names);
        }
        let mut listings = lock(&self.listings)?;
        listings.retain(|l| !fits(l));
        if listings.len() >= LISTINGS_KEPT {
            listings.remove(0);
        }
        listings.push(Listing {
            path: path.to_vec(),
            version,
            first_cookie,
            names: names.clone(),
        });
        Ok(names)
    }

    /// Content of one file (a link is refused with `ELOOP`).
    pub fn read(&self, path: &TreePath) -> Result<Arc<Vec<u8>>> {
        let at = self.at(path)?;
        let shown = self.dir.join(path.join("/"));
        let mut f = open_no_follow_at(&at.dir, OsStr::new(at.name), &shown)?;
        let mut data = Vec::new();
        f.read_to_end(&mut data)?;
        Ok(Arc::new(data))
    }

    /// The target of one link, as stored.
    pub fn readlink(&self, path: &TreePath) -> Result<Vec<u8>> {
        let at = self.at(path)?;
        readlinkat(Some(at.dir.as_raw_fd()), at.name)
            .map(OsStringExt::into_vec)
            .map_err(|e| at_error(path, e))
    }

    /// Atomically replaces (or creates) one file, keeping its mode (a link is refused).
    pub fn write(&self, path: &TreePath, data: &[u8]) -> Result<()> {
        self.check_writable()?;
        let at = self.at(path)?;
        let shown = self.dir.join(path.join("/"));
        write_atomic_at(&at.dir, OsStr::new(at.name), &shown, NEW_FILE_MODE, |out| {
            Ok(out.write_all(data)?)
        })
    }

    /// Creates link `path` pointing to `target`.
    pub fn symlink(&self, path: &TreePath, target: &[u8]) -> Result<()> {
        self.check_writable()?;
        let at = self.at(path).map_err(|_| {
            Error::not_permitted(format!(
                "{}: a name of the world folder the tree shows otherwise or uses itself",
                path.join("/")
            ))
        })?;
        symlinkat(OsStr::from_bytes(target), Some(at.dir.as_raw_fd()), at.name)
            .map_err(|e| at_error(path, e))?;
        at.dir.sync_all()?;
        Ok(())
    }

    /// Makes the folder `path`.
    pub fn mkdir(&self, path: &TreePath) -> Result<()> {
        self.check_writable()?;
        let at = self.at(path)?;
        mkdirat(
            Some(at.dir.as_raw_fd()),
            at.name,
            Mode::from_bits_truncate(NEW_DIR_MODE),
        )
        .map_err(|e| at_error(path, e))?;
        at.dir.sync_all()?;
        Ok(())
    }

    /// Removes the empty folder `path` (never a link's target).
    pub fn rmdir(&self, path: &TreePath) -> Result<()> {
        self.check_writable()?;
        let at = self.at(path)?;
        unlinkat(Some(at.dir.as_raw_fd()), at.name, UnlinkatFlags::RemoveDir)
            .map_err(|e| at_error(path, e))?;
        at.dir.sync_all()?;
        Ok(())
    }

    /// Removes one file or link (never what a link points to).
    pub fn remove(&self, path: &TreePath) -> Result<()> {
        self.check_remove(path)?;
        let at = self.at(path)?;
        unlinkat(
            Some(at.dir.as_raw_fd()),
            at.name,
            UnlinkatFlags::NoRemoveDir,
        )
        .map_err(|e| at_error(path, e))?;
        at.dir.sync_all()?;
        Ok(())
    }

    /// Whether [`FolderFiles::remove`] would remove `path`: a file or link that is there.
    pub fn check_remove(&self, path: &TreePath) -> Result<()> {
        self.check_writable()?;
        let at = self.at(path)?;
        match self.stat_in(&at.dir, at.name, path)?.kind {
            Kind::Dir => Err(Error::is_dir(format!("{}: is a folder", path.join("/")))),
            Kind::File | Kind::Symlink => Ok(()),
        }
    }

    /// Renames one file, folder or link, anywhere inside the shown folder.
    pub fn rename(&self, from: &TreePath, to: &TreePath) -> Result<()> {
        self.check_writable()?;
        let a = self.at(from)?;
        self.stat_in(&a.dir, a.name, from)?;
        let b = self.at(to)?;
        renameat(
            Some(a.dir.as_raw_fd()),
            a.name,
            Some(b.dir.as_raw_fd()),
            b.name,
        )
        .map_err(|e| at_error(from, e))?;
        a.dir.sync_all()?;
        b.dir.sync_all()?;
        Ok(())
    }

    /// Sets the mtime of one file, folder or link (of the link itself, never of what it
    /// points to).
    pub fn set_mtime(&self, path: &TreePath, mtime: SystemTime) -> Result<()> {
        self.check_writable()?;
        let at = self.at(path)?;
        self.stat_in(&at.dir, at.name, path)?;
        let mtime = match mtime.duration_since(UNIX_EPOCH) {
            Ok(after) => TimeSpec::from_duration(after),
            Err(before) => -TimeSpec::from_duration(before.duration()),
        };
        utimensat(
            Some(at.dir.as_raw_fd()),
            at.name,
            &TimeSpec::UTIME_OMIT,
            &mtime,
            UtimensatFlags::NoFollowSymlink,
        )
        .map_err(|e| at_error(path, e))
    }

    /// Gives one file, folder or link (not followed) the owner `owner`, when worldfs runs as
    /// root (only root may give files away; a mount of one's own world needs nothing). Not
    /// in a folder where others may rename what is there (group- or world-writable and not
    /// sticky): the name is given away after it was made, and another user could put
    /// something else under it meanwhile; what is made there stays the daemon's.
    pub fn set_owner(&self, path: &TreePath, owner: Owner) -> Result<()> {
        self.check_writable()?;
        if !nix::unistd::geteuid().is_root() {
            return Ok(());
        }
        let at = self.at(path)?;
        let folder = nix::sys::stat::fstat(at.dir.as_raw_fd()).map_err(|e| at_error(path, e))?;
        if folder.st_mode & 0o022 != 0 && folder.st_mode & 0o1000 == 0 {
            log::info!(
                "{}: left the daemon's (others may rename in its folder)",
                path.join("/")
            );
            return Ok(());
        }
        let st = fstatat(
            Some(at.dir.as_raw_fd()),
            at.name,
            AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .map_err(|e| at_error(path, e))?;
        if (st.st_uid, st.st_gid) == (owner.uid, owner.gid) {
            return Ok(());
        }
        nix::unistd::fchownat(
            Some(at.dir.as_raw_fd()),
            at.name,
            Some(owner.uid.into()),
            Some(owner.gid.into()),
            AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .map_err(|e| at_error(path, e))
    }

    /// Sets the permission bits of one file or folder (a link has none: `EOPNOTSUPP`), and
    /// clears its set-id and sticky bits, as `chmod` to `perm` does: new content that
    /// replaced a set-user-id file (kept with the old mode and owner) does not keep them.
    pub fn set_perm(&self, path: &TreePath, perm: u16) -> Result<()> {
        self.check_writable()?;
        let at = self.at(path)?;
        self.stat_in(&at.dir, at.name, path)?;
        let st = fstatat(
            Some(at.dir.as_raw_fd()),
            at.name,
            AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .map_err(|e| at_error(path, e))?;
        if st.st_mode & 0o7777 == u32::from(perm) {
            return Ok(());
        }
        fchmodat(
            Some(at.dir.as_raw_fd()),
            at.name,
            Mode::from_bits_truncate(u32::from(perm)),
            FchmodatFlags::NoFollowSymlink,
        )
        .map_err(|e| at_error(path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn p(name: &str) -> Vec<String> {
        name.split('/').map(str::to_string).collect()
    }

    /// Lists `path` a page of `page` entries at a time, as the kernel's readdir calls do.
    fn paged(f: &FolderFiles, path: &[String], page: usize) -> Vec<String> {
        let mut names = Vec::new();
        let mut after = 0;
        loop {
            let mut got = Vec::new();
            f.list(path, 1, after, &mut |e| {
                got.push(e);
                got.len() < page
            })
            .unwrap();
            let Some(last) = got.last() else { break };
            after = last.cookie;
            names.extend(got.into_iter().map(|e| e.name));
        }
        names.sort();
        names
    }

    fn stats(f: &FolderFiles) -> usize {
        f.stats.load(std::sync::atomic::Ordering::Relaxed)
    }

    #[test]
    fn a_big_folder_listed_page_by_page_is_read_once_and_stats_only_what_it_returns() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("schems")).unwrap();
        for i in 0..2000 {
            fs::write(dir.path().join(format!("schems/s{i}.mts")), b"x").unwrap();
        }
        // Names read in the tick of a change are not kept; these are after a second.
        std::thread::sleep(SETTLED + Duration::from_millis(100));
        let f = FolderFiles::new(dir.path(), |_| false, false);
        let names = paged(&f, &p("schems"), 40);
        assert_eq!(names.len(), 2000);
        assert_eq!(
            stats(&f),
            2000,
            "each entry stat-ed once, not once per page"
        );
        let reads = f.reads.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(reads, 1, "the folder read once for its 51 pages");
        // A change shows at once: the folder's change time moved.
        fs::write(dir.path().join("schems/new.mts"), b"y").unwrap();
        fs::remove_file(dir.path().join("schems/s7.mts")).unwrap();
        let names = paged(&f, &p("schems"), 40);
        assert_eq!(names.len(), 2000);
        assert!(names.contains(&"new.mts".to_string()));
        assert!(!names.contains(&"s7.mts".to_string()));
    }

    #[test]
    fn names_read_right_after_a_change_are_read_again_next_time() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("d")).unwrap();
        let f = FolderFiles::new(dir.path(), |_| false, false);
        assert!(paged(&f, &p("d"), 10).is_empty());
        // Within the same clock tick as the listing: the folder's time may not move.
        fs::write(dir.path().join("d/a"), b"").unwrap();
        assert_eq!(paged(&f, &p("d"), 10), ["a"]);
    }

    impl FolderFiles {
        /// The names at the top, sorted.
        fn names(&self) -> Vec<String> {
            let mut names: Vec<String> = self
                .entries(&[], 1)
                .unwrap()
                .into_iter()
                .map(|e| e.name)
                .collect();
            names.sort();
            names
        }
    }

    #[test]
    fn cookies_stay_the_same_while_files_come_and_go() {
        let dir = tempfile::tempdir().unwrap();
        for n in ["b.txt", "d.txt", "f.txt"] {
            fs::write(dir.path().join(n), n).unwrap();
        }
        let f = FolderFiles::new(dir.path(), |_| false, false);
        let cookies = |f: &FolderFiles| -> Vec<(String, u64)> {
            let mut e: Vec<_> = f
                .entries(&[], 5)
                .unwrap()
                .into_iter()
                .map(|e| (e.name, e.cookie))
                .collect();
            e.sort();
            e
        };
        let before = cookies(&f);
        assert!(before.iter().all(|(_, c)| *c >= 5 && *c <= MAX_TREE_COOKIE));
        // A listing resumed after a create or an unlink finds every other file where it was.
        fs::write(dir.path().join("a.txt"), "new").unwrap();
        fs::remove_file(dir.path().join("d.txt")).unwrap();
        let after = cookies(&f);
        for (name, cookie) in &before {
            if name != "d.txt" {
                assert!(after.contains(&(name.clone(), *cookie)), "{name}");
            }
        }
    }

    #[test]
    fn lists_reads_writes_and_hides() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("world.mt"), "gameid = minetest\n").unwrap();
        fs::write(dir.path().join("map.sqlite"), "db").unwrap();
        fs::create_dir(dir.path().join("worldmods")).unwrap();
        let f = FolderFiles::new(dir.path(), |n| n.starts_with("map.sqlite"), false);
        assert_eq!(f.names(), vec!["world.mt", "worldmods"]);
        assert_eq!(f.stat(&p("worldmods")).unwrap().kind, Kind::Dir);
        assert!(f.stat(&p("map.sqlite")).is_err());
        f.write(&p("world.mt"), b"gameid = other\n").unwrap();
        assert_eq!(&**f.read(&p("world.mt")).unwrap(), b"gameid = other\n");
        assert_eq!(
            f.names(),
            vec!["world.mt", "worldmods"],
            "no temporary left"
        );
        let ro = FolderFiles::new(dir.path(), |_| false, true);
        assert_eq!(
            ro.write(&p("world.mt"), b"x").unwrap_err().errno(),
            libc::EROFS
        );
        let left = dir.path().join(".worldfs-world.mt.123.4.tmp");
        fs::write(&left, b"half").unwrap();
        FolderFiles::new(dir.path(), |_| false, true);
        assert!(left.exists(), "a read-only mount removes nothing");
        FolderFiles::new(dir.path(), |_| false, false);
        assert!(
            !left.exists(),
            "a crash's leftover is removed at a read-write mount"
        );
    }

    #[test]
    fn links_in_the_folder_are_shown_as_links_and_never_followed() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().unwrap();
        let world = dir.path().join("world");
        fs::create_dir(&world).unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, b"secret").unwrap();
        fs::write(world.join("env_meta.txt"), b"time = 1\n").unwrap();
        let f = FolderFiles::new(&world, |n| n.starts_with("map.sqlite"), false);
        // Planted while mounted: the old fixed temporary name, and a world file.
        symlink(&victim, world.join(".worldfs-env_meta.txt.tmp")).unwrap();
        symlink(&victim, world.join("linked.txt")).unwrap();
        f.write(&p("env_meta.txt"), b"time = 2\n").unwrap();
        assert_eq!(
            fs::read(&victim).unwrap(),
            b"secret",
            "the planted link was followed"
        );
        assert_eq!(&**f.read(&p("env_meta.txt")).unwrap(), b"time = 2\n");
        assert_eq!(f.names(), vec!["env_meta.txt", "linked.txt"]);
        let target = victim.as_os_str().as_encoded_bytes().to_vec();
        let st = f.stat(&p("linked.txt")).unwrap();
        assert_eq!(st.kind, Kind::Symlink);
        assert_eq!(
            st.size,
            target.len() as u64,
            "lstat size: the target's length"
        );
        assert_eq!(st.perm, 0o777);
        let listed = f.entries(&[], 1).unwrap();
        let link = listed.iter().find(|e| e.name == "linked.txt").unwrap();
        assert_eq!(link.stat.kind, Kind::Symlink);
        assert_eq!(f.readlink(&p("linked.txt")).unwrap(), target);
        assert_eq!(
            f.readlink(&p("env_meta.txt")).unwrap_err().errno(),
            libc::EINVAL
        );
        // Reading or writing a link as a file never goes through it.
        for e in [
            f.read(&p("linked.txt")).unwrap_err(),
            f.write(&p("linked.txt"), b"x").unwrap_err(),
        ] {
            assert_eq!(e.errno(), libc::ELOOP, "{e}");
            assert!(e.message().contains("symbolic link"), "{e}");
        }
        // Touching a link sets the link's own time.
        f.set_mtime(&p("linked.txt"), SystemTime::UNIX_EPOCH)
            .unwrap();
        assert_eq!(
            fs::symlink_metadata(world.join("linked.txt"))
                .unwrap()
                .modified()
                .unwrap(),
            SystemTime::UNIX_EPOCH
        );
        assert_ne!(
            fs::metadata(&victim).unwrap().modified().unwrap(),
            SystemTime::UNIX_EPOCH
        );
        // Renaming moves the link, removing removes the link: the target stays.
        f.rename(&p("linked.txt"), &p("moved.txt")).unwrap();
        assert!(fs::symlink_metadata(world.join("linked.txt")).is_err());
        assert_eq!(f.readlink(&p("moved.txt")).unwrap(), target);
        f.remove(&p("moved.txt")).unwrap();
        assert!(fs::symlink_metadata(world.join("moved.txt")).is_err());
        assert_eq!(fs::read(&victim).unwrap(), b"secret");
        assert_eq!(f.names(), vec!["env_meta.txt"]);
        // A link named like a file the tree shows otherwise stays hidden and untouched.
        symlink(&victim, world.join("map.sqlite")).unwrap();
        assert_eq!(f.names(), vec!["env_meta.txt"]);
        for e in [
            f.stat(&p("map.sqlite")).unwrap_err(),
            f.readlink(&p("map.sqlite")).unwrap_err(),
            f.remove(&p("map.sqlite")).unwrap_err(),
        ] {
            assert_eq!(e.errno(), libc::ENOENT, "{e}");
        }
        assert!(fs::symlink_metadata(world.join("map.sqlite")).is_ok());
    }

    #[test]
    fn deep_folders_are_reached_in_a_few_calls_and_never_through_a_link() {
        use nix::sys::stat::mkdirat;
        use nix::unistd::symlinkat;
        let dir = tempfile::tempdir().unwrap();
        let world = dir.path().join("world");
        let outside = dir.path().join("outside");
        fs::create_dir_all(outside.join("d")).unwrap();
        fs::write(outside.join("d/leaf"), b"outside").unwrap();
        fs::create_dir_all(world.join("deep")).unwrap();
        // Deeper than PATH_MAX: 2,500 levels of "d" are 5,000 bytes of path, made one level
        // at a time from descriptors (the whole path is too long for one call).
        let mut deep = vec!["deep".to_string()];
        deep.extend(std::iter::repeat("d".to_string()).take(2500));
        let root = File::open(&world).unwrap();
        let mut levels = vec![FolderFiles::open_sub(&root, "deep", &deep).unwrap()];
        for _ in 1..deep.len() {
            let last = levels.last().unwrap();
            mkdirat(Some(last.as_raw_fd()), "d", Mode::S_IRWXU).unwrap();
            let next = FolderFiles::open_sub(last, "d", &deep).unwrap();
            levels.push(next);
        }
        let bottom = levels.last().unwrap();
        let leaf_at = |fd: &File| format!("/proc/self/fd/{}/leaf", fd.as_raw_fd());
        fs::write(leaf_at(bottom), b"deep").unwrap();
        let f = FolderFiles::new(&world, |_| false, false);
        let mut leaf = deep.clone();
        leaf.push("leaf".into());
        assert_eq!(&**f.read(&leaf).unwrap(), b"deep");
        assert!(chunks(&deep).count() > 1, "the walk takes several calls");
        f.write(&leaf, b"written").unwrap();
        assert_eq!(fs::read(leaf_at(bottom)).unwrap(), b"written");
        // A link in the middle of a path is never followed, in the first call or a later one.
        for at in [1, 2000] {
            let parent = levels[at - 1].as_raw_fd();
            renameat(Some(parent), "d", Some(parent), "real").unwrap();
            symlinkat(&outside, Some(parent), "d").unwrap();
            let mut through = deep[..at].to_vec();
            through.extend(["d".to_string(), "d".to_string(), "leaf".to_string()]);
            let e = f.read(&through).unwrap_err();
            assert_eq!(e.errno(), libc::ENOENT, "{e}");
            unlinkat(Some(parent), "d", UnlinkatFlags::NoRemoveDir).unwrap();
            renameat(Some(parent), "real", Some(parent), "d").unwrap();
        }
        assert_eq!(&**f.read(&leaf).unwrap(), b"written");
        assert_eq!(fs::read(outside.join("d/leaf")).unwrap(), b"outside");
    }

    #[test]
    fn links_are_made_in_the_folder_as_given() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("world.mt"), b"gameid = x\n").unwrap();
        let f = FolderFiles::new(dir.path(), |n| n.starts_with("map.sqlite"), false);
        let odd: &[u8] = b"../outside/\xff name";
        f.symlink(&p("odd"), odd).unwrap();
        f.symlink(&p("rel"), b"world.mt").unwrap();
        let made = fs::read_link(dir.path().join("odd")).unwrap();
        assert_eq!(
            made.as_os_str().as_bytes(),
            odd,
            "the target is stored as given"
        );
        assert_eq!(f.readlink(&p("odd")).unwrap(), odd);
        assert_eq!(f.stat(&p("rel")).unwrap().kind, Kind::Symlink);
        assert_eq!(f.stat(&p("rel")).unwrap().size, 8);
        assert_eq!(
            f.symlink(&p("world.mt"), b"x").unwrap_err().errno(),
            libc::EEXIST
        );
        assert_eq!(
            f.symlink(&p("map.sqlite"), b"x").unwrap_err().errno(),
            libc::EPERM
        );
        assert_eq!(
            f.symlink(&p(".worldfs-a.1.2.tmp"), b"x")
                .unwrap_err()
                .errno(),
            libc::EPERM
        );
        assert_eq!(&**f.read(&p("world.mt")).unwrap(), b"gameid = x\n");
        let ro = FolderFiles::new(dir.path(), |_| false, true);
        assert_eq!(
            ro.symlink(&p("new"), b"x").unwrap_err().errno(),
            libc::EROFS
        );
        assert_eq!(ro.remove(&p("odd")).unwrap_err().errno(), libc::EROFS);
        assert_eq!(ro.readlink(&p("odd")).unwrap(), odd);
    }

    #[test]
    fn files_show_and_keep_their_own_mode() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("world.mt");
        fs::write(&secret, b"pgsql_connection = password=x\n").unwrap();
        fs::set_permissions(&secret, fs::Permissions::from_mode(0o600)).unwrap();
        fs::write(dir.path().join("run.sh"), b"#!/bin/sh\n").unwrap();
        fs::set_permissions(dir.path().join("run.sh"), fs::Permissions::from_mode(0o750)).unwrap();
        let f = FolderFiles::new(dir.path(), |_| false, false);
        assert_eq!(f.stat(&p("world.mt")).unwrap().perm, 0o600);
        assert_eq!(f.stat(&p("run.sh")).unwrap().perm, 0o750);
        let listed: Vec<u16> = f
            .entries(&[], 1)
            .unwrap()
            .iter()
            .map(|e| e.stat.perm)
            .collect();
        assert_eq!(listed, vec![0o750, 0o600]);
        f.write(&p("world.mt"), b"pgsql_connection = password=y\n")
            .unwrap();
        let mode = fs::metadata(&secret).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o600, "the replaced file keeps its mode");
        assert_eq!(f.stat(&p("world.mt")).unwrap().perm, 0o600);
        // A read-only mount shows the same modes (the kernel refuses the writes), so a
        // backup taken from it restores them.
        let ro = FolderFiles::new(dir.path(), |_| false, true);
        assert_eq!(ro.stat(&p("world.mt")).unwrap().perm, 0o600);
        assert_eq!(ro.stat(&p("run.sh")).unwrap().perm, 0o750);
    }
}
