//! The TVDA store against the real-serializer samples and self-made disks: reading, no-op
//! byte identity, append and rewrite commits, compaction, CRCs, torn tails, malformed input.

#[allow(dead_code)]
mod common;

use common::samples::{self, TVDA_CLEAN, TVDA_DIRTY, TVDA_WORLD};
use common::scratch::copy_sample;
use common::tvda::assert_crcs_ok;

use std::path::PathBuf;

use worldfs::tvda::codec::tvda::{Content, DiskKind, Header, ROOT_ID};
use worldfs::tvda::store::tvda::{Change, Disk};

/// A writable copy of a sample in a temporary directory.
fn copy_of(name: &str) -> (tempfile::TempDir, PathBuf) {
    copy_sample(name, "disk")
}

#[test]
fn clean_player_sample_reads_as_spec_says() {
    let disk = Disk::open(&samples::path(TVDA_CLEAN), false).unwrap();
    assert_eq!(disk.header().name(), "Alice");
    assert_eq!(disk.header().kind(), DiskKind::Player);
    assert_eq!(disk.header().disk_crc(), 0xCE42_AA76);
    let ids: Vec<i64> = disk.entries().map(|e| e.id).collect();
    assert_eq!(ids, [-4, -1, 0]);
    assert_eq!(disk.read(-1).unwrap(), br#"{"genver":1}"#);
    assert_eq!(disk.read(-4).unwrap(), b"basegame 0.5.2");
    assert_eq!(
        disk.read_content(0).unwrap(),
        Content::Directory(vec![-4, -1])
    );
    assert_eq!(disk.entry(-1).unwrap().mtime, 1_700_000_000);
    assert_eq!(disk.dead_bytes(), 0);
    assert_crcs_ok(&disk);
    assert!(!disk.check().unwrap().root_listing_stale);
}

#[test]
fn dirty_sample_ignores_discarded_and_last_duplicate_wins() {
    let disk = Disk::open(&samples::path(TVDA_DIRTY), false).unwrap();
    let ids: Vec<i64> = disk.entries().map(|e| e.id).collect();
    assert_eq!(ids, [-1, 0], "discarded -4 must be gone");
    assert_eq!(disk.read(-1).unwrap(), br#"{"genver":2}"#);
    assert_eq!(disk.entry(-1).unwrap().mtime, 1_700_000_060);
    assert!(disk.read(-4).is_err());
    let report = disk.check().unwrap();
    assert!(report.bad_entry_crcs.is_empty());
    assert!(!report.disk_crc_ok, "the sample's disk CRC is stale");
    assert!(report.root_listing_stale);
    assert_eq!(report.dead_bytes, 54 + 56);
}

#[test]
fn world_sample_lists_chunks() {
    let disk = Disk::open(&samples::path(TVDA_WORLD), false).unwrap();
    assert_eq!(disk.header().name(), "Synthetic World");
    assert_eq!(disk.header().kind(), DiskKind::World);
    let ids: Vec<i64> = disk.entries().map(|e| e.id).collect();
    assert_eq!(
        ids,
        [
            -4,
            -1,
            0,
            0x1_0000_0000,
            0x1_0000_0003,
            0x1_0100_0000,
            0x1_0200_0000,
            0x1_0300_0000
        ]
    );
    for id in &ids[3..] {
        assert!(disk
            .read(*id)
            .unwrap()
            .starts_with(&[0x28, 0xB5, 0x2F, 0xFD]));
    }
    assert_crcs_ok(&disk);
}

#[test]
fn open_close_and_noop_commit_leave_every_sample_identical() {
    for name in [TVDA_CLEAN, TVDA_DIRTY, TVDA_WORLD] {
        let (_dir, path) = copy_of(name);
        let before = std::fs::read(&path).unwrap();
        {
            let mut disk = Disk::open(&path, true).unwrap();
            let ids: Vec<i64> = disk
                .entries()
                .map(|e| e.id)
                .filter(|&id| id != ROOT_ID)
                .collect();
            let same: Vec<Change> = ids
                .iter()
                .map(|&id| Change::Put {
                    id,
                    data: disk.read(id).unwrap(),
                })
                .collect();
            disk.commit(&same, 1_800_000_000).unwrap();
        }
        assert_eq!(std::fs::read(&path).unwrap(), before, "{name} changed");
    }
}

#[test]
fn single_change_appends_like_the_game_and_reopens() {
    let (_dir, path) = copy_of(TVDA_DIRTY);
    let len_before = std::fs::metadata(&path).unwrap().len();
    let mut disk = Disk::open(&path, true).unwrap();
    disk.commit(
        &[Change::Put {
            id: -1,
            data: br#"{"genver":3}"#.to_vec(),
        }],
        1_800_000_000,
    )
    .unwrap();
    let after = std::fs::read(&path).unwrap();
    assert_eq!(after.len() as u64, len_before + 54, "one appended entry");
    // Both older -1 entries are discarded now, the new one is last.
    assert_eq!(after[0x164 + 16], 0x81);
    assert_eq!(after[0x1D2 + 16], 0x81);
    let disk = Disk::open(&path, false).unwrap();
    assert_eq!(disk.read(-1).unwrap(), br#"{"genver":3}"#);
    assert_eq!(disk.entry(-1).unwrap().mtime, 1_800_000_000);
    assert_eq!(disk.entry(-1).unwrap().ctime, 1_700_000_000);
    assert_eq!(
        disk.entry(0).unwrap().mtime,
        1_800_000_000,
        "root mtime poked at 326"
    );
    assert_crcs_ok(&disk);
}

/// A dated commit (a restore) gives the entries it puts its time, and those it makes that
/// time as their creation time too, appended or rewritten; the root listing takes the time
/// of the change.
#[test]
fn dated_commits_stamp_the_entries_with_their_own_time() {
    let (_dir, path) = copy_of(TVDA_DIRTY);
    let mut disk = Disk::open(&path, true).unwrap();
    let put = |id, data: &[u8]| Change::Put {
        id,
        data: data.to_vec(),
    };
    disk.commit_dated(&[put(-1, br#"{"genver":3}"#)], 1_800_000_000, 1_600_000_000)
        .unwrap();
    disk.commit_dated(&[put(77, b"new")], 1_800_000_001, 1_600_000_001)
        .unwrap();
    let reopened = Disk::open(&path, false).unwrap();
    let entry = |id| reopened.entry(id).unwrap();
    assert_eq!(
        (entry(-1).ctime, entry(-1).mtime),
        (1_700_000_000, 1_600_000_000)
    );
    assert_eq!(
        (entry(77).ctime, entry(77).mtime),
        (1_600_000_001, 1_600_000_001)
    );
    assert_eq!(
        entry(0).mtime,
        1_800_000_001,
        "the root takes the change's time"
    );
    assert_crcs_ok(&reopened);
    disk.commit_dated(
        &[put(-4, b"basegame 0.6.0"), put(78, b"also new")],
        1_800_000_002,
        1_600_000_002,
    )
    .unwrap();
    let rewritten = Disk::open(&path, false).unwrap();
    let entry = |id| rewritten.entry(id).unwrap();
    assert_eq!(entry(-4).mtime, 1_600_000_002);
    assert_eq!(
        (entry(78).ctime, entry(78).mtime),
        (1_600_000_002, 1_600_000_002)
    );
    assert_eq!(
        entry(77).mtime,
        1_600_000_001,
        "entries not put keep their times"
    );
    assert_eq!(entry(0).mtime, 1_800_000_002);
    assert_crcs_ok(&rewritten);
}

#[test]
fn single_removal_sets_the_discard_bit_only() {
    let (_dir, path) = copy_of(TVDA_CLEAN);
    let before = std::fs::read(&path).unwrap();
    let mut disk = Disk::open(&path, true).unwrap();
    disk.commit(&[Change::Remove { id: -4 }], 1_800_000_000)
        .unwrap();
    let after = std::fs::read(&path).unwrap();
    assert_eq!(after.len(), before.len());
    let diff: Vec<usize> = (0..after.len())
        .filter(|&i| after[i] != before[i])
        .collect();
    assert!(diff.contains(&(0x19A + 16)));
    assert!(diff
        .iter()
        .all(|&i| (42..46).contains(&i) || (326..332).contains(&i) || i == 0x19A + 16));
    let disk = Disk::open(&path, false).unwrap();
    assert!(disk.entry(-4).is_none());
    assert_crcs_ok(&disk);
}

/// A daemon killed inside a single-change commit, after the entry and before the header
/// (simulated: the header's bytes put back as they were): opening leaves the disk as it
/// is, the mount's `finish_interrupted` finishes the commit, writing the disk CRC and
/// nothing else; the entries read the same. A disk whose CRC is stale for another reason (a game
/// quicksave) is left byte for byte.
#[test]
fn a_commit_cut_before_its_header_is_finished_by_the_next_mount() {
    let put = Change::Put {
        id: -4,
        data: b"new bytes of -4".to_vec(),
    };
    let remove = Change::Remove { id: -4 };
    let added = Change::Put {
        id: 77,
        data: b"a new entry".to_vec(),
    };
    for change in [put, remove, added] {
        let (_dir, path) = copy_of(TVDA_CLEAN);
        let before = std::fs::read(&path).unwrap();
        Disk::open(&path, true)
            .unwrap()
            .commit(std::slice::from_ref(&change), 1_800_000_000)
            .unwrap();
        let mut cut = std::fs::read(&path).unwrap();
        cut[42..50].copy_from_slice(&before[42..50]);
        std::fs::write(&path, &cut).unwrap();
        let stale = Disk::open(&path, false).unwrap();
        assert!(!stale.check().unwrap().disk_crc_ok, "{change:?}");
        let shown: Vec<_> = stale.entries().collect();
        drop(stale);
        assert_eq!(std::fs::read(&path).unwrap(), cut, "a read-only open wrote");
        let mut reopened = Disk::open(&path, true).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), cut, "an open alone wrote");
        assert!(reopened.finish_interrupted().unwrap(), "{change:?}");
        assert!(!reopened.finish_interrupted().unwrap(), "done once");
        drop(reopened);
        let done = std::fs::read(&path).unwrap();
        let changed: Vec<usize> = (0..done.len()).filter(|&i| done[i] != cut[i]).collect();
        assert!(
            !changed.is_empty() && changed.iter().all(|i| (42..46).contains(i)),
            "{change:?}: {changed:?}"
        );
        let disk = Disk::open(&path, false).unwrap();
        assert_crcs_ok(&disk);
        assert_eq!(disk.entries().collect::<Vec<_>>(), shown);
    }
    for name in [TVDA_DIRTY, TVDA_WORLD] {
        let (_dir, path) = copy_of(name);
        let before = std::fs::read(&path).unwrap();
        let crc_ok = Disk::open(&path, false)
            .unwrap()
            .check()
            .unwrap()
            .disk_crc_ok;
        drop(Disk::open(&path, true).unwrap());
        assert_eq!(
            std::fs::read(&path).unwrap(),
            before,
            "{name} (disk CRC valid: {crc_ok})"
        );
    }
}

#[test]
fn several_changes_rewrite_cleanly() {
    let (_dir, path) = copy_of(TVDA_DIRTY);
    let mut disk = Disk::open(&path, true).unwrap();
    disk.commit(
        &[
            Change::Put {
                id: -4,
                data: b"basegame 0.6.0".to_vec(),
            },
            Change::Put {
                id: -1,
                data: br#"{"genver":5}"#.to_vec(),
            },
            Change::Put {
                id: 0x1000_0000,
                data: b"{}".to_vec(),
            },
        ],
        1_800_000_000,
    )
    .unwrap();
    let disk = Disk::open(&path, false).unwrap();
    let report = disk.check().unwrap();
    assert_eq!(report.dead_bytes, 0);
    assert!(!report.root_listing_stale);
    assert_crcs_ok(&disk);
    assert_eq!(disk.read(-4).unwrap(), b"basegame 0.6.0");
    assert_eq!(disk.read(-1).unwrap(), br#"{"genver":5}"#);
    assert_eq!(disk.read(0x1000_0000).unwrap(), b"{}");
    assert_eq!(disk.header().name(), "Alice");
}

#[test]
fn compaction_matches_the_clean_sample() {
    // The dirty sample compacted is the clean sample with -4 removed and -1 = genver 2.
    let (_dir, path) = copy_of(TVDA_DIRTY);
    let mut disk = Disk::open(&path, true).unwrap();
    disk.compact().unwrap();
    assert_eq!(disk.dead_bytes(), 0);
    assert_crcs_ok(&disk);
    assert!(!disk.check().unwrap().root_listing_stale);
    assert_eq!(disk.read(-1).unwrap(), br#"{"genver":2}"#);
    let (_d2, expect) = {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("expect");
        let mut header = Header::parse(&std::fs::read(samples::path(TVDA_CLEAN)).unwrap()).unwrap();
        header.set_disk_crc(0);
        Disk::create(
            &p,
            header,
            &[(-1, Content::File(br#"{"genver":2}"#.to_vec()))],
            1_700_000_000,
        )
        .unwrap();
        (dir, p)
    };
    let mut want = std::fs::read(&expect).unwrap();
    let got = std::fs::read(&path).unwrap();
    // The appended -1 kept its own mtime (+60); patch that into the expectation.
    want[300 + 48 + 26..300 + 48 + 32].copy_from_slice(&got[300 + 48 + 26..300 + 48 + 32]);
    assert_eq!(got, want);
    // Compacting a clean disk writes nothing.
    let before = std::fs::metadata(&path).unwrap().modified().unwrap();
    disk.compact().unwrap();
    assert_eq!(
        std::fs::metadata(&path).unwrap().modified().unwrap(),
        before
    );
}

#[test]
fn clean_sample_is_reproduced_by_create() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("alice");
    let header = Header::new("Alice", 1).unwrap();
    Disk::create(
        &path,
        header,
        &[
            (-1, Content::File(br#"{"genver":1}"#.to_vec())),
            (-4, Content::File(b"basegame 0.5.2".to_vec())),
        ],
        1_700_000_000,
    )
    .unwrap();
    assert_eq!(
        std::fs::read(&path).unwrap(),
        std::fs::read(samples::path(TVDA_CLEAN)).unwrap()
    );
}

#[test]
fn torn_append_reads_as_the_old_state() {
    let (_dir, path) = copy_of(TVDA_CLEAN);
    let clean = std::fs::read(&path).unwrap();
    let mut disk = Disk::open(&path, true).unwrap();
    disk.commit(
        &[Change::Put {
            id: -1,
            data: br#"{"genver":9,"x":"yyyy"}"#.to_vec(),
        }],
        1_800_000_000,
    )
    .unwrap();
    let full = std::fs::read(&path).unwrap();
    // Every prefix of the appended entry (and the appended entry zero-filled) reads as old.
    for cut in clean.len()..full.len() {
        for zero_fill in [false, true] {
            let mut torn = full[..cut].to_vec();
            torn[0x174] = 0x01; // before the discard phase the old -1 was live
            if zero_fill {
                torn.resize(full.len(), 0);
            }
            std::fs::write(&path, &torn).unwrap();
            let disk = Disk::open(&path, true).unwrap();
            assert_eq!(
                disk.read(-1).unwrap(),
                br#"{"genver":1}"#,
                "cut {cut} zero {zero_fill}"
            );
        }
    }
    // A commit after a torn append drops the tail first.
    let mut torn = full[..full.len() - 3].to_vec();
    torn[0x174] = 0x01;
    std::fs::write(&path, &torn).unwrap();
    let mut disk = Disk::open(&path, true).unwrap();
    disk.commit(
        &[Change::Put {
            id: -4,
            data: b"new".to_vec(),
        }],
        1_800_000_001,
    )
    .unwrap();
    let disk = Disk::open(&path, false).unwrap();
    assert_eq!(disk.read(-4).unwrap(), b"new");
    assert_eq!(disk.read(-1).unwrap(), br#"{"genver":1}"#);
    assert_crcs_ok(&disk);
}

#[test]
fn many_and_large_entries_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big");
    let entries: Vec<(i64, Content)> = (0..3000)
        .map(|i| {
            (
                0x1_0000_0000 + i,
                Content::File(vec![(i % 251) as u8; (i % 97) as usize]),
            )
        })
        .chain(std::iter::once((-1, Content::File(vec![7; 5 << 20]))))
        .collect();
    let mut disk = Disk::create(&path, Header::new("Big", 2).unwrap(), &entries, 1).unwrap();
    assert_eq!(disk.len(), 3002);
    assert_crcs_ok(&disk);
    disk.commit(
        &[Change::Put {
            id: -1,
            data: vec![8; 6 << 20],
        }],
        2,
    )
    .unwrap();
    assert_eq!(
        disk.header().save_mode() & 1,
        1,
        "world disk marked dirty after append"
    );
    assert_crcs_ok(&disk);
    disk.commit(
        &[
            Change::Remove { id: 0x1_0000_0005 },
            Change::Put {
                id: 0x1_0000_0006,
                data: vec![1, 2, 3],
            },
        ],
        3,
    )
    .unwrap();
    assert_eq!(disk.header().save_mode() & 1, 0, "clean after a rewrite");
    let disk = Disk::open(&path, false).unwrap();
    assert_eq!(disk.len(), 3001);
    assert_eq!(disk.read(-1).unwrap(), vec![8; 6 << 20]);
    assert_eq!(disk.read(0x1_0000_0006).unwrap(), [1, 2, 3]);
    assert_eq!(disk.read(0x1_0000_0007).unwrap(), vec![7; 7]);
    assert_eq!(disk.dead_bytes(), 0);
    assert_crcs_ok(&disk);
}

#[test]
fn read_only_and_changed_underneath_are_refused() {
    let (_dir, path) = copy_of(TVDA_CLEAN);
    let mut ro = Disk::open(&path, false).unwrap();
    let put = [Change::Put {
        id: -4,
        data: b"x".to_vec(),
    }];
    assert_eq!(ro.commit(&put, 1).unwrap_err().errno(), libc::EROFS);
    let mut rw = Disk::open(&path, true).unwrap();
    let mut other = Disk::open(&path, true).unwrap();
    other.commit(&put, 1).unwrap();
    assert!(rw.changed_on_disk().unwrap());
    assert_eq!(rw.commit(&put, 2).unwrap_err().errno(), libc::EBUSY);
    rw.reload().unwrap();
    assert_eq!(rw.read(-4).unwrap(), b"x");
    assert!(rw.commit(&[Change::Remove { id: 0 }], 1).is_err());
    let before = std::fs::read(&path).unwrap();
    rw.commit(&[Change::Remove { id: 12345 }], 1).unwrap();
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "removing nothing writes nothing"
    );
}

#[test]
fn malformed_disks_give_errors_never_panics() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad");
    for name in [TVDA_CLEAN, TVDA_DIRTY, TVDA_WORLD] {
        let good = std::fs::read(samples::path(name)).unwrap();
        let mut cases: Vec<Vec<u8>> = (0..good.len())
            .step_by(7)
            .map(|n| good[..n].to_vec())
            .collect();
        for i in 0..good.len() {
            for bit in [0x01u8, 0x80] {
                let mut flipped = good.clone();
                flipped[i] ^= bit;
                cases.push(flipped);
            }
        }
        for case in cases {
            std::fs::write(&path, &case).unwrap();
            if let Ok(disk) = Disk::open(&path, false) {
                for e in disk.entries().collect::<Vec<_>>() {
                    let _ = disk.read(e.id);
                    let _ = disk.read_content(e.id);
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

    fn change() -> impl Strategy<Value = Change> {
        prop_oneof![
            3 => (-6i64..6, proptest::collection::vec(any::<u8>(), 0..64))
                .prop_filter("not root", |(id, _)| *id != 0)
                .prop_map(|(id, data)| Change::Put { id, data }),
            1 => (-6i64..6).prop_filter("not root", |id| *id != 0).prop_map(|id| Change::Remove { id }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        /// Any sequence of commits (single ones appended, batches rewritten, compactions)
        /// reads back like a plain map, after re-opening, with every CRC valid.
        #[test]
        fn commits_match_a_map(batches in proptest::collection::vec((proptest::collection::vec(change(), 1..4), any::<bool>()), 1..8)) {
            let (_dir, path) = copy_of(TVDA_DIRTY);
            let mut disk = Disk::open(&path, true).unwrap();
            let mut model: BTreeMap<i64, Vec<u8>> = BTreeMap::new();
            model.insert(-1, br#"{"genver":2}"#.to_vec());
            let original = std::fs::read(&path).unwrap();
            for (i, (batch, compact)) in batches.iter().enumerate() {
                for c in batch {
                    match c {
                        Change::Put { id, data } => { model.insert(*id, data.clone()); }
                        Change::Remove { id } => { model.remove(id); }
                    }
                }
                disk.commit(batch, 1_800_000_000 + i as u64).unwrap();
                if *compact {
                    disk.compact().unwrap();
                }
                let reopened = Disk::open(&path, false).unwrap();
                let got: BTreeMap<i64, Vec<u8>> = reopened
                    .entries()
                    .filter(|e| e.id != 0)
                    .map(|e| (e.id, reopened.read(e.id).unwrap()))
                    .collect();
                prop_assert_eq!(&got, &model);
                let report = reopened.check().unwrap();
                prop_assert!(report.bad_entry_crcs.is_empty(), "{:?}", report);
                // The sample's own disk CRC is stale until something is written.
                prop_assert!(report.disk_crc_ok || std::fs::read(&path).unwrap() == original, "{:?}", report);
            }
        }
    }
}
