//! docs/semantics.md (the Semantics section), sentence by sentence, at the `Vfs` level (no
//! kernel), on real trees of all three games: a Luanti world folder, a Survivalcraft region
//! world and a Terrarum TVDA disk from `../shared/samples`, each copied to a temporary
//! folder first.
//! Each test names the sentence it pins; the call sequences of vim, `sed -i`, rsync and
//! `cp -r` are replayed exactly as those tools issue them.

#[allow(dead_code)]
mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::fixtures::{fixtures, luanti};
use common::scratch::state_dir;

use worldfs::vfs::inodes::ROOT;
use worldfs::vfs::{Kind, OpenMode, Vfs};
use worldfs::worlds::{self, Game};

const TRUNC: OpenMode = OpenMode {
    write: true,
    truncate: true,
    append: false,
};
const PID: u32 = 4242;

fn ino(vfs: &Vfs, path: &[String]) -> Result<u64, i32> {
    let mut ino = ROOT;
    for name in path {
        ino = vfs.lookup(ino, name, PID).map_err(|e| e.errno())?.0;
    }
    Ok(ino)
}

fn cat(vfs: &Vfs, path: &[String]) -> String {
    let fh = vfs
        .open(ino(vfs, path).unwrap(), OpenMode::default())
        .unwrap();
    let data = vfs.read(fh, 0, u32::MAX).unwrap();
    vfs.release(fh).unwrap();
    String::from_utf8(data.to_vec()).unwrap()
}

/// `open(O_TRUNC)`, one write, `close()`: the close's result.
fn save(vfs: &Vfs, path: &[String], text: &str) -> Result<(), i32> {
    let fh = vfs.open(ino(vfs, path)?, TRUNC).map_err(|e| e.errno())?;
    vfs.write(fh, 0, text.as_bytes(), false)
        .map_err(|e| e.errno())?;
    let closed = vfs.flush(fh).map_err(|e| e.errno());
    vfs.release(fh).map_err(|e| e.errno())?;
    closed
}

fn names(vfs: &Vfs, dir: &[String], offset: u64) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    vfs.readdir(ino(vfs, dir).unwrap(), offset, false, PID, &mut |e| {
        out.push((e.name.to_string(), e.offset));
        true
    })
    .unwrap();
    out
}

/// "A block is decoded the first time a file inside its folder is used": nothing is decoded
/// at mount, so a world whose objects are all unreadable still mounts and lists.
#[test]
fn nothing_is_decoded_at_mount() {
    for f in fixtures() {
        let vfs = f.vfs(true);
        assert!(
            !names(&vfs, &f.dir, 0).is_empty(),
            "{}: the folder lists",
            f.name
        );
        assert_eq!(
            vfs.lookup(ROOT, "no such file", PID).unwrap_err().errno(),
            libc::ENOENT
        );
    }
}

/// "`st_size` is always exact": every file of the edited folder stats at the length read.
#[test]
fn st_size_is_exact() {
    for f in fixtures() {
        let vfs = f.vfs(true);
        for (name, _) in names(&vfs, &f.dir, 0) {
            if name == "." || name == ".." {
                continue;
            }
            let mut p = f.dir.clone();
            p.push(name);
            let stat = vfs.getattr(ino(&vfs, &p).unwrap(), None).unwrap();
            if stat.kind == Kind::File {
                assert_eq!(stat.size as usize, cat(&vfs, &p).len(), "{}: {p:?}", f.name);
            }
        }
    }
}

/// "Listings stream page by page with stable cookies": resuming at any entry's offset gives
/// exactly the entries after it.
#[test]
fn listings_resume_at_every_cookie() {
    for f in fixtures() {
        let vfs = f.vfs(true);
        for dir in [vec![], f.dir.clone()] {
            let all = names(&vfs, &dir, 0);
            for (i, (_, off)) in all.iter().enumerate() {
                assert_eq!(names(&vfs, &dir, *off), all[i + 1..], "{}: {dir:?}", f.name);
            }
        }
    }
}

