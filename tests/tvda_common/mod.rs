//! Helpers shared by the TVDA and TEVD tests: the samples folder, the sample disks' names
//! and the CRC check of a TVDA disk.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use worldfs::tvda::store::tvda::Disk;

/// `shared/samples/tvda`; panics when the samples are missing.
pub fn samples() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/samples/tvda");
    assert!(
        dir.is_dir(),
        "samples folder {} is missing: the TVDA tests need ../shared/samples/tvda",
        dir.display()
    );
    dir
}

/// One sample disk by file name.
pub fn sample(name: &str) -> PathBuf {
    samples().join(name)
}

pub const CLEAN: &str = "synthetic_tvda-v254_player-min_clean.tvda";
pub const DIRTY: &str = "synthetic_tvda-v254_player-min_dirty-after-skimmer.tvda";
pub const WORLD: &str = "synthetic_tvda-v254_world-min_zstd-chunks.tvda";

/// Asserts every stored CRC of a TVDA disk checks out.
pub fn assert_crcs_ok(disk: &Disk) {
    let report = disk.check().unwrap();
    assert!(report.bad_entry_crcs.is_empty(), "{report:?}");
    assert!(report.disk_crc_ok, "{report:?}");
}
