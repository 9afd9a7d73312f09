//! A reference model of the core over the real tree of each game (a Luanti world folder, a
//! Survivalcraft region world, a Terrarum TVDA disk), as `src/vfs/reftest.rs` is over a tree
//! in memory: random sequences of what editors and tools do to one decoded file — saves
//! with good and bad text, `sed -i` (a temporary renamed over it), `install` (unlink, then
//! create), `rm` of a failed text,
//! `fsync`, unmount and mount again — and after every step the file shows what the model
//! says to another process, and after every `fsync` (Luanti, Survivalcraft) and unmount a
//! fresh read-only look at the store shows the last text a close took. Crashes are the kill sweeps' (mount tests 17, 18,
//! 82, 84, 86): a core dropped in-process keeps its tree's writer threads.
//!
//! `PROPTEST_CASES=200 cargo test --release --test reftest_games` runs more sequences.

#[allow(dead_code)]
mod common;

use common::fixtures::{fixtures, Fixture};
use proptest::prelude::*;
use worldfs::vfs::inodes::ROOT;
use worldfs::vfs::{OpenMode, Vfs};
use worldfs::worlds::Game;

/// The process making the changes, and the one looking.
const TOOL: u32 = 4242;
const OTHER: u32 = 4343;
/// `sed -i`'s temporary.
const SED_TEMP: &str = "sedAb12Cd";

const TRUNC: OpenMode = OpenMode {
    write: true,
    truncate: true,
    append: false,
};

#[derive(Debug, Clone)]
enum Step {
    /// Save the file with a good or a bad edit of it.
    Save(bool),
    /// `sed -i`: a temporary written and renamed over the file.
    Sed(bool),
    /// `install` (and `cp --remove-destination`): the file unlinked, then created with a good
    /// or a bad edit; a bad one leaves the stored file as it was.
    Install(bool),
    /// `rm` of the file while it holds text a close did not take.
    DropFailed,
    /// `fsync`: what closes took reaches the store.
    Fsync,
    /// Unmount and mount again.
    Remount,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        any::<bool>().prop_map(Step::Save),
        any::<bool>().prop_map(Step::Sed),
        any::<bool>().prop_map(Step::Install),
        Just(Step::DropFailed),
        Just(Step::Fsync),
        Just(Step::Remount),
    ]
}

fn ino(vfs: &Vfs, path: &[String], pid: u32) -> worldfs::error::Result<u64> {
    path.iter()
        .try_fold(ROOT, |ino, name| Ok(vfs.lookup(ino, name, pid)?.0))
}

/// What another process reads at `path`.
fn cat(vfs: &Vfs, path: &[String]) -> String {
    let fh = vfs
        .open(
            ino(vfs, path, OTHER).expect("looks up"),
            OpenMode::default(),
        )
        .expect("opens");
    let data = vfs.read(fh, 0, u32::MAX).expect("reads").to_vec();
    vfs.release(fh).expect("releases");
    String::from_utf8(data).expect("text")
}

/// `open(O_CREAT | O_TRUNC)`, one write, `close()`, as `cp` and editors save: the file is
/// opened when the tool's own lookup finds it, else created. Whether the close took it.
fn save(vfs: &Vfs, f: &Fixture, text: &str) -> bool {
    let dir = ino(vfs, &f.dir, TOOL).expect("the folder");
    let opened = match vfs.lookup(dir, &f.file, TOOL) {
        Ok((file, _)) => vfs.open(file, TRUNC),
        Err(_) => vfs.create(dir, &f.file, 0o644).map(|(_, _, fh)| fh),
    };
    let Ok(fh) = opened else {
        return false;
    };
    let written = vfs.write(fh, 0, text.as_bytes(), false).is_ok();
    let flushed = vfs.flush(fh).is_ok();
    let released = vfs.release(fh).is_ok();
    written && flushed && released
}

