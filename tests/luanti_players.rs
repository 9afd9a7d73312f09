//! Players: the player file format and both stores, on the real samples and on worlds the real
//! engine (minetest-server 5.6.1) generates; the engine reads back what worldfs wrote.

#[allow(dead_code)]
mod common;

use std::path::{Path, PathBuf};

use common::engine::{migrate_copy, mkworld_with};
use common::samples;
use worldfs::luanti::codec::block::ItemStack;
use worldfs::luanti::codec::inventory::parse_itemstring;
use worldfs::luanti::store::players::PlayerBackend;
use worldfs::luanti::store::players::{
    parse_player, read_player_file, render_player, Player, PlayerStore,
};
use worldfs::luanti::store::players_files::FilesPlayers;
use worldfs::luanti::store::players_sqlite::SqlitePlayers;
use worldfs::luanti::store::world_mt::WorldMt;

fn copy_to_temp(src: &Path, dir: &Path) -> PathBuf {
    let dst = dir.join(src.file_name().unwrap());
    std::fs::copy(src, &dst).unwrap();
    dst
}

fn item(s: &str) -> ItemStack {
    parse_itemstring(s.as_bytes()).unwrap()
}

/// render → parse gives the same player, and rendering is stable.
fn assert_view_round_trip(player: &Player) {
    let text = render_player(player);
    let back = parse_player(&text, Some(player)).unwrap_or_else(|e| {
        panic!("{e}\n{}", String::from_utf8_lossy(&text));
    });
    assert_eq!(&back, player);
    assert_eq!(render_player(&back), text);
}

#[test]
fn sample_player_file_round_trips() {
    let path = samples::path(samples::MESECONS_PLAYER);
    let bytes = std::fs::read(&path).unwrap();
    let player = read_player_file(&bytes).unwrap();
    assert_eq!(player.name, "singleplayer");
    assert_eq!((player.hp, player.breath), (20, 11));
    assert_eq!(player.position, [191.7, 28.33, -287.33]);
    assert_eq!((player.pitch, player.yaw), (30.49, 288.08));
    assert!(player.metadata.is_empty());
    let names: Vec<_> = player
        .inventory
        .lists
        .iter()
        .map(|l| l.name.as_str())
        .collect();
    assert_eq!(names, ["main", "craft", "craftpreview", "craftresult"]);
    assert_eq!(player.inventory.lists[0].slots.len(), 32);
    assert_eq!(player.inventory.lists[1].width, 3);
    assert_eq!(player.inventory.lists[0].slots[6], item("default:stone"));
    assert_view_round_trip(&player);
    // The keys the old engine wrote sorted come out in the same order and form.
    let text = String::from_utf8(render_player(&player)).unwrap();
    let original = String::from_utf8(bytes).unwrap();
    let inventory_at = original.find("PlayerArgsEnd").unwrap();
    assert_eq!(
        text[text.find("PlayerArgsEnd").unwrap()..],
        original[inventory_at..]
    );
    assert!(
        text.starts_with("breath = 11\nextended_attributes = {}\nhp = 20\nname = singleplayer\n")
    );
}

#[test]
fn old_schema_sample_database_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let db = copy_to_temp(&samples::path(samples::MTDB_PLAYERS), dir.path());
    let mut store = SqlitePlayers::open(&db, false).unwrap();
    assert_eq!(store.list().unwrap(), ["singleplayer"]);
    let player = store.load("singleplayer").unwrap();
    assert_eq!((player.hp, player.breath), (20, 10));
    assert_eq!(player.position, [-1631.63, 196.21, -430.44]);
    assert_eq!(player.inventory.lists.len(), 4);
    assert_eq!(player.inventory.lists[0].slots.len(), 36);
    assert_eq!(
        player.inventory.lists[0].slots[0],
        item("scifi_nodes:blacktile2 99")
    );
    assert_view_round_trip(&player);
    // Saving the unchanged player stores the same rows.
    store.save(&player).unwrap();
    assert_eq!(store.load("singleplayer").unwrap(), player);
    let conn = rusqlite::Connection::open(&db).unwrap();
    let items: i64 = conn
        .query_row("SELECT count(*) FROM player_inventory_items", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(items, 47);
}

