//! The fixed-size chunk files `Chunks.dat`, `Chunks32.dat` and `Chunks32h.dat` as a store.
//!
//! Opening reads only the 786 KB directory. A commit follows the game's own rules (spec
//! §13.1): an existing chunk is overwritten in place in its slot, a new chunk goes to the
//! next slot (`Chunks.dat`: at the end of the file; the others: at `786444 + slot × size`)
//! and gets the next directory entry, so the layout stays dense and every other byte is
//! untouched. All writes of one commit go through the redo journal of [`durable`]. A file
//! the first commit creates is written whole under a temporary name and renamed into place
//! ([`create_atomic`]) before the journal writes into it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::storekit::replace::{create_atomic, open_no_follow, remove_leftovers};
use crate::survivalcraft::codec::chunk::ChunkPos;
use crate::survivalcraft::codec::fixed::{self, DirectoryEntry};
use crate::survivalcraft::codec::format::{TerrainFormat, DIRECTORY_BYTES, MAX_DIRECTORY_CHUNKS};
use crate::survivalcraft::store::blob::Blob;
use crate::survivalcraft::store::durable;

/// Mode of a chunk file worldfs creates (less the umask), as of its other new files.
const NEW_FILE_MODE: u32 = 0o644;

/// An opened chunk file.
pub(crate) struct FixedFile {
    format: TerrainFormat,
    /// The file's path when it is writable.
    path: Option<PathBuf>,
    blob: Option<Blob>,
    entries: Vec<DirectoryEntry>,
    by_pos: HashMap<ChunkPos, usize>,
}

impl FixedFile {
    fn from_blob(
        format: TerrainFormat,
        path: Option<PathBuf>,
        blob: Option<Blob>,
    ) -> Result<FixedFile> {
        let entries = match &blob {
            Some(b) => {
                let dir = b.head(DIRECTORY_BYTES + 8)?;
                fixed::check_head(format, &dir)?;
                fixed::parse_directory(format, dir.get(..DIRECTORY_BYTES).unwrap_or(&dir))?
            }
            None => Vec::new(),
        };
        let by_pos = entries
            .iter()
            .enumerate()
            .map(|(i, e)| (e.pos, i))
            .collect();
        Ok(FixedFile {
            format,
            path,
            blob,
            entries,
            by_pos,
        })
    }

    /// Opens a chunk file of a folder (`writable`: replays a leftover journal first). A
    /// missing file is an empty store that the first commit creates.
    pub(crate) fn open(format: TerrainFormat, path: &Path, writable: bool) -> Result<FixedFile> {
        if writable {
            // A crash while the first commit made the file leaves its temporary.
            remove_leftovers(path)?;
        }
        let file = match open_no_follow(path, writable) {
            Ok(f) => Some(f),
            Err(e) if e.errno() == libc::ENOENT => None,
            Err(e) => return Err(e),
        };
        if let Some(f) = &file {
            if writable && durable::recover(path, f)? {
                log::warn!(
                    "{}: finished an interrupted commit from its journal",
                    path.display()
                );
            } else if !writable && durable::journal_path(path).exists() {
                log::warn!(
                    "{}: an interrupted commit is pending; mount read-write to finish it",
                    path.display()
                );
            }
        }
        let path = writable.then(|| path.to_path_buf());
        Self::from_blob(format, path.clone(), file.map(Blob::File)).map_err(|e| match &path {
            Some(p) => e.context(p.display()),
            None => e,
        })
    }

    /// A read-only chunk file inside an archive.
    pub(crate) fn in_archive(format: TerrainFormat, blob: Blob) -> Result<FixedFile> {
        Self::from_blob(format, None, Some(blob))
    }

