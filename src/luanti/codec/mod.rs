//! Map-block codec: the disk form of serialization versions 22–29 ⇄ [`MapBlock`].
//!
//! Layout (all integers big-endian; see `specs/luanti.md` §1.3):
//! * v22–28: `u8 version`, flags, lighting_complete (v27+), content/params width,
//!   zlib{node data}, zlib{node metadata}, v23: an unused byte, v24: node timers, static
//!   objects, timestamp, name-id mapping, v25+: node timers.
//! * v29: `u8 version` then one zstd frame holding flags, lighting_complete, timestamp,
//!   name-id mapping, widths, node data, node metadata, static objects, node timers.
//!
//! Decoding is strict where the engine would lose data silently: trailing bytes, duplicate
//! metadata positions and metadata errors (which the engine skips for v < 29) make a block
//! corrupt rather than half-read. Encoding writes what the engine writes (dense ids,
//! content_width 2, metadata list version 1/2, static objects version 0) at the block's own
//! version, except that 22 and 23 — which the engine can read but not write — become 25.
//!
//! Limits against hostile input: at most [`MAX_DECOMPRESSED`] bytes are decompressed per
//! block, at most [`MAX_BLOCK_SLOTS`] inventory slots are created per block, every count
//! is checked against the bytes left before anything is allocated for it, and a decoded
//! block may hold at most [`MAX_DECODED`] bytes of memory ([`MapBlock::memory`]). Each is
//! far above what a real block holds, and small enough that a block which compresses
//! 65,535 objects or a million slots into a few bytes costs a bounded amount of memory and
//! fails with a clear error.

pub mod auth_line;
pub mod block;
pub mod inventory;
pub mod leveldb_records;
pub mod player;
pub mod settings;

mod compress;
mod nodemeta;
mod nodes;
mod objects;
mod timers;

use crate::bytes::{put_u16, put_u32, Reader};
use crate::error::{Error, Result};
use crate::luanti::codec::block::MapBlock;
use compress::{decode_zstd, deflate_zlib, encode_zstd, inflate_zlib};

/// The most bytes decompressed from one block. Real blocks hold about 16 KiB of node data
/// plus their metadata (a block full of chests: a few MiB) and objects (the engine stores at
/// most `max_objects_per_block`, 256 by default, per block).
pub const MAX_DECOMPRESSED: usize = 12 << 20;

/// The most bytes of one stored block that are read: real blocks are compressed to a few
/// KiB; a larger row is refused rather than loaded into memory. A block whose encoding
/// would pass it is refused at the write ([`encode_block`]), so what the mount writes it
/// reads back.
pub const MAX_STORED: usize = 8 << 20;

/// The most inventory slots (summed over all node inventories) one block may declare: a
/// block of 4,096 chests has 131,072.
pub const MAX_BLOCK_SLOTS: usize = 1 << 18;

/// The most memory one decoded block may hold ([`MapBlock::memory`]).
pub const MAX_DECODED: usize = 12 << 20;

/// What decoding one block may still create: inventory slots, and bytes of memory for the
/// parts that can be many times larger decoded than stored (objects, metadata variables,
/// inventories). Charged before or as they are made, so a block that would pass
/// [`MAX_DECODED`] stops early instead of first allocating it all.
pub(crate) struct Budget {
    pub slots: usize,
    memory: usize,
}

impl Budget {
    fn new() -> Budget {
        Budget {
            slots: MAX_BLOCK_SLOTS,
            memory: MAX_DECODED,
        }
    }

    /// Takes `bytes` of memory for `what`, or fails when the block would pass its bound.
    pub fn charge(&mut self, bytes: usize, what: &str) -> Result<()> {
        match self.memory.checked_sub(bytes) {
            Some(left) => {
                self.memory = left;
                Ok(())
            }
            None => Err(Error::corrupt(format!(
                "{what}: the block would take more than {} MiB of memory once decoded; at \
                 most {} MiB are allowed per block",
                MAX_DECODED >> 20,
                MAX_DECODED >> 20
            ))),
        }
    }
}

/// The oldest and newest serialization versions handled.
pub const MIN_VERSION: u8 = 22;
pub const MAX_VERSION: u8 = 29;

