//! A Luanti world folder as a whole: restoring into a folder that holds only `world.mt`
//! (stores created on first write with the engine's schemas, nothing created by reading or
//! by a read-only mount), only what exists is shown (no empty `auth.txt`), and the folder's
//! sub-folders, links and modes shown as they are on disk, never followed out of the world.

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;
use std::time::{Duration, SystemTime};

use worldfs::luanti::tree::LuantiTree;
use worldfs::vfs::tree::{Kind, NewFile, Options, Tree};
use worldfs::worlds::{detect, Game};

const WORLD_MT: &str = "gameid = minetest\nbackend = sqlite3\nplayer_backend = sqlite3\n\
                        auth_backend = sqlite3\nmod_storage_backend = sqlite3\n";

fn p(path: &str) -> Vec<String> {
    path.split('/').map(str::to_string).collect()
}

fn open(world: &Path, read_only: bool) -> LuantiTree {
    LuantiTree::open(
        world,
        &Options {
            read_only,
            cache_bytes: 1 << 20,
        },
    )
    .unwrap()
}

fn names(tree: &dyn Tree, dir: &str) -> Vec<String> {
    let dir: Vec<String> = if dir.is_empty() { Vec::new() } else { p(dir) };
    let mut out = Vec::new();
    tree.list(&dir, 0, &mut |e| {
        out.push(e.name);
        true
    })
    .unwrap();
    out.sort();
    out
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    out.sort();
    out
}

fn schema(db: &Path) -> Vec<String> {
    let c = rusqlite::Connection::open(db).unwrap();
    let mut stmt = c
        .prepare("SELECT sql FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .unwrap();
    let rows = stmt.query_map([], |r| r.get::<_, String>(0)).unwrap();
    rows.map(Result::unwrap).collect()
}

#[test]
fn a_folder_with_only_world_mt_mounts_and_creates_the_map_on_the_first_block() {
    let dir = tempfile::tempdir().unwrap();
    let world = dir.path();
    fs::write(world.join("world.mt"), WORLD_MT).unwrap();
    assert_eq!(detect(world).unwrap(), Game::Luanti);
    // Read-only: everything reads, nothing is created.
    let ro = open(world, true);
    assert!(names(&ro, "blocks").is_empty());
    assert!(names(&ro, "players").is_empty());
    assert!(names(&ro, "mod_storage").is_empty());
    assert!(ro.stat(&p("blocks/0,0,0")).is_err());
    drop(ro);
    assert_eq!(
        files_in(world),
        vec!["world.mt"],
        "a read-only mount created files"
    );
    // Read-write: still nothing until the first block is written.
    let tree = open(world, false);
    assert!(names(&tree, "blocks").is_empty());
    assert_eq!(files_in(world), vec!["world.mt"], "reading created files");
    tree.mkdir(&p("blocks/1,-2,3")).unwrap();
    assert_eq!(names(&tree, "blocks"), vec!["1,-2,3"]);
    let nodes = tree.read(&p("blocks/1,-2,3/nodes.cubeset")).unwrap();
    tree.write(&p("blocks/1,-2,3/nodes.cubeset"), &nodes)
        .unwrap();
    drop(tree);
    // The schema Luanti 5.6.1 creates (MapDatabaseSQLite3::createDatabase), which every
    // later engine still reads.
    assert_eq!(
        schema(&world.join("map.sqlite")),
        vec!["CREATE TABLE `blocks` (\n\t`pos` INT PRIMARY KEY,\n\t`data` BLOB\n)"]
    );
    let tree = open(world, false);
    assert_eq!(names(&tree, "blocks"), vec!["1,-2,3"]);
}

#[test]
fn an_empty_map_sqlite_mounts_as_an_empty_map() {
    let dir = tempfile::tempdir().unwrap();
    let map = dir.path().join("map.sqlite");
    fs::write(&map, b"").unwrap();
    assert_eq!(detect(&map).unwrap(), Game::Luanti);
    let tree = open(&map, true);
    assert!(names(&tree, "blocks").is_empty());
    let other = dir.path().join("other.sqlite");
    fs::write(&other, b"").unwrap();
    assert!(
        detect(&other).is_err(),
        "an empty file of another name is no world"
    );
}

#[test]
fn a_folder_with_players_but_no_map_is_a_world() {
    let dir = tempfile::tempdir().unwrap();
    let world = dir.path();
    fs::write(world.join("world.mt"), WORLD_MT).unwrap();
    fs::write(world.join("players.sqlite"), b"").unwrap();
    assert_eq!(detect(world).unwrap(), Game::Luanti);
    let tree = open(world, true);
    assert!(names(&tree, "blocks").is_empty());
    assert!(!world.join("map.sqlite").exists());
}

#[test]
fn a_folder_naming_another_map_backend_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(
        dir.path().join("world.mt"),
        "gameid = minetest\nbackend = dummy\n",
    )
    .unwrap();
    let e = LuantiTree::open(
        dir.path(),
        &Options {
            read_only: false,
            cache_bytes: 1 << 20,
        },
    )
    .err()
    .unwrap();
    assert!(e.message().contains("dummy"), "{e}");
}

