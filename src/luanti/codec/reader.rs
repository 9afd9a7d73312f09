//! A bounds-checked big-endian reader over a byte slice, and the matching writers.
//!
//! Every read names what it was reading, so a truncated or corrupt block reports e.g.
//! "static object 3 data: data ends early" instead of panicking; lengths read from the
//! data are only ever used to slice the input, never to pre-allocate.

use crate::error::{Error, Result};

/// The longest String32 the engine accepts (`LONG_STRING_MAX_LEN`, 64 MiB).
pub const LONG_STRING_MAX: usize = 64 << 20;

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
}