/// "On `close()` ... worldfs parses the whole file, re-encodes ... and commits it. The call
/// returns only after that": a fresh tree over the store sees the edit once close returned.
#[test]
fn close_commits_before_it_returns() {
    for f in fixtures() {
        let vfs = f.vfs(false);
        let old = cat(&vfs, &f.path());
        let new = (f.good)(&old);
        assert_ne!(new, old, "{}", f.name);
        save(&vfs, &f.path(), &new).unwrap();
        drop(vfs);
        let other = f.vfs(true);
        assert_eq!(cat(&other, &f.path()), new, "{}", f.name);
    }
}

/// "A block whose decoded content did not change is not written": saving the same text
/// leaves the store byte-identical.
#[test]
fn saving_unchanged_text_writes_nothing() {
    for f in fixtures() {
        let vfs = f.vfs(false);
        let before = f.stored();
        let old = cat(&vfs, &f.path());
        save(&vfs, &f.path(), &old).unwrap();
        assert!(f.stored() == before, "{}: store changed", f.name);
    }
}

/// "Bad input never reaches the database ... The `close()` fails with `EINVAL` ... The text
/// you wrote stays readable at its path in the mount, so you can fix it."
#[test]
fn bad_input_fails_the_close_and_stays_readable() {
    for f in fixtures() {
        let vfs = f.vfs(false);
        let before = f.stored();
        let old = cat(&vfs, &f.path());
        let bad = (f.bad)(&old);
        assert_eq!(save(&vfs, &f.path(), &bad), Err(libc::EINVAL), "{}", f.name);
        assert!(f.stored() == before, "{}: store changed", f.name);
        assert_eq!(cat(&vfs, &f.path()), bad, "{}", f.name);
        assert_eq!(
            vfs.getattr(ino(&vfs, &f.path()).unwrap(), None)
                .unwrap()
                .size as usize,
            bad.len()
        );
        // Fixing the text commits it.
        let good = (f.good)(&old);
        save(&vfs, &f.path(), &good).unwrap();
        drop(vfs);
        assert_eq!(cat(&f.vfs(true), &f.path()), good, "{}", f.name);
    }
}

/// "Removing the file discards it" (the pending text): the stored object shows again, and
/// only a second `rm` deletes (or resets) it.
#[test]
fn removing_a_failed_file_discards_only_the_pending_text() {
    for f in fixtures() {
        let vfs = f.vfs(false);
        let before = f.stored();
        let old = cat(&vfs, &f.path());
        assert!(save(&vfs, &f.path(), &(f.bad)(&old)).is_err());
        let dir = ino(&vfs, &f.dir).unwrap();
        vfs.unlink(dir, &f.file).unwrap();
        assert!(f.stored() == before, "{}: store changed by rm", f.name);
        assert_eq!(
            cat(&vfs, &f.path()),
            old,
            "{}: stored object shows again",
            f.name
        );
    }
}

/// "`sed -i`": a temporary `sedXXXXXX` in the same folder, written, closed, renamed over the
/// file: the rename commits it and leaves no scratch file behind.
#[test]
fn sed_i_replaces_the_file() {
    for f in fixtures() {
        let vfs = f.vfs(false);
        let old = cat(&vfs, &f.path());
        let new = (f.good)(&old);
        let dir = ino(&vfs, &f.dir).unwrap();
        let (_, _, fh) = vfs.create(dir, "sedAb3xYz", 0o644).unwrap();
        vfs.write(fh, 0, new.as_bytes(), false).unwrap();
        vfs.flush(fh).unwrap();
        vfs.release(fh).unwrap();
        vfs.rename(dir, "sedAb3xYz", dir, &f.file).unwrap();
        assert!(
            !names(&vfs, &f.dir, 0).iter().any(|(n, _)| n == "sedAb3xYz"),
            "{}",
            f.name
        );
        drop(vfs);
        assert_eq!(cat(&f.vfs(true), &f.path()), new, "{}", f.name);
    }
}

