//! Crash-safe in-place writes: a redo journal; and a redo journal of whole-file
//! replacements, for a commit that rewrites several region files at once. (One region file
//! and Project.xml are replaced alone by the one crash-safe replacement of
//! [`crate::storekit::replace`].)
//!
//! In-place writes to a fixed-size chunk file go through a redo
//! journal `<file>.worldfs-journal`: every write (offset, bytes) is recorded with a CRC-32
//! and fsynced before the file is touched, then applied, fsynced and the journal removed.
//! Opening the file replays a complete journal and discards a torn one, so after a crash
//! at any moment each chunk is either all old or all new. Each write also records what its
//! range held (its length, and the CRC-32 of each 4 KiB page piece of it): a journal is
//! replayed only while every piece holds that or already its new bytes (a crash cuts an
//! apply between pages), and no write starts past the end of the file. Otherwise the
//! game saved the world after the crash (replaying would overwrite what it saved, directory
//! entries included) or the journal was not made for this file: it is dropped, with an
//! error in the log, and the file left alone.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::storekit::replace::{open_no_follow, sync_dir};
use crate::survivalcraft::codec::region::MAX_REGION_BYTES;

const JOURNAL_MAGIC: &[u8; 8] = b"WFSJRNL3";
/// The journals of worldfs before what a range held was recorded page by page (one CRC-32
/// for the whole range), and before it was recorded at all; both still replayed: one may
/// be left by a crash before an upgrade.
const JOURNAL_MAGIC_V2: &[u8; 8] = b"WFSJRNL2";
const JOURNAL_MAGIC_V1: &[u8; 8] = b"WFSJRNL1";

/// The unit in which a write cut short leaves its range: SIGKILL stops a `pwrite` between
/// pages (measured: the first unwritten byte lay on a 4 KiB boundary in every run), and a
/// power loss keeps any set of written pages. So what a range held is recorded per piece
/// of it between multiples of this (the smallest page Linux has), and a replay finds each
/// piece old or new, whatever moment the crash cut the apply at.
const PAGE: u64 = 4096;

/// The most bytes one write of a journal holds: far above a chunk record (about 257 KiB at
/// most), and a bound on what reading a journal may allocate, whatever length a hostile or
/// sparse journal claims.
const MAX_WRITE: u64 = 16 << 20;

/// The layouts a journal may have, told by its magic.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// Writes without what their range held.
    V1,
    /// Writes with the length and CRC-32 of what their whole range held.
    V2,
    /// Writes with the length of what their range held and the CRC-32 of each piece.
    V3,
}

fn layout_of(magic: &[u8]) -> Option<Layout> {
    match magic {
        m if m == JOURNAL_MAGIC => Some(Layout::V3),
        m if m == JOURNAL_MAGIC_V2 => Some(Layout::V2),
        m if m == JOURNAL_MAGIC_V1 => Some(Layout::V1),
        _ => None,
    }
}

/// fsyncs the folder holding `path`, so a rename or unlink in it is durable.
pub(crate) fn sync_parent(path: &Path) -> Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    sync_dir(dir)
}

/// Removes `path` if it exists (a link is removed, never followed).
fn remove_if_there(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::from(e).context(path.display())),
    }
}

/// The journal path of a chunk file.
pub(crate) fn journal_path(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(".worldfs-journal");
    PathBuf::from(name)
}

/// The pieces of the file range `[off, off + len)`, split at multiples of [`PAGE`], as
/// offsets relative to `off`.
fn pieces(off: u64, len: u64) -> impl Iterator<Item = std::ops::Range<usize>> {
    let mut at = 0u64;
    std::iter::from_fn(move || {
        (at < len).then(|| {
            let start = at;
            at = (PAGE - off.wrapping_add(at) % PAGE)
                .saturating_add(at)
                .min(len);
            start as usize..at as usize
        })
    })
}

/// How many pieces [`pieces`] gives, `None` past `u64`.
fn piece_count(off: u64, len: u64) -> Option<u64> {
    if len == 0 {
        return Some(0);
    }
    let last = off.checked_add(len - 1)?;
    Some(last / PAGE - off / PAGE + 1)
}

/// The bytes `file` holds in `[off, off + len)`, fewer where it ends sooner.
fn held(file: &File, end: u64, off: u64, len: usize) -> Result<Vec<u8>> {
    let present = end.saturating_sub(off).min(len as u64) as usize;
    let mut now = vec![0u8; present];
    file.read_exact_at(&mut now, off)?;
    Ok(now)
}

/// The header of a write of `data` at `off` to `file` as it is now: offset, length, and
/// what the range holds (fewer bytes past the file's end): its length and the CRC-32 of
/// each piece, so a replay can tell whether each piece still holds it.
fn write_head(file: &File, off: u64, data: &[u8]) -> Result<Vec<u8>> {
    let old = held(file, file.metadata()?.len(), off, data.len())?;
    let mut head = Vec::with_capacity(24 + 4 * (data.len() / PAGE as usize + 2));
    head.extend_from_slice(&off.to_le_bytes());
    head.extend_from_slice(&(data.len() as u64).to_le_bytes());
    head.extend_from_slice(&(old.len() as u64).to_le_bytes());
    for p in pieces(off, old.len() as u64) {
        head.extend_from_slice(&crc32fast::hash(&old[p]).to_le_bytes());
    }
    Ok(head)
}

/// What a journal's write records of what its range held.
enum Old {
    /// Nothing (a journal of worldfs 1).
    Unknown,
    /// Its length and CRC-32.
    Whole(u64, u32),
    /// Its length and the CRC-32 of each of its [`pieces`].
    Pieces(u64, Vec<u32>),
}

/// A write as a journal holds it: its offset, what the range held and its bytes.
struct JournalWrite {
    off: u64,
    old: Old,
    data: Vec<u8>,
}

/// A write's header as read: its bytes (for the CRC), offset, length and what the range
/// held.
struct Head {
    raw: Vec<u8>,
    off: u64,
    len: u64,
    old: Old,
}

/// The little-endian `u64` at `at` in `bytes` (0 past their end).
fn le_word(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(
        bytes
            .get(at..at + 8)
            .and_then(|b| b.try_into().ok())
            .unwrap_or_default(),
    )
}