/// Decodes the disk form of a block (version byte + payload).
pub fn decode_block(data: &[u8]) -> Result<MapBlock> {
    let (&version, payload) = data
        .split_first()
        .ok_or_else(|| Error::corrupt("map block: empty blob"))?;
    check_version(version)?;
    let mut budget = MAX_DECOMPRESSED;
    let block = if version >= 29 {
        let (raw, used) = decode_zstd(payload, &mut budget, "map block")?;
        check_trailing(payload.get(used..).unwrap_or_default(), "the zstd frame")?;
        decode_v29(&raw)?
    } else {
        decode_zlib_layout(version, payload, &mut budget)?
    };
    let memory = block.memory();
    if memory > MAX_DECODED {
        return Err(Error::corrupt(format!(
            "map block decodes to {} MiB in memory ({} static objects, {} metadata entries, \
             {} node timers); at most {} MiB are allowed per block",
            memory >> 20,
            block.objects.len(),
            block.metadata.len(),
            block.timers.len(),
            MAX_DECODED >> 20
        )));
    }
    Ok(block)
}

/// Encodes a block at its own version (22 and 23 are written as 25).
pub fn encode_block(block: &MapBlock) -> Result<Vec<u8>> {
    let version = match block.version {
        22 | 23 => 25,
        v @ 24..=29 => v,
        v => {
            return Err(Error::invalid(format!(
                "cannot write map block version {v}; versions 22-29 only"
            )))
        }
    };
    if version < 27 && block.lighting_complete != 0xFFFF {
        return Err(Error::invalid(format!(
            "lighting_complete needs block version 27 or later (this block is {version}); \
             it must be 65535"
        )));
    }
    let nodes = nodes::encode_nodes(block)?;
    let mut meta = Vec::new();
    nodemeta::write_meta_list(&block.metadata, version, &mut meta)?;
    let mut objects = Vec::new();
    objects::write_objects(&block.objects, &mut objects)?;
    let mut timers = Vec::new();
    timers::write_timers(&block.timers, version, &mut timers)?;

    let mut out = vec![version];
    if version >= 29 {
        let mut raw = Vec::with_capacity(
            16 + nodes.name_ids.len()
                + nodes.nodes.len()
                + meta.len()
                + objects.len()
                + timers.len(),
        );
        raw.push(block.flags);
        put_u16(&mut raw, block.lighting_complete);
        put_u32(&mut raw, block.timestamp);
        raw.extend_from_slice(&nodes.name_ids);
        raw.extend_from_slice(&[2, 2]);
        raw.extend_from_slice(&nodes.nodes);
        raw.extend_from_slice(&meta);
        raw.extend_from_slice(&objects);
        raw.extend_from_slice(&timers);
        check_size(raw.len())?;
        encode_zstd(&raw, &mut out)?;
    } else {
        check_size(nodes.nodes.len() + meta.len())?;
        out.push(block.flags);
        if version >= 27 {
            put_u16(&mut out, block.lighting_complete);
        }
        out.extend_from_slice(&[2, 2]);
        deflate_zlib(&nodes.nodes, &mut out)?;
        deflate_zlib(&meta, &mut out)?;
        if version == 24 {
            out.extend_from_slice(&timers);
        }
        out.extend_from_slice(&objects);
        put_u32(&mut out, block.timestamp);
        out.extend_from_slice(&nodes.name_ids);
        if version >= 25 {
            out.extend_from_slice(&timers);
        }
    }
    if out.len() > MAX_STORED {
        return Err(Error::new(
            libc::EFBIG,
            format!(
                "the block would be stored in {} bytes; at most {MAX_STORED} are read back, so \
                 it is not written",
                out.len()
            ),
        ));
    }
    Ok(out)
}

/// The benchmark floor: decompresses every compressed part of a blob and returns the total
/// decompressed length, without decoding anything.
pub fn decompress_only(data: &[u8]) -> Result<usize> {
    let (&version, payload) = data
        .split_first()
        .ok_or_else(|| Error::corrupt("map block: empty blob"))?;
    check_version(version)?;
    let mut budget = MAX_DECOMPRESSED;
    if version >= 29 {
        return Ok(decode_zstd(payload, &mut budget, "map block")?.0.len());
    }
    let mut r = Reader::new(payload);
    r.skip(if version >= 27 { 5 } else { 3 }, "block header")?;
    let (node_data, used) = inflate_zlib(r.rest(), &mut budget, "node data")?;
    r.skip(used, "node data")?;
    let (meta, _) = inflate_zlib(r.rest(), &mut budget, "node metadata")?;
    Ok(node_data.len() + meta.len())
}

fn check_version(version: u8) -> Result<()> {
    if version < MIN_VERSION {
        return Err(Error::unsupported(format!(
            "map block version {version} is not supported: only versions 22-29 are (0-21 \
             were written before Minetest 0.4.dev-20120122)"
        )));
    }
    if version > MAX_VERSION {
        return Err(Error::unsupported(format!(
            "map block version {version} is newer than 29 (saved by a newer Luanti?)"
        )));
    }
    Ok(())
}