/// vim with `backupcopy=no`: rename the file to `file~`, create the file, write, fsync,
/// close, delete the backup. The object stays stored while it is aside.
#[test]
fn vim_backup_by_rename_then_write() {
    for f in fixtures() {
        let vfs = f.vfs(false);
        let before = f.stored();
        let old = cat(&vfs, &f.path());
        let new = (f.good)(&old);
        let dir = ino(&vfs, &f.dir).unwrap();
        let backup = format!("{}~", f.file);
        vfs.rename(dir, &f.file, dir, &backup).unwrap();
        assert!(f.stored() == before, "{}: aside is not deleted", f.name);
        let (_, _, fh) = vfs.create(dir, &f.file, 0o644).unwrap();
        vfs.write(fh, 0, new.as_bytes(), false).unwrap();
        vfs.fsync(fh).unwrap();
        vfs.flush(fh).unwrap();
        vfs.release(fh).unwrap();
        vfs.unlink(dir, &backup).unwrap();
        drop(vfs);
        assert_eq!(cat(&f.vfs(true), &f.path()), new, "{}", f.name);
    }
}

/// vim's failed save: the new text is refused, the object is still stored, and the backup
/// still holds the old text.
#[test]
fn vim_failed_save_loses_nothing() {
    for f in fixtures() {
        let vfs = f.vfs(false);
        let before = f.stored();
        let old = cat(&vfs, &f.path());
        let dir = ino(&vfs, &f.dir).unwrap();
        let backup = format!("{}~", f.file);
        vfs.rename(dir, &f.file, dir, &backup).unwrap();
        let (_, _, fh) = vfs.create(dir, &f.file, 0o644).unwrap();
        vfs.write(fh, 0, (f.bad)(&old).as_bytes(), false).unwrap();
        assert_eq!(vfs.fsync(fh).unwrap_err().errno(), libc::EINVAL);
        vfs.release(fh).ok();
        assert!(f.stored() == before, "{}: store changed", f.name);
        let mut b = f.dir.clone();
        b.push(backup);
        assert_eq!(cat(&vfs, &b), old, "{}", f.name);
    }
}

/// rsync: `.NAME.XXXXXX` written and closed, its time set (utimens), renamed over the file:
/// the content is committed and the file shows the time rsync set.
#[test]
fn rsync_temporary_rename_and_time() {
    for f in fixtures() {
        let vfs = f.vfs(false);
        let old = cat(&vfs, &f.path());
        let new = (f.good)(&old);
        let dir = ino(&vfs, &f.dir).unwrap();
        let tmp = format!(".{}.Xy12Ab", f.file);
        let (tino, _, fh) = vfs.create(dir, &tmp, 0o644).unwrap();
        vfs.write(fh, 0, new.as_bytes(), false).unwrap();
        vfs.flush(fh).unwrap();
        vfs.release(fh).unwrap();
        let when = UNIX_EPOCH + Duration::from_secs(1_600_000_000);
        vfs.setattr(tino, None, None, Some(when), None).unwrap();
        vfs.rename(dir, &tmp, dir, &f.file).unwrap();
        drop(vfs);
        let other = f.vfs(true);
        assert_eq!(cat(&other, &f.path()), new, "{}", f.name);
        let stat = other
            .getattr(ino(&other, &f.path()).unwrap(), None)
            .unwrap();
        assert_eq!(stat.mtime, when, "{}", f.name);
    }
}

