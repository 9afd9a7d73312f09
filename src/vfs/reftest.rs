//! Tests only: a reference model of what the core keeps and shows, run against the core on
//! random sequences of the calls tools make (as mountpoint-s3's `reftests/` do).
//!
//! The sequences save files with good or bad text (opening an existing file with `O_TRUNC`
//! or creating a new one, as the process's own lookup finds it), remove them, replace them
//! as `install` does (unlink, then create), and let time pass (held-back removals reach the
//! store) or unmount. After every step the store holds exactly what the model says, and
//! another process sees at each name what the model says it shows: the last text a close
//! took, the text of a failed close until it is removed, or nothing. So no sequence loses a
//! stored object to a failed save, and no removal or failed text leaks into the store.
//!
//! Saves are made by the mount's user or by another user of an `--allow-other` mount (who
//! the adapter makes the owner of what it creates): text a close did not take shows its
//! creator as owner, a stored object the tree's. Folders are made and removed (`mkdir`,
//! `rmdir`), and files saved and removed in them.

use std::collections::BTreeMap;
use std::time::Duration;

use proptest::prelude::*;

use crate::error::lock;
use crate::vfs::core::Vfs;
use crate::vfs::paths::OpenMode;
use crate::vfs::test_tree::{dir_ino, setup, Files};
use crate::vfs::tree::Owner;

/// The object names the sequences use (`d/f` is stored at the start).
const NAMES: [&str; 3] = ["f", "g", "h"];
/// The process making the changes, and the one looking.
const TOOL: u32 = 7;
const OTHER: u32 = 99;
/// A third process editing files in place (`dd`, `truncate`, `touch`): not the one whose
/// `rm` of failed text hides the stored object from it until it writes the name.
const EDITOR: u32 = 8;
/// The other user of an `--allow-other` mount.
const STRANGER: Owner = Owner {
    uid: 1001,
    gid: 1001,
};
/// The folders the sequences make in `d` (each may hold a file `x` besides its fixed file).
const DIRS: [&str; 2] = ["s", "t"];

