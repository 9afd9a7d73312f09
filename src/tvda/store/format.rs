//! Which member of the TEVd disk family a file is, from its first 47 bytes: byte 46 is the
//! spec version (0xFE TVDA, 2 or 3 TEVD, 0x11 the clustered format worldfs does not read).

use std::io::Read;
use std::path::Path;

use crate::error::{Error, Result};
use crate::tvda::codec::tvda::{MAGIC, SPEC_VERSION};

/// A disk format worldfs mounts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskFormat {
    /// A Terrarum savegame disk (spec version 254).
    Tvda,
    /// A TEVD v2 or v3 disk (a directory tree).
    Tevd,
}

/// The format of the file at `path`: `None` when it does not start with `TEVd`, an
/// unsupported error for TEVd versions worldfs does not read.
pub fn sniff(path: &Path) -> Result<Option<DiskFormat>> {
    let mut head = Vec::with_capacity(47);
    std::fs::File::open(path)
        .and_then(|f| f.take(47).read_to_end(&mut head))
        .map_err(|e| Error::from(e).context(path.display()))?;
    if head.get(..4) != Some(MAGIC.as_slice()) {
        return Ok(None);
    }
    match head.get(46).copied() {
        Some(SPEC_VERSION) => Ok(Some(DiskFormat::Tvda)),
        Some(2 | 3) => Ok(Some(DiskFormat::Tevd)),
        Some(0x11) => Err(Error::unsupported(format!(
            "{}: clustered TEVd disks (version 0x11) are not supported",
            path.display()
        ))),
        Some(v) => Err(Error::unsupported(format!(
            "{}: TEVd spec version {v} is not supported (254 TVDA, 2 and 3 TEVD are)",
            path.display()
        ))),
        None => Err(Error::corrupt(format!(
            "{}: a TEVd file shorter than its header",
            path.display()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tells_the_versions_apart() {
        let dir = tempfile::tempdir().unwrap();
        let file = |name: &str, version: Option<u8>, magic: &[u8]| {
            let mut b = magic.to_vec();
            b.resize(64, 0);
            if let Some(v) = version {
                b[46] = v;
            } else {
                b.truncate(20);
            }
            let p = dir.path().join(name);
            std::fs::write(&p, b).unwrap();
            p
        };
        let got = |p: &Path| sniff(p).map_err(|e| e.errno());
        assert_eq!(
            got(&file("a", Some(0xFE), b"TEVd")),
            Ok(Some(DiskFormat::Tvda))
        );
        assert_eq!(
            got(&file("b", Some(3), b"TEVd")),
            Ok(Some(DiskFormat::Tevd))
        );
        assert_eq!(
            got(&file("c", Some(2), b"TEVd")),
            Ok(Some(DiskFormat::Tevd))
        );
        assert_eq!(got(&file("d", Some(3), b"SQLi")), Ok(None));
        assert!(got(&file("e", Some(0x11), b"TEVd")).is_err());
        assert!(got(&file("f", Some(9), b"TEVd")).is_err());
        assert!(got(&file("g", None, b"TEVd")).is_err());
        assert!(sniff(&dir.path().join("missing")).is_err());
    }
}
