//! The TVDA (Terran Virtual Disk, spec version 254) container codec: the 300-byte header,
//! the 36-byte entry header, entry contents, both CRCs and the sequential index scan.
//!
//! A TVDA has no index: entries follow the header back to back until EOF, the discard bit
//! (type bit 7) kills an entry, and the last live occurrence of an ID wins (tvda.md §2–§3).
//! `scan` reads only entry headers and size fields, never payloads, so opening a disk costs
//! one small read per entry. Everything here is pure bytes ⇄ structs; `store::tvda` does the I/O.

use crate::bytes::{put_u48, ReadAt, Reader, INT48_MAX};
use crate::error::{Error, Result};

/// Size of the disk header.
pub const HEADER_LEN: usize = 300;
/// Size of an entry header (ID, parent, type, reserved, ctime, mtime, CRC).
pub const ENTRY_HEADER_LEN: u64 = 36;
/// Byte 46: the spec version of a TVDA.
pub const SPEC_VERSION: u8 = 0xFE;
/// The disk magic, `TEVd`.
pub const MAGIC: &[u8; 4] = b"TEVd";
/// Entry ID of the root directory.
pub const ROOT_ID: i64 = 0;
/// Type-byte bit marking a discarded entry.
pub const DISCARD_BIT: u8 = 0x80;
/// Offset of the save-mode byte (`extraInfoBytes[1]`).
pub const SAVE_MODE_OFFSET: u64 = 49;
/// Offset of the disk CRC.
pub const DISK_CRC_OFFSET: u64 = 42;
/// Offset of the root entry's modification time when the root is the first entry.
pub const ROOT_MTIME_OFFSET: u64 = HEADER_LEN as u64 + 26;

const NAME_PART1: std::ops::Range<usize> = 10..42;
const NAME_PART2: std::ops::Range<usize> = 64..300;
const NAME_LEN: usize = 268;
const RESERVED: std::ops::Range<usize> = 55..64;

/// What a disk holds, from header byte 50 (`VDSaveKind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskKind {
    /// 0: very old disks that predate the field.
    Undefined,
    /// 1: a player disk.
    Player,
    /// 2: a world disk.
    World,
    /// Any other value.
    Other(u8),
}

/// The 300-byte disk header, kept as bytes so unknown fields survive a rewrite.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    bytes: [u8; HEADER_LEN],
}

impl Header {
    /// Parses a header; requires the magic and spec version 254.
    pub fn parse(data: &[u8]) -> Result<Header> {
        let head = data
            .get(..HEADER_LEN)
            .ok_or_else(|| Error::corrupt("TVDA disk shorter than its 300-byte header"))?;
        if !head.starts_with(MAGIC) {
            return Err(Error::corrupt("not a Terran Virtual Disk (no TEVd magic)"));
        }
        let mut bytes = [0; HEADER_LEN];
        bytes.copy_from_slice(head);
        if bytes[46] != SPEC_VERSION {
            return Err(Error::unsupported(format!(
                "TEVd disk of spec version {} is not a TVDA (version 254)",
                bytes[46]
            )));
        }
        Ok(Header { bytes })
    }

    /// A new header: capacity 0, the given name and kind, every other field 0.
    pub fn new(name: &str, kind: u8) -> Result<Header> {
        let mut bytes = [0; HEADER_LEN];
        bytes[..4].copy_from_slice(MAGIC);
        bytes[46] = SPEC_VERSION;
        bytes[47] = SPEC_VERSION;
        bytes[50] = kind;
        let mut h = Header { bytes };
        h.set_name(name)?;
        Ok(h)
    }

    /// The raw 300 bytes.
    pub fn bytes(&self) -> &[u8; HEADER_LEN] {
        &self.bytes
    }

    /// Disk capacity in bytes (Terrarum saves write 0).
    pub fn capacity(&self) -> u64 {
        let mut c = Reader::new(&self.bytes[4..10]);
        c.u48("disk capacity").unwrap_or(0)
    }

    /// The disk name (player or world name): both name parts, trailing NULs trimmed.
    pub fn name(&self) -> String {
        let mut raw = self.bytes[NAME_PART1].to_vec();
        raw.extend_from_slice(&self.bytes[NAME_PART2]);
        while raw.last() == Some(&0) {
            raw.pop();
        }
        String::from_utf8_lossy(&raw).into_owned()
    }

