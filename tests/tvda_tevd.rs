//! TEVD v2 / old v3 / current v3 disks as directory trees: the real samples read as the
//! spec says, stay byte-identical when untouched, and survive edits with every CRC valid.

#[allow(dead_code)]
mod common;

use common::samples::{self, TEVD_V2, TEVD_V3, TEVD_V3_OLD, TVDA_CLEAN};
use common::scratch::copy_sample;
use common::tvda::assert_tevd_crcs_ok as assert_crcs_ok;

use std::path::PathBuf;

use worldfs::tvda::codec::tevd::{Layout, TevdKind};
use worldfs::tvda::store::tevd::{NewNode, TevdDisk, TEVD_ROOT};

fn copy_of(name: &str) -> (tempfile::TempDir, PathBuf) {
    copy_sample(name, "disk.tevd")
}

/// Every path under `dir`, sorted, with sizes of files.
fn tree(disk: &TevdDisk, dir: i32, prefix: &str, out: &mut Vec<String>) {
    for n in disk.list(dir).unwrap() {
        let path = format!("{prefix}{}", n.name);
        match n.kind {
            TevdKind::Directory => {
                out.push(format!("{path}/"));
                tree(disk, n.id, &format!("{path}/"), out);
            }
            _ => out.push(format!("{path} {}", disk.read(n.id).unwrap().len())),
        }
    }
}

#[test]
fn samples_open_as_trees() {
    for (name, layout, files) in [
        (TEVD_V3, Layout::V3, 21),
        (TEVD_V2, Layout::V2, 21),
        (TEVD_V3_OLD, Layout::V3Footer, 4),
    ] {
        let disk = TevdDisk::open(&samples::path(name), false).unwrap();
        assert_eq!(disk.layout(), layout, "{name}");
        assert_crcs_ok(&disk);
        let mut paths = Vec::new();
        tree(&disk, TEVD_ROOT, "", &mut paths);
        assert_eq!(
            paths.iter().filter(|p| !p.ends_with('/')).count(),
            files,
            "{name}: {paths:?}"
        );
    }
    let v3 = TevdDisk::open(&samples::path(TEVD_V3), false).unwrap();
    assert_eq!(v3.header().name(), "TVDOS");
    assert_eq!(v3.header().capacity(), 737_280);
    let edit = v3.resolve("tvdos/bin/edit.js").unwrap();
    assert_eq!(v3.info(edit).unwrap().size, 15_928);
    assert_eq!(
        v3.read(v3.resolve("AUTOEXEC.BAT").unwrap()).unwrap().len(),
        218
    );
    assert_eq!(
        v3.info(1).unwrap().name,
        "!BOOTSEC",
        "hidden boot sector is kept"
    );
    assert!(v3.list(TEVD_ROOT).unwrap().iter().all(|n| n.id != 1));
    // v2 and v3 DOSBOOT hold the same files.
    let v2 = TevdDisk::open(&samples::path(TEVD_V2), false).unwrap();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    tree(&v2, TEVD_ROOT, "", &mut a);
    tree(&v3, TEVD_ROOT, "", &mut b);
    a.sort();
    b.sort();
    assert_eq!(a, b);
    let old = TevdDisk::open(&samples::path(TEVD_V3_OLD), false).unwrap();
    let hello = old.read(old.resolve("hello.txt").unwrap()).unwrap();
    assert!(!hello.is_empty());
    assert!(old.resolve("01_preamble/deleteme").is_ok());
}

#[test]
fn untouched_and_noop_writes_stay_identical() {
    for name in [TEVD_V3, TEVD_V2, TEVD_V3_OLD] {
        let (_d, path) = copy_of(name);
        let before = std::fs::read(&path).unwrap();
        let mut disk = TevdDisk::open(&path, true).unwrap();
        let id = disk.resolve("").unwrap();
        let first_file = disk
            .list(id)
            .unwrap()
            .into_iter()
            .find(|n| n.kind == TevdKind::File)
            .unwrap();
        let same = disk.read(first_file.id).unwrap();
        disk.write(first_file.id, &same, 5).unwrap();
        assert!(!disk.has_pending());
        disk.commit().unwrap();
        drop(disk);
        assert_eq!(std::fs::read(&path).unwrap(), before, "{name}");
    }
}