#[test]
fn auth_txt_is_shown_only_where_auth_data_exists_and_writing_it_creates_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let world = dir.path();
    fs::write(world.join("world.mt"), WORLD_MT).unwrap();
    let tree = open(world, false);
    assert!(!names(&tree, "").contains(&"auth.txt".to_string()));
    assert_eq!(tree.stat(&p("auth.txt")).unwrap_err().errno(), libc::ENOENT);
    assert_eq!(tree.classify(&[], "auth.txt").unwrap(), NewFile::Object);
    let line = b"sam:#1#c2FsdA#aGFzaA:interact,shout:1700000000\n";
    tree.write(&p("auth.txt"), line).unwrap();
    assert!(world.join("auth.sqlite").is_file());
    assert!(names(&tree, "").contains(&"auth.txt".to_string()));
    assert_eq!(&**tree.read(&p("auth.txt")).unwrap(), line);
    // The files backend: the auth.txt of the folder itself, shown once it exists.
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("world.mt"), "gameid = minetest\n").unwrap();
    let tree = open(dir.path(), false);
    assert!(!names(&tree, "").contains(&"auth.txt".to_string()));
    tree.write(&p("auth.txt"), line).unwrap();
    assert_eq!(fs::read(dir.path().join("auth.txt")).unwrap(), line);
    assert!(names(&tree, "").contains(&"auth.txt".to_string()));
}

/// An auth store that exists but cannot be read (another program holds it locked, or its
/// file is not a database) leaves `auth.txt` listed, its own `stat` failing with the reason:
/// left out, `rsync --delete` would take it for deleted and drop it from the backup; failing
/// the whole listing would stop the backup of everything else.
#[test]
fn a_listing_never_leaves_out_an_auth_txt_it_cannot_read() {
    let dir = tempfile::tempdir().unwrap();
    let world = dir.path();
    fs::write(world.join("world.mt"), WORLD_MT).unwrap();
    let tree = open(world, false);
    let line = b"sam:#1#c2FsdA#aGFzaA:interact,shout:1700000000\n";
    tree.write(&p("auth.txt"), line).unwrap();
    let locker = rusqlite::Connection::open(world.join("auth.sqlite")).unwrap();
    locker.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let listed = names(&tree, "");
    assert!(listed.contains(&"auth.txt".to_string()), "{listed:?}");
    assert!(listed.contains(&"blocks".to_string()), "{listed:?}");
    let e = tree.stat(&p("auth.txt")).unwrap_err();
    assert_ne!(e.errno(), libc::ENOENT, "{e}");
    locker.execute_batch("ROLLBACK").unwrap();
    assert_eq!(&**tree.read(&p("auth.txt")).unwrap(), line);
    drop(locker);
    drop(tree);
    fs::write(
        world.join("auth.sqlite"),
        b"not a database, but not nothing either",
    )
    .unwrap();
    let tree = open(world, true);
    assert!(names(&tree, "").contains(&"auth.txt".to_string()));
    let e = tree.stat(&p("auth.txt")).unwrap_err();
    assert_ne!(e.errno(), libc::ENOENT, "{e}");
}

fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
}

