//! The TEVD disk codec (Terran Virtual Disk spec versions 2 and 3, tsvm's disk images):
//! header variants, the 281-byte entry header with its 256-byte file name, entry contents,
//! the CRC quirk and the sequential scan (tvda.md §1, §4).
//!
//! Three layouts exist: v2 and the old v3 (47-byte header, entries, then a footer
//! `FE FE FE FE … FF 19`), and the current v3 (64-byte header with an attribute byte and 16
//! extra bytes, no footer). Entries have Int32 IDs and parents, a name, and contents like
//! TVDA's with narrower fields (directory `UInt16 count` + Int32 IDs, unsorted; symlink
//! Int32). The TerranVirtualDisk library's entry CRC feeds only every fourth content byte
//! to CRC-32; the disk CRC is computed like TVDA's. Unlike TVDA there is no discard bit and
//! no appending, so any damage is reported as corruption.

use crate::bytes::{put_u48, ReadAt, Reader, INT48_MAX};
use crate::error::{Error, Result};

/// Size of an entry header.
pub const ENTRY_HEADER_LEN: u64 = 281;
/// Size of the name field.
pub const NAME_LEN: usize = 256;
const FOOTER_MARK: [u8; 4] = [0xFE; 4];
const FOOTER_END: [u8; 2] = [0xFF, 0x19];

/// Which TEVD layout a disk has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Version 2: 47-byte header, footer.
    V2,
    /// The 2017–2018 version 3: 47-byte header, footer, optional compressed files.
    V3Footer,
    /// The current version 3 (2023): 64-byte header, no footer.
    V3,
}

impl Layout {
    /// Header size.
    pub fn header_len(self) -> usize {
        match self {
            Layout::V2 | Layout::V3Footer => 47,
            Layout::V3 => 64,
        }
    }

    /// Whether entries are followed by a footer.
    pub fn has_footer(self) -> bool {
        self != Layout::V3
    }
}

/// A TEVD disk header, kept as bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TevdHeader {
    layout: Layout,
    bytes: Vec<u8>,
}

impl TevdHeader {
    /// A new current-v3 header.
    pub fn new_v3(name: &str, capacity: u64) -> Result<TevdHeader> {
        let raw = name.as_bytes();
        if raw.len() > 32 {
            return Err(Error::invalid("a TEVD disk name has at most 32 bytes"));
        }
        if capacity > INT48_MAX {
            return Err(Error::invalid("capacity exceeds 48 bits"));
        }
        let mut bytes = Vec::with_capacity(64);
        bytes.extend_from_slice(b"TEVd");
        put_u48(&mut bytes, capacity);
        bytes.extend_from_slice(raw);
        bytes.resize(64, 0);
        if let Some(v) = bytes.get_mut(46) {
            *v = 3;
        }
        Ok(TevdHeader {
            layout: Layout::V3,
            bytes,
        })
    }

    /// The layout.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// The raw header bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Disk capacity in bytes (0 = unlimited).
    pub fn capacity(&self) -> u64 {
        Reader::new(self.bytes.get(4..10).unwrap_or(&[]))
            .u48("disk capacity")
            .unwrap_or(0)
    }

    /// The disk name, trailing NULs trimmed.
    pub fn name(&self) -> String {
        trimmed(self.bytes.get(10..42).unwrap_or(&[]))
    }

    /// The stored disk CRC.
    pub fn disk_crc(&self) -> u32 {
        let mut c = Reader::new(self.bytes.get(42..46).unwrap_or(&[]));
        c.u32("disk CRC").unwrap_or(0)
    }

    /// Sets the stored disk CRC.
    pub fn set_disk_crc(&mut self, crc: u32) {
        if let Some(b) = self.bytes.get_mut(42..46) {
            b.copy_from_slice(&crc.to_be_bytes());
        }
    }

    /// The read-only attribute (byte 47 bit 0 of a current v3 disk).
    pub fn read_only(&self) -> bool {
        self.layout == Layout::V3 && self.bytes.get(47).is_some_and(|b| b & 1 != 0)
    }
}

fn trimmed(raw: &[u8]) -> String {
    let end = raw.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    String::from_utf8_lossy(raw.get(..end).unwrap_or(&[])).into_owned()
}

/// Entry kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TevdKind {
    /// 1: `Int48 size` + bytes.
    File,
    /// 2: `UInt16 count` + Int32 IDs.
    Directory,
    /// 3: `Int32 target`.
    Symlink,
    /// 0x11 (old v3 only): `Int48 compressed size`, `Int48 size`, DEFLATE data.
    Compressed,
}

impl TevdKind {
    fn from_type(t: u8, layout: Layout) -> Option<TevdKind> {
        match t {
            1 => Some(TevdKind::File),
            2 => Some(TevdKind::Directory),
            3 => Some(TevdKind::Symlink),
            0x11 if layout == Layout::V3Footer => Some(TevdKind::Compressed),
            _ => None,
        }
    }