    /// Sets the disk name (at most 268 bytes of UTF-8).
    pub fn set_name(&mut self, name: &str) -> Result<()> {
        let raw = name.as_bytes();
        if raw.len() > NAME_LEN {
            return Err(Error::invalid("disk name longer than 268 bytes"));
        }
        let mut padded = [0u8; NAME_LEN];
        padded[..raw.len()].copy_from_slice(raw);
        self.bytes[NAME_PART1].copy_from_slice(&padded[..32]);
        self.bytes[NAME_PART2].copy_from_slice(&padded[32..]);
        Ok(())
    }

    /// The stored disk CRC.
    pub fn disk_crc(&self) -> u32 {
        u32::from_be_bytes([
            self.bytes[42],
            self.bytes[43],
            self.bytes[44],
            self.bytes[45],
        ])
    }

    /// Sets the stored disk CRC.
    pub fn set_disk_crc(&mut self, crc: u32) {
        self.bytes[42..46].copy_from_slice(&crc.to_be_bytes());
    }

    /// Byte 47 is the 0xFE marker the writer always sets (readers do not check it).
    pub fn marker_ok(&self) -> bool {
        self.bytes[47] == SPEC_VERSION
    }

    /// Byte 48 bit 0: the read-only property (nothing in Terrarum sets it).
    pub fn read_only_flag(&self) -> bool {
        self.bytes[48] & 1 != 0
    }

    /// Byte 49: save mode (bit 0 = dirty/quicksaved, bit 1 = autosave) on world disks.
    pub fn save_mode(&self) -> u8 {
        self.bytes[49]
    }

    /// Sets byte 49.
    pub fn set_save_mode(&mut self, mode: u8) {
        self.bytes[49] = mode;
    }

    /// Byte 50: what the disk holds.
    pub fn kind(&self) -> DiskKind {
        match self.bytes[50] {
            0 => DiskKind::Undefined,
            1 => DiskKind::Player,
            2 => DiskKind::World,
            n => DiskKind::Other(n),
        }
    }

    /// Byte 51: origin flags (0 = created in game, 16 = imported).
    pub fn origin(&self) -> u8 {
        self.bytes[51]
    }

    /// Bytes 52–53: the snapshot number of the build that saved (0 = release).
    pub fn snapshot(&self) -> [u8; 2] {
        [self.bytes[52], self.bytes[53]]
    }

    /// Byte 54: game mode (not written by current Terrarum).
    pub fn game_mode(&self) -> u8 {
        self.bytes[54]
    }

    /// Every field a user may set: all bytes but the magic, the spec version and the disk
    /// CRC, which the disk itself keeps.
    pub fn fields(&self) -> HeaderFields {
        let mut name = self.bytes[NAME_PART1].to_vec();
        name.extend_from_slice(&self.bytes[NAME_PART2]);
        while name.last() == Some(&0) {
            name.pop();
        }
        let mut reserved = [0; 9];
        reserved.copy_from_slice(&self.bytes[RESERVED]);
        HeaderFields {
            name,
            capacity: self.capacity(),
            marker: self.bytes[47],
            flags: self.bytes[48],
            save_mode: self.bytes[49],
            kind: self.bytes[50],
            origin: self.bytes[51],
            snapshot: self.snapshot(),
            game_mode: self.bytes[54],
            reserved,
        }
    }

    /// This header with `fields` set (the disk CRC kept).
    pub fn with_fields(&self, fields: &HeaderFields) -> Result<Header> {
        if fields.name.len() > NAME_LEN {
            return Err(Error::invalid(format!(
                "disk name of {} bytes; a TVDA name holds at most {NAME_LEN}",
                fields.name.len()
            )));
        }
        if fields.capacity > INT48_MAX {
            return Err(Error::invalid("disk capacity larger than an Int48 allows"));
        }
        let mut h = self.clone();
        let mut padded = [0u8; NAME_LEN];
        padded
            .get_mut(..fields.name.len())
            .unwrap_or_default()
            .copy_from_slice(&fields.name);
        h.bytes[NAME_PART1].copy_from_slice(&padded[..32]);
        h.bytes[NAME_PART2].copy_from_slice(&padded[32..]);
        let mut capacity = Vec::with_capacity(6);
        put_u48(&mut capacity, fields.capacity);
        h.bytes[4..10].copy_from_slice(&capacity);
        h.bytes[47] = fields.marker;
        h.bytes[48] = fields.flags;
        h.bytes[49] = fields.save_mode;
        h.bytes[50] = fields.kind;
        h.bytes[51] = fields.origin;
        h.bytes[52..54].copy_from_slice(&fields.snapshot);
        h.bytes[54] = fields.game_mode;
        h.bytes[RESERVED].copy_from_slice(&fields.reserved);
        Ok(h)
    }
}