/// Reads the header of a journal's next write, of which `left` bytes remain before the
/// journal's CRC: `None` when it and its data cannot fit there, or claim more than
/// [`MAX_WRITE`] bytes (a torn journal, or not one); nothing is allocated before that.
fn read_head(r: &mut impl Read, layout: Layout, left: u64) -> Result<Option<Head>> {
    let base = if layout == Layout::V1 { 16 } else { 24 };
    if left < base {
        return Ok(None);
    }
    let mut raw = vec![0u8; base as usize];
    r.read_exact(&mut raw)?;
    let (off, len, old_len) = (le_word(&raw, 0), le_word(&raw, 8), le_word(&raw, 16));
    let extra = match layout {
        _ if len > MAX_WRITE => None,
        Layout::V1 => Some(0),
        Layout::V2 => Some(4),
        // A write records what at most its own range held.
        Layout::V3 if old_len > len => None,
        Layout::V3 => piece_count(off, old_len).map(|n| n * 4),
    };
    let Some(extra) = extra.filter(|&e| e + len <= left - base) else {
        return Ok(None);
    };
    raw.resize((base + extra) as usize, 0);
    r.read_exact(&mut raw[base as usize..])?;
    let crcs: Vec<u32> = raw[base as usize..]
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap_or_default()))
        .collect();
    let old = match layout {
        Layout::V1 => Old::Unknown,
        Layout::V2 => Old::Whole(old_len, crcs.first().copied().unwrap_or_default()),
        Layout::V3 => Old::Pieces(old_len, crcs),
    };
    Ok(Some(Head { raw, off, len, old }))
}

/// Refuses a write a journal could not hold: longer than [`MAX_WRITE`], or overlapping an
/// earlier write of the same journal (`written`: their ranges by start). What a range held
/// is recorded before any write of the journal is applied, so a replay could not tell an
/// overlapped range's bytes from another program's; and the later write would silently
/// undo the earlier one (two chunks whose directory entries name one record).
fn check_write(written: &mut BTreeMap<u64, u64>, off: u64, len: usize) -> Result<()> {
    let len = len as u64;
    let end = off
        .checked_add(len)
        .filter(|_| len <= MAX_WRITE)
        .ok_or_else(|| Error::invalid(format!("a write of {len} bytes at {off}")))?;
    if len == 0 {
        return Ok(());
    }
    let before = written
        .range(..=off)
        .next_back()
        .is_some_and(|(_, &e)| e > off);
    let after = written.range(off..end).next().is_some();
    if before || after {
        return Err(Error::corrupt(format!(
            "two records of one commit share bytes at offset {off} (the directory is damaged); nothing written"
        )));
    }
    written.insert(off, end);
    Ok(())
}

fn encode_journal(file: &File, writes: &[(u64, Vec<u8>)]) -> Result<Vec<u8>> {
    let mut j = Vec::new();
    j.extend_from_slice(JOURNAL_MAGIC);
    j.extend_from_slice(&(writes.len() as u64).to_le_bytes());
    let mut written = BTreeMap::new();
    for (off, data) in writes {
        check_write(&mut written, *off, data.len())?;
        j.extend_from_slice(&write_head(file, *off, data)?);
        j.extend_from_slice(data);
    }
    let crc = crc32fast::hash(&j);
    j.extend_from_slice(&crc.to_le_bytes());
    Ok(j)
}

/// Checks a journal whole, streaming it: the layout of [`encode_journal`] filling the file
/// exactly, and the CRC. Nothing is held but a buffer.
fn verify_journal(jpath: &Path) -> Result<bool> {
    verify_open(&open_no_follow(jpath, false)?)
}

/// [`verify_journal`] of the journal open as `f`, read from its start.
fn verify_open(f: &File) -> Result<bool> {
    let len = f.metadata()?.len();
    let Some(body) = len.checked_sub(4).filter(|&b| b >= 16) else {
        return Ok(false);
    };
    let mut r = std::io::BufReader::new(f);
    r.seek(SeekFrom::Start(0))?;
    let mut crc = crc32fast::Hasher::new();
    let mut head = [0u8; 16];
    r.read_exact(&mut head)?;
    let Some(layout) = layout_of(&head[..8]) else {
        return Ok(false);
    };
    crc.update(&head);
    let count = u64::from_le_bytes(head[8..].try_into().unwrap_or_default());
    let mut at = 16u64;
    let mut buf = vec![0u8; 64 << 10];
    for _ in 0..count {
        let Some(w) = read_head(&mut r, layout, body - at)? else {
            return Ok(false);
        };
        crc.update(&w.raw);
        at += w.raw.len() as u64;
        let mut left = w.len;
        while left > 0 {
            let take = left.min(buf.len() as u64) as usize;
            r.read_exact(&mut buf[..take])?;
            crc.update(&buf[..take]);
            left -= take as u64;
        }
        at += w.len;
    }
    let mut stored = [0u8; 4];
    r.read_exact(&mut stored)?;
    Ok(at == body && crc.finalize().to_le_bytes() == stored)
}

/// Reads a journal's writes in order, one at a time, handing each to `each`; false (and
/// nothing handed) when it is torn or not a journal: it is verified whole first, through
/// the same open file, and read within the bounds it was verified with.
fn read_journal(jpath: &Path, mut each: impl FnMut(JournalWrite) -> Result<()>) -> Result<bool> {
    let f = open_no_follow(jpath, false)?;
    if !verify_open(&f)? {
        return Ok(false);
    }
    let body = f.metadata()?.len().saturating_sub(4);
    let mut r = std::io::BufReader::new(&f);
    r.seek(SeekFrom::Start(0))?;
    let mut head = [0u8; 16];
    r.read_exact(&mut head)?;
    let layout = layout_of(&head[..8]).unwrap_or(Layout::V3);
    let count = u64::from_le_bytes(head[8..].try_into().unwrap_or_default());
    let mut at = 16u64;
    for _ in 0..count {
        let w = read_head(&mut r, layout, body.saturating_sub(at))?
            .ok_or_else(|| Error::corrupt(format!("{}: changed while read", jpath.display())))?;
        let mut data = Vec::new();
        (&mut r).take(w.len).read_to_end(&mut data)?;
        at += w.raw.len() as u64 + w.len;
        each(JournalWrite {
            off: w.off,
            old: w.old,
            data,
        })?;
    }
    Ok(true)
}

