//! Luanti worlds in PostgreSQL, on a real server (`scripts/pg-server`, started by
//! `scripts/test` or by this binary itself): worlds the engine moved there read as their
//! SQLite copies, edits through the tree are what the engine then loads, commits are one
//! transaction, listings are bounded, a server down or gone away fails clearly and the
//! mount recovers, and no password is ever shown.

#[allow(dead_code)]
mod common;

use std::path::Path;

use common::engine::{probe, ENGINE_RUNS};
use common::postgres::{database, engine_world, set, OwnServer};
use common::scratch::state_dir;
use worldfs::luanti::codec::block::BlockPos;
use worldfs::luanti::store::auth::AuthBackend;
use worldfs::luanti::store::map::{MapStore, LIST_BYTES};
use worldfs::luanti::store::mod_storage::ModStorageBackend;
use worldfs::luanti::store::players::PlayerBackend;
use worldfs::vfs::inodes::ROOT;
use worldfs::vfs::{OpenMode, Vfs};
use worldfs::worlds::{self, Game};

const PID: u32 = 4242;
const TRUNC: OpenMode = OpenMode {
    write: true,
    truncate: true,
    append: false,
};

fn pos(x: i16, y: i16, z: i16) -> BlockPos {
    BlockPos { x, y, z }
}

/// Every listed block with its bytes, page by page.
fn all_blocks(store: &MapStore, page: usize) -> Vec<(BlockPos, Vec<u8>)> {
    let mut out = Vec::new();
    let mut after = 0;
    loop {
        let rows = store.list(after, page, true).unwrap();
        let Some(last) = rows.last() else { break };
        after = last.key;
        out.extend(rows.into_iter().map(|l| (l.pos, l.data.unwrap())));
    }
    out
}

fn sorted(mut v: Vec<(BlockPos, Vec<u8>)>) -> Vec<(BlockPos, Vec<u8>)> {
    v.sort_by_key(|(p, _)| (p.x, p.y, p.z));
    v
}

/// An empty world folder whose map is a new database.
fn empty_world(dir: &Path) -> String {
    let connection = database();
    std::fs::write(
        dir.join("world.mt"),
        format!("gameid = minetest\nbackend = postgresql\npgsql_connection = {connection}\n"),
    )
    .unwrap();
    connection
}

fn vfs(world: &Path, read_only: bool) -> Vfs {
    Vfs::new(
        worlds::open(world, Game::Luanti, read_only, 4 << 20).unwrap(),
        None,
    )
}

fn ino(vfs: &Vfs, path: &str) -> u64 {
    path.split('/')
        .fold(ROOT, |ino, name| vfs.lookup(ino, name, PID).unwrap().0)
}

fn cat(vfs: &Vfs, path: &str) -> String {
    let fh = vfs.open(ino(vfs, path), OpenMode::default()).unwrap();
    let data = vfs.read(fh, 0, u32::MAX).unwrap();
    vfs.release(fh).unwrap();
    String::from_utf8(data.to_vec()).unwrap()
}

/// The names in `blocks/`.
fn list_blocks(vfs: &Vfs) -> Result<Vec<String>, i32> {
    let blocks = vfs.lookup(ROOT, "blocks", PID).map_err(|e| e.errno())?.0;
    let mut names = Vec::new();
    vfs.readdir(blocks, 0, false, PID, &mut |e| {
        if !e.name.starts_with('.') {
            names.push(e.name.to_string());
        }
        true
    })
    .map_err(|e| e.errno())?;
    Ok(names)
}

fn save(vfs: &Vfs, path: &str, text: &str) -> Result<(), i32> {
    let fh = vfs.open(ino(vfs, path), TRUNC).map_err(|e| e.errno())?;
    vfs.write(fh, 0, text.as_bytes(), false)
        .map_err(|e| e.errno())?;
    let closed = vfs.flush(fh).map_err(|e| e.errno());
    vfs.release(fh).map_err(|e| e.errno())?;
    closed
}

