//! The TVDA store: one disk file, opened by an index scan, read entry by entry on demand,
//! and changed crash-safely.
//!
//! Opening reads the header and every entry header (no payloads). A commit of one change
//! works like the game's autosave (`DiskSkimmer`): the new entry is appended at EOF and
//! fsynced, then every older occurrence gets its discard bit, then the header's disk CRC,
//! dirty flag and root mtime follow. Until the append is durable the disk reads as before
//! (a torn tail is ignored by the scan); once it is, the last occurrence wins and the disk
//! reads as after. A commit of several changes, and compaction, rewrite the whole disk the
//! way a full save does (root first, no dead entries) into a temporary file renamed over the
//! original. Nothing is written unless something changed, so an unmodified disk stays
//! byte-identical.
//!
//! A damaged disk is never written. The scan tells a torn last append (cut off by the next
//! append) from damage inside the disk (bytes that are not entries with sound entries after
//! them); a root listing naming an entry the disk does not hold at all is damage too (the
//! game only ever sets discard bits, so every ID it listed keeps a record). Both are known at
//! open. Entry CRCs are verified once, before the first commit, by reading every entry. On
//! any damage a commit or compaction fails with `EROFS` and says why, leaving every byte.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::bytes::{put_u48, read_vec, ReadAt};
use crate::error::{Error, Result};
use crate::storekit::replace::write_atomic_with;
use crate::tvda::codec::tvda::{
    disk_crc, encode_entry, entry_crc, live_index, scan, Content, DiskKind, EntryHeader, EntryKind,
    Header, Record, DISCARD_BIT, DISK_CRC_OFFSET, ENTRY_HEADER_LEN, HEADER_LEN, ROOT_ID,
    ROOT_MTIME_OFFSET,
};
use crate::tvda::store::{open_disk, Stamp, NEW_DISK_MODE};

/// A live entry as the index knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryInfo {
    /// Entry ID.
    pub id: i64,
    /// Parent ID as stored.
    pub parent: i64,
    /// File, directory or symlink.
    pub kind: EntryKind,
    /// Creation time, Unix seconds.
    pub ctime: u64,
    /// Modification time, Unix seconds.
    pub mtime: u64,
    /// Stored entry CRC.
    pub crc: u32,
    /// Offset of the entry in the disk file.
    pub offset: u64,
    /// Payload size: file bytes, or 8 per directory child, or 8 for a symlink.
    pub size: u64,
}

/// One change of a commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Add or replace the file entry `id` with these bytes.
    Put {
        /// Entry ID (not 0, the root).
        id: i64,
        /// The file's bytes as stored.
        data: Vec<u8>,
    },
    /// Remove entry `id`.
    Remove {
        /// Entry ID (not 0, the root).
        id: i64,
    },
}

/// What `Disk::check` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckReport {
    /// Live entries whose stored CRC does not match their content.
    pub bad_entry_crcs: Vec<i64>,
    /// Damage other than live entries' CRCs: unreadable stretches, a root listing naming
    /// entries the disk does not hold, discarded or shadowed entries failing their CRC.
    pub damage: Vec<String>,
    /// A torn last append: its offset and length.
    pub torn_tail: Option<(u64, u64)>,
    /// Whether the header's disk CRC matches the live entries.
    pub disk_crc_ok: bool,
    /// Whether the root listing differs from the live entries (normal after quicksaves).
    pub root_listing_stale: bool,
    /// Bytes held by discarded or shadowed entries and an ignored tail.
    pub dead_bytes: u64,
}

/// How many removed IDs [`Disk::interrupted_commit`] tries, newest first.
const REMOVALS_TRIED: usize = 256;

/// An open TVDA disk.
#[derive(Debug)]
pub struct Disk {
    path: PathBuf,
    file: File,
    writable: bool,
    header: Header,
    records: Vec<Record>,
    live: BTreeMap<i64, usize>,
    end: u64,
    stamp: Stamp,
    /// Damage found by the scan and in the root listing.
    damage: Vec<String>,
    /// Whether every entry's CRC is known to match (checked before the first commit).
    crcs_verified: bool,
}

