//! The content of a file being written: in memory while small, in a private unnamed file of
//! the state folder once it grows past [`MEMORY_LIMIT`].
//!
//! A restore or a tool may write files of up to 256 MiB (`core::MAX_FILE_SIZE`), several
//! at once; held whole in memory, each cost its size and more while it grew and again when
//! it was committed. Past the limit the bytes go to a file of the daemon's own (`O_TMPFILE`,
//! mode 0600, gone with the daemon), so memory stays bounded however large or many the
//! files being written; they are read back whole only for their commit. A text that is not
//! being written (a reader's) stays the tree's shared text, never copied; a reader's text
//! whose pages the kernel keeps is not even rendered until something reads it ([`Later`]).

use std::fs::File;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::{lock, Error, Result};
use crate::vfs::held::{private_dir, Spill};
use crate::vfs::naming::display_path;
use crate::vfs::tree::{Pin, Tree};

/// A file being written stays in memory up to this size.
pub const MEMORY_LIMIT: usize = 8 << 20;

/// A large text's turn ([`OneLarge::enter`]): `None` for a small one.
pub type Large<'a> = Option<MutexGuard<'a, ()>>;

/// Lets one text past [`MEMORY_LIMIT`] at a time be read back whole for its check and
/// commit, which hold it about three times over (the bytes, what the tree decodes or
/// encodes of them, the store's copy): however many large files are closed at once, the
/// daemon holds that much for one of them. Smaller texts pass at once.
#[derive(Default)]
pub struct OneLarge(Mutex<()>);

impl OneLarge {
    /// Waits for the other large texts to be done when `len` is past [`MEMORY_LIMIT`]; the
    /// guard lets the next one in. Taken holding at most one open file's lock (and no other
    /// of the core's locks), and let go before any open file is locked: a thread holding
    /// it never waits for a file whose lock is held by a thread waiting for it.
    pub fn enter(&self, len: usize) -> Result<Large<'_>> {
        if len <= MEMORY_LIMIT {
            return Ok(None);
        }
        lock(&self.0).map(Some)
    }
}

/// What a file holds while handles are open on it.
pub enum Buffer {
    /// Shared with the tree's rendered text until written (copied then).
    Memory(Arc<Vec<u8>>),
    /// Past [`MEMORY_LIMIT`]: `len` bytes in an unnamed file.
    File { file: File, len: usize },
    /// A reader's text, rendered at the first use.
    Later(Box<Later>),
}

/// A reader's text not rendered yet: what the tree kept of its source at the open
/// ([`Tree::pin`]), rendered into exactly the text of the open when first read (see
/// [`Buffer::later`]). An open whose pages the kernel keeps (a second `grep -r`) is then
/// never rendered at all.
#[derive(Clone)]
pub struct Later {
    tree: Arc<dyn Tree>,
    path: Vec<String>,
    pin: Pin,
    /// The size the open's stat gave.
    len: usize,
}

impl Later {
    /// The text of the file at `path` that `pin` holds, `len` bytes long as its stat said.
    pub fn new(tree: Arc<dyn Tree>, path: Vec<String>, pin: Pin, len: usize) -> Later {
        Later {
            tree,
            path,
            pin,
            len,
        }
    }

    /// Renders the text (it may decode: call it holding no lock of the core's).
    pub fn render(&self) -> Result<Arc<Vec<u8>>> {
        self.tree
            .read_pinned(&self.path, &self.pin)
            .map_err(|e| e.context(display_path(&self.path)))
    }
}

/// What a [`Buffer::Later`] met where [`Buffer::render`] had rendered it.
fn unrendered() -> Error {
    Error::new(libc::EIO, "a reader's text was used before it was rendered")
}

/// Bytes read from an open file: a range of a text, not copied when it is in memory.
pub struct Slice {
    data: Arc<Vec<u8>>,
    start: usize,
    end: usize,
}

impl std::ops::Deref for Slice {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.data[self.start..self.end]
    }
}

impl Default for Buffer {
    fn default() -> Self {
        Buffer::Memory(Arc::default())
    }
}

