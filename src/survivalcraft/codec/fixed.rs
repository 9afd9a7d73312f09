//! Codec of the fixed-size chunk files `Chunks.dat`, `Chunks32.dat` and `Chunks32h.dat`.
//!
//! Layout (spec §2–§4): a directory of 65537 entries `{i32 cx, i32 cz, i32 where}` (786444
//! bytes), then one fixed-size record per chunk: magic `0xDEADBEEF`, `0xFFFFFFFF` (16-bit
//! cells) or `0xFFFFFFFE` (32-bit cells), cx, cz, the cells in x/z/y order (x outermost, y
//! innermost), then 256 u32 shafts in x/z order. `where` is an absolute byte offset in
//! `Chunks.dat` (list ends at the first 0) and a slot index in the others (list ends at the
//! first negative index). All little-endian. Decoding then encoding a record gives the same
//! bytes: every bit of the record is held by [`Chunk`] or is the header.

use crate::error::{Error, Result};
use crate::survivalcraft::codec::chunk::{Cell, Chunk, ChunkPos, Column};
use crate::survivalcraft::codec::format::{TerrainFormat, DIRECTORY_BYTES, MAX_DIRECTORY_CHUNKS};

const MAGIC1: u32 = 0xDEAD_BEEF;

/// One listed chunk: its position, its directory slot and where its record starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirectoryEntry {
    /// Chunk position from the directory (authoritative; the record header is ignored).
    pub pos: ChunkPos,
    /// Slot number in the directory (0-based).
    pub slot: usize,
    /// Absolute byte offset of the chunk record.
    pub offset: u64,
}