impl Disk {
    /// Opens a disk: the header and an index scan of every entry header. A writable disk is
    /// never opened through a link, and temporary files of an interrupted rewrite are removed.
    pub fn open(path: &Path, writable: bool) -> Result<Disk> {
        let (file, stamp) = open_disk(path, writable, true)?;
        let found = scan(&file, stamp.len).map_err(|e| e.context(path.display()))?;
        if !found.header.marker_ok() {
            log::warn!("{}: byte 47 is not the 0xFE marker", path.display());
        }
        let damage = found
            .damage
            .iter()
            .map(|d| {
                format!(
                    "{} bytes at offset {} are not an entry ({})",
                    d.len, d.offset, d.reason
                )
            })
            .collect();
        let mut disk = Disk {
            path: path.to_path_buf(),
            live: live_index(&found.records),
            file,
            writable,
            header: found.header,
            records: found.records,
            end: found.end,
            stamp,
            damage,
            crcs_verified: false,
        };
        let listing = disk.listing_damage()?;
        disk.damage.extend(listing);
        Ok(disk)
    }

    /// Finishes a single-change commit of worldfs that a crash cut between its entry and
    /// its header ([`Disk::interrupted_commit`]): writes the disk CRC it left stale. For the
    /// mount's first open only, while no game writes the disk (a game's own autosave passes
    /// through the same state); nothing is done on a disk open read-only or damaged, or
    /// changed since it was read. Returns whether it wrote.
    pub fn finish_interrupted(&mut self) -> Result<bool> {
        if !self.writable || !self.damage.is_empty() || !self.interrupted_commit() {
            return Ok(false);
        }
        if self.changed_on_disk()? {
            return Ok(false);
        }
        self.finish_interrupted_commit()
            .map_err(|e| e.context(self.path.display()))?;
        Ok(true)
    }

    /// Whether the disk is a single-change commit cut short between its entry and its
    /// header: the stored disk CRC is stale for the live entries, but it is the CRC of the
    /// disk as it was before one change — the last record appended (a put), or the
    /// discarding of an ID that no longer has a live record (a removal). A game quicksave
    /// leaves the CRC stale in other ways (it hashes its own in-memory tree), so those
    /// disks are left as they are.
    fn interrupted_commit(&self) -> bool {
        let stored = self.header.disk_crc();
        if self.live_disk_crc() == stored {
            return false;
        }
        let live: BTreeMap<i64, u32> = self
            .live
            .iter()
            .filter_map(|(&id, &i)| Some((id, self.records.get(i)?.header.crc)))
            .collect();
        // The CRC of the live state with `id`'s CRC made the newest of its records before
        // record `before`.
        let undone = |id: i64, before: usize| {
            let newest = self
                .records
                .get(..before)
                .and_then(|rs| rs.iter().rev().find(|r| r.header.id == id))
                .map(|r| r.header.crc);
            let mut state = live.clone();
            match newest {
                Some(crc) => state.insert(id, crc),
                None => state.remove(&id),
            };
            disk_crc(state.into_values())
        };
        let put = self
            .records
            .len()
            .checked_sub(1)
            .and_then(|i| Some((i, self.records.get(i)?.header.id)))
            .is_some_and(|(i, id)| live.contains_key(&id) && undone(id, i) == stored);
        // A removal discards every record of its ID; the newest removed IDs are tried
        // first, and only so many that the test stays cheap on a disk of any size.
        let mut removed = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for r in self.records.iter().rev() {
            if !live.contains_key(&r.header.id) && seen.insert(r.header.id) {
                removed.push(r.header.id);
            }
        }
        put || removed
            .into_iter()
            .take(REMOVALS_TRIED)
            .any(|id| undone(id, self.records.len()) == stored)
    }

    /// Writes what an interrupted single-change commit did not reach: the header's disk
    /// CRC and a world's dirty flag, as [`Disk::append`] would have.
    fn finish_interrupted_commit(&mut self) -> Result<()> {
        if self.header.kind() == DiskKind::World {
            self.header.set_save_mode(self.header.save_mode() | 1);
        }
        let crc = self.live_disk_crc();
        self.header.set_disk_crc(crc);
        self.write_header_fields()?;
        log::warn!(
            "{}: finished a commit that was interrupted (a crash between an entry and the header): the disk CRC is written",
            self.path.display()
        );
        Ok(())
    }

    /// Writes the header's disk CRC and attribute bytes (offsets 42 to 49) in place and
    /// syncs.
    fn write_header_fields(&mut self) -> Result<()> {
        let fields = self
            .header
            .bytes()
            .get(DISK_CRC_OFFSET as usize..50)
            .ok_or_else(|| Error::corrupt("header too short"))?;
        self.file.write_all_at(fields, DISK_CRC_OFFSET)?;
        self.file.sync_data()?;
        self.stamp = Stamp::of(&self.file)?;
        Ok(())
    }