#[test]
fn sub_folders_are_shown_and_written_as_they_are() {
    let dir = tempfile::tempdir().unwrap();
    let world = dir.path().join("world");
    fs::create_dir(&world).unwrap();
    fs::write(world.join("world.mt"), WORLD_MT).unwrap();
    let m = world.join("worldmods/hello");
    fs::create_dir_all(&m).unwrap();
    fs::write(m.join("init.lua"), b"print('hi')\n").unwrap();
    fs::write(m.join("mod.conf"), b"name = hello\n").unwrap();
    fs::set_permissions(m.join("mod.conf"), fs::Permissions::from_mode(0o600)).unwrap();
    fs::create_dir(world.join("schems")).unwrap();
    fs::write(world.join("schems/x.mts"), b"MTSM\x00\x04").unwrap();
    symlink("../world.mt", world.join("schems/link")).unwrap();
    let tree = open(&world, false);
    let top = names(&tree, "");
    assert!(top.contains(&"worldmods".to_string()), "{top:?}");
    assert!(top.contains(&"schems".to_string()), "{top:?}");
    assert_eq!(tree.stat(&p("worldmods")).unwrap().kind, Kind::Dir);
    assert_eq!(
        names(&tree, "worldmods/hello"),
        vec!["init.lua", "mod.conf"]
    );
    assert_eq!(
        &**tree.read(&p("worldmods/hello/init.lua")).unwrap(),
        b"print('hi')\n"
    );
    assert_eq!(
        tree.stat(&p("worldmods/hello/mod.conf")).unwrap().perm,
        0o600
    );
    assert_eq!(tree.stat(&p("schems/link")).unwrap().kind, Kind::Symlink);
    assert_eq!(tree.readlink(&p("schems/link")).unwrap(), b"../world.mt");
    // Writes: replace, create, mkdir, link, mode, time, rename, remove, rmdir.
    tree.write(&p("worldmods/hello/init.lua"), b"print('bye')\n")
        .unwrap();
    assert_eq!(fs::read(m.join("init.lua")).unwrap(), b"print('bye')\n");
    tree.write(&p("worldmods/hello/mod.conf"), b"name = hello2\n")
        .unwrap();
    assert_eq!(
        mode(&m.join("mod.conf")),
        0o600,
        "a replaced file keeps its mode"
    );
    assert_eq!(
        tree.classify(&p("worldmods/hello"), "new.lua").unwrap(),
        NewFile::Object
    );
    tree.mkdir(&p("worldmods/hello/textures")).unwrap();
    tree.write(&p("worldmods/hello/textures/a.png"), b"png")
        .unwrap();
    assert_eq!(fs::read(m.join("textures/a.png")).unwrap(), b"png");
    tree.set_perm(&p("worldmods/hello/textures/a.png"), 0o640)
        .unwrap();
    assert_eq!(mode(&m.join("textures/a.png")), 0o640);
    tree.set_perm(&p("worldmods/hello/textures"), 0o700)
        .unwrap();
    assert_eq!(mode(&m.join("textures")), 0o700);
    assert_eq!(
        tree.stat(&p("worldmods/hello/textures")).unwrap().perm,
        0o700
    );
    let when = SystemTime::UNIX_EPOCH + Duration::from_secs(1_600_000_000);
    tree.set_mtime(&p("worldmods/hello/textures/a.png"), when)
        .unwrap();
    tree.set_mtime(&p("worldmods/hello/textures"), when)
        .unwrap();
    assert_eq!(
        tree.stat(&p("worldmods/hello/textures")).unwrap().mtime,
        when
    );
    assert_eq!(
        fs::metadata(m.join("textures/a.png"))
            .unwrap()
            .modified()
            .unwrap(),
        when
    );
    tree.symlink(&p("worldmods/hello/l"), b"init.lua").unwrap();
    assert_eq!(fs::read_link(m.join("l")).unwrap(), Path::new("init.lua"));
    tree.rename(&p("worldmods/hello/textures/a.png"), &p("schems/a.png"))
        .unwrap();
    assert_eq!(fs::read(world.join("schems/a.png")).unwrap(), b"png");
    tree.remove(&p("schems/a.png")).unwrap();
    assert_eq!(
        tree.rmdir(&p("worldmods/hello")).unwrap_err().errno(),
        libc::ENOTEMPTY
    );
    tree.rmdir(&p("worldmods/hello/textures")).unwrap();
    assert!(!m.join("textures").exists());
    tree.mkdir(&p("textures")).unwrap();
    assert!(world.join("textures").is_dir());
    assert!(tree.mkdir(&p("map.sqlite")).is_err());
    // Read-only: the same files with the world's modes (the kernel refuses writes on a
    // read-only mount), nothing changes.
    let ro = open(&world, true);
    assert_eq!(
        ro.stat(&p("worldmods/hello/init.lua")).unwrap().perm,
        tree.stat(&p("worldmods/hello/init.lua")).unwrap().perm
    );
    assert_eq!(
        ro.write(&p("worldmods/hello/init.lua"), b"x")
            .unwrap_err()
            .errno(),
        libc::EROFS
    );
    assert_eq!(
        ro.mkdir(&p("worldmods/x")).unwrap_err().errno(),
        libc::EROFS
    );
}