/// `cp -a` over an existing file: `open(O_TRUNC)`, write, `futimens` on the open descriptor,
/// `close()`: the close commits the content and the file keeps the time set before it.
#[test]
fn cp_a_time_set_before_the_close_stands() {
    for f in fixtures() {
        let vfs = f.vfs(false);
        let old = cat(&vfs, &f.path());
        let new = (f.good)(&old);
        let file = ino(&vfs, &f.path()).unwrap();
        let fh = vfs.open(file, TRUNC).unwrap();
        vfs.write(fh, 0, new.as_bytes(), false).unwrap();
        let when = UNIX_EPOCH + Duration::from_secs(1_600_000_000);
        vfs.setattr(file, Some(fh), None, Some(when), None).unwrap();
        vfs.flush(fh).unwrap();
        vfs.release(fh).unwrap();
        drop(vfs);
        let other = f.vfs(true);
        assert_eq!(cat(&other, &f.path()), new, "{}", f.name);
        let stat = other
            .getattr(ino(&other, &f.path()).unwrap(), None)
            .unwrap();
        assert_eq!(stat.mtime, when, "{}", f.name);
    }
}

/// "An edit of one object changes the mtimes of exactly the files whose content it changed":
/// every other file and sub-folder of the edited file's folder keeps its time, so the next
/// incremental rsync sends only the edited file. (A Luanti block folder shows its block's
/// last change; a chunk folder and a disk's folders keep theirs.)
#[test]
fn an_edit_keeps_the_times_of_unchanged_files() {
    for f in fixtures() {
        let vfs = f.vfs(false);
        let snapshot = |vfs: &Vfs| -> Vec<(String, SystemTime, Option<String>)> {
            let mut out = Vec::new();
            if !f.dir.is_empty() && f.game != Game::Luanti {
                let stat = vfs.getattr(ino(vfs, &f.dir).unwrap(), None).unwrap();
                out.push((".".to_string(), stat.mtime, None));
            }
            for (name, _) in names(vfs, &f.dir, 0) {
                if name == "." || name == ".." {
                    continue;
                }
                let mut p = f.dir.clone();
                p.push(name.clone());
                let stat = vfs.getattr(ino(vfs, &p).unwrap(), None).unwrap();
                let text = (stat.kind == Kind::File).then(|| cat(vfs, &p));
                out.push((name, stat.mtime, text));
            }
            out
        };
        let before = snapshot(&vfs);
        let old = cat(&vfs, &f.path());
        std::thread::sleep(Duration::from_millis(20));
        save(&vfs, &f.path(), &(f.good)(&old)).unwrap();
        drop(vfs);
        let vfs = f.vfs(true);
        let after = snapshot(&vfs);
        assert_eq!(before.len(), after.len(), "{}", f.name);
        let mut edited = false;
        for ((name, t0, c0), (_, t1, c1)) in before.iter().zip(&after) {
            if *name == f.file {
                assert_ne!(t0, t1, "{}: the edited file keeps its time", f.name);
                edited = true;
            } else if c0 == c1 {
                assert_eq!(t0, t1, "{}: {name} is unchanged but its time moved", f.name);
            }
        }
        assert!(edited, "{}", f.name);
    }
}

/// "A time set on a Luanti block folder stands through later writes into it through the
/// mount (a restore's rsync sets it before it has written everything below `meta/`), until
/// another program changes the block"; a chunk folder's time does not move with writes
/// either.
#[test]
fn a_time_set_on_a_folder_stands_through_writes_into_it() {
    for f in fixtures() {
        if f.dir.is_empty() {
            continue; // a disk's root: its time follows the disk's entries
        }
        let when = UNIX_EPOCH + Duration::from_secs(1_500_000_000);
        let vfs = f.vfs(false);
        let folder = ino(&vfs, &f.dir).unwrap();
        vfs.setattr(folder, None, None, Some(when), None).unwrap();
        // (A Survivalcraft chunk folder's time is fixed: setting it changes nothing.)
        let set = vfs.getattr(folder, None).unwrap().mtime;
        if f.game == Game::Luanti {
            assert_eq!(set, when);
        }
        let old = cat(&vfs, &f.path());
        save(&vfs, &f.path(), &(f.good)(&old)).unwrap();
        assert_eq!(
            vfs.getattr(folder, None).unwrap().mtime,
            set,
            "{}: the write moved the folder's time",
            f.name
        );
        drop(vfs);
        let vfs = f.vfs(true);
        let folder = ino(&vfs, &f.dir).unwrap();
        assert_eq!(vfs.getattr(folder, None).unwrap().mtime, set, "{}", f.name);
        drop(vfs);
        if f.game == Game::Luanti {
            // Another program rewrites every block (each gets another block's bytes).
            let conn = rusqlite::Connection::open(&f.store).unwrap();
            let changed = conn
                .execute(
                    "UPDATE blocks SET data = (SELECT b.data FROM blocks b \
                     WHERE b.data != blocks.data LIMIT 1)",
                    [],
                )
                .unwrap();
            assert!(changed > 0);
            drop(conn);
            let vfs = f.vfs(true);
            let folder = ino(&vfs, &f.dir).unwrap();
            assert_ne!(
                vfs.getattr(folder, None).unwrap().mtime,
                when,
                "another program's change of the block shows in its folder's time"
            );
        }
    }
}

