//! The `Regions/` folder of 2.3+ worlds as a store.
//!
//! Opening lists the folder and reads each region's 2 KB directory, nothing more. It also
//! cleans up after an interrupted save the way the game does (spec §6.1): `Regions/tmp` is
//! deleted, `X.new` becomes `X` if `X` is missing and is deleted otherwise. A commit builds
//! each touched region anew in memory with [`region::patch_region`] (untouched payloads keep
//! their bytes), writes it to `Region X,Z.dat.new`, fsyncs and renames it over the region,
//! so a crash leaves every region, and so every chunk, old or new. A commit over several
//! regions first writes all their new bytes to one sealed replacement journal
//! (`Regions.worldfs-journal`, see [`durable::ReplaceJournal`]), which the next read-write
//! open finishes after a crash, unless the game saved one of those regions since: then
//! replaying would undo what the game saved, so the journal is dropped with an error in the
//! log and the world left as the game left it.
//!
//! Damage stays local: a slot with an impossible directory entry is a chunk that cannot be
//! read, a file that is not a region at all hides its chunks (with a warning), and neither
//! is ever rewritten: a commit to such a region is refused.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::storekit::replace::{link_refused, open_no_follow, remove_leftovers, write_atomic};
use crate::survivalcraft::codec::chunk::ChunkPos;
use crate::survivalcraft::codec::region::{self, RegionEntry, HEADER_BYTES, MAX_REGION_BYTES};
use crate::survivalcraft::store::blob::{Archive, Blob};
use crate::survivalcraft::store::durable;

/// Mode of a region file worldfs creates (less the umask).
const NEW_FILE_MODE: u32 = 0o644;

/// A new payload for a slot of a region.
type SlotPayload = (usize, Vec<u8>);

/// The key of a region in the replacement journal.
fn region_key((x, z): (i32, i32)) -> u64 {
    (u64::from(x as u32) << 32) | u64::from(z as u32)
}

/// The region a journal key names.
fn key_region(key: u64) -> (i32, i32) {
    ((key >> 32) as u32 as i32, key as u32 as i32)
}

/// The region file a journal key names in the folder `dir`.
fn region_path(dir: &Path, key: u64) -> PathBuf {
    dir.join(region::region_file_name(key_region(key)))
}

/// What the region file a journal key names holds now.
fn region_state(dir: &Path, key: u64) -> Result<durable::FileState> {
    durable::file_state(&region_path(dir, key))
}

/// The replacement journal of the region folder `dir`.
fn journal_path(dir: &Path) -> PathBuf {
    durable::journal_path(dir)
}

struct Region {
    blob: Blob,
    entries: Vec<RegionEntry>,
    /// Slots with impossible directory entries, and why.
    bad: Vec<region::BadSlot>,
}

/// An opened set of region files.
pub(crate) struct RegionStore {
    /// The `Regions` folder when writable.
    dir: Option<PathBuf>,
    regions: BTreeMap<(i32, i32), Region>,
    /// Region files that do not parse, and why: never rewritten.
    damaged: BTreeMap<(i32, i32), String>,
}

fn load(blob: Blob) -> Result<Region> {
    let (entries, bad) = region::parse_header_lenient(&blob.head(HEADER_BYTES)?)?;
    Ok(Region { blob, entries, bad })
}

/// Loads a region into `regions`, or notes it in `damaged` when it does not parse.
fn add(
    regions: &mut BTreeMap<(i32, i32), Region>,
    damaged: &mut BTreeMap<(i32, i32), String>,
    rc: (i32, i32),
    name: &str,
    blob: Result<Blob>,
) {
    match blob.and_then(load) {
        Ok(r) => {
            regions.insert(rc, r);
        }
        Err(e) => {
            log::warn!("{name}: {e}; its chunks are not shown and it is never rewritten");
            damaged.insert(rc, e.to_string());
        }
    }
}