fn magic2(format: TerrainFormat) -> Result<u32> {
    match format {
        TerrainFormat::Chunks16 => Ok(0xFFFF_FFFF),
        TerrainFormat::Chunks32 | TerrainFormat::Chunks32h => Ok(0xFFFF_FFFE),
        TerrainFormat::Regions => Err(Error::invalid("region chunks are not fixed-size records")),
    }
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

fn i32_at(b: &[u8], at: usize) -> Option<i32> {
    u32_at(b, at).map(|v| v as i32)
}

/// Byte offset of slot `slot`'s record in a 32-bit chunk file.
pub fn slot_offset(format: TerrainFormat, slot: usize) -> u64 {
    DIRECTORY_BYTES as u64 + format.record_bytes() as u64 * slot as u64
}

/// Parses the directory (the first [`DIRECTORY_BYTES`] bytes, or fewer for a short file).
pub fn parse_directory(format: TerrainFormat, dir: &[u8]) -> Result<Vec<DirectoryEntry>> {
    magic2(format)?;
    let mut entries = Vec::new();
    for slot in 0..MAX_DIRECTORY_CHUNKS {
        let at = slot * 12;
        let (Some(cx), Some(cz), Some(w)) =
            (i32_at(dir, at), i32_at(dir, at + 4), i32_at(dir, at + 8))
        else {
            break;
        };
        let offset = if format == TerrainFormat::Chunks16 {
            if w == 0 {
                break;
            }
            if (w as i64) < DIRECTORY_BYTES as i64 {
                return Err(Error::corrupt(format!(
                    "directory slot {slot}: chunk offset {w} points into the directory"
                )));
            }
            w as u64
        } else {
            if w < 0 {
                break;
            }
            slot_offset(format, w as usize)
        };
        entries.push(DirectoryEntry {
            pos: ChunkPos::new(cx, cz),
            slot,
            offset,
        });
    }
    Ok(entries)
}

/// The 12 directory bytes for a chunk at `slot` whose record starts at `offset`.
pub fn encode_entry(
    format: TerrainFormat,
    pos: ChunkPos,
    slot: usize,
    offset: u64,
) -> Result<[u8; 12]> {
    magic2(format)?;
    let w = if format == TerrainFormat::Chunks16 {
        i32::try_from(offset).map_err(|_| Error::unsupported("Chunks.dat is limited to 2 GiB"))?
    } else {
        i32::try_from(slot).map_err(|_| Error::unsupported("too many chunks"))?
    };
    let mut e = [0u8; 12];
    e[0..4].copy_from_slice(&pos.cx.to_le_bytes());
    e[4..8].copy_from_slice(&pos.cz.to_le_bytes());
    e[8..12].copy_from_slice(&w.to_le_bytes());
    Ok(e)
}

/// A fresh, empty directory as the game creates it (`{0,0,0}` or `{0,0,-1}` entries).
pub fn empty_directory(format: TerrainFormat) -> Result<Vec<u8>> {
    magic2(format)?;
    let mut dir = vec![0u8; DIRECTORY_BYTES];
    if format != TerrainFormat::Chunks16 {
        for e in dir.chunks_exact_mut(12) {
            e[8..12].copy_from_slice(&(-1i32).to_le_bytes());
        }
    }
    Ok(dir)
}

/// Decodes one chunk record; returns the header's position (the game ignores it) too.
pub fn decode_record(format: TerrainFormat, rec: &[u8]) -> Result<(ChunkPos, Chunk)> {
    let m2 = magic2(format)?;
    if rec.len() != format.record_bytes() {
        return Err(Error::corrupt(format!(
            "chunk record is {} bytes, a {format:?} record is {}",
            rec.len(),
            format.record_bytes()
        )));
    }
    if u32_at(rec, 0) != Some(MAGIC1) || u32_at(rec, 4) != Some(m2) {
        return Err(Error::corrupt("chunk record has a bad magic"));
    }
    let header = ChunkPos::new(i32_at(rec, 8).unwrap_or(0), i32_at(rec, 12).unwrap_or(0));
    let h = format.height();
    let mut chunk = Chunk::empty(format);
    let mut cells = chunk.cells().to_vec();
    let body = rec.get(16..).unwrap_or_default();
    let wide = format != TerrainFormat::Chunks16;
    let cell_bytes = if wide { 4 } else { 2 };
    for x in 0..16 {
        for z in 0..16 {
            for y in 0..h {
                let at = (((x * 16 + z) * h) + y) * cell_bytes;
                let cell = if wide {
                    u32_at(body, at).map(Cell::from_value32)
                } else {
                    body.get(at..at + 2)
                        .map(|b| Cell::from_value16(u16::from_le_bytes([b[0], b[1]])))
                };
                if let (Some(c), Some(slot)) = (cell, cells.get_mut(Chunk::index(x, y, z))) {
                    *slot = c;
                }
            }
        }
    }
    let shafts_at = 16 + 256 * h * cell_bytes;
    let mut columns = vec![Column::default(); 256];
    for x in 0..16 {
        for z in 0..16 {
            let v = u32_at(rec, shafts_at + (x * 16 + z) * 4).unwrap_or(0);
            if let Some(c) = columns.get_mut(z * 16 + x) {
                *c = Column::from_shaft(v);
            }
        }
    }
    chunk = Chunk::from_parts(format, cells, columns).map_err(|e| Error::corrupt(e.message()))?;
    Ok((header, chunk))
}

/// Encodes a chunk as a record of its own format with `pos` in the header.
pub fn encode_record(chunk: &Chunk, pos: ChunkPos) -> Result<Vec<u8>> {
    let format = chunk.format();
    let m2 = magic2(format)?;
    let h = format.height();
    let mut rec = Vec::with_capacity(format.record_bytes());
    rec.extend_from_slice(&MAGIC1.to_le_bytes());
    rec.extend_from_slice(&m2.to_le_bytes());
    rec.extend_from_slice(&pos.cx.to_le_bytes());
    rec.extend_from_slice(&pos.cz.to_le_bytes());
    for x in 0..16 {
        for z in 0..16 {
            for y in 0..h {
                let c = chunk.cell(x, y, z).unwrap_or_default();
                if format == TerrainFormat::Chunks16 {
                    rec.extend_from_slice(&c.value16().to_le_bytes());
                } else {
                    rec.extend_from_slice(&c.value32().to_le_bytes());
                }
            }
        }
    }
    for x in 0..16 {
        for z in 0..16 {
            let s = chunk.column(x, z).unwrap_or_default().shaft();
            rec.extend_from_slice(&s.to_le_bytes());
        }
    }
    Ok(rec)
}

/// Checks the start of a chunk file against its format: the first directory entry and,
/// when `head` reaches it, the record at the start of the data area (where the game puts
/// the first chunk). Catches a 32-bit file under a 16-bit name and the reverse.
pub fn check_head(format: TerrainFormat, head: &[u8]) -> Result<()> {
    let m2 = magic2(format)?;
    let listed = match i32_at(head, 8) {
        None => return Ok(()),
        Some(w) if format == TerrainFormat::Chunks16 => {
            if w != 0 && w as usize != DIRECTORY_BYTES {
                return Err(Error::corrupt(format!(
                    "first directory entry points at {w}, not at {DIRECTORY_BYTES}: not a Chunks.dat"
                )));
            }
            w != 0
        }
        Some(w) => {
            if w > 0 {
                return Err(Error::corrupt(format!(
                    "first directory entry is slot {w}, not 0"
                )));
            }
            w == 0
        }
    };
    match (u32_at(head, DIRECTORY_BYTES), u32_at(head, DIRECTORY_BYTES + 4)) {
        (Some(a), Some(b)) if (a == MAGIC1 || listed) && (a != MAGIC1 || b != m2) => Err(Error::corrupt(format!(
            "first chunk record has magic {a:#010x} {b:#010x}, expected {MAGIC1:#010x} {m2:#010x} for {format:?}"
        ))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_chunk(format: TerrainFormat) -> Chunk {
        let mut c = Chunk::empty(format);
        for (i, (x, y, z)) in [(0, 0, 0), (15, 3, 0), (0, 5, 15), (7, 127, 9)]
            .into_iter()
            .enumerate()
        {
            let cell = Cell {
                id: 10 + i as u16,
                light: i as u8,
                data: i as u32,
            };
            c.set_cell(x, y, z, cell).unwrap();
        }
        c.set_column(
            3,
            4,
            Column {
                top: 5,
                temperature: 6,
                humidity: 7,
                bottom: 8,
                sunlight: 9,
            },
        )
        .unwrap();
        c
    }

    #[test]
    fn records_round_trip_exactly() {
        for f in [
            TerrainFormat::Chunks16,
            TerrainFormat::Chunks32,
            TerrainFormat::Chunks32h,
        ] {
            let c = sample_chunk(f);
            let rec = encode_record(&c, ChunkPos::new(-2, 9)).unwrap();
            assert_eq!(rec.len(), f.record_bytes());
            let (pos, back) = decode_record(f, &rec).unwrap();
            assert_eq!(pos, ChunkPos::new(-2, 9));
            assert_eq!(back, c);
            assert_eq!(encode_record(&back, pos).unwrap(), rec);
        }
    }

    #[test]
    fn file_order_is_x_outer_z_middle_y_inner() {
        let mut c = Chunk::empty(TerrainFormat::Chunks16);
        c.set_cell(
            1,
            2,
            3,
            Cell {
                id: 77,
                light: 0,
                data: 0,
            },
        )
        .unwrap();
        let rec = encode_record(&c, ChunkPos::new(0, 0)).unwrap();
        let (x, z, y) = (1, 3, 2);
        let at = 16 + ((x * 16 + z) * 128 + y) * 2;
        assert_eq!(rec[at], 77);
        c.set_column(
            1,
            3,
            Column {
                top: 200,
                ..Column::default()
            },
        )
        .unwrap();
        let rec = encode_record(&c, ChunkPos::new(0, 0)).unwrap();
        assert_eq!(rec[16 + 65536 + (x * 16 + z) * 4], 200);
    }

    #[test]
    fn directories_list_until_the_end_marker() {
        for f in [TerrainFormat::Chunks16, TerrainFormat::Chunks32h] {
            let mut dir = empty_directory(f).unwrap();
            assert!(parse_directory(f, &dir).unwrap().is_empty());
            for slot in 0..3 {
                let off = slot_offset(f, slot);
                let e = encode_entry(f, ChunkPos::new(slot as i32, -1), slot, off).unwrap();
                dir[slot * 12..slot * 12 + 12].copy_from_slice(&e);
            }
            let list = parse_directory(f, &dir).unwrap();
            assert_eq!(list.len(), 3);
            assert_eq!(list[2].offset, slot_offset(f, 2));
            assert_eq!(list[2].pos, ChunkPos::new(2, -1));
        }
    }

    #[test]
    fn bad_records_are_errors() {
        let rec =
            encode_record(&sample_chunk(TerrainFormat::Chunks32), ChunkPos::new(0, 0)).unwrap();
        assert!(decode_record(TerrainFormat::Chunks32, &rec[..rec.len() - 1]).is_err());
        assert!(decode_record(TerrainFormat::Chunks16, &rec).is_err());
        let mut bad = rec.clone();
        bad[5] ^= 1;
        assert!(decode_record(TerrainFormat::Chunks32, &bad).is_err());
        // A 32-bit cell with id 1023 and every data bit set still decodes.
        let mut full = rec;
        full[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode_record(TerrainFormat::Chunks32, &full).is_ok());
    }
}
