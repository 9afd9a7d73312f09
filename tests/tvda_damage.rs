//! Damage inside a TVDA or TEVD disk, byte by byte ("Nothing lost", point 9).
//!
//! Every byte of every sample disk is corrupted in turn (set to 0x01, as in the report, and
//! inverted). For each corrupted disk: an entry whose own bytes were not touched is never
//! lost (not by reading, not by a save), `worldfs check` fails whenever an entry is lost or
//! the disk is damaged, and a save on a damaged disk is refused and leaves the file
//! byte-identical. A torn last append (the file ends inside its last entry) is the one
//! thing a save may cut off.

#[allow(dead_code)]
mod common;

use common::samples::{self, TEVD_V3_OLD, TVDA_CLEAN, TVDA_DIRTY, TVDA_WORLD};

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;

use worldfs::tvda::codec::tvda::{Content, EntryKind, ENTRY_HEADER_LEN, ROOT_ID};
use worldfs::tvda::store::tevd::TevdDisk;
use worldfs::tvda::store::tvda::{Change, Disk};

/// A live entry of the undamaged disk: where its bytes are and what it holds.
struct Original {
    start: u64,
    end: u64,
    content: Content,
}

fn originals(path: &Path) -> BTreeMap<i64, Original> {
    let disk = Disk::open(path, false).unwrap();
    disk.entries()
        .map(|e| {
            let field = match e.kind {
                EntryKind::File => 6,
                EntryKind::Directory => 4,
                EntryKind::Symlink => 0,
            };
            let original = Original {
                start: e.offset,
                end: e.offset + ENTRY_HEADER_LEN + field + e.size,
                content: disk.read_content(e.id).unwrap(),
            };
            (e.id, original)
        })
        .collect()
}

/// Whether `worldfs check` passes.
fn check_passes(path: &Path) -> bool {
    let mut out = Vec::new();
    matches!(worldfs::tvda::inspect::check(path, &mut out), Ok(code) if code == ExitCode::SUCCESS)
}

/// The entries of `originals` the disk at `path` no longer holds as they were.
fn lost(path: &Path, originals: &BTreeMap<i64, Original>, skip: i64) -> Vec<i64> {
    let disk = Disk::open(path, false).ok();
    originals
        .iter()
        .filter(|(&id, _)| id != skip)
        .filter(|(&id, o)| {
            disk.as_ref().and_then(|d| d.read_content(id).ok()).as_ref() != Some(&o.content)
        })
        .map(|(&id, _)| id)
        .collect()
}

/// Whether `pos` is in the ID field or the type byte of an entry the root does not list, or
/// of one with an older record of the same ID: a changed ID or discard bit there gives a disk
/// as valid as one the game writes by appending an entry (the entry then reads as its older
/// version, or not at all), so nothing in the format can tell it from the real thing.
fn undetectable(pos: u64, id: i64, o: &Original, listed: &[i64], repeated: &[i64]) -> bool {
    let rel = pos - o.start;
    (rel < 8 || rel == 16) && (!listed.contains(&id) || repeated.contains(&id))
}

/// The IDs with more than one record (live or not) in the disk at `path`.
fn repeated_ids(path: &Path) -> Vec<i64> {
    let file = std::fs::File::open(path).unwrap();
    let len = file.metadata().unwrap().len();
    let found = worldfs::tvda::codec::tvda::scan(&file, len).unwrap();
    let mut ids: Vec<i64> = found.records.iter().map(|r| r.header.id).collect();
    ids.sort_unstable();
    let mut repeated: Vec<i64> = ids
        .windows(2)
        .filter(|w| w[0] == w[1])
        .map(|w| w[0])
        .collect();
    repeated.dedup();
    repeated
}

