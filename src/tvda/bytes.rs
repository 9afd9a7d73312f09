//! Big-endian fields of the TEVd disk family, read without panicking on short data.
//!
//! Every TEVd variant (TVDA v254, TEVD v2/v3) stores big-endian integers, including the
//! 48-bit sizes and timestamps. `Cursor` reads them from a byte slice and reports a short
//! slice as corrupt data; `ReadAt` gives positioned reads from a file or from memory, so the
//! same scanners run over a disk image in a test and over a real file in a store.

use std::fs::File;
use std::os::unix::fs::FileExt;

use crate::error::{Error, Result};

/// The largest value of an Int48 field.
pub const INT48_MAX: u64 = (1 << 48) - 1;

/// Positioned reads from a disk image.
pub trait ReadAt {
    /// Fills `buf` from `offset`; fails when the image ends first.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()>;
}

impl ReadAt for [u8] {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let start = usize::try_from(offset).map_err(|_| past_end(offset))?;
        let end = start
            .checked_add(buf.len())
            .ok_or_else(|| past_end(offset))?;
        let src = self.get(start..end).ok_or_else(|| past_end(offset))?;
        buf.copy_from_slice(src);
        Ok(())
    }
}

impl ReadAt for File {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        FileExt::read_exact_at(self, buf, offset).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                past_end(offset)
            } else {
                e.into()
            }
        })
    }
}

fn past_end(offset: u64) -> Error {
    Error::corrupt(format!("read past the end of the disk at offset {offset}"))
}

/// Reads `len` bytes at `offset` into a new vector (the caller has checked `len` against the
/// image size, so this never allocates more than the image holds).
pub fn read_vec(src: &(impl ReadAt + ?Sized), offset: u64, len: u64) -> Result<Vec<u8>> {
    let len = usize::try_from(len).map_err(|_| Error::corrupt("entry too large for memory"))?;
    let mut buf = vec![0; len];
    src.read_exact_at(&mut buf, offset)?;
    Ok(buf)
}

/// Sequential big-endian reads from a slice.
pub struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Cursor { data, pos: 0 }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.data.len().saturating_sub(self.pos)
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).ok_or_else(short)?;
        let out = self.data.get(self.pos..end).ok_or_else(short)?;
        self.pos = end;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    /// One byte.
    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.array::<1>()?[0])
    }

    /// A big-endian u16.
    pub fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    /// A big-endian u32.
    pub fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    /// A big-endian i32.
    pub fn i32(&mut self) -> Result<i32> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    /// A big-endian i64.
    pub fn i64(&mut self) -> Result<i64> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    /// A big-endian unsigned 48-bit integer.
    pub fn u48(&mut self) -> Result<u64> {
        let b: [u8; 6] = self.array()?;
        let mut full = [0; 8];
        full[2..].copy_from_slice(&b);
        Ok(u64::from_be_bytes(full))
    }
}

fn short() -> Error {
    Error::corrupt("data ends inside a field")
}

/// Appends the low 48 bits of `v`, big-endian (as Terrarum's `toInt48` does).
pub fn put_u48(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&(v & INT48_MAX).to_be_bytes()[2..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int48_round_trip_and_short_reads_fail() {
        let mut out = Vec::new();
        put_u48(&mut out, 0x0102_0304_0506);
        put_u48(&mut out, u64::MAX);
        assert_eq!(out, [1, 2, 3, 4, 5, 6, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]);
        let mut c = Cursor::new(&out);
        assert_eq!(c.u48().unwrap(), 0x0102_0304_0506);
        assert_eq!(c.u48().unwrap(), INT48_MAX);
        assert!(c.u8().is_err());
        let mut buf = [0; 4];
        assert!(out[..].read_exact_at(&mut buf, 10).is_err());
        assert!(out[..].read_exact_at(&mut buf, u64::MAX).is_err());
        out[..].read_exact_at(&mut buf, 8).unwrap();
        assert_eq!(buf, [0xFF; 4]);
    }
}