/// Whether a write of a verified journal may be applied to `file`, which ends at `end`:
/// its range holds what it held when the journal was made, or already its new bytes; in a
/// journal that recorded it piece by piece, each piece does (an apply cut by a crash, see
/// [`PAGE`]), where bytes past what the piece held may also be zeros (a power loss kept
/// the file's new length but not its data). Otherwise another program wrote the range
/// since (the game saved after a crash), or the journal was not made for this file.
fn write_fits(file: &File, end: u64, w: &JournalWrite) -> Result<bool> {
    let now = held(file, end, w.off, w.data.len())?;
    Ok(match &w.old {
        Old::Unknown => true,
        Old::Whole(len, crc) => {
            (now.len() as u64, crc32fast::hash(&now)) == (*len, *crc) || now == w.data
        }
        Old::Pieces(len, crcs) => {
            let mut old = pieces(w.off, *len).zip(crcs);
            pieces(w.off, w.data.len() as u64).all(|p| {
                let here = now
                    .get(p.start.min(now.len())..p.end.min(now.len()))
                    .unwrap_or_default();
                let (was, crc) = match old.next() {
                    Some((o, &crc)) => (o.len(), crc),
                    None => (0, 0),
                };
                let was_old = here.len() >= was
                    && crc32fast::hash(&here[..was]) == crc
                    && here[was..].iter().all(|&b| b == 0);
                was_old || w.data.get(p) == Some(here)
            })
        }
    })
}

/// Whether every write of a verified journal may be applied to `file` as it is now (see
/// [`write_fits`]), and no write starts past the end of the file as the writes before it
/// leave it. Otherwise applying it would destroy what is there.
fn journal_fits(jpath: &Path, file: &File) -> Result<bool> {
    let actual = file.metadata()?.len();
    let mut end = actual;
    let mut fits = true;
    read_journal(jpath, |w| {
        let stop = w.off.checked_add(w.data.len() as u64);
        if !fits || w.off > end || stop.is_none() {
            fits = false;
            return Ok(());
        }
        fits = write_fits(file, actual, &w)?;
        end = end.max(stop.unwrap_or(end));
        Ok(())
    })?;
    Ok(fits)
}
/// Applies the sealed journal of `path` to `file` (one write in memory at a time), makes it
/// durable and removes the journal. What it did: nothing when the journal is torn, or
/// stale (see [`journal_fits`]).
fn apply_journal(path: &Path, file: &File) -> Result<Replay> {
    let jpath = journal_path(path);
    let done = if !verify_journal(&jpath)? {
        Replay::Torn
    } else if !journal_fits(&jpath, file)? {
        Replay::Stale(0)
    } else {
        read_journal(&jpath, |w| Ok(file.write_all_at(&w.data, w.off)?))?;
        file.sync_all()?;
        Replay::Applied
    };
    fs::remove_file(&jpath)?;
    sync_parent(&jpath)?;
    Ok(done)
}

/// Refuses a new commit while a sealed journal lies at `jpath`: a commit whose apply failed
/// (a full disk, an I/O error) left it, and its writes must still happen; a new journal
/// would remove it and leave the file half applied. The next read-write open replays it.
/// A torn journal, or anything else there, is removed by the caller as before.
fn refuse_if_pending(jpath: &Path) -> Result<()> {
    if fs::symlink_metadata(jpath).is_ok_and(|m| m.is_file()) && verify_journal(jpath)? {
        return Err(Error::new(
            libc::EIO,
            format!(
                "{}: an earlier commit failed while it was applied and is pending in this \
                 journal; unmount and mount again to finish it; nothing written",
                jpath.display()
            ),
        ));
    }
    Ok(())
}

/// A redo journal of in-place writes being written one write at a time, in the layout of
/// [`encode_journal`]: a commit of many chunks holds one record in memory, not all of them.
/// [`JournalWriter::seal`] completes it (count and CRC); until then the chunk file is
/// untouched, and [`JournalWriter::discard`] drops it.
pub(crate) struct JournalWriter {
    path: PathBuf,
    /// The chunk file, read for what each write's range holds now.
    file: File,
    out: std::io::BufWriter<File>,
    count: u64,
    /// CRC of the writes (the head is added when the count is known).
    crc: crc32fast::Hasher,
    /// The ranges written so far, by start (see [`check_write`]).
    written: BTreeMap<u64, u64>,
}

/// A complete, durable journal not applied yet.
pub(crate) struct SealedJournal {
    path: PathBuf,
}

impl SealedJournal {
    /// Applies the journal to `file` (the chunk file it was made for) and removes it.
    pub(crate) fn apply(self, file: &File) -> Result<()> {
        match apply_journal(&self.path, file)? {
            Replay::Applied => Ok(()),
            Replay::Stale(_) => Err(Error::new(
                libc::EAGAIN,
                format!(
                    "{} changed while the commit was made (another program writes the \
                     world); nothing written",
                    self.path.display()
                ),
            )),
            Replay::Nothing | Replay::Torn => Err(Error::corrupt(format!(
                "{}: the sealed journal did not read back; nothing written",
                journal_path(&self.path).display()
            ))),
        }
    }
}

impl JournalWriter {
    /// Starts the journal of the chunk file `path`, open as `file` (the journal is never
    /// written through a link).
    pub(crate) fn create(path: &Path, file: &File) -> Result<JournalWriter> {
        let jpath = journal_path(path);
        refuse_if_pending(&jpath)?;
        remove_if_there(&jpath)?;
        let f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .mode(0o600)
            .open(&jpath)
            .map_err(|e| Error::from(e).context(jpath.display()))?;
        let mut out = std::io::BufWriter::new(f);
        out.write_all(JOURNAL_MAGIC)?;
        out.write_all(&[0u8; 8])?;
        Ok(JournalWriter {
            path: path.to_path_buf(),
            file: file.try_clone()?,
            out,
            count: 0,
            crc: crc32fast::Hasher::new(),
            written: BTreeMap::new(),
        })
    }

    /// Appends a write of `data` at offset `off`.
    pub(crate) fn add(&mut self, off: u64, data: &[u8]) -> Result<()> {
        check_write(&mut self.written, off, data.len())?;
        let w = write_head(&self.file, off, data)?;
        self.out.write_all(&w)?;
        self.out.write_all(data)?;
        self.crc.update(&w);
        self.crc.update(data);
        self.count += 1;
        Ok(())
    }

    /// Completes the journal and makes it durable: from now on its writes happen, now by
    /// [`SealedJournal::apply`] or after a crash by the next open's [`recover`].
    pub(crate) fn seal(self) -> Result<SealedJournal> {
        let jpath = journal_path(&self.path);
        let j = self
            .out
            .into_inner()
            .map_err(|e| Error::from(e.into_error()))?;
        let mut head = [0u8; 16];
        head[..8].copy_from_slice(JOURNAL_MAGIC);
        head[8..].copy_from_slice(&self.count.to_le_bytes());
        let mut crc = crc32fast::Hasher::new();
        crc.update(&head);
        crc.combine(&self.crc);
        j.write_all_at(&head[8..], 8)?;
        let end = j.metadata()?.len();
        j.write_all_at(&crc.finalize().to_le_bytes(), end)?;
        j.sync_all()?;
        sync_parent(&jpath)?;
        Ok(SealedJournal { path: self.path })
    }

