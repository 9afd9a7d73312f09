//! Auth: the auth.txt view of auth.sqlite (both schemas) and of the real auth.txt, edited and
//! applied; the real engine (minetest-server 5.6.1) reads back what worldfs wrote.

#[allow(dead_code)]
mod common;

use worldfs::luanti::store::auth::AuthBackend;
use worldfs::luanti::store::auth::{read_auth_file, AuthStore};
use worldfs::luanti::store::auth_files::FilesAuth;
use worldfs::luanti::store::auth_sqlite::SqliteAuth;
use worldfs::luanti::store::world_mt::WorldMt;

use common::engine::{migrate_copy, mkworld_with};
use common::samples;

fn sorted_lines(text: &[u8]) -> Vec<String> {
    let mut lines: Vec<String> = String::from_utf8(text.to_vec())
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    lines.sort();
    lines
}

#[test]
fn sample_auth_sqlite_renders_and_applies_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("auth.sqlite");
    std::fs::copy(samples::path(samples::MTDB_AUTH), &db).unwrap();
    let before = std::fs::read(&db).unwrap();
    let mut store = AuthStore::new(SqliteAuth::open(&db, false).unwrap());
    let entries = store.entries().unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0].name, "singleplayer");
    assert_eq!(entries[0].privileges.len(), 24);
    assert!(entries[0]
        .password
        .starts_with("#1#6boG7fd11ZF4RfJnLDnL6A#"));
    assert_eq!(entries[0].last_login, 1644236928);
    assert_eq!(
        entries[1].to_line().split(':').nth(2),
        Some("interact,shout")
    );
    let view = store.render().unwrap();
    assert_eq!(view.iter().filter(|&&b| b == b'\n').count(), 2);
    // Applying the unchanged view changes nothing, not even the file's bytes.
    assert!(store.apply(&view).unwrap().is_empty());
    drop(store);
    assert_eq!(std::fs::read(&db).unwrap(), before);
}

#[test]
fn sample_auth_txt_round_trips() {
    let text = std::fs::read(samples::path(samples::MESECONS_AUTH_TXT)).unwrap();
    let entries = read_auth_file(&text).unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].password, "");
    assert_eq!(entries[0].privileges.len(), 15);
    assert_eq!(entries[0].last_login, 1489488299);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("auth.txt");
    std::fs::write(&path, &text).unwrap();
    let mut store = AuthStore::new(FilesAuth::new(&path));
    assert_eq!(
        store.render().unwrap(),
        text,
        "the view differs from the engine's file"
    );
    assert!(store.apply(&text).unwrap().is_empty());
    let duplicate = [text.as_slice(), text.as_slice()].concat();
    assert!(
        store.apply(&duplicate).is_err(),
        "duplicate player accepted"
    );
    assert_eq!(std::fs::read(&path).unwrap(), text);
}

#[test]
fn edits_reach_the_old_schema_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("auth.sqlite");
    std::fs::copy(samples::path(samples::MTDB_AUTH), &db).unwrap();
    let mut store = AuthStore::new(SqliteAuth::open(&db, false).unwrap());
    let view = String::from_utf8(store.render().unwrap()).unwrap();
    let singleplayer = view.lines().next().unwrap().to_string();
    let edited = format!("{singleplayer}\nnewbie:#1#abc#def:interact:0\n")
        .replace(":1644236928", ":1700000000");
    let changes = store.apply(edited.as_bytes()).unwrap();
    assert_eq!(changes.added, ["newbie"]);
    assert_eq!(changes.removed, ["test"]);
    assert_eq!(changes.changed, ["singleplayer"]);
    let after = store.entries().unwrap();
    assert_eq!(after.len(), 2);
    assert_eq!(after[0].name, "newbie");
    assert_eq!(after[1].last_login, 1700000000);
    assert_eq!(after[1].privileges.len(), 24);
    drop(store);
    let conn = rusqlite::Connection::open(&db).unwrap();
    let orphans: i64 = conn
        .query_row(
            "SELECT count(*) FROM user_privileges WHERE id NOT IN (SELECT id FROM auth)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(orphans, 0, "privileges of the removed player are left");
}

