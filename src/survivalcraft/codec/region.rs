//! Codec of 2.3+ region files `Regions/Region X,Z.dat` and their chunk payloads.
//!
//! A region holds 16 × 16 chunks (spec §6): magic `RGN1`, 256 directory entries
//! `{i32 offset, i32 size}` (offset 0 = absent), then records `CHK1` + `size` payload bytes.
//! A payload is raw deflate of: 256 shaft bytes `(temperature << 4) | humidity` in x/z order,
//! then the 65536 cells in y/z/x order as runs: the cell value with its light field replaced
//! by the run length (1–15 → light = n−1, 4 bytes; 16–271 → light = 15 plus a byte n−16).
//! Light and the derived heights are not stored, so a decoded region chunk has light 0 and
//! top heights computed from its cells. Payload bytes depend on the deflate implementation,
//! so the round trip is exact on the decoded chunk, not on the compressed bytes.
//!
//! [`patch_region`] places changed payloads the way the game's `RegionFileStorage.Save`
//! does (in place when they fit, append with 1 KiB slack, otherwise a whole rewrite in slot
//! order), keeping every untouched payload's bytes.

use std::io::{Read, Write};

use flate2::read::DeflateDecoder;
use flate2::write::DeflateEncoder;
use flate2::Compression;

use crate::error::{Error, Result};
use crate::survivalcraft::codec::chunk::{Cell, Chunk, ChunkPos, Column};
use crate::survivalcraft::codec::format::TerrainFormat;

/// Bytes before the first record: magic and directory.
pub const HEADER_BYTES: usize = 4 + 256 * 8;
/// Largest payload a reader accepts (spec §6.2).
pub const MAX_PAYLOAD: usize = 1_048_576;
/// Largest region file the game writes (spec §6.2).
pub const MAX_REGION_BYTES: usize = 268_435_456;
/// Slack the game leaves after each record it appends (`CalculateIdealEntrySpace`).
const SLACK: usize = 1024;
/// The game's inflate buffer; a payload inflating to exactly this size is rejected by it.
const WORST_CASE_INFLATED: usize = 256 + 65536 * 4;
/// Largest inflated payload that can be valid: shafts plus 65536 runs of 5 bytes.
const MAX_INFLATED: usize = 256 + 65536 * 5;
const CELLS: usize = 65536;

/// The region `(rx, rz)` holding a chunk, and the chunk's slot in it.
pub fn locate(pos: ChunkPos) -> ((i32, i32), usize) {
    let slot = (pos.cx & 15) as usize + 16 * (pos.cz & 15) as usize;
    ((pos.cx >> 4, pos.cz >> 4), slot)
}

/// The chunk at `slot` of region `(rx, rz)`.
pub fn chunk_at(region: (i32, i32), slot: usize) -> ChunkPos {
    ChunkPos::new(
        region.0 * 16 + (slot % 16) as i32,
        region.1 * 16 + (slot / 16 % 16) as i32,
    )
}

/// The file name of a region: `Region X,Z.dat`.
pub fn region_file_name(region: (i32, i32)) -> String {
    format!("Region {},{}.dat", region.0, region.1)
}

/// Region coordinates from a file name `Region X,Z.dat` (exact decimal spelling only, and
/// only regions whose chunk coordinates fit an i32).
pub fn region_coords(name: &str) -> Option<(i32, i32)> {
    let inner = name.strip_prefix("Region ")?.strip_suffix(".dat")?;
    let (x, z) = inner.split_once(',')?;
    let r: (i32, i32) = (x.parse().ok()?, z.parse().ok()?);
    let fits = |v: i32| (i32::MIN >> 4..=i32::MAX >> 4).contains(&v);
    (fits(r.0) && fits(r.1) && region_file_name(r) == name).then_some(r)
}

/// One present chunk of a region: its slot and where its record lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegionEntry {
    /// Slot `(cx & 15) + 16 * (cz & 15)`.
    pub slot: usize,
    /// Byte offset of the `CHK1` record.
    pub offset: usize,
    /// Payload bytes after `CHK1`.
    pub size: usize,
}

/// A slot whose directory entry is impossible, and why.
pub type BadSlot = (usize, String);