    /// Drops the journal: nothing was written.
    pub(crate) fn discard(self) -> Result<()> {
        let jpath = journal_path(&self.path);
        drop(self.out);
        remove_if_there(&jpath)?;
        sync_parent(&jpath)
    }
}

fn apply(file: &File, writes: &[(u64, Vec<u8>)]) -> Result<()> {
    for (off, data) in writes {
        file.write_all_at(data, *off)?;
    }
    file.sync_all()?;
    Ok(())
}

/// Writes `data_writes` then `directory_writes` to `path` crash-safely (see module doc).
/// Data goes first so that even a reader that ignores the journal never sees a directory
/// entry pointing at a chunk that is not there yet.
pub(crate) fn journaled_write(
    path: &Path,
    file: &File,
    data_writes: Vec<(u64, Vec<u8>)>,
    directory_writes: Vec<(u64, Vec<u8>)>,
) -> Result<()> {
    let jpath = journal_path(path);
    let mut all = data_writes;
    let split = all.len();
    all.extend(directory_writes);
    // Whatever is at the journal's name (nothing, or something planted) is removed, and the
    // journal created anew, so it is never written through a link.
    refuse_if_pending(&jpath)?;
    let journal = encode_journal(file, &all)?;
    remove_if_there(&jpath)?;
    let mut j = OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .mode(0o600)
        .open(&jpath)
        .map_err(|e| Error::from(e).context(jpath.display()))?;
    j.write_all(&journal)?;
    j.sync_all()?;
    sync_parent(&jpath)?;
    apply(file, &all[..split])?;
    apply(file, &all[split..])?;
    fs::remove_file(&jpath)?;
    sync_parent(&jpath)?;
    Ok(())
}

/// Finishes or discards a journal left by a crash. Returns whether one was replayed.
pub(crate) fn recover(path: &Path, file: &File) -> Result<bool> {
    let jpath = journal_path(path);
    if !fs::symlink_metadata(&jpath).is_ok_and(|m| m.is_file()) {
        // Nothing, or not a journal worldfs wrote (a link is never followed).
        if fs::symlink_metadata(&jpath).is_ok() {
            log::warn!("{}: not a regular file; removed", jpath.display());
            fs::remove_file(&jpath)?;
            sync_parent(&jpath)?;
        }
        return Ok(false);
    }
    let done = apply_journal(path, file)?;
    if done == Replay::Stale(0) {
        log::error!(
            "{}: an interrupted commit was not finished: the file changed since (the game \
             saved the world after the crash); the world is left as it is",
            path.display()
        );
    }
    Ok(done == Replay::Applied)
}

const REPLACE_MAGIC: &[u8; 8] = b"WFSREPL2";
const REPLACE_END: &[u8; 8] = b"WFSREPLE";

/// What a file holds, as a replacement journal records it: its length and CRC-32, `None`
/// when there is no file.
pub(crate) type FileState = Option<(u64, u32)>;

/// The [`FileState`] of `bytes` (`None`: no file).
pub(crate) fn state_of(bytes: Option<&[u8]>) -> FileState {
    bytes.map(|b| (b.len() as u64, crc32fast::hash(b)))
}

/// The [`FileState`] of the file at `path` (never read through a link), read streaming.
pub(crate) fn file_state(path: &Path) -> Result<FileState> {
    let mut f = match open_no_follow(path, false) {
        Ok(f) => f,
        Err(e) if e.errno() == libc::ENOENT => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut crc = crc32fast::Hasher::new();
    let mut buf = vec![0u8; 64 << 10];
    let mut len = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok(Some((len, crc.finalize())));
        }
        crc.update(&buf[..n]);
        len += n as u64;
    }
}

/// A journal of whole-file replacements being written: records (a key naming the file, what
/// the file held when the commit read it, its new bytes) are appended one at a time, so a
/// commit of many files holds one in memory; [`ReplaceJournal::seal`] makes it complete and
/// durable, after which [`replay_replacements`] applies it (now, or at the next open after
/// a crash). A journal that is not sealed is discarded: then no file was replaced.
///
/// Layout: magic, then per record `key u64, len u64, old len u64 (u64::MAX: no file), old
/// CRC-32, bytes, CRC-32 of the five`, then the end magic, the record count (u64) and the
/// CRC-32 of the count; little-endian.
pub(crate) struct ReplaceJournal {
    path: PathBuf,
    out: std::io::BufWriter<File>,
    count: u64,
}

impl ReplaceJournal {
    /// Starts the journal at `path` (whatever is there is removed first; never written
    /// through a link).
    pub(crate) fn create(path: &Path) -> Result<ReplaceJournal> {
        // A sealed journal here belongs to a commit whose replacements failed part way (a
        // full disk): removing it would leave the regions half replaced.
        if fs::symlink_metadata(path).is_ok_and(|m| m.is_file())
            && read_replacements(path, |_, _, _| Ok(()))?
        {
            return Err(Error::new(
                libc::EIO,
                format!(
                    "{}: an earlier commit failed while its files were replaced and is pending \
                     in this journal; unmount and mount again to finish it; nothing written",
                    path.display()
                ),
            ));
        }
        remove_if_there(path)?;
        let f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .mode(0o600)
            .open(path)
            .map_err(|e| Error::from(e).context(path.display()))?;
        let mut out = std::io::BufWriter::new(f);
        out.write_all(REPLACE_MAGIC)?;
        Ok(ReplaceJournal {
            path: path.to_path_buf(),
            out,
            count: 0,
        })
    }

    /// Appends the new bytes of the file `key` names, which holds `old` now.
    pub(crate) fn add(&mut self, key: u64, old: FileState, bytes: &[u8]) -> Result<()> {
        let mut head = [0u8; 28];
        head[..8].copy_from_slice(&key.to_le_bytes());
        head[8..16].copy_from_slice(&(bytes.len() as u64).to_le_bytes());
        let (old_len, old_crc) = old.unwrap_or((u64::MAX, 0));
        head[16..24].copy_from_slice(&old_len.to_le_bytes());
        head[24..].copy_from_slice(&old_crc.to_le_bytes());
        let mut crc = crc32fast::Hasher::new();
        crc.update(&head);
        crc.update(bytes);
        self.out.write_all(&head)?;
        self.out.write_all(bytes)?;
        self.out.write_all(&crc.finalize().to_le_bytes())?;
        self.count += 1;
        Ok(())
    }