/// `sed -i`: the new text in a temporary of the file's folder, renamed over the file; a
/// refused rename leaves the temporary, which sed's user removes.
fn sed(vfs: &Vfs, f: &Fixture, text: &str) -> bool {
    let dir = ino(vfs, &f.dir, TOOL).expect("the folder");
    let (_, _, fh) = vfs
        .create(dir, SED_TEMP, 0o600)
        .expect("creates the temporary");
    vfs.write(fh, 0, text.as_bytes(), false).expect("writes");
    vfs.release(fh).expect("closes the temporary");
    let renamed = vfs.rename(dir, SED_TEMP, dir, &f.file).is_ok();
    let _ = vfs.unlink_as(dir, SED_TEMP, TOOL);
    renamed
}

/// `install`: the file unlinked (whatever that answers), then created and written.
fn install(vfs: &Vfs, f: &Fixture, text: &str) -> bool {
    let dir = ino(vfs, &f.dir, TOOL).expect("the folder");
    let _ = vfs.unlink_as(dir, &f.file, TOOL);
    save(vfs, f, text)
}

/// The file as a fresh read-only look at the store shows it.
fn in_store(f: &Fixture) -> String {
    cat(&f.vfs(true), &f.path())
}

/// Whether `got` is `expected`; if not, says where they first differ (the texts are long).
fn same(got: &str, expected: &str) -> bool {
    let differ = got
        .lines()
        .zip(expected.lines())
        .enumerate()
        .find(|(_, (g, e))| g != e);
    match differ {
        Some((n, (g, e))) => eprintln!("line {}: got {g:?}, expected {e:?}", n + 1),
        None if got != expected => eprintln!("lengths {} and {}", got.len(), expected.len()),
        None => return true,
    }
    false
}

fn run(f: &Fixture, steps: &[Step]) -> Result<(), TestCaseError> {
    let path = f.path();
    let mut vfs = f.vfs(false);
    // The model: the text the last good close took, and the text of a failed one.
    let mut committed = cat(&vfs, &path);
    let mut failed: Option<String> = None;
    for (i, s) in steps.iter().enumerate() {
        match *s {
            Step::Save(good) | Step::Sed(good) | Step::Install(good) => {
                let text = if good {
                    (f.good)(&committed)
                } else {
                    (f.bad)(failed.as_ref().unwrap_or(&committed))
                };
                let took = match s {
                    Step::Save(_) => save(&vfs, f, &text),
                    Step::Sed(_) => sed(&vfs, f, &text),
                    _ => install(&vfs, f, &text),
                };
                prop_assert_eq!(took, good, "{}: step {} {:?}", f.name, i, s);
                if good {
                    committed = text;
                    failed = None;
                } else {
                    failed = Some(text);
                }
            }
            Step::DropFailed => {
                if failed.take().is_none() {
                    continue;
                }
                let dir = ino(&vfs, &f.dir, TOOL).expect("the folder");
                prop_assert!(
                    vfs.unlink_as(dir, &f.file, TOOL).is_ok(),
                    "{}: rm of failed text",
                    f.name
                );
            }
            Step::Fsync => {
                vfs.sync().expect("syncs");
                // A TVDA disk mounted read-write refuses a second open (its store is looked
                // at after the unmount); the other stores allow a read-only look beside.
                if f.game != Game::Tvda {
                    prop_assert!(
                        same(&in_store(f), &committed),
                        "{}: store after fsync, step {}",
                        f.name,
                        i
                    );
                }
            }
            Step::Remount => {
                vfs.commit_all();
                vfs.sync().expect("syncs");
                drop(vfs);
                prop_assert!(
                    same(&in_store(f), &committed),
                    "{}: store after unmount, step {}",
                    f.name,
                    i
                );
                vfs = f.vfs(false);
                failed = None;
            }
        }
        let shown = failed.as_ref().unwrap_or(&committed);
        prop_assert!(
            same(&cat(&vfs, &path), shown),
            "{}: shown after step {} {:?}",
            f.name,
            i,
            s
        );
    }
    vfs.commit_all();
    vfs.sync().expect("syncs");
    drop(vfs);
    prop_assert!(
        same(&in_store(f), &committed),
        "{}: store at the end",
        f.name
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn each_game_tree_keeps_and_shows_what_the_model_says(steps in prop::collection::vec(step(), 1..14)) {
        for f in fixtures() {
            run(&f, &steps)?;
        }
    }
}
