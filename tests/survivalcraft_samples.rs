//! Survivalcraft stores, codecs and views on the real sample worlds in ../shared/samples.

#[allow(dead_code)]
mod common;

use std::fs;
use std::io::Read;
use std::path::PathBuf;

use common::samples;
use common::scratch::copy_dir;
use common::survivalcraft::{i32_at, unpack};

use flate2::read::DeflateDecoder;
use worldfs::survivalcraft::codec::chunk::{Cell, ChunkPos};
use worldfs::survivalcraft::codec::format::TerrainFormat;
use worldfs::survivalcraft::codec::{self, project};
use worldfs::survivalcraft::store::World;
use worldfs::survivalcraft::views::{blocks, inventory, light, surface};

fn region_worlds() -> Vec<PathBuf> {
    [samples::SC_REGION_WORLD, samples::SC_JSON_WORLD]
        .map(samples::path)
        .to_vec()
}

/// The spec's verification script for Chunks.dat (§11), in Rust: dense directory, zero
/// tail, exact length, headers matching the directory. Returns (chunks, top-height matches,
/// columns).
fn check_chunks_dat(d: &[u8]) -> (usize, usize, usize) {
    const TOC: usize = 65537 * 12;
    const CH: usize = 16 + 16 * 16 * 128 * 2 + 1024;
    let mut n = 0;
    while n < 65536 && i32_at(d, 12 * n + 8) != 0 {
        n += 1;
    }
    assert!(
        d[12 * n..TOC].iter().all(|&b| b == 0),
        "unused entries and guard are zero"
    );
    assert_eq!(d.len(), TOC + n * CH, "file length");
    let (mut ok, mut cols) = (0, 0);
    for k in 0..n {
        let (cx, cz, off) = (
            i32_at(d, 12 * k),
            i32_at(d, 12 * k + 4),
            i32_at(d, 12 * k + 8) as usize,
        );
        assert_eq!(off, TOC + k * CH, "chunk {k} offset");
        assert_eq!(
            u32::from_le_bytes(d[off..off + 4].try_into().unwrap()),
            0xDEADBEEF
        );
        assert_eq!(
            u32::from_le_bytes(d[off + 4..off + 8].try_into().unwrap()),
            0xFFFFFFFF
        );
        assert_eq!((i32_at(d, off + 8), i32_at(d, off + 12)), (cx, cz));
        let cells = &d[off + 16..off + 16 + 65536];
        let sh = &d[off + 16 + 65536..off + 16 + 65536 + 1024];
        for c in 0..256 {
            let top = (0..128)
                .rev()
                .find(|&y| cells[(c * 128 + y) * 2] != 0)
                .unwrap_or(0);
            cols += 1;
            ok += usize::from(top == usize::from(sh[c * 4]));
        }
    }
    (n, ok, cols)
}

/// The spec's verification script for region files: magic, CHK1 records, raw deflate
/// payloads whose runs add up to exactly 65536 cells. Returns the number of chunks.
fn check_region(d: &[u8]) -> usize {
    assert_eq!(&d[..4], b"RGN1");
    let mut n = 0;
    for i in 0..256 {
        let (o, s) = (i32_at(d, 4 + 8 * i), i32_at(d, 8 + 8 * i));
        if o <= 0 {
            continue;
        }
        let (o, s) = (o as usize, s as usize);
        assert_eq!(&d[o..o + 4], b"CHK1");
        let mut raw = Vec::new();
        DeflateDecoder::new(&d[o + 4..o + 4 + s])
            .read_to_end(&mut raw)
            .unwrap();
        let (mut pos, mut cells) = (256, 0);
        while pos < raw.len() {
            let v = u32::from_le_bytes(raw[pos..pos + 4].try_into().unwrap());
            let c = ((v >> 10) & 15) as usize;
            if c < 15 {
                cells += c + 1;
                pos += 4;
            } else {
                cells += raw[pos + 4] as usize + 16;
                pos += 5;
            }
        }
        assert_eq!(cells, 65536);
        n += 1;
    }
    n
}