    /// Damage the root listing shows: no live root, or listed IDs that have no record.
    fn listing_damage(&self) -> Result<Vec<String>> {
        let listed = match self.entry(ROOT_ID).map(|e| e.kind) {
            Some(EntryKind::Directory) => match self.read_content(ROOT_ID)? {
                Content::Directory(ids) => ids,
                _ => Vec::new(),
            },
            _ => return Ok(vec!["the disk has no live root directory (entry 0)".into()]),
        };
        let held: std::collections::HashSet<i64> =
            self.records.iter().map(|r| r.header.id).collect();
        let missing: Vec<i64> = listed.into_iter().filter(|id| !held.contains(id)).collect();
        Ok(match missing.as_slice() {
            [] => Vec::new(),
            [id] => vec![format!(
                "the root lists entry {id}, which the disk does not hold"
            )],
            [id, ..] => vec![format!(
                "the root lists {} entries the disk does not hold (first: {id})",
                missing.len()
            )],
        })
    }

    /// What makes the disk unsafe to write, as found so far (empty on a sound disk): the
    /// scan's and the root listing's findings, and after a commit was tried, bad CRCs.
    pub fn damage(&self) -> &[String] {
        &self.damage
    }

    /// A torn last append (offset, length): bytes the next commit cuts off.
    pub fn torn_tail(&self) -> Option<(u64, u64)> {
        (self.stamp.len > self.end && self.damage.is_empty())
            .then(|| (self.end, self.stamp.len - self.end))
    }

    /// Fails with `EROFS` and the reason when the disk is damaged; the first call reads
    /// every entry to verify its CRC.
    fn refuse_if_damaged(&mut self) -> Result<()> {
        if !self.crcs_verified && self.damage.is_empty() {
            let report = self.check()?;
            self.damage.extend(report.damage);
            if let [id, ..] = report.bad_entry_crcs.as_slice() {
                self.damage.push(format!(
                    "{} entries fail their CRC (first: {id})",
                    report.bad_entry_crcs.len()
                ));
            }
            self.crcs_verified = true;
        }
        match self.damage.first() {
            None => Ok(()),
            Some(why) => Err(Error::read_only(format!(
                "{} is damaged ({why}); it is left as it is: run `worldfs check` and repair it from a backup",
                self.path.display()
            ))),
        }
    }

    /// Writes a new, clean disk at `path` (root first, then `entries` in order) and opens it.
    pub fn create(
        path: &Path,
        header: Header,
        entries: &[(i64, Content)],
        now: u64,
    ) -> Result<Disk> {
        let mut parts = Vec::with_capacity(entries.len());
        for (id, content) in entries {
            if *id == ROOT_ID {
                return Err(Error::invalid("entry 0 is the root directory"));
            }
            parts.push((*id, encode_entry(*id, ROOT_ID, now, now, content)?));
        }
        let parts: Vec<Part> = parts
            .into_iter()
            .map(|(id, bytes)| Part::New(id, bytes))
            .collect();
        write_clean(path, header, (now, now), &parts, None)?;
        Disk::open(path, true)
    }