#[test]
fn links_to_folders_are_never_followed() {
    let dir = tempfile::tempdir().unwrap();
    let world = dir.path().join("world");
    let outside = dir.path().join("outside");
    fs::create_dir(&world).unwrap();
    fs::create_dir(&outside).unwrap();
    fs::write(outside.join("secret"), b"secret").unwrap();
    fs::write(world.join("world.mt"), WORLD_MT).unwrap();
    fs::create_dir(world.join("worldmods")).unwrap();
    symlink(&outside, world.join("worldmods/evil")).unwrap();
    symlink(&outside, world.join("evil")).unwrap();
    let tree = open(&world, false);
    assert_eq!(tree.stat(&p("worldmods/evil")).unwrap().kind, Kind::Symlink);
    for path in ["worldmods/evil/secret", "evil/secret"] {
        let path = p(path);
        assert!(tree.stat(&path).is_err());
        assert!(tree.read(&path).is_err());
        assert!(tree.write(&path, b"owned").is_err());
        assert!(tree.remove(&path).is_err());
        assert!(tree.set_mtime(&path, SystemTime::UNIX_EPOCH).is_err());
        assert!(tree.set_perm(&path, 0o777).is_err());
        assert!(tree.symlink(&path, b"x").is_err());
        assert!(tree
            .list(&path[..path.len() - 1], 0, &mut |_| true)
            .is_err());
    }
    assert!(tree.mkdir(&p("evil/new")).is_err());
    assert!(tree.rename(&p("world.mt"), &p("evil/world.mt")).is_err());
    assert!(tree.set_perm(&p("evil"), 0o700).is_err());
    assert_eq!(mode(&outside), 0o755);
    assert_eq!(files_in(&outside), vec!["secret"]);
    assert_eq!(fs::read(outside.join("secret")).unwrap(), b"secret");
    assert_eq!(mode(&outside.join("secret")), 0o644);
    assert!(world.join("world.mt").is_file());
}

#[test]
fn folders_named_like_a_view_show_the_view() {
    let dir = tempfile::tempdir().unwrap();
    let world = dir.path();
    fs::write(world.join("world.mt"), WORLD_MT).unwrap();
    // A players/ folder beside the sqlite3 player backend, a blocks/ folder.
    fs::create_dir(world.join("players")).unwrap();
    fs::write(world.join("players/old"), b"name = old\n").unwrap();
    fs::create_dir(world.join("blocks")).unwrap();
    fs::write(world.join("blocks/note"), b"x").unwrap();
    let tree = open(world, false);
    assert!(names(&tree, "players").is_empty());
    assert!(names(&tree, "blocks").is_empty());
    let top = names(&tree, "");
    assert_eq!(top.iter().filter(|n| *n == "players").count(), 1, "{top:?}");
    assert_eq!(top.iter().filter(|n| *n == "blocks").count(), 1, "{top:?}");
}