#[test]
fn every_chunk_of_the_scworld_decodes_and_reencodes_exactly() {
    let world = World::open(&samples::path(samples::SC_ARDOITIA), false).unwrap();
    assert!(world.read_only());
    assert_eq!(world.format(), TerrainFormat::Chunks16);
    let chunks = world.chunks();
    assert_eq!(chunks.len(), 132);
    let (mut tops_ok, mut cols, mut air, mut lit_air) = (0, 0, 0, 0);
    for pos in chunks {
        let raw = world.read_raw(pos).unwrap();
        let chunk = codec::decode_chunk(world.format(), &raw).unwrap();
        assert_eq!(
            codec::encode_chunk(&chunk, pos).unwrap(),
            raw,
            "chunk {pos} re-encodes exactly"
        );
        assert_eq!(
            codec::decode_chunk(world.format(), &codec::encode_chunk(&chunk, pos).unwrap())
                .unwrap(),
            chunk
        );
        for z in 0..16 {
            for x in 0..16 {
                cols += 1;
                tops_ok += usize::from(chunk.column(x, z).unwrap().top == chunk.computed_top(x, z));
                let c = chunk.cell(x, 127, z).unwrap();
                air += usize::from(c.id == 0);
                lit_air += usize::from(c.id == 0 && c.light == 15);
            }
        }
        // Views round trip on real data.
        assert_eq!(light::parse(&chunk, &light::render(&chunk)).unwrap(), chunk);
        assert_eq!(
            surface::parse(&chunk, &surface::render(&chunk)).unwrap(),
            chunk
        );
    }
    // Spec §11: 33791 of 33792 stored top heights match the cells (x-major order).
    assert_eq!((tops_ok, cols), (33791, 33792));
    // Light is the low nibble of byte 1: the top layer is air, and lit in almost every
    // chunk (32512 of 33792 cells; 5 chunks were saved unlit).
    assert_eq!(air, 33792);
    assert!(lit_air * 10 > air * 9, "{lit_air} of {air} top cells lit");
}

#[test]
fn region_samples_decode_and_round_trip() {
    let mut total = 0;
    for w in region_worlds() {
        let world = World::open(&w, true).unwrap();
        assert_eq!(world.format(), TerrainFormat::Regions);
        for pos in world.chunks() {
            let chunk = world.read_chunk(pos).unwrap();
            let again = codec::decode_chunk(
                TerrainFormat::Regions,
                &codec::encode_chunk(&chunk, pos).unwrap(),
            )
            .unwrap();
            assert_eq!(again, chunk, "chunk {pos}");
            assert_eq!(
                blocks::parse(&chunk, &blocks::render(&chunk)).unwrap(),
                chunk
            );
            assert_eq!(
                surface::parse(&chunk, &surface::render(&chunk)).unwrap(),
                chunk
            );
            assert!(chunk.cells().iter().any(|c| c.id != 0));
            total += 1;
        }
    }
    assert_eq!(total, 26 + 1 + 14 + 7);
}

#[test]
fn a_no_op_commit_leaves_files_byte_identical() {
    let dir = unpack(&samples::path(samples::SC_ARDOITIA));
    let before = fs::read(dir.path().join("Chunks.dat")).unwrap();
    let mut world = World::open(dir.path(), false).unwrap();
    assert!(!world.read_only());
    world.commit_chunks(&[]).unwrap();
    // Re-committing decoded, unchanged chunks writes the same bytes.
    let some: Vec<_> = world
        .chunks()
        .into_iter()
        .step_by(13)
        .map(|p| (p, world.read_chunk(p).unwrap()))
        .collect();
    let refs: Vec<_> = some.iter().map(|(p, c)| (*p, c)).collect();
    world.commit_chunks(&refs).unwrap();
    let xml = world.project_xml().unwrap().unwrap();
    world.commit_project(&xml).unwrap();
    drop(world);
    assert_eq!(fs::read(dir.path().join("Chunks.dat")).unwrap(), before);
    assert_eq!(fs::read(dir.path().join("Project.xml")).unwrap(), xml);
    assert!(!dir.path().join("Chunks.dat.worldfs-journal").exists());

    for w in region_worlds() {
        let tmp = tempfile::tempdir().unwrap();
        copy_dir(&w, tmp.path());
        let mut world = World::open(tmp.path(), false).unwrap();
        world.commit_chunks(&[]).unwrap();
        drop(world);
        for e in fs::read_dir(w.join("Regions")).unwrap() {
            let e = e.unwrap();
            assert_eq!(
                fs::read(e.path()).unwrap(),
                fs::read(tmp.path().join("Regions").join(e.file_name())).unwrap()
            );
        }
    }
}

