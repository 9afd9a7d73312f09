//! Accounts on real stores of both backends: listing, editing, read-only and hidden files.

use super::files::name_line;
use super::*;
use crate::luanti::codec::block::{Inventory, InventoryList, ItemStack};
use crate::luanti::store::auth::{AuthBackend, AuthEntry};
use crate::luanti::store::auth_sqlite::SqliteAuth;
use crate::luanti::store::mod_storage::ModStorageBackend;
use crate::luanti::store::mod_storage_sqlite::SqliteModStorage;
use crate::luanti::store::players::Player;
use crate::luanti::store::players::PlayerBackend;
use crate::luanti::store::players_sqlite::SqlitePlayers;

fn p(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

fn player(name: &str) -> Player {
    let stack = ItemStack {
        name: b"default:dirt".to_vec(),
        count: 3,
        ..ItemStack::default()
    };
    Player {
        name: name.to_string(),
        hp: 20,
        breath: 10,
        position: [10.0, 20.5, -30.0],
        inventory: Inventory {
            lists: vec![InventoryList {
                name: "main".into(),
                width: 0,
                slots: vec![stack, ItemStack::default()],
            }],
        },
        ..Player::default()
    }
}

/// A world whose three stores are SQLite databases, made with the project's own stores.
fn sqlite_world() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path();
    std::fs::write(
        w.join("world.mt"),
        "player_backend = sqlite3\nauth_backend = sqlite3\nmod_storage_backend = sqlite3\n",
    )
    .unwrap();
    let mut players = SqlitePlayers::open_or_create(&w.join("players.sqlite")).unwrap();
    players.create(&player("alice")).unwrap();
    let mut auth = SqliteAuth::open_or_create(&w.join("auth.sqlite")).unwrap();
    let entry = AuthEntry {
        name: "alice".into(),
        password: "#1#salt#verifier".into(),
        privileges: vec!["interact".into()],
        last_login: 5,
    };
    auth.apply(&[entry]).unwrap();
    let mut mods = SqliteModStorage::open_or_create(&w.join("mod_storage.sqlite")).unwrap();
    mods.write("mymod", b"a/b", b"value").unwrap();
    dir
}

fn names_in(a: &Accounts, dir: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    a.list(&p(dir), 0, &mut |e| {
        out.push(e.name);
        true
    })
    .unwrap();
    out.sort();
    out
}