#[derive(Debug, Clone)]
enum Step {
    /// Write a text into the name, as the mount's user or (`true`) another user: good texts
    /// commit, bad ones fail their close.
    Save(usize, bool, bool),
    /// The same with a text past what a buffer keeps in memory (it goes to a file).
    SaveLarge(usize, bool),
    /// `rm`.
    Remove(usize),
    /// `install`: unlink (if there), then create, write, close.
    Replace(usize, bool),
    /// `sed -i`: a temporary written and renamed over the name (only where the name shows).
    Sed(usize, bool),
    /// `mv a b` of a stored name (not one holding failed text).
    Rename(usize, usize),
    /// `rm f; exec 3>f; rm f; exec 3>&-`: a file created in the place of a removal and
    /// removed before it was written.
    CreateRemove(usize),
    /// `fsync` of any file: held-back removals reach the store.
    Fsync,
    /// `rm a`, then a new `a` written and renamed to `b` before it is closed.
    CreateRenameAway(usize, usize),
    /// Time passes: removals held back reach the store.
    Wait,
    /// The unmount's commit of everything.
    Unmount,
    /// `dd conv=notrunc seek=OFFSET`: a text written into a shown file at an offset.
    WriteAt(usize, usize, bool),
    /// `truncate -s LEN`: an open without `O_TRUNC`, then `ftruncate`.
    Truncate(usize, usize),
    /// `touch -d`: a time set on a shown name, which it then shows.
    SetTime(usize, u64),
    /// `chmod`: text a close did not take shows the mode it is given, a stored object keeps
    /// the tree's.
    Chmod(usize, u16),
    /// Unmount and mount again: text no commit took is saved for recovery, not shown.
    Remount,
    /// The daemon dropped without unmount (SIGKILL), then mounted again: what closes
    /// committed stays, removals held back and text no commit took are gone.
    Crash,
    /// `mkdir d/DIR`.
    Mkdir(usize),
    /// `rmdir d/DIR`: held-back removals below it are done first; failed text or a stored
    /// file in it keeps it.
    Rmdir(usize),
    /// A save of `d/DIR/x`, as in `Save`.
    SaveIn(usize, bool, bool),
    /// `rm d/DIR/x`.
    RemoveIn(usize),
    /// `mv d/DIR d/OTHER` of a made folder, over nothing or an empty folder.
    RenameDir(usize, usize),
    /// `mv d e` of the tree's own folder, which it cannot move: refused, and nothing changes
    /// but the removals held back below it, done first as for any folder moved.
    RenameRoot,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0..NAMES.len(), any::<bool>(), any::<bool>()).prop_map(|(n, g, o)| Step::Save(n, g, o)),
        (0..NAMES.len(), any::<bool>()).prop_map(|(n, g)| Step::SaveLarge(n, g)),
        (0..NAMES.len()).prop_map(Step::Remove),
        (0..NAMES.len(), any::<bool>()).prop_map(|(n, g)| Step::Replace(n, g)),
        (0..NAMES.len(), any::<bool>()).prop_map(|(n, g)| Step::Sed(n, g)),
        (0..NAMES.len(), 0..NAMES.len()).prop_map(|(a, b)| Step::Rename(a, b)),
        (0..NAMES.len()).prop_map(Step::CreateRemove),
        Just(Step::Fsync),
        (0..NAMES.len(), 0..NAMES.len()).prop_map(|(a, b)| Step::CreateRenameAway(a, b)),
        Just(Step::Wait),
        Just(Step::Unmount),
        (0..NAMES.len(), 0..8usize, any::<bool>()).prop_map(|(n, o, g)| Step::WriteAt(n, o, g)),
        (0..NAMES.len(), 0..12usize).prop_map(|(n, l)| Step::Truncate(n, l)),
        (0..NAMES.len(), 1..4u64).prop_map(|(n, t)| Step::SetTime(n, t)),
        (
            0..NAMES.len(),
            prop::sample::select(vec![0o600u16, 0o640, 0o755])
        )
            .prop_map(|(n, m)| Step::Chmod(n, m)),
        Just(Step::Remount),
        Just(Step::Crash),
        (0..DIRS.len()).prop_map(Step::Mkdir),
        (0..DIRS.len()).prop_map(Step::Rmdir),
        (0..DIRS.len(), any::<bool>(), any::<bool>()).prop_map(|(k, g, o)| Step::SaveIn(k, g, o)),
        (0..DIRS.len()).prop_map(Step::RemoveIn),
        (0..DIRS.len(), 0..DIRS.len()).prop_map(|(a, b)| Step::RenameDir(a, b)),
        Just(Step::RenameRoot),
    ]
}

/// What the model holds: the store, the text of failed closes (and the owner of those
/// another user created), the removals held back, the folders made.
#[derive(Default)]
struct Model {
    stored: BTreeMap<String, Vec<u8>>,
    failed: BTreeMap<String, Vec<u8>>,
    owners: BTreeMap<String, u32>,
    removing: Vec<String>,
    dirs: Vec<String>,
}

impl Model {
    /// What another process reads at `name`.
    fn shown(&self, name: &str) -> Option<&Vec<u8>> {
        self.failed.get(name).or_else(|| {
            (!self.removing.iter().any(|r| r == name))
                .then(|| self.stored.get(name))
                .flatten()
        })
    }

    /// A close of `text` at `name`: taken (it replaces whatever was there) or held.
    fn close(&mut self, name: &str, text: Vec<u8>) -> bool {
        self.removing.retain(|r| r != name);
        if text.starts_with(b"ok") {
            self.failed.remove(name);
            self.owners.remove(name);
            self.stored.insert(name.to_string(), text);
            true
        } else {
            self.failed.insert(name.to_string(), text);
            false
        }
    }

    /// `rm`: discards failed text, else holds back the stored object's removal.
    fn remove(&mut self, name: &str) -> bool {
        if self.failed.remove(name).is_some() {
            self.owners.remove(name);
            return true;
        }
        if self.shown(name).is_none() {
            return false;
        }
        self.removing.push(name.to_string());
        true
    }

    /// `mv a b` of a stored object: what was removed at `b` is removed first, failed text
    /// at `b` is dropped, and `b` holds what `a` held.
    fn rename(&mut self, a: &str, b: &str) -> bool {
        if self.shown(a).is_none() {
            return false;
        }
        if a == b {
            return true;
        }
        self.failed.remove(b);
        self.owners.remove(b);
        if self.removing.iter().any(|r| r == b) {
            self.removing.retain(|r| r != b);
            self.stored.remove(b);
        }
        if let Some(text) = self.stored.remove(a) {
            self.stored.insert(b.to_string(), text);
        }
        true
    }

