//! Names in the folders whose names are free (mod-storage keys, metadata fields), through
//! the filesystem core over a Luanti tree (issue "Nothing lost"):
//!
//! - point 7: a file with a temporary-looking name (`settings.tmp`) is a key like any
//!   other: stored on close. Only the exact temporaries of sed, rsync and vim are held aside,
//!   and they store their content when renamed over a key.
//! - point 8: keys longer than a file name can be (stored by the game) list under a long
//!   form of at most 255 bytes that opens, changes, renames and removes the stored key.

use std::path::Path;
use std::sync::Arc;

use rusqlite::Connection;
use worldfs::luanti::cache::new_block;
use worldfs::luanti::codec::block::{BlockPos, MetaVar, NodeMeta, RelPos};
use worldfs::luanti::codec::{decode_block, encode_block};
use worldfs::luanti::store::map::pos_to_int;
use worldfs::luanti::store::mod_storage::ModStorageBackend;
use worldfs::luanti::store::mod_storage_sqlite::SqliteModStorage;
use worldfs::luanti::tree::LuantiTree;
use worldfs::names::NAME_MAX;
use worldfs::vfs::inodes::ROOT;
use worldfs::vfs::tree::Options;
use worldfs::vfs::{OpenMode, Vfs};

const MOD: &str = "mymod";

fn long_key() -> Vec<u8> {
    let mut k = b"waypoints/".repeat(40);
    k.extend_from_slice("é".repeat(30).as_bytes());
    k
}

/// A world folder with one block (a node with two fields, one with a long key) and a
/// `mod_storage.sqlite` with a short and a long key.
fn world(dir: &Path) -> std::path::PathBuf {
    let world = dir.join("world");
    std::fs::create_dir(&world).unwrap();
    std::fs::write(
        world.join("world.mt"),
        "gameid = minetest\nmod_storage_backend = sqlite3\nplayer_backend = sqlite3\nauth_backend = sqlite3\n",
    )
    .unwrap();
    let conn = Connection::open(world.join("map.sqlite")).unwrap();
    conn.execute("CREATE TABLE blocks (pos INT PRIMARY KEY, data BLOB)", [])
        .unwrap();
    let mut block = new_block();
    block.metadata.push(NodeMeta {
        pos: RelPos { x: 1, y: 2, z: 3 },
        vars: vec![
            MetaVar {
                key: b"infotext".to_vec(),
                value: b"a chest".to_vec(),
                private: false,
            },
            MetaVar {
                key: long_key(),
                value: b"far away".to_vec(),
                private: false,
            },
        ],
        inventory: Default::default(),
    });
    block.metadata[0].vars.sort_by(|a, b| a.key.cmp(&b.key));
    conn.execute(
        "INSERT INTO blocks VALUES (?1, ?2)",
        rusqlite::params![
            pos_to_int(BlockPos { x: 0, y: 0, z: 0 }),
            encode_block(&block).unwrap()
        ],
    )
    .unwrap();
    let mut s = SqliteModStorage::open_or_create(&world.join("mod_storage.sqlite")).unwrap();
    s.create(MOD, b"data", b"1").unwrap();
    s.create(MOD, &long_key(), b"long value").unwrap();
    world
}

