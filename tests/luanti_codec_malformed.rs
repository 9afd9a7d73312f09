//! Hostile and damaged input: the samples' known bad blobs, every truncation of real blocks,
//! single-bit flips in real blocks (in the stored bytes and, for v29, inside the
//! decompressed payload), and random bytes. Each must give `Ok` or `Err` — a panic fails
//! the test — and whatever decodes must encode (or be refused as `EINVAL`) and decode back
//! equal.

#[allow(dead_code)]
mod common;

use common::maps::read_blocks;
use common::samples;
use worldfs::luanti::codec::{decode_block, decompress_only, encode_block};

/// Real blocks with metadata, inventories, objects or timers, at versions 25, 27, 28, 29.
fn real_blocks() -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = samples::RICH_BLOCKS
        .iter()
        .map(|rel| (rel.to_string(), samples::read(rel)))
        .collect();
    // The first blocks with metadata of a v25/v27 map and of a v29 map with timers.
    for (rel, wanted) in [(samples::MESECONS_MAP, 2), (samples::TESTWORLD_MAP, 1)] {
        let picked: Vec<_> = read_blocks(&samples::path(rel))
            .into_iter()
            .filter(|(_, data)| {
                decode_block(data).is_ok_and(|b| !b.metadata.is_empty() || !b.timers.is_empty())
            })
            .take(wanted)
            .map(|(key, data)| (format!("{rel} {key:?}"), data))
            .collect();
        assert_eq!(picked.len(), wanted, "{rel}");
        out.extend(picked);
    }
    out
}

/// Decodes `data`; whatever decodes must re-encode (or be refused as EINVAL) and round-trip.
fn check(data: &[u8]) -> bool {
    let _ = decompress_only(data);
    let Ok(block) = decode_block(data) else {
        return false;
    };
    match encode_block(&block) {
        Ok(encoded) => {
            let mut expected = block.clone();
            if expected.version < 24 {
                expected.version = 25;
            }
            assert_eq!(decode_block(&encoded).unwrap(), expected);
        }
        Err(e) => assert_eq!(e.errno(), libc::EINVAL, "{e}"),
    }
    true
}

#[test]
fn known_bad_samples_fail() {
    for rel in samples::BAD_BLOCKS {
        assert!(!check(&samples::read(rel)), "{rel} must not decode");
    }
}

#[test]
fn every_truncation_fails() {
    let mut total = 0;
    for (name, data) in real_blocks() {
        assert!(check(&data), "{name} itself must decode");
        for n in 0..data.len() {
            assert!(!check(&data[..n]), "{name} cut to {n} bytes decoded");
            total += 1;
        }
    }
    println!("{total} truncations rejected");
}

#[test]
fn single_bit_flips_never_panic() {
    let (mut ok, mut err) = (0usize, 0usize);
    for (_, data) in real_blocks() {
        for bit in 0..data.len() * 8 {
            let mut d = data.clone();
            d[bit / 8] ^= 1 << (bit % 8);
            if check(&d) {
                ok += 1;
            } else {
                err += 1;
            }
        }
    }
    println!("bit flips in stored blocks: {ok} decoded, {err} rejected");
    assert!(err > 0);
}

/// The v29 payload of a blob (zstd-decompressed).
fn payload(data: &[u8]) -> Vec<u8> {
    zstd::stream::decode_all(&data[1..]).unwrap()
}

/// Where the node arrays start in a v29 payload (after flags, lighting_complete,
/// timestamp, the name-id mapping and the two width bytes).
fn node_data_start(p: &[u8]) -> usize {
    let count = usize::from(u16::from_be_bytes([p[8], p[9]]));
    let mut at = 10;
    for _ in 0..count {
        at += 4 + usize::from(u16::from_be_bytes([p[at + 2], p[at + 3]]));
    }
    at + 2
}

fn rezip(payload: &[u8]) -> Vec<u8> {
    let mut out = vec![29u8];
    out.extend_from_slice(&zstd::bulk::compress(payload, 1).unwrap());
    out
}

#[test]
fn bit_flips_inside_v29_payloads_never_panic() {
    let (mut ok, mut err) = (0usize, 0usize);
    for (name, data) in real_blocks().into_iter().filter(|(_, d)| d[0] == 29) {
        let p = payload(&data);
        assert!(check(&rezip(&p)), "{name}");
        // Every bit of the header, name-id mapping, metadata, objects and timers; of the
        // 16 KiB of node arrays only a sample (any value is valid there except ids).
        let node_start = node_data_start(&p);
        let node_end = node_start + 16_384;
        let ranges = [
            0..node_start,
            node_end..p.len(),
            node_start..node_start + 16,
            node_start + 8_192..node_start + 8_208,
        ];
        for range in ranges {
            for byte in range {
                for bit in 0..8 {
                    let mut q = p.clone();
                    q[byte] ^= 1 << bit;
                    if check(&rezip(&q)) {
                        ok += 1;
                    } else {
                        err += 1;
                    }
                }
            }
        }
    }
    println!("bit flips in v29 payloads: {ok} decoded, {err} rejected");
    assert!(ok > 0 && err > 0);
}

/// xorshift64*: deterministic random bytes without another dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut decoded = 0;
    for i in 0..20_000 {
        let len = (rng.next() % 300) as usize;
        let mut data = rng.bytes(len);
        if let Some(first) = data.first_mut() {
            *first = 22 + (i % 8) as u8;
        }
        if check(&data) {
            decoded += 1;
        }
    }
    // Random payloads inside a valid zstd frame reach the structure parsers.
    for _ in 0..2_000 {
        let len = (rng.next() % 20_000) as usize;
        let mut p = rng.bytes(len);
        if p.len() > 8 {
            p[7] = 0; // a name-id mapping version the parser accepts
        }
        if check(&rezip(&p)) {
            decoded += 1;
        }
    }
    println!("random blobs decoded: {decoded}");
}

/// Issue "Nothing lost", point 10: 65,535 objects compress into a few kilobytes but would
/// decode to tens of MiB; the decoder stops at its memory bound with a clear error.
#[test]
fn a_block_that_decodes_too_big_is_refused_clearly() {
    use worldfs::luanti::codec::MAX_DECODED;
    let mut block = worldfs::luanti::cache::new_block();
    block.objects = common::mapblock::heavy_objects(65_535);
    let blob = encode_block(&block).unwrap();
    assert!(blob.len() < 200_000, "{} bytes on disk", blob.len());
    assert!(block.memory() > MAX_DECODED);
    let e = decode_block(&blob).unwrap_err();
    assert_eq!(e.errno(), libc::EIO);
    assert!(
        e.message().contains("65535 static objects") && e.message().contains("at most 12 MiB"),
        "{e}"
    );
    // A thousand such objects are a real, if busy, block.
    block.objects.truncate(1000);
    let blob = encode_block(&block).unwrap();
    assert_eq!(decode_block(&blob).unwrap(), block);
}