#[test]
fn chunks_dat_edits_round_trip_and_keep_the_structure() {
    let dir = unpack(&samples::path(samples::SC_ARDOITIA));
    let path = dir.path().join("Chunks.dat");
    let before = fs::read(&path).unwrap();
    let (n0, ok0, _) = check_chunks_dat(&before);
    let mut world = World::open(dir.path(), false).unwrap();
    let positions = world.chunks();
    let target = positions[7];
    let mut chunk = world.read_chunk(target).unwrap();
    let old = chunk.clone();
    for y in 100..120 {
        chunk
            .set_cell(
                5,
                y,
                9,
                Cell {
                    id: 67,
                    light: 0,
                    data: 3,
                },
            )
            .unwrap();
    }
    chunk.follow_tops(&old);
    // A new chunk beyond the existing ones.
    let new_pos = ChunkPos::new(-40, 7);
    let mut fresh = worldfs::survivalcraft::codec::chunk::Chunk::empty(TerrainFormat::Chunks16);
    fresh
        .set_cell(
            0,
            0,
            0,
            Cell {
                id: 1,
                light: 0,
                data: 0,
            },
        )
        .unwrap();
    world
        .commit_chunks(&[(target, &chunk), (new_pos, &fresh)])
        .unwrap();
    assert_eq!(world.read_chunk(target).unwrap(), chunk);
    assert_eq!(world.read_chunk(new_pos).unwrap(), fresh);
    drop(world);

    let after = fs::read(&path).unwrap();
    let (n1, ok1, _) = check_chunks_dat(&after);
    assert_eq!(n1, n0 + 1);
    assert!(ok1 >= ok0 + 256 - 1, "edited columns follow their cells");
    // Every untouched chunk keeps its bytes exactly.
    let rec = TerrainFormat::Chunks16.record_bytes();
    let toc = 65537 * 12;
    for k in 0..n0 {
        let r = toc + k * rec..toc + (k + 1) * rec;
        if k == 7 {
            assert_ne!(after[r.clone()], before[r]);
        } else {
            assert_eq!(after[r.clone()], before[r], "chunk slot {k}");
        }
    }
    // Reopening sees the same.
    let world = World::open(dir.path(), true).unwrap();
    assert_eq!(world.chunks().len(), n0 + 1);
    assert_eq!(
        world
            .read_chunk(target)
            .unwrap()
            .cell(5, 119, 9)
            .unwrap()
            .id,
        67
    );
    assert_eq!(
        world.read_chunk(target).unwrap().column(5, 9).unwrap().top,
        119.max(old.computed_top(5, 9))
    );
}

#[test]
fn region_edits_round_trip_and_keep_untouched_payloads() {
    let w = &region_worlds()[0];
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(w, tmp.path());
    let mut world = World::open(tmp.path(), false).unwrap();
    let positions = world.chunks();
    let originals: Vec<Vec<u8>> = positions
        .iter()
        .map(|p| world.read_raw(*p).unwrap())
        .collect();
    let target = positions[3];
    let mut chunk = world.read_chunk(target).unwrap();
    let old = chunk.clone();
    for x in 0..16 {
        for z in 0..16 {
            chunk
                .set_cell(
                    x,
                    200,
                    z,
                    Cell {
                        id: 5 + (x as u16 * z as u16) % 7,
                        light: 0,
                        data: 0,
                    },
                )
                .unwrap();
        }
    }
    chunk.follow_tops(&old);
    let new_pos = ChunkPos::new(-100, 300);
    let fresh = worldfs::survivalcraft::codec::chunk::Chunk::empty(TerrainFormat::Regions);
    world
        .commit_chunks(&[(target, &chunk), (new_pos, &fresh)])
        .unwrap();
    drop(world);

    let mut chunks = 0;
    for e in fs::read_dir(tmp.path().join("Regions")).unwrap() {
        let e = e.unwrap();
        assert!(!e.file_name().to_string_lossy().ends_with(".new"));
        chunks += check_region(&fs::read(e.path()).unwrap());
    }
    assert_eq!(chunks, positions.len() + 1);
    let world = World::open(tmp.path(), true).unwrap();
    assert_eq!(world.read_chunk(target).unwrap(), chunk);
    assert_eq!(world.read_chunk(new_pos).unwrap(), fresh);
    for (p, raw) in positions.iter().zip(&originals) {
        if *p != target {
            assert_eq!(&world.read_raw(*p).unwrap(), raw, "chunk {p} payload kept");
        }
    }
}