    /// Ends the journal and makes it durable: from now on the replacements happen, whatever
    /// crashes.
    pub(crate) fn seal(mut self) -> Result<()> {
        self.out.write_all(REPLACE_END)?;
        self.out.write_all(&self.count.to_le_bytes())?;
        self.out
            .write_all(&crc32fast::hash(&self.count.to_le_bytes()).to_le_bytes())?;
        let f = self
            .out
            .into_inner()
            .map_err(|e| Error::from(e.into_error()))?;
        f.sync_all()?;
        sync_parent(&self.path)
    }

    /// Drops an unsealed journal: nothing was replaced.
    pub(crate) fn discard(self) -> Result<()> {
        drop(self.out);
        remove_if_there(&self.path)?;
        sync_parent(&self.path)
    }
}

/// Reads the records of a replacement journal in order, handing each (key, old state, new
/// bytes) to `each`; false when the journal is not sealed (torn, or not a journal), checked
/// before any record is handed.
fn read_replacements(
    path: &Path,
    mut each: impl FnMut(u64, FileState, Vec<u8>) -> Result<()>,
) -> Result<bool> {
    let mut f = std::io::BufReader::new(open_no_follow(path, false)?);
    let mut magic = [0u8; 8];
    if f.read_exact(&mut magic).is_err() || &magic != REPLACE_MAGIC {
        return Ok(false);
    }
    let mut count = 0u64;
    loop {
        let mut head = [0u8; 28];
        if f.read_exact(&mut head[..16]).is_err() {
            return Ok(false);
        }
        if &head[..8] == REPLACE_END {
            let mut tail = [0u8; 4];
            if f.read_exact(&mut tail).is_err() {
                return Ok(false);
            }
            let sealed = head[8..16] == count.to_le_bytes()
                && tail == crc32fast::hash(&head[8..16]).to_le_bytes()
                && f.read(&mut [0u8; 1])? == 0;
            return Ok(sealed);
        }
        if f.read_exact(&mut head[16..]).is_err() {
            return Ok(false);
        }
        let (key, len, old_len) = (le_word(&head, 0), le_word(&head, 8), le_word(&head, 16));
        let old_crc = u32::from_le_bytes(head[24..].try_into().unwrap_or_default());
        let old = (old_len != u64::MAX).then_some((old_len, old_crc));
        // No file it replaces is larger than a region may be: a record claiming more is not
        // one of ours, and is never read into memory (a sparse file claims any length).
        if len > MAX_REGION_BYTES as u64 {
            return Ok(false);
        }
        let mut bytes = Vec::new();
        if (&mut f).take(len).read_to_end(&mut bytes)? as u64 != len {
            return Ok(false);
        }
        let mut crc = [0u8; 4];
        if f.read_exact(&mut crc).is_err() {
            return Ok(false);
        }
        let mut h = crc32fast::Hasher::new();
        h.update(&head);
        h.update(&bytes);
        if h.finalize().to_le_bytes() != crc {
            return Ok(false);
        }
        each(key, old, bytes)?;
        count += 1;
    }
}

/// Whether a journal (of either kind) lies at `path`: `None` when nothing does, else whether
/// it is sealed (its writes are pending) rather than torn, or not a journal at all.
pub(crate) fn left_journal(path: &Path) -> Result<Option<bool>> {
    match fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::from(e).context(path.display())),
        Ok(m) if !m.is_file() => Ok(Some(false)),
        Ok(_) => Ok(Some(
            read_replacements(path, |_, _, _| Ok(()))? || verify_journal(path)?,
        )),
    }
}

/// What [`replay_replacements`] did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Replay {
    /// There was no journal.
    Nothing,
    /// The journal was not sealed (or not a journal): nothing replaced.
    Torn,
    /// The file of this key holds neither what the commit read nor its new bytes: another
    /// program wrote it since. Nothing replaced.
    Stale(u64),
    /// Every replacement was made.
    Applied,
}

