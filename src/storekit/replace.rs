//! The one crash-safe file replacement of worldfs, and opening files without following links.
//!
//! Every whole-file update of every game (a TVDA or TEVD disk rewrite, a Survivalcraft region
//! or Project.xml, a world file such as `world.mt`, a Luanti player or auth file) goes through
//! [`write_atomic_with`], and a file that must appear whole or not at all where none was (a
//! new Survivalcraft `Chunks*.dat`) through [`create_atomic`]: a temporary file in the same folder, created with
//! `O_CREAT | O_EXCL | O_NOFOLLOW` under a name no other write uses, given the mode and owner
//! of the file it replaces, written, fsynced, renamed over the target with `renameat` in the
//! folder's descriptor, and the folder fsynced. A crash at any moment leaves the old file or
//! the new one under the name; a failure removes the temporary file.
//!
//! A world folder may hold links planted by anyone who can write to it. Nothing here follows
//! one: a temporary name that exists (a link included) is never reused, a target that is a
//! link is refused rather than replaced, and [`open_no_follow`] refuses to open a link, or
//! (without waiting) a FIFO or anything else that is not a regular file.
//! Temporary files are named `.worldfs-NAME.PID.N.tmp`; a crash can leave one behind, which
//! [`remove_leftovers`] deletes when a store reopens the file (only names of exactly that form:
//! not another file's whose name starts alike, not a folder).

use std::ffi::{OsStr, OsString};
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use nix::fcntl::{fcntl, openat, renameat, renameat2, AtFlags, FcntlArg, OFlag, RenameFlags};
use nix::sys::stat::{fstatat, Mode, SFlag};
use nix::unistd::{unlinkat, UnlinkatFlags};

use crate::error::{Error, Result};

/// The start of every temporary file name worldfs makes.
pub const TEMP_PREFIX: &str = ".worldfs-";
/// The end of every temporary file name worldfs makes.
const TEMP_SUFFIX: &str = ".tmp";
/// The longest part of the target's name kept in a temporary name (names have 255 bytes).
const NAME_PART_MAX: usize = 200;

/// How many taken temporary names are skipped before giving up.
const CREATE_TRIES: u32 = 64;

static SEQUENCE: AtomicU64 = AtomicU64::new(0);

/// The error for a link found where worldfs reads or writes a file.
pub fn link_refused(path: &Path) -> Error {
    Error::new(
        libc::ELOOP,
        format!(
            "{}: is a symbolic link; worldfs neither reads nor writes through links in a world",
            path.display()
        ),
    )
}

fn with_path(e: std::io::Error, path: &Path) -> Error {
    if e.raw_os_error() == Some(libc::ELOOP) {
        return link_refused(path);
    }
    Error::from(e).context(path.display())
}

/// Opens the regular file `path` for reading (and writing when `writable`) without
/// following a link in its last component: a link is refused with `ELOOP`, anything else
/// that is not a regular file (a FIFO swapped in under a listed name would block the open
/// until a writer came, a folder) with `EINVAL`, without waiting.
pub fn open_no_follow(path: &Path, writable: bool) -> Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .write(writable)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| with_path(e, path))?;
    only_regular(file, path)
}

/// [`open_no_follow`] of `name` in the folder `dir` (read only); `path` names it in errors.
pub fn open_no_follow_at(dir: &File, name: &OsStr, path: &Path) -> Result<File> {
    let fd = openat(
        Some(dir.as_raw_fd()),
        name,
        OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK,
        Mode::empty(),
    )
    .map_err(|e| with_path(std::io::Error::from(e), path))?;
    // SAFETY: `openat` just returned this descriptor, which nothing else owns.
    let file = unsafe { File::from_raw_fd(fd) };
    only_regular(file, path)
}

/// `file` if it is a regular file, made blocking again (see [`open_no_follow`]).
fn only_regular(file: File, path: &Path) -> Result<File> {
    if !file.metadata().map_err(|e| with_path(e, path))?.is_file() {
        return Err(Error::new(
            libc::EINVAL,
            format!("{}: not a regular file", path.display()),
        ));
    }
    let flags = fcntl(file.as_raw_fd(), FcntlArg::F_GETFL)
        .map_err(|e| Error::new(e as i32, format!("{}: {e}", path.display())))?;
    let blocking = OFlag::from_bits_truncate(flags) & !OFlag::O_NONBLOCK;
    fcntl(file.as_raw_fd(), FcntlArg::F_SETFL(blocking))
        .map_err(|e| Error::new(e as i32, format!("{}: {e}", path.display())))?;
    Ok(file)
}

