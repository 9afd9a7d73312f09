//! Writes TVDA disks for the mount tests with worldfs's own encoders, covering what the
//! samples lack: chunks in every layer and codec, an actor, images, a player inventory.
//!
//! `tvda_fixture world OUT`: a 360 × 270-tile world (4 × 3 chunks); chunk number
//! `3·layer + codec` holds layer `layer` (terrain, wall, ores, fluid) compressed with codec
//! `codec` (gzip, zstd, Snappy); plus actor 268435456, `thumbnail.tga` and `loadOrder.txt`.
//! `tvda_fixture player OUT`: a player disk with an inventory, a spritedef, a screenshot,
//! `loadOrder.txt` and a blob entry.
//! `tvda_fixture tevd OUT`: an empty TEVD v3 disk of 64 MiB capacity (the samples hold at most
//! 720 KiB, too little for the POSIX suites' big files).

use std::path::Path;
use std::process::ExitCode;

use worldfs::error::{Error, Result};
use worldfs::tvda::codec::chunk::{chunk_entry_id, encode_chunk, Layer, Tile, CHUNK_TILES};
use worldfs::tvda::codec::compress::{compress, Codec};
use worldfs::tvda::codec::tvda::{Content, Header};
use worldfs::tvda::store::tevd::TevdDisk;
use worldfs::tvda::store::tvda::Disk;

const NOW: u64 = 1_700_000_000;

/// Tiles of a recognisable pattern: every tile number of the map, one unnamed (77), and
/// the layer's extra values.
fn pattern(layer: Layer, seed: usize) -> Vec<Tile> {
    (0..CHUNK_TILES)
        .map(|i| Tile {
            number: [0u16, 1, 2, 3, 4, 65535, 77][(i / 90 + seed) % 7],
            meta: match layer {
                Layer::Terrain | Layer::Wall => 0,
                Layer::Ores => (i % 256) as u16,
                Layer::Fluid => [0x3C00u16, 0x3800, 0x1234][i % 3],
            },
        })
        .collect()
}

fn world(out: &Path) -> Result<()> {
    let json = br#"{"genver":83886082,"worldIndex":"00000000-0000-4000-8000-000000000002","width":360,"height":270,"spawnX":10,"spawnY":20,"tileNumberToNameMap":{"0":"basegame:0","1":"basegame:1","2":"basegame:2","3":"ores@basegame:1","4":"fluid@basegame:1","65535":"basegame:-2"},"comp":4,"actors":[268435456]}"#;
    let mut entries = vec![(-1, Content::File(json.to_vec()))];
    for (li, layer) in Layer::ALL.into_iter().enumerate() {
        for (ci, codec) in [Codec::Gzip, Codec::Zstd, Codec::Snappy]
            .into_iter()
            .enumerate()
        {
            let no = li * 3 + ci;
            let stored = encode_chunk(layer, codec, &pattern(layer, no))?;
            entries.push((
                chunk_entry_id(layer.index(), no as u32)?,
                Content::File(stored),
            ));
        }
    }
    entries.push((
        0x1000_0000,
        Content::File(
            br#"{"genver":83886082,"class":"net.torvald.terrarum.modulebasegame.gameactors.FixtureTikiTorch","referenceID":268435456,"hitbox":{"x":10.5,"y":20.0}}"#
                .to_vec(),
        ),
    ));
    entries.push((-2, Content::File(compress(Codec::Gzip, &tga())?)));
    entries.push((-4, Content::File(b"basegame 0.5.2".to_vec())));
    Disk::create(out, Header::new("Fixture World", 2)?, &entries, NOW)?;
    Ok(())
}

/// A 2 × 2 true-colour TGA.
fn tga() -> Vec<u8> {
    let mut t = vec![0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 2, 0, 32, 8];
    t.extend_from_slice(&[
        0, 0, 255, 255, 0, 255, 0, 255, 255, 0, 0, 255, 255, 255, 255, 255,
    ]);
    t
}

fn player(out: &Path) -> Result<()> {
    let json = br#"{"genver":83886082,"class":"net.torvald.terrarum.modulebasegame.gameactors.IngamePlayer","referenceID":145629,"actorValue":{"hashMap":{"name":{"value":"Alice"}}},"inventory":{"maxCapacity":1000,"capacityMode":1,"itemList":[{"itm":"basegame:1","qty":10},{"itm":"item@basegame:4","qty":1,"extra":"kept"}],"wallet":"0","itemEquipped":[null,"item@basegame:4"],"quickSlot":[null,null,null,null,null,null,null,null,null,null]},"uuid":"00000000-0000-4000-8000-000000000001"}"#;
    let entries = vec![
        (-1, Content::File(json.to_vec())),
        (-2, Content::File(b"ANIM_RUN=1;2;3\n".to_vec())),
        (-4, Content::File(b"basegame 0.5.2".to_vec())),
        (-5, Content::File(compress(Codec::Gzip, &tga())?)),
        (-2_147_483_648, Content::File(vec![0xA5; 64])),
    ];
    Disk::create(out, Header::new("Alice", 1)?, &entries, NOW)?;
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let result = match args.as_slice() {
        [_, kind, out] if kind == "world" => world(Path::new(out)),
        [_, kind, out] if kind == "player" => player(Path::new(out)),
        [_, kind, out] if kind == "tevd" => {
            TevdDisk::create(Path::new(out), "pjdfstest", 64 << 20, NOW).map(|_| ())
        }
        _ => Err(Error::invalid("usage: tvda_fixture world|player|tevd OUT")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tvda_fixture: {e}");
            ExitCode::FAILURE
        }
    }
}