/// The header fields a user sets (tvda.md §2.1), as `Header::fields` reads them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderFields {
    /// The 268 name bytes without their trailing NUL padding (not necessarily UTF-8:
    /// Terrarum's rename writes part 2 at offset 60, tvda.md §2.1).
    pub name: Vec<u8>,
    /// Bytes 4–9: capacity (Terrarum saves write 0).
    pub capacity: u64,
    /// Byte 47: the 0xFE marker.
    pub marker: u8,
    /// Byte 48: disk properties (bit 0 read-only).
    pub flags: u8,
    /// Byte 49: save mode.
    pub save_mode: u8,
    /// Byte 50: kind (1 player, 2 world).
    pub kind: u8,
    /// Byte 51: origin (0 in game, 16 imported).
    pub origin: u8,
    /// Bytes 52–53: snapshot number.
    pub snapshot: [u8; 2],
    /// Byte 54: game mode.
    pub game_mode: u8,
    /// Bytes 55–63: reserved.
    pub reserved: [u8; 9],
}

impl Default for HeaderFields {
    /// What a new disk has: empty name, kind 0, the 0xFE marker, every other field 0.
    fn default() -> HeaderFields {
        HeaderFields {
            name: Vec::new(),
            capacity: 0,
            marker: SPEC_VERSION,
            flags: 0,
            save_mode: 0,
            kind: 0,
            origin: 0,
            snapshot: [0; 2],
            game_mode: 0,
            reserved: [0; 9],
        }
    }
}

/// Entry type, the low bits of the type byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// 1: a file (`Int48 size` + bytes).
    File,
    /// 2: a directory (`Int32 count` + sorted Int64 IDs).
    Directory,
    /// 3: a symlink (`Int64 target`).
    Symlink,
}

impl EntryKind {
    /// The kind for a type byte with the discard bit masked off.
    pub fn from_type(t: u8) -> Option<EntryKind> {
        match t & !DISCARD_BIT {
            1 => Some(EntryKind::File),
            2 => Some(EntryKind::Directory),
            3 => Some(EntryKind::Symlink),
            _ => None,
        }
    }

    /// The type byte of a live entry.
    pub fn type_byte(self) -> u8 {
        match self {
            EntryKind::File => 1,
            EntryKind::Directory => 2,
            EntryKind::Symlink => 3,
        }
    }

    /// Size of the size/count field at the start of the content.
    fn size_field_len(self) -> u64 {
        match self {
            EntryKind::File => 6,
            EntryKind::Directory => 4,
            EntryKind::Symlink => 0,
        }
    }
}

/// The 36-byte entry header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryHeader {
    /// Entry ID (signed; meaning in tvda.md §5.2).
    pub id: i64,
    /// Parent ID (Terrarum always writes 0).
    pub parent: i64,
    /// The type byte, discard bit included.
    pub type_byte: u8,
    /// The three reserved bytes, kept as found.
    pub reserved: [u8; 3],
    /// Creation time, Unix seconds.
    pub ctime: u64,
    /// Modification time, Unix seconds.
    pub mtime: u64,
    /// CRC-32 of the serialized content.
    pub crc: u32,
}

impl EntryHeader {
    /// Decodes an entry header (at least 36 bytes).
    pub fn decode(data: &[u8]) -> Result<EntryHeader> {
        let mut c = Reader::new(data);
        let id = c.i64("entry ID")?;
        let parent = c.i64("entry parent")?;
        let type_byte = c.u8("entry type")?;
        let mut reserved = [0; 3];
        reserved.copy_from_slice(c.bytes(3, "entry reserved bytes")?);
        Ok(EntryHeader {
            id,
            parent,
            type_byte,
            reserved,
            ctime: c.u48("entry ctime")?,
            mtime: c.u48("entry mtime")?,
            crc: c.u32("entry CRC")?,
        })
    }

