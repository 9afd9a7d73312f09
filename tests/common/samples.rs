//! The one list of the real sample files the tests read, each with what it is. They live in
//! `../shared/samples` beside the repository and are read by path: never copied into the
//! repository, and tests that write take a temporary copy first.

use std::path::{Path, PathBuf};

/// The samples folder; panics when it is missing.
pub fn root() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/samples");
    assert!(
        dir.is_dir(),
        "samples folder {} is missing: these tests need ../shared/samples",
        dir.display()
    );
    dir
}

/// The sample `rel` (a constant of this module); panics when it is missing.
pub fn path(rel: &str) -> PathBuf {
    let p = root().join(rel);
    assert!(p.exists(), "sample missing: {}", p.display());
    p
}

/// The bytes of the sample file `rel`.
pub fn read(rel: &str) -> Vec<u8> {
    let p = path(rel);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

// ---- Luanti ----

/// Every Luanti sample: the map databases below it are found by walking it.
pub const LUANTI: &str = "luanti";
/// A world of the old `pos` schema: 12,133 blocks of versions 25 and 27, 11 with node
/// metadata, 3 Lua entities; players in files, `auth.txt`.
pub const MESECONS_WORLD: &str = "luanti/cornernote-mesecons-circuits";
/// The map of [`MESECONS_WORLD`].
pub const MESECONS_MAP: &str = "luanti/cornernote-mesecons-circuits/map.sqlite";
/// A player file (files backend, multi-line extended attributes).
pub const MESECONS_PLAYER: &str = "luanti/cornernote-mesecons-circuits/players/singleplayer";
/// An `auth.txt` of the files backend.
pub const MESECONS_AUTH_TXT: &str = "luanti/cornernote-mesecons-circuits/auth.txt";
/// `auth.sqlite` of the old VARCHAR schema: 2 users, 26 privileges.
pub const MTDB_AUTH: &str = "luanti/mtdb-testdata/auth.sqlite";
/// `players.sqlite` of the old schema: 1 player, 4 inventories, 47 items.
pub const MTDB_PLAYERS: &str = "luanti/mtdb-testdata/players.sqlite";
/// `mod_storage.sqlite`: 2 entries.
pub const MTDB_MOD_STORAGE: &str = "luanti/mtdb-testdata/mod_storage.sqlite";
/// A `pos`-schema map of 5,923 blocks, all version 29, 56 with node timers.
pub const TESTWORLD_MAP: &str = "luanti/rust-minetestworld-TestWorld/map.sqlite";
/// One version-29 block.
pub const TESTWORLD_BLOCK: &str = "luanti/rust-minetestworld-TestWorld/testmapblock";
/// The exact zstd-decompressed payload of [`TESTWORLD_BLOCK`].
pub const TESTWORLD_ZSTD_PAYLOAD: &str = "luanti/rust-minetestworld-TestWorld/test_zstd_content";
/// The engine's unit-test block of version 29: bricks at the corners, a chest.
pub const UNITTEST_V29: &str = "luanti/luanti-unittest/coded_mapblock29.bin";
/// The engine's unit-test block of version 27 with content width 1 (12-bit ids).
pub const UNITTEST_NONSTD: &str = "luanti/luanti-unittest/coded_mapblock_nonstd.bin";
/// The engine's unit-test block of version 20 (before 22: not supported).
pub const UNITTEST_V20: &str = "luanti/luanti-unittest/coded_mapblock20.bin";
/// The engine's inventory test strings: input, its output after the test's edits, and the
/// incremental (`KeepList`) form.
pub const INVENTORY_IN: &str = "luanti/luanti-unittest/serialized_inventory_in.txt";
pub const INVENTORY_OUT: &str = "luanti/luanti-unittest/serialized_inventory_out.txt";
pub const INVENTORY_INC: &str = "luanti/luanti-unittest/serialized_inventory_inc.txt";
/// MapEditr's test blocks with node timers and Lua entities (v29 with metadata).
pub const MAPEDITR_V25: &str = "luanti/mapeditr-testing/mapblock_v25.bin";
pub const MAPEDITR_V28: &str = "luanti/mapeditr-testing/mapblock_v28.bin";
pub const MAPEDITR_V29: &str = "luanti/mapeditr-testing/mapblock_v29.bin";
/// A version-28 block with chest and locked-chest inventories.
pub const MAPPARSER_META: &str = "luanti/mapparser-testdata/mb-with-metadata.bin";
/// A version-29 (zstd) block.
pub const MAPPARSER_ZSTD: &str = "luanti/mapparser-testdata/zstd-block.bin";
/// A version-28 block in the network form (no objects, no timestamp): no disk block.
pub const MAPPARSER_NETWORK: &str = "luanti/mapparser-testdata/mapblock3516192727.bin";
/// A network payload without its version byte: no disk block.
pub const MAPPARSER_NETWORK_PAYLOAD: &str = "luanti/mapparser-testdata/network-blockdata.bin";
/// A version-27 block of air and stone.
pub const MTMAPPER_BLOCK: &str = "luanti/minetestmapper-ci/test_block.bin";
/// A synthetic malformed version-23 block (a name-id entry runs past the end).
pub const MTMAPPER_BAD_V23: &str = "luanti/minetestmapper-ci/test_block2.bin";
/// Single version-28 blocks named by their position.
pub const MAPPARSER_BLOCKS: [&str; 13] = [
    "luanti/mapparser-testdata/0.-1.0",
    "luanti/mapparser-testdata/0.0.0",
    "luanti/mapparser-testdata/0.1.0",
    "luanti/mapparser-testdata/0.2.0",
    "luanti/mapparser-testdata/0.3.0",
    "luanti/mapparser-testdata/0.4.0",
    "luanti/mapparser-testdata/0.5.0",
    "luanti/mapparser-testdata/0.6.0",
    "luanti/mapparser-testdata/0.7.0",
    "luanti/mapparser-testdata/0.8.0",
    "luanti/mapparser-testdata/0.9.0",
    "luanti/mapparser-testdata/0.10.0",
    "luanti/mapparser-testdata/11.0.2",
];
/// The single-block files with the richest content (metadata, inventories, objects, timers,
/// the content-width-1 quirk) at versions 25, 27, 28 and 29.
pub const RICH_BLOCKS: [&str; 6] = [
    MAPEDITR_V25,
    MAPEDITR_V28,
    MAPEDITR_V29,
    MAPPARSER_META,
    UNITTEST_V29,
    UNITTEST_NONSTD,
];
/// The single-block files that hold no readable disk block (each fails for its reason).
pub const BAD_BLOCKS: [&str; 4] = [
    UNITTEST_V20,
    MTMAPPER_BAD_V23,
    MAPPARSER_NETWORK,
    MAPPARSER_NETWORK_PAYLOAD,
];

/// Every single-block file that holds a good disk block.
pub fn good_blocks() -> Vec<&'static str> {
    let mut out = RICH_BLOCKS.to_vec();
    out.extend([MAPPARSER_ZSTD, MTMAPPER_BLOCK, TESTWORLD_BLOCK]);
    out.extend(MAPPARSER_BLOCKS);
    out
}

