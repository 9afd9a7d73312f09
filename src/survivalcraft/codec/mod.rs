//! Pure byte codecs of the Survivalcraft formats: the terrain formats and their limits
//! ([`format`]), chunks ([`chunk`]), fixed-size chunk records ([`fixed`]), region files
//! ([`region`]), Project.xml ([`xml`], [`project`]) and the block names shown in comments
//! ([`block_names`]).

pub mod block_names;
pub mod chunk;
pub mod fixed;
pub mod format;
pub mod project;
pub mod region;
pub mod xml;

use crate::error::Result;
use crate::survivalcraft::codec::chunk::{Chunk, ChunkPos};
use crate::survivalcraft::codec::format::TerrainFormat;

/// Decodes a chunk's stored bytes: a whole record of a fixed-size chunk file, or a region
/// chunk's compressed payload (after `CHK1`).
pub fn decode_chunk(format: TerrainFormat, raw: &[u8]) -> Result<Chunk> {
    match format {
        TerrainFormat::Regions => region::decode_payload(raw),
        _ => fixed::decode_record(format, raw).map(|(_, c)| c),
    }
}

/// Encodes a chunk in its own format; `pos` goes into fixed-size record headers.
pub fn encode_chunk(chunk: &Chunk, pos: ChunkPos) -> Result<Vec<u8>> {
    match chunk.format() {
        TerrainFormat::Regions => region::encode_payload(chunk),
        _ => fixed::encode_record(chunk, pos),
    }
}