/// Parses the header (the first [`HEADER_BYTES`] bytes) into the present entries and the
/// slots whose entries are impossible (an offset into the directory, a size past the
/// limit): those chunks are unreadable, the others are fine.
pub fn parse_header_lenient(head: &[u8]) -> Result<(Vec<RegionEntry>, Vec<BadSlot>)> {
    if head.get(..4) != Some(b"RGN1".as_slice()) {
        return Err(Error::corrupt("region file has no RGN1 magic"));
    }
    if head.len() < HEADER_BYTES {
        return Err(Error::corrupt("region file is shorter than its directory"));
    }
    let mut out = Vec::new();
    let mut bad = Vec::new();
    for (slot, e) in head[4..HEADER_BYTES].chunks_exact(8).enumerate() {
        let offset = i32::from_le_bytes([e[0], e[1], e[2], e[3]]);
        let size = i32::from_le_bytes([e[4], e[5], e[6], e[7]]);
        if offset == 0 {
            continue;
        }
        if offset < HEADER_BYTES as i32 || !(0..=MAX_PAYLOAD as i32).contains(&size) {
            bad.push((
                slot,
                format!("region slot {slot}: bad entry offset {offset}, size {size}"),
            ));
            continue;
        }
        out.push(RegionEntry {
            slot,
            offset: offset as usize,
            size: size as usize,
        });
    }
    Ok((out, bad))
}

/// Parses the header; any impossible entry is an error (a region is only rewritten whole
/// when every entry in it is sound).
pub fn parse_header(head: &[u8]) -> Result<Vec<RegionEntry>> {
    let (entries, bad) = parse_header_lenient(head)?;
    match bad.into_iter().next() {
        Some((_, why)) => Err(Error::corrupt(why)),
        None => Ok(entries),
    }
}

/// The payload of an entry in a whole region file.
pub fn record_payload<'a>(file: &'a [u8], e: &RegionEntry) -> Result<&'a [u8]> {
    let rec = file.get(e.offset..e.offset + 4 + e.size).ok_or_else(|| {
        Error::corrupt(format!(
            "region slot {}: record past the end of the file",
            e.slot
        ))
    })?;
    if &rec[..4] != b"CHK1" {
        return Err(Error::corrupt(format!(
            "region slot {}: no CHK1 magic",
            e.slot
        )));
    }
    Ok(&rec[4..])
}

/// Decodes a chunk payload (raw deflate).
pub fn decode_payload(payload: &[u8]) -> Result<Chunk> {
    let mut raw = Vec::new();
    DeflateDecoder::new(payload)
        .take(MAX_INFLATED as u64 + 1)
        .read_to_end(&mut raw)
        .map_err(|e| Error::corrupt(format!("chunk payload does not inflate: {e}")))?;
    if raw.len() > MAX_INFLATED {
        return Err(Error::corrupt(
            "chunk payload inflates past the largest valid chunk",
        ));
    }
    let shafts = raw
        .get(..256)
        .ok_or_else(|| Error::corrupt("chunk payload has no shafts"))?;
    let mut columns = vec![Column::default(); 256];
    for x in 0..16 {
        for z in 0..16 {
            let b = shafts[x * 16 + z];
            columns[z * 16 + x] = Column {
                temperature: b >> 4,
                humidity: b & 15,
                ..Column::default()
            };
        }
    }
    let mut cells = Vec::with_capacity(CELLS);
    let mut pos = 256;
    while pos < raw.len() {
        let b = raw
            .get(pos..pos + 4)
            .ok_or_else(|| Error::corrupt("chunk data ends inside a run"))?;
        let v = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        let code = (v >> 10) & 15;
        let n = if code < 15 {
            pos += 4;
            code as usize + 1
        } else {
            let extra = *raw
                .get(pos + 4)
                .ok_or_else(|| Error::corrupt("chunk data ends inside a run"))?;
            pos += 5;
            usize::from(extra) + 16
        };
        if cells.len() + n > CELLS {
            return Err(Error::corrupt("chunk data has more than 65536 cells"));
        }
        let mut cell = Cell::from_value32(v);
        cell.light = 0;
        cells.extend(std::iter::repeat(cell).take(n));
    }
    if cells.len() != CELLS {
        return Err(Error::corrupt(format!(
            "chunk data has {} cells, not 65536",
            cells.len()
        )));
    }
    let mut chunk = Chunk::from_parts(TerrainFormat::Regions, cells, columns)
        .map_err(|e| Error::corrupt(e.message()))?;
    fill_tops(&mut chunk)?;
    Ok(chunk)
}