    /// What an open of `name` for writing (without `O_TRUNC`) starts from, changed by
    /// `edit`, then closed.
    fn edit(&mut self, name: &str, edit: impl FnOnce(&mut Vec<u8>)) -> Option<bool> {
        let mut text = self.shown(name)?.clone();
        edit(&mut text);
        Some(self.close(name, text))
    }

    /// A remount (or a crash): held text is shown no more; a crash also loses the removals
    /// held back (their objects stay).
    fn remount(&mut self, crash: bool) {
        if crash {
            self.removing.clear();
        } else {
            self.removals_done();
        }
        self.failed.clear();
        self.owners.clear();
    }

    fn removals_done(&mut self) {
        self.removals_done_below("");
    }

    /// The removals held back whose names start with `prefix` reach the store.
    fn removals_done_below(&mut self, prefix: &str) {
        let (due, kept) = std::mem::take(&mut self.removing)
            .into_iter()
            .partition(|n| n.starts_with(prefix));
        self.removing = kept;
        for name in due {
            self.stored.remove(&name);
        }
    }

    /// A save of `text` at `name` by `owner` (`None`: the mount's user), which `created`
    /// the file or opened the one its lookup found: what the close returns.
    fn save(&mut self, name: &str, text: Vec<u8>, created: bool, owner: Option<Owner>) -> bool {
        let taken = self.close(name, text);
        if !taken && created {
            match owner {
                Some(o) => self.owners.insert(name.to_string(), o.uid),
                None => self.owners.remove(name),
            };
        }
        taken
    }

    /// `mkdir d/DIR`: the folder and its fixed file.
    fn mkdir(&mut self, dir: &str) -> bool {
        if self.dirs.iter().any(|d| d == dir) {
            return false;
        }
        self.dirs.push(dir.to_string());
        self.stored
            .insert(format!("{dir}/fixed"), b"ok fixed".to_vec());
        true
    }

    /// `mv d/A d/B` of a made folder: the removals held back in either are done first (once
    /// `A` is there); a `B` holding a file (stored or failed text) is not empty; what `A`
    /// holds, failed text included, is then in `B`.
    fn rename_dir(&mut self, a: &str, b: &str) -> bool {
        if !self.dirs.iter().any(|d| d == a) {
            return false;
        }
        self.removals_done_below(&format!("{a}/"));
        self.removals_done_below(&format!("{b}/"));
        let bx = format!("{b}/x");
        if self.dirs.iter().any(|d| d == b)
            && (self.stored.contains_key(&bx) || self.failed.contains_key(&bx))
        {
            return false;
        }
        self.dirs.retain(|d| d != b);
        self.stored.remove(&format!("{b}/fixed"));
        for d in &mut self.dirs {
            if d == a {
                *d = b.to_string();
            }
        }
        let prefix = format!("{a}/");
        for map in [&mut self.stored, &mut self.failed] {
            let moved: Vec<String> = map
                .keys()
                .filter(|k| k.starts_with(&prefix))
                .cloned()
                .collect();
            for k in moved {
                if let Some(v) = map.remove(&k) {
                    map.insert(format!("{b}/{}", &k[prefix.len()..]), v);
                }
            }
        }
        let moved: Vec<String> = self
            .owners
            .keys()
            .filter(|k| k.starts_with(&prefix))
            .cloned()
            .collect();
        for k in moved {
            if let Some(v) = self.owners.remove(&k) {
                self.owners.insert(format!("{b}/{}", &k[prefix.len()..]), v);
            }
        }
        true
    }

    /// `rmdir d/DIR`: the removals held back in it are done whether or not it goes.
    fn rmdir(&mut self, dir: &str) -> bool {
        let (prefix, x) = (format!("{dir}/"), format!("{dir}/x"));
        self.removals_done_below(&prefix);
        if !self.dirs.iter().any(|d| d == dir)
            || self.failed.contains_key(&x)
            || self.stored.contains_key(&x)
        {
            return false;
        }
        self.dirs.retain(|d| d != dir);
        self.stored.remove(&format!("{dir}/fixed"));
        true
    }
}

