//! The `Regions/` folder of 2.3+ worlds as a store.
//!
//! Opening lists the folder and reads each region's 2 KB directory, nothing more. It also
//! cleans up after an interrupted save the way the game does (spec §6.1): `Regions/tmp` is
//! deleted, `X.new` becomes `X` if `X` is missing and is deleted otherwise. A commit builds
//! each touched region anew in memory with [`region::patch_region`] (untouched payloads keep
//! their bytes), writes it to `Region X,Z.dat.new`, fsyncs and renames it over the region,
//! so a crash leaves every region, and so every chunk, old or new.
//!
//! Damage stays local: a slot with an impossible directory entry is a chunk that cannot be
//! read, a file that is not a region at all hides its chunks (with a warning), and neither
//! is ever rewritten: a commit to such a region is refused.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::survivalcraft::codec::chunk::ChunkPos;
use crate::survivalcraft::codec::region::{self, RegionEntry, HEADER_BYTES, MAX_REGION_BYTES};
use crate::survivalcraft::store::blob::{Archive, Blob};
use crate::survivalcraft::store::durable;
use crate::vfs::replace::{link_refused, open_no_follow, remove_leftovers, write_atomic};

/// Mode of a region file worldfs creates (less the umask).
const NEW_FILE_MODE: u32 = 0o644;

/// A new payload for a slot of a region.
type SlotPayload = (usize, Vec<u8>);

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

    /// Writes payloads (`pos`, payload) crash-safely, one region replacement per region.
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
        for (rc, changes) in by_region {
            let old = match self.regions.get(&rc) {
                Some(r) => Some(r.blob.read_all(MAX_REGION_BYTES as u64)?),
                None => None,
            };
            let bytes = region::patch_region(old.as_deref(), &changes)?;
            let name = region::region_file_name(rc);
            let target = dir.join(&name);
            write_atomic(&target, &bytes, NEW_FILE_MODE)?;
            let file = open_no_follow(&target, false)?;
            self.regions.insert(rc, load(Blob::File(file))?);
        }
        Ok(())
    }
}
