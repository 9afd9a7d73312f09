//! Decoded views over TVDA disks: the world sample's JSON and zstd chunks, and fixtures made
//! by our own encoders for what the samples lack (every codec and layer, actors, images,
//! player inventory), edited through the views, committed, re-opened and CRC-checked.

#[allow(dead_code)]
mod common;

use common::samples::{self, TVDA_CLEAN, TVDA_DIRTY, TVDA_WORLD};
use common::tvda::assert_crcs_ok;

use std::path::Path;

use worldfs::tvda::codec::chunk::{
    chunk_entry_id, decode_chunk, encode_chunk, parse_chunk_entry_id, Layer, Tile, CHUNK_TILES,
};
use worldfs::tvda::codec::compress::{compress, gunzip, Codec};
use worldfs::tvda::codec::tvda::{Content, DiskKind, Header};
use worldfs::tvda::store::tvda::{Change, Disk};
use worldfs::tvda::views::chunk::{
    parse_chunk, render_chunk, render_stored_chunk, store_chunk, World,
};
use worldfs::tvda::views::inventory::{apply_inventory, render_inventory};
use worldfs::tvda::views::json::{parse_actor_json, parse_info_json, render_json};
use worldfs::tvda::views::names;

#[test]
fn every_sample_info_json_pretty_prints_with_genver_first() {
    for name in [TVDA_CLEAN, TVDA_DIRTY, TVDA_WORLD] {
        let disk = Disk::open(&samples::path(name), false).unwrap();
        let w = names::by_id(disk.header().kind(), -1).unwrap();
        assert_eq!(w.name, "savegameinfo.json");
        let stored = disk.read(-1).unwrap();
        let text = render_json(&stored).unwrap();
        let head = String::from_utf8_lossy(&text[..text.len().min(128)]).into_owned();
        assert!(head.starts_with("{\n  \"genver\": "), "{name}: {head}");
        assert_eq!(parse_info_json(&text, &stored).unwrap(), stored, "{name}");
    }
}

#[test]
fn world_sample_chunks_decode_and_render() {
    let disk = Disk::open(&samples::path(TVDA_WORLD), false).unwrap();
    let world = World::from_json(&disk.read(-1).unwrap()).unwrap();
    assert_eq!((world.geometry.chunks_x, world.geometry.chunks_y), (2, 2));
    assert_eq!(world.codec, Codec::Zstd);
    let mut seen = 0;
    for e in disk.entries() {
        let Some((layer, chunk_no)) = parse_chunk_entry_id(e.id) else {
            continue;
        };
        let layer = Layer::from_index(layer).unwrap();
        let (cx, cy) = world.geometry.coords(chunk_no).unwrap();
        assert_eq!(
            names::chunk_file_name(cx, cy),
            if chunk_no == 3 {
                "1,1.cubeset"
            } else {
                "0,0.cubeset"
            }
        );
        let stored = disk.read(e.id).unwrap();
        let (codec, tiles) = decode_chunk(layer, &stored).unwrap();
        assert_eq!(codec, Codec::Zstd);
        assert_eq!(tiles.len(), CHUNK_TILES);
        let text = render_stored_chunk(layer, &stored, &world.names).unwrap();
        assert!(
            !String::from_utf8_lossy(&text).contains("not in tileNumberToNameMap"),
            "all tiles named"
        );
        assert_eq!(parse_chunk(&text, layer, &world.names).unwrap(), tiles);
        assert_eq!(
            store_chunk(&text, layer, &world.names, Some(&stored), Codec::Snappy).unwrap(),
            stored
        );
        seen += 1;
    }
    assert_eq!(seen, 5);
}

fn world_json() -> Vec<u8> {
    br#"{"genver":83886082,"worldIndex":"00000000-0000-4000-8000-000000000002","width":360,"height":270,"tileNumberToNameMap":{"0":"basegame:0","1":"basegame:1","2":"basegame:2","3":"ores@basegame:1","4":"fluid@basegame:1","65535":"basegame:-2"},"comp":4,"actors":[268435456]}"#.to_vec()
}

fn pattern(layer: Layer, seed: u16) -> Vec<Tile> {
    (0..CHUNK_TILES)
        .map(|i| {
            let number = [0u16, 1, 2, 3, 4, 65535, 77][(i + usize::from(seed)) % 7];
            let meta = match layer {
                Layer::Terrain | Layer::Wall => 0,
                Layer::Ores => (i % 256) as u16,
                Layer::Fluid => [0x3C00u16, 0x3800, 0x1234][i % 3],
            };
            Tile { number, meta }
        })
        .collect()
}