#[test]
fn current_schema_database_holds_a_player_with_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("players.sqlite");
    let mut store = SqlitePlayers::open_or_create(&db).unwrap();
    let path = samples::path(samples::MESECONS_PLAYER);
    let mut player = read_player_file(&std::fs::read(path).unwrap()).unwrap();
    player
        .metadata
        .insert("3d_armor".into(), "return {\n\tx = 1\n}".into());
    player.metadata.insert("quote\"key".into(), String::new());
    store.create(&player).unwrap();
    assert!(store.create(&player).is_err(), "duplicate player accepted");
    assert_eq!(store.load("singleplayer").unwrap(), player);
    assert_view_round_trip(&player);
    store.delete("singleplayer").unwrap();
    assert!(store.list().unwrap().is_empty());
    let conn = rusqlite::Connection::open(&db).unwrap();
    for table in [
        "player_inventories",
        "player_inventory_items",
        "player_metadata",
    ] {
        let n: i64 = conn
            .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 0, "rows left in {table}");
    }
}

/// Changes a player the way a user editing `players/NAME` would.
fn edit(text: &[u8]) -> Vec<u8> {
    let text = String::from_utf8(text.to_vec()).unwrap();
    let text = text
        .replace("hp = 11\n", "hp = 7\n")
        .replace("position = (-52.97,150,19.41)", "position = (100.5,-20,3.25)")
        .replace("Item default:cobble 99\n", "Item default:mese 42\n")
        .replace(
            "extended_attributes = {}\n",
            "extended_attributes = \"\"\"\n{\n  \"note\": \"two\\nlines\",\n  \"xp\": \"12\"\n}\n\"\"\"\n",
        );
    assert!(
        text.contains("default:mese 42") && text.contains("100.5"),
        "{text}"
    );
    text.into_bytes()
}

#[test]
fn engine_reads_what_the_sqlite_store_saved() {
    let dir = tempfile::tempdir().unwrap();
    let world = mkworld_with(dir.path(), "w", "sqlite3", "sqlite3");
    let mt = WorldMt::read(&world).unwrap();
    let mut store = PlayerStore::open(&world, &mt, false).unwrap();
    assert_eq!(store.backend(), "sqlite3");
    assert_eq!(store.list().unwrap(), ["celeron55"]);
    let stored = store.load("celeron55").unwrap();
    assert_eq!(
        stored.inventory.lists[0].slots[1],
        item("default:pick_steel 1 50112")
    );
    let view = edit(&render_player(&stored));
    let edited = parse_player(&view, Some(&stored)).unwrap();
    store.save(&edited).unwrap();
    drop(store);

    let copy = dir.path().join("copy");
    migrate_copy(&world, &copy, "players", "files");
    let written = std::fs::read(copy.join("players/celeron55")).unwrap();
    let engine = read_player_file(&written).unwrap();
    assert_eq!(
        engine,
        edited,
        "engine wrote:\n{}",
        String::from_utf8_lossy(&written)
    );
    assert_eq!(engine.hp, 7);
    assert_eq!(engine.position, [100.5, -20.0, 3.25]);
    assert_eq!(engine.metadata["note"], "two\nlines");
}

#[test]
fn engine_reads_what_the_files_store_saved() {
    let dir = tempfile::tempdir().unwrap();
    let world = mkworld_with(dir.path(), "w", "files", "files");
    let mt = WorldMt::read(&world).unwrap();
    let mut store = PlayerStore::open(&world, &mt, false).unwrap();
    assert_eq!(store.backend(), "files");
    let stored = store.load("celeron55").unwrap();
    let edited = parse_player(&edit(&render_player(&stored)), Some(&stored)).unwrap();
    store.save(&edited).unwrap();
    let mut second = edited.clone();
    second.name = "newcomer".into();
    store.create(&second).unwrap();
    assert_eq!(store.list().unwrap(), ["celeron55", "newcomer"]);
    assert_eq!(store.load("newcomer").unwrap(), second);
    drop(store);

    let copy = dir.path().join("copy");
    migrate_copy(&world, &copy, "players", "sqlite3");
    let engine = SqlitePlayers::open(&copy.join("players.sqlite"), true).unwrap();
    assert_eq!(engine.list().unwrap(), ["celeron55", "newcomer"]);
    assert_eq!(engine.load("celeron55").unwrap(), edited);
    assert_eq!(engine.load("newcomer").unwrap(), second);
}

#[test]
fn files_store_finds_players_by_the_name_inside() {
    let dir = tempfile::tempdir().unwrap();
    let players = dir.path().join("players");
    std::fs::create_dir(&players).unwrap();
    let sample = samples::path(samples::MESECONS_PLAYER);
    let original = std::fs::read(sample).unwrap();
    // A file named after someone else, and a leftover temporary file.
    std::fs::write(players.join("other"), &original).unwrap();
    std::fs::write(players.join(".other.worldfs-tmp"), b"junk").unwrap();
    let mut store = PlayerStore::new(FilesPlayers::new(&players));
    assert_eq!(store.list().unwrap(), ["singleplayer"]);
    let mut player = store.load("singleplayer").unwrap();
    player.hp = 3;
    store.save(&player).unwrap();
    assert_eq!(
        read_player_file(&std::fs::read(players.join("other")).unwrap())
            .unwrap()
            .hp,
        3
    );
    store.delete("singleplayer").unwrap();
    assert!(store.list().unwrap().is_empty());
    assert!(store.load("singleplayer").is_err());
}

