//! The compressed parts of a block: zlib streams (versions ≤ 28) and one zstd frame (29).
//!
//! Like the engine (`decompressZlib`/`decompressZstd`), decompression stops at the end of
//! the stream or frame and reports how much input it used, because the block continues
//! right after it. The output is bounded by a budget shared by all parts of a block, so a
//! hostile blob cannot make us allocate more than [`super::MAX_DECOMPRESSED`] bytes.
//!
//! Each thread keeps its zstd and zlib decompressors and its zstd compressor and resets them
//! per stream: creating a zstd context costs more than decompressing a whole block, and
//! more than compressing one (a rename re-encodes tens of thousands of blocks). A complete zstd frame is
//! decompressed in one call straight into its output (into the size its header states, or,
//! as the engine writes none, into 64 KiB); only frames larger than that are streamed.

use std::cell::RefCell;

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};
use zstd::bulk::{Compressor, Decompressor};
use zstd::stream::raw::{Decoder, InBuffer, Operation, OutBuffer};
use zstd::zstd_safe;

use crate::error::{Error, Result};

/// Output is grown in steps of at most this much.
const STEP: usize = 64 << 10;

thread_local! {
    static ZSTD: RefCell<Option<Decoder<'static>>> = const { RefCell::new(None) };
    static ZSTD_BULK: RefCell<Option<Decompressor<'static>>> = const { RefCell::new(None) };
    static ZLIB: RefCell<Option<Decompress>> = const { RefCell::new(None) };
    static ZSTD_COMPRESSOR: RefCell<Option<Compressor<'static>>> = const { RefCell::new(None) };
    static ZLIB_COMPRESSOR: RefCell<Option<Compress>> = const { RefCell::new(None) };
}

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
    ZLIB.with(|cell| {
        // A re-entrant call (none exists today) would find the cell borrowed: use a fresh one.
        let Ok(mut slot) = cell.try_borrow_mut() else {
            return inflate_with(&mut Decompress::new(true), input, budget, what);
        };
        let z = slot.get_or_insert_with(|| Decompress::new(true));
        z.reset(true);
        inflate_with(z, input, budget, what)
    })
}

fn inflate_with(
    z: &mut Decompress,
    input: &[u8],
    budget: &mut usize,
    what: &str,
) -> Result<(Vec<u8>, usize)> {
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
    if let Some(done) = decode_whole_frame(input, budget, what) {
        return done;
    }
    let zerr = |e: std::io::Error| Error::corrupt(format!("{what}: zstd: {e}"));
    ZSTD.with(|cell| {
        // A re-entrant call (none exists today) would find the cell borrowed: use a fresh one.
        let Ok(mut slot) = cell.try_borrow_mut() else {
            return decode_with(&mut Decoder::new().map_err(zerr)?, input, budget, what);
        };
        let decoder = match slot.as_mut() {
            Some(d) => {
                d.reinit().map_err(zerr)?;
                d
            }
            None => slot.insert(Decoder::new().map_err(zerr)?),
        };
        let result = decode_with(decoder, input, budget, what);
        // The decoder keeps a window as large as the frame asked for (up to 128 MiB): after
        // a large or failed frame, drop it rather than keep that memory for the thread's life.
        if result
            .as_ref()
            .map_or(true, |(out, _)| out.len() > KEEP_DECODER)
        {
            *slot = None;
        }
        result
    })
}

/// Output size up to which the thread's streaming zstd decoder is kept for the next frame
/// (and input size up to which its compressor is).
const KEEP_DECODER: usize = 1 << 20;

/// Output room tried for a frame that does not state its size: a block's node data is 16 KiB
/// and its metadata usually small; bigger frames are streamed.
const UNSIZED_GUESS: usize = 64 << 10;