#[test]
fn modes_set_through_the_core_reach_the_folder_as_rsync_sets_them() {
    use std::sync::Arc;
    use worldfs::vfs::inodes::ROOT;
    use worldfs::vfs::Vfs;
    const PID: u32 = 4242;
    let dir = tempfile::tempdir().unwrap();
    let world = dir.path();
    fs::write(world.join("world.mt"), WORLD_MT).unwrap();
    fs::create_dir(world.join("worldmods")).unwrap();
    let vfs = Vfs::new(Arc::new(open(world, false)), None);
    let (mods, _) = vfs.lookup(ROOT, "worldmods", PID).unwrap();
    // rsync: a temporary, written, chmod 600, mtime set, renamed over the name.
    let (tmp, _, fh) = vfs.create(mods, ".secret.txt.Ab12Cd", 0o600).unwrap();
    vfs.write(fh, 0, b"key\n", false).unwrap();
    vfs.release(fh).unwrap();
    let when = SystemTime::UNIX_EPOCH + Duration::from_secs(1_500_000_000);
    vfs.setattr(tmp, None, None, Some(when), Some(0o100600))
        .unwrap();
    vfs.rename(mods, ".secret.txt.Ab12Cd", mods, "secret.txt")
        .unwrap();
    let file = world.join("worldmods/secret.txt");
    assert_eq!(fs::read(&file).unwrap(), b"key\n");
    assert_eq!(mode(&file), 0o600);
    assert_eq!(fs::metadata(&file).unwrap().modified().unwrap(), when);
    // A file created in place keeps the mode it was created with; chmod reaches the disk.
    let (made, _, fh) = vfs.create(mods, "run.sh", 0o750).unwrap();
    vfs.write(fh, 0, b"#!/bin/sh\n", false).unwrap();
    vfs.release(fh).unwrap();
    assert_eq!(mode(&world.join("worldmods/run.sh")), 0o750);
    vfs.setattr(made, None, None, None, Some(0o100700)).unwrap();
    assert_eq!(mode(&world.join("worldmods/run.sh")), 0o700);
    vfs.setattr(mods, None, None, None, Some(0o40750)).unwrap();
    assert_eq!(mode(&world.join("worldmods")), 0o750);
}

#[test]
fn a_store_is_never_created_through_a_link_planted_under_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let world = dir.path().join("world");
    fs::create_dir(&world).unwrap();
    fs::write(world.join("world.mt"), WORLD_MT).unwrap();
    let outside = dir.path().join("outside");
    fs::create_dir(&outside).unwrap();
    let tree = open(&world, false);
    tree.write_back(worldfs::luanti::store::write_back::WINDOW)
        .unwrap();
    tree.mkdir(&p("blocks/0,0,0")).unwrap();
    // Planted while the first block is pending, before its commit creates the map.
    symlink(outside.join("map.db"), world.join("map.sqlite")).unwrap();
    assert!(
        tree.sync().is_err(),
        "the first block was stored through the link"
    );
    drop(tree);
    assert!(files_in(&outside).is_empty(), "created through a link");
    // Planted before the mount, under a store made by its first write.
    let world = dir.path().join("world2");
    fs::create_dir(&world).unwrap();
    fs::write(world.join("world.mt"), WORLD_MT).unwrap();
    symlink(outside.join("players.db"), world.join("players.sqlite")).unwrap();
    if let Ok(tree) = LuantiTree::open(
        &world,
        &Options {
            read_only: false,
            cache_bytes: 1 << 20,
        },
    ) {
        let _ = tree.write(&p("players/singleplayer"), b"");
    }
    assert!(files_in(&outside).is_empty(), "created through a link");
}