/// "`worldfs unmount` ... SIGTERM ... commit what is still open": `commit_all` commits a
/// handle that was written and never closed.
#[test]
fn unmount_commits_what_is_still_open() {
    for f in fixtures() {
        let vfs = f.vfs(false);
        let new = (f.good)(&cat(&vfs, &f.path()));
        let fh = vfs.open(ino(&vfs, &f.path()).unwrap(), TRUNC).unwrap();
        vfs.write(fh, 0, new.as_bytes(), false).unwrap();
        assert_eq!(vfs.commit_all(), 0, "{}", f.name);
        drop(vfs);
        assert_eq!(cat(&f.vfs(true), &f.path()), new, "{}", f.name);
    }
}

/// "A `--read-only` mount shows the same modes (the kernel refuses every write with
/// `EROFS`), so a backup taken from it restores with the world's modes", and a read-only
/// mount refuses every write with `EROFS` itself too.
#[test]
fn read_only_mounts_refuse_writes() {
    for f in fixtures() {
        let shown = {
            let rw = f.vfs(false);
            let file = ino(&rw, &f.path()).unwrap();
            let dir = ino(&rw, &f.dir).unwrap();
            [file, dir, ROOT].map(|i| rw.getattr(i, None).unwrap().perm)
        };
        let before = f.stored();
        let vfs = f.vfs(true);
        let file = ino(&vfs, &f.path()).unwrap();
        let dir = ino(&vfs, &f.dir).unwrap();
        assert_eq!(
            [file, dir, ROOT].map(|i| vfs.getattr(i, None).unwrap().perm),
            shown,
            "{}: the modes of a read-write mount",
            f.name
        );
        assert_eq!(vfs.open(file, TRUNC).unwrap_err().errno(), libc::EROFS);
        assert_eq!(
            vfs.create(dir, "x", 0o644).unwrap_err().errno(),
            libc::EROFS
        );
        assert!(f.stored() == before, "{}", f.name);
    }
}

/// A read-only mount is enforced once, in the core: every operation that would change
/// anything (writing opens, create, mkdir, symlink, unlink, rmdir, rename, truncate, touch,
/// chmod) is `EROFS` in every game, and the store is unchanged.
#[test]
fn every_change_on_a_read_only_mount_is_erofs() {
    for f in fixtures() {
        let before = f.stored();
        let vfs = f.vfs(true);
        let file = ino(&vfs, &f.path()).unwrap();
        let dir = ino(&vfs, &f.dir).unwrap();
        let mut folders = Vec::new();
        vfs.readdir(ROOT, 2, false, PID, &mut |e| {
            if e.stat.kind == Kind::Dir {
                folders.push(e.name.to_string());
            }
            true
        })
        .unwrap();
        let folder = folders.first().expect("a folder at the root");
        let rw = OpenMode {
            write: true,
            ..OpenMode::default()
        };
        let name = f.file.as_str();
        let errors = [
            ("open O_TRUNC", vfs.open(file, TRUNC).map(|_| ())),
            ("open O_RDWR", vfs.open(file, rw).map(|_| ())),
            ("create", vfs.create(dir, "new", 0o644).map(|_| ())),
            ("mkdir", vfs.mkdir(dir, "new", PID).map(|_| ())),
            ("symlink", vfs.symlink(dir, "link", b"x", PID).map(|_| ())),
            ("unlink", vfs.unlink(dir, name)),
            ("rmdir", vfs.rmdir(ROOT, folder)),
            ("rename", vfs.rename(dir, name, dir, "renamed")),
            (
                "truncate",
                vfs.setattr(file, None, Some(0), None, None).map(|_| ()),
            ),
            (
                "touch",
                vfs.setattr(file, None, None, Some(UNIX_EPOCH), None)
                    .map(|_| ()),
            ),
            (
                "chmod",
                vfs.setattr(file, None, None, None, Some(0o600)).map(|_| ()),
            ),
        ];
        for (op, result) in errors {
            let e = result.expect_err(op);
            assert_eq!(e.errno(), libc::EROFS, "{} {op}: {e}", f.name);
        }
        assert!(f.stored() == before, "{}", f.name);
        assert!(ino(&vfs, &f.path()).is_ok(), "{}", f.name);
    }
}

