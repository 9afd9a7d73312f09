//! TVDA and TEVD helpers: the CRC checks of both kinds of disk.

use worldfs::tvda::store::tevd::TevdDisk;
use worldfs::tvda::store::tvda::Disk;

/// Asserts every stored CRC of a TVDA disk checks out.
pub fn assert_crcs_ok(disk: &Disk) {
    let report = disk.check().unwrap();
    assert!(report.bad_entry_crcs.is_empty(), "{report:?}");
    assert!(report.disk_crc_ok, "{report:?}");
}

/// Asserts every stored CRC of a TEVD disk checks out.
pub fn assert_tevd_crcs_ok(disk: &TevdDisk) {
    let c = disk.check().unwrap();
    assert!(c.bad_entry_crcs.is_empty() && c.disk_crc_ok, "{c:?}");
}