/// vim's save (backupcopy=auto): the file renamed to its backup name, a new file created
/// with the old mode, written, chmodded, the backup removed; and rsync replacing a file
/// whose mode had set-id bits, with a temporary it chmods to 0755.
#[test]
fn an_editor_save_keeps_the_mode_and_a_replacement_keeps_no_set_id_bit() {
    use std::sync::Arc;
    use worldfs::vfs::inodes::ROOT;
    use worldfs::vfs::Vfs;
    let dir = tempfile::tempdir().unwrap();
    let world = dir.path();
    fs::write(world.join("world.mt"), WORLD_MT).unwrap();
    fs::set_permissions(world.join("world.mt"), fs::Permissions::from_mode(0o600)).unwrap();
    let vfs = Vfs::new(Arc::new(open(world, false)), None);
    vfs.rename(ROOT, "world.mt", ROOT, "world.mt~").unwrap();
    let (made, _, fh) = vfs.create(ROOT, "world.mt", 0o600).unwrap();
    let edited = WORLD_MT.replace("minetest", "x");
    vfs.write(fh, 0, edited.as_bytes(), false).unwrap();
    vfs.release(fh).unwrap();
    vfs.setattr(made, None, None, None, Some(0o100600)).unwrap();
    vfs.unlink(ROOT, "world.mt~").unwrap();
    assert_eq!(fs::read_to_string(world.join("world.mt")).unwrap(), edited);
    assert_eq!(mode(&world.join("world.mt")), 0o600);
    assert_eq!(files_in(world), vec!["world.mt"]);

    let tool = world.join("tool");
    fs::write(&tool, b"old").unwrap();
    fs::set_permissions(&tool, fs::Permissions::from_mode(0o4755)).unwrap();
    let (tmp, _, fh) = vfs.create(ROOT, ".tool.Ab12Cd", 0o600).unwrap();
    vfs.write(fh, 0, b"new", false).unwrap();
    vfs.release(fh).unwrap();
    vfs.setattr(tmp, None, None, None, Some(0o100755)).unwrap();
    vfs.rename(ROOT, ".tool.Ab12Cd", ROOT, "tool").unwrap();
    assert_eq!(fs::read(&tool).unwrap(), b"new");
    assert_eq!(mode(&tool), 0o755, "new content kept the set-user-id bit");
}