/// Decompresses a complete frame in one call, straight into its output; `None` when the
/// frame is incomplete or, not stating its size, does not fit [`UNSIZED_GUESS`] (the
/// streaming path then decodes it or reports why not).
fn decode_whole_frame(
    input: &[u8],
    budget: &mut usize,
    what: &str,
) -> Option<Result<(Vec<u8>, usize)>> {
    let frame_len = zstd_safe::find_frame_compressed_size(input).ok()?;
    let frame = input.get(..frame_len)?;
    let stated = zstd_safe::get_frame_content_size(frame).ok()?;
    let room = match stated.map(usize::try_from) {
        Some(Ok(size)) if size <= *budget => size,
        Some(_) => {
            return Some(Err(Error::corrupt(format!(
                "{what}: decompresses to more than {budget} bytes"
            ))))
        }
        None => UNSIZED_GUESS.min(*budget),
    };
    let zerr = |e: std::io::Error| Error::corrupt(format!("{what}: zstd: {e}"));
    let decompress = |d: &mut Decompressor<'_>| -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(room);
        d.decompress_to_buffer(frame, &mut out).map_err(zerr)?;
        if stated.is_some() && out.len() != room {
            return Err(Error::corrupt(format!(
                "{what}: zstd frame holds {} bytes, its header says {room}",
                out.len()
            )));
        }
        Ok(out)
    };
    let out = ZSTD_BULK.with(|cell| match cell.try_borrow_mut() {
        Ok(mut slot) => match slot.as_mut() {
            Some(d) => decompress(d),
            None => decompress(slot.insert(Decompressor::new().map_err(zerr)?)),
        },
        // A re-entrant call (none exists today) finds the cell borrowed: use a fresh one.
        Err(_) => decompress(&mut Decompressor::new().map_err(zerr)?),
    });
    match out {
        Ok(out) => {
            *budget -= out.len();
            Some(Ok((out, frame_len)))
        }
        Err(e) if stated.is_some() => Some(Err(e)),
        Err(_) => None,
    }
}