/// A world disk with a chunk for each (layer, codec), an actor, a thumbnail.
fn make_world(path: &Path) -> Disk {
    let mut entries = vec![(-1, Content::File(world_json()))];
    for (li, layer) in Layer::ALL.into_iter().enumerate() {
        for (ci, codec) in [Codec::Gzip, Codec::Zstd, Codec::Snappy]
            .into_iter()
            .enumerate()
        {
            let chunk_no = (li * 3 + ci) as u32;
            let stored = encode_chunk(layer, codec, &pattern(layer, chunk_no as u16)).unwrap();
            entries.push((
                chunk_entry_id(layer.index(), chunk_no).unwrap(),
                Content::File(stored),
            ));
        }
    }
    entries.push((
        0x1000_0000,
        Content::File(br#"{"genver":1,"class":"X","referenceID":268435456}"#.to_vec()),
    ));
    entries.push((
        -2,
        Content::File(compress(Codec::Gzip, b"TGA bytes").unwrap()),
    ));
    entries.push((-4, Content::File(b"basegame 0.5.2".to_vec())));
    Disk::create(
        path,
        Header::new("Fixture World", 2).unwrap(),
        &entries,
        1_700_000_000,
    )
    .unwrap()
}

#[test]
fn chunks_in_every_codec_and_layer_edit_and_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("world");
    let mut disk = make_world(&path);
    assert_crcs_ok(&disk);
    let world = World::from_json(&disk.read(-1).unwrap()).unwrap();
    assert_eq!(world.codec, Codec::Snappy);
    for (li, layer) in Layer::ALL.into_iter().enumerate() {
        for (ci, codec) in [Codec::Gzip, Codec::Zstd, Codec::Snappy]
            .into_iter()
            .enumerate()
        {
            let chunk_no = (li * 3 + ci) as u32;
            let id = chunk_entry_id(layer.index(), chunk_no).unwrap();
            let stored = disk.read(id).unwrap();
            let text = render_stored_chunk(layer, &stored, &world.names).unwrap();
            let s = String::from_utf8(text.clone()).unwrap();
            assert!(
                s.contains(": 77: "),
                "an unnamed tile number shows as a number"
            );
            // Edit: every air tile becomes basegame:2 by renaming its definition.
            let edited = s.replacen(": basegame:0:", ": basegame:2:", 1);
            assert_ne!(edited, s, "{s}");
            let new_stored = store_chunk(
                edited.as_bytes(),
                layer,
                &world.names,
                Some(&stored),
                world.codec,
            )
            .unwrap();
            assert_eq!(Codec::detect(&new_stored), Some(codec), "codec kept");
            disk.commit(
                &[Change::Put {
                    id,
                    data: new_stored,
                }],
                1_800_000_000,
            )
            .unwrap();
            let (_, tiles) = decode_chunk(layer, &disk.read(id).unwrap()).unwrap();
            let mut want = pattern(layer, chunk_no as u16);
            // Definitions are sorted: the first air definition has the smallest META.
            let air_meta = want
                .iter()
                .filter(|t| t.number == 0)
                .map(|t| t.meta)
                .min()
                .unwrap();
            for t in want
                .iter_mut()
                .filter(|t| t.number == 0 && t.meta == air_meta)
            {
                t.number = 2;
            }
            assert_eq!(tiles, want, "{layer:?} {codec:?}");
        }
    }
    let disk = Disk::open(&path, false).unwrap();
    assert_crcs_ok(&disk);
    assert_eq!(disk.header().save_mode() & 1, 1);
    // Unknown names and truncated texts are refused with a position.
    let stored = disk.read(chunk_entry_id(0, 0).unwrap()).unwrap();
    let text =
        String::from_utf8(render_stored_chunk(Layer::Terrain, &stored, &world.names).unwrap())
            .unwrap();
    let e = store_chunk(
        text.replace("basegame:1", "basegame:zzz").as_bytes(),
        Layer::Terrain,
        &world.names,
        Some(&stored),
        Codec::Snappy,
    )
    .unwrap_err();
    assert!(e.message().starts_with("line "), "{e}");
    let e = store_chunk(
        &text.as_bytes()[..text.len() - 400],
        Layer::Terrain,
        &world.names,
        Some(&stored),
        Codec::Snappy,
    )
    .unwrap_err();
    assert_eq!(e.errno(), libc::EINVAL);
}

#[test]
fn new_chunks_use_the_worlds_codec() {
    let names = World::from_json(&world_json()).unwrap();
    let text = render_chunk(Layer::Wall, &pattern(Layer::Wall, 1), &names.names);
    let stored = store_chunk(&text, Layer::Wall, &names.names, None, names.codec).unwrap();
    assert_eq!(Codec::detect(&stored), Some(Codec::Snappy));
    assert_eq!(
        decode_chunk(Layer::Wall, &stored).unwrap().1,
        pattern(Layer::Wall, 1)
    );
}