#[test]
fn shows_and_edits_every_store() {
    let state = tempfile::tempdir().unwrap();
    std::env::set_var("WORLDFS_STATE_DIR", state.path());
    let dir = sqlite_world();
    let a = Accounts::open(dir.path(), &WorldMt::read(dir.path()).unwrap(), false).unwrap();
    assert_eq!(a.top_names(), vec![AUTH, MOD_STORAGE, PLAYERS]);
    assert_eq!(names_in(&a, &["players"]), vec!["alice"]);
    assert_eq!(names_in(&a, &["mod_storage", "mymod"]), vec!["a%2Fb"]);
    assert_eq!(
        &**a.read(&p(&["mod_storage", "mymod", "a%2Fb"])).unwrap(),
        b"value\n"
    );
    assert!(a.stat(&p(&["mod_storage", "mymod", "a%2fb"])).is_err());

    let auth = a.stat(&p(&["auth.txt"])).unwrap();
    assert_eq!(auth.perm, 0o600);
    let text = a.read(&p(&["auth.txt"])).unwrap();
    assert_eq!(&**text, b"alice:#1#salt#verifier:interact:5\n");
    a.write(
        &p(&["auth.txt"]),
        b"alice:#1#salt#verifier:fly,interact:5\nbob::shout\n",
    )
    .unwrap();
    assert_eq!(
        &**a.read(&p(&["auth.txt"])).unwrap(),
        b"alice:#1#salt#verifier:fly,interact:5\nbob::shout:0\n"
    );

    let path = p(&["players", "alice"]);
    let shown = String::from_utf8(a.read(&path).unwrap().to_vec()).unwrap();
    assert!(shown.contains("position = (10,20.5,-30)"), "{shown}");
    let before = a.stat(&path).unwrap().mtime;
    a.write(&path, shown.replace("hp = 20", "hp = 5").as_bytes())
        .unwrap();
    assert!(String::from_utf8_lossy(&a.read(&path).unwrap()).contains("hp = 5"));
    assert!(a.stat(&path).unwrap().mtime > before);

    let e = a
        .write(&p(&["players", "carol"]), shown.as_bytes())
        .unwrap_err();
    assert!(e.message().contains("differs from the file name"), "{e}");
    assert_eq!(
        a.classify(&p(&["players"]), "carol").unwrap(),
        NewFile::Object
    );
    assert_eq!(
        a.classify(&p(&["players"]), ".carol.swp").unwrap(),
        NewFile::Scratch
    );
    assert!(a.classify(&p(&["players"]), "a:b").is_err());
    a.write(
        &p(&["players", "carol"]),
        shown.replace("name = alice", "name = carol").as_bytes(),
    )
    .unwrap();
    a.rename(&p(&["players", "carol"]), &p(&["players", "dave"]))
        .unwrap();
    assert_eq!(names_in(&a, &["players"]), vec!["alice", "dave"]);
    a.remove(&p(&["players", "alice"])).unwrap();
    assert_eq!(names_in(&a, &["players"]), vec!["dave"]);

    assert!(a.mkdir(&p(&["mod_storage", "Bad"])).is_err());
    a.mkdir(&p(&["mod_storage", "other"])).unwrap();
    assert!(names_in(&a, &["mod_storage", "other"]).is_empty());
    a.write(&p(&["mod_storage", "other", "k"]), b"v\n").unwrap();
    a.rename(
        &p(&["mod_storage", "other", "k"]),
        &p(&["mod_storage", "mymod", "k2"]),
    )
    .unwrap();
    assert_eq!(names_in(&a, &["mod_storage", "mymod"]), vec!["a%2Fb", "k2"]);
    assert_eq!(names_in(&a, &["mod_storage"]), vec!["mymod", "other"]);
    a.rmdir(&p(&["mod_storage", "other"])).unwrap();
    assert_eq!(names_in(&a, &["mod_storage"]), vec!["mymod"]);
    assert_eq!(
        a.rmdir(&p(&["mod_storage", "mymod"])).unwrap_err().errno(),
        libc::ENOTEMPTY
    );
}

fn read_only_world(dir: &Path) -> crate::luanti::tree::LuantiTree {
    let options = crate::vfs::tree::Options {
        read_only: true,
        cache_bytes: 1 << 20,
    };
    crate::luanti::tree::LuantiTree::open(dir, &options).unwrap()
}

#[test]
fn reading_creates_no_database_and_read_only_refuses_writes() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("world.mt"),
        "player_backend = sqlite3\nauth_backend = sqlite3\nmod_storage_backend = leveldb\n",
    )
    .unwrap();
    let a = Accounts::open(dir.path(), &WorldMt::read(dir.path()).unwrap(), true).unwrap();
    assert_eq!(a.top_names(), vec![AUTH, PLAYERS]);
    assert!(names_in(&a, &["players"]).is_empty());
    // No auth data at all: no auth.txt (only what exists is shown).
    assert_eq!(a.stat(&p(&["auth.txt"])).unwrap_err().errno(), libc::ENOENT);
    assert!(!dir.path().join("players.sqlite").exists());
    assert!(!dir.path().join("auth.sqlite").exists());
    // Writes go through the core, which refuses them on a read-only mount.
    rusqlite::Connection::open(dir.path().join("map.sqlite"))
        .and_then(|c| c.execute("CREATE TABLE blocks (pos INT PRIMARY KEY, data BLOB)", []))
        .unwrap();
    let vfs = crate::vfs::Vfs::new(std::sync::Arc::new(read_only_world(dir.path())), None);
    let e = vfs
        .create(crate::vfs::inodes::ROOT, "auth.txt", 0o600)
        .unwrap_err();
    assert_eq!(e.errno(), libc::EROFS);
    assert!(a.stat(&p(&["mod_storage"])).is_err());
}

#[test]
fn hidden_files_are_the_ones_shown_decoded() {
    for name in [
        "auth.txt",
        "players.sqlite",
        "auth.sqlite-journal",
        "mod_storage.sqlite",
    ] {
        assert!(hidden_world_file(name), "{name}");
    }
    for name in ["world.mt", "env_meta.txt", "auth.txt.bak"] {
        assert!(!hidden_world_file(name), "{name}");
    }
}

