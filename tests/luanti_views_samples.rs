//! Every block of every sample map (and the decodable single-blob samples): decode, render each
//! view, parse it into a copy of the block whose covered fields were changed, and compare with
//! the decoded block; rendering the parsed block again must give the same bytes.

use std::time::{Duration, Instant};

#[allow(dead_code)]
mod common;

use common::maps::{block_pos, map_databases, read_blocks};
use common::samples;
use worldfs::luanti::codec::block::{BlockPos, MapBlock, NODE_COUNT};
use worldfs::luanti::codec::decode_block;
use worldfs::luanti::views;

/// Where a single blob lies: from its file name (`x.y.z`), else from its first static object
/// (the engine files an object under the block of its rounded node position), else the origin.
fn blob_pos(name: &str, block: &MapBlock) -> BlockPos {
    let file = name.rsplit('/').next().unwrap();
    let parts: Vec<i16> = file.split('.').filter_map(|p| p.parse().ok()).collect();
    if let ([x, y, z], false) = (parts.as_slice(), file.contains("bin")) {
        return BlockPos {
            x: *x,
            y: *y,
            z: *z,
        };
    }
    let Some(object) = block.objects.first() else {
        return BlockPos { x: 0, y: 0, z: 0 };
    };
    let [x, y, z] = object.pos.map(|p| {
        let node = (f64::from(p) / 10_000.0).round() as i64;
        node.div_euclid(16) as i16
    });
    BlockPos { x, y, z }
}

/// A copy of `b` whose every field covered by the views differs from `b`.
fn scrambled(b: &MapBlock) -> MapBlock {
    MapBlock {
        version: if b.version == 29 { 25 } else { 29 },
        flags: !b.flags,
        lighting_complete: !b.lighting_complete,
        timestamp: !b.timestamp,
        names: vec!["worldfs:scrambled".into()],
        content: vec![0; NODE_COUNT],
        param1: b.param1.iter().map(|v| !v).collect(),
        param2: vec![0; NODE_COUNT],
        metadata: b.metadata.clone(),
        objects: Vec::new(),
        timers: Vec::new(),
    }
}

#[derive(Default)]
struct Tally {
    blocks: usize,
    objects: usize,
    timers: usize,
    bytes: usize,
    render: Duration,
    parse: Duration,
}

/// Renders every view of `block`, parses them all into a scrambled copy, compares.
fn check(what: &str, block: &MapBlock, pos: BlockPos, tally: &mut Tally) {
    let start = Instant::now();
    let texts = [
        views::render_nodes(block),
        views::render_light(block),
        views::render_header(block),
        views::render_timers(block),
        views::render_objects(block, pos),
    ];
    tally.render += start.elapsed();
    let mut copy = scrambled(block);
    let start = Instant::now();
    let results = [
        views::parse_nodes(&texts[0], &mut copy),
        views::parse_light(&texts[1], &mut copy),
        views::parse_header(&texts[2], &mut copy),
        views::parse_timers(&texts[3], &mut copy),
        views::parse_objects(&texts[4], pos, &mut copy),
    ];
    tally.parse += start.elapsed();
    for (r, text) in results.iter().zip(&texts) {
        if let Err(e) = r {
            panic!("{what}: {e}\n{}", String::from_utf8_lossy(text));
        }
    }
    if copy != *block {
        let fields = [
            (
                "header",
                (
                    copy.version,
                    copy.flags,
                    copy.lighting_complete,
                    copy.timestamp,
                ) == (
                    block.version,
                    block.flags,
                    block.lighting_complete,
                    block.timestamp,
                ),
            ),
            ("names", copy.names == block.names),
            ("content", copy.content == block.content),
            ("param1", copy.param1 == block.param1),
            ("param2", copy.param2 == block.param2),
            ("objects", copy.objects == block.objects),
            ("timers", copy.timers == block.timers),
        ];
        let differ: Vec<&str> = fields.iter().filter(|f| !f.1).map(|f| f.0).collect();
        panic!(
            "{what}: the views do not give the block back; {differ:?} differ\n{:?}\n{:?}",
            block.timers, copy.timers
        );
    }
    assert_eq!(
        views::render_nodes(&copy),
        texts[0],
        "{what}: nodes.cubeset not stable"
    );
    assert_eq!(
        views::render_objects(&copy, pos),
        texts[4],
        "{what}: objects.txt not stable"
    );
    tally.blocks += 1;
    tally.objects += block.objects.len();
    tally.timers += block.timers.len();
    tally.bytes += texts.iter().map(Vec::len).sum::<usize>();
}

#[test]
fn every_sample_block_survives_its_views() {
    let dir = samples::path(samples::LUANTI);
    let maps = map_databases(&dir);
    assert!(maps.len() >= 5, "expected the sample maps, found {maps:?}");
    let mut total = Tally::default();
    for path in &maps {
        let mut tally = Tally::default();
        for (key, blob) in read_blocks(path) {
            let pos = block_pos(key);
            let what = format!("{} block {pos:?}", path.display());
            let block = decode_block(&blob).unwrap_or_else(|e| panic!("{what}: {e}"));
            check(&what, &block, pos, &mut tally);
        }
        println!(
            "{}: {} blocks, {} objects, {} timers, {} view bytes; render {:?}, parse {:?}",
            path.strip_prefix(&dir).unwrap().display(),
            tally.blocks,
            tally.objects,
            tally.timers,
            tally.bytes,
            tally.render,
            tally.parse
        );
        assert!(tally.blocks > 0);
        total.blocks += tally.blocks;
        total.objects += tally.objects;
        total.timers += tally.timers;
    }
    // The single-blob samples that decode; a blob's position is its file name's where it has one.
    for name in samples::good_blocks() {
        let blob = samples::read(name);
        let block = decode_block(&blob).unwrap_or_else(|e| panic!("{name}: {e}"));
        check(name, &block, blob_pos(name, &block), &mut total);
    }
    println!(
        "all: {} blocks, {} objects, {} timers",
        total.blocks, total.objects, total.timers
    );
    assert!(
        total.objects > 0 && total.timers > 0,
        "the samples have objects and timers"
    );
}