    /// The type byte.
    pub fn type_byte(self) -> u8 {
        match self {
            TevdKind::File => 1,
            TevdKind::Directory => 2,
            TevdKind::Symlink => 3,
            TevdKind::Compressed => 0x11,
        }
    }
}

/// The 281-byte entry header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TevdEntryHeader {
    /// Entry ID (0 = root).
    pub id: i32,
    /// Parent directory ID.
    pub parent: i32,
    /// Entry kind.
    pub kind: TevdKind,
    /// The name, NUL padding removed.
    pub name: Vec<u8>,
    /// Creation time, Unix seconds.
    pub ctime: u64,
    /// Modification time, Unix seconds.
    pub mtime: u64,
    /// Entry CRC (every fourth content byte).
    pub crc: u32,
}

impl TevdEntryHeader {
    fn decode(data: &[u8], layout: Layout) -> Result<TevdEntryHeader> {
        let mut c = Reader::new(data);
        let id = c.i32("entry ID")?;
        let parent = c.i32("entry parent")?;
        let t = c.u8("entry type")?;
        let kind = TevdKind::from_type(t, layout)
            .ok_or_else(|| Error::corrupt(format!("entry {id} has unknown type {t:#04x}")))?;
        let raw = c.bytes(NAME_LEN, "entry name")?;
        let end = raw.iter().position(|&b| b == 0).unwrap_or(NAME_LEN);
        Ok(TevdEntryHeader {
            id,
            parent,
            kind,
            name: raw.get(..end).unwrap_or(&[]).to_vec(),
            ctime: c.u48("entry ctime")?,
            mtime: c.u48("entry mtime")?,
            crc: c.u32("entry CRC")?,
        })
    }

    /// Encodes the 281 bytes; the name must fit in 256 bytes.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<()> {
        if self.name.len() > NAME_LEN {
            return Err(Error::invalid("a TEVD name has at most 256 bytes"));
        }
        out.extend_from_slice(&self.id.to_be_bytes());
        out.extend_from_slice(&self.parent.to_be_bytes());
        out.push(self.kind.type_byte());
        out.extend_from_slice(&self.name);
        out.resize(out.len() + NAME_LEN - self.name.len(), 0);
        put_u48(out, self.ctime);
        put_u48(out, self.mtime);
        out.extend_from_slice(&self.crc.to_be_bytes());
        Ok(())
    }
}

/// The entry CRC of serialized content: CRC-32 over bytes 0, 4, 8, … (tvda.md §3.5).
pub fn tevd_entry_crc(content: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    for b in content.iter().step_by(4) {
        h.update(&[*b]);
    }
    h.finalize()
}

/// Serialized file content: `Int48 size` + bytes.
pub fn file_content(data: &[u8]) -> Result<Vec<u8>> {
    let len = data.len() as u64;
    if len > INT48_MAX {
        return Err(Error::invalid("file too large"));
    }
    let mut out = Vec::with_capacity(data.len() + 6);
    put_u48(&mut out, len);
    out.extend_from_slice(data);
    Ok(out)
}

/// Serialized directory content: `UInt16 count` + Int32 IDs in the given order.
pub fn dir_content(children: &[i32]) -> Result<Vec<u8>> {
    let count = u16::try_from(children.len())
        .map_err(|_| Error::new(libc::ENOSPC, "a TEVD directory holds at most 65535 entries"))?;
    let mut out = Vec::with_capacity(2 + 4 * children.len());
    out.extend_from_slice(&count.to_be_bytes());
    for id in children {
        out.extend_from_slice(&id.to_be_bytes());
    }
    Ok(out)
}

/// Decodes directory content.
pub fn decode_dir(content: &[u8]) -> Result<Vec<i32>> {
    let mut c = Reader::new(content);
    let count = c.u16("directory count")?;
    (0..count).map(|_| c.i32("directory entry")).collect()
}

/// One entry found by the scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TevdRecord {
    /// Offset of the entry header.
    pub offset: u64,
    /// The entry header.
    pub header: TevdEntryHeader,
    /// Length of the serialized content.
    pub content_len: u64,
}

impl TevdRecord {
    /// Offset of the serialized content.
    pub fn content_offset(&self) -> u64 {
        self.offset + ENTRY_HEADER_LEN
    }

    /// Offset just past the entry.
    pub fn end(&self) -> u64 {
        self.content_offset() + self.content_len
    }
}

/// A scanned TEVD disk.
#[derive(Debug, Clone)]
pub struct TevdScan {
    /// The header.
    pub header: TevdHeader,
    /// Every entry in file order.
    pub records: Vec<TevdRecord>,
    /// The footer bytes (from `FE FE FE FE` to EOF), empty for current v3.
    pub footer: Vec<u8>,
}