    /// The disk file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The header as last read or written.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Every live entry, root included, in ascending ID order.
    pub fn entries(&self) -> impl Iterator<Item = EntryInfo> + '_ {
        self.live.values().filter_map(|&i| self.info(i))
    }

    /// Number of live entries, root included.
    pub fn len(&self) -> usize {
        self.live.len()
    }

    /// Whether the disk has no live entry at all.
    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }

    /// The live entry `id`.
    pub fn entry(&self, id: i64) -> Option<EntryInfo> {
        self.live.get(&id).and_then(|&i| self.info(i))
    }

    fn info(&self, i: usize) -> Option<EntryInfo> {
        let r = self.records.get(i)?;
        Some(EntryInfo {
            id: r.header.id,
            parent: r.header.parent,
            kind: r.kind,
            ctime: r.header.ctime,
            mtime: r.header.mtime,
            crc: r.header.crc,
            offset: r.offset,
            size: r.payload_len(),
        })
    }

    fn record(&self, id: i64) -> Result<Record> {
        self.live
            .get(&id)
            .and_then(|&i| self.records.get(i))
            .copied()
            .ok_or_else(|| Error::not_found(format!("no entry {id}")))
    }

    /// The bytes of file entry `id`, as stored.
    pub fn read(&self, id: i64) -> Result<Vec<u8>> {
        let r = self.record(id)?;
        if r.kind != EntryKind::File {
            return Err(Error::invalid(format!("entry {id} is not a file")));
        }
        read_vec(&self.file, r.payload_offset(), r.payload_len())
    }

    /// The decoded content of entry `id`, whatever its kind.
    pub fn read_content(&self, id: i64) -> Result<Content> {
        let r = self.record(id)?;
        let body = read_vec(&self.file, r.offset + ENTRY_HEADER_LEN, r.content_len)?;
        Content::decode(r.kind, &body)
    }

    /// Bytes of the file not holding live entries (discarded, shadowed, ignored tail).
    pub fn dead_bytes(&self) -> u64 {
        let live: u64 = self
            .live
            .values()
            .filter_map(|&i| self.records.get(i))
            .map(|r| r.end() - r.offset)
            .sum();
        self.stamp.len.saturating_sub(HEADER_LEN as u64 + live)
    }

    /// Verifies every entry's CRC (live and dead), the disk CRC and the root listing.
    pub fn check(&self) -> Result<CheckReport> {
        let mut bad = Vec::new();
        let mut damage = self.damage.clone();
        let live: std::collections::HashSet<usize> = self.live.values().copied().collect();
        for (i, r) in self.records.iter().enumerate() {
            let body = read_vec(&self.file, r.offset + ENTRY_HEADER_LEN, r.content_len)?;
            if entry_crc(&body) == r.header.crc {
                continue;
            }
            if live.contains(&i) {
                bad.push(r.header.id);
            } else {
                damage.push(format!(
                    "the discarded or replaced entry {} at offset {} fails its CRC",
                    r.header.id, r.offset
                ));
            }
        }
        bad.sort_unstable();
        let listed = match self.read_content(ROOT_ID) {
            Ok(Content::Directory(mut ids)) => {
                ids.sort_unstable();
                Some(ids)
            }
            _ => None,
        };
        let actual: Vec<i64> = self
            .live
            .keys()
            .copied()
            .filter(|&id| id != ROOT_ID)
            .collect();
        Ok(CheckReport {
            bad_entry_crcs: bad,
            damage,
            torn_tail: self.torn_tail(),
            disk_crc_ok: self.header.disk_crc() == self.live_disk_crc(),
            root_listing_stale: listed.as_ref() != Some(&actual),
            dead_bytes: self.dead_bytes(),
        })
    }

    fn live_disk_crc(&self) -> u32 {
        disk_crc(
            self.live
                .values()
                .filter_map(|&i| self.records.get(i))
                .map(|r| r.header.crc),
        )
    }

    /// Whether the file changed since it was opened or last committed (the game wrote).
    pub fn changed_on_disk(&self) -> Result<bool> {
        Ok(Stamp::of_path(&self.path)? != self.stamp)
    }

    /// Re-opens the file and rescans it.
    pub fn reload(&mut self) -> Result<()> {
        *self = Disk::open(&self.path, self.writable)?;
        Ok(())
    }

    /// Commits `changes` atomically; `now` (Unix seconds) becomes the entries' mtime.
    ///
    /// Later changes of the same ID override earlier ones; a `Put` of the bytes already
    /// stored, or a `Remove` of an entry that does not exist, is no change. One effective
    /// change is appended in place (game autosave style); several are written as a clean
    /// rewrite.
    pub fn commit(&mut self, changes: &[Change], now: u64) -> Result<()> {
        self.commit_dated(changes, now, now)
    }

    /// [`Disk::commit`], with `dated` (Unix seconds) as the modification time of the
    /// entries put, and as the creation time of those it makes: a restore gives each entry
    /// the time of its backed-up file. The root listing still takes `now`, the time of the
    /// change.
    pub fn commit_dated(&mut self, changes: &[Change], now: u64, dated: u64) -> Result<()> {
        let mut wanted: BTreeMap<i64, Option<&[u8]>> = BTreeMap::new();
        for change in changes {
            let (id, data) = match change {
                Change::Put { id, data } => (*id, Some(data.as_slice())),
                Change::Remove { id } => (*id, None),
            };
            if id == ROOT_ID {
                return Err(Error::not_permitted(
                    "the root directory (entry 0) is kept by the disk",
                ));
            }
            wanted.insert(id, data);
        }
        let mut effective = BTreeMap::new();
        for (id, data) in wanted {
            match (self.entry(id), data) {
                (None, None) => {}
                (Some(e), Some(_)) if e.kind != EntryKind::File => {
                    return Err(Error::not_permitted(format!("entry {id} is not a file")))
                }
                (Some(_), Some(data)) if self.read(id)? == data => {}
                (_, data) => {
                    effective.insert(id, data);
                }
            }
        }
        if effective.is_empty() {
            return Ok(());
        }
        self.may_change()?;
        match effective.into_iter().collect::<Vec<_>>().as_slice() {
            [(id, data)] => self.append(*id, *data, now, dated),
            many => self.rewrite(self.header.clone(), many, now, dated),
        }
        .map_err(|e| e.context(self.path.display()))
    }

    /// Refuses a change to a disk open read-only, changed on disk since it was read, or
    /// damaged.
    fn may_change(&mut self) -> Result<()> {
        if !self.writable {
            return Err(Error::read_only(format!(
                "{} is open read-only",
                self.path.display()
            )));
        }
        if self.changed_on_disk()? {
            return Err(Error::new(
                libc::EBUSY,
                format!("{} changed on disk since it was read", self.path.display()),
            ));
        }
        self.refuse_if_damaged()
    }

    /// Rewrites the disk without discarded or shadowed entries and with a fresh root
    /// listing; does nothing when there is nothing to drop.
    pub fn compact(&mut self) -> Result<()> {
        let root_first = self
            .records
            .first()
            .is_some_and(|r| r.header.id == ROOT_ID && self.live.get(&ROOT_ID) == Some(&0));
        if self.dead_bytes() == 0 && root_first && !self.check()?.root_listing_stale {
            return Ok(());
        }
        if !self.writable {
            return Err(Error::read_only(format!(
                "{} is open read-only",
                self.path.display()
            )));
        }
        self.refuse_if_damaged()?;
        let root_mtime = self.entry(ROOT_ID).map(|r| r.mtime).unwrap_or(0);
        self.rewrite(self.header.clone(), &[], root_mtime, root_mtime)
            .map_err(|e| e.context(self.path.display()))
    }

    /// Replaces the header by a clean rewrite (temporary file renamed over the disk), so a
    /// crash leaves the old disk or the new one; the disk CRC is computed anew and the root
    /// keeps its times. Nothing is written when `header` equals the current one but for
    /// the disk CRC.
    pub fn set_header(&mut self, mut header: Header) -> Result<()> {
        header.set_disk_crc(self.header.disk_crc());
        if header == self.header {
            return Ok(());
        }
        self.may_change()?;
        let root_mtime = self.entry(ROOT_ID).map(|r| r.mtime).unwrap_or(0);
        self.rewrite(header, &[], root_mtime, root_mtime)
            .map_err(|e| e.context(self.path.display()))
    }

    /// Appends entry `id` (`None`: discards it) with modification time `dated`, and
    /// stamps the root listing with `now`.
    fn append(&mut self, id: i64, data: Option<&[u8]>, now: u64, dated: u64) -> Result<()> {
        let old = self.entry(id);
        if self.stamp.len > self.end {
            self.file.set_len(self.end)?;
        }
        let mut added = None;
        if let Some(data) = data {
            let (parent, ctime) = old.map_or((ROOT_ID, dated), |e| (e.parent, e.ctime));
            let bytes = encode_entry(id, parent, ctime, dated, &Content::File(data.to_vec()))?;
            self.file.write_all_at(&bytes, self.end)?;
            self.file.sync_data()?;
            let header = EntryHeader::decode(&bytes)?;
            added = Some(Record {
                offset: self.end,
                header,
                kind: EntryKind::File,
                content_len: bytes.len() as u64 - ENTRY_HEADER_LEN,
            });
        }
        // Older occurrences first: every one but the last is shadowed, so each single-byte
        // write leaves the visible state unchanged until the last one flips.
        for i in 0..self.records.len() {
            let Some(r) = self.records.get_mut(i) else {
                continue;
            };
            if r.header.id == id && !r.header.discarded() {
                r.header.type_byte |= DISCARD_BIT;
                self.file
                    .write_all_at(&[r.header.type_byte], r.offset + 16)?;
            }
        }
        if let Some(record) = added {
            self.end = record.end();
            self.records.push(record);
        }
        self.live = live_index(&self.records);
        if self.header.kind() == DiskKind::World {
            self.header.set_save_mode(self.header.save_mode() | 1);
        }
        if let Some(root) = self.records.first_mut() {
            if root.header.id == ROOT_ID
                && !root.header.discarded()
                && root.offset == HEADER_LEN as u64
            {
                root.header.mtime = now;
                let mut t = Vec::with_capacity(6);
                put_u48(&mut t, now);
                self.file.write_all_at(&t, ROOT_MTIME_OFFSET)?;
            }
        }
        let crc = self.live_disk_crc();
        self.header.set_disk_crc(crc);
        self.write_header_fields()
    }

    /// Writes the disk anew with `header` (a world's quicksave bit cleared): live entries
    /// copied, `changes` applied with modification time `dated`, the root listing fresh
    /// with `root_mtime`.
    fn rewrite(
        &mut self,
        mut header: Header,
        changes: &[(i64, Option<&[u8]>)],
        root_mtime: u64,
        dated: u64,
    ) -> Result<()> {
        let changed: BTreeMap<i64, Option<&[u8]>> = changes.iter().copied().collect();
        let mut order: Vec<Record> = self
            .live
            .values()
            .filter_map(|&i| self.records.get(i))
            .filter(|r| r.header.id != ROOT_ID)
            .copied()
            .collect();
        order.sort_by_key(|r| r.offset);
        if header.kind() == DiskKind::World {
            header.set_save_mode(header.save_mode() & !1);
        }
        let root_ctime = self.entry(ROOT_ID).map_or(root_mtime, |r| r.ctime);
        let file = &self.file;
        let mut parts: Vec<Part> = Vec::new();
        for r in &order {
            match changed.get(&r.header.id) {
                None => parts.push(Part::Copy(*r)),
                Some(None) => {}
                Some(Some(data)) => parts.push(Part::New(
                    r.header.id,
                    encode_entry(
                        r.header.id,
                        r.header.parent,
                        r.header.ctime,
                        dated,
                        &Content::File(data.to_vec()),
                    )?,
                )),
            }
        }
        for (&id, data) in &changed {
            if let (None, Some(data)) = (self.live.get(&id), data) {
                parts.push(Part::New(
                    id,
                    encode_entry(id, ROOT_ID, dated, dated, &Content::File(data.to_vec()))?,
                ));
            }
        }
        write_clean(
            &self.path,
            header,
            (root_ctime, root_mtime),
            &parts,
            Some(file),
        )?;
        self.reload()?;
        // Written here from verified entries: no need to read them all again.
        self.crcs_verified = true;
        Ok(())
    }
}