#[test]
fn bad_auth_text_fails_and_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("auth.sqlite");
    std::fs::copy(samples::path(samples::MTDB_AUTH), &db).unwrap();
    let before = std::fs::read(&db).unwrap();
    let mut store = AuthStore::new(SqliteAuth::open(&db, false).unwrap());
    let view = String::from_utf8(store.render().unwrap()).unwrap();
    let cases = [
        (
            format!("{view}test::shout:0\n"),
            "line 3, column 1: player \"test\" appears twice",
        ),
        (view.replace("interact,shout", "interact, shout"), "line 2,"),
        (view.replace(":1649603232", ":yesterday"), "line 2,"),
        (format!("{view}lonely\n"), "line 3,"),
        (
            view.replace("interact,shout", "interact,shout,interact"),
            "appears twice",
        ),
    ];
    for (text, expected) in &cases {
        let e = store.apply(text.as_bytes()).unwrap_err();
        assert_eq!(e.errno(), libc::EINVAL);
        assert!(
            e.message().contains(expected),
            "expected {expected:?} in {e}"
        );
    }
    drop(store);
    assert_eq!(std::fs::read(&db).unwrap(), before, "the database changed");
}

#[test]
fn engine_reads_privileges_saved_into_auth_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let world = mkworld_with(dir.path(), "w", "sqlite3", "sqlite3");
    let mt = WorldMt::read(&world).unwrap();
    let mut store = AuthStore::open(&world, &mt, false).unwrap();
    assert_eq!(store.backend(), "sqlite3");
    let view = String::from_utf8(store.render().unwrap()).unwrap();
    assert_eq!(
        view,
        "celeron55::interact,shout:0\nfoo:iEPX+SQWIR3p67lj/0zigSWTKHg:shout:0\n"
    );
    let edited = view.replace(
        "celeron55::interact,shout:0",
        "celeron55::fly,interact,shout,teleport:0",
    ) + "admin:#1#c2FsdA#dmVyaWZpZXI:privs,server:1700000000\n";
    let changes = store.apply(edited.as_bytes()).unwrap();
    assert_eq!((changes.added.len(), changes.changed.len()), (1, 1));
    let shown = store.render().unwrap();
    drop(store);

    let copy = dir.path().join("copy");
    migrate_copy(&world, &copy, "auth", "files");
    let written = std::fs::read(copy.join("auth.txt")).unwrap();
    assert_eq!(sorted_lines(&written), sorted_lines(&shown));
    assert_eq!(sorted_lines(&written), sorted_lines(edited.as_bytes()));
}

#[test]
fn engine_reads_an_auth_txt_saved_by_the_files_store() {
    let dir = tempfile::tempdir().unwrap();
    let world = mkworld_with(dir.path(), "w", "files", "files");
    let mt = WorldMt::read(&world).unwrap();
    let mut store = AuthStore::open(&world, &mt, false).unwrap();
    assert_eq!(store.backend(), "files");
    let view = String::from_utf8(store.render().unwrap()).unwrap();
    // The engine skips "bar::" (two fields once the empty last one is dropped); so does worldfs.
    assert_eq!(
        view,
        "celeron55::interact,shout:0\nfoo:iEPX+SQWIR3p67lj/0zigSWTKHg:shout:0\n"
    );
    let edited = view.replace("foo:iEPX+SQWIR3p67lj/0zigSWTKHg:shout:0\n", "")
        + "bar:::0\nzed::give,interact:42\n";
    let changes = store.apply(edited.as_bytes()).unwrap();
    assert_eq!(changes.removed, ["foo"]);
    assert_eq!(changes.added, ["bar", "zed"]);
    drop(store);

    let copy = dir.path().join("copy");
    migrate_copy(&world, &copy, "auth", "sqlite3");
    let engine = SqliteAuth::open(&copy.join("auth.sqlite"), true).unwrap();
    let lines: Vec<String> = engine
        .entries()
        .unwrap()
        .iter()
        .map(|e| e.to_line())
        .collect();
    assert_eq!(
        lines,
        [
            "bar:::0",
            "celeron55::interact,shout:0",
            "zed::give,interact:42"
        ]
    );
}