    /// Encodes the 36 bytes.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.id.to_be_bytes());
        out.extend_from_slice(&self.parent.to_be_bytes());
        out.push(self.type_byte);
        out.extend_from_slice(&self.reserved);
        put_u48(out, self.ctime);
        put_u48(out, self.mtime);
        out.extend_from_slice(&self.crc.to_be_bytes());
    }

    /// The entry kind, if the type is known.
    pub fn kind(&self) -> Option<EntryKind> {
        EntryKind::from_type(self.type_byte)
    }

    /// Whether the discard bit is set.
    pub fn discarded(&self) -> bool {
        self.type_byte & DISCARD_BIT != 0
    }
}

/// Decoded entry content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    /// File bytes.
    File(Vec<u8>),
    /// Child IDs of a directory.
    Directory(Vec<i64>),
    /// Target ID of a symlink.
    Symlink(i64),
}

impl Content {
    /// The entry kind of this content.
    pub fn kind(&self) -> EntryKind {
        match self {
            Content::File(_) => EntryKind::File,
            Content::Directory(_) => EntryKind::Directory,
            Content::Symlink(_) => EntryKind::Symlink,
        }
    }

    /// The serialized content (size or count field included), as the CRC covers it.
    /// Directory listings are written sorted ascending as signed Int64.
    pub fn encode(&self) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        match self {
            Content::File(data) => {
                let len = u64::try_from(data.len()).unwrap_or(u64::MAX);
                if len > INT48_MAX {
                    return Err(Error::invalid("file larger than an Int48 size allows"));
                }
                out.reserve(6 + data.len());
                put_u48(&mut out, len);
                out.extend_from_slice(data);
            }
            Content::Directory(ids) => {
                let count = u32::try_from(ids.len())
                    .ok()
                    .filter(|&c| c <= i32::MAX as u32)
                    .ok_or_else(|| Error::invalid("directory with too many entries"))?;
                let mut sorted = ids.clone();
                sorted.sort_unstable();
                out.extend_from_slice(&count.to_be_bytes());
                for id in sorted {
                    out.extend_from_slice(&id.to_be_bytes());
                }
            }
            Content::Symlink(target) => out.extend_from_slice(&target.to_be_bytes()),
        }
        Ok(out)
    }

    /// Decodes serialized content of `kind`; the data must be exactly one content.
    pub fn decode(kind: EntryKind, data: &[u8]) -> Result<Content> {
        let mut c = Reader::new(data);
        let content = match kind {
            EntryKind::File => {
                let len = c.u48("file size")?;
                let len = usize::try_from(len).map_err(|_| Error::corrupt("file too large"))?;
                Content::File(c.bytes(len, "file contents")?.to_vec())
            }
            EntryKind::Directory => {
                let count = c.u32("directory count")? as usize;
                if count > c.remaining() / 8 {
                    return Err(Error::corrupt("directory count exceeds its content"));
                }
                let mut ids = Vec::with_capacity(count);
                for _ in 0..count {
                    ids.push(c.i64("directory entry")?);
                }
                Content::Directory(ids)
            }
            EntryKind::Symlink => Content::Symlink(c.i64("symlink target")?),
        };
        if c.remaining() != 0 {
            return Err(Error::corrupt("entry content longer than its size field"));
        }
        Ok(content)
    }
}

/// The entry CRC: CRC-32 (IEEE) over every byte of the serialized content.
pub fn entry_crc(serialized_content: &[u8]) -> u32 {
    crc32fast::hash(serialized_content)
}

/// The disk CRC: CRC-32 over the low byte of each live entry CRC, sorted as signed int32.
pub fn disk_crc(entry_crcs: impl IntoIterator<Item = u32>) -> u32 {
    let mut crcs: Vec<i32> = entry_crcs.into_iter().map(|c| c as i32).collect();
    crcs.sort_unstable();
    let low: Vec<u8> = crcs.iter().map(|&c| c as u8).collect();
    crc32fast::hash(&low)
}

