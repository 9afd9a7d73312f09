//! The decoded form of a Luanti map block, shared by the codec and the text views.
//!
//! Decoding canonicalises what the engine itself does not keep stable (node ids, the order of
//! the name-id mapping, of metadata variables and of timers), so that decode → encode → decode
//! yields an equal value and a view of the same block always renders the same bytes.

/// Nodes per block edge.
pub const BLOCK_SIZE: usize = 16;
/// Nodes per block.
pub const NODE_COUNT: usize = BLOCK_SIZE * BLOCK_SIZE * BLOCK_SIZE;

/// A block position in block coordinates (node coordinate = 16 · block + relative).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BlockPos {
    pub x: i16,
    pub y: i16,
    pub z: i16,
}

/// A node position inside a block, each coordinate 0–15.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RelPos {
    pub x: u8,
    pub y: u8,
    pub z: u8,
}

impl RelPos {
    /// The position from a node index (`z*256 + y*16 + x`); `None` when out of range.
    pub fn from_index(index: u16) -> Option<RelPos> {
        if usize::from(index) >= NODE_COUNT {
            return None;
        }
        Some(RelPos {
            x: (index & 15) as u8,
            y: ((index >> 4) & 15) as u8,
            z: ((index >> 8) & 15) as u8,
        })
    }

    /// The node index `z*256 + y*16 + x` (coordinates are taken modulo 16, so this never
    /// overflows even for a position built with out-of-range fields).
    pub fn index(self) -> u16 {
        u16::from(self.z & 15) * 256 + u16::from(self.y & 15) * 16 + u16::from(self.x & 15)
    }
}

/// A decoded map block (disk form), versions 22–29.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapBlock {
    /// Serialization version as stored (22–29). The encoder writes 22 and 23 as 25.
    pub version: u8,
    /// The flags byte (0x01 underground, 0x02 day/night differs, 0x04 lighting expired,
    /// 0x08 not generated).
    pub flags: u8,
    /// lighting_complete (v27+); 0xFFFF for older blocks.
    pub lighting_complete: u16,
    /// Game time in seconds of the last save; 0xFFFF_FFFF = undefined.
    pub timestamp: u32,
    /// Node names, indexed by the values of `content`. Canonical: every name is used by at
    /// least one node, names are unique, and they appear in order of first use by node index.
    pub names: Vec<String>,
    /// 4096 indices into `names`, node index `z*256 + y*16 + x`.
    pub content: Vec<u16>,
    /// 4096 param1 values (light), same indexing.
    pub param1: Vec<u8>,
    /// 4096 param2 values, same indexing.
    pub param2: Vec<u8>,
    /// Node metadata, sorted by node index (`RelPos::index`), at most one entry per position,
    /// none empty.
    pub metadata: Vec<NodeMeta>,
    /// Static objects in stored order.
    pub objects: Vec<StaticObject>,
    /// Node timers, sorted by node index, at most one per position.
    pub timers: Vec<NodeTimer>,
}

/// The metadata of one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeMeta {
    pub pos: RelPos,
    /// Variables sorted by key, keys unique.
    pub vars: Vec<MetaVar>,
    pub inventory: Inventory,
}

/// One metadata variable: arbitrary bytes for key and value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaVar {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    /// Private variables are not sent to clients (metadata list version 2, blocks ≥ 28).
    pub private: bool,
}

/// An inventory: its lists in stored order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Inventory {
    pub lists: Vec<InventoryList>,
}

/// One inventory list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InventoryList {
    /// List name, without spaces.
    pub name: String,
    /// The `Width` line (0 = no width).
    pub width: u32,
    /// Exactly `size` slots; an empty slot is `ItemStack::default()`.
    pub slots: Vec<ItemStack>,
}

/// One ItemStack. An empty stack has an empty name.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ItemStack {
    /// Item name as bytes (may be any bytes; quoted in the itemstring when needed).
    pub name: Vec<u8>,
    pub count: u16,
    pub wear: u16,
    /// The metadata string as decoded from the itemstring (usually `\x01k\x02v\x03…`).
    pub metadata: Vec<u8>,
}