struct Fs {
    vfs: Vfs,
    world: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Fs {
    fn new() -> Fs {
        let dir = tempfile::tempdir().unwrap();
        std::env::set_var("WORLDFS_STATE_DIR", dir.path().join("state"));
        let world = world(dir.path());
        let tree = LuantiTree::open(
            &world,
            &Options {
                read_only: false,
                cache_bytes: 1 << 20,
            },
        )
        .unwrap();
        Fs {
            vfs: Vfs::new(Arc::new(tree), None),
            world,
            _dir: dir,
        }
    }

    fn dir(&self, path: &[&str]) -> u64 {
        let mut ino = ROOT;
        for p in path {
            ino = self.vfs.lookup(ino, p, 0).unwrap().0;
        }
        ino
    }

    fn names(&self, path: &[&str]) -> Vec<String> {
        let ino = self.dir(path);
        let mut out = Vec::new();
        self.vfs
            .readdir(ino, 0, false, 0, &mut |e| {
                out.push(e.name.to_string());
                true
            })
            .unwrap();
        out.retain(|n| n != "." && n != "..");
        out
    }

    /// Creates (or truncates) `name` in `dir`, writes `data` and closes it.
    fn put(&self, dir: &[&str], name: &str, data: &[u8]) -> worldfs::Result<()> {
        let parent = self.dir(dir);
        let fh = match self.vfs.lookup(parent, name, 0) {
            Ok((ino, _)) => self.vfs.open(
                ino,
                OpenMode {
                    write: true,
                    truncate: true,
                    append: false,
                },
            )?,
            Err(_) => self.vfs.create(parent, name, 0o644)?.2,
        };
        self.vfs.write(fh, 0, data, false)?;
        self.vfs.release(fh)
    }

    fn get(&self, dir: &[&str], name: &str) -> worldfs::Result<Vec<u8>> {
        let (ino, stat) = self.vfs.lookup(self.dir(dir), name, 0)?;
        let fh = self.vfs.open(ino, OpenMode::default())?;
        let data = self.vfs.read(fh, 0, 1 << 20)?.to_vec();
        self.vfs.release(fh)?;
        assert_eq!(data.len() as u64, stat.size);
        Ok(data)
    }

    fn stored_keys(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        let c = Connection::open(self.world.join("mod_storage.sqlite")).unwrap();
        let mut stmt = c
            .prepare("SELECT key, value FROM entries WHERE modname = ?1 ORDER BY key")
            .unwrap();
        let rows = stmt
            .query_map([MOD], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap();
        rows.map(|r| r.unwrap()).collect()
    }

    fn stored_fields(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        let c = Connection::open(self.world.join("map.sqlite")).unwrap();
        let blob: Vec<u8> = c
            .query_row("SELECT data FROM blocks", [], |r| r.get(0))
            .unwrap();
        let block = decode_block(&blob).unwrap();
        block.metadata[0]
            .vars
            .iter()
            .map(|v| (v.key.clone(), v.value.clone()))
            .collect()
    }
}

const FIELDS: [&str; 6] = ["blocks", "0,0,0", "meta", "1,2,3", "fields", ""];

fn fields() -> &'static [&'static str] {
    &FIELDS[..5]
}

fn mods() -> &'static [&'static str] {
    &["mod_storage", MOD]
}

#[test]
fn temporary_looking_names_are_keys() {
    let fs = Fs::new();
    for dir in [mods(), fields()] {
        for name in ["settings.tmp", "notes.swp", "#draft#", ".hidden", "a.bak"] {
            fs.put(dir, name, b"kept\n").unwrap();
            assert!(fs.names(dir).contains(&name.to_string()), "{dir:?} {name}");
        }
    }
    let keys = fs.stored_keys();
    let fields = fs.stored_fields();
    for name in ["settings.tmp", "notes.swp", "#draft#", ".hidden", "a.bak"] {
        let want = (name.as_bytes().to_vec(), b"kept".to_vec());
        assert!(keys.contains(&want), "mod storage lacks {name}: {keys:?}");
        assert!(fields.contains(&want), "fields lack {name}");
    }
}