/// Applies the replacement journal at `path` if it is sealed and still current, then
/// removes it. `current` tells what the file a key names holds now; `replace` writes one
/// file, and must be idempotent (a replay after a crash may repeat replacements already
/// made). The journal is verified whole first, and every file it names must hold either
/// what the commit read or its new bytes: otherwise another program saved the world since
/// (a game run after a crash), and replaying would undo that and mix the two; then nothing
/// is replaced. Records are read one at a time.
pub(crate) fn replay_replacements(
    path: &Path,
    mut current: impl FnMut(u64) -> Result<FileState>,
    mut replace: impl FnMut(u64, Vec<u8>) -> Result<()>,
) -> Result<Replay> {
    if !fs::symlink_metadata(path).is_ok_and(|m| m.is_file()) {
        if fs::symlink_metadata(path).is_ok() {
            log::warn!("{}: not a regular file; removed", path.display());
            remove_if_there(path)?;
            sync_parent(path)?;
            return Ok(Replay::Torn);
        }
        return Ok(Replay::Nothing);
    }
    let mut stale = None;
    let sealed = read_replacements(path, |key, old, bytes| {
        let now = current(key)?;
        if stale.is_none() && now != old && now != state_of(Some(&bytes)) {
            stale = Some(key);
        }
        Ok(())
    })?;
    let done = match (sealed, stale) {
        (false, _) => Replay::Torn,
        (true, Some(key)) => Replay::Stale(key),
        (true, None) => {
            read_replacements(path, |key, _, bytes| replace(key, bytes))?;
            Replay::Applied
        }
    };
    remove_if_there(path)?;
    sync_parent(path)?;
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replacement_journals_replay_only_when_sealed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("Regions.worldfs-journal");
        let old = |key: u64| Ok(state_of((key != u64::MAX).then_some(b"old".as_slice())));
        let mut j = ReplaceJournal::create(&path).unwrap();
        j.add(7, old(7).unwrap(), b"seven").unwrap();
        j.add(u64::MAX, None, b"").unwrap();
        j.add(3, old(3).unwrap(), &[9u8; 5000]).unwrap();
        j.seal().unwrap();
        let whole = fs::read(&path).unwrap();
        let mut got = Vec::new();
        let replayed = replay_replacements(&path, old, |k, b| {
            got.push((k, b));
            Ok(())
        });
        assert_eq!(replayed.unwrap(), Replay::Applied);
        assert_eq!(
            got,
            vec![
                (7, b"seven".to_vec()),
                (u64::MAX, vec![]),
                (3, vec![9u8; 5000])
            ]
        );
        assert!(!path.exists(), "removed once applied");
        let never = |_, _| panic!("replayed a torn journal");
        // Cut anywhere or with a flipped byte, it is discarded and nothing is handed out.
        for cut in (0..whole.len()).step_by(97).chain([whole.len() - 1]) {
            fs::write(&path, &whole[..cut]).unwrap();
            assert_eq!(
                replay_replacements(&path, old, never).unwrap(),
                Replay::Torn
            );
            assert!(!path.exists());
        }
        for at in [3, 8, 20, 30, 40, whole.len() - 10] {
            let mut flipped = whole.clone();
            flipped[at] ^= 1;
            fs::write(&path, &flipped).unwrap();
            assert_eq!(
                replay_replacements(&path, old, never).unwrap(),
                Replay::Torn
            );
        }
        // Sealed, but a file holds neither its old nor its new bytes: nothing replaced.
        fs::write(&path, &whole).unwrap();
        let moved = |key: u64| {
            Ok(if key == 3 {
                state_of(Some(b"game"))
            } else {
                old(key)?
            })
        };
        assert_eq!(
            replay_replacements(&path, moved, never).unwrap(),
            Replay::Stale(3)
        );
        assert!(!path.exists());
        // Half replayed before a crash: files already new are fine.
        fs::write(&path, &whole).unwrap();
        let half = |key: u64| {
            Ok(if key == 7 {
                state_of(Some(b"seven"))
            } else {
                old(key)?
            })
        };
        let replayed = replay_replacements(&path, half, |_, _| Ok(()));
        assert_eq!(replayed.unwrap(), Replay::Applied);
        // An unsealed journal, discarded.
        let mut j = ReplaceJournal::create(&path).unwrap();
        j.add(1, None, b"x").unwrap();
        j.discard().unwrap();
        assert!(!path.exists());
        assert_eq!(
            replay_replacements(&path, old, never).unwrap(),
            Replay::Nothing
        );
    }

    #[test]
    fn a_file_state_is_read_streaming_and_never_through_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        assert_eq!(file_state(&f).unwrap(), None);
        let data = vec![5u8; 200_000];
        fs::write(&f, &data).unwrap();
        assert_eq!(file_state(&f).unwrap(), state_of(Some(&data)));
        let link = dir.path().join("l");
        std::os::unix::fs::symlink(&f, &link).unwrap();
        assert!(file_state(&link).is_err());
    }

    /// The writes a journal file holds, read as recovery reads it; `None` when torn.
    fn read_back(jpath: &Path) -> Option<Vec<(u64, Vec<u8>)>> {
        let mut out = Vec::new();
        read_journal(jpath, |w| {
            out.push((w.off, w.data));
            Ok(())
        })
        .unwrap()
        .then_some(out)
    }

    #[test]
    fn journals_round_trip_and_torn_ones_are_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let jpath = dir.path().join("j");
        let file = tempfile::tempfile().unwrap();
        let w = vec![
            (5u64, b"abc".to_vec()),
            (0, vec![]),
            (9, vec![7u8; 100_000]),
        ];
        let j = encode_journal(&file, &w).unwrap();
        fs::write(&jpath, &j).unwrap();
        assert_eq!(read_back(&jpath), Some(w));
        for cut in (0..j.len()).step_by(997).chain([j.len() - 1, 15, 16, 20]) {
            fs::write(&jpath, &j[..cut]).unwrap();
            assert_eq!(read_back(&jpath), None, "cut at {cut}");
        }
        let mut flipped = j.clone();
        flipped[20] ^= 4;
        fs::write(&jpath, &flipped).unwrap();
        assert_eq!(read_back(&jpath), None);
        let mut longer = j.clone();
        longer.insert(30, 0);
        fs::write(&jpath, &longer).unwrap();
        assert_eq!(read_back(&jpath), None);
    }

    #[test]
    fn a_journal_written_one_write_at_a_time_is_the_same_journal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("Chunks.dat");
        fs::write(&path, b"0123456789").unwrap();
        let f = open_rw(&path);
        let writes = vec![(2u64, b"xy".to_vec()), (8, b"Z".to_vec())];
        // Discarded: nothing written, no journal left.
        let mut j = JournalWriter::create(&path, &f).unwrap();
        j.add(0, b"nope").unwrap();
        j.discard().unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"0123456789");
        assert!(!journal_path(&path).exists());
        // Sealed: the bytes encode_journal makes; a crash now leaves it to recovery.
        let mut j = JournalWriter::create(&path, &f).unwrap();
        for (off, data) in &writes {
            j.add(*off, data).unwrap();
        }
        let sealed = j.seal().unwrap();
        assert_eq!(
            fs::read(journal_path(&path)).unwrap(),
            encode_journal(&f, &writes).unwrap()
        );
        assert_eq!(fs::read(&path).unwrap(), b"0123456789", "not applied yet");
        sealed.apply(&f).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"01xy4567Z9");
        assert!(!journal_path(&path).exists());
        // A sealed journal left by a crash is applied by the next open's recovery.
        let mut j = JournalWriter::create(&path, &f).unwrap();
        j.add(0, b"AB").unwrap();
        drop(j.seal().unwrap());
        assert!(recover(&path, &f).unwrap());
        assert_eq!(fs::read(&path).unwrap(), b"ABxy4567Z9");
    }

    /// A journal in the layout of worldfs 1 (writes without what their range held).
    fn journal_v1(writes: &[(u64, &[u8])]) -> Vec<u8> {
        let mut j = JOURNAL_MAGIC_V1.to_vec();
        j.extend_from_slice(&(writes.len() as u64).to_le_bytes());
        for (off, data) in writes {
            j.extend_from_slice(&off.to_le_bytes());
            j.extend_from_slice(&(data.len() as u64).to_le_bytes());
            j.extend_from_slice(data);
        }
        let crc = crc32fast::hash(&j);
        j.extend_from_slice(&crc.to_le_bytes());
        j
    }

    #[test]
    fn a_complete_journal_is_replayed_on_recovery() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("Chunks.dat");
        fs::write(&path, b"0123456789").unwrap();
        let f = open_rw(&path);
        // Simulate a crash after the journal was written, before the file was touched.
        let j = encode_journal(&f, &[(2, b"xy".to_vec())]).unwrap();
        fs::write(journal_path(&path), &j).unwrap();
        assert!(recover(&path, &f).unwrap());
        assert_eq!(fs::read(&path).unwrap(), b"01xy456789");
        assert!(!journal_path(&path).exists());
        // A torn journal is discarded and the file left alone.
        let j = encode_journal(&f, &[(0, b"zz".to_vec())]).unwrap();
        fs::write(journal_path(&path), &j[..j.len() - 1]).unwrap();
        assert!(!recover(&path, &f).unwrap());
        assert_eq!(fs::read(&path).unwrap(), b"01xy456789");
        // One left by worldfs 1 before an upgrade is still finished.
        fs::write(journal_path(&path), journal_v1(&[(4, b"ab"), (10, b"+")])).unwrap();
        assert!(recover(&path, &f).unwrap());
        assert_eq!(fs::read(&path).unwrap(), b"01xyab6789+");
        let j = journal_v1(&[(0, b"zz")]);
        fs::write(journal_path(&path), &j[..j.len() - 1]).unwrap();
        assert!(!recover(&path, &f).unwrap());
        assert_eq!(fs::read(&path).unwrap(), b"01xyab6789+");
    }

    /// A sealed journal left by a crash, then the game saved the chunk file before the next
    /// read-write open: replaying would overwrite what the game saved (its directory entries
    /// too), so nothing is written. A journal whose CRC holds but whose write lies past the
    /// end of the file (made by hand) is not applied either: it would grow a hole.
    #[test]
    fn a_journal_older_than_its_file_or_past_its_end_is_not_applied() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("Chunks.dat");
        let writes = [(2, b"xy".to_vec()), (10, b"new record".to_vec())];
        let f = sealed_over(&path, b"0123456789", &writes);
        // The game saves: the range of the first write and the end of the file changed.
        fs::write(&path, b"01GAME6789game record").unwrap();
        assert!(!recover(&path, &f).unwrap(), "a stale journal was applied");
        assert_eq!(fs::read(&path).unwrap(), b"01GAME6789game record");
        assert!(!journal_path(&path).exists());
        // Half applied before a crash: the written ranges hold the new bytes; fine.
        let f = sealed_over(&path, b"0123456789", &writes);
        fs::write(&path, b"01xy456789").unwrap();
        assert!(recover(&path, &f).unwrap());
        assert_eq!(fs::read(&path).unwrap(), b"01xy456789new record");
        // Far past the end.
        let mut j = JournalWriter::create(&path, &f).unwrap();
        j.add(1 << 40, b"far").unwrap();
        drop(j.seal().unwrap());
        assert!(
            !recover(&path, &f).unwrap(),
            "a write past the end was applied"
        );
        assert_eq!(fs::metadata(&path).unwrap().len(), 20);
    }

    /// The chunk file `path` holding `old`, open, with a sealed journal of `writes` beside
    /// it (a crash before the apply).
    fn sealed_over(path: &Path, old: &[u8], writes: &[(u64, Vec<u8>)]) -> File {
        fs::write(path, old).unwrap();
        let f = open_rw(path);
        let mut j = JournalWriter::create(path, &f).unwrap();
        for (off, data) in writes {
            j.add(*off, data).unwrap();
        }
        drop(j.seal().unwrap());
        f
    }

    /// A crash (SIGKILL between pages, a power loss) cut the apply of a sealed journal: the
    /// first write's pages up to a page boundary hold the new bytes, the rest of the file
    /// its old ones. The next open finishes the commit; before per-piece CRCs it took the
    /// half-written range for another program's save and left the file half new.
    #[test]
    fn an_apply_cut_between_pages_is_finished() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("Chunks.dat");
        let old: Vec<u8> = (0..40_000u32).map(|i| (i % 251) as u8).collect();
        let writes = [
            (1000u64, vec![0xAAu8; 20_000]),
            (30_000, vec![0xBB; 9_000]),
            (40_000, vec![0xCC; 5_000]),
        ];
        let mut full = old.clone();
        full.resize(45_000, 0);
        for (off, data) in &writes {
            full[*off as usize..*off as usize + data.len()].copy_from_slice(data);
        }
        // Cuts inside the first write, inside the appended one, at the old end.
        for cut in [4096usize, 12_288, 20_480, 32_768, 40_000, 40_960, 45_000] {
            let f = sealed_over(&path, &old, &writes);
            // New bytes up to the cut, old ones after it (the file grows only as far).
            let mut torn = full[..cut].to_vec();
            torn.extend_from_slice(old.get(cut..).unwrap_or_default());
            fs::write(&path, &torn).unwrap();
            assert!(recover(&path, &f).unwrap(), "cut at {cut}: not finished");
            assert_eq!(fs::read(&path).unwrap(), full, "cut at {cut}");
            assert!(!journal_path(&path).exists());
        }
        // A piece holding neither its old nor its new bytes: the game saved; left alone.
        let f = sealed_over(&path, &old, &writes);
        let mut saved = full[..old.len()].to_vec();
        saved[9000] ^= 1;
        fs::write(&path, &saved).unwrap();
        assert!(
            !recover(&path, &f).unwrap(),
            "a stale piece was overwritten"
        );
        assert_eq!(fs::read(&path).unwrap(), saved);
    }

    /// A journal in the layout of worldfs before per-piece CRCs (one CRC-32 of what each
    /// range held) left by a crash before an upgrade is still finished, and still refused
    /// when the range changed.
    #[test]
    fn a_journal_of_the_second_layout_is_still_replayed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("Chunks.dat");
        let v2 = |writes: &[(u64, &[u8], &[u8])]| {
            let mut j = JOURNAL_MAGIC_V2.to_vec();
            j.extend_from_slice(&(writes.len() as u64).to_le_bytes());
            for (off, held, data) in writes {
                j.extend_from_slice(&off.to_le_bytes());
                j.extend_from_slice(&(data.len() as u64).to_le_bytes());
                j.extend_from_slice(&(held.len() as u64).to_le_bytes());
                j.extend_from_slice(&crc32fast::hash(held).to_le_bytes());
                j.extend_from_slice(data);
            }
            let crc = crc32fast::hash(&j);
            j.extend_from_slice(&crc.to_le_bytes());
            j
        };
        fs::write(&path, b"0123456789").unwrap();
        let f = open_rw(&path);
        fs::write(
            journal_path(&path),
            v2(&[(2, b"23", b"xy"), (10, b"", b"+")]),
        )
        .unwrap();
        assert!(recover(&path, &f).unwrap());
        assert_eq!(fs::read(&path).unwrap(), b"01xy456789+");
        fs::write(journal_path(&path), v2(&[(4, b"45", b"ab")])).unwrap();
        fs::write(&path, b"01xyGG6789+").unwrap();
        assert!(!recover(&path, &f).unwrap());
        assert_eq!(fs::read(&path).unwrap(), b"01xyGG6789+");
    }

    fn open_rw(path: &Path) -> File {
        OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .unwrap()
    }

    /// Review: a journal claiming huge writes (a sparse file takes no disk for them) is
    /// refused without allocating what it claims; one changed between its check and its
    /// read is not read through.
    #[test]
    fn a_journal_claiming_huge_writes_is_refused_without_allocating_them() {
        let dir = tempfile::tempdir().unwrap();
        let jpath = dir.path().join("j");
        let len = 1u64 << 48;
        for layout in [JOURNAL_MAGIC, JOURNAL_MAGIC_V2, JOURNAL_MAGIC_V1] {
            let mut j = layout.to_vec();
            j.extend_from_slice(&1u64.to_le_bytes());
            j.extend_from_slice(&0u64.to_le_bytes());
            j.extend_from_slice(&len.to_le_bytes());
            j.extend_from_slice(&len.to_le_bytes());
            fs::write(&jpath, &j).unwrap();
            open_rw(&jpath).set_len(16 + 24 + (4u64 << 36) + 4).unwrap();
            assert!(!verify_journal(&jpath).unwrap());
        }
        let file = tempfile::tempfile().unwrap();
        let writes = [
            (0, vec![7u8; 100_000]),
            (100_000, vec![6u8; 100_000]),
            (300_000, b"abc".to_vec()),
        ];
        fs::write(&jpath, encode_journal(&file, &writes).unwrap()).unwrap();
        // The file is empty: no write records pieces. The third header lies past what a
        // reader holds in its buffer when the first write is handed out.
        let third = 16 + 2 * (24 + 100_000);
        let mut n = 0;
        let read = read_journal(&jpath, |_| {
            n += 1;
            let mut h = 300_000u64.to_le_bytes().to_vec();
            h.extend_from_slice(&len.to_le_bytes());
            h.extend_from_slice(&0u64.to_le_bytes());
            open_rw(&jpath).write_all_at(&h, third).unwrap();
            Ok(())
        });
        assert!(
            read.is_err(),
            "a journal changed after its check was read through"
        );
        assert_eq!(n, 2);
        let mut j = JournalWriter::create(&dir.path().join("f"), &file).unwrap();
        assert!(j.add(0, &vec![0; MAX_WRITE as usize + 1]).is_err());
    }

    /// Review: two writes of one commit over the same bytes (two directory entries naming
    /// one record) are refused as the journal is made: what the range held is recorded
    /// before any write is applied, so a replay after a crash could not finish it.
    #[test]
    fn writes_sharing_bytes_are_refused_and_nothing_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("Chunks.dat");
        fs::write(&path, vec![1u8; 16384]).unwrap();
        let f = open_rw(&path);
        let mut j = JournalWriter::create(&path, &f).unwrap();
        j.add(0, &[0xAA; 8192]).unwrap();
        j.add(8192, &[0xAB; 10]).unwrap();
        let err = j.add(4096, &[0xBB; 8192]).unwrap_err();
        assert!(err.message().contains("share bytes"), "{}", err.message());
        assert!(j.add(100, &[0; 1]).is_err());
        j.add(8202, &[0xCC; 10]).unwrap();
        j.discard().unwrap();
        let shared = vec![(0u64, vec![2u8; 10]), (5, vec![3u8; 10])];
        assert!(journaled_write(&path, &f, shared, vec![]).is_err());
        assert_eq!(fs::read(&path).unwrap(), vec![1u8; 16384]);
        assert!(!journal_path(&path).exists());
    }

    /// Review: a power loss kept an appended write's length but not all its pages (holes
    /// read as zeros): the commit is finished.
    #[test]
    fn an_append_whose_pages_a_power_loss_left_as_zeros_is_finished() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("Chunks.dat");
        let old = vec![1u8; 8000];
        let new = vec![0xAAu8; 12288];
        let mut full = old.clone();
        full.extend_from_slice(&new);
        for hole in [8000..8192, 8192..16384, 8000..20288] {
            let f = sealed_over(&path, &old, &[(8000, new.clone())]);
            let mut torn = full.clone();
            torn[hole.clone()].fill(0);
            fs::write(&path, &torn).unwrap();
            assert!(recover(&path, &f).unwrap(), "hole {hole:?}: not finished");
            assert_eq!(fs::read(&path).unwrap(), full);
        }
    }

    /// Review: an apply that failed part way (a full disk) leaves its sealed journal; the
    /// next commit is refused rather than removing it, and the next open finishes it.
    #[test]
    fn a_sealed_journal_left_by_a_failed_apply_is_kept_for_the_next_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("Chunks.dat");
        let f = sealed_over(&path, b"0123456789", &[(2, b"xy".to_vec())]);
        let refused = JournalWriter::create(&path, &f).err().unwrap();
        assert_eq!(refused.errno(), libc::EIO);
        assert!(journaled_write(&path, &f, vec![(0, b"zz".to_vec())], vec![]).is_err());
        assert_eq!(fs::read(&path).unwrap(), b"0123456789");
        assert!(recover(&path, &f).unwrap());
        assert_eq!(fs::read(&path).unwrap(), b"01xy456789");
        // The same for a replacement journal.
        let rpath = dir.path().join("Regions.worldfs-journal");
        let mut r = ReplaceJournal::create(&rpath).unwrap();
        r.add(1, None, b"x").unwrap();
        r.seal().unwrap();
        assert_eq!(
            ReplaceJournal::create(&rpath).err().unwrap().errno(),
            libc::EIO
        );
        assert!(rpath.exists());
    }

    #[test]
    fn pieces_split_a_range_at_page_boundaries() {
        let all = |off, len| pieces(off, len).collect::<Vec<_>>();
        assert!(all(0, 0).is_empty());
        assert_eq!(all(100, 50), vec![0..50]);
        assert_eq!(all(4000, 200), vec![0..96, 96..200]);
        assert_eq!(all(4096, 8192), vec![0..4096, 4096..8192]);
        for (off, len) in [(0, 0), (100, 50), (4000, 200), (4096, 8192), (1, 9000)] {
            assert_eq!(piece_count(off, len), Some(all(off, len).len() as u64));
        }
        assert_eq!(piece_count(u64::MAX, 2), None);
    }

    #[test]
    fn a_journal_is_never_read_or_written_through_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("Chunks.dat");
        fs::write(&path, b"0123456789").unwrap();
        let f = open_rw(&path);
        let victim = dir.path().join("victim");
        let planted = encode_journal(&f, &[(0, b"zz".to_vec())]).unwrap();
        fs::write(&victim, &planted).unwrap();
        std::os::unix::fs::symlink(&victim, journal_path(&path)).unwrap();
        assert!(
            !recover(&path, &f).unwrap(),
            "a linked journal is not replayed"
        );
        assert_eq!(fs::read(&path).unwrap(), b"0123456789");
        assert!(victim.exists());
        std::os::unix::fs::symlink(&victim, journal_path(&path)).unwrap();
        journaled_write(&path, &f, vec![(0, b"ab".to_vec())], vec![]).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"ab23456789");
        assert_eq!(
            fs::read(&victim).unwrap(),
            planted,
            "the journal was written through the link"
        );
    }
}