/// A world the engine generated and moved into PostgreSQL lists and reads exactly as its
/// SQLite copy, in pages of every size; `worldfs info` and `check` work on it and show no
/// password.
#[test]
fn an_engine_world_in_postgresql_reads_as_its_sqlite_copy() {
    state_dir();
    let tmp = tempfile::tempdir().unwrap();
    let (world, copy) = {
        let _engine = ENGINE_RUNS.lock().unwrap_or_else(|e| e.into_inner());
        engine_world(tmp.path(), "w")
    };
    let pg = MapStore::open(&world, true).unwrap();
    let sqlite = MapStore::open(&copy, true).unwrap();
    let want = sorted(all_blocks(&sqlite, 4096));
    assert!(want.len() > 100, "{} blocks", want.len());
    assert_eq!(pg.count().unwrap(), want.len() as u64);
    for page in [1, 7, 4096] {
        let got = all_blocks(&pg, page);
        assert_eq!(got, want, "pages of {page}, in primary key order");
    }
    assert_eq!(
        pg.get(pos(0, 0, 0)).unwrap(),
        sqlite.get(pos(0, 0, 0)).unwrap()
    );
    assert_eq!(pg.get(pos(999, 0, 0)).unwrap(), None);
    assert_eq!(pg.out_of_range().unwrap(), 0);

    let (a, b) = (vfs(&world, true), vfs(&copy, true));
    for file in [
        "blocks/0,0,0/nodes.cubeset",
        "blocks/0,0,0/block.txt",
        "auth.txt",
    ] {
        assert_eq!(cat(&a, file), cat(&b, file), "{file}");
    }

    let mut info = Vec::new();
    worldfs::luanti::inspect::info(&world, &mut info).unwrap();
    let info = String::from_utf8(info).unwrap();
    let password = std::fs::read_to_string(world.join("world.mt"))
        .unwrap()
        .split_whitespace()
        .find_map(|w| w.strip_prefix("password=").map(str::to_string))
        .unwrap();
    assert!(info.contains("format: Luanti world (PostgreSQL)"), "{info}");
    assert!(info.contains("schema: posX,posY,posZ (integer)"), "{info}");
    assert!(info.contains(&format!("blocks: {}", want.len())), "{info}");
    assert!(!info.contains(&password), "{info}");
    let mut out = Vec::new();
    worldfs::luanti::inspect::check(&world, &mut out).unwrap();
    let out = String::from_utf8(out).unwrap();
    assert!(
        out.contains(&format!("{} blocks checked, 0 broken", want.len())),
        "{out}"
    );
}

/// An edit through the tree is committed to PostgreSQL as the engine writes blocks: the
/// engine, started on the world, loads the edited block and sees the edit.
#[test]
fn the_engine_loads_what_the_tree_wrote_to_postgresql() {
    state_dir();
    let tmp = tempfile::tempdir().unwrap();
    let _engine = ENGINE_RUNS.lock().unwrap_or_else(|e| e.into_inner());
    let (world, _) = engine_world(tmp.path(), "w");
    let before = probe(&world, "0,0,0", "15,15,15", "1,1,1");
    // The most common node of block 0,0,0 other than air (the map generator's seed decides:
    // stone, or water where the block lies under the sea).
    let (node, count) = before
        .lines()
        .filter_map(|l| l.strip_prefix("count ")?.split_once(' '))
        .filter(|(name, _)| *name != "air")
        .filter_map(|(name, n)| Some((name.to_string(), n.parse::<usize>().ok()?)))
        .max_by_key(|(_, n)| *n)
        .unwrap_or_else(|| panic!("block 0,0,0 holds nodes; the probe said:\n{before}"));
    {
        let v = vfs(&world, false);
        let text = cat(&v, "blocks/0,0,0/nodes.cubeset");
        let edited = text.replace(&format!(": {node}: "), ": default:mese: ");
        assert_ne!(edited, text);
        save(&v, "blocks/0,0,0/nodes.cubeset", &edited).unwrap();
    }
    let after = probe(&world, "0,0,0", "15,15,15", "1,1,1");
    assert!(
        after.contains(&format!("count default:mese {count}\n")),
        "{node} -> mese; before:\n{before}\nafter:\n{after}"
    );
    assert!(!after.contains(&format!("count {node} ")), "{after}");
}