#[test]
fn edits_round_trip_on_every_layout() {
    for name in [TEVD_V3, TEVD_V2, TEVD_V3_OLD] {
        let (_d, path) = copy_of(name);
        let mut disk = TevdDisk::open(&path, true).unwrap();
        let root_files = disk.list(TEVD_ROOT).unwrap();
        let victim = root_files
            .iter()
            .find(|n| n.kind == TevdKind::File)
            .unwrap()
            .clone();
        disk.write(victim.id, b"rewritten\n", 1_900_000_000)
            .unwrap();
        let dir = disk
            .create_node(TEVD_ROOT, "new dir", NewNode::Directory, 1_900_000_000)
            .unwrap();
        let f = disk
            .create_node(dir, "a%2Fb.txt", NewNode::File, 1_900_000_000)
            .unwrap();
        disk.write(f, &vec![42; 70_000], 1_900_000_000).unwrap();
        assert!(
            disk.create_node(dir, "a%2Fb.txt", NewNode::File, 1)
                .is_err(),
            "duplicate name"
        );
        assert_eq!(
            disk.read(f).unwrap().len(),
            70_000,
            "staged data readable before commit"
        );
        disk.commit().unwrap();
        assert!(!disk.changed_on_disk().unwrap());

        let mut disk = TevdDisk::open(&path, true).unwrap();
        assert_crcs_ok(&disk);
        assert_eq!(disk.read(victim.id).unwrap(), b"rewritten\n");
        let f = disk.resolve("new dir/a%2Fb.txt").unwrap();
        assert_eq!(disk.read(f).unwrap(), vec![42; 70_000]);
        assert_eq!(disk.info(f).unwrap().mtime, 1_900_000_000);
        assert!(disk.remove(dir, 1).is_err(), "directory not empty");
        disk.rename(f, TEVD_ROOT, "moved.bin", 1_900_000_001)
            .unwrap();
        disk.remove(dir, 1_900_000_001).unwrap();
        disk.remove(victim.id, 1_900_000_001).unwrap();
        disk.commit().unwrap();

        let disk = TevdDisk::open(&path, false).unwrap();
        assert_crcs_ok(&disk);
        assert!(disk.resolve("new dir").is_err());
        assert!(disk.info(victim.id).is_err());
        assert_eq!(
            disk.read(disk.resolve("moved.bin").unwrap()).unwrap().len(),
            70_000
        );
        if name == TEVD_V3 {
            assert!(disk.info(1).is_ok(), "boot sector survives rewrites");
        }
        assert_eq!(
            disk.layout(),
            TevdDisk::open(&samples::path(name), false)
                .unwrap()
                .layout()
        );
    }
}

#[test]
fn a_commit_past_the_capacity_fails_with_enospc_and_rolls_back() {
    let (_d, path) = copy_of(TEVD_V3);
    let mut disk = TevdDisk::open(&path, true).unwrap();
    let f = disk
        .create_node(TEVD_ROOT, "huge", NewNode::File, 1)
        .unwrap();
    disk.write(f, &vec![0; 700_000], 1).unwrap();
    assert_eq!(disk.commit().unwrap_err().errno(), libc::ENOSPC);
    disk.rollback().unwrap();
    assert!(disk.resolve("huge").is_err());
}

#[test]
fn a_read_only_disk_refuses_a_new_file_with_erofs() {
    let (_d, path) = copy_of(TEVD_V3);
    let mut ro = TevdDisk::open(&path, false).unwrap();
    assert_eq!(
        ro.create_node(TEVD_ROOT, "x", NewNode::File, 1)
            .unwrap_err()
            .errno(),
        libc::EROFS
    );
}