fn fill_tops(chunk: &mut Chunk) -> Result<()> {
    for z in 0..16 {
        for x in 0..16 {
            let mut c = chunk.column(x, z).unwrap_or_default();
            c.top = chunk.computed_top(x, z);
            chunk.set_column(x, z, c)?;
        }
    }
    Ok(())
}

/// Encodes a region chunk's payload (light and heights are not stored).
pub fn encode_payload(chunk: &Chunk) -> Result<Vec<u8>> {
    if chunk.format() != TerrainFormat::Regions {
        return Err(Error::invalid(format!(
            "a {:?} chunk is not a region chunk",
            chunk.format()
        )));
    }
    let mut raw = Vec::with_capacity(256 + 4096);
    for x in 0..16 {
        for z in 0..16 {
            let c = chunk.column(x, z).unwrap_or_default();
            raw.push((c.temperature << 4) | (c.humidity & 15));
        }
    }
    let mut run: Option<(u32, usize)> = None;
    let flush = |raw: &mut Vec<u8>, v: u32, n: usize| {
        if n <= 15 {
            raw.extend_from_slice(&(v | ((n as u32 - 1) << 10)).to_le_bytes());
        } else {
            raw.extend_from_slice(&(v | (15 << 10)).to_le_bytes());
            raw.push((n - 16) as u8);
        }
    };
    for c in chunk.cells() {
        let v = Cell { light: 0, ..*c }.value32();
        run = match run {
            Some((rv, n)) if rv == v && n < 271 => Some((rv, n + 1)),
            Some((rv, n)) => {
                flush(&mut raw, rv, n);
                Some((v, 1))
            }
            None => Some((v, 1)),
        };
    }
    if let Some((rv, n)) = run {
        flush(&mut raw, rv, n);
    }
    if raw.len() == WORST_CASE_INFLATED {
        return Err(Error::unsupported(
            "chunk has no two equal neighbouring cells; the game rejects such a chunk",
        ));
    }
    let mut enc = DeflateEncoder::new(Vec::new(), Compression::fast());
    enc.write_all(&raw)?;
    Ok(enc.finish()?)
}

fn put_entry(file: &mut [u8], slot: usize, offset: usize, size: usize) -> Result<()> {
    let at = 4 + slot * 8;
    let o = i32::try_from(offset).map_err(|_| Error::unsupported("region file too large"))?;
    let s = i32::try_from(size).map_err(|_| Error::unsupported("chunk payload too large"))?;
    let e = file
        .get_mut(at..at + 8)
        .ok_or_else(|| Error::corrupt("region file shorter than its directory"))?;
    e[..4].copy_from_slice(&o.to_le_bytes());
    e[4..].copy_from_slice(&s.to_le_bytes());
    Ok(())
}

/// A whole region written the way the game rewrites one: records in slot order from
/// offset 2052, each followed by 1 KiB of slack.
pub fn build_region(payloads: &[(usize, &[u8])]) -> Result<Vec<u8>> {
    let mut sorted: Vec<&(usize, &[u8])> = payloads.iter().collect();
    sorted.sort_by_key(|p| p.0);
    let mut file = vec![0u8; HEADER_BYTES];
    file[..4].copy_from_slice(b"RGN1");
    for (slot, data) in sorted {
        if *slot >= 256 || data.len() > MAX_PAYLOAD {
            return Err(Error::invalid(format!(
                "region slot {slot}: bad slot or payload size"
            )));
        }
        let offset = file.len();
        file.extend_from_slice(b"CHK1");
        file.extend_from_slice(data);
        file.resize(file.len() + SLACK, 0);
        put_entry(&mut file, *slot, offset, data.len())?;
    }
    if file.len() > MAX_REGION_BYTES {
        return Err(Error::unsupported("region file would exceed 256 MiB"));
    }
    Ok(file)
}