/// `cp -r` of a Luanti block into a new block folder: `mkdir`, then every file created with
/// `O_EXCL` in the folder the process made, written and closed.
#[test]
fn cp_r_fills_a_new_block() {
    let f = luanti();
    let vfs = f.vfs(false);
    let blocks = ino(&vfs, &["blocks".to_string()]).unwrap();
    let files: Vec<(String, String)> = names(&vfs, &f.dir, 0)
        .into_iter()
        .map(|(n, _)| n)
        .filter(|n| n.ends_with(".txt") || n.ends_with(".cubeset"))
        .map(|n| {
            let mut p = f.dir.clone();
            p.push(n.clone());
            (n, cat(&vfs, &p))
        })
        .collect();
    assert!(files.len() >= 4, "{files:?}");
    let (dir, _) = vfs.mkdir(blocks, "100,100,100", PID).unwrap();
    for (name, text) in &files {
        let (_, _, fh) = vfs.create(dir, name, 0o644).unwrap();
        vfs.write(fh, 0, text.as_bytes(), false).unwrap();
        vfs.flush(fh).unwrap();
        vfs.release(fh).unwrap();
    }
    drop(vfs);
    let other = f.vfs(true);
    for (name, text) in &files {
        let p = vec!["blocks".to_string(), "100,100,100".into(), name.clone()];
        assert_eq!(&cat(&other, &p), text, "{name}");
    }
}