/// Blocks written to an empty database create the engine's table; a commit that the server
/// refuses half-way leaves every block as it was (one transaction).
#[test]
fn a_commit_is_one_transaction() {
    state_dir();
    let tmp = tempfile::tempdir().unwrap();
    let connection = empty_world(tmp.path());
    let store = MapStore::open(tmp.path(), false).unwrap();
    assert_eq!(store.count().unwrap(), 0);
    assert!(store.list(0, 10, true).unwrap().is_empty());
    store
        .commit(&[(pos(0, 0, 0), Some(b"old".to_vec()))])
        .unwrap();
    let mut client = postgres::Client::connect(&connection, postgres::NoTls).unwrap();
    let types: Vec<String> = client
        .query(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute \
             WHERE attrelid = 'blocks'::regclass AND attnum > 0 ORDER BY attnum",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(types, ["smallint", "smallint", "smallint", "bytea"]);
    client
        .batch_execute("ALTER TABLE blocks ADD CONSTRAINT refuse CHECK (posx <> 7)")
        .unwrap();
    let e = store
        .commit(&[
            (pos(0, 0, 0), Some(b"new".to_vec())),
            (pos(1, 0, 0), Some(b"new".to_vec())),
            (pos(7, 0, 0), Some(b"refused".to_vec())),
        ])
        .unwrap_err();
    assert_eq!(e.errno(), libc::EIO, "{e}");
    assert_eq!(store.get(pos(0, 0, 0)).unwrap(), Some(b"old".to_vec()));
    assert_eq!(store.get(pos(1, 0, 0)).unwrap(), None);
    store
        .commit(&[(pos(0, 0, 0), None), (pos(-5, 3, 2), Some(Vec::new()))])
        .unwrap();
    assert_eq!(store.count().unwrap(), 1);
    assert_eq!(store.get(pos(-5, 3, 2)).unwrap(), Some(Vec::new()));
}

/// A page of a listing holds at most `LIST_BYTES` of data, and the listing goes on; rows no
/// block can have (coordinates beyond `s16` in an `INT` table) are left out and counted.
#[test]
fn listings_are_bounded_and_skip_impossible_rows() {
    state_dir();
    let tmp = tempfile::tempdir().unwrap();
    let connection = empty_world(tmp.path());
    let mut client = postgres::Client::connect(&connection, postgres::NoTls).unwrap();
    client
        .batch_execute(
            "CREATE TABLE blocks (posX INT NOT NULL, posY INT NOT NULL, posZ INT NOT NULL, \
             data BYTEA, PRIMARY KEY (posX, posY, posZ));
             INSERT INTO blocks VALUES (40000, 0, 0, '\\x1d'), (0, -40000, 0, '\\x1d'), \
             (3, 3, 3, NULL);",
        )
        .unwrap();
    let store = MapStore::open(tmp.path(), false).unwrap();
    let rows = LIST_BYTES / (1 << 20) + 4;
    let blocks: Vec<_> = (0..rows)
        .map(|i| (pos(i as i16 - 8, 0, 0), Some(vec![i as u8; 1 << 20])))
        .collect();
    store.commit(&blocks).unwrap();
    let page = store.list(0, 512, true).unwrap();
    let bytes: usize = page.iter().map(|l| l.data.as_ref().unwrap().len()).sum();
    assert!(page.len() < rows, "the page stops early");
    assert!(bytes <= LIST_BYTES, "{bytes} bytes");
    let all = all_blocks(&store, 512);
    assert_eq!(all.len(), rows + 1, "and goes on");
    assert!(
        all.contains(&(pos(3, 3, 3), Vec::new())),
        "NULL data reads as nothing"
    );
    assert_eq!(store.out_of_range().unwrap(), 2);
    assert_eq!(store.count().unwrap(), rows as u64 + 3);
}

/// A server that is down at mount fails the mount with its host and database named, never
/// the password; one that goes away fails the calls that need it (EIO), and once it is back
/// the same store works again, the failed commit having written nothing.
#[test]
fn a_server_down_or_gone_fails_clearly_and_the_mount_recovers() {
    state_dir();
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("world.mt"),
        "backend = postgresql\npgsql_connection = host=/nonexistent/pg port=5999 user=u \
         password=hunter2 dbname=gone\n",
    )
    .unwrap();
    let e = MapStore::open(tmp.path(), true).err().unwrap().to_string();
    assert!(
        e.contains("host=/nonexistent/pg port=5999 dbname=gone"),
        "{e}"
    );
    assert!(!e.contains("hunter2"), "{e}");
    let e = worlds::open(tmp.path(), Game::Luanti, true, 1 << 20)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("dbname=gone") && !e.contains("hunter2"), "{e}");

    let own = OwnServer::start();
    let world = tmp.path().join("w");
    std::fs::create_dir(&world).unwrap();
    std::fs::write(
        world.join("world.mt"),
        "gameid = minetest\nbackend = postgresql\n",
    )
    .unwrap();
    set(
        &world,
        "pgsql_connection",
        &common::postgres::database_on(&own.connection),
    );
    let v = vfs(&world, false);
    let store = MapStore::open(&world, false).unwrap();
    store
        .commit(&[(pos(1, 2, 3), Some(b"v1".to_vec()))])
        .unwrap();
    assert_eq!(store.get(pos(1, 2, 3)).unwrap(), Some(b"v1".to_vec()));
    own.pause();
    let e = store.get(pos(1, 2, 3)).unwrap_err();
    assert_eq!(e.errno(), libc::EIO, "{e}");
    let e = store
        .commit(&[(pos(1, 2, 3), Some(b"v2".to_vec()))])
        .unwrap_err();
    assert_eq!(e.errno(), libc::EIO, "{e}");
    assert!(!e.to_string().contains("password"), "{e}");
    assert_eq!(
        list_blocks(&v),
        Err(libc::EIO),
        "listing blocks/ fails while the server is away"
    );
    own.resume();
    assert_eq!(store.get(pos(1, 2, 3)).unwrap(), Some(b"v1".to_vec()));
    store
        .commit(&[(pos(1, 2, 3), Some(b"v3".to_vec()))])
        .unwrap();
    assert_eq!(store.get(pos(1, 2, 3)).unwrap(), Some(b"v3".to_vec()));
    assert_eq!(list_blocks(&v), Ok(vec!["1,2,3".to_string()]));
}