// ---- Survivalcraft ----

/// Every Survivalcraft sample.
pub const SURVIVALCRAFT: &str = "survivalcraft";
/// A region world (SCNET fork, vanilla 2.3 region files): `Project.xml`, two regions.
pub const SC_REGION_WORLD: &str = "survivalcraft/scnet-WorldBeforeTerritoryBlockRefactor";
/// A region world with a JSON project (SCNET only).
pub const SC_JSON_WORLD: &str = "survivalcraft/scnet-WorldUseJson";
/// A real 1.27 world, packed: `Chunks.dat` (132 chunks) and `Project.xml` in a zip.
pub const SC_ARDOITIA: &str = "survivalcraft/padillah-ScWorldEditor/Ardoitia.scworld";

// ---- Terrarum ----

/// Every TVDA and TEVD sample disk.
pub const TVDA: &str = "tvda";
/// A minimal player disk made by Terrarum's serializer.
pub const TVDA_CLEAN: &str = "tvda/synthetic_tvda-v254_player-min_clean.tvda";
/// [`TVDA_CLEAN`] after the game's skimmer appended changes (discarded and repeated entries).
pub const TVDA_DIRTY: &str = "tvda/synthetic_tvda-v254_player-min_dirty-after-skimmer.tvda";
/// A minimal world disk with zstd chunks.
pub const TVDA_WORLD: &str = "tvda/synthetic_tvda-v254_world-min_zstd-chunks.tvda";
/// The TVDA sample disks.
pub const TVDA_DISKS: [&str; 3] = [TVDA_CLEAN, TVDA_DIRTY, TVDA_WORLD];
/// A current v3 TEVD disk (tsvm DOSBOOT, 21 files, a hidden boot sector).
pub const TEVD_V3: &str = "tvda/tevd-v3-2023_tsvm-DOSBOOT.tevd";
/// The v2 TEVD disk holding the same files as [`TEVD_V3`].
pub const TEVD_V2: &str = "tvda/tevd-v2_tsvm-DOSBOOT-2022-12-23.tevd";
/// An old v3 TEVD disk with a footer (4 files).
pub const TEVD_V3_OLD: &str = "tvda/tevd-v3-2018-footer_tevd-test-suite-00.tevd";