fn error_of(text: &[u8], stored: &Player) -> String {
    parse_player(text, Some(stored))
        .unwrap_err()
        .message()
        .to_string()
}

#[test]
fn bad_player_files_fail_with_their_line_and_store_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = copy_to_temp(&samples::path(samples::MTDB_PLAYERS), dir.path());
    let before = std::fs::read(&db).unwrap();
    let mut store = SqlitePlayers::open(&db, false).unwrap();
    let stored = store.load("singleplayer").unwrap();
    let good = String::from_utf8(render_player(&stored)).unwrap();
    let cases: [(String, &str); 8] = [
        (good.replace("hp = 20", "hp = 20\nspeed = 3"), "line 4,"),
        (good.replace("position = (", "position = (x"), "line 6,"),
        (good.replace("hp = 20", "hp = lots"), "line 3,"),
        (good.replace("List craft 9", "List craft 10"), "line 49,"),
        (
            good.replace(
                "Item scifi_nodes:blacktile2 99",
                "Item scifi_nodes:blacktile2 99x",
            ),
            "line 12,",
        ),
        (good.replace("PlayerArgsEnd\n", ""), "PlayerArgsEnd"),
        (
            good.replace("name = singleplayer\n", ""),
            "missing key \"name\"",
        ),
        (
            good.replace("breath = 10", "breath = 10\nbreath = 11"),
            "appears twice",
        ),
    ];
    for (text, expected) in &cases {
        let message = error_of(text.as_bytes(), &stored);
        assert!(
            message.contains(expected),
            "expected {expected:?} in {message:?}"
        );
    }
    // Values a parser could let through but a store must refuse.
    let mut bad = stored.clone();
    bad.position[0] = f32::NAN;
    assert!(store.save(&bad).is_err());
    let mut bad = stored.clone();
    bad.inventory.lists[0].name = "two words".into();
    assert!(store.save(&bad).is_err());
    let mut bad = stored.clone();
    bad.name = "nobody".into();
    assert!(store.save(&bad).is_err());
    assert!(store.create(&stored).is_err());
    drop(store);
    assert_eq!(std::fs::read(&db).unwrap(), before, "the database changed");
}

mod properties {
    use super::*;
    use proptest::prelude::*;
    use worldfs::luanti::codec::block::{Inventory, InventoryList};

    fn item_strategy() -> impl Strategy<Value = ItemStack> {
        prop_oneof![
            Just(ItemStack::default()),
            ("[a-z_]{1,8}:[a-z_]{1,8}", 1u16..=999, 0u16..=65535).prop_map(
                |(name, count, wear)| {
                    ItemStack {
                        name: name.into_bytes(),
                        count,
                        wear,
                        metadata: Vec::new(),
                    }
                }
            ),
        ]
    }

    fn finite() -> impl Strategy<Value = f32> {
        prop_oneof![-1.0e6f32..1.0e6, Just(0.0f32), Just(-0.5f32)]
    }

    fn player_strategy() -> impl Strategy<Value = Player> {
        (
            "[A-Za-z0-9_-]{1,20}",
            any::<u16>(),
            any::<u16>(),
            [finite(), finite(), finite()],
            finite(),
            finite(),
            proptest::collection::btree_map("[ -~]{0,12}", "[ -~\n\t\u{e9}]{0,20}", 0..4),
            proptest::collection::vec(
                (
                    "[a-z]{1,10}",
                    0u32..4,
                    proptest::collection::vec(item_strategy(), 0..6),
                ),
                0..4,
            ),
        )
            .prop_map(
                |(name, hp, breath, position, pitch, yaw, metadata, lists)| {
                    let mut seen = std::collections::BTreeSet::new();
                    let lists = lists
                        .into_iter()
                        .filter(|(n, _, _)| seen.insert(n.clone()))
                        .map(|(name, width, slots)| InventoryList { name, width, slots })
                        .collect();
                    Player {
                        name,
                        hp,
                        breath,
                        position,
                        pitch,
                        yaw,
                        metadata,
                        inventory: Inventory { lists },
                        extra: Default::default(),
                    }
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn player_files_round_trip(player in player_strategy()) {
            let text = render_player(&player);
            let back = parse_player(&text, None).unwrap();
            prop_assert_eq!(&back, &player);
            prop_assert_eq!(read_player_file(&text).unwrap(), player);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = parse_player(&bytes, None);
            let _ = read_player_file(&bytes);
        }
    }
}