#[test]
fn json_actor_image_and_raw_entries_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("world");
    let mut disk = make_world(&path);
    // savegameinfo.json
    let stored = disk.read(-1).unwrap();
    let text = String::from_utf8(render_json(&stored).unwrap()).unwrap();
    let edited = text
        .replace("\"spawn\"", "x")
        .replace("\"comp\": 4", "\"comp\": 4,\n  \"spawnX\": 12");
    let new = parse_info_json(edited.as_bytes(), &stored).unwrap();
    assert!(new.starts_with(br#"{"genver":83886082,"#));
    let e = parse_info_json(b"{\n  \"genver\": 1,\n  oops\n}", &stored).unwrap_err();
    assert!(e.message().starts_with("line 3, column"), "{e}");
    // actors/ID.json
    let actor_id = 0x1000_0000;
    assert_eq!(names::actor_file_name(actor_id).unwrap(), "268435456.json");
    let actor = disk.read(actor_id).unwrap();
    let atext = String::from_utf8(render_json(&actor).unwrap()).unwrap();
    let new_actor = parse_actor_json(atext.replace("\"X\"", "\"Y\"").as_bytes(), &actor).unwrap();
    // thumbnail.tga (world -2) is shown gunzipped
    let w = names::by_id(DiskKind::World, -2).unwrap();
    assert_eq!(
        (w.name, w.presentation),
        ("thumbnail.tga", names::Presentation::Gzip)
    );
    assert_eq!(
        gunzip(&disk.read(-2).unwrap(), 1 << 20).unwrap(),
        b"TGA bytes"
    );
    let new_thumb = compress(Codec::Gzip, b"new TGA").unwrap();
    disk.commit(
        &[
            Change::Put { id: -1, data: new },
            Change::Put {
                id: actor_id,
                data: new_actor,
            },
            Change::Put {
                id: -2,
                data: new_thumb,
            },
            Change::Put {
                id: 5,
                data: b"raw entry".to_vec(),
            },
        ],
        1_800_000_000,
    )
    .unwrap();
    let disk = Disk::open(&path, false).unwrap();
    assert_crcs_ok(&disk);
    assert!(
        String::from_utf8(render_json(&disk.read(-1).unwrap()).unwrap())
            .unwrap()
            .contains("\"spawnX\": 12")
    );
    assert!(disk
        .read(actor_id)
        .unwrap()
        .windows(3)
        .any(|w| w == b"\"Y\""));
    assert_eq!(
        gunzip(&disk.read(-2).unwrap(), 1 << 20).unwrap(),
        b"new TGA"
    );
    assert_eq!(
        disk.read(names::parse_entry_file_name("5").unwrap())
            .unwrap(),
        b"raw entry"
    );
}

#[test]
fn player_inventory_edit_round_trips_through_the_disk() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("player");
    let json = br#"{"genver":83886082,"class":"net.torvald.terrarum.modulebasegame.gameactors.IngamePlayer","actorValue":{"hashMap":{"name":{"value":"Alice"}}},"inventory":{"maxCapacity":1000,"capacityMode":1,"itemList":[{"itm":"basegame:1","qty":20},{"itm":"item@basegame:3","qty":1}],"wallet":"0","itemEquipped":[null],"quickSlot":[]}}"#;
    let mut disk = Disk::create(
        &path,
        Header::new("Alice", 1).unwrap(),
        &[
            (-1, Content::File(json.to_vec())),
            (-4, Content::File(b"basegame 0.5.2".to_vec())),
        ],
        1_700_000_000,
    )
    .unwrap();
    let text = String::from_utf8(render_inventory(&disk.read(-1).unwrap()).unwrap()).unwrap();
    assert!(text.contains("basegame:1 20\nitem@basegame:3 1\n"));
    let edited = text.replace("basegame:1 20", "basegame:1 64") + "basegame:2 5\n";
    let new = apply_inventory(&disk.read(-1).unwrap(), edited.as_bytes()).unwrap();
    disk.commit(&[Change::Put { id: -1, data: new }], 1_800_000_000)
        .unwrap();
    assert_eq!(
        disk.header().save_mode() & 1,
        0,
        "player disks keep byte 49"
    );
    let disk = Disk::open(&path, false).unwrap();
    assert_crcs_ok(&disk);
    let again = String::from_utf8(render_inventory(&disk.read(-1).unwrap()).unwrap()).unwrap();
    assert!(
        again.ends_with("basegame:1 64\nbasegame:2 5\nitem@basegame:3 1\n"),
        "{again}"
    );
    let e = apply_inventory(&disk.read(-1).unwrap(), b"basegame:1 lots\n").unwrap_err();
    assert_eq!(
        e.message(),
        "line 1, column 12: quantity \"lots\" is not a whole number"
    );
}

#[test]
fn corrupt_chunk_payloads_give_errors_never_panics() {
    let disk = Disk::open(&samples::path(TVDA_WORLD), false).unwrap();
    let world = World::from_json(&disk.read(-1).unwrap()).unwrap();
    for e in disk
        .entries()
        .filter(|e| parse_chunk_entry_id(e.id).is_some())
    {
        let layer = Layer::from_index(parse_chunk_entry_id(e.id).unwrap().0).unwrap();
        let good = disk.read(e.id).unwrap();
        for cut in 0..good.len() {
            assert!(decode_chunk(layer, &good[..cut]).is_err());
        }
        for i in 0..good.len() {
            for bit in [1u8, 0x10, 0x80] {
                let mut bad = good.clone();
                bad[i] ^= bit;
                let _ = render_stored_chunk(layer, &bad, &world.names);
            }
        }
    }
    for blob in [
        &b""[..],
        b"{",
        b"[]",
        b"{\"genver\":1}",
        b"{\"width\":1e99,\"height\":90}",
    ] {
        assert!(World::from_json(blob).is_err());
        let _ = render_json(blob);
        let _ = render_inventory(blob);
    }
}