/// A region file (`old`, or `None` for a new one) with `changes` (slot, new payload)
/// placed the way the game's `RegionFileStorage.Save` places them. Untouched payloads keep
/// their bytes; if nothing fits, the whole region is rewritten in slot order.
pub fn patch_region(old: Option<&[u8]>, changes: &[(usize, Vec<u8>)]) -> Result<Vec<u8>> {
    let Some(old) = old else {
        let p: Vec<(usize, &[u8])> = changes.iter().map(|(s, d)| (*s, d.as_slice())).collect();
        return build_region(&p);
    };
    let entries = parse_header(old)?;
    for e in &entries {
        record_payload(old, e)?;
    }
    let mut file = old.to_vec();
    let mut live = entries.clone();
    for (slot, data) in changes {
        if *slot >= 256 || data.len() > MAX_PAYLOAD {
            return Err(Error::invalid(format!(
                "region slot {slot}: bad slot or payload size"
            )));
        }
        let placed = match live.iter().position(|e| e.slot == *slot) {
            None => {
                let offset = file.len();
                file.extend_from_slice(b"CHK1");
                file.extend_from_slice(data);
                file.resize(file.len() + SLACK, 0);
                live.push(RegionEntry {
                    slot: *slot,
                    offset,
                    size: data.len(),
                });
                true
            }
            Some(i) => {
                let offset = live[i].offset;
                let next = live
                    .iter()
                    .filter(|e| e.slot != *slot && e.offset >= offset)
                    .map(|e| e.offset)
                    .min();
                let room = next.map(|n| n.saturating_sub(offset + 4));
                if room.map_or(true, |r| data.len() <= r) {
                    let end = offset + 4 + data.len();
                    if end > file.len() {
                        file.resize(end + SLACK, 0);
                    }
                    file[offset + 4..end].copy_from_slice(data);
                    live[i].size = data.len();
                    true
                } else {
                    false
                }
            }
        };
        if !placed {
            return rewrite_region(old, &entries, changes);
        }
        let e = live.iter().find(|e| e.slot == *slot).copied();
        if let Some(e) = e {
            put_entry(&mut file, e.slot, e.offset, e.size)?;
        }
    }
    if file.len() > MAX_REGION_BYTES {
        return rewrite_region(old, &entries, changes);
    }
    Ok(file)
}

