//! The inventory text format and ItemStack strings.
//! (Placeholder signatures; the codec work replaces the bodies.)

use crate::error::Result;
use crate::luanti::block::{Inventory, ItemStack};

/// Parses the inventory text format; errors name the line (and column where useful).
pub fn parse_inventory(text: &[u8]) -> Result<Inventory> {
    let _ = text;
    unimplemented!("codec")
}

/// Writes the inventory text format, ending with `EndInventory\n`.
pub fn serialize_inventory(inv: &Inventory) -> Vec<u8> {
    let _ = inv;
    unimplemented!("codec")
}

/// Parses one itemstring (`name [count [wear [metadata]]]`).
pub fn parse_itemstring(s: &[u8]) -> Result<ItemStack> {
    let _ = s;
    unimplemented!("codec")
}

/// Serializes one itemstring the way the engine does.
pub fn serialize_itemstring(item: &ItemStack) -> Vec<u8> {
    let _ = item;
    unimplemented!("codec")
}