/// Odd things in sub-folders: names the top level hides are shown below it, a FIFO is
/// neither shown nor opened (nothing waits for a writer), `..` goes nowhere, a folder
/// cannot move into itself, and nothing moves between the world folder and the views.
#[test]
fn sub_folders_hide_nothing_open_no_fifo_and_stay_inside() {
    let dir = tempfile::tempdir().unwrap();
    let world = dir.path().join("world");
    fs::create_dir(&world).unwrap();
    fs::write(world.join("world.mt"), WORLD_MT).unwrap();
    let mods = world.join("worldmods");
    fs::create_dir_all(mods.join("a/b")).unwrap();
    for name in ["blocks", "players", "map.sqlite", "mod_storage"] {
        fs::write(mods.join(name), name).unwrap();
    }
    nix::unistd::mkfifo(
        &mods.join("fifo"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    let tree = open(&world, false);
    assert_eq!(
        names(&tree, "worldmods"),
        vec!["a", "blocks", "map.sqlite", "mod_storage", "players"]
    );
    assert_eq!(
        &**tree.read(&p("worldmods/map.sqlite")).unwrap(),
        b"map.sqlite"
    );
    let (tx, rx) = std::sync::mpsc::channel();
    let fifo = p("worldmods/fifo");
    std::thread::scope(|s| {
        s.spawn(|| {
            let errs = [
                tree.stat(&fifo).is_err(),
                tree.read(&fifo).is_err(),
                tree.write(&fifo, b"x").is_err(),
            ];
            tx.send(errs).unwrap();
        });
        let errs = rx
            .recv_timeout(Duration::from_secs(5))
            .expect("a FIFO was opened");
        assert_eq!(errs, [true; 3]);
    });
    for path in ["worldmods/../world.mt", "worldmods/a/../../world.mt", ".."] {
        assert!(tree.stat(&p(path)).is_err(), "{path}");
        assert!(tree.write(&p(path), b"x").is_err(), "{path}");
    }
    assert!(tree
        .rename(&p("worldmods/a"), &p("worldmods/a/b/a"))
        .is_err());
    assert!(tree.rename(&p("world.mt"), &p("blocks/0,0,0")).is_err());
    assert!(tree.rename(&p("worldmods/a"), &p("players/a")).is_err());
    assert!(mods.join("a/b").is_dir());
    assert_eq!(
        fs::read(world.join("world.mt")).unwrap(),
        WORLD_MT.as_bytes()
    );
    assert!(dir.path().join("world.mt").symlink_metadata().is_err());
}

/// A `world.mt` that names other stores (a backup of another backend's world restored over
/// this one) is refused however it comes: written or renamed over. What the mount writes
/// would be out of the game's reach after it. A link is refused whatever it names. Other
/// settings change freely, those of backends not in use included.
#[test]
fn a_world_mt_naming_other_stores_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let world = dir.path();
    fs::write(world.join("world.mt"), WORLD_MT).unwrap();
    let tree = open(world, false);
    let others = [
        (
            "backend = postgresql\npgsql_connection = host=db password=hunter2 dbname=w\n",
            "backend",
        ),
        ("player_backend = files\n", "player_backend"),
        ("auth_backend = leveldb\n", "auth_backend"),
        ("mod_storage_backend = files\n", "mod_storage_backend"),
        ("readonly_backend = sqlite3\n", "readonly_backend"),
    ];
    for (extra, key) in others {
        let text = format!("{WORLD_MT}{extra}");
        for e in [
            tree.check(&p("world.mt"), text.as_bytes()).unwrap_err(),
            tree.write(&p("world.mt"), text.as_bytes()).unwrap_err(),
        ] {
            assert_eq!(e.errno(), libc::EPERM, "{e}");
            let message = e.to_string();
            assert!(message.contains(key), "{key}: {message}");
            assert!(message.contains("--exclude /world.mt"), "{message}");
            assert!(message.contains("until you rm it"), "{message}");
            assert!(!message.contains("hunter2"), "{message}");
        }
        fs::write(world.join("world.mt.new"), &text).unwrap();
        let e = tree.rename(&p("world.mt.new"), &p("world.mt")).unwrap_err();
        assert_eq!(e.errno(), libc::EPERM, "{e}");
        fs::remove_file(world.join("world.mt.new")).unwrap();
        assert_eq!(
            fs::read_to_string(world.join("world.mt")).unwrap(),
            WORLD_MT
        );
    }
    // Text the parser would read otherwise than the engine: a line that is not UTF-8 (here
    // it opens a multi-line value hiding the next line from the engine), a key ending in a
    // vertical tab (the engine's trim takes it, as any C isspace), a store given as a group.
    let mut bytes = WORLD_MT.as_bytes().to_vec();
    bytes.extend_from_slice(
        b"player_backend = files\nx\xff = \"\"\"\nplayer_backend = sqlite3\n\"\"\"\n",
    );
    let e = tree.write(&p("world.mt"), &bytes).unwrap_err();
    assert!(e.to_string().starts_with("line 7, column 1:"), "{e}");
    let e = tree
        .write(
            &p("world.mt"),
            format!("{WORLD_MT}player_backend\u{0B} = files\n").as_bytes(),
        )
        .unwrap_err();
    assert!(e.to_string().contains("player_backend"), "{e}");
    let e = tree
        .write(
            &p("world.mt"),
            format!("{WORLD_MT}player_backend = {{\n}}\n").as_bytes(),
        )
        .unwrap_err();
    assert!(e.to_string().contains("group"), "{e}");
    tree.write(
        &p("world.mt"),
        format!("{WORLD_MT}player_backend = sqlite3\u{0B}\n").as_bytes(),
    )
    .unwrap();
    fs::write(world.join("world.mt"), WORLD_MT).unwrap();

    // The same stores spelled otherwise, other settings, and settings of backends not in
    // use (the first step of a migration) are written.
    let same = "backend = sqlite3\ngameid = devtest\nplayer_backend = sqlite3\n\
                auth_backend = sqlite3\nmod_storage_backend = sqlite3\nenable_damage = false\n\
                pgsql_connection = host=db password=hunter2 dbname=w\nredis_port = 6379\n";
    tree.check(&p("world.mt"), same.as_bytes()).unwrap();
    tree.write(&p("world.mt"), same.as_bytes()).unwrap();
    assert_eq!(fs::read_to_string(world.join("world.mt")).unwrap(), same);
    // An editor's save (vim: the old file moved aside, a new one written, the old removed).
    tree.rename(&p("world.mt"), &p("world.mt~")).unwrap();
    let e = tree.write(&p("world.mt"), b"gameid = x\n").unwrap_err();
    assert_eq!(e.errno(), libc::EPERM, "{e}");
    assert!(e.to_string().contains("player_backend"), "{e}");
    for target in [&b"world.mt~"[..], b"/elsewhere/world.mt"] {
        let e = tree.symlink(&p("world.mt"), target).unwrap_err();
        assert_eq!(e.errno(), libc::EPERM, "{e}");
    }
    tree.write(&p("world.mt"), WORLD_MT.as_bytes()).unwrap();
    tree.remove(&p("world.mt~")).unwrap();
    assert_eq!(files_in(world), ["world.mt"]);
    // Files of other names are no one's business.
    tree.write(&p("notes.txt"), b"backend = postgresql\n")
        .unwrap();
    tree.rename(&p("notes.txt"), &p("world.mt.bak")).unwrap();
    tree.remove(&p("world.mt.bak")).unwrap();
}

/// In a world using PostgreSQL, the connection of each store in use is compared too.
#[test]
fn a_world_mt_naming_another_database_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let world = dir.path();
    let mt = "gameid = minetest\nbackend = sqlite3\nplayer_backend = postgresql\n\
              pgsql_player_connection = host=db user=u password=hunter2 dbname=one\n\
              auth_backend = sqlite3\nmod_storage_backend = sqlite3\n";
    fs::write(world.join("world.mt"), mt).unwrap();
    // The player store is opened at its first use, which this test never makes.
    let tree = open(world, false);
    let other = mt.replace("dbname=one", "dbname=two");
    let e = tree.write(&p("world.mt"), other.as_bytes()).unwrap_err();
    assert_eq!(e.errno(), libc::EPERM, "{e}");
    assert!(e.to_string().contains("pgsql_player_connection"), "{e}");
    assert!(!e.to_string().contains("hunter2"), "{e}");
    let unused = format!("{mt}pgsql_auth_connection = host=elsewhere\n");
    tree.write(&p("world.mt"), unused.as_bytes()).unwrap();
}