#[test]
fn the_root_cannot_be_removed() {
    let (_d, path) = copy_of(TEVD_V3);
    let mut disk = TevdDisk::open(&path, true).unwrap();
    assert!(disk.remove(TEVD_ROOT, 1).is_err());
}

#[test]
fn a_directory_cannot_move_inside_itself() {
    let (_d, path) = copy_of(TEVD_V3);
    let mut disk = TevdDisk::open(&path, true).unwrap();
    let bin = disk.resolve("tvdos/bin").unwrap();
    let tvdos = disk.resolve("tvdos").unwrap();
    assert!(
        disk.rename(tvdos, bin, "loop", 1).is_err(),
        "no directory inside itself"
    );
}

#[test]
fn fresh_disk_and_tvda_are_told_apart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.tevd");
    let mut disk = TevdDisk::create(&path, "blank", 0, 1_700_000_000).unwrap();
    assert_crcs_ok(&disk);
    for i in 0..300 {
        let f = disk
            .create_node(TEVD_ROOT, &format!("f{i}"), NewNode::File, 2)
            .unwrap();
        disk.write(f, format!("{i}").as_bytes(), 2).unwrap();
    }
    disk.commit().unwrap();
    let disk = TevdDisk::open(&path, false).unwrap();
    assert_eq!(disk.list(TEVD_ROOT).unwrap().len(), 300);
    assert_eq!(disk.read(disk.resolve("f299").unwrap()).unwrap(), b"299");
    assert_crcs_ok(&disk);
    let tvda = samples::path(TVDA_CLEAN);
    assert_eq!(
        TevdDisk::open(&tvda, false).unwrap_err().errno(),
        libc::EOPNOTSUPP
    );
}

#[test]
fn malformed_tevd_gives_errors_never_panics() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad");
    for name in [TEVD_V3_OLD, TEVD_V3] {
        let good = std::fs::read(samples::path(name)).unwrap();
        let step = if good.len() > 10_000 { 331 } else { 1 };
        let mut cases: Vec<Vec<u8>> = (0..good.len())
            .step_by(step * 5)
            .map(|n| good[..n].to_vec())
            .collect();
        for i in (0..good.len()).step_by(step) {
            let mut flipped = good.clone();
            flipped[i] ^= 0x41;
            cases.push(flipped);
        }
        for case in cases {
            std::fs::write(&path, &case).unwrap();
            if let Ok(disk) = TevdDisk::open(&path, false) {
                for id in disk.ids() {
                    let _ = disk.read(id);
                    let _ = disk.info(id);
                    let _ = disk.list(id);
                    let _ = disk.symlink_target(id);
                }
                let _ = disk.check();
            }
        }
    }
}

mod model {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]
        /// Random writes, creates and removes of files in the root of a fresh disk, committed
        /// in random batches, read back like a map with every CRC valid.
        #[test]
        fn file_ops_match_a_map(ops in proptest::collection::vec((0u8..6, proptest::collection::vec(any::<u8>(), 0..300), any::<bool>()), 1..20)) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("p.tevd");
            let mut disk = TevdDisk::create(&path, "prop", 0, 1).unwrap();
            let mut model: BTreeMap<String, Vec<u8>> = BTreeMap::new();
            for (i, (which, data, commit)) in ops.into_iter().enumerate() {
                let name = format!("f{which}");
                if data.len() % 5 == 0 {
                    if let Ok(id) = disk.lookup(TEVD_ROOT, &name) {
                        disk.remove(id, i as u64).unwrap();
                    }
                    model.remove(&name);
                } else {
                    let id = match disk.lookup(TEVD_ROOT, &name) {
                        Ok(id) => id,
                        Err(_) => disk.create_node(TEVD_ROOT, &name, NewNode::File, i as u64).unwrap(),
                    };
                    disk.write(id, &data, i as u64).unwrap();
                    model.insert(name, data);
                }
                if commit {
                    disk.commit().unwrap();
                    let back = TevdDisk::open(&path, false).unwrap();
                    let got: BTreeMap<String, Vec<u8>> = back
                        .list(TEVD_ROOT)
                        .unwrap()
                        .into_iter()
                        .map(|n| (n.name.clone(), back.read(n.id).unwrap()))
                        .collect();
                    prop_assert_eq!(&got, &model);
                    let c = back.check().unwrap();
                    prop_assert!(c.bad_entry_crcs.is_empty() && c.disk_crc_ok);
                }
            }
        }
    }
}