/// All of the regular file `path`, read without following a link ([`open_no_follow`]).
pub fn read_no_follow(path: &Path) -> Result<Vec<u8>> {
    let mut data = Vec::new();
    open_no_follow(path, false)?
        .read_to_end(&mut data)
        .map_err(|e| with_path(e, path))?;
    Ok(data)
}

fn parts(path: &Path) -> Result<(&Path, &OsStr)> {
    let name = path
        .file_name()
        .ok_or_else(|| Error::invalid(format!("{}: no file name", path.display())))?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Ok((dir, name))
}

/// The start of the temporary names used for `name`.
fn temp_stem(name: &OsStr) -> OsString {
    let raw = name.as_bytes();
    let mut stem = OsString::from(TEMP_PREFIX);
    stem.push(OsStr::from_bytes(raw.get(..NAME_PART_MAX).unwrap_or(raw)));
    stem.push(".");
    stem
}

/// A temporary name for `name` that no other write of this process uses.
fn temp_name(name: &OsStr) -> OsString {
    let mut tmp = temp_stem(name);
    let n = SEQUENCE.fetch_add(1, Ordering::Relaxed);
    tmp.push(format!("{}.{n}{TEMP_SUFFIX}", std::process::id()));
    tmp
}

/// Whether `name` is a temporary file name of worldfs.
pub fn is_temp_name(name: &str) -> bool {
    name.starts_with(TEMP_PREFIX)
}

/// fsyncs folder `dir`, so a rename or unlink in it survives a crash.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::from(e).context(dir.display()))
}

/// What replacing `name` in `dir` must keep: mode and owner of the regular file there.
fn existing(dir: &File, name: &OsStr, path: &Path) -> Result<Option<(u32, u32, u32)>> {
    match fstatat(Some(dir.as_raw_fd()), name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) => {
            let kind = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
            if kind == SFlag::S_IFLNK {
                return Err(link_refused(path));
            }
            if kind != SFlag::S_IFREG {
                return Err(Error::new(
                    libc::EINVAL,
                    format!("{}: not a regular file", path.display()),
                ));
            }
            Ok(Some((st.st_mode & 0o7777, st.st_uid, st.st_gid)))
        }
        Err(nix::errno::Errno::ENOENT) => Ok(None),
        Err(e) => Err(Error::new(e as i32, format!("{}: {e}", path.display()))),
    }
}

/// Creates a new temporary file for `name` in the folder `dir` (shown as `dir_path`); a
/// name that exists (whatever it is, a planted link included) is skipped, never opened.
fn create_temp(
    dir: &File,
    dir_path: &Path,
    name: &OsStr,
    new_mode: u32,
) -> Result<(OsString, File)> {
    let mut tries = 0;
    loop {
        let tmp_name = temp_name(name);
        match openat(
            Some(dir.as_raw_fd()),
            tmp_name.as_os_str(),
            OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(new_mode & 0o7777),
        ) {
            // SAFETY: `openat` just returned this descriptor, which nothing else owns.
            Ok(fd) => return Ok((tmp_name, unsafe { File::from_raw_fd(fd) })),
            Err(nix::errno::Errno::EEXIST) if tries < CREATE_TRIES => tries += 1,
            Err(e) => {
                return Err(with_path(
                    std::io::Error::from(e),
                    &dir_path.join(&tmp_name),
                ))
            }
        }
    }
}

/// Replaces (or creates) `path` with what `write` writes, crash-safely (see the module doc).
/// An existing file's mode and owner are kept; a new file gets `new_mode` less the umask.
pub fn write_atomic_with(
    path: &Path,
    new_mode: u32,
    write: impl FnOnce(&mut dyn Write) -> Result<()>,
) -> Result<()> {
    let (dir_path, name) = parts(path)?;
    let dir = File::open(dir_path).map_err(|e| Error::from(e).context(dir_path.display()))?;
    write_atomic_at(&dir, name, path, new_mode, write)
}

