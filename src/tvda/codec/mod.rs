//! Pure byte codecs of the TEVd disk family: no I/O besides positioned reads through
//! [`crate::bytes::ReadAt`], so the same code runs over a file and over a disk image in a test.
//!
//! - [`tvda`]: the TVDA container (the 300-byte header, entries, CRCs, the index scan);
//! - [`tevd`]: the TEVD v2/v3 container (header variants, named entries, the footer);
//! - [`chunk`]: chunk entry IDs and the tile layers inside a chunk entry;
//! - [`compress`]: gzip, zstd and Snappy framings of entry contents.

pub mod chunk;
pub mod compress;
pub mod tevd;
pub mod tvda;