#[test]
fn tool_temporaries_store_when_renamed_over_a_key() {
    let fs = Fs::new();
    for dir in [mods(), fields()] {
        let parent = fs.dir(dir);
        // sed -i: sedXXXXXX, renamed over the key.
        fs.put(dir, "sedAb12Cd", b"by sed\n").unwrap();
        fs.vfs.rename(parent, "sedAb12Cd", parent, "data").unwrap();
        // rsync: .NAME.XXXXXX, renamed to a new key.
        fs.put(dir, ".fresh.Xa3k2P", b"by rsync\n").unwrap();
        fs.vfs
            .rename(parent, ".fresh.Xa3k2P", parent, "fresh")
            .unwrap();
        // vim: 4913 write test, swap file, then the backup dance.
        fs.put(dir, "4913", b"").unwrap();
        fs.vfs.unlink(parent, "4913").unwrap();
        fs.put(dir, ".fresh.swp", b"swap").unwrap();
        fs.vfs.rename(parent, "fresh", parent, "fresh~").unwrap();
        fs.put(dir, "fresh", b"by vim\n").unwrap();
        fs.vfs.unlink(parent, "fresh~").unwrap();
        fs.vfs.unlink(parent, ".fresh.swp").unwrap();
        let mut names = fs.names(dir);
        names.sort();
        assert!(
            !names
                .iter()
                .any(|n| n.starts_with("sed") || n.starts_with('.')),
            "{names:?}"
        );
        assert_eq!(fs.get(dir, "data").unwrap(), b"by sed\n");
        assert_eq!(fs.get(dir, "fresh").unwrap(), b"by vim\n");
    }
    // A temporary never renamed is not stored while mounted.
    fs.put(mods(), "sedZz99Zz", b"left behind\n").unwrap();
    for stored in [fs.stored_keys(), fs.stored_fields()] {
        let names: Vec<&[u8]> = stored.iter().map(|(k, _)| k.as_slice()).collect();
        assert!(names.contains(&&b"data"[..]) || names.contains(&&b"infotext"[..]));
        assert!(
            stored.contains(&(b"fresh".to_vec(), b"by vim".to_vec())),
            "{names:?}"
        );
        assert!(!names
            .iter()
            .any(|n| n.starts_with(b"sed") || n.starts_with(b".")));
    }
    // Still there at unmount, it was put there to stay (a key named like a temporary, from a
    // backup): it is stored under its own name.
    let left = fs.vfs.store_scratch();
    let outcome: Vec<(&str, bool)> = left
        .iter()
        .map(|l| (l.path.as_str(), l.stored.is_ok()))
        .collect();
    assert_eq!(outcome, [("mod_storage/mymod/sedZz99Zz", true)]);
    fs.vfs.sync().unwrap();
    let kept = (b"sedZz99Zz".to_vec(), b"left behind".to_vec());
    assert!(fs.stored_keys().contains(&kept), "{:?}", fs.stored_keys());
}

#[test]
fn long_keys_list_as_names_that_open() {
    let fs = Fs::new();
    let long = long_key();
    for (dir, value) in [(mods(), &b"long value"[..]), (fields(), &b"far away"[..])] {
        let names = fs.names(dir);
        assert_eq!(names.len(), 2, "{names:?}");
        let file = names
            .iter()
            .find(|n| n.starts_with("waypoints%2F"))
            .unwrap()
            .clone();
        assert!(file.len() <= NAME_MAX, "{} bytes", file.len());
        let mut want = value.to_vec();
        want.push(b'\n');
        assert_eq!(fs.get(dir, &file).unwrap(), want, "{dir:?}");
        // Change it in place, rename it short and back is not possible (a long form cannot
        // make a key), so: change, rename to a short key, and remove.
        fs.put(dir, &file, b"changed\n").unwrap();
        let parent = fs.dir(dir);
        let e = fs
            .vfs
            .create(parent, &file.replace("waypoints", "xaypoints"), 0o644);
        assert_eq!(
            e.err().unwrap().errno(),
            libc::EINVAL,
            "a long form makes no key"
        );
        fs.vfs.rename(parent, &file, parent, "short").unwrap();
        assert_eq!(fs.get(dir, "short").unwrap(), b"changed\n");
        fs.vfs.unlink(parent, "short").unwrap();
    }
    // A removal reaches the store a moment later, or at the unmount.
    assert_eq!(fs.vfs.commit_all(), 0);
    for stored in [fs.stored_keys(), fs.stored_fields()] {
        assert_eq!(stored.len(), 1, "{stored:?}");
        assert!(!stored.iter().any(|(k, _)| *k == long));
    }
}

#[test]
fn a_long_key_changes_and_is_removed_under_its_long_name() {
    let fs = Fs::new();
    for dir in [mods(), fields()] {
        let file = fs.names(dir).into_iter().find(|n| n.len() > 200).unwrap();
        fs.put(dir, &file, b"again\n").unwrap();
        assert_eq!(fs.get(dir, &file).unwrap(), b"again\n");
        fs.vfs.unlink(fs.dir(dir), &file).unwrap();
        assert!(fs.get(dir, &file).is_err());
    }
    assert_eq!(fs.vfs.commit_all(), 0);
    assert_eq!(fs.stored_keys().len(), 1);
    assert_eq!(fs.stored_fields().len(), 1);
}