/// [`write_atomic_with`] of `name` in the open folder `dir` (never reached through a link);
/// `path` names the file in errors.
pub fn write_atomic_at(
    dir: &File,
    name: &OsStr,
    path: &Path,
    new_mode: u32,
    write: impl FnOnce(&mut dyn Write) -> Result<()>,
) -> Result<()> {
    install(dir, name, path, new_mode, write, false).map(drop)
}

/// Creates `path`, which must not exist, the way [`write_atomic_with`] replaces a file: under
/// the name there is, after a crash at any moment, no file or the whole new one. Fails with
/// `EEXIST` when something is there by the time of the rename (nothing is replaced).
/// Returns the new file, open for reading and writing.
pub fn create_atomic(
    path: &Path,
    new_mode: u32,
    write: impl FnOnce(&mut dyn Write) -> Result<()>,
) -> Result<File> {
    let (dir_path, name) = parts(path)?;
    let dir = File::open(dir_path).map_err(|e| Error::from(e).context(dir_path.display()))?;
    install(&dir, name, path, new_mode, write, true)
}

/// Writes a temporary file and renames it to `name` (see the module doc); `create_only`:
/// nothing may be under the name, which is kept if something is. Returns the file.
fn install(
    dir: &File,
    name: &OsStr,
    path: &Path,
    new_mode: u32,
    write: impl FnOnce(&mut dyn Write) -> Result<()>,
    create_only: bool,
) -> Result<File> {
    let dir_path = path.parent().unwrap_or(Path::new("."));
    let keep = existing(dir, name, path)?;
    if create_only && keep.is_some() {
        return Err(Error::exists(format!("{}: exists", path.display())));
    }
    let (tmp_name, file) = create_temp(dir, dir_path, name, new_mode)?;
    let result = (|| -> Result<()> {
        if let Some((mode, uid, gid)) = keep {
            if nix::unistd::geteuid().is_root() {
                nix::unistd::fchown(file.as_raw_fd(), Some(uid.into()), Some(gid.into()))
                    .map_err(|e| Error::new(e as i32, format!("chown: {e}")))?;
            }
            file.set_permissions(std::fs::Permissions::from_mode(mode))?;
        }
        let mut out = BufWriter::with_capacity(1 << 20, &file);
        write(&mut out)?;
        out.flush()?;
        drop(out);
        file.sync_all()?;
        if create_only {
            rename_no_replace(dir, &tmp_name, name, path)?;
        } else {
            renameat(
                Some(dir.as_raw_fd()),
                tmp_name.as_os_str(),
                Some(dir.as_raw_fd()),
                name,
            )
            .map_err(|e| Error::new(e as i32, format!("rename: {e}")))?;
        }
        dir.sync_all()?;
        Ok(())
    })();
    if result.is_err() {
        let _ = unlinkat(
            Some(dir.as_raw_fd()),
            tmp_name.as_os_str(),
            UnlinkatFlags::NoRemoveDir,
        );
    }
    result.map(|()| file).map_err(|e| e.context(path.display()))
}

/// Renames `tmp_name` to `name` in `dir` unless something is there (`EEXIST`). A file system
/// without `RENAME_NOREPLACE` gets a look first: only a file made between the look and the
/// rename is replaced.
fn rename_no_replace(dir: &File, tmp_name: &OsStr, name: &OsStr, path: &Path) -> Result<()> {
    let fd = Some(dir.as_raw_fd());
    match renameat2(fd, tmp_name, fd, name, RenameFlags::RENAME_NOREPLACE) {
        Ok(()) => Ok(()),
        Err(nix::errno::Errno::EINVAL | nix::errno::Errno::ENOSYS) => {
            if existing(dir, name, path)?.is_some() {
                return Err(Error::exists(format!("{}: exists", path.display())));
            }
            renameat(fd, tmp_name, fd, name)
                .map_err(|e| Error::new(e as i32, format!("rename: {e}")))
        }
        Err(e) => Err(Error::new(e as i32, format!("rename: {e}"))),
    }
}

/// Replaces (or creates) `path` with `bytes`; see [`write_atomic_with`].
pub fn write_atomic(path: &Path, bytes: &[u8], new_mode: u32) -> Result<()> {
    write_atomic_with(path, new_mode, |out| Ok(out.write_all(bytes)?))
}

/// Removes `path` (a link is removed, never followed) and makes the removal durable.
pub fn remove_durably(path: &Path) -> Result<()> {
    std::fs::remove_file(path).map_err(|e| Error::from(e).context(path.display()))?;
    let (dir, _) = parts(path)?;
    sync_dir(dir)
}