/// "This rule applies only where you did not write the derived data yourself: a
/// `nodes.cubeset` written while the block is as a `block.txt` written through the mount left
/// it (the same header and the same nodes) keeps the flags and `lighting_complete` that
/// `block.txt` set, however long after and across remounts": a restore stopped between the
/// block's `block.txt` and its `nodes.cubeset` (a killed daemon, a full disk) and run again —
/// rsync then skips the `block.txt` it finds equal — gives the block back exactly. "A node
/// edit after that, a save of the block by the engine in between, or a `block.txt` saved
/// unchanged (it marks nothing) leave the rule to apply."
#[test]
fn a_header_written_before_a_remount_keeps_its_flags_through_the_nodes_written_after() {
    let f = luanti();
    let file = |dir: &str, name: &str| vec!["blocks".to_string(), dir.into(), name.into()];
    let vfs = f.vfs(false);
    // A block of more than one kind of node, with its header.
    let source = names(&vfs, &["blocks".to_string()], 0)
        .into_iter()
        .map(|(n, _)| n)
        .find(|n| n.contains(',') && cat(&vfs, &file(n, "nodes.cubeset")).contains("\t\t\t\t\"b: "))
        .expect("a block of several kinds of node");
    let source = &source;
    // The source's header with every lighting bit complete, so the relighting rule shows.
    let header: String = cat(&vfs, &file(source, "block.txt"))
        .split_inclusive('\n')
        .map(|l| {
            let value =
                |old: &str, new: &str| l.replacen(&format!(" = {old}"), &format!(" = {new}"), 1);
            if l.starts_with("lighting_complete ") {
                value(&l[l.find(" = ").unwrap() + 3..][..6], "0xffff")
            } else if l.starts_with("lighting_expired ") {
                value("true ", "false")
            } else {
                l.to_string()
            }
        })
        .collect();
    let nodes = cat(&vfs, &file(source, "nodes.cubeset"));
    let blocks = ino(&vfs, &["blocks".to_string()]).unwrap();
    // A block folder as `cp -r` or rsync makes it, and its block.txt written in it.
    let copy_header = |vfs: &Vfs, name: &str| {
        let (dir, _) = vfs.mkdir(blocks, name, PID).unwrap();
        let (_, _, fh) = vfs.create(dir, "block.txt", 0o644).unwrap();
        vfs.write(fh, 0, header.as_bytes(), false).unwrap();
        vfs.flush(fh).unwrap();
        vfs.release(fh).unwrap();
    };
    copy_header(&vfs, "100,100,100");
    drop(vfs);
    let vfs = f.vfs(false);
    save(&vfs, &file("100,100,100", "nodes.cubeset"), &nodes).unwrap();
    assert!(cat(&vfs, &file("100,100,100", "nodes.cubeset")) == nodes);
    let restored = cat(&vfs, &file("100,100,100", "block.txt"));
    assert_eq!(
        restored, header,
        "the nodes written after a remount cleared the flags block.txt set"
    );
    // The next node edit is the user's own: the engine relights the block.
    let edited = nodes.replacen("\"a: ", "\"a: worldfs:relit", 1);
    assert!(edited != nodes);
    save(&vfs, &file("100,100,100", "nodes.cubeset"), &edited).unwrap();
    let relit = |vfs: &Vfs, dir: &str| {
        let text = cat(vfs, &file(dir, "block.txt"));
        text.contains("lighting_complete = 0x0000") || text.contains("lighting_expired = true")
    };
    assert!(
        relit(&vfs, "100,100,100"),
        "a node edit after the copy relights"
    );

    // Another program saves the block between the two files (its timestamp moves): the nodes
    // written after it are an edit of the block it saved, and relight it.
    copy_header(&vfs, "101,100,100");
    drop(vfs);
    let db = rusqlite::Connection::open(&f.store).unwrap();
    let key = worldfs::luanti::store::map::pos_to_int(worldfs::luanti::codec::block::BlockPos {
        x: 101,
        y: 100,
        z: 100,
    });
    let blob: Vec<u8> = db
        .query_row("SELECT data FROM blocks WHERE pos = ?1", [key], |r| {
            r.get(0)
        })
        .unwrap();
    let mut saved = worldfs::luanti::codec::decode_block(&blob).unwrap();
    saved.timestamp = 4242;
    db.execute(
        "UPDATE blocks SET data = ?1 WHERE pos = ?2",
        rusqlite::params![worldfs::luanti::codec::encode_block(&saved).unwrap(), key],
    )
    .unwrap();
    drop(db);
    let vfs = f.vfs(false);
    save(&vfs, &file("101,100,100", "nodes.cubeset"), &nodes).unwrap();
    assert!(
        relit(&vfs, "101,100,100"),
        "nodes over another program's save keep the copy's flags"
    );

    // An editor's save of an unchanged block.txt marks nothing: the node edit after it relights.
    let copy = "100,100,100";
    save(&vfs, &file(copy, "block.txt"), &header).unwrap();
    save(&vfs, &file(copy, "nodes.cubeset"), &nodes).unwrap();
    assert!(
        !relit(&vfs, copy),
        "the header written, then the nodes: the copy's flags"
    );
    save(&vfs, &file(copy, "block.txt"), &header).unwrap();
    save(&vfs, &file(copy, "nodes.cubeset"), &edited).unwrap();
    assert!(
        relit(&vfs, copy),
        "a node edit after a no-op save of block.txt kept the flags"
    );
}

