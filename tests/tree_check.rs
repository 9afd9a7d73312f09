//! `Tree::check` parses a file's new content as its write does and stores nothing, in every
//! game's tree; and through the core over a real tree, a lone truncating close reports the
//! error its commit meets, and removing a file whose commit failed keeps the stored object.

#[allow(dead_code)]
mod common;

use std::path::Path;
use std::sync::Arc;

use common::samples;
use common::scratch::copy_into as copy;

use worldfs::vfs::inodes::ROOT;
use worldfs::vfs::{Entry, OpenMode, Tree, Vfs};
use worldfs::worlds::{self, Game};

fn open(source: &Path, game: Game) -> Arc<dyn Tree> {
    worlds::open(source, game, false, 1 << 20).unwrap()
}

fn p(path: &str) -> Vec<String> {
    path.split('/').map(String::from).collect()
}

/// The first entry of folder `dir`.
fn first(tree: &dyn Tree, dir: &str) -> String {
    let mut name = None;
    tree.list(&p(dir), 0, &mut |e: Entry| {
        name = Some(e.name);
        false
    })
    .unwrap();
    format!("{dir}/{}", name.unwrap())
}

/// `check` accepts the file's own text, refuses `bad` with `EINVAL`, and stores nothing.
fn checks(tree: &dyn Tree, path: &str, bad: &[u8]) {
    let before = tree.read(&p(path)).unwrap();
    tree.check(&p(path), &before)
        .unwrap_or_else(|e| panic!("{path}: its own text refused: {e}"));
    let e = tree.check(&p(path), bad).unwrap_err();
    assert_eq!(e.errno(), libc::EINVAL, "{path}: {e}");
    assert_eq!(tree.read(&p(path)).unwrap(), before, "{path} changed");
}

fn sha(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

#[test]
fn luanti_checks_parse_without_storing() {
    let tmp = tempfile::tempdir().unwrap();
    let world = copy(&samples::path(samples::MESECONS_WORLD), tmp.path());
    let map = sha(&world.join("map.sqlite"));
    let tree = open(&world, Game::Luanti);
    checks(&*tree, "players/singleplayer", b"hp = twenty\n");
    checks(&*tree, "auth.txt", b"singleplayer:x\n");
    let block = first(&*tree, "blocks");
    checks(&*tree, &format!("{block}/nodes.cubeset"), b"");
    checks(&*tree, &format!("{block}/timers.txt"), b"1,16,1 5 0\n");
    tree.check(&p("env_meta.txt"), b"").unwrap();
    assert_eq!(sha(&world.join("map.sqlite")), map, "map.sqlite changed");
}

#[test]
fn survivalcraft_terrarum_and_tevd_checks_parse_without_storing() {
    let tmp = tempfile::tempdir().unwrap();
    let sc = copy(&samples::path(samples::SC_REGION_WORLD), tmp.path());
    let tree = open(&sc, Game::Survivalcraft);
    let chunk = first(&*tree, "chunks");
    checks(&*tree, &format!("{chunk}/blocks.cubeset"), b"");
    checks(&*tree, "Project.xml", b"<Project");

    let disk = copy(&samples::path(samples::TVDA_WORLD), tmp.path());
    let before = sha(&disk);
    let tree = open(&disk, Game::Tvda);
    checks(&*tree, "savegameinfo.json", b"{oops");
    checks(&*tree, &first(&*tree, "chunks/terrain"), b"");
    tree.check(&p("entries/12345"), b"any bytes").unwrap();
    drop(tree);
    assert_eq!(sha(&disk), before, "the disk changed");

    let tevd = copy(&samples::path(samples::TEVD_V3), tmp.path());
    let tree = open(&tevd, Game::Tevd);
    tree.check(&p("NEW.TXT"), b"any bytes").unwrap();
    tree.check(&p("AUTOEXEC.BAT"), b"").unwrap();
    assert_eq!(
        tree.check(&p("tvdos"), b"").unwrap_err().errno(),
        libc::EISDIR
    );
}

#[test]
fn through_the_core_rm_of_a_failed_player_edit_keeps_the_player() {
    let tmp = tempfile::tempdir().unwrap();
    let world = copy(&samples::path(samples::MESECONS_WORLD), tmp.path());
    let stored = sha(&world.join("players/singleplayer"));
    let vfs = Vfs::new(open(&world, Game::Luanti), None);
    let players = vfs.lookup(ROOT, "players", 1).unwrap().0;
    let (ino, stat) = vfs.lookup(players, "singleplayer", 1).unwrap();
    let trunc = OpenMode {
        write: true,
        truncate: true,
        append: false,
    };
    // open(O_TRUNC); close(): the close fails, as the commit of an empty player will.
    let fh = vfs.open(ino, trunc).unwrap();
    assert_eq!(vfs.flush(fh).unwrap_err().errno(), libc::EINVAL);
    vfs.release(fh).unwrap_err();
    // rm discards the pending text; the stored player shows again; a second rm deletes it.
    vfs.unlink(players, "singleplayer").unwrap();
    assert_eq!(sha(&world.join("players/singleplayer")), stored);
    let (_, again) = vfs.lookup(players, "singleplayer", 1).unwrap();
    assert_eq!(again.size, stat.size);
    vfs.unlink(players, "singleplayer").unwrap();
    // A removal reaches the store a moment later, or at the unmount.
    assert_eq!(vfs.commit_all(), 0);
    assert!(!world.join("players/singleplayer").exists());
}