/// Whether `raw` is a name [`temp_name`] gives, its stem being `stem` when given: the stem,
/// then `PID.N.tmp`.
fn is_leftover(raw: &[u8], stem: Option<&OsStr>) -> bool {
    let tail = match stem {
        Some(stem) => raw.strip_prefix(stem.as_bytes()),
        None => raw.strip_prefix(TEMP_PREFIX.as_bytes()).map(|rest| {
            // The target's name may hold dots: the tail is after the third dot from the end.
            let mut dots = rest.iter().enumerate().rev().filter(|(_, b)| **b == b'.');
            match dots.nth(2) {
                Some((at, _)) => rest.get(at + 1..).unwrap_or_default(),
                None => b"",
            }
        }),
    };
    let Some(numbers) = tail.and_then(|t| t.strip_suffix(TEMP_SUFFIX.as_bytes())) else {
        return false;
    };
    let mut parts = numbers.split(|b| *b == b'.');
    let number =
        |p: Option<&[u8]>| p.is_some_and(|p| !p.is_empty() && p.iter().all(u8::is_ascii_digit));
    number(parts.next()) && number(parts.next()) && parts.next().is_none()
}

/// Deletes the files of `dir` that are temporaries of worldfs (of `stem`'s file when
/// given) that a crash left; a folder under such a name is no file of ours and is kept.
fn remove_matching(dir: &Path, stem: Option<&OsStr>) -> Result<usize> {
    let mut removed = 0;
    for entry in std::fs::read_dir(dir).map_err(|e| Error::from(e).context(dir.display()))? {
        let entry = entry?;
        if is_leftover(entry.file_name().as_bytes(), stem) && !entry.file_type()?.is_dir() {
            std::fs::remove_file(entry.path())?;
            removed += 1;
        }
    }
    if removed > 0 {
        sync_dir(dir)?;
    }
    Ok(removed)
}

/// Deletes every temporary file a crash left in folder `dir` (worldfs's temporary names
/// only, whatever they were for); returns how many.
pub fn remove_all_leftovers(dir: &Path) -> Result<usize> {
    remove_matching(dir, None)
}

