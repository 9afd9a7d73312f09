//! Issue "Nothing lost", point 12: a 50 MB bad token in `light.txt` was written to the log
//! twice (100 MB). A close through the core must fail with a short message that quotes an
//! excerpt of the token, logged once by the core and marked so the FUSE adapter does not log
//! it again.

use std::sync::{Arc, Mutex};

use worldfs::luanti::cache::new_block;
use worldfs::luanti::codec::encode_block;
use worldfs::luanti::store::map::pos_to_int;
use worldfs::luanti::tree::LuantiTree;
use worldfs::vfs::inodes::ROOT;
use worldfs::vfs::tree::Options;
use worldfs::vfs::{OpenMode, Vfs};

/// Every log record's level and length, and whether it mentions `light.txt`.
struct Capture(Mutex<Vec<(log::Level, usize, bool)>>);

impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }
    fn log(&self, record: &log::Record<'_>) {
        let text = record.args().to_string();
        if let Ok(mut v) = self.0.lock() {
            v.push((record.level(), text.len(), text.contains("light.txt")));
        }
    }
    fn flush(&self) {}
}

static CAPTURE: Capture = Capture(Mutex::new(Vec::new()));

#[test]
fn a_huge_bad_token_is_quoted_short_and_logged_once() {
    log::set_logger(&CAPTURE).unwrap();
    log::set_max_level(log::LevelFilter::Trace);
    let dir = tempfile::tempdir().unwrap();
    std::env::set_var("WORLDFS_STATE_DIR", dir.path().join("state"));
    let map = dir.path().join("map.sqlite");
    let conn = rusqlite::Connection::open(&map).unwrap();
    conn.execute("CREATE TABLE blocks (pos INT PRIMARY KEY, data BLOB)", [])
        .unwrap();
    let origin = worldfs::luanti::codec::block::BlockPos { x: 0, y: 0, z: 0 };
    conn.execute(
        "INSERT INTO blocks VALUES (?1, ?2)",
        rusqlite::params![pos_to_int(origin), encode_block(&new_block()).unwrap()],
    )
    .unwrap();
    let tree = LuantiTree::open(
        &map,
        &Options {
            read_only: false,
            cache_bytes: 1 << 20,
        },
    )
    .unwrap();
    let vfs = Vfs::new(Arc::new(tree), None);
    let (blocks, _) = vfs.lookup(ROOT, "blocks", 0).unwrap();
    let (block, _) = vfs.lookup(blocks, "0,0,0", 0).unwrap();
    let (light, _) = vfs.lookup(block, "light.txt", 0).unwrap();
    let fh = vfs
        .open(
            light,
            OpenMode {
                write: true,
                truncate: true,
                append: false,
            },
        )
        .unwrap();
    let mut text = b"# y = 0\n".to_vec();
    text.extend(vec![b'z'; 50 << 20]);
    text.push(b'\n');
    vfs.write(fh, 0, &text, false).unwrap();
    let e = vfs.flush(fh).unwrap_err();
    assert_eq!(e.errno(), libc::EINVAL);
    assert!(
        e.message().len() < 300,
        "message of {} bytes",
        e.message().len()
    );
    assert!(
        e.message().contains(&format!("`{}…`", "z".repeat(80))),
        "{}",
        e.message()
    );
    assert!(
        e.is_logged(),
        "the core logged it: the adapter must not log it again"
    );
    let records = CAPTURE.0.lock().unwrap().clone();
    let about: Vec<_> = records.iter().filter(|r| r.2).collect();
    assert_eq!(about.len(), 1, "logged once: {records:?}");
    assert!(
        about[0].0 <= log::Level::Warn && about[0].1 < 400,
        "{about:?}"
    );
}