#[test]
fn project_inventories_edit_with_targeted_bytes() {
    let dir = unpack(&samples::path(samples::SC_ARDOITIA));
    let mut world = World::open(dir.path(), false).unwrap();
    let xml = world.project_xml().unwrap().unwrap();
    let info = project::read(&xml).unwrap();
    assert_eq!(info.version, "1.27");
    let players = info.players();
    assert_eq!(players.len(), 1);
    let (name, player) = &players[0];
    assert_eq!(name, "Player");
    let furnace = info
        .holders
        .iter()
        .find(|h| h.template == "Furnace")
        .unwrap();
    assert_eq!(furnace.coordinates.as_deref(), Some("3963,65,6697"));
    assert_eq!(
        furnace.inventories[0].slots[0],
        project::Slot {
            index: 2,
            contents: 127,
            count: 11
        }
    );

    // Give the player items through the view, commit, read back.
    let text = String::from_utf8(inventory::render(
        &player.inventories,
        inventory::ValueLayout::Bits16,
    ))
    .unwrap();
    let edited = text.replacen("[Inventory]\n", "[Inventory]\n0 20653 12\n5 67 40\n", 1);
    let invs = inventory::parse(edited.as_bytes()).unwrap();
    let out = project::write_inventories(&xml, &player.entity_id, &invs).unwrap();
    world.commit_project(&out).unwrap();
    let back = project::read(&world.project_xml().unwrap().unwrap()).unwrap();
    let p = &back.players()[0].1;
    assert_eq!(
        p.inventories[0].slots,
        vec![
            project::Slot {
                index: 0,
                contents: 20653,
                count: 12
            },
            project::Slot {
                index: 5,
                contents: 67,
                count: 40
            },
        ]
    );
    // Only the Slots element changed: same prefix and suffix around it.
    let first_diff = xml.iter().zip(&out).position(|(a, b)| a != b).unwrap();
    let same_tail = xml
        .iter()
        .rev()
        .zip(out.iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let changed = &xml[first_diff..xml.len() - same_tail];
    assert!(
        changed.len() < 8,
        "only the self-closing Slots tag end changed: {:?}",
        String::from_utf8_lossy(changed)
    );
    // Emptying the inventory again restores the original bytes exactly.
    let emptied = project::write_inventories(&out, &player.entity_id, &player.inventories).unwrap();
    assert_eq!(emptied, xml);

    // The 2.x sample: player name from the Players subsystem.
    let scnet = fs::read(region_worlds()[0].join("Project.xml")).unwrap();
    let info = project::read(&scnet).unwrap();
    let players = info.players();
    assert_eq!(players[0].0, "Geoffrey");
    assert_eq!(
        players[0].1.inventories[0].slots,
        vec![project::Slot {
            index: 1,
            contents: 162,
            count: 1
        }]
    );
    let unchanged =
        project::write_inventories(&scnet, &players[0].1.entity_id, &players[0].1.inventories)
            .unwrap();
    assert_eq!(unchanged, scnet);
}

#[test]
fn editing_blocks_cubeset_text_moves_the_top_height() {
    let world = World::open(&samples::path(samples::SC_ARDOITIA), true).unwrap();
    let pos = world.chunks()[20];
    let chunk = world.read_chunk(pos).unwrap();
    let top = chunk.computed_top(0, 0) as usize;
    assert!(top < 120);
    // Put the cell below the top of column (0,0) at y = top + 5: find its row in the text.
    let text = String::from_utf8(blocks::render(&chunk)).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let level = |y: usize| {
        lines
            .iter()
            .position(|l| l.contains(&format!("-- Level {y}")))
            .unwrap()
    };
    let row_of = |y: usize| {
        // The first row string of level y is on the line with the level comment or after it.
        let at = level(y);
        (at..)
            .find(|&i| lines[i].trim_start().starts_with('"'))
            .unwrap()
    };
    let src = lines[row_of(top)].trim_start()[1..2].to_string();
    let dst_line = row_of(top + 5);
    let mut edited: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    let l = &edited[dst_line];
    let q = l.find('"').unwrap();
    edited[dst_line] = format!(
        "{}{}{}",
        &l[..q + 1],
        src,
        &l[q + 1 + l[q + 1..].chars().next().unwrap().len_utf8()..]
    );
    let new = blocks::parse(&chunk, edited.join("\n").as_bytes()).unwrap();
    assert_eq!(
        new.cell(0, top + 5, 0).unwrap().id,
        chunk.cell(0, top, 0).unwrap().id
    );
    assert_eq!(new.column(0, 0).unwrap().top as usize, top + 5);
    assert_eq!(new.column(1, 0).unwrap(), chunk.column(1, 0).unwrap());
}