enum Part {
    /// A live entry copied byte for byte from the old file.
    Copy(Record),
    /// A newly serialized entry.
    New(i64, Vec<u8>),
}

impl Part {
    fn id(&self) -> i64 {
        match self {
            Part::Copy(r) => r.header.id,
            Part::New(id, _) => *id,
        }
    }

    fn crc(&self) -> u32 {
        match self {
            Part::Copy(r) => r.header.crc,
            Part::New(_, bytes) => bytes
                .get(32..36)
                .map_or(0, |b| u32::from_be_bytes([b[0], b[1], b[2], b[3]])),
        }
    }
}

/// Writes a clean disk through a temporary file: the header with the disk CRC, the root
/// (listing every entry), then the entries, copied ones streamed from `src`.
fn write_clean(
    path: &Path,
    mut header: Header,
    (root_ctime, root_mtime): (u64, u64),
    parts: &[Part],
    src: Option<&File>,
) -> Result<()> {
    let ids: Vec<i64> = parts.iter().map(Part::id).collect();
    let root = encode_entry(
        ROOT_ID,
        ROOT_ID,
        root_ctime,
        root_mtime,
        &Content::Directory(ids),
    )?;
    let root_crc = entry_crc(root.get(ENTRY_HEADER_LEN as usize..).unwrap_or(&[]));
    header.set_disk_crc(disk_crc(
        std::iter::once(root_crc).chain(parts.iter().map(Part::crc)),
    ));
    write_atomic_with(path, NEW_DISK_MODE, |out| {
        out.write_all(header.bytes())?;
        out.write_all(&root)?;
        let mut buf = vec![0; 1 << 20];
        for part in parts {
            match (part, src) {
                (Part::New(_, bytes), _) => out.write_all(bytes)?,
                (Part::Copy(r), Some(src)) => {
                    let mut pos = r.offset;
                    while pos < r.end() {
                        let n = (r.end() - pos).min(buf.len() as u64) as usize;
                        let piece = buf.get_mut(..n).unwrap_or_default();
                        ReadAt::read_exact_at(src, piece, pos)?;
                        out.write_all(piece)?;
                        pos += n as u64;
                    }
                }
                (Part::Copy(_), None) => {
                    return Err(Error::invalid("no disk to copy entries from"))
                }
            }
        }
        Ok(())
    })
}