/// A complete serialized entry (header and content) with its CRC filled in.
pub fn encode_entry(
    id: i64,
    parent: i64,
    ctime: u64,
    mtime: u64,
    content: &Content,
) -> Result<Vec<u8>> {
    let body = content.encode()?;
    let header = EntryHeader {
        id,
        parent,
        type_byte: content.kind().type_byte(),
        reserved: [0; 3],
        ctime,
        mtime,
        crc: entry_crc(&body),
    };
    let mut out = Vec::with_capacity(ENTRY_HEADER_LEN as usize + body.len());
    header.encode(&mut out);
    out.extend_from_slice(&body);
    Ok(out)
}

/// One entry found by the scan: where it is and its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// Offset of the entry header in the disk.
    pub offset: u64,
    /// The entry header.
    pub header: EntryHeader,
    /// The entry kind.
    pub kind: EntryKind,
    /// Length of the serialized content (size/count field included).
    pub content_len: u64,
}

impl Record {
    /// Offset just past this entry.
    pub fn end(&self) -> u64 {
        self.offset + ENTRY_HEADER_LEN + self.content_len
    }

    /// Offset of the payload (after the size/count field).
    pub fn payload_offset(&self) -> u64 {
        self.offset + ENTRY_HEADER_LEN + self.kind.size_field_len()
    }

    /// Length of the payload (file bytes, or the ID list).
    pub fn payload_len(&self) -> u64 {
        self.content_len - self.kind.size_field_len()
    }
}

/// A stretch of a disk that is not a sequence of entries and is not a torn last append.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// Where the unreadable bytes start.
    pub offset: u64,
    /// How many bytes up to the next entry that proves itself by its CRC.
    pub len: u64,
    /// Why the bytes at `offset` are not an entry.
    pub reason: String,
}

/// The result of scanning a disk.
#[derive(Debug, Clone)]
pub struct Scan {
    /// The header.
    pub header: Header,
    /// Every complete entry in file order, discarded ones included.
    pub records: Vec<Record>,
    /// Where an append goes: the end of the last entry, before a torn tail.
    pub end: u64,
    /// Damaged stretches (entries after one are still found); empty on a sound disk.
    pub damage: Vec<Damage>,
}

/// Why the bytes at `pos` of a `len`-byte disk are not a complete entry, or the entry.
fn record_at(
    src: &(impl ReadAt + ?Sized),
    pos: u64,
    len: u64,
) -> Result<std::result::Result<Record, String>> {
    let avail = (len - pos).min(42) as usize;
    if avail < ENTRY_HEADER_LEN as usize {
        return Ok(Err(format!(
            "{avail} bytes are too short for an entry header"
        )));
    }
    let mut buf = [0u8; 42];
    let chunk = buf.get_mut(..avail).unwrap_or_default();
    src.read_exact_at(chunk, pos)?;
    let entry = EntryHeader::decode(chunk)?;
    let Some(kind) = entry.kind() else {
        return Ok(Err(format!("unknown entry type {:#04x}", entry.type_byte)));
    };
    let mut size = Reader::new(chunk.get(ENTRY_HEADER_LEN as usize..).unwrap_or(&[]));
    let content_len = match kind {
        EntryKind::File => size.u48("file size").map(|n| 6 + n),
        EntryKind::Directory => size.u32("directory count").map(|n| 4 + 8 * u64::from(n)),
        EntryKind::Symlink => Ok(8),
    };
    let Ok(content_len) = content_len else {
        return Ok(Err("the size field is cut off".into()));
    };
    let record = Record {
        offset: pos,
        header: entry,
        kind,
        content_len,
    };
    if record.end() > len {
        return Ok(Err(format!(
            "entry {} claims {content_len} bytes, past the end of the disk",
            entry.id
        )));
    }
    Ok(Ok(record))
}

/// Whether `record`'s stored CRC matches its content.
fn crc_ok(src: &(impl ReadAt + ?Sized), record: &Record) -> Result<bool> {
    let body = crate::bytes::read_vec(src, record.offset + ENTRY_HEADER_LEN, record.content_len)?;
    Ok(entry_crc(&body) == record.header.crc)
}