impl Buffer {
    /// Its size in bytes.
    pub fn len(&self) -> usize {
        match self {
            Buffer::Memory(d) => d.len(),
            Buffer::File { len, .. } => *len,
            Buffer::Later(l) => l.len,
        }
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The whole text (read from its file when it is in one).
    pub fn bytes(&self) -> Result<Arc<Vec<u8>>> {
        match self {
            Buffer::Memory(d) => Ok(d.clone()),
            Buffer::File { file, len } => {
                let mut data = vec![0; *len];
                file.read_exact_at(&mut data, 0)?;
                Ok(Arc::new(data))
            }
            Buffer::Later(l) => l.render(),
        }
    }

    /// The text still to be rendered, if it is one: a copy of what renders it, so that the
    /// caller renders it holding no lock ([`Later::render`]), then puts it in place with
    /// [`Buffer::rendered`].
    pub fn later(&self) -> Option<Later> {
        match self {
            Buffer::Later(l) => Some((**l).clone()),
            _ => None,
        }
    }

    /// Puts the text a [`Later`] rendered in its place (unless another read did first).
    pub fn rendered(&mut self, text: Arc<Vec<u8>>) {
        if let Buffer::Later(_) = self {
            *self = Buffer::Memory(text);
        }
    }

    /// Renders a [`Buffer::Later`] text, which then is in memory like any other.
    fn render(&mut self) -> Result<()> {
        if let Buffer::Later(l) = self {
            *self = Buffer::Memory(l.render()?);
        }
        Ok(())
    }

    /// Up to `size` bytes from `offset` (fewer at the end).
    pub fn read(&self, offset: u64, size: u32) -> Result<Slice> {
        if let Buffer::Later(l) = self {
            return Buffer::Memory(l.render()?).read(offset, size);
        }
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(self.len());
        let end = start.saturating_add(size as usize).min(self.len());
        match self {
            Buffer::Memory(d) => Ok(Slice {
                data: d.clone(),
                start,
                end,
            }),
            Buffer::Later(_) => Err(unrendered()),
            Buffer::File { file, .. } => {
                let mut data = vec![0; end - start];
                file.read_exact_at(&mut data, start as u64)?;
                let end = data.len();
                Ok(Slice {
                    data: Arc::new(data),
                    start: 0,
                    end,
                })
            }
        }
    }

    /// Writes `data` at `start`, zero-filling any gap; moves to a file of `spill` when the
    /// text is or grows past [`MEMORY_LIMIT`] (before a large text shared with the tree is
    /// copied). A write that fails leaves the text as it was.
    pub fn write_at(&mut self, spill: &Spill, start: usize, data: &[u8]) -> Result<()> {
        self.render()?;
        let end = start + data.len();
        self.spill_past(spill, end.max(self.len()));
        match self {
            Buffer::Memory(d) => {
                let buffer = Arc::make_mut(d);
                if buffer.len() < end {
                    buffer.resize(end, 0);
                }
                buffer[start..end].copy_from_slice(data);
            }
            Buffer::Later(_) => return Err(unrendered()),
            Buffer::File { file, len } => {
                // What the write covers of the text now, put back if it fails partway (a
                // full disk): at most one write request's bytes.
                let mut old = vec![0; end.min(*len).saturating_sub(start)];
                file.read_exact_at(&mut old, start as u64)?;
                if let Err(e) = file.write_all_at(data, start as u64) {
                    // Bytes a partial write left past the end would show through a later
                    // growth instead of zeros.
                    let _ = file.set_len(*len as u64);
                    if let Err(undo) = file.write_all_at(&old, start as u64) {
                        log::error!(
                            "a failed write could not be undone in the buffer's file: {undo}"
                        );
                    }
                    return Err(e.into());
                }
                *len = (*len).max(end);
            }
        }
        Ok(())
    }

    /// Cuts or zero-extends the text to `len` bytes.
    pub fn resize(&mut self, spill: &Spill, len: usize) -> Result<()> {
        self.render()?;
        if let Buffer::File { file, len: now } = self {
            if len <= MEMORY_LIMIT && len <= *now {
                // Small again: back in memory (the file goes).
                let mut kept = vec![0; len];
                file.read_exact_at(&mut kept, 0)?;
                *self = Buffer::Memory(Arc::new(kept));
                return Ok(());
            }
        }
        self.spill_past(spill, len);
        match self {
            Buffer::Memory(d) => Arc::make_mut(d).resize(len, 0),
            Buffer::Later(_) => return Err(unrendered()),
            Buffer::File { file, len: now } => {
                file.set_len(len as u64)?;
                *now = len;
            }
        }
        Ok(())
    }

    /// Moves a text in memory to a file of `spill` when it is to be `size` bytes, past
    /// [`MEMORY_LIMIT`]. Where no file can be made or written (no state folder, a full one;
    /// logged) it stays in memory.
    fn spill_past(&mut self, spill: &Spill, size: usize) {
        let Buffer::Memory(d) = self else {
            return;
        };
        if size <= MEMORY_LIMIT {
            return;
        }
        let Some(dir) = spill.dir() else {
            return;
        };
        let moved = unnamed_file(dir).and_then(|file| {
            file.write_all_at(d, 0)?;
            Ok(file)
        });
        match moved {
            Ok(file) => *self = Buffer::File { len: d.len(), file },
            Err(e) => log::warn!("a file being written stays in memory: {e}"),
        }
    }
}

/// A new file in `dir` (made if missing, mode 0700) that has no name, readable by the owner
/// only: `O_TMPFILE`, or where the filesystem has none, a file created new and unlinked.
fn unnamed_file(dir: &std::path::Path) -> Result<File> {
    private_dir(dir)?;
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_TMPFILE | libc::O_CLOEXEC)
        .open(dir);
    match opened {
        Ok(f) => Ok(f),
        Err(_) => {
            static NEXT: AtomicU64 = AtomicU64::new(0);
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let path = dir.join(format!("buffer-{}-{n}", std::process::id()));
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&path)
                .map_err(|e| Error::from(e).context(path.display()))?;
            std::fs::remove_file(&path).map_err(|e| Error::from(e).context(path.display()))?;
            Ok(f)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_text_goes_to_a_file_and_reads_back_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let spill = Spill::new(Some(dir.path().join("held")));
        let mut b = Buffer::default();
        let chunk: Vec<u8> = (0..=255u8).cycle().take(1 << 20).collect();
        let mut expected = Vec::new();
        for i in 0..10 {
            b.write_at(&spill, i << 20, &chunk).unwrap();
            expected.extend_from_slice(&chunk);
        }
        assert!(
            matches!(b, Buffer::File { .. }),
            "past the limit: in a file"
        );
        // The file has no name: nothing of it shows in the folder.
        assert_eq!(
            std::fs::read_dir(dir.path().join("held")).unwrap().count(),
            0
        );
        b.write_at(&spill, 3, b"xyz").unwrap();
        expected[3..6].copy_from_slice(b"xyz");
        assert_eq!(*b.bytes().unwrap(), expected);
        assert_eq!(&*b.read(2, 5).unwrap(), &expected[2..7]);
        assert_eq!(b.read(20 << 20, 5).unwrap().len(), 0, "past the end");
        // A write past the end leaves zeros between.
        b.write_at(&spill, (11 << 20) + 1, b"!").unwrap();
        assert_eq!(b.len(), (11 << 20) + 2);
        assert_eq!(&*b.read(10 << 20, 2).unwrap(), &[0, 0]);
        b.resize(&spill, 12 << 20).unwrap();
        assert_eq!(b.len(), 12 << 20);
        b.resize(&spill, 4).unwrap();
        assert!(matches!(b, Buffer::Memory(_)), "small again: in memory");
        assert_eq!(*b.bytes().unwrap(), &expected[..4]);
    }

    #[test]
    fn a_write_into_a_large_shared_text_moves_it_to_a_file_without_touching_the_shared_one() {
        let dir = tempfile::tempdir().unwrap();
        let spill = Spill::new(Some(dir.path().join("held")));
        let shown = Arc::new(vec![7u8; MEMORY_LIMIT + 10]);
        let mut b = Buffer::Memory(shown.clone());
        b.write_at(&spill, 0, b"x").unwrap();
        assert!(
            matches!(b, Buffer::File { .. }),
            "moved before any copy in memory"
        );
        assert_eq!(shown[0], 7, "the tree's text is untouched");
        assert_eq!(b.len(), shown.len());
        assert_eq!(&*b.read(0, 2).unwrap(), b"x\x07");
    }

    #[test]
    fn without_a_state_folder_a_large_text_stays_in_memory() {
        let spill = Spill::new(None);
        let mut b = Buffer::default();
        b.write_at(&spill, MEMORY_LIMIT, b"end").unwrap();
        assert!(matches!(b, Buffer::Memory(_)));
        assert_eq!(b.len(), MEMORY_LIMIT + 3);
    }
}