/// "The rule never touches `light.txt`": light written through the mount stays as written
/// when `nodes.cubeset` is written after it (the node edit still marks the light for the
/// engine to recompute, `lighting_complete` or `lighting_expired` by version, no `block.txt`
/// having been written).
#[test]
fn a_node_edit_keeps_the_light_written_before_it() {
    let f = luanti();
    let vfs = f.vfs(false);
    let at = |name: &str| {
        let mut p = f.dir.clone();
        p.push(name.to_string());
        p
    };
    let light = (f.good)(&cat(&vfs, &at("light.txt")));
    save(&vfs, &at("light.txt"), &light).unwrap();
    let nodes = cat(&vfs, &at("nodes.cubeset"));
    let def = nodes
        .lines()
        .find(|l| l.trim_start().starts_with("\"a: "))
        .unwrap()
        .to_string();
    let rest = &def[def.find("\"a: ").unwrap() + 4..];
    let name = &rest[..rest.find(": ").unwrap()];
    let new_name = if name == "default:mese" {
        "default:stone"
    } else {
        "default:mese"
    };
    let other = def.replacen(&format!("\"a: {name}: "), &format!("\"a: {new_name}: "), 1);
    save(&vfs, &at("nodes.cubeset"), &nodes.replacen(&def, &other, 1)).unwrap();
    assert_ne!(cat(&vfs, &at("nodes.cubeset")), nodes, "the node edit took");
    drop(vfs);
    let other_vfs = f.vfs(true);
    assert_eq!(cat(&other_vfs, &at("light.txt")), light);
    let header = cat(&other_vfs, &at("block.txt"));
    assert!(
        header.contains("lighting_complete = 0x0 ")
            || header.contains("lighting_complete = 0 ")
            || header.contains("lighting_expired = true "),
        "{header}"
    );
}

/// "New blocks (`mkdir`) are version 29."
#[test]
fn new_blocks_are_version_29() {
    let f = luanti();
    let vfs = f.vfs(false);
    let blocks = ino(&vfs, &["blocks".to_string()]).unwrap();
    vfs.mkdir(blocks, "-200,3,7", PID).unwrap();
    drop(vfs);
    let text = cat(
        &f.vfs(true),
        &["blocks".into(), "-200,3,7".into(), "block.txt".into()],
    );
    assert!(text.starts_with("version = 29\n"), "{text}");
}

/// Two handles: what one process wrote and closed is what the next open reads.
#[test]
fn a_closed_write_is_read_back_by_the_next_open() {
    for f in fixtures() {
        let vfs = f.vfs(false);
        let new = (f.good)(&cat(&vfs, &f.path()));
        save(&vfs, &f.path(), &new).unwrap();
        assert_eq!(cat(&vfs, &f.path()), new, "{}", f.name);
        let t = vfs
            .getattr(ino(&vfs, &f.path()).unwrap(), None)
            .unwrap()
            .mtime;
        assert!(
            t > SystemTime::now() - Duration::from_secs(600),
            "{}: the commit time",
            f.name
        );
    }
}

/// "A new file (`open(O_CREAT)`) whose empty content the tree takes is committed at that
/// first close": on a TEVD disk, where any bytes are a file, the store holds the new file
/// once `close()` returned, before the kernel's release.
#[test]
fn a_new_file_exists_once_its_first_close_returns() {
    state_dir();
    let dir = tempfile::tempdir().unwrap();
    let disk = dir.path().join("disk.tevd");
    worldfs::tvda::store::tevd::TevdDisk::create(&disk, "t", 1 << 20, 1_700_000_000).unwrap();
    let vfs = Vfs::new(
        worlds::open(&disk, Game::Tevd, false, 1 << 20).unwrap(),
        None,
    );
    let (_, _, fh) = vfs.create(ROOT, "new.txt", 0o644).unwrap();
    vfs.flush(fh).unwrap();
    assert!(vfs.tree().stat(&["new.txt".to_string()]).is_ok());
    vfs.release(fh).unwrap();
}