/// A world folder without `world.mt` has each store read where its data is, and as sqlite3
/// (which the engine names in the `world.mt` it makes there) where there is none: nothing
/// on disk is hidden, and a `world.mt` naming other stores is refused.
#[test]
fn a_world_without_world_mt_shows_its_stores_where_their_data_is() {
    let dir = tempfile::tempdir().unwrap();
    let world = dir.path();
    fs::write(world.join("map.sqlite"), b"").unwrap();
    fs::create_dir(world.join("players")).unwrap();
    fs::write(
        world.join("players/celeron55"),
        "hp = 20\nname = celeron55\npitch = 0\nposition = (0,0,0)\nyaw = 0\n\
         PlayerArgsEnd\nEndInventory\n",
    )
    .unwrap();
    fs::write(world.join("auth.txt"), "celeron55::1:interact\n").unwrap();
    let tree = open(world, false);
    assert_eq!(names(&tree, "players"), ["celeron55"]);
    assert!(names(&tree, "").contains(&"auth.txt".to_string()));
    let e = tree.write(&p("world.mt"), WORLD_MT.as_bytes()).unwrap_err();
    assert_eq!(e.errno(), libc::EPERM, "{e}");
    assert!(e.to_string().contains("player_backend"), "{e}");
    let files = "gameid = minetest\nplayer_backend = files\nauth_backend = files\n\
                 mod_storage_backend = sqlite3\n";
    tree.write(&p("world.mt"), files.as_bytes()).unwrap();
}

/// Without `world.mt` or any account data, every store is sqlite3, as in the `world.mt`
/// the engine writes when it starts there.
#[test]
fn a_world_mt_written_into_a_world_without_one_must_name_its_stores() {
    let dir = tempfile::tempdir().unwrap();
    let world = dir.path();
    fs::write(world.join("env_meta.txt"), "game_time = 1\nEnvArgsEnd\n").unwrap();
    let tree = open(world, false);
    let e = tree
        .write(&p("world.mt"), b"gameid = minetest\nbackend = sqlite3\n")
        .unwrap_err();
    assert_eq!(e.errno(), libc::EPERM, "{e}");
    assert!(e.to_string().contains("copy that world.mt"), "{e}");
    assert!(!world.join("world.mt").exists());
    tree.write(&p("world.mt"), WORLD_MT.as_bytes()).unwrap();
}