/// Saves `text` at `name` as an editor or `cp` does: opens the file with `O_TRUNC` when
/// its own lookup finds it, else creates it, then gives it to `owner` as the adapter does
/// for another user of the mount.
fn save(
    vfs: &Vfs,
    d: u64,
    name: &str,
    text: &[u8],
    owner: Option<Owner>,
) -> crate::error::Result<()> {
    let fh = match vfs.lookup(d, name, TOOL) {
        Ok((ino, _)) => vfs.open(
            ino,
            OpenMode {
                write: true,
                truncate: true,
                append: false,
            },
        )?,
        Err(_) => {
            let (ino, _, fh) = vfs.create(d, name, 0o644)?;
            if let Some(o) = owner {
                vfs.set_owner(ino, o)?;
            }
            fh
        }
    };
    vfs.write(fh, 0, text, false)?;
    vfs.release(fh)
}

/// Opens `name` for writing without `O_TRUNC` (as `dd conv=notrunc` and `truncate` do),
/// lets `change` write or truncate through the handle, and closes it.
fn edit(
    vfs: &Vfs,
    d: u64,
    name: &str,
    change: impl FnOnce(u64, u64) -> crate::error::Result<()>,
) -> crate::error::Result<()> {
    let (ino, _) = vfs.lookup(d, name, EDITOR)?;
    let fh = vfs.open(
        ino,
        OpenMode {
            write: true,
            truncate: false,
            append: false,
        },
    )?;
    let changed = change(ino, fh);
    let closed = vfs.release(fh);
    changed.and(closed)
}