/// Detects the layout of a TEVD disk of `len` bytes.
fn detect(src: &(impl ReadAt + ?Sized), len: u64) -> Result<Layout> {
    let mut head = [0u8; 64];
    let n = len.min(64) as usize;
    src.read_exact_at(head.get_mut(..n).unwrap_or(&mut []), 0)?;
    if head.get(..4) != Some(b"TEVd") {
        return Err(Error::corrupt("not a Terran Virtual Disk (no TEVd magic)"));
    }
    if n < 47 {
        return Err(Error::corrupt("TEVD disk shorter than its header"));
    }
    let mut tail = [0u8; 2];
    src.read_exact_at(&mut tail, len - 2)?;
    match head[46] {
        2 => Ok(Layout::V2),
        3 if tail == FOOTER_END && head[47..51] == [0; 4] && head[55] == 2 => Ok(Layout::V3Footer),
        3 => Ok(Layout::V3),
        0xFE => Err(Error::unsupported(
            "this is a TVDA (version 254) disk, not TEVD",
        )),
        0x11 => Err(Error::unsupported(
            "clustered TEVD disks (version 0x11) are not supported",
        )),
        v => Err(Error::unsupported(format!(
            "TEVD spec version {v} is not supported"
        ))),
    }
}

/// Scans a TEVD disk: header, every entry header, footer.
pub fn scan(src: &(impl ReadAt + ?Sized), len: u64) -> Result<TevdScan> {
    let layout = detect(src, len)?;
    let mut bytes = vec![0; layout.header_len()];
    if len < bytes.len() as u64 {
        return Err(Error::corrupt("TEVD disk shorter than its header"));
    }
    src.read_exact_at(&mut bytes, 0)?;
    let header = TevdHeader { layout, bytes };
    let mut records = Vec::new();
    let mut pos = layout.header_len() as u64;
    let mut buf = vec![0u8; ENTRY_HEADER_LEN as usize + 12];
    let mut footer = Vec::new();
    while pos < len {
        let avail = (len - pos).min(buf.len() as u64) as usize;
        let chunk = buf.get_mut(..avail).unwrap_or(&mut []);
        src.read_exact_at(chunk, pos)?;
        if layout.has_footer() && chunk.starts_with(&FOOTER_MARK) {
            footer = crate::bytes::read_vec(src, pos, len - pos)?;
            if !footer.ends_with(&FOOTER_END) {
                return Err(Error::corrupt("TEVD footer does not end with FF 19"));
            }
            break;
        }
        let header = TevdEntryHeader::decode(chunk, layout)
            .map_err(|e| e.context(format!("entry at offset {pos}")))?;
        let mut c = Reader::new(chunk.get(ENTRY_HEADER_LEN as usize..).unwrap_or(&[]));
        let short = |_| Error::corrupt(format!("entry at offset {pos} is truncated"));
        let content_len = match header.kind {
            TevdKind::File => 6 + c.u48("file size").map_err(short)?,
            TevdKind::Directory => 2 + 4 * u64::from(c.u16("directory count").map_err(short)?),
            TevdKind::Symlink => 4,
            TevdKind::Compressed => 12 + c.u48("compressed file size").map_err(short)?,
        };
        let record = TevdRecord {
            offset: pos,
            header,
            content_len,
        };
        if record.end() > len {
            return Err(Error::corrupt(format!(
                "entry at offset {pos} runs past the end of the disk"
            )));
        }
        pos = record.end();
        records.push(record);
    }
    if layout.has_footer() && footer.is_empty() {
        return Err(Error::corrupt("TEVD disk has no footer"));
    }
    Ok(TevdScan {
        header,
        records,
        footer,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_entry_round_trip() {
        let h = TevdHeader::new_v3("TVDOS", 737_280).unwrap();
        assert_eq!(
            (h.name(), h.capacity(), h.bytes().len()),
            ("TVDOS".to_string(), 737_280, 64)
        );
        let e = TevdEntryHeader {
            id: -5,
            parent: 0,
            kind: TevdKind::Directory,
            name: b"bin".to_vec(),
            ctime: 1,
            mtime: 2,
            crc: 3,
        };
        let mut out = Vec::new();
        e.encode(&mut out).unwrap();
        assert_eq!(out.len(), 281);
        assert_eq!(TevdEntryHeader::decode(&out, Layout::V3).unwrap(), e);
        assert_eq!(
            decode_dir(&dir_content(&[3, -1, 2]).unwrap()).unwrap(),
            [3, -1, 2]
        );
        assert_eq!(tevd_entry_crc(b"a123b123c"), crc32fast::hash(b"abc"));
    }
}