impl RegionStore {
    /// Opens `dir` (a `Regions` folder, possibly missing).
    ///
    /// A `Regions` that is a symbolic link is refused: worldfs neither reads nor writes
    /// through links in a world (commits would write region files wherever it points).
    pub(crate) fn open(dir: &Path, writable: bool) -> Result<RegionStore> {
        if fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(link_refused(dir));
        }
        let mut regions = BTreeMap::new();
        let mut damaged = BTreeMap::new();
        let journal = journal_path(dir);
        if writable {
            let replayed = durable::replay_replacements(
                &journal,
                |key| region_state(dir, key),
                |key, bytes| {
                    fs::create_dir_all(dir)?;
                    write_atomic(&region_path(dir, key), &bytes, NEW_FILE_MODE)
                },
            )?;
            match replayed {
                durable::Replay::Applied => log::warn!(
                    "{}: finished an interrupted commit from its journal",
                    dir.display()
                ),
                durable::Replay::Stale(key) => log::error!(
                    "{}: an interrupted commit was not finished: {} changed since (the game \
                     saved the world after the crash); the world is left as it is",
                    dir.display(),
                    region::region_file_name(key_region(key))
                ),
                durable::Replay::Nothing | durable::Replay::Torn => {}
            }
        } else if journal.exists() {
            log::warn!(
                "{}: an interrupted commit is pending; mount read-write to finish it",
                dir.display()
            );
        }
        let listing = match fs::read_dir(dir) {
            Ok(l) => Some(l),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(Error::from(e).context(dir.display())),
        };
        let mut names = Vec::new();
        for entry in listing.into_iter().flatten() {
            names.push(entry?.file_name().to_string_lossy().into_owned());
        }
        if writable {
            for name in names.clone() {
                let p = dir.join(&name);
                if name == "tmp" {
                    fs::remove_file(&p)?;
                } else if let Some(base) = name
                    .strip_suffix(".new")
                    .filter(|b| region::region_coords(b).is_some())
                {
                    if dir.join(base).exists() {
                        fs::remove_file(&p)?;
                    } else {
                        fs::rename(&p, dir.join(base))?;
                        names.push(base.to_string());
                    }
                    durable::sync_parent(&p)?;
                }
            }
        }
        for name in names {
            if let Some(rc) = region::region_coords(&name) {
                let p = dir.join(&name);
                if writable {
                    remove_leftovers(&p)?;
                }
                let blob = open_no_follow(&p, false).map(Blob::File);
                add(
                    &mut regions,
                    &mut damaged,
                    rc,
                    &p.display().to_string(),
                    blob,
                );
            }
        }
        Ok(RegionStore {
            dir: writable.then(|| dir.to_path_buf()),
            regions,
            damaged,
        })
    }

    /// Read-only regions of an archive: entries `Regions/Region X,Z.dat` or flat
    /// `Region X,Z.dat` under `prefix`.
    pub(crate) fn in_archive(
        archive: &Archive,
        names: &[String],
        prefix: &str,
    ) -> Result<RegionStore> {
        let mut regions = BTreeMap::new();
        let mut damaged = BTreeMap::new();
        for name in names {
            let Some(rel) = name.strip_prefix(prefix) else {
                continue;
            };
            let base = rel.strip_prefix("Regions/").unwrap_or(rel);
            if let Some(rc) = region::region_coords(base) {
                let blob = Blob::entry(archive, name).and_then(|b| {
                    if b.len()? > MAX_REGION_BYTES as u64 {
                        return Err(Error::corrupt(format!(
                            "larger than the largest region ({MAX_REGION_BYTES} bytes)"
                        )));
                    }
                    Ok(b)
                });
                add(&mut regions, &mut damaged, rc, name, blob);
            }
        }
        Ok(RegionStore {
            dir: None,
            regions,
            damaged,
        })
    }

    pub(crate) fn chunks(&self) -> impl Iterator<Item = ChunkPos> + '_ {
        self.regions.iter().flat_map(|(rc, r)| {
            r.entries
                .iter()
                .map(|e| e.slot)
                .chain(r.bad.iter().map(|(slot, _)| *slot))
                .map(move |slot| region::chunk_at(*rc, slot))
        })
    }

    fn entry(&self, pos: ChunkPos) -> Option<(&Region, &RegionEntry)> {
        let (rc, slot) = region::locate(pos);
        let r = self.regions.get(&rc)?;
        Some((r, r.entries.iter().find(|e| e.slot == slot)?))
    }

    /// Why the stored chunk at `pos` cannot be read, if its directory entry is impossible.
    fn bad_slot(&self, pos: ChunkPos) -> Option<&str> {
        let (rc, slot) = region::locate(pos);
        let r = self.regions.get(&rc)?;
        r.bad
            .iter()
            .find(|(s, _)| *s == slot)
            .map(|(_, why)| why.as_str())
    }

    pub(crate) fn contains(&self, pos: ChunkPos) -> bool {
        self.entry(pos).is_some() || self.bad_slot(pos).is_some()
    }

    /// The compressed payload of a chunk.
    pub(crate) fn read_raw(&self, pos: ChunkPos) -> Result<Vec<u8>> {
        if let Some(why) = self.bad_slot(pos) {
            return Err(Error::corrupt(why.to_string()));
        }
        let (r, e) = self
            .entry(pos)
            .ok_or_else(|| Error::not_found(format!("chunk {pos} is not stored")))?;
        let rec = r.blob.read_at(e.offset as u64, 4 + e.size)?;
        if rec.get(..4) != Some(b"CHK1".as_slice()) {
            return Err(Error::corrupt(format!("chunk {pos}: no CHK1 magic")));
        }
        Ok(rec[4..].to_vec())
    }

    /// Writes payloads (`pos`, payload) crash-safely: one region replaced alone, several
    /// through the replacement journal (all or nothing).
    pub(crate) fn commit(&mut self, payloads: &[(ChunkPos, Vec<u8>)]) -> Result<()> {
        let dir = self
            .dir
            .clone()
            .ok_or_else(|| Error::read_only("the world is read-only"))?;
        let mut by_region: BTreeMap<(i32, i32), Vec<SlotPayload>> = BTreeMap::new();
        for (pos, p) in payloads {
            let (rc, slot) = region::locate(*pos);
            by_region.entry(rc).or_default().push((slot, p.clone()));
        }
        if !by_region.is_empty() {
            fs::create_dir_all(&dir)?;
        }
        for rc in by_region.keys() {
            if let Some(why) = self.damaged.get(rc) {
                return Err(Error::corrupt(format!(
                    "{} is damaged ({why}); it is not rewritten",
                    region::region_file_name(*rc)
                )));
            }
        }
        // A commit whose replacements failed half-way (a full disk) is finished first.
        let leftover = durable::replay_replacements(
            &journal_path(&dir),
            |key| region_state(&dir, key),
            |key, bytes| self.replace(&dir, key_region(key), &bytes),
        )?;
        if let durable::Replay::Stale(key) = leftover {
            log::error!(
                "{}: a commit that failed half-way was not finished: {} changed since",
                dir.display(),
                region::region_file_name(key_region(key))
            );
        }
        if by_region.len() > 1 {
            return self.commit_regions(&dir, by_region);
        }
        for (rc, changes) in by_region {
            let (bytes, _) = self.patched(rc, &changes)?;
            self.replace(&dir, rc, &bytes)?;
        }
        Ok(())
    }

    /// The bytes of region `rc` with `changes` applied, and what the region holds now.
    /// Refused (`EAGAIN`) when another program replaced or created the region file since it
    /// was opened: writing what was read before would undo its save.
    fn patched(
        &self,
        rc: (i32, i32),
        changes: &[SlotPayload],
    ) -> Result<(Vec<u8>, durable::FileState)> {
        let path = self
            .dir
            .as_ref()
            .map(|d| d.join(region::region_file_name(rc)));
        let current = match (self.regions.get(&rc), &path) {
            (Some(r), Some(p)) => r.blob.is_at(p)?,
            (None, Some(p)) => fs::symlink_metadata(p).is_err(),
            (_, None) => true,
        };
        if !current {
            return Err(Error::new(
                libc::EAGAIN,
                format!(
                    "{}: another program saved it since worldfs read it; nothing written, \
                     try again",
                    region::region_file_name(rc)
                ),
            ));
        }
        let old = match self.regions.get(&rc) {
            Some(r) => Some(r.blob.read_all(MAX_REGION_BYTES as u64)?),
            None => None,
        };
        let new = region::patch_region(old.as_deref(), changes)?;
        Ok((new, durable::state_of(old.as_deref())))
    }

    /// Replaces region `rc` by `bytes` (crash-safely) and reads its directory.
    fn replace(&mut self, dir: &Path, rc: (i32, i32), bytes: &[u8]) -> Result<()> {
        let target = dir.join(region::region_file_name(rc));
        write_atomic(&target, bytes, NEW_FILE_MODE)?;
        let file = open_no_follow(&target, false)?;
        self.regions.insert(rc, load(Blob::File(file))?);
        Ok(())
    }

    /// Commits changes to several regions all or nothing, through the replacement journal
    /// (see the module doc).
    fn commit_regions(
        &mut self,
        dir: &Path,
        by_region: BTreeMap<(i32, i32), Vec<SlotPayload>>,
    ) -> Result<()> {
        let path = journal_path(dir);
        let mut journal = durable::ReplaceJournal::create(&path)?;
        for (rc, changes) in &by_region {
            let added = self
                .patched(*rc, changes)
                .and_then(|(bytes, old)| journal.add(region_key(*rc), old, &bytes));
            if let Err(e) = added {
                journal.discard()?;
                return Err(e);
            }
        }
        journal.seal()?;
        match durable::replay_replacements(
            &path,
            |key| region_state(dir, key),
            |key, bytes| self.replace(dir, key_region(key), &bytes),
        )? {
            durable::Replay::Applied => Ok(()),
            durable::Replay::Stale(key) => Err(Error::new(
                libc::EAGAIN,
                format!(
                    "{} changed while the commit was made (another program writes the \
                     world); nothing replaced",
                    region::region_file_name(key_region(key))
                ),
            )),
            durable::Replay::Nothing | durable::Replay::Torn => Err(Error::corrupt(format!(
                "{}: the sealed journal did not read back; nothing replaced",
                path.display()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::survivalcraft::codec::chunk::{Cell, Chunk};
    use crate::survivalcraft::codec::format::TerrainFormat;
    use crate::survivalcraft::codec::{decode_chunk, encode_chunk};

    /// The payload of a chunk whose cell (0, 0, 0) holds block `id`.
    fn payload(pos: ChunkPos, id: u16) -> Vec<u8> {
        let mut c = Chunk::empty(TerrainFormat::Regions);
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

    fn id_at(store: &RegionStore, pos: ChunkPos) -> u16 {
        let c = decode_chunk(TerrainFormat::Regions, &store.read_raw(pos).unwrap()).unwrap();
        c.cell(0, 0, 0).unwrap().id
    }

    /// Two chunks in two regions, each holding block 1.
    fn two_regions() -> (tempfile::TempDir, PathBuf, [ChunkPos; 2]) {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("Regions");
        let chunks = [ChunkPos::new(1, 1), ChunkPos::new(40, -3)];
        let mut store = RegionStore::open(&dir, true).unwrap();
        store.commit(&chunks.map(|p| (p, payload(p, 1)))).unwrap();
        (root, dir, chunks)
    }

    #[test]
    fn a_commit_over_several_regions_replaces_them_all_and_leaves_no_journal() {
        let (_root, dir, chunks) = two_regions();
        let store = RegionStore::open(&dir, true).unwrap();
        assert_eq!(store.regions.len(), 2);
        for p in chunks {
            assert_eq!(id_at(&store, p), 1);
        }
        assert!(!journal_path(&dir).exists());
    }

    #[test]
    fn a_sealed_journal_left_by_a_crash_is_finished_and_a_torn_one_changes_nothing() {
        let (_root, dir, chunks) = two_regions();
        let store = RegionStore::open(&dir, true).unwrap();
        let before: Vec<Vec<u8>> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| fs::read(e.unwrap().path()).unwrap())
            .collect();
        // A crash before the seal: the journal is torn, nothing changes.
        let mut j = durable::ReplaceJournal::create(&journal_path(&dir)).unwrap();
        for p in chunks {
            let (rc, slot) = region::locate(p);
            let (bytes, old) = store.patched(rc, &[(slot, payload(p, 2))]).unwrap();
            j.add(region_key(rc), old, &bytes).unwrap();
        }
        drop(j);
        let reopened = RegionStore::open(&dir, true).unwrap();
        for p in chunks {
            assert_eq!(id_at(&reopened, p), 1, "a torn journal was applied");
        }
        assert!(!journal_path(&dir).exists());
        let after: Vec<Vec<u8>> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| fs::read(e.unwrap().path()).unwrap())
            .collect();
        assert_eq!(before, after);
        // A crash after the seal, before any region was replaced: the next open finishes.
        let mut j = durable::ReplaceJournal::create(&journal_path(&dir)).unwrap();
        for p in chunks {
            let (rc, slot) = region::locate(p);
            let (bytes, old) = store.patched(rc, &[(slot, payload(p, 2))]).unwrap();
            j.add(region_key(rc), old, &bytes).unwrap();
        }
        j.seal().unwrap();
        let read_only = RegionStore::open(&dir, false).unwrap();
        assert_eq!(
            id_at(&read_only, chunks[0]),
            1,
            "a read-only open writes nothing"
        );
        let reopened = RegionStore::open(&dir, true).unwrap();
        for p in chunks {
            assert_eq!(
                id_at(&reopened, p),
                2,
                "the sealed journal was not finished"
            );
        }
        assert!(!journal_path(&dir).exists());
    }

    /// A sealed journal left by a crash, then the game saved the world before the next
    /// read-write open: the journal is stale and replaying it would throw away what the
    /// game saved (and mix its regions with ours). It is dropped and nothing replaced.
    #[test]
    fn a_sealed_journal_older_than_the_regions_is_not_replayed() {
        let (_root, dir, chunks) = two_regions();
        let store = RegionStore::open(&dir, true).unwrap();
        let mut j = durable::ReplaceJournal::create(&journal_path(&dir)).unwrap();
        for p in chunks {
            let (rc, slot) = region::locate(p);
            let (bytes, old) = store.patched(rc, &[(slot, payload(p, 2))]).unwrap();
            j.add(region_key(rc), old, &bytes).unwrap();
        }
        j.seal().unwrap();
        // The game saves the second region (its chunk now holds block 3).
        let (rc, slot) = region::locate(chunks[1]);
        let (saved, _) = store.patched(rc, &[(slot, payload(chunks[1], 3))]).unwrap();
        write_atomic(
            &dir.join(region::region_file_name(rc)),
            &saved,
            NEW_FILE_MODE,
        )
        .unwrap();
        let before: Vec<Vec<u8>> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| fs::read(e.unwrap().path()).unwrap())
            .collect();
        let reopened = RegionStore::open(&dir, true).unwrap();
        assert_eq!(
            id_at(&reopened, chunks[0]),
            1,
            "half of a stale journal replayed"
        );
        assert_eq!(
            id_at(&reopened, chunks[1]),
            3,
            "what the game saved was lost"
        );
        let after: Vec<Vec<u8>> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| fs::read(e.unwrap().path()).unwrap())
            .collect();
        assert_eq!(before, after);
    }

    #[test]
    fn region_keys_round_trip() {
        for rc in [(0, 0), (-1, 2), (i32::MIN, i32::MAX), (7, -7)] {
            assert_eq!(key_region(region_key(rc)), rc);
        }
    }
}