    pub(crate) fn chunks(&self) -> impl Iterator<Item = ChunkPos> + '_ {
        // Later duplicates override earlier ones, as the game's dictionary does.
        self.entries
            .iter()
            .enumerate()
            .filter(|(i, e)| self.by_pos.get(&e.pos) == Some(i))
            .map(|(_, e)| e.pos)
    }

    pub(crate) fn contains(&self, pos: ChunkPos) -> bool {
        self.by_pos.contains_key(&pos)
    }

    /// The record bytes of a chunk.
    pub(crate) fn read_raw(&self, pos: ChunkPos) -> Result<Vec<u8>> {
        let e = self
            .by_pos
            .get(&pos)
            .and_then(|&i| self.entries.get(i))
            .ok_or_else(|| Error::not_found(format!("chunk {pos} is not stored")))?;
        let blob = self
            .blob
            .as_ref()
            .ok_or_else(|| Error::not_found("no chunk file"))?;
        blob.read_at(e.offset, self.format.record_bytes())
    }

    /// Refuses (`EAGAIN`) a commit to a file another program replaced since it was opened
    /// (a save through a new file, a restore): written into the old file, the commit would
    /// vanish while reported done.
    fn still_there(&self, path: &Path) -> Result<()> {
        match &self.blob {
            Some(b) if !b.is_at(path)? => Err(Error::new(
                libc::EAGAIN,
                format!(
                    "{}: another program replaced it since worldfs opened it; nothing \
                     written, try again",
                    path.display()
                ),
            )),
            _ => Ok(()),
        }
    }

    /// Rewrites stored chunks in one crash-safe commit, holding one record in memory at a
    /// time: `edit` gets each chunk's record bytes and gives its new ones (`None`: left
    /// alone), each written to the journal at once; the journal is applied once every chunk
    /// was edited. On any error before that nothing is written. Returns how many changed.
    pub(crate) fn commit_edits(
        &mut self,
        positions: &[ChunkPos],
        mut edit: impl FnMut(ChunkPos, Vec<u8>) -> Result<Option<Vec<u8>>>,
    ) -> Result<usize> {
        let path = self
            .path
            .clone()
            .ok_or_else(|| Error::read_only("the world is read-only"))?;
        let Some(Blob::File(file)) = &self.blob else {
            return Err(Error::read_only("the chunk file is read-only"));
        };
        self.still_there(&path)?;
        let size = self.format.record_bytes();
        let mut journal = durable::JournalWriter::create(&path, file)?;
        let mut changed = 0;
        let mut edit_all = || -> Result<()> {
            for &pos in positions {
                let offset = self
                    .by_pos
                    .get(&pos)
                    .and_then(|&i| self.entries.get(i))
                    .map(|e| e.offset)
                    .ok_or_else(|| Error::not_found(format!("no chunk at {pos}")))?;
                let Some(rec) = edit(pos, self.read_raw(pos)?)? else {
                    continue;
                };
                if rec.len() != size {
                    return Err(Error::invalid(format!(
                        "chunk {pos}: record is not {size} bytes"
                    )));
                }
                journal.add(offset, &rec)?;
                changed += 1;
            }
            Ok(())
        };
        if let Err(e) = edit_all() {
            journal.discard()?;
            return Err(e.context(path.display()));
        }
        if changed == 0 {
            journal.discard()?;
            return Ok(0);
        }
        journal
            .seal()
            .and_then(|sealed| sealed.apply(file))
            .map_err(|e| e.context(path.display()))?;
        Ok(changed)
    }

    /// Writes encoded records (`pos`, record bytes) crash-safely.
    pub(crate) fn commit(&mut self, records: &[(ChunkPos, Vec<u8>)]) -> Result<()> {
        let path = self
            .path
            .clone()
            .ok_or_else(|| Error::read_only("the world is read-only"))?;
        if records.is_empty() {
            return Ok(());
        }
        if self.blob.is_none() {
            // Made whole under a temporary name and renamed into place: the game cannot load
            // a file cut short by a crash, so none must ever be under the name.
            let empty = fixed::empty_directory(self.format)?;
            let f = create_atomic(&path, NEW_FILE_MODE, |out| Ok(out.write_all(&empty)?))?;
            self.blob = Some(Blob::File(f));
        }
        let Some(Blob::File(file)) = &self.blob else {
            return Err(Error::read_only("the chunk file is read-only"));
        };
        self.still_there(&path)?;
        let size = self.format.record_bytes();
        let mut end = file.metadata()?.len();
        let mut data = Vec::new();
        let mut dir = Vec::new();
        let mut added = Vec::new();
        for (pos, rec) in records {
            if rec.len() != size {
                return Err(Error::invalid(format!(
                    "chunk {pos}: record is not {size} bytes"
                )));
            }
            if let Some(&i) = self.by_pos.get(pos) {
                let offset = self.entries.get(i).map(|e| e.offset).unwrap_or(0);
                data.push((offset, rec.clone()));
                continue;
            }
            let slot = self.entries.len() + added.len();
            if slot >= MAX_DIRECTORY_CHUNKS {
                return Err(Error::unsupported(format!(
                    "a chunk file holds at most {MAX_DIRECTORY_CHUNKS} chunks"
                )));
            }
            let offset = if self.format == TerrainFormat::Chunks16 {
                let o = end.max(DIRECTORY_BYTES as u64);
                end = o + size as u64;
                o
            } else {
                fixed::slot_offset(self.format, slot)
            };
            let taken = self
                .entries
                .iter()
                .find(|e| e.offset < offset + size as u64 && offset < e.offset + size as u64);
            if let Some(e) = taken {
                return Err(Error::corrupt(format!(
                    "the directory is damaged: the record for new chunk {pos} would overwrite the one listed for chunk {}; nothing written",
                    e.pos
                )));
            }
            data.push((offset, rec.clone()));
            dir.push((
                (slot * 12) as u64,
                fixed::encode_entry(self.format, *pos, slot, offset)?.to_vec(),
            ));
            added.push(DirectoryEntry {
                pos: *pos,
                slot,
                offset,
            });
        }
        durable::journaled_write(&path, file, data, dir).map_err(|e| e.context(path.display()))?;
        for e in added {
            self.by_pos.insert(e.pos, self.entries.len());
            self.entries.push(e);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    use crate::survivalcraft::codec::chunk::{Cell, Chunk};
    use crate::survivalcraft::codec::{decode_chunk, encode_chunk};

    const FORMAT: TerrainFormat = TerrainFormat::Chunks32h;

    /// A chunk file of `n` chunks along x, each with cell (0, 0, 0) holding block 1.
    fn file(n: i32) -> (tempfile::TempDir, PathBuf, FixedFile) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("Chunks32h.dat");
        let mut f = FixedFile::open(FORMAT, &path, true).unwrap();
        let records: Vec<(ChunkPos, Vec<u8>)> = (0..n)
            .map(|x| {
                let pos = ChunkPos::new(x, 0);
                let mut c = Chunk::empty(FORMAT);
                c.set_cell(
                    0,
                    0,
                    0,
                    Cell {
                        id: 1,
                        light: 0,
                        data: 0,
                    },
                )
                .unwrap();
                (pos, encode_chunk(&c, pos).unwrap())
            })
            .collect();
        f.commit(&records).unwrap();
        (dir, path, f)
    }

    fn with_id(pos: ChunkPos, raw: &[u8], id: u16) -> Vec<u8> {
        let mut c = decode_chunk(FORMAT, raw).unwrap();
        c.set_cell(
            0,
            0,
            0,
            Cell {
                id,
                light: 0,
                data: 0,
            },
        )
        .unwrap();
        encode_chunk(&c, pos).unwrap()
    }

    /// Each edited record goes to the journal at once (one record in memory at a time), and
    /// nothing reaches the file before every chunk was edited.
    #[test]
    fn edits_stream_through_the_journal_and_land_all_at_once() {
        let (_dir, path, mut f) = file(4);
        let before = fs::read(&path).unwrap();
        let positions: Vec<ChunkPos> = (0..4).map(|x| ChunkPos::new(x, 0)).collect();
        let mut added = 0;
        let changed = f
            .commit_edits(&positions, |pos, raw| {
                let journal = fs::metadata(durable::journal_path(&path)).unwrap().len();
                assert!(
                    journal >= added * FORMAT.record_bytes() as u64,
                    "{added} records given, the journal holds {journal} bytes"
                );
                assert_eq!(fs::read(&path).unwrap(), before, "written before the seal");
                if pos.cx == 2 {
                    return Ok(None);
                }
                added += 1;
                Ok(Some(with_id(pos, &raw, 7)))
            })
            .unwrap();
        assert_eq!(changed, 3);
        assert!(!durable::journal_path(&path).exists());
        let reopened = FixedFile::open(FORMAT, &path, false).unwrap();
        for pos in positions {
            let c = decode_chunk(FORMAT, &reopened.read_raw(pos).unwrap()).unwrap();
            let id = c.cell(0, 0, 0).unwrap().id;
            assert_eq!(id, if pos.cx == 2 { 1 } else { 7 }, "chunk {pos}");
        }
    }

    /// The first commit makes the chunk file under a temporary name and renames it into
    /// place, so a crash never leaves a file cut short under the name: the folder's events
    /// show the name appear only by a rename (it was created and written in place), after
    /// every write of the temporary, and no temporary is left.
    #[test]
    fn a_new_chunk_file_appears_whole() {
        use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("Chunks32h.dat");
        let mut f = FixedFile::open(FORMAT, &path, true).unwrap();
        let watch = Inotify::init(InitFlags::IN_NONBLOCK).unwrap();
        watch
            .add_watch(
                dir.path(),
                AddWatchFlags::IN_CREATE
                    | AddWatchFlags::IN_MODIFY
                    | AddWatchFlags::IN_CLOSE_WRITE
                    | AddWatchFlags::IN_MOVED_TO,
            )
            .unwrap();
        let pos = ChunkPos::new(3, -2);
        let record = encode_chunk(&Chunk::empty(FORMAT), pos).unwrap();
        f.commit(&[(pos, record.clone())]).unwrap();
        let events = watch.read_events().unwrap();
        let named = |e: &nix::sys::inotify::InotifyEvent| {
            e.name.as_deref() == Some(std::ffi::OsStr::new("Chunks32h.dat"))
        };
        let first = events
            .iter()
            .position(named)
            .expect("no event for the file");
        assert_eq!(
            events[first].mask,
            AddWatchFlags::IN_MOVED_TO,
            "the file appeared other than by a rename: {events:?}"
        );
        let temporary = |e: &nix::sys::inotify::InotifyEvent| {
            e.name
                .as_ref()
                .is_some_and(|n| n.to_string_lossy().starts_with(".worldfs-"))
        };
        assert!(
            events[..first].iter().any(temporary) && !events[first..].iter().any(temporary),
            "the temporary was not made before the rename, or written after it: {events:?}"
        );
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["Chunks32h.dat"]);
        let reopened = FixedFile::open(FORMAT, &path, false).unwrap();
        assert_eq!(reopened.read_raw(pos).unwrap(), record);
    }

    #[test]
    fn an_edit_failing_half_way_writes_nothing() {
        let (_dir, path, mut f) = file(3);
        let before = fs::read(&path).unwrap();
        let positions: Vec<ChunkPos> = (0..3).map(|x| ChunkPos::new(x, 0)).collect();
        let result = f.commit_edits(&positions, |pos, raw| {
            if pos.cx == 2 {
                return Err(Error::invalid("no"));
            }
            Ok(Some(with_id(pos, &raw, 7)))
        });
        assert!(result.is_err());
        assert_eq!(fs::read(&path).unwrap(), before);
        assert!(!durable::journal_path(&path).exists());
        // An unknown chunk fails the same way.
        assert!(f
            .commit_edits(&[ChunkPos::new(0, 0), ChunkPos::new(9, 9)], |pos, raw| Ok(
                Some(with_id(pos, &raw, 7))
            ))
            .is_err());
        assert_eq!(fs::read(&path).unwrap(), before);
    }
}