/// One entry of a hand-made disk: ID, parent, kind, name, children (directories), bytes
/// (files).
type HandEntry<'a> = (i32, i32, TevdKind, &'a [u8], &'a [i32], &'a [u8]);

/// A disk of `entries`, root first, with every CRC right: what a hostile or broken writer
/// could make.
fn hand_made(path: &std::path::Path, entries: &[HandEntry]) {
    use worldfs::tvda::codec::tevd::{
        dir_content, file_content, tevd_entry_crc, TevdEntryHeader, TevdHeader,
    };
    use worldfs::tvda::codec::tvda::disk_crc;
    let mut header = TevdHeader::new_v3("hand", 1 << 20).unwrap();
    let (mut body, mut crcs) = (Vec::new(), Vec::new());
    for (id, parent, kind, name, children, data) in entries {
        let content = match kind {
            TevdKind::Directory => dir_content(children).unwrap(),
            _ => file_content(data).unwrap(),
        };
        let h = TevdEntryHeader {
            id: *id,
            parent: *parent,
            kind: *kind,
            name: name.to_vec(),
            ctime: 1,
            mtime: 1,
            crc: tevd_entry_crc(&content),
        };
        crcs.push(h.crc);
        h.encode(&mut body).unwrap();
        body.extend_from_slice(&content);
    }
    header.set_disk_crc(disk_crc(crcs));
    let mut all = header.bytes().to_vec();
    all.extend(body);
    std::fs::write(path, all).unwrap();
}

#[test]
fn listing_cycles_and_repeats_show_a_finite_tree() {
    use TevdKind::{Directory as D, File as F};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cycle.tevd");
    // Directory `a` lists itself, the root and file `f`; `d` lists itself twice; the root
    // lists two files named `x` and one of them twice.
    hand_made(
        &path,
        &[
            (0, 0, D, b"(root)", &[5, 7, 6, 6, 9, 8], b""),
            (5, 0, D, b"a", &[5, 0, 7], b""),
            (7, 0, F, b"f", &[], b"hello"),
            (6, 0, F, b"x", &[], b"six"),
            (9, 0, F, b"x", &[], b"nine"),
            (8, 0, D, b"d", &[8, 8], b""),
        ],
    );
    let disk = TevdDisk::open(&path, true).unwrap();
    let mut all = Vec::new();
    tree(&disk, TEVD_ROOT, "", &mut all);
    assert_eq!(all, ["a/", "a/f 5", "f 5", "x 3", "d/"]);
    assert!(disk.resolve("a/a").is_err() && disk.resolve("a/(root)").is_err());
    assert_eq!(disk.read(disk.resolve("x").unwrap()).unwrap(), b"six");
}

#[test]
fn a_folder_cannot_be_moved_under_itself_when_parent_fields_lie() {
    use TevdKind::Directory as D;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lie.tevd");
    // `b` is listed in `a` but says its parent is the root.
    hand_made(
        &path,
        &[
            (0, 0, D, b"(root)", &[5], b""),
            (5, 0, D, b"a", &[6], b""),
            (6, 0, D, b"b", &[], b""),
        ],
    );
    let mut disk = TevdDisk::open(&path, true).unwrap();
    let (a, b) = (disk.resolve("a").unwrap(), disk.resolve("a/b").unwrap());
    assert!(
        disk.rename(a, b, "a", 2).is_err(),
        "a moved into its own child: the whole folder would vanish from the tree"
    );
    let mut all = Vec::new();
    tree(&disk, TEVD_ROOT, "", &mut all);
    assert_eq!(all, ["a/", "a/b/"]);
}