#[test]
fn name_line_finds_the_name_setting() {
    assert_eq!(name_line(b"hp = 1\n  name = x\n"), 2);
    assert_eq!(name_line(b"hp = 1\n"), 1);
}

/// A player whose record does not decode is listed all the same, its own `stat` failing with
/// the reason: left out, `rsync --delete` would drop it from the backup with exit 0.
#[test]
fn a_player_that_cannot_be_read_is_listed_and_fails_its_own_stat() {
    let state = tempfile::tempdir().unwrap();
    std::env::set_var("WORLDFS_STATE_DIR", state.path());
    let dir = sqlite_world();
    rusqlite::Connection::open(dir.path().join("players.sqlite"))
        .unwrap()
        .execute("UPDATE player SET hp = 'lots' WHERE name = 'alice'", [])
        .unwrap();
    let a = Accounts::open(dir.path(), &WorldMt::read(dir.path()).unwrap(), true).unwrap();
    let mut listed = Vec::new();
    a.list(&p(&[PLAYERS]), 0, &mut |entry| {
        listed.push(entry.name);
        true
    })
    .unwrap();
    assert_eq!(listed, ["alice"]);
    let e = a.stat(&p(&[PLAYERS, "alice"])).unwrap_err();
    assert_ne!(e.errno(), libc::ENOENT, "{e}");
    assert!(e.to_string().contains("hp"), "{e}");
}

/// A stat of auth.txt renders every account only when the store changed: not again for an
/// unchanged store, again after the mount's own write and after another program's commit,
/// and again after the database was replaced.
#[test]
fn auth_stat_renders_only_after_a_change() {
    use std::sync::atomic::Ordering;
    let state = tempfile::tempdir().unwrap();
    std::env::set_var("WORLDFS_STATE_DIR", state.path());
    let dir = sqlite_world();
    let a = Accounts::open(dir.path(), &WorldMt::read(dir.path()).unwrap(), false).unwrap();
    let auth = p(&["auth.txt"]);
    let renders = || a.auth_renders.load(Ordering::Relaxed);
    let first = a.stat(&auth).unwrap();
    for _ in 0..5 {
        assert_eq!(a.stat(&auth).unwrap(), first);
    }
    assert_eq!(renders(), 1, "an unchanged store is not rendered again");

    a.write(&auth, b"alice:#1#salt#verifier:interact:5\nbob::shout:0\n")
        .unwrap();
    let written = a.stat(&auth).unwrap();
    assert_eq!(written.size, a.read(&auth).unwrap().len() as u64);
    assert_eq!(renders(), 2, "the mount's own write");

    // Another program's commit (the engine, on its own connection).
    let mut other = SqliteAuth::open(&dir.path().join("auth.sqlite"), false).unwrap();
    let carol = AuthEntry {
        name: "carol".into(),
        password: String::new(),
        privileges: vec![],
        last_login: 0,
    };
    let mut entries = other.entries().unwrap();
    entries.push(carol);
    other.apply(&entries).unwrap();
    let after = a.stat(&auth).unwrap();
    assert_eq!(after.size, a.read(&auth).unwrap().len() as u64);
    assert!(after.size > written.size, "carol is counted");
    assert_eq!(renders(), 3);
    a.stat(&auth).unwrap();
    assert_eq!(renders(), 3);

    // The database replaced by another file (a restore from a backup).
    let copy = dir.path().join("auth.sqlite.new");
    std::fs::copy(dir.path().join("auth.sqlite"), &copy).unwrap();
    drop(other);
    let mut restored = SqliteAuth::open(&copy, false).unwrap();
    restored.apply(&[]).unwrap();
    drop(restored);
    std::fs::rename(&copy, dir.path().join("auth.sqlite")).unwrap();
    assert_eq!(
        a.stat(&auth).unwrap().size,
        0,
        "no accounts in the new database"
    );
    assert_eq!(renders(), 4);
}