/// The first offset in `from..len` where an entry starts whose CRC matches its content:
/// where reading resumes after damage. Nothing there means the bytes before are a torn tail.
fn next_sound_entry(src: &(impl ReadAt + ?Sized), from: u64, len: u64) -> Result<Option<u64>> {
    const BLOCK: u64 = 1 << 20;
    let mut start = from;
    while start + ENTRY_HEADER_LEN <= len {
        let block_len = (len - start).min(BLOCK + 17);
        let block = crate::bytes::read_vec(src, start, block_len)?;
        let last = (block_len.saturating_sub(16)).min(BLOCK);
        for i in 0..last {
            let plausible = block
                .get(i as usize + 16)
                .is_some_and(|&t| EntryKind::from_type(t).is_some());
            if !plausible {
                continue;
            }
            let pos = start + i;
            if let Ok(record) = record_at(src, pos, len)? {
                if crc_ok(src, &record)? {
                    return Ok(Some(pos));
                }
            }
        }
        start += last.max(1);
    }
    Ok(None)
}

/// Scans a disk image of `len` bytes: the header, then every entry header from offset 300.
///
/// Bytes that are not an entry (an unknown type, a size past the end, a header cut off)
/// are either a torn last append, which the next append may cut off, or damage. They are a
/// torn append only when no entry follows them: the scan looks for the next offset where
/// an entry's CRC matches its content, and when there is one the stretch before it is
/// damage, reported, and reading resumes there, so no entry after the damage is lost. A
/// final entry whose CRC does not match is a torn append too (its header landed, not all
/// of its content). Only entry headers are read on a sound disk; payloads are read only to
/// tell damage from a torn tail.
pub fn scan(src: &(impl ReadAt + ?Sized), len: u64) -> Result<Scan> {
    let mut head = [0; HEADER_LEN];
    if len < HEADER_LEN as u64 {
        return Err(Error::corrupt("TVDA disk shorter than its 300-byte header"));
    }
    src.read_exact_at(&mut head, 0)?;
    let header = Header::parse(&head)?;
    let mut records: Vec<Record> = Vec::new();
    let mut damage = Vec::new();
    let mut pos = HEADER_LEN as u64;
    let mut tail = None;
    while pos < len {
        match record_at(src, pos, len)? {
            Ok(record) => {
                pos = record.end();
                records.push(record);
            }
            Err(reason) => match next_sound_entry(src, pos + 1, len)? {
                Some(next) => {
                    damage.push(Damage {
                        offset: pos,
                        len: next - pos,
                        reason,
                    });
                    pos = next;
                }
                None => {
                    tail = Some(pos);
                    break;
                }
            },
        }
    }
    let mut end = tail.unwrap_or(pos);
    if let Some(last) = records.last().copied() {
        if last.end() == end && !last.header.discarded() && !crc_ok(src, &last)? {
            match next_sound_entry(src, last.offset + 1, len)? {
                None => {
                    log::warn!(
                        "TVDA: final entry {} at offset {} fails its CRC; treating it as a torn append",
                        last.header.id,
                        last.offset
                    );
                    records.pop();
                    end = last.offset;
                }
                Some(next) => damage.push(Damage {
                    offset: last.offset,
                    len: next - last.offset,
                    reason: format!("entry {} fails its CRC", last.header.id),
                }),
            }
        }
    }
    Ok(Scan {
        header,
        records,
        end,
        damage,
    })
}

