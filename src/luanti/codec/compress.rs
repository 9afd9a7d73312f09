//! The compressed parts of a block: zlib streams (versions ≤ 28) and one zstd frame (29).
//!
//! Like the engine (`decompressZlib`/`decompressZstd`), decompression stops at the end of
//! the stream or frame and reports how much input it used, because the block continues
//! right after it. The output is bounded by a budget shared by all parts of a block, so a
//! hostile blob cannot make us allocate more than [`super::MAX_DECOMPRESSED`] bytes.

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};
use zstd::stream::raw::{Decoder, InBuffer, Operation, OutBuffer};

use crate::error::{Error, Result};

/// Output is grown in steps of at most this much.
const STEP: usize = 64 << 10;

/// Reserves room for the next step of output, failing when the budget is spent.
fn grow(out: &mut Vec<u8>, budget: usize, what: &str) -> Result<()> {
    if out.len() >= budget {
        return Err(Error::corrupt(format!(
            "{what}: decompresses to more than {budget} bytes"
        )));
    }
    let step = out.len().clamp(4096, STEP).min(budget - out.len());
    out.reserve_exact(step);
    Ok(())
}

/// Inflates the zlib stream at the start of `input`; returns the data and the number of
/// input bytes the stream occupied. `budget` is reduced by the output length.
pub fn inflate_zlib(input: &[u8], budget: &mut usize, what: &str) -> Result<(Vec<u8>, usize)> {
    let mut z = Decompress::new(true);
    let mut out = Vec::new();
    loop {
        if out.len() == out.capacity() {
            grow(&mut out, *budget, what)?;
        }
        let used = usize::try_from(z.total_in()).unwrap_or(usize::MAX);
        let before = (z.total_in(), z.total_out());
        let status = z
            .decompress_vec(
                input.get(used..).unwrap_or_default(),
                &mut out,
                FlushDecompress::None,
            )
            .map_err(|e| Error::corrupt(format!("{what}: zlib: {e}")))?;
        if status == Status::StreamEnd {
            break;
        }
        if (z.total_in(), z.total_out()) == before && out.len() < out.capacity() {
            return Err(Error::corrupt(format!(
                "{what}: data ends inside the zlib stream"
            )));
        }
    }
    *budget -= out.len();
    let used = usize::try_from(z.total_in()).unwrap_or(usize::MAX);
    Ok((out, used))
}

/// Decodes the zstd frame at the start of `input` (the content-size field is optional);
/// returns the data and the number of input bytes the frame occupied.
pub fn decode_zstd(input: &[u8], budget: &mut usize, what: &str) -> Result<(Vec<u8>, usize)> {
    let zerr = |e: std::io::Error| Error::corrupt(format!("{what}: zstd: {e}"));
    let mut decoder = Decoder::new().map_err(zerr)?;
    let mut out: Vec<u8> = Vec::new();
    let mut used = 0usize;
    loop {
        if out.len() == out.capacity() {
            grow(&mut out, *budget, what)?;
        }
        let mut inb = InBuffer::around(input.get(used..).unwrap_or_default());
        let start = out.len();
        let mut outb = OutBuffer::around_pos(&mut out, start);
        let hint = decoder.run(&mut inb, &mut outb).map_err(zerr)?;
        let written = outb.pos() - start;
        used += inb.pos();
        if hint == 0 {
            break;
        }
        if inb.pos() == 0 && written == 0 && out.len() < out.capacity() {
            return Err(Error::corrupt(format!(
                "{what}: data ends inside the zstd frame"
            )));
        }
    }
    *budget -= out.len();
    Ok((out, used))
}

/// Compresses `data` as one zlib stream at the default level (as the engine does).
pub fn deflate_zlib(data: &[u8], out: &mut Vec<u8>) -> Result<()> {
    let mut z = Compress::new(Compression::default(), true);
    out.reserve(data.len() / 4 + 64);
    loop {
        let used = usize::try_from(z.total_in()).unwrap_or(usize::MAX);
        let status = z
            .compress_vec(
                data.get(used..).unwrap_or_default(),
                out,
                FlushCompress::Finish,
            )
            .map_err(|e| Error::new(libc::EIO, format!("zlib compression failed: {e}")))?;
        if status == Status::StreamEnd {
            return Ok(());
        }
        out.reserve(out.capacity().max(256));
    }
}

/// Compresses `data` as one zstd frame at the library's default level (as the engine does).
pub fn encode_zstd(data: &[u8], out: &mut Vec<u8>) -> Result<()> {
    let frame = zstd::bulk::compress(data, 0)
        .map_err(|e| Error::new(libc::EIO, format!("zstd compression failed: {e}")))?;
    out.extend_from_slice(&frame);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zlib_stream_end_is_found_and_trailing_bytes_left() {
        let data: Vec<u8> = (0..50_000u32).map(|i| (i % 251) as u8).collect();
        let mut blob = Vec::new();
        deflate_zlib(&data, &mut blob).unwrap();
        let len = blob.len();
        blob.extend_from_slice(b"rest");
        let mut budget = 1 << 20;
        let (out, used) = inflate_zlib(&blob, &mut budget, "t").unwrap();
        assert_eq!(out, data);
        assert_eq!(used, len);
        assert_eq!(budget, (1 << 20) - data.len());
        for cut in [0, 1, 2, len / 2, len - 1] {
            let mut budget = 1 << 20;
            assert!(inflate_zlib(&blob[..cut], &mut budget, "t").is_err());
        }
    }

    #[test]
    fn budget_is_enforced() {
        let data = vec![0u8; 100_000];
        let mut z = Vec::new();
        deflate_zlib(&data, &mut z).unwrap();
        let mut budget = 99_999;
        assert!(inflate_zlib(&z, &mut budget, "t").is_err());
        let mut zs = Vec::new();
        encode_zstd(&data, &mut zs).unwrap();
        let mut budget = 99_999;
        assert!(decode_zstd(&zs, &mut budget, "t").is_err());
        let mut budget = 100_000;
        assert_eq!(decode_zstd(&zs, &mut budget, "t").unwrap().0, data);
    }

    #[test]
    fn zstd_frame_without_content_size_stops_at_frame_end() {
        let data: Vec<u8> = (0..20_000u32).map(|i| (i * 7 % 13) as u8).collect();
        let mut enc = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
        enc.include_contentsize(false).unwrap();
        std::io::Write::write_all(&mut enc, &data).unwrap();
        let mut blob = enc.finish().unwrap();
        let len = blob.len();
        blob.extend_from_slice(&blob.clone());
        let mut budget = 1 << 20;
        let (out, used) = decode_zstd(&blob, &mut budget, "t").unwrap();
        assert_eq!(out, data);
        assert_eq!(used, len);
        for cut in [0, 3, len / 2, len - 1] {
            let mut budget = 1 << 20;
            assert!(decode_zstd(&blob[..cut], &mut budget, "t").is_err());
        }
    }
}
