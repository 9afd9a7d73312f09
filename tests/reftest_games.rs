//! A reference model of the core over the real tree of each game (a Luanti world folder, a
//! Survivalcraft region world, a Terrarum TVDA disk), as `src/vfs/reftest.rs` is over a tree
//! in memory: random sequences of what editors and tools do to one decoded file — saves
//! with good and bad text, `sed -i` (a temporary renamed over it), `install` (unlink, then
//! create), `rm` of a failed text,
//! `fsync`, unmount and mount again — and after every step the file shows what the model
//! says to another process, and after every `fsync` (Luanti, Survivalcraft) and unmount a
//! fresh read-only look at the store shows the last text a close took. A crash runs the
//! steps before it in a child process, killed (SIGKILL) with its core and the tree's writer
//! threads as they are; the store then loads and holds the text of the last `fsync` or of a
//! close after it, never an older one nor anything else, and the sequence goes on in a new
//! mount. (The kill sweeps of the mount tests kill real daemons at any moment.)
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
    /// The daemon killed (SIGKILL), then mounted again.
    Crash,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        any::<bool>().prop_map(Step::Save),
        any::<bool>().prop_map(Step::Sed),
        any::<bool>().prop_map(Step::Install),
        Just(Step::DropFailed),
        Just(Step::Fsync),
        Just(Step::Remount),
        Just(Step::Crash),
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

/// Runs the sequence; the steps up to each crash run in a child process that is killed.
fn run(f: &Fixture, steps: &[Step]) -> Result<(), TestCaseError> {
    let mut start = 0;
    while let Some(at) = steps[start..].iter().position(|s| matches!(s, Step::Crash)) {
        let crash = start + at;
        let kept = killed_after(f, &steps[start..crash], start)?;
        let now = in_store(f);
        prop_assert!(
            kept.contains(&now),
            "{}: after the crash at step {} the store holds neither the last fsynced text nor one a close took after it",
            f.name,
            crash
        );
        start = crash + 1;
    }
    let (vfs, kept) = run_steps(f, &steps[start..], start)?;
    vfs.commit_all();
    vfs.sync().expect("syncs");
    drop(vfs);
    let committed = kept.last().expect("the text of the mount at least");
    prop_assert!(
        same(&in_store(f), committed),
        "{}: store at the end",
        f.name
    );
    Ok(())
}

/// Runs `steps` (the first numbered `offset`) in a child process on the store as it is, and
/// kills it (SIGKILL) once they are done, its core alive; what a crash may leave: the text
/// of the last `fsync` (or of the mount) and those closes took after it.
fn killed_after(f: &Fixture, steps: &[Step], offset: usize) -> Result<Vec<String>, TestCaseError> {
    use nix::sys::signal::{kill, Signal};
    use nix::sys::wait::waitpid;
    use nix::unistd::{fork, ForkResult};
    let report = tempfile::tempdir().expect("a folder for the child's report");
    let done = report.path().join("done");
    // SAFETY: the child runs only this test's code (no lock another thread of the harness
    // holds is taken: no printing, allocation is fork-safe) and never returns.
    match unsafe { fork() }.expect("forks") {
        ForkResult::Child => {
            let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                run_steps(f, steps, offset)
            }));
            let (text, _vfs) = match ran {
                Ok(Ok((vfs, kept))) => (encode(&kept), Some(vfs)),
                Ok(Err(e)) => (format!("FAIL {e}"), None),
                Err(_) => ("FAIL the child panicked".to_string(), None),
            };
            let tmp = report.path().join("tmp");
            let _ = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, &done));
            // Killed here by the parent, the core and its threads as they are.
            loop {
                std::thread::sleep(std::time::Duration::from_secs(1));
            }
        }
        ForkResult::Parent { child } => {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
            while !done.exists() && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            kill(child, Signal::SIGKILL).expect("kills the child");
            waitpid(child, None).expect("waits for the child");
            let text =
                std::fs::read_to_string(&done).unwrap_or_else(|_| "FAIL no report in 120 s".into());
            if let Some(failure) = text.strip_prefix("FAIL ") {
                return Err(TestCaseError::fail(format!(
                    "{}: in the killed child: {failure}",
                    f.name
                )));
            }
            Ok(decode(&text))
        }
    }
}

/// Texts as `LEN\nTEXT` records.
fn encode(texts: &[String]) -> String {
    texts.iter().map(|t| format!("{}\n{t}", t.len())).collect()
}

fn decode(mut s: &str) -> Vec<String> {
    let mut out = Vec::new();
    while let Some((len, rest)) = s.split_once('\n') {
        let len: usize = len.parse().expect("a length");
        out.push(rest[..len].to_string());
        s = &rest[len..];
    }
    out
}

/// Runs `steps` (the first numbered `offset`) on a new mount of the store; the core, and the
/// texts a crash may leave after them (see [`killed_after`]), the last the one the last
/// good close took.
fn run_steps(
    f: &Fixture,
    steps: &[Step],
    offset: usize,
) -> Result<(Vfs, Vec<String>), TestCaseError> {
    let path = f.path();
    let mut vfs = f.vfs(false);
    // The model: the text the last good close took, and the text of a failed one.
    let mut committed = cat(&vfs, &path);
    let mut failed: Option<String> = None;
    // What a crash may leave: the text of the last fsync and those taken since.
    let mut kept = vec![committed.clone()];
    for (i, s) in steps.iter().enumerate() {
        let i = offset + i;
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
                    kept.push(text.clone());
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
                kept = vec![committed.clone()];
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
                kept = vec![committed.clone()];
            }
            Step::Crash => unreachable!("a crash ends a run of steps"),
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
    Ok((vfs, kept))
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