/// For each entry ID, the index (into `records`) of its last live occurrence.
pub fn live_index(records: &[Record]) -> std::collections::BTreeMap<i64, usize> {
    let mut live = std::collections::BTreeMap::new();
    for (i, r) in records.iter().enumerate() {
        if !r.header.discarded() {
            live.insert(r.header.id, i);
        }
    }
    live
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn content() -> impl Strategy<Value = Content> {
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..200).prop_map(Content::File),
            proptest::collection::vec(any::<i64>(), 0..20).prop_map(Content::Directory),
            any::<i64>().prop_map(Content::Symlink),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        #[test]
        fn scanned_disks_give_back_what_was_written(
            entries in proptest::collection::vec((-5i64..5, content(), any::<bool>()), 0..24)
        ) {
            let mut disk = Header::new("p", 2).unwrap().bytes().to_vec();
            let mut expect = std::collections::BTreeMap::new();
            for (id, content, discard) in &entries {
                let mut bytes = encode_entry(*id, 0, 1, 2, content).unwrap();
                if *discard {
                    bytes[16] |= DISCARD_BIT;
                } else {
                    let mut sorted = content.clone();
                    if let Content::Directory(ids) = &mut sorted {
                        ids.sort_unstable();
                    }
                    expect.insert(*id, sorted);
                }
                disk.extend_from_slice(&bytes);
            }
            let found = scan(&disk[..], disk.len() as u64).unwrap();
            prop_assert_eq!(found.end, disk.len() as u64);
            prop_assert_eq!(found.records.len(), entries.len());
            let live = live_index(&found.records);
            prop_assert_eq!(live.len(), expect.len());
            for (id, i) in live {
                let r = found.records[i];
                let body = &disk[(r.offset + ENTRY_HEADER_LEN) as usize..r.end() as usize];
                prop_assert_eq!(entry_crc(body), r.header.crc);
                prop_assert_eq!(&Content::decode(r.kind, body).unwrap(), &expect[&id]);
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(tail in proptest::collection::vec(any::<u8>(), 0..400)) {
            let mut disk = Header::new("p", 1).unwrap().bytes().to_vec();
            disk.extend_from_slice(&tail);
            if let Ok(found) = scan(&disk[..], disk.len() as u64) {
                prop_assert!(found.end <= disk.len() as u64);
            }
            let _ = Header::parse(&tail);
        }
    }

    #[test]
    fn worked_example_crcs() {
        // tvda.md §6: root [-4,-1], -1 = {"genver":1}, -4 = "basegame 0.5.2".
        let root = Content::Directory(vec![-1, -4]).encode().unwrap();
        assert_eq!(entry_crc(&root), 0x316C_BAC0);
        let info = Content::File(br#"{"genver":1}"#.to_vec()).encode().unwrap();
        assert_eq!(entry_crc(&info), 0x099A_C9A6);
        let order = Content::File(b"basegame 0.5.2".to_vec()).encode().unwrap();
        assert_eq!(entry_crc(&order), 0xC374_E475);
        assert_eq!(
            disk_crc([0x316C_BAC0, 0x099A_C9A6, 0xC374_E475]),
            0xCE42_AA76
        );
    }

    #[test]
    fn entry_header_round_trip() {
        let bytes =
            encode_entry(-4, 0, 1_700_000_000, 1_700_000_060, &Content::Symlink(7)).unwrap();
        assert_eq!(bytes.len(), 44);
        let h = EntryHeader::decode(&bytes).unwrap();
        assert_eq!(
            (h.id, h.kind(), h.ctime, h.mtime),
            (-4, Some(EntryKind::Symlink), 1_700_000_000, 1_700_000_060)
        );
        let mut again = Vec::new();
        h.encode(&mut again);
        assert_eq!(again, bytes[..36]);
        assert_eq!(
            Content::decode(EntryKind::Symlink, &bytes[36..]).unwrap(),
            Content::Symlink(7)
        );
    }

    #[test]
    fn header_name_spans_both_parts() {
        let long = "x".repeat(40) + "-tail";
        let mut h = Header::new(&long, 2).unwrap();
        assert_eq!(h.name(), long);
        assert_eq!(h.kind(), DiskKind::World);
        assert_eq!(h.bytes()[64..72], *b"xxxxxxxx");
        assert!(h.set_name(&"y".repeat(269)).is_err());
        assert!(Header::parse(h.bytes()).is_ok());
    }

    #[test]
    fn header_fields_round_trip_every_settable_byte() {
        let mut bytes = *Header::new("", 0).unwrap().bytes();
        for (i, b) in bytes.iter_mut().enumerate().skip(4) {
            if i != 46 {
                *b = (i * 7 + 1) as u8;
            }
        }
        let h = Header::parse(&bytes).unwrap();
        let fields = h.fields();
        assert_eq!(fields.name.len(), 268);
        let blank = Header::new("", 0).unwrap();
        let mut rebuilt = blank.with_fields(&fields).unwrap();
        rebuilt.set_disk_crc(h.disk_crc());
        assert_eq!(rebuilt, h);
        let too_long = HeaderFields {
            name: vec![b'x'; 269],
            ..HeaderFields::default()
        };
        assert!(blank.with_fields(&too_long).is_err());
    }
}
