//! Map-block codec: the disk form of serialization versions 22–29 ⇄ [`MapBlock`].
//! (Placeholder signatures; the codec work replaces the bodies.)

pub mod inventory;

use crate::error::Result;
use crate::luanti::block::MapBlock;

/// Decodes the disk form of a block (version byte + payload).
pub fn decode_block(data: &[u8]) -> Result<MapBlock> {
    let _ = data;
    unimplemented!("codec")
}

/// Encodes a block at its own version (22 and 23 are written as 25).
pub fn encode_block(block: &MapBlock) -> Result<Vec<u8>> {
    let _ = block;
    unimplemented!("codec")
}

/// The benchmark floor: decompresses every compressed part of a blob and returns the total
/// decompressed length, without decoding anything.
pub fn decompress_only(data: &[u8]) -> Result<usize> {
    let _ = data;
    unimplemented!("codec")
}
