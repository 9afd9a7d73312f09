//! The payload compressions Terrarum uses inside TVDA entries: gzip (screenshots, body
//! parts, chunks before 2023-12), zstd and Snappy framing (chunks since). `Common.unzip`
//! picks the codec from the first bytes of each payload, so a disk may mix them; a
//! re-encoded payload keeps the codec it was found in. Decompression is bounded so a
//! crafted payload cannot exhaust memory.

use std::io::{Read, Write};

use crate::error::{Error, Result};

/// A payload compression.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Codec {
    /// gzip (`1F 8B 08`).
    Gzip,
    /// zstd frame (`28 B5 2F FD`).
    Zstd,
    /// Snappy framing format (`FF 06 00 00 sNaPpY`).
    Snappy,
}

impl Codec {
    /// The codec of a payload, from its first four bytes as `Common.unzip` reads them.
    pub fn detect(data: &[u8]) -> Option<Codec> {
        match data {
            [0x1F, 0x8B, 0x08, _, ..] => Some(Codec::Gzip),
            [0x28, 0xB5, 0x2F, 0xFD, ..] => Some(Codec::Zstd),
            [0xFF, 0x06, 0x00, 0x00, ..] => Some(Codec::Snappy),
            _ => None,
        }
    }

    /// A short lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            Codec::Gzip => "gzip",
            Codec::Zstd => "zstd",
            Codec::Snappy => "snappy",
        }
    }
}

/// The chunk that starts every Snappy-framed stream.
const SNAPPY_STREAM_IDENTIFIER: [u8; 10] =
    [0xFF, 0x06, 0x00, 0x00, b's', b'N', b'a', b'P', b'p', b'Y'];

/// Decompresses a payload of any codec into at most `limit` bytes.
pub fn decompress(data: &[u8], limit: usize) -> Result<(Codec, Vec<u8>)> {
    let codec = Codec::detect(data)
        .ok_or_else(|| Error::corrupt("payload is neither gzip, zstd nor Snappy-framed"))?;
    let out = match codec {
        Codec::Gzip => read_bounded(flate2::read::MultiGzDecoder::new(data), limit),
        Codec::Zstd => read_bounded(zstd::stream::read::Decoder::new(data)?, limit),
        Codec::Snappy => read_bounded(snap::read::FrameDecoder::new(data), limit),
    }
    .map_err(|e| e.context(codec.name()))?;
    Ok((codec, out))
}

/// Compresses `raw` with `codec` (zstd at level 3 and gzip at level 6, the defaults of
/// the Java streams Terrarum uses).
pub fn compress(codec: Codec, raw: &[u8]) -> Result<Vec<u8>> {
    match codec {
        Codec::Gzip => {
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(6));
            enc.write_all(raw)?;
            Ok(enc.finish()?)
        }
        Codec::Zstd => Ok(zstd::bulk::compress(raw, 3)?),
        Codec::Snappy => {
            let mut enc = snap::write::FrameEncoder::new(Vec::new());
            enc.write_all(raw)?;
            let mut out = enc
                .into_inner()
                .map_err(|e| Error::invalid(format!("snappy: {}", e.error())))?;
            // The encoder writes its stream identifier with the first data only; an empty
            // payload still needs it, or it could not be told as Snappy when read back
            // (Java's SnappyFramedOutputStream writes it when opened).
            if out.is_empty() {
                out.extend_from_slice(&SNAPPY_STREAM_IDENTIFIER);
            }
            Ok(out)
        }
    }
}

/// Decodes a gzip payload into at most `limit` bytes.
pub fn gunzip(data: &[u8], limit: usize) -> Result<Vec<u8>> {
    match decompress(data, limit)? {
        (Codec::Gzip, out) => Ok(out),
        (other, _) => Err(Error::corrupt(format!(
            "expected gzip, found {}",
            other.name()
        ))),
    }
}

/// Reads at most `limit` bytes. The buffer is reserved at its bound once (address space,
/// not memory, until written), so growing it never holds twice the output at once.
fn read_bounded(reader: impl Read, limit: usize) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(limit.saturating_add(1));
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    reader
        .take(cap)
        .read_to_end(&mut out)
        .map_err(|e| Error::corrupt(format!("cannot decompress: {e}")))?;
    if out.len() > limit {
        return Err(Error::corrupt(format!(
            "decompresses to more than {limit} bytes"
        )));
    }
    out.shrink_to_fit();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]
        #[test]
        fn every_codec_round_trips(raw in proptest::collection::vec(any::<u8>(), 0..5000), which in 0usize..3) {
            let codec = [Codec::Gzip, Codec::Zstd, Codec::Snappy][which];
            let packed = compress(codec, &raw).unwrap();
            prop_assert_eq!(Codec::detect(&packed), Some(codec));
            let (found, out) = decompress(&packed, raw.len()).unwrap();
            prop_assert_eq!(found, codec);
            prop_assert_eq!(out, raw);
        }

        #[test]
        fn garbage_never_panics(data in proptest::collection::vec(any::<u8>(), 0..300), which in 0usize..3) {
            let magic: &[u8] = [&[0x1F, 0x8B, 0x08, 0][..], &[0x28, 0xB5, 0x2F, 0xFD], &[0xFF, 6, 0, 0]][which];
            let _ = decompress(&[magic, &data].concat(), 1000);
        }
    }

    /// Found by `every_codec_round_trips` on a fresh CI run: an empty payload written as
    /// Snappy came out as no bytes at all, which no codec claims, so it could not be read back.
    #[test]
    fn an_empty_payload_keeps_its_codec() {
        for codec in [Codec::Gzip, Codec::Zstd, Codec::Snappy] {
            let packed = compress(codec, &[]).expect("compresses");
            assert_eq!(Codec::detect(&packed), Some(codec), "{}", codec.name());
            let (found, out) = decompress(&packed, 0).expect("decompresses");
            assert_eq!((found, out.len()), (codec, 0), "{}", codec.name());
        }
    }

    #[test]
    fn output_is_bounded() {
        let packed = compress(Codec::Zstd, &vec![0; 100_000]).unwrap();
        assert!(decompress(&packed, 99_999).is_err());
        assert_eq!(decompress(&packed, 100_000).unwrap().1.len(), 100_000);
        assert!(decompress(b"plain", 10).is_err());
    }
}