fn rewrite_region(
    old: &[u8],
    entries: &[RegionEntry],
    changes: &[(usize, Vec<u8>)],
) -> Result<Vec<u8>> {
    let mut payloads: Vec<(usize, &[u8])> = Vec::new();
    for e in entries {
        if !changes.iter().any(|(s, _)| *s == e.slot) {
            payloads.push((e.slot, record_payload(old, e)?));
        }
    }
    for (s, d) in changes {
        payloads.retain(|p| p.0 != *s);
        payloads.push((*s, d.as_slice()));
    }
    build_region(&payloads)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the store goes by to open a region file (its name, then its magic); other files
    /// of a world folder are not regions.
    #[test]
    fn region_files_are_told_by_name_and_magic() {
        assert!(region_coords("Chunks32fs.dat").is_none());
        assert!(region_coords("Project.xml").is_none());
        assert_eq!(region_coords("Region -1,2.dat"), Some((-1, 2)));
        let mut head = vec![0; HEADER_BYTES];
        head[..4].copy_from_slice(b"XXXX");
        assert!(parse_header(&head).is_err());
        head[..4].copy_from_slice(b"RGN1");
        assert_eq!(parse_header(&head).unwrap(), []);
    }

    fn terrain() -> Chunk {
        let mut c = Chunk::empty(TerrainFormat::Regions);
        for y in 0..60 {
            for z in 0..16 {
                for x in 0..16 {
                    let id = if y < 50 { 3 } else { 2 + ((x + z) % 3) as u16 };
                    c.set_cell(
                        x,
                        y,
                        z,
                        Cell {
                            id,
                            light: 0,
                            data: (y % 5) as u32,
                        },
                    )
                    .unwrap();
                }
            }
        }
        c.set_column(
            2,
            3,
            Column {
                top: 59,
                temperature: 12,
                humidity: 4,
                ..Column::default()
            },
        )
        .unwrap();
        c
    }

    #[test]
    fn payloads_round_trip() {
        let c = terrain();
        let back = decode_payload(&encode_payload(&c).unwrap()).unwrap();
        assert_eq!(back.cells(), c.cells());
        assert_eq!(back.column(2, 3).unwrap().temperature, 12);
        assert_eq!(back.column(2, 3).unwrap().humidity, 4);
        assert_eq!(back.column(0, 0).unwrap().top, 59);
    }

    #[test]
    fn runs_split_at_271() {
        let c = Chunk::empty(TerrainFormat::Regions);
        let p = encode_payload(&c).unwrap();
        let mut raw = Vec::new();
        DeflateDecoder::new(p.as_slice())
            .read_to_end(&mut raw)
            .unwrap();
        // 65536 = 241 * 271 + 225: 242 long runs of 5 bytes.
        assert_eq!(raw.len(), 256 + 242 * 5);
        assert_eq!(raw[256 + 4], 255);
    }

    #[test]
    fn positions_map_to_regions() {
        assert_eq!(locate(ChunkPos::new(-1, 33)), ((-1, 2), 15 + 16));
        assert_eq!(chunk_at((-1, 2), 31), ChunkPos::new(-1, 33));
        assert_eq!(region_coords("Region -1,2.dat"), Some((-1, 2)));
        assert_eq!(region_coords("Region -1, 2.dat"), None);
        assert_eq!(region_coords("Region 01,2.dat"), None);
    }

    #[test]
    fn patching_keeps_untouched_payloads() {
        let a = encode_payload(&terrain()).unwrap();
        let b = encode_payload(&Chunk::empty(TerrainFormat::Regions)).unwrap();
        let file = patch_region(None, &[(5, a.clone()), (1, b.clone())]).unwrap();
        let entries = parse_header(&file).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].offset, HEADER_BYTES);
        // Smaller payload fits in place.
        let f2 = patch_region(Some(&file), &[(5, b.clone())]).unwrap();
        assert_eq!(f2.len(), file.len());
        let e2 = parse_header(&f2).unwrap();
        assert_eq!(record_payload(&f2, &e2[0]).unwrap(), b.as_slice());
        assert_eq!(record_payload(&f2, &e2[1]).unwrap(), b.as_slice());
        // A bigger payload in a non-last slot forces a rewrite; slot 5 stays intact.
        let big: Vec<u8> = (0..5000u32).map(|i| (i * 7919 % 251) as u8).collect();
        let f3 = patch_region(Some(&file), &[(1, big.clone())]).unwrap();
        let e3 = parse_header(&f3).unwrap();
        assert_eq!(record_payload(&f3, &e3[0]).unwrap(), big.as_slice());
        assert_eq!(record_payload(&f3, &e3[1]).unwrap(), a.as_slice());
    }

    #[test]
    fn overlapping_records_do_not_panic() {
        let mut file = patch_region(None, &[(0, vec![1, 2, 3])]).unwrap();
        // Slot 1 claims a record 2 bytes after slot 0's: CHK1 is not there.
        put_entry(&mut file, 1, HEADER_BYTES + 2, 0).unwrap();
        assert!(patch_region(Some(&file), &[(0, vec![9; 10])]).is_err());
        // Slot 1 shares slot 0's record: an in-place write has no room and forces a rewrite.
        put_entry(&mut file, 1, HEADER_BYTES, 3).unwrap();
        let out = patch_region(Some(&file), &[(0, vec![9; 10])]).unwrap();
        let e = parse_header(&out).unwrap();
        assert_eq!(record_payload(&out, &e[1]).unwrap(), &[1, 2, 3]);
    }

    #[test]
    fn bad_payloads_are_errors() {
        let p = encode_payload(&terrain()).unwrap();
        assert!(decode_payload(&p[..p.len() / 2]).is_err());
        assert!(decode_payload(&[]).is_err());
        let mut enc = DeflateEncoder::new(Vec::new(), Compression::fast());
        enc.write_all(&[0u8; 256 + 8]).unwrap();
        assert!(decode_payload(&enc.finish().unwrap()).is_err());
    }
}
