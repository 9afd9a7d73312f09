//! The one byte reader of the binary codecs (Luanti map blocks, the TEVd disk family): a
//! bounds-checked big-endian reader over a byte slice, the matching writers, and positioned
//! reads from a disk image.
//!
//! Every read names what it was reading, so a truncated or corrupt block reports e.g.
//! "static object 3 data: data ends early" instead of panicking; lengths read from the
//! data are only ever used to slice the input, never to pre-allocate. [`ReadAt`] gives
//! positioned reads from a file or from memory, so the same scanners run over a disk image
//! in a test and over a real file in a store.

use std::fs::File;
use std::os::unix::fs::FileExt;

use crate::error::{Error, Result};

/// The longest String32 the engine accepts (`LONG_STRING_MAX_LEN`, 64 MiB).
pub const LONG_STRING_MAX: usize = 64 << 20;

/// The largest value of an Int48 field (TEVd sizes and timestamps).
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
pub struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Reader { data, pos: 0 }
    }

    /// Bytes not read yet.
    pub fn rest(&self) -> &'a [u8] {
        self.data.get(self.pos..).unwrap_or_default()
    }

    pub fn remaining(&self) -> usize {
        self.data.len().saturating_sub(self.pos)
    }

    /// Marks `n` more bytes as read (after they were consumed through [`Reader::rest`]).
    pub fn skip(&mut self, n: usize, what: &str) -> Result<()> {
        self.bytes(n, what).map(|_| ())
    }

    pub fn bytes(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&end| end <= self.data.len())
            .ok_or_else(|| {
                Error::corrupt(format!(
                    "{what}: data ends early ({n} bytes needed, {} left)",
                    self.remaining()
                ))
            })?;
        let out = &self.data[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.bytes(N, what)?);
        Ok(out)
    }

    pub fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.array::<1>(what)?[0])
    }

    pub fn u16(&mut self, what: &str) -> Result<u16> {
        Ok(u16::from_be_bytes(self.array(what)?))
    }

    pub fn i16(&mut self, what: &str) -> Result<i16> {
        Ok(i16::from_be_bytes(self.array(what)?))
    }

    pub fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_be_bytes(self.array(what)?))
    }

    pub fn i32(&mut self, what: &str) -> Result<i32> {
        Ok(i32::from_be_bytes(self.array(what)?))
    }

    pub fn i64(&mut self, what: &str) -> Result<i64> {
        Ok(i64::from_be_bytes(self.array(what)?))
    }

    /// A big-endian unsigned 48-bit integer.
    pub fn u48(&mut self, what: &str) -> Result<u64> {
        let b: [u8; 6] = self.array(what)?;
        let mut full = [0; 8];
        full[2..].copy_from_slice(&b);
        Ok(u64::from_be_bytes(full))
    }

    pub fn guid(&mut self, what: &str) -> Result<[u8; 16]> {
        self.array(what)
    }

    /// A String16: u16 length and the bytes.
    pub fn string16(&mut self, what: &str) -> Result<&'a [u8]> {
        let len = self.u16(what)?;
        self.bytes(usize::from(len), what)
    }

    /// A String32: u32 length (at most [`LONG_STRING_MAX`]) and the bytes.
    pub fn string32(&mut self, what: &str) -> Result<&'a [u8]> {
        let len = self.u32(what)?;
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        if len > LONG_STRING_MAX {
            return Err(Error::corrupt(format!(
                "{what}: string of {len} bytes is longer than 64 MiB"
            )));
        }
        self.bytes(len, what)
    }
}

pub fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_be_bytes());
}

pub fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_be_bytes());
}

pub fn put_i32(out: &mut Vec<u8>, v: i32) {
    out.extend_from_slice(&v.to_be_bytes());
}

/// Appends the low 48 bits of `v`, big-endian (as Terrarum's `toInt48` does).
pub fn put_u48(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&(v & INT48_MAX).to_be_bytes()[2..]);
}

/// Writes a String16; `Error::invalid` when longer than 65,535 bytes.
pub fn put_string16(out: &mut Vec<u8>, s: &[u8], what: &str) -> Result<()> {
    let len = u16::try_from(s.len()).map_err(|_| {
        Error::invalid(format!(
            "{what} is {} bytes long; at most 65535 can be stored",
            s.len()
        ))
    })?;
    put_u16(out, len);
    out.extend_from_slice(s);
    Ok(())
}

/// Writes a String32; `Error::invalid` when longer than 64 MiB.
pub fn put_string32(out: &mut Vec<u8>, s: &[u8], what: &str) -> Result<()> {
    if s.len() > LONG_STRING_MAX {
        return Err(Error::invalid(format!(
            "{what} is {} bytes long; at most 64 MiB can be stored",
            s.len()
        )));
    }
    put_u32(out, s.len() as u32);
    out.extend_from_slice(s);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_bounded_and_named() {
        let mut r = Reader::new(&[0, 5, b'a', b'b']);
        let e = r.string16("key").unwrap_err();
        assert_eq!(e.errno(), libc::EIO);
        assert!(e.message().starts_with("key: data ends early"), "{e}");
        let mut r = Reader::new(&[0xFF, 0xFF, 0xFF, 0xFF]);
        assert!(r.string32("value").is_err());
        let mut r = Reader::new(&[0, 1, 0, 0, 0, 2]);
        assert_eq!(r.u16("a").unwrap(), 1);
        assert_eq!(r.u32("b").unwrap(), 2);
        assert_eq!(r.remaining(), 0);
    }

    #[test]
    fn writers_reject_overlong_strings() {
        let mut out = Vec::new();
        assert!(put_string16(&mut out, &vec![0; 65536], "key").is_err());
        put_string16(&mut out, b"ab", "key").unwrap();
        assert_eq!(out, [0, 2, b'a', b'b']);
    }

    #[test]
    fn int48_round_trip_and_short_reads_fail() {
        let mut out = Vec::new();
        put_u48(&mut out, 0x0102_0304_0506);
        put_u48(&mut out, u64::MAX);
        assert_eq!(out, [1, 2, 3, 4, 5, 6, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]);
        let mut c = Reader::new(&out);
        assert_eq!(c.u48("a").unwrap(), 0x0102_0304_0506);
        assert_eq!(c.u48("b").unwrap(), INT48_MAX);
        assert!(c.u8("c").is_err());
        let mut buf = [0; 4];
        assert!(out[..].read_exact_at(&mut buf, 10).is_err());
        assert!(out[..].read_exact_at(&mut buf, u64::MAX).is_err());
        out[..].read_exact_at(&mut buf, 8).unwrap();
        assert_eq!(buf, [0xFF; 4]);
    }
}