fn stored(tree: &Files) -> BTreeMap<String, Vec<u8>> {
    lock(&tree.files)
        .unwrap()
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix("d/")?.to_string(), v.clone())))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn the_core_keeps_and_shows_what_the_model_says(steps in prop::collection::vec(step(), 1..24)) {
        let (tree, _, _) = setup();
        // A state folder of its own, so large texts go to files as in a mount.
        let state = tempfile::tempdir().expect("a state folder");
        let held = state.path().join("held");
        let mut vfs = Vfs::new(tree.clone(), Some(held.clone()));
        let mut d = dir_ino(&vfs);
        let mut model = Model::default();
        model.stored.insert("f".into(), b"ok old".to_vec());
        for (i, s) in steps.iter().enumerate() {
            let text = |good: bool| format!("{} {i}", if good { "ok" } else { "bad" }).into_bytes();
            match *s {
                Step::Save(n, good, stranger) => {
                    let owner = stranger.then_some(STRANGER);
                    let created = vfs.lookup(d, NAMES[n], TOOL).is_err();
                    let done = save(&vfs, d, NAMES[n], &text(good), owner);
                    let expected = model.save(NAMES[n], text(good), created, owner);
                    prop_assert_eq!(done.is_ok(), expected, "step {}", i);
                }
                Step::SaveLarge(n, good) => {
                    let mut large = text(good);
                    large.resize(crate::vfs::buffer::MEMORY_LIMIT + 4096, b'.');
                    let done = save(&vfs, d, NAMES[n], &large, None);
                    prop_assert_eq!(done.is_ok(), model.close(NAMES[n], large), "step {}", i);
                }
                Step::Remove(n) => {
                    let done = vfs.unlink_as(d, NAMES[n], TOOL);
                    prop_assert_eq!(done.is_ok(), model.remove(NAMES[n]), "step {}", i);
                }
                Step::Replace(n, good) => {
                    let _ = vfs.unlink_as(d, NAMES[n], TOOL);
                    model.remove(NAMES[n]);
                    let done = vfs.create(d, NAMES[n], 0o644).and_then(|(_, _, fh)| {
                        vfs.write(fh, 0, &text(good), false)?;
                        vfs.release(fh)
                    });
                    prop_assert_eq!(done.is_ok(), model.close(NAMES[n], text(good)), "step {}", i);
                }
                Step::Sed(n, good) => {
                    if model.shown(NAMES[n]).is_none() {
                        continue;
                    }
                    let done = vfs.create(d, "sedAb12Cd", 0o600).and_then(|(_, _, fh)| {
                        vfs.write(fh, 0, &text(good), false)?;
                        vfs.release(fh)?;
                        vfs.rename(d, "sedAb12Cd", d, NAMES[n])
                    });
                    // A refused rename leaves the temporary; sed's user removes it.
                    let _ = vfs.unlink_as(d, "sedAb12Cd", TOOL);
                    prop_assert_eq!(done.is_ok(), model.close(NAMES[n], text(good)), "step {}", i);
                }
                Step::Rename(a, b) => {
                    if model.failed.contains_key(NAMES[a]) {
                        continue;
                    }
                    let done = vfs.rename(d, NAMES[a], d, NAMES[b]);
                    prop_assert_eq!(done.is_ok(), model.rename(NAMES[a], NAMES[b]), "step {}", i);
                }
                Step::CreateRemove(n) => {
                    let _ = vfs.unlink_as(d, NAMES[n], TOOL);
                    model.remove(NAMES[n]);
                    let (_, _, fh) = vfs.create(d, NAMES[n], 0o644).expect("creates");
                    vfs.unlink_as(d, NAMES[n], TOOL).expect("removes the new file");
                    vfs.release(fh).expect("closes");
                }
                Step::CreateRenameAway(a, b) => {
                    if a == b {
                        continue;
                    }
                    let _ = vfs.unlink_as(d, NAMES[a], TOOL);
                    model.remove(NAMES[a]);
                    // A removal held back (by this rm or an earlier one) is cancelled by the
                    // create and goes on once the new file moved away.
                    let removed = model.removing.iter().any(|r| r == NAMES[a]);
                    model.removing.retain(|r| r != NAMES[a]);
                    let (_, _, fh) = vfs.create(d, NAMES[a], 0o644).expect("creates");
                    vfs.write(fh, 0, &text(true), false).expect("writes");
                    let done = vfs.rename(d, NAMES[a], d, NAMES[b]);
                    vfs.release(fh).expect("closes");
                    prop_assert_eq!(done.is_ok(), model.close(NAMES[b], text(true)), "step {}", i);
                    if removed {
                        model.removing.push(NAMES[a].to_string());
                    }
                }
                Step::Fsync => {
                    vfs.sync().expect("syncs");
                    model.removals_done();
                }
                Step::Wait => {
                    vfs.remove_held_back(Duration::ZERO);
                    model.removals_done();
                }
                Step::Unmount => {
                    vfs.commit_all();
                    model.removals_done();
                }
                Step::WriteAt(n, offset, good) => {
                    if model.shown(NAMES[n]).is_none() {
                        continue;
                    }
                    let written = text(good);
                    let done = edit(&vfs, d, NAMES[n], |_, fh| {
                        vfs.write(fh, offset as u64, &written, false).map(drop)
                    });
                    let expected = model.edit(NAMES[n], |t| {
                        if t.len() < offset + written.len() {
                            t.resize(offset + written.len(), 0);
                        }
                        t[offset..offset + written.len()].copy_from_slice(&written);
                    });
                    prop_assert_eq!(Some(done.is_ok()), expected, "step {}", i);
                }
                Step::Truncate(n, len) => {
                    if model.shown(NAMES[n]).is_none() {
                        continue;
                    }
                    let done = edit(&vfs, d, NAMES[n], |ino, fh| {
                        vfs.setattr(ino, Some(fh), Some(len as u64), None, None).map(drop)
                    });
                    let expected = model.edit(NAMES[n], |t| t.resize(len, 0));
                    prop_assert_eq!(Some(done.is_ok()), expected, "step {}", i);
                }
                Step::SetTime(n, secs) => {
                    if model.shown(NAMES[n]).is_none() {
                        continue;
                    }
                    let when = std::time::UNIX_EPOCH + Duration::from_secs(secs * 1000);
                    let (ino, _) = vfs.lookup(d, NAMES[n], EDITOR).expect("looks up");
                    vfs.setattr(ino, None, None, Some(when), None).expect("sets the time");
                    let (_, stat) = vfs.lookup(d, NAMES[n], OTHER).expect("looks up");
                    prop_assert_eq!(stat.mtime, when, "time of {} after step {}", NAMES[n], i);
                }
                Step::Chmod(n, mode) => {
                    if model.shown(NAMES[n]).is_none() {
                        continue;
                    }
                    let (ino, _) = vfs.lookup(d, NAMES[n], EDITOR).expect("looks up");
                    vfs.setattr(ino, None, None, None, Some(u32::from(mode))).expect("chmod");
                    let (_, stat) = vfs.lookup(d, NAMES[n], OTHER).expect("looks up");
                    let expected = if model.failed.contains_key(NAMES[n]) { mode } else { 0o644 };
                    prop_assert_eq!(stat.perm, expected, "mode of {} after step {}", NAMES[n], i);
                }
                Step::Remount | Step::Crash => {
                    let crash = matches!(s, Step::Crash);
                    if !crash {
                        vfs.commit_all();
                    }
                    // A killed daemon's core is dropped with whatever it held.
                    vfs = Vfs::new(tree.clone(), Some(held.clone()));
                    d = dir_ino(&vfs);
                    model.remount(crash);
                }
                Step::Mkdir(k) => {
                    let done = vfs.mkdir(d, DIRS[k], TOOL);
                    prop_assert_eq!(done.is_ok(), model.mkdir(DIRS[k]), "step {}", i);
                }
                Step::Rmdir(k) => {
                    let done = vfs.rmdir(d, DIRS[k]);
                    prop_assert_eq!(done.is_ok(), model.rmdir(DIRS[k]), "step {}: {:?}", i, done);
                }
                Step::SaveIn(k, good, stranger) => {
                    let Ok((sub, _)) = vfs.lookup(d, DIRS[k], TOOL) else {
                        continue;
                    };
                    let owner = stranger.then_some(STRANGER);
                    let created = vfs.lookup(sub, "x", TOOL).is_err();
                    let done = save(&vfs, sub, "x", &text(good), owner);
                    let expected = model.save(&format!("{}/x", DIRS[k]), text(good), created, owner);
                    prop_assert_eq!(done.is_ok(), expected, "step {}", i);
                }
                Step::RenameDir(a, b) => {
                    if a == b {
                        continue;
                    }
                    let done = vfs.rename(d, DIRS[a], d, DIRS[b]);
                    prop_assert_eq!(done.is_ok(), model.rename_dir(DIRS[a], DIRS[b]), "step {}: {:?}", i, done);
                }
                Step::RenameRoot => {
                    let root = crate::vfs::inodes::ROOT;
                    prop_assert!(vfs.rename(root, "d", root, "e").is_err(), "step {}", i);
                    model.removals_done();
                }
                Step::RemoveIn(k) => {
                    let Ok((sub, _)) = vfs.lookup(d, DIRS[k], TOOL) else {
                        continue;
                    };
                    let done = vfs.unlink_as(sub, "x", TOOL);
                    prop_assert_eq!(done.is_ok(), model.remove(&format!("{}/x", DIRS[k])), "step {}", i);
                }
            }
            prop_assert_eq!(stored(&tree), model.stored.clone(), "store after step {}: {:?}", i, s);
            let mut names: Vec<(u64, String, String)> =
                NAMES.iter().map(|n| (d, n.to_string(), n.to_string())).collect();
            for k in DIRS {
                let sub = vfs.lookup(d, k, OTHER).ok().map(|(ino, _)| ino);
                prop_assert_eq!(sub.is_some(), model.dirs.iter().any(|m| m == k), "folder {} after step {}: {:?}", k, i, s);
                for file in ["x", "fixed"] {
                    names.extend(sub.map(|sub| (sub, file.to_string(), format!("{k}/{file}"))));
                }
            }
            for (dir, name, key) in names {
                let found = vfs.lookup(dir, &name, OTHER).ok();
                let shown = found.as_ref().map(|(ino, _)| {
                    let fh = vfs.open(*ino, OpenMode::default()).expect("opens");
                    let text = vfs.read(fh, 0, u32::MAX).expect("reads").to_vec();
                    vfs.release(fh).expect("releases");
                    text
                });
                prop_assert_eq!(shown.as_ref(), model.shown(&key), "{} after step {}: {:?}", key, i, s);
                let owner = found.and_then(|(_, stat)| stat.owner.map(|o| o.uid));
                prop_assert_eq!(owner, model.owners.get(&key).copied(), "owner of {} after step {}: {:?}", key, i, s);
            }
        }
    }
}
