//! Versions 22, 23 and 24, of which no real block survives: blobs built here byte by byte
//! the way the 0.4-era writers laid them out (content_width 1, the v23 unused byte, v24
//! timers before the objects, v22 type-id metadata), decoded and written back as 25.

use std::io::Write;

use flate2::write::ZlibEncoder;
use flate2::Compression;
use worldfs::luanti::codec::block::{MapBlock, NODE_COUNT};
use worldfs::luanti::codec::{decode_block, encode_block};

fn zlib(data: &[u8]) -> Vec<u8> {
    let mut e = ZlibEncoder::new(Vec::new(), Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn s16(s: &[u8]) -> Vec<u8> {
    [&(s.len() as u16).to_be_bytes()[..], s].concat()
}

fn s32(s: &[u8]) -> Vec<u8> {
    [&(s.len() as u32).to_be_bytes()[..], s].concat()
}

/// content_width-1 node data: node 0 is id 0x123 (0x80|… trick: byte 0x92, param2 high
/// nibble 3), node 1 is id 5, the rest id 0 ("air").
fn nodes_cw1() -> Vec<u8> {
    let mut raw = vec![0u8; NODE_COUNT * 3];
    raw[0] = 0x92; // > 0x7F: id = 0x92 << 4 | param2 >> 4 = 0x923
    raw[2 * NODE_COUNT] = 0x3A; // param2: high nibble 3 goes to the id, 0x0A stays
    raw[1] = 5;
    raw[2 * NODE_COUNT + 1] = 0x3A;
    raw[NODE_COUNT + 1] = 0xF0; // param1
    raw
}

fn name_ids() -> Vec<u8> {
    let mut out = vec![0, 0, 3];
    for (id, name) in [
        (0u16, &b"air"[..]),
        (0x923, b"default:chest"),
        (5, b"default:stone"),
    ] {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&s16(name));
    }
    out
}

fn chest_inventory() -> Vec<u8> {
    b"List 0 2\nItem default:stone 5\nEmpty\nEndInventoryList\nEndInventory\n".to_vec()
}

fn check_nodes(block: &MapBlock) {
    assert_eq!(block.names, ["default:chest", "default:stone", "air"]);
    assert_eq!(&block.content[..3], &[0, 1, 2]);
    assert_eq!(&block.param2[..3], &[0x0A, 0x3A, 0]);
    assert_eq!(block.param1[1], 0xF0);
}

fn round_trips_as_25(block: &MapBlock) {
    let encoded = encode_block(block).unwrap();
    assert_eq!(encoded[0], 25);
    let mut expected = block.clone();
    expected.version = 25;
    assert_eq!(decode_block(&encoded).unwrap(), expected);
}

#[test]
fn version_23_as_written_by_0_4_1() {
    let mut meta = vec![1, 0, 1, 0, 0];
    meta.extend_from_slice(&1u32.to_be_bytes());
    meta.extend_from_slice(&s16(b"infotext"));
    meta.extend_from_slice(&s32(b"Chest"));
    meta.extend_from_slice(&chest_inventory());
    let mut blob = vec![23, 0x02, 1, 2];
    blob.extend_from_slice(&zlib(&nodes_cw1()));
    blob.extend_from_slice(&zlib(&meta));
    blob.push(0); // unused byte of version 23
    blob.extend_from_slice(&[0, 0, 0]); // no static objects
    blob.extend_from_slice(&0x1234u32.to_be_bytes());
    blob.extend_from_slice(&name_ids());

    let block = decode_block(&blob).unwrap();
    assert_eq!(
        (block.version, block.flags, block.timestamp),
        (23, 2, 0x1234)
    );
    assert_eq!(block.lighting_complete, 0xFFFF);
    check_nodes(&block);
    assert_eq!(block.metadata.len(), 1);
    let chest = &block.metadata[0];
    assert_eq!(chest.vars[0].value, b"Chest");
    assert_eq!(chest.inventory.lists[0].name, "0");
    assert_eq!(chest.inventory.lists[0].slots[0].count, 5);
    round_trips_as_25(&block);

    // without the unused byte the block is malformed
    let mut short = blob.clone();
    let at = short.len() - name_ids().len() - 4 - 3 - 1;
    short.remove(at);
    assert!(decode_block(&short).is_err());
}

#[test]
fn version_24_with_old_timers() {
    let mut blob = vec![24, 0, 1, 2];
    blob.extend_from_slice(&zlib(&nodes_cw1()));
    blob.extend_from_slice(&zlib(&[0]));
    blob.extend_from_slice(&[1, 0, 2]); // timers version 1, two timers
    blob.extend_from_slice(&[0, 7, 0, 0, 0x03, 0xE8, 0, 0, 0, 9]);
    blob.extend_from_slice(&[0, 3, 0, 0, 0x07, 0xD0, 0, 0, 0, 0]);
    blob.extend_from_slice(&[0, 0, 0]);
    blob.extend_from_slice(&0xFFFF_FFFFu32.to_be_bytes());
    blob.extend_from_slice(&name_ids());

    let block = decode_block(&blob).unwrap();
    check_nodes(&block);
    let timers: Vec<_> = block
        .timers
        .iter()
        .map(|t| (t.pos.index(), t.timeout, t.elapsed))
        .collect();
    assert_eq!(timers, [(3, 2000, 0), (7, 1000, 9)]);
    // 24 is writable: it stays 24
    let encoded = encode_block(&block).unwrap();
    assert_eq!(encoded[0], 24);
    assert_eq!(decode_block(&encoded).unwrap(), block);
}

#[test]
fn version_22_with_type_id_metadata() {
    let mut meta = vec![0, 1, 0, 3];
    // chest at index 0: list "0" is renamed to "main"
    meta.extend_from_slice(&[0, 0, 0, 15]);
    meta.extend_from_slice(&s16(&chest_inventory()));
    // locked chest at index 1
    let locked = [s16(b"alice"), chest_inventory()].concat();
    meta.extend_from_slice(&[0, 1, 0, 17]);
    meta.extend_from_slice(&s16(&locked));
    // furnace at index 2, with its fuel times (tenths of seconds) after the inventory
    let furnace = [
        b"List fuel 1\nEmpty\nEndInventoryList\nEndInventory\n".to_vec(),
        b"40 12 0 5 ".to_vec(),
    ]
    .concat();
    meta.extend_from_slice(&[0, 2, 0, 16]);
    meta.extend_from_slice(&s16(&furnace));
    let mut blob = vec![22, 0, 1, 2];
    blob.extend_from_slice(&zlib(&nodes_cw1()));
    blob.extend_from_slice(&zlib(&meta));
    blob.extend_from_slice(&[0, 0, 0]);
    blob.extend_from_slice(&7u32.to_be_bytes());
    blob.extend_from_slice(&name_ids());

    let block = decode_block(&blob).unwrap();
    assert_eq!(block.version, 22);
    check_nodes(&block);
    let var = |i: usize, key: &[u8]| {
        block.metadata[i]
            .vars
            .iter()
            .find(|v| v.key == key)
            .map(|v| String::from_utf8_lossy(&v.value).into_owned())
    };
    assert_eq!(block.metadata[0].inventory.lists[0].name, "main");
    assert!(var(0, b"formspec").unwrap().starts_with("size[8,9]"));
    assert_eq!(var(1, b"owner").as_deref(), Some("alice"));
    assert_eq!(var(2, b"fuel_totaltime").as_deref(), Some("4"));
    assert_eq!(var(2, b"fuel_time").as_deref(), Some("1.2"));
    assert_eq!(var(2, b"src_time").as_deref(), Some("0.5"));
    assert_eq!(block.timers.len(), 1);
    assert_eq!(
        (block.timers[0].pos.index(), block.timers[0].timeout),
        (2, 1000)
    );
    round_trips_as_25(&block);

    // an unknown legacy type is reported, not skipped
    let mut bad = meta.clone();
    bad[7] = 99;
    let mut blob = vec![22, 0, 1, 2];
    blob.extend_from_slice(&zlib(&nodes_cw1()));
    blob.extend_from_slice(&zlib(&bad));
    blob.extend_from_slice(&[0, 0, 0, 0, 0, 0, 7]);
    blob.extend_from_slice(&name_ids());
    let e = decode_block(&blob).unwrap_err();
    assert!(
        e.message().contains("unknown legacy node metadata type 99"),
        "{e}"
    );
}
