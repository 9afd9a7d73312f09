//! A hostile TVDA disk ("Nothing lost"): made with worldfs's own encoders, holding
//! decompression bombs (a zstd chunk, a gzip thumbnail), a JSON bomb of tiny values, JSON
//! nested past any parser's depth, chunks outside the world and of no known codec, an
//! actor that is not JSON and a torn entry claiming a huge size at the end. Opened read-only
//! and read-write with a small cache and read whole through the tree: nothing panics, only
//! the bad objects give errors, the good ones read, and the disk stays byte-identical.

#[allow(dead_code)]
mod common;

use common::hostile::read_whole;

use worldfs::tvda::tree::TvdaTree;
use worldfs::vfs::tree::Options;
use worldfs::vfs::Tree;

#[test]
fn a_hostile_disk_is_read_without_harm() {
    let dir = tempfile::tempdir().unwrap();
    std::env::set_var("WORLDFS_STATE_DIR", dir.path());
    let path = dir.path().join("disk");
    common::hostile::tvda_disk(&path);
    let before = std::fs::read(&path).unwrap();
    for read_only in [true, false] {
        let tree = TvdaTree::open(
            &path,
            &Options {
                read_only,
                cache_bytes: 1 << 20,
            },
        )
        .unwrap();
        let (files, errors) = read_whole(&tree, false);
        assert!(files >= 8, "{files}");
        let bad = common::hostile::TVDA_BAD;
        let unexpected: Vec<_> = errors
            .iter()
            .filter(|(p, _)| !bad.contains(&p.as_str()))
            .collect();
        assert!(
            unexpected.is_empty(),
            "read_only {read_only}: {unexpected:?}"
        );
        // A bad object is left out of its folder's listing (with a warning in the log) or
        // fails when read; by name it always fails.
        let p = |s: &str| s.split('/').map(String::from).collect::<Vec<_>>();
        for b in bad {
            assert!(tree.read(&p(b)).is_err(), "{b} should fail");
        }
        assert!(tree.read(&p("chunks/terrain/0,0.cubeset")).is_ok());
        assert!(tree.read(&p("actors/268435460.json")).is_ok());
        let e = tree.read(&p("actors/268435459.json")).unwrap_err();
        assert_eq!(e.errno(), libc::EFBIG, "{e}");
        let e = tree.read(&p("thumbnail.tga")).unwrap_err();
        assert!(e.message().contains("decompresses to more than"), "{e}");
        drop(tree);
        assert!(
            std::fs::read(&path).unwrap() == before,
            "read_only {read_only}: the disk changed"
        );
    }
}