/// A static object stored with the block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaticObject {
    /// Object type (7 = LuaEntity).
    pub kind: u8,
    /// Absolute position in BS units × 1000 (node × 10,000), as stored.
    pub pos: [i32; 3],
    pub data: ObjectData,
}

/// The payload of a static object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ObjectData {
    LuaEntity(LuaEntity),
    /// Any other type, or LuaEntity data that does not parse: kept as stored.
    Raw(Vec<u8>),
}

/// LuaEntity static data (type 7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LuaEntity {
    pub name: String,
    pub state: Vec<u8>,
    pub hp: u16,
    /// Velocity × 1000.
    pub velocity: [i32; 3],
    /// Yaw × 1000.
    pub yaw: i32,
    /// The optional trailer (version2 ≥ 1: pitch and roll; ≥ 2: GUID).
    pub extra: Option<LuaEntityExtra>,
}

/// The version2 trailer of LuaEntity data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LuaEntityExtra {
    pub version2: u8,
    /// Pitch × 1000.
    pub pitch: i32,
    /// Roll × 1000.
    pub roll: i32,
    /// Present when version2 ≥ 2.
    pub guid: Option<[u8; 16]>,
}

/// A node timer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeTimer {
    pub pos: RelPos,
    /// Timeout in milliseconds (stored as s32 × 1000 of seconds).
    pub timeout: i32,
    /// Elapsed time in milliseconds.
    pub elapsed: i32,
}

/// Bytes every heap allocation costs beyond its capacity (the allocator's bookkeeping).
const ALLOCATION: usize = 16;

fn heap(capacity: usize) -> usize {
    if capacity == 0 {
        0
    } else {
        capacity + ALLOCATION
    }
}

impl MapBlock {
    /// The memory this decoded block holds, in bytes: its own size and every allocation it
    /// owns (names, node arrays, metadata with inventories, objects, timers), by capacity.
    /// Caches weigh a block by it, and the codec bounds it.
    pub fn memory(&self) -> usize {
        use std::mem::size_of;
        let names: usize = self.names.iter().map(|n| heap(n.capacity())).sum::<usize>()
            + heap(self.names.capacity() * size_of::<String>());
        let nodes = heap(self.content.capacity() * 2)
            + heap(self.param1.capacity())
            + heap(self.param2.capacity());
        let metadata: usize = self
            .metadata
            .iter()
            .map(|m| {
                let vars: usize = m
                    .vars
                    .iter()
                    .map(|v| heap(v.key.capacity()) + heap(v.value.capacity()))
                    .sum::<usize>()
                    + heap(m.vars.capacity() * size_of::<MetaVar>());
                vars + m.inventory.memory()
            })
            .sum::<usize>()
            + heap(self.metadata.capacity() * size_of::<NodeMeta>());
        let objects: usize = self
            .objects
            .iter()
            .map(|o| match &o.data {
                ObjectData::Raw(d) => heap(d.capacity()),
                ObjectData::LuaEntity(e) => heap(e.name.capacity()) + heap(e.state.capacity()),
            })
            .sum::<usize>()
            + heap(self.objects.capacity() * size_of::<StaticObject>());
        let timers = heap(self.timers.capacity() * size_of::<NodeTimer>());
        size_of::<MapBlock>() + names + nodes + metadata + objects + timers
    }
}

impl Inventory {
    /// The memory the lists of this inventory hold (see [`MapBlock::memory`]).
    pub fn memory(&self) -> usize {
        use std::mem::size_of;
        self.lists
            .iter()
            .map(|l| {
                let slots: usize = l
                    .slots
                    .iter()
                    .map(|s| heap(s.name.capacity()) + heap(s.metadata.capacity()))
                    .sum();
                heap(l.name.capacity()) + slots + heap(l.slots.capacity() * size_of::<ItemStack>())
            })
            .sum::<usize>()
            + heap(self.lists.capacity() * size_of::<InventoryList>())
    }
}