/// Deletes the temporary files a crash left while replacing `path` (not those of another
/// file whose name merely starts with this one's); returns how many.
pub fn remove_leftovers(path: &Path) -> Result<usize> {
    let (dir, name) = parts(path)?;
    remove_matching(dir, Some(&temp_stem(name)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    fn mode(p: &Path) -> u32 {
        fs::metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn replaces_keeps_the_mode_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("world.mt");
        fs::write(&path, b"old").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        write_atomic(&path, b"new", 0o644).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"new");
        assert_eq!(mode(&path), 0o600);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
        let fresh = dir.path().join("fresh");
        write_atomic(&fresh, b"x", 0o600).unwrap();
        assert_eq!(mode(&fresh), 0o600);
    }

    /// A created file appears whole or not at all, and nothing already there is replaced.
    #[test]
    fn create_makes_a_new_file_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("Chunks32h.dat");
        let e = create_atomic(&path, 0o644, |out| {
            out.write_all(b"half")?;
            assert!(!path.exists(), "the name exists before the file is whole");
            Err(Error::invalid("stop"))
        })
        .unwrap_err();
        assert_eq!(e.errno(), libc::EINVAL);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
        let mut f = create_atomic(&path, 0o600, |out| {
            out.write_all(b"whole")?;
            assert!(!path.exists(), "the name exists before the file is whole");
            Ok(())
        })
        .unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"whole");
        assert_eq!(mode(&path), 0o600);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
        // The file given back is the one under the name, readable and writable.
        f.write_all(b"!").unwrap();
        let mut back = String::new();
        std::io::Seek::rewind(&mut f).unwrap();
        f.read_to_string(&mut back).unwrap();
        assert_eq!(back, "whole!");
        assert_eq!(fs::read(&path).unwrap(), b"whole!");
        let e = create_atomic(&path, 0o644, |out| Ok(out.write_all(b"other")?)).unwrap_err();
        assert_eq!(e.errno(), libc::EEXIST);
        assert_eq!(fs::read(&path).unwrap(), b"whole!");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_failed_write_leaves_the_file_and_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a");
        fs::write(&path, b"old").unwrap();
        let e = write_atomic_with(&path, 0o644, |out| {
            out.write_all(b"half")?;
            Err(Error::invalid("stop"))
        })
        .unwrap_err();
        assert_eq!(e.errno(), libc::EINVAL);
        assert_eq!(fs::read(&path).unwrap(), b"old");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn links_are_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, b"secret").unwrap();
        let world = dir.path().join("world");
        fs::create_dir(&world).unwrap();
        // A link planted where an old fixed temporary name used to be, and at every name
        // this process would use next.
        let target = world.join("env_meta.txt");
        fs::write(&target, b"a").unwrap();
        symlink(&victim, world.join(".worldfs-env_meta.txt.tmp")).unwrap();
        let next = SEQUENCE.load(Ordering::Relaxed);
        for n in next..next + 8 {
            let _ = symlink(
                &victim,
                world.join(format!(
                    ".worldfs-env_meta.txt.{}.{n}.tmp",
                    std::process::id()
                )),
            );
        }
        write_atomic(&target, b"b", 0o644).unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"b");
        assert_eq!(fs::read(&victim).unwrap(), b"secret");
        // A target that is a link is refused, not replaced and not followed.
        let linked = world.join("linked.txt");
        symlink(&victim, &linked).unwrap();
        assert_eq!(
            write_atomic(&linked, b"x", 0o644).unwrap_err().errno(),
            libc::ELOOP
        );
        assert_eq!(fs::read(&victim).unwrap(), b"secret");
        assert!(fs::symlink_metadata(&linked)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(
            open_no_follow(&linked, false).unwrap_err().errno(),
            libc::ELOOP
        );
    }

    #[test]
    fn only_this_files_own_temporaries_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("world.tvda");
        fs::write(&path, b"d").unwrap();
        // Another disk whose name starts with this one's, being written by another mount.
        let other = dir.path().join(".worldfs-world.tvda.bak.7.3.tmp");
        fs::write(&other, b"half").unwrap();
        // Not names worldfs makes.
        let user = dir.path().join(".worldfs-world.tvda.notes.tmp");
        fs::write(&user, b"mine").unwrap();
        // A folder planted under a temporary name must not stop the store from opening.
        let planted = dir.path().join(".worldfs-world.tvda.1.1.tmp");
        fs::create_dir(&planted).unwrap();
        let left = dir.path().join(".worldfs-world.tvda.12.4.tmp");
        fs::write(&left, b"half").unwrap();
        assert_eq!(remove_leftovers(&path).unwrap(), 1);
        assert!(!left.exists());
        assert!(other.exists() && user.exists() && planted.exists());
        assert_eq!(remove_all_leftovers(dir.path()).unwrap(), 1);
        assert!(!other.exists());
        assert!(user.exists() && planted.exists());
    }

    #[test]
    fn a_fifo_or_folder_is_refused_without_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("z.txt");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
        let sub = dir.path().join("sub");
        fs::create_dir(&sub).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let got = [
                open_no_follow(&fifo, false).map(drop),
                open_no_follow(&fifo, true).map(drop),
                open_no_follow(&sub, false).map(drop),
            ];
            tx.send(got.map(|r| r.unwrap_err().errno())).unwrap();
        });
        let errnos = rx
            .recv_timeout(std::time::Duration::from_secs(5))
            .expect("opening a FIFO waited for a writer");
        assert_eq!(errnos, [libc::EINVAL; 3]);
        let file = dir.path().join("f");
        fs::write(&file, b"data").unwrap();
        let f = open_no_follow(&file, false).unwrap();
        let flags = nix::fcntl::fcntl(f.as_raw_fd(), nix::fcntl::FcntlArg::F_GETFL).unwrap();
        assert_eq!(
            flags & libc::O_NONBLOCK,
            0,
            "a regular file is read blocking"
        );
    }

    #[test]
    fn leftovers_of_one_file_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("disk");
        fs::write(&path, b"d").unwrap();
        let left = dir.path().join(".worldfs-disk.1.2.tmp");
        fs::write(&left, b"half").unwrap();
        let other = dir.path().join(".worldfs-other.1.2.tmp");
        fs::write(&other, b"x").unwrap();
        assert_eq!(remove_leftovers(&path).unwrap(), 1);
        assert!(!left.exists());
        assert!(
            other.exists(),
            "another file's temporary is not ours to remove"
        );
    }
}
