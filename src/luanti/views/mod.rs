//! Text views of a map block: the files of `blocks/X,Y,Z/`.
//! (Placeholder signatures; the views work replaces the bodies.)

use crate::error::Result;
use crate::luanti::block::{BlockPos, MapBlock};

/// `nodes.cubeset`: node names and param2 as a Cubeset file.
pub fn render_nodes(block: &MapBlock) -> Vec<u8> {
    let _ = block;
    unimplemented!("views")
}

/// Parses `nodes.cubeset` into `block` (names, content, param2), canonically.
pub fn parse_nodes(text: &[u8], block: &mut MapBlock) -> Result<()> {
    let _ = (text, block);
    unimplemented!("views")
}

/// `light.txt`: param1 of every node, layer by layer.
pub fn render_light(block: &MapBlock) -> Vec<u8> {
    let _ = block;
    unimplemented!("views")
}

/// Parses `light.txt` into `block.param1`.
pub fn parse_light(text: &[u8], block: &mut MapBlock) -> Result<()> {
    let _ = (text, block);
    unimplemented!("views")
}

/// `block.txt`: version, flags, lighting_complete, timestamp.
pub fn render_header(block: &MapBlock) -> Vec<u8> {
    let _ = block;
    unimplemented!("views")
}

/// Parses `block.txt` into `block`.
pub fn parse_header(text: &[u8], block: &mut MapBlock) -> Result<()> {
    let _ = (text, block);
    unimplemented!("views")
}

/// `timers.txt`: node timers, positions relative to the block.
pub fn render_timers(block: &MapBlock) -> Vec<u8> {
    let _ = block;
    unimplemented!("views")
}

/// Parses `timers.txt` into `block.timers`.
pub fn parse_timers(text: &[u8], block: &mut MapBlock) -> Result<()> {
    let _ = (text, block);
    unimplemented!("views")
}

/// `objects.txt`: static objects, positions relative to the block at `pos`.
pub fn render_objects(block: &MapBlock, pos: BlockPos) -> Vec<u8> {
    let _ = (block, pos);
    unimplemented!("views")
}

/// Parses `objects.txt` into `block.objects` for the block at `pos`.
pub fn parse_objects(text: &[u8], pos: BlockPos, block: &mut MapBlock) -> Result<()> {
    let _ = (text, pos, block);
    unimplemented!("views")
}
