//! Every block of every sample map and blob: decode → encode → decode gives the same block;
//! the samples' known bad blobs fail with the right kind of error; spot checks of what the
//! samples are documented to contain.

#[allow(dead_code)]
mod common;

use std::collections::BTreeMap;

use common::maps::{map_databases, round_trip, round_trip_map};
use common::samples;
use worldfs::luanti::codec::block::{MapBlock, ObjectData};
use worldfs::luanti::codec::{decode_block, decompress_only};

#[test]
fn every_block_of_every_sample_map_round_trips() {
    let maps = map_databases(&samples::path(samples::LUANTI));
    assert!(maps.len() >= 5, "expected the sample maps, found {maps:?}");
    let mut total: BTreeMap<u8, usize> = BTreeMap::new();
    for path in &maps {
        let (counts, blocks) = round_trip_map(path);
        assert!(!blocks.is_empty(), "{} has no blocks", path.display());
        let with_meta = blocks
            .iter()
            .filter(|(_, b)| !b.metadata.is_empty())
            .count();
        let with_timers = blocks.iter().filter(|(_, b)| !b.timers.is_empty()).count();
        let entities: usize = blocks
            .iter()
            .map(|(_, b)| {
                b.objects
                    .iter()
                    .filter(|o| matches!(o.data, ObjectData::LuaEntity(_)))
                    .count()
            })
            .sum();
        println!(
            "{}: {} blocks round-tripped, per version {counts:?}; {with_meta} with metadata, \
             {with_timers} with timers, {entities} Lua entities",
            path.strip_prefix(samples::root()).unwrap_or(path).display(),
            blocks.len()
        );
        for (v, n) in counts {
            *total.entry(v).or_default() += n;
        }
        let name = path.to_string_lossy();
        if name.contains("cornernote-mesecons-circuits") {
            assert_eq!(blocks.len(), 12_133);
            assert_eq!(with_meta, 11);
            assert_eq!(entities, 3);
        }
        if name.contains("rust-minetestworld") {
            assert_eq!(blocks.len(), 5_923);
            assert_eq!(with_timers, 56);
        }
    }
    println!("all sample maps, per version: {total:?}");
}

#[test]
fn every_sample_blob_round_trips() {
    let mut counts: BTreeMap<u8, usize> = BTreeMap::new();
    let good = samples::good_blocks();
    for rel in &good {
        let data = samples::read(rel);
        let (block, _) = round_trip(&data).unwrap_or_else(|e| panic!("{rel}: {e}"));
        *counts.entry(block.version).or_default() += 1;
        assert!(decompress_only(&data).unwrap() >= 12_288, "{rel}");
    }
    println!(
        "{} sample blobs round-tripped, per version {counts:?}",
        good.len()
    );
}

#[test]
fn expected_failures_fail_with_a_reason() {
    let unsupported = decode_block(&samples::read(samples::UNITTEST_V20)).unwrap_err();
    assert_eq!(unsupported.errno(), libc::EOPNOTSUPP, "{unsupported}");
    assert!(
        unsupported.message().contains("version 20"),
        "{unsupported}"
    );
    assert!(decompress_only(&samples::read(samples::UNITTEST_V20)).is_err());

    for rel in samples::BAD_BLOCKS {
        let e = decode_block(&samples::read(rel)).unwrap_err();
        assert_ne!(e.errno(), 0);
        println!("{rel}: {e}");
    }
    let network = decode_block(&samples::read(samples::MAPPARSER_NETWORK)).unwrap_err();
    assert!(network.message().contains("network form"), "{network}");
    let v23 = decode_block(&samples::read(samples::MTMAPPER_BAD_V23)).unwrap_err();
    assert_eq!(v23.errno(), libc::EIO, "{v23}");
}

fn names_at(block: &MapBlock, index: usize) -> &str {
    &block.names[usize::from(block.content[index])]
}

#[test]
fn content_width_1_quirk_reads_the_12_bit_id() {
    let block = decode_block(&samples::read(samples::UNITTEST_NONSTD)).unwrap();
    assert_eq!(block.version, 27);
    let two = block
        .content
        .iter()
        .position(|&c| block.names[usize::from(c)] == "test:two")
        .expect("test:two is used");
    assert_eq!(names_at(&block, two), "test:two");
    assert_eq!(block.param2[two], 8);
    assert!(block.names.iter().any(|n| n == "test:one"));
}

#[test]
fn unit_test_block_29_has_its_chest() {
    let block = decode_block(&samples::read(samples::UNITTEST_V29)).unwrap();
    assert_eq!(block.version, 29);
    assert!(block.names.iter().any(|n| n == "default:chest"));
    let chest = &block.metadata[0];
    let main = &chest.inventory.lists[0];
    assert_eq!((main.name.as_str(), main.slots.len()), ("main", 32));
    assert_eq!(main.slots[1].name, b"default:stone");
}

#[test]
fn zstd_payload_length_matches_the_sample_payload() {
    let payload = samples::read(samples::TESTWORLD_ZSTD_PAYLOAD);
    let data = samples::read(samples::TESTWORLD_BLOCK);
    assert_eq!(decompress_only(&data).unwrap(), payload.len());
}

#[test]
fn mapeditr_entities_keep_their_trailer() {
    for rel in [samples::MAPEDITR_V28, samples::MAPEDITR_V29] {
        let block = decode_block(&samples::read(rel)).unwrap();
        let entity = block
            .objects
            .iter()
            .find_map(|o| match &o.data {
                ObjectData::LuaEntity(e) => Some(e),
                ObjectData::Raw(_) => None,
            })
            .unwrap_or_else(|| panic!("{rel}: no Lua entity"));
        assert_eq!(entity.extra.as_ref().map(|x| x.version2), Some(1), "{rel}");
        assert!(!block.timers.is_empty(), "{rel}: timers");
    }
}