/// On LevelDB a stat of auth.txt renders again only after a write (the folder's files
/// change with each).
#[test]
fn auth_stat_on_leveldb_renders_only_after_the_mounts_writes() {
    use std::sync::atomic::Ordering;
    let state = tempfile::tempdir().unwrap();
    std::env::set_var("WORLDFS_STATE_DIR", state.path());
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("world.mt"),
        "player_backend = sqlite3\nauth_backend = leveldb\nmod_storage_backend = sqlite3\n",
    )
    .unwrap();
    let a = Accounts::open(dir.path(), &WorldMt::read(dir.path()).unwrap(), false).unwrap();
    let auth = p(&["auth.txt"]);
    let renders = || a.auth_renders.load(Ordering::Relaxed);
    a.write(&auth, b"alice:#1#salt#verifier:interact:5\n")
        .unwrap();
    let first = a.stat(&auth).unwrap();
    let after_first = renders();
    for _ in 0..5 {
        assert_eq!(a.stat(&auth).unwrap(), first);
    }
    assert_eq!(
        renders(),
        after_first,
        "an unchanged store is not rendered again"
    );
    a.write(&auth, b"alice:#1#salt#verifier:interact:5\nbob::shout:0\n")
        .unwrap();
    let written = a.stat(&auth).unwrap();
    assert_eq!(written.size, a.read(&auth).unwrap().len() as u64);
    assert!(written.size > first.size, "bob is counted");
    assert_eq!(renders(), after_first + 1, "the mount's own write");
}

/// A stat of a mod-storage entry reads its value only when the store changed: not again for
/// an unchanged store (the kernel asks before each read of the file), again after the
/// mount's own write and after another program's commit, and never a size from before.
#[test]
fn entry_stat_reads_the_value_only_after_a_change() {
    let state = tempfile::tempdir().unwrap();
    std::env::set_var("WORLDFS_STATE_DIR", state.path());
    let dir = sqlite_world();
    let a = Accounts::open(dir.path(), &WorldMt::read(dir.path()).unwrap(), false).unwrap();
    let reads = || a.entry_reads.load(Ordering::Relaxed);
    a.write(&p(&["mod_storage", "mymod", "big"]), &vec![b'x'; 100_000])
        .unwrap();
    let path = p(&["mod_storage", "mymod", "big"]);
    let first = a.stat(&path).unwrap();
    assert_eq!(first.size, a.read(&path).unwrap().len() as u64);
    let after_first = reads();
    for _ in 0..5 {
        assert_eq!(a.stat(&path).unwrap(), first);
    }
    assert_eq!(reads(), after_first, "an unchanged store is not read again");

    a.write(&path, b"short\n").unwrap();
    let written = a.stat(&path).unwrap();
    assert_eq!(written.size, 6, "the mount's own write");
    assert_eq!(reads(), after_first + 1);

    // Another program's commit (the engine, on its own connection).
    let mut other = SqliteModStorage::open(&dir.path().join("mod_storage.sqlite"), false).unwrap();
    other.write("mymod", b"big", b"a longer value").unwrap();
    assert_eq!(a.stat(&path).unwrap().size, 15, "another program's commit");
    assert_eq!(a.stat(&path).unwrap().size, 15);
    assert_eq!(reads(), after_first + 2);
}

/// A LevelDB `players.db` or `auth.db` whose creation was killed before it held data (what
/// the kill of mount test 87 left of a map) reads as no data on a read-only mount, as a
/// database that does not exist does, and a read-write mount's first write creates it.
#[test]
fn a_killed_leveldb_creation_reads_as_no_data() {
    let state = tempfile::tempdir().unwrap();
    std::env::set_var("WORLDFS_STATE_DIR", state.path());
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("world.mt"),
        "player_backend = leveldb\nauth_backend = leveldb\nmod_storage_backend = sqlite3\n",
    )
    .unwrap();
    for db in ["players.db", "auth.db"] {
        crate::luanti::store::leveldb::tests::killed_creation(&dir.path().join(db));
    }
    let world_mt = WorldMt::read(dir.path()).unwrap();
    let auth = p(&["auth.txt"]);
    let read_only = Accounts::open(dir.path(), &world_mt, true).unwrap();
    assert!(names_in(&read_only, &["players"]).is_empty());
    assert!(read_only.read(&auth).unwrap().is_empty());
    drop(read_only);
    assert!(
        !dir.path().join("auth.db/CURRENT").exists(),
        "nothing created"
    );

    let a = Accounts::open(dir.path(), &world_mt, false).unwrap();
    assert!(names_in(&a, &["players"]).is_empty());
    a.write(&auth, b"alice:#1#salt#verifier:interact:5\n")
        .unwrap();
    assert!(dir.path().join("auth.db/CURRENT").exists(), "created");
    assert!(a.read(&auth).unwrap().starts_with(b"alice:"));
}