fn decode_with(
    decoder: &mut Decoder<'_>,
    input: &[u8],
    budget: &mut usize,
    what: &str,
) -> Result<(Vec<u8>, usize)> {
    let zerr = |e: std::io::Error| Error::corrupt(format!("{what}: zstd: {e}"));
    let mut out: Vec<u8> = Vec::new();
    // The frame usually states its size: allocate it at once (within the budget; the
    // loop below still enforces the budget whatever the header claims).
    if let Ok(Some(size)) = zstd::zstd_safe::get_frame_content_size(input) {
        out.reserve_exact(usize::try_from(size).unwrap_or(usize::MAX).min(*budget));
    }
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

/// Compresses `data` as one zlib stream at the default level (as the engine does), with the
/// thread's compressor.
pub fn deflate_zlib(data: &[u8], out: &mut Vec<u8>) -> Result<()> {
    ZLIB_COMPRESSOR.with(|cell| {
        // A re-entrant call (none exists today) finds the cell borrowed: use a fresh one.
        let Ok(mut slot) = cell.try_borrow_mut() else {
            return deflate_with(&mut Compress::new(Compression::default(), true), data, out);
        };
        let z = slot.get_or_insert_with(|| Compress::new(Compression::default(), true));
        z.reset();
        deflate_with(z, data, out)
    })
}

fn deflate_with(z: &mut Compress, data: &[u8], out: &mut Vec<u8>) -> Result<()> {
    out.reserve(data.len() / 4 + 64);
    let start = z.total_in();
    loop {
        let used = usize::try_from(z.total_in() - start).unwrap_or(usize::MAX);
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

/// Compresses `data` as one zstd frame at the library's default level (as the engine does),
/// with the thread's compressor (the same bytes as a fresh one makes).
pub fn encode_zstd(data: &[u8], out: &mut Vec<u8>) -> Result<()> {
    let zerr = |e: std::io::Error| Error::new(libc::EIO, format!("zstd compression failed: {e}"));
    let frame = ZSTD_COMPRESSOR
        .with(|cell| {
            // A re-entrant call (none exists today) finds the cell borrowed: use a fresh one.
            let Ok(mut slot) = cell.try_borrow_mut() else {
                return Compressor::new(0).and_then(|mut c| c.compress(data));
            };
            let compressor = match slot.as_mut() {
                Some(c) => c,
                None => slot.insert(Compressor::new(0)?),
            };
            let frame = compressor.compress(data);
            // The context grows with the input it was last sized for: after a large one, drop
            // it rather than keep that memory for the thread's life.
            if data.len() > KEEP_DECODER {
                *slot = None;
            }
            frame
        })
        .map_err(zerr)?;
    out.extend_from_slice(&frame);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The thread's compressors, used again and again, make the same bytes as fresh ones:
    /// a block re-encoded by a rename is what any other re-encode of it would be.
    #[test]
    fn kept_compressors_make_the_bytes_fresh_ones_make() {
        let inputs: Vec<Vec<u8>> = [3usize, 16_384, 100, 2 << 20, 40_000, 7]
            .iter()
            .enumerate()
            .map(|(k, &n)| (0..n).map(|i| ((i * (k + 3)) % 97) as u8).collect())
            .collect();
        for data in inputs.iter().chain(inputs.iter().rev()) {
            let mut kept = Vec::new();
            encode_zstd(data, &mut kept).unwrap();
            assert_eq!(kept, zstd::bulk::compress(data, 0).unwrap());
            let mut kept = vec![9];
            deflate_zlib(data, &mut kept).unwrap();
            let mut fresh = vec![9];
            deflate_with(
                &mut Compress::new(Compression::default(), true),
                data,
                &mut fresh,
            )
            .unwrap();
            assert_eq!(kept, fresh);
        }
    }

    #[test]
    fn a_kept_zstd_context_gives_the_frames_a_new_one_gives() {
        let inputs: Vec<Vec<u8>> = vec![
            (0..70_000u32).map(|i| (i % 7) as u8).collect(),
            Vec::new(),
            (0..5_000u32)
                .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
                .collect(),
            vec![0; 65_536],
        ];
        for round in 0..2 {
            for data in &inputs {
                let mut out = Vec::new();
                encode_zstd(data, &mut out).unwrap();
                assert_eq!(out, zstd::bulk::compress(data, 0).unwrap(), "round {round}");
                assert_eq!(zstd::bulk::decompress(&out, data.len()).unwrap(), *data);
            }
        }
    }

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
    fn zstd_frame_with_content_size_stops_at_frame_end() {
        let data: Vec<u8> = (0..20_000u32).map(|i| (i * 7 % 13) as u8).collect();
        let mut blob = Vec::new();
        encode_zstd(&data, &mut blob).unwrap();
        assert_eq!(
            zstd_safe::get_frame_content_size(&blob).unwrap(),
            Some(data.len() as u64)
        );
        let len = blob.len();
        blob.extend_from_slice(b"rest");
        let mut budget = 1 << 20;
        let (out, used) = decode_zstd(&blob, &mut budget, "t").unwrap();
        assert_eq!(out, data);
        assert_eq!(used, len);
        assert_eq!(budget, (1 << 20) - data.len());
        for cut in [0, 3, len / 2, len - 1] {
            let mut budget = 1 << 20;
            assert!(decode_zstd(&blob[..cut], &mut budget, "t").is_err());
        }
        // A header whose content size is off by one either way is corrupt, not trusted.
        let fhd = blob[4];
        let at = 5 + usize::from(fhd & 0x20 == 0);
        let width = match fhd >> 6 {
            0 => usize::from(fhd & 0x20 != 0),
            1 => 2,
            2 => 4,
            _ => 8,
        };
        assert!(width >= 2, "test frame should store its size in 2+ bytes");
        for delta in [1i64, -1] {
            let mut lying = blob.clone();
            let mut field = [0u8; 8];
            field[..width].copy_from_slice(&lying[at..at + width]);
            let v = (i64::from_le_bytes(field) + delta).to_le_bytes();
            lying[at..at + width].copy_from_slice(&v[..width]);
            let mut budget = 1 << 20;
            assert!(decode_zstd(&lying, &mut budget, "t").is_err(), "{delta}");
        }
    }

    #[test]
    fn zstd_frame_without_content_size_stops_at_frame_end() {
        // Small frames are decoded whole, big ones streamed.
        for len in [20_000u32, 3 * UNSIZED_GUESS as u32] {
            unsized_frame_stops_at_frame_end(len);
        }
    }

    fn unsized_frame_stops_at_frame_end(len: u32) {
        let data: Vec<u8> = (0..len).map(|i| (i * 7 % 13) as u8).collect();
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