fn check_size(raw_len: usize) -> Result<()> {
    if raw_len > MAX_DECOMPRESSED {
        return Err(Error::new(
            libc::EFBIG,
            format!(
                "block would decompress to {raw_len} bytes; at most {MAX_DECOMPRESSED} are \
                 allowed"
            ),
        ));
    }
    Ok(())
}

fn check_trailing(rest: &[u8], after: &str) -> Result<()> {
    match rest {
        [] => Ok(()),
        [2] => Err(network_form()),
        _ => Err(Error::corrupt(format!(
            "map block: {} unexpected bytes after {after}",
            rest.len()
        ))),
    }
}

fn network_form() -> Error {
    Error::corrupt(
        "map block is in the network form (ends with the network-specific byte 2), \
         not the disk form",
    )
}

/// Reads content_width and params_width.
fn widths(r: &mut Reader<'_>) -> Result<u8> {
    let content_width = r.u8("content width")?;
    let params_width = r.u8("params width")?;
    if content_width != 1 && content_width != 2 {
        return Err(Error::corrupt(format!(
            "invalid content width {content_width}"
        )));
    }
    if params_width != 2 {
        return Err(Error::corrupt(format!(
            "invalid params width {params_width}"
        )));
    }
    Ok(content_width)
}

fn decode_zlib_layout(version: u8, payload: &[u8], budget: &mut usize) -> Result<MapBlock> {
    let mut r = Reader::new(payload);
    let flags = r.u8("flags")?;
    let lighting_complete = if version >= 27 {
        r.u16("lighting_complete")?
    } else {
        0xFFFF
    };
    let content_width = widths(&mut r)?;
    let (node_data, used) = inflate_zlib(r.rest(), budget, "node data")?;
    r.skip(used, "node data")?;
    let (meta_data, used) = inflate_zlib(r.rest(), budget, "node metadata")?;
    r.skip(used, "node metadata")?;

    let mut limits = Budget::new();
    let mut meta = Reader::new(&meta_data);
    let (metadata, mut timers) = if version >= 23 {
        (
            nodemeta::read_meta_list(&mut meta, &mut limits)?,
            Vec::new(),
        )
    } else {
        nodemeta::read_legacy_meta_list(&mut meta, &mut limits)?
    };
    if meta.remaining() != 0 {
        return Err(Error::corrupt(format!(
            "node metadata: {} unexpected bytes after the list",
            meta.remaining()
        )));
    }
    if r.rest() == [2] {
        // The network form ends right after the metadata.
        return Err(network_form());
    }
    if version == 23 {
        r.u8("unused byte of version 23")?;
    }
    if version == 24 {
        timers = timers::read_timers(&mut r, version)?;
    }
    let objects = objects::read_objects(&mut r, &mut limits)?;
    let timestamp = r.u32("timestamp")?;
    let name_ids = nodes::read_name_ids(&mut r)?;
    if version >= 25 {
        timers = timers::read_timers(&mut r, version)?;
    }
    check_trailing(r.rest(), "the node timers")?;
    let nodes = nodes::decode_nodes(&node_data, content_width, &name_ids)?;
    Ok(MapBlock {
        version,
        flags,
        lighting_complete,
        timestamp,
        names: nodes.names,
        content: nodes.content,
        param1: nodes.param1,
        param2: nodes.param2,
        metadata,
        objects,
        timers,
    })
}

fn decode_v29(raw: &[u8]) -> Result<MapBlock> {
    let mut r = Reader::new(raw);
    let flags = r.u8("flags")?;
    let lighting_complete = r.u16("lighting_complete")?;
    let timestamp = r.u32("timestamp")?;
    let name_ids = nodes::read_name_ids(&mut r)?;
    let content_width = widths(&mut r)?;
    let node_data = r.bytes(nodes::nodes_len(content_width), "node data")?;
    let mut limits = Budget::new();
    let metadata = nodemeta::read_meta_list(&mut r, &mut limits)?;
    let objects = objects::read_objects(&mut r, &mut limits)?;
    let timers = timers::read_timers(&mut r, 29)?;
    check_trailing(r.rest(), "the node timers")?;
    let nodes = nodes::decode_nodes(node_data, content_width, &name_ids)?;
    Ok(MapBlock {
        version: 29,
        flags,
        lighting_complete,
        timestamp,
        names: nodes.names,
        content: nodes.content,
        param1: nodes.param1,
        param2: nodes.param2,
        metadata,
        objects,
        timers,
    })
}