#[test]
fn every_corrupted_byte_of_every_tvda_sample_loses_nothing_intact() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("disk");
    let put = b"basegame 9.9.9".to_vec();
    let mut problems = Vec::new();
    for name in [TVDA_CLEAN, TVDA_DIRTY, TVDA_WORLD] {
        let good = std::fs::read(samples::path(name)).unwrap();
        std::fs::write(&path, &good).unwrap();
        let originals = originals(&path);
        let repeated = repeated_ids(&path);
        let listed = match &originals[&ROOT_ID].content {
            Content::Directory(ids) => ids.clone(),
            _ => Vec::new(),
        };
        for pos in 0..good.len() {
            for (how, value) in [("0x01", 0x01), ("inverted", !good[pos])] {
                if value == good[pos] {
                    continue;
                }
                let mut bad = good.clone();
                bad[pos] = value;
                let case = format!("{name} byte {pos} {how}");
                std::fs::write(&path, &bad).unwrap();
                let pos = pos as u64;
                let intact = |o: &Original| !(o.start..o.end).contains(&pos);
                let passes = check_passes(&path);

                // Reading: when check finds nothing wrong, every intact entry reads as before.
                let lost_now = lost(&path, &originals, i64::MIN);
                if passes {
                    for id in &lost_now {
                        if intact(&originals[id]) {
                            problems.push(format!("{case}: intact entry {id} unreadable"));
                        } else if !undetectable(pos, *id, &originals[id], &listed, &repeated) {
                            problems.push(format!("{case}: entry {id} lost, check passes"));
                        }
                    }
                }

                // A save: refused on a damaged disk (file unchanged); otherwise it keeps
                // every intact entry.
                let saved = Disk::open(&path, true).and_then(|mut d| {
                    d.commit(
                        &[Change::Put {
                            id: -4,
                            data: put.clone(),
                        }],
                        1_900_000_000,
                    )
                });
                let after = std::fs::read(&path).unwrap();
                match saved {
                    Err(_) if after != bad => {
                        problems.push(format!("{case}: a refused save changed the file"))
                    }
                    Err(_) if passes => {
                        problems.push(format!("{case}: save refused although check passes"))
                    }
                    Err(_) => {}
                    Ok(()) => {
                        for id in lost(&path, &originals, -4) {
                            if intact(&originals[&id]) {
                                problems.push(format!("{case}: save lost intact entry {id}"));
                            }
                        }
                        if !lost_now.is_empty() && passes {
                            continue;
                        }
                        let disk = Disk::open(&path, false).unwrap();
                        if disk.read(-4).ok() != Some(put.clone()) {
                            problems.push(format!("{case}: the saved entry does not read back"));
                        }
                    }
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn byte_336_of_the_world_sample_is_damage_not_a_torn_append() {
    // The report: 0x01 at byte 336 (the root's child count) made the disk look empty,
    // `check` pass, and the next save truncate the disk to 344 bytes.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("disk");
    let mut bad = std::fs::read(samples::path(TVDA_WORLD)).unwrap();
    assert_eq!(bad.len(), 1379);
    bad[336] = 0x01;
    std::fs::write(&path, &bad).unwrap();
    let mut out = Vec::new();
    let code = worldfs::tvda::inspect::check(&path, &mut out).unwrap();
    let report = String::from_utf8(out).unwrap();
    assert_eq!(code, ExitCode::FAILURE, "{report}");
    assert!(report.contains("damage"), "{report}");
    let disk = Disk::open(&path, false).unwrap();
    assert!(!disk.damage().is_empty());
    assert_eq!(
        disk.entries().filter(|e| e.id != ROOT_ID).count(),
        7,
        "every entry after the damaged root is still found"
    );
    let mut rw = Disk::open(&path, true).unwrap();
    let e = rw
        .commit(
            &[Change::Put {
                id: -4,
                data: b"x".to_vec(),
            }],
            1,
        )
        .unwrap_err();
    assert_eq!(e.errno(), libc::EROFS, "{e}");
    assert!(e.message().contains("damaged"), "{e}");
    assert_eq!(std::fs::read(&path).unwrap(), bad);
    assert_eq!(rw.compact().unwrap_err().errno(), libc::EROFS);
    assert_eq!(std::fs::read(&path).unwrap(), bad);
}

#[test]
fn a_torn_append_is_cut_off_but_reported_by_check() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("disk");
    let good = std::fs::read(samples::path(TVDA_CLEAN)).unwrap();
    let mut torn = good.clone();
    // Half of an appended entry: a valid header claiming 100 bytes, 10 of them written.
    let entry = worldfs::tvda::codec::tvda::encode_entry(-7, 0, 1, 1, &Content::File(vec![5; 100]))
        .unwrap();
    torn.extend_from_slice(&entry[..ENTRY_HEADER_LEN as usize + 16]);
    std::fs::write(&path, &torn).unwrap();
    assert!(!check_passes(&path), "a torn append is reported");
    let disk = Disk::open(&path, false).unwrap();
    assert!(disk.damage().is_empty());
    assert_eq!(disk.torn_tail(), Some((good.len() as u64, 52)));
    let mut rw = Disk::open(&path, true).unwrap();
    rw.commit(
        &[Change::Put {
            id: -4,
            data: b"x".to_vec(),
        }],
        1,
    )
    .unwrap();
    assert!(check_passes(&path));
    let disk = Disk::open(&path, false).unwrap();
    assert_eq!(disk.read(-4).unwrap(), b"x");
    assert_eq!(disk.torn_tail(), None);
    assert_eq!(
        std::fs::read(&path).unwrap().len(),
        good.len() + 36 + 6 + 1,
        "the torn 52 bytes were cut off, the new entry appended"
    );
}

#[test]
fn every_corrupted_byte_of_the_small_tevd_sample_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("disk");
    let good = std::fs::read(samples::path(TEVD_V3_OLD)).unwrap();
    std::fs::write(&path, &good).unwrap();
    let disk = TevdDisk::open(&path, false).unwrap();
    let files: Vec<(i32, Vec<u8>)> = disk
        .ids()
        .into_iter()
        .filter_map(|id| disk.read(id).ok().map(|d| (id, d)))
        .collect();
    assert!(!files.is_empty());
    let found = worldfs::tvda::codec::tevd::scan(&good[..], good.len() as u64).unwrap();
    // The TerranVirtualDisk entry CRC reads only every fourth content byte: a change to one
    // of the other three leaves a disk nothing can tell from a real one.
    let unprotected = |pos: u64| {
        found.records.iter().any(|r| {
            (r.content_offset()..r.end()).contains(&pos) && (pos - r.content_offset()) % 4 != 0
        })
    };
    let mut problems = Vec::new();
    for pos in 0..good.len() {
        let mut bad = good.clone();
        bad[pos] = !bad[pos];
        std::fs::write(&path, &bad).unwrap();
        let passes = check_passes(&path);
        let changed = match TevdDisk::open(&path, false) {
            Ok(d) => files
                .iter()
                .any(|(id, data)| d.read(*id).ok().as_ref() != Some(data)),
            Err(_) => true,
        };
        // A changed name or time is not a lost file; anything that changes a file's
        // bytes or makes one unreachable must fail the check.
        if changed && passes && !unprotected(pos as u64) {
            problems.push(format!("byte {pos}: a file changed, check passes"));
        }
        let saved = TevdDisk::open(&path, true).and_then(|mut d| {
            let root = d.resolve("")?;
            d.create_node(
                root,
                "new-file",
                worldfs::tvda::store::tevd::NewNode::File,
                1,
            )?;
            d.commit()
        });
        let after = std::fs::read(&path).unwrap();
        match saved {
            Err(_) if after != bad => problems.push(format!("byte {pos}: refused save wrote")),
            Ok(()) if !passes => {
                problems.push(format!("byte {pos}: save accepted on a disk check fails"))
            }
            _ => {}
        }
    }
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn a_damaged_disk_mounts_read_only_and_shows_what_is_intact() {
    use worldfs::tvda::tree::TvdaTree;
    use worldfs::vfs::tree::Options;
    use worldfs::vfs::Tree;
    let dir = tempfile::tempdir().unwrap();
    std::env::set_var("WORLDFS_STATE_DIR", dir.path());
    let path = dir.path().join("disk");
    let mut bad = std::fs::read(samples::path(TVDA_WORLD)).unwrap();
    bad[336] = 0x01;
    std::fs::write(&path, &bad).unwrap();
    let tree = TvdaTree::open(
        &path,
        &Options {
            read_only: false,
            cache_bytes: 1 << 20,
        },
    )
    .unwrap();
    assert!(tree.read_only(), "a damaged disk is mounted read-only");
    let path_of = |p: &str| p.split('/').map(String::from).collect::<Vec<_>>();
    let original = Disk::open(&samples::path(TVDA_WORLD), false)
        .unwrap()
        .read(-4)
        .unwrap();
    assert_eq!(*tree.read(&path_of("loadOrder.txt")).unwrap(), original);
    let e = tree.write(&path_of("loadOrder.txt"), b"x").unwrap_err();
    assert_eq!(e.errno(), libc::EROFS);
    let mut names = Vec::new();
    tree.list(&path_of("entries"), 0, &mut |e| {
        names.push(e.name);
        true
    })
    .unwrap();
    assert_eq!(names.len(), 7, "{names:?}");
    assert_eq!(std::fs::read(&path).unwrap(), bad);
}

#[test]
fn a_disk_is_never_written_through_a_link() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real");
    std::fs::copy(samples::path(TVDA_CLEAN), &real).unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    assert_eq!(Disk::open(&link, true).unwrap_err().errno(), libc::ELOOP);
    assert!(
        Disk::open(&link, false).is_ok(),
        "reading the named source is fine"
    );
    let tevd = dir.path().join("tevd");
    std::fs::copy(samples::path(TEVD_V3_OLD), &tevd).unwrap();
    let tevd_link = dir.path().join("tevd-link");
    std::os::unix::fs::symlink(&tevd, &tevd_link).unwrap();
    assert_eq!(
        TevdDisk::open(&tevd_link, true).unwrap_err().errno(),
        libc::ELOOP
    );
    assert_eq!(
        std::fs::read(&real).unwrap(),
        std::fs::read(samples::path(TVDA_CLEAN)).unwrap()
    );
}