/// Players and auth the engine moved into PostgreSQL read as their SQLite copies (through the
/// tree too); what worldfs then saves there is what the engine moves back out of it; mod
/// storage (which Debian's engine cannot keep in PostgreSQL) lives in the newer engine's
/// table.
#[test]
fn players_auth_and_mod_storage_in_postgresql() {
    use worldfs::luanti::codec::block::ItemStack;
    use worldfs::luanti::store::auth::{parse_auth, render_auth, AuthStore};
    use worldfs::luanti::store::auth_sqlite::SqliteAuth;
    use worldfs::luanti::store::mod_storage::ModStorage;
    use worldfs::luanti::store::mod_storage_sqlite::SqliteModStorage;
    use worldfs::luanti::store::players::PlayerStore;
    use worldfs::luanti::store::players_sqlite::SqlitePlayers;
    use worldfs::luanti::store::world_mt::WorldMt;

    state_dir();
    let tmp = tempfile::tempdir().unwrap();
    let _engine = ENGINE_RUNS.lock().unwrap_or_else(|e| e.into_inner());
    let (world, copy) = engine_world(tmp.path(), "w");
    let accounts = database();
    set(&world, "pgsql_player_connection", &accounts);
    set(&world, "pgsql_auth_connection", &accounts);
    common::postgres::migrate(&world, "--migrate-players");
    common::postgres::migrate(&world, "--migrate-auth");
    let mt = WorldMt::read(&world).unwrap();
    assert_eq!(mt.get("player_backend"), Some("postgresql"));
    assert_eq!(mt.get("auth_backend"), Some("postgresql"));

    let mut players = PlayerStore::open(&world, &mt, false).unwrap();
    assert_eq!(players.backend(), "postgresql");
    let sqlite_players = SqlitePlayers::open(&copy.join("players.sqlite"), true).unwrap();
    assert_eq!(players.list().unwrap(), ["celeron55"]);
    let stored = players.load("celeron55").unwrap();
    assert_eq!(stored, sqlite_players.load("celeron55").unwrap());
    let mut auth = AuthStore::open(&world, &mt, false).unwrap();
    let sqlite_auth = SqliteAuth::open(&copy.join("auth.sqlite"), true).unwrap();
    assert_eq!(auth.entries().unwrap(), sqlite_auth.entries().unwrap());
    {
        let (a, b) = (vfs(&world, true), vfs(&copy, true));
        for file in ["players/celeron55", "auth.txt"] {
            assert_eq!(cat(&a, file), cat(&b, file), "{file}");
        }
    }

    let mut edited = stored.clone();
    edited.hp = 7;
    edited.position = [100.5, -20.0, 3.25];
    edited.metadata.insert("note".into(), "two\nlines".into());
    edited.inventory.lists[0].slots[0] = ItemStack {
        name: b"default:mese".to_vec(),
        count: 42,
        ..ItemStack::default()
    };
    players.save(&edited).unwrap();
    let mut second = edited.clone();
    second.name = "newcomer".into();
    players.create(&second).unwrap();
    assert_eq!(players.create(&second).unwrap_err().errno(), libc::EEXIST);
    assert_eq!(players.list().unwrap(), ["celeron55", "newcomer"]);
    let text = String::from_utf8(render_auth(&auth.entries().unwrap())).unwrap()
        + "newcomer:#1#salt#verifier:interact,shout:1700000000\n";
    let text = text.replace("celeron55::interact,shout", "celeron55::interact,fly");
    let changes = auth.apply(text.as_bytes()).unwrap();
    assert_eq!(changes.added, ["newcomer"]);
    assert_eq!(changes.changed, ["celeron55"]);
    let want_auth = parse_auth(text.as_bytes()).unwrap();
    drop((players, auth));

    // The engine moves them back out of PostgreSQL into SQLite.
    let back = tmp.path().join("back");
    common::scratch::copy_dir(&world, &back);
    std::fs::remove_file(back.join("players.sqlite")).unwrap();
    std::fs::remove_file(back.join("auth.sqlite")).unwrap();
    common::engine::migrate(&back, "players", "sqlite3");
    common::engine::migrate(&back, "auth", "sqlite3");
    let engine = SqlitePlayers::open(&back.join("players.sqlite"), true).unwrap();
    assert_eq!(engine.list().unwrap(), ["celeron55", "newcomer"]);
    assert_eq!(engine.load("celeron55").unwrap(), edited);
    assert_eq!(engine.load("newcomer").unwrap(), second);
    let engine = SqliteAuth::open(&back.join("auth.sqlite"), true).unwrap();
    let mut want = want_auth.clone();
    want.sort_by(|a, b| a.name.cmp(&b.name));
    for e in &mut want {
        e.privileges.sort();
    }
    assert_eq!(engine.entries().unwrap(), want);

    // Mod storage: the engine's entries of the SQLite copy, stored in PostgreSQL.
    set(&world, "mod_storage_backend", "postgresql");
    set(&world, "pgsql_mod_storage_connection", &accounts);
    let mt = WorldMt::read(&world).unwrap();
    let mut mods = ModStorage::open(&world, &mt, false).unwrap();
    assert_eq!(mods.backend(), "postgresql");
    assert!(mods.list_mods().unwrap().is_empty(), "no table yet");
    let sqlite_mods = SqliteModStorage::open(&copy.join("mod_storage.sqlite"), true).unwrap();
    let mut entries = Vec::new();
    for m in sqlite_mods.list_mods().unwrap() {
        for k in sqlite_mods.list_keys(&m).unwrap() {
            let v = sqlite_mods.read(&m, &k).unwrap();
            mods.create(&m, &k, &v).unwrap();
            entries.push((m.clone(), k, v));
        }
    }
    assert!(!entries.is_empty());
    let (m, k, v) = &entries[0];
    assert_eq!(mods.create(m, k, v).unwrap_err().errno(), libc::EEXIST);
    assert_eq!(&mods.read(m, k).unwrap(), v);
    mods.write(m, b"bin\0key", b"\xff\x00value").unwrap();
    let version = mods.version(m, b"bin\0key").expect("a row version");
    assert_eq!(mods.version(m, b"bin\0key"), Some(version), "unchanged");
    mods.write(m, b"bin\0key", b"second").unwrap();
    assert_eq!(mods.read(m, b"bin\0key").unwrap(), b"second");
    assert_ne!(
        mods.version(m, b"bin\0key"),
        Some(version),
        "a write moves it"
    );
    let mut client = postgres::Client::connect(&accounts, postgres::NoTls).unwrap();
    let version = mods.version(m, b"bin\0key");
    client
        .execute(
            "UPDATE mod_storage SET value = value WHERE key = $1",
            &[&b"bin\0key".as_slice()],
        )
        .unwrap();
    assert_ne!(
        mods.version(m, b"bin\0key"),
        version,
        "another program's update, even of the same bytes"
    );
    let columns: Vec<(String, String)> = client
        .query(
            "SELECT attname::text, format_type(atttypid, atttypmod) FROM pg_attribute \
             WHERE attrelid = 'mod_storage'::regclass AND attnum > 0 ORDER BY attnum",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(
        columns,
        [
            ("modname".to_string(), "text".to_string()),
            ("key".into(), "bytea".into()),
            ("value".into(), "bytea".into())
        ]
    );
    mods.delete(m, b"bin\0key").unwrap();
    assert_eq!(
        mods.delete(m, b"bin\0key").unwrap_err().errno(),
        libc::ENOENT
    );
    let v2 = vfs(&world, true);
    assert_eq!(
        cat(
            &v2,
            &format!("mod_storage/{m}/{}", String::from_utf8_lossy(k))
        ),
        format!("{}\n", String::from_utf8_lossy(v))
    );
}

/// A commit waiting for a lock another session holds on the table (a server running on the
/// world, inside its save) gives up after a while instead of hanging the call; reads go on.
#[test]
fn a_commit_behind_another_writer_gives_up_instead_of_hanging() {
    state_dir();
    let tmp = tempfile::tempdir().unwrap();
    let connection = empty_world(tmp.path());
    let store = MapStore::open(tmp.path(), false).unwrap();
    store
        .commit(&[(pos(0, 0, 0), Some(b"old".to_vec()))])
        .unwrap();
    let mut other = postgres::Client::connect(&connection, postgres::NoTls).unwrap();
    let mut tx = other.transaction().unwrap();
    tx.batch_execute("LOCK TABLE blocks IN SHARE ROW EXCLUSIVE MODE")
        .unwrap();
    let started = std::time::Instant::now();
    let e = store
        .commit(&[(pos(0, 0, 0), Some(b"new".to_vec()))])
        .unwrap_err();
    assert_eq!(e.errno(), libc::EIO, "{e}");
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    assert_eq!(store.get(pos(0, 0, 0)).unwrap(), Some(b"old".to_vec()));
    tx.commit().unwrap();
    store
        .commit(&[(pos(0, 0, 0), Some(b"new".to_vec()))])
        .unwrap();
    assert_eq!(store.get(pos(0, 0, 0)).unwrap(), Some(b"new".to_vec()));
}

/// Transactions the server counted in this database so far (every statement outside a
/// transaction is one), once closed connections reported theirs.
fn transactions(client: &mut postgres::Client) -> i64 {
    std::thread::sleep(std::time::Duration::from_millis(2500));
    client
        .query_one(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()",
            &[],
        )
        .unwrap()
        .get(0)
}

/// A walk over every block in listing order (what `find`, `rsync` and `cp -r` do) reads the
/// blocks ahead, a window per round trip, instead of one round trip per ask (the folder's
/// stat, its listing, the file read: several per block), and what was read ahead is never
/// shown after another writer changed it once the server was looked at again.
#[test]
fn a_walk_reads_ahead_in_few_round_trips_and_another_writers_change_still_shows() {
    use worldfs::luanti::codec::{block::MapBlock, encode_block};
    state_dir();
    let tmp = tempfile::tempdir().unwrap();
    let connection = empty_world(tmp.path());
    let block = |name: &str| {
        let mut b: MapBlock = common::mapblock::stone();
        b.names = vec![name.to_string()];
        encode_block(&b).unwrap()
    };
    let n: i16 = 600;
    let at = |i: i16| pos(i % 10, (i / 10) % 10, i / 100);
    let changes: Vec<_> = (0..n)
        .map(|i| (at(i), Some(block("default:stone"))))
        .collect();
    MapStore::open(tmp.path(), false)
        .unwrap()
        .commit(&changes)
        .unwrap();
    let mut client = postgres::Client::connect(&connection, postgres::NoTls).unwrap();
    let name = |p: BlockPos| format!("{},{},{}", p.x, p.y, p.z);
    let before = transactions(&mut client);
    {
        // Its connections report their statements when they close.
        let vfs = vfs(tmp.path(), false);
        let names = list_blocks(&vfs).unwrap();
        assert_eq!(names.len(), n as usize);
        for b in &names {
            let folder = ino(&vfs, &format!("blocks/{b}"));
            vfs.getattr(folder, None).unwrap();
            vfs.readdir(folder, 0, true, PID, &mut |_| true).unwrap();
            assert!(cat(&vfs, &format!("blocks/{b}/nodes.cubeset")).contains("default:stone"));
        }
    }
    // Our own statements: the count and this one.
    let trips = transactions(&mut client) - before - 2;
    assert!(
        trips < i64::from(n) / 4,
        "{trips} round trips to walk {n} blocks"
    );

    // Block 0,0,1 is read ahead with block 0,0,0; another writer changes it, and it shows.
    let vfs = self::vfs(tmp.path(), false);
    let first = cat(&vfs, &format!("blocks/{}/nodes.cubeset", name(at(0))));
    assert!(first.contains("default:stone"));
    client
        .execute(
            "UPDATE blocks SET data = $1 WHERE posX = 0 AND posY = 0 AND posZ = 1",
            &[&block("default:dirt")],
        )
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let second = cat(&vfs, &format!("blocks/{}/nodes.cubeset", name(at(100))));
    assert!(second.contains("default:dirt"), "{second}");
    // And after our own commit, a block read ahead before it is read again.
    save(
        &vfs,
        &format!("blocks/{}/nodes.cubeset", name(at(200))),
        &cat(&vfs, &format!("blocks/{}/nodes.cubeset", name(at(200))))
            .replace("default:stone", "default:sand"),
    )
    .unwrap();
    assert!(cat(&vfs, &format!("blocks/{}/nodes.cubeset", name(at(200)))).contains("default:sand"));
}

/// auth.txt's stamp on PostgreSQL (what a stat of auth.txt asks the server instead of every
/// account) stays the same while nothing changes and changes with every change another
/// program commits: a new account, a login's time, a privilege added or removed, a password,
/// an account removed; a stat through the tree shows each.
#[test]
fn auth_stamp_on_postgresql_follows_every_change_of_another_program() {
    use worldfs::luanti::store::auth::AuthStore;
    use worldfs::luanti::store::world_mt::WorldMt;

    state_dir();
    let tmp = tempfile::tempdir().unwrap();
    let connection = database();
    std::fs::write(
        tmp.path().join("world.mt"),
        format!(
            "gameid = minetest\nbackend = sqlite3\nplayer_backend = sqlite3\n\
             auth_backend = postgresql\npgsql_auth_connection = {connection}\n"
        ),
    )
    .unwrap();
    let mt = WorldMt::read(tmp.path()).unwrap();
    let mut store = AuthStore::open(tmp.path(), &mt, false).unwrap();
    assert_eq!(store.version(), None, "no tables yet");
    store
        .apply(b"alice:#1#salt#verifier:interact:5\nbob::shout:0\n")
        .unwrap();
    let first = store.version().expect("a stamp once the tables exist");
    assert_eq!(store.version(), Some(first), "unchanged");

    let tree = vfs(tmp.path(), true);
    let size = |tree: &Vfs| {
        let ino = ino(tree, "auth.txt");
        tree.getattr(ino, None).unwrap().size
    };
    assert_eq!(size(&tree), cat(&tree, "auth.txt").len() as u64);
    let mut other = postgres::Client::connect(&connection, postgres::NoTls).unwrap();
    let mut seen = vec![first];
    for change in [
        "INSERT INTO auth (name, password, last_login) VALUES ('carol', '', 7)",
        "UPDATE auth SET last_login = 1700000000 WHERE name = 'alice'",
        "INSERT INTO user_privileges SELECT id, 'fly' FROM auth WHERE name = 'bob'",
        "DELETE FROM user_privileges WHERE privilege = 'interact'",
        "UPDATE auth SET password = '#1#s#v' WHERE name = 'bob'",
        "DELETE FROM auth WHERE name = 'carol'",
    ] {
        other.batch_execute(change).unwrap();
        let now = store.version().unwrap();
        assert!(!seen.contains(&now), "{change}: the stamp did not change");
        seen.push(now);
        assert_eq!(store.version(), Some(now), "{change}: unchanged since");
        let size = size(&tree);
        assert_eq!(
            size,
            cat(&tree, "auth.txt").len() as u64,
            "{change}: stat of auth.txt"
        );
    }
    let text = cat(&tree, "auth.txt");
    assert!(
        text.contains("alice:#1#salt#verifier::1700000000"),
        "{text}"
    );
    assert!(text.contains("bob:#1#s#v:fly,shout:0"), "{text}");
}
