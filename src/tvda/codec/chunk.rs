//! World chunk entries: their entry IDs, where a chunk lies in the world, and the tile
//! bytes of the terrain, wall, ores and fluid layers (tvda.md §5.3).
//!
//! A chunk is 90 × 90 tiles, stored row by row (x fastest) as big-endian tile numbers, plus
//! a placement byte (ores) or a binary16 fill amount (fluid) per tile, compressed with the
//! payload's own codec. Tiles keep every stored bit, so an unedited tile re-encodes to the
//! same bytes.

use crate::error::{Error, Result};
use crate::tvda::codec::compress::{compress, decompress, Codec};

/// Chunk width and height in tiles.
pub const CHUNK_SIZE: usize = 90;
/// Tiles in one chunk.
pub const CHUNK_TILES: usize = CHUNK_SIZE * CHUNK_SIZE;

/// The decoded chunk layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Layer {
    /// Layer 0: terrain tiles, `u16` each.
    Terrain,
    /// Layer 1: wall tiles, `u16` each.
    Wall,
    /// Layer 2: ores, `u16` tile + `u8` placement.
    Ores,
    /// Layer 3: fluids, `u16` tile + `u16` binary16 amount.
    Fluid,
}

impl Layer {
    /// Every layer, in index order.
    pub const ALL: [Layer; 4] = [Layer::Terrain, Layer::Wall, Layer::Ores, Layer::Fluid];

    /// The layer index used in entry IDs.
    pub fn index(self) -> u8 {
        match self {
            Layer::Terrain => 0,
            Layer::Wall => 1,
            Layer::Ores => 2,
            Layer::Fluid => 3,
        }
    }

    /// The layer with this index, if it is one of the four decoded layers.
    pub fn from_index(index: u8) -> Option<Layer> {
        Layer::ALL.get(usize::from(index)).copied()
    }

    /// The folder name (`terrain`, `wall`, `ores`, `fluid`).
    pub fn name(self) -> &'static str {
        match self {
            Layer::Terrain => "terrain",
            Layer::Wall => "wall",
            Layer::Ores => "ores",
            Layer::Fluid => "fluid",
        }
    }

    /// The layer with this folder name.
    pub fn from_name(name: &str) -> Option<Layer> {
        Layer::ALL.into_iter().find(|l| l.name() == name)
    }

    /// Stored bytes per tile.
    pub fn bytes_per_tile(self) -> usize {
        match self {
            Layer::Terrain | Layer::Wall => 2,
            Layer::Ores => 3,
            Layer::Fluid => 4,
        }
    }

    /// The largest meta value a tile of this layer holds.
    pub fn max_meta(self) -> u16 {
        match self {
            Layer::Terrain | Layer::Wall => 0,
            Layer::Ores => 0xFF,
            Layer::Fluid => 0xFFFF,
        }
    }

    /// Uncompressed size of one chunk.
    pub fn chunk_bytes(self) -> usize {
        CHUNK_TILES * self.bytes_per_tile()
    }
}

/// The entry ID of chunk `chunk_no` of layer `layer`:
/// `0x1_0000_0000 | layer << 24 | chunk_no` (`Common.layerAndChunkNumToEntryID`).
pub fn chunk_entry_id(layer: u8, chunk_no: u32) -> Result<i64> {
    if chunk_no > 0xFF_FFFF {
        return Err(Error::invalid(format!(
            "chunk number {chunk_no} exceeds 24 bits"
        )));
    }
    Ok(0x1_0000_0000 | i64::from(layer) << 24 | i64::from(chunk_no))
}

/// The layer index and chunk number of a chunk entry ID of world 1, or `None`.
pub fn parse_chunk_entry_id(id: i64) -> Option<(u8, u32)> {
    if id >> 32 != 1 {
        return None;
    }
    Some((((id >> 24) & 0xFF) as u8, (id & 0xFF_FFFF) as u32))
}

/// The chunk grid of a world, from its size in tiles (world JSON `width`, `height`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// Chunks across.
    pub chunks_x: u32,
    /// Chunks down.
    pub chunks_y: u32,
}

impl Geometry {
    /// The geometry of a world `width` × `height` tiles.
    pub fn new(width: u64, height: u64) -> Result<Geometry> {
        let chunks = |n: u64| u32::try_from(n / CHUNK_SIZE as u64).ok().filter(|&c| c > 0);
        match (chunks(width), chunks(height)) {
            (Some(chunks_x), Some(chunks_y))
                if u64::from(chunks_x) * u64::from(chunks_y) <= 0x100_0000 =>
            {
                Ok(Geometry { chunks_x, chunks_y })
            }
            _ => Err(Error::corrupt(format!(
                "world size {width} x {height} has no valid chunk grid"
            ))),
        }
    }

    /// The chunk number of chunk (cx, cy): column-major, `cx * chunks_y + cy`.
    pub fn chunk_no(&self, cx: u32, cy: u32) -> Option<u32> {
        (cx < self.chunks_x && cy < self.chunks_y).then(|| cx * self.chunks_y + cy)
    }

    /// The chunk coordinates of a chunk number.
    pub fn coords(&self, chunk_no: u32) -> Option<(u32, u32)> {
        let (cx, cy) = (chunk_no / self.chunks_y, chunk_no % self.chunks_y);
        (cx < self.chunks_x).then_some((cx, cy))
    }
}

/// One tile: its tile number and the layer's extra value (ore placement, or the raw
/// binary16 bits of a fluid amount; 0 for terrain and wall).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tile {
    /// Tile number (meaning from `tileNumberToNameMap`).
    pub number: u16,
    /// Placement byte or fluid amount bits.
    pub meta: u16,
}

/// Decodes the uncompressed bytes of one chunk.
pub fn decode_tiles(layer: Layer, raw: &[u8]) -> Result<Vec<Tile>> {
    if raw.len() != layer.chunk_bytes() {
        return Err(Error::corrupt(format!(
            "{} chunk has {} bytes, expected {}",
            layer.name(),
            raw.len(),
            layer.chunk_bytes()
        )));
    }
    Ok(raw
        .chunks_exact(layer.bytes_per_tile())
        .map(|t| match *t {
            [a, b] => Tile {
                number: u16::from_be_bytes([a, b]),
                meta: 0,
            },
            [a, b, p] => Tile {
                number: u16::from_be_bytes([a, b]),
                meta: u16::from(p),
            },
            [a, b, c, d] => Tile {
                number: u16::from_be_bytes([a, b]),
                meta: u16::from_be_bytes([c, d]),
            },
            _ => Tile { number: 0, meta: 0 },
        })
        .collect())
}

/// Encodes one chunk's tiles (exactly 8100, meta within the layer's range).
pub fn encode_tiles(layer: Layer, tiles: &[Tile]) -> Result<Vec<u8>> {
    if tiles.len() != CHUNK_TILES {
        return Err(Error::invalid(format!(
            "a chunk has {CHUNK_TILES} tiles, not {}",
            tiles.len()
        )));
    }
    let mut out = Vec::with_capacity(layer.chunk_bytes());
    for t in tiles {
        if t.meta > layer.max_meta() {
            return Err(Error::invalid(format!(
                "{} tile meta {} out of range 0..={}",
                layer.name(),
                t.meta,
                layer.max_meta()
            )));
        }
        out.extend_from_slice(&t.number.to_be_bytes());
        match layer {
            Layer::Terrain | Layer::Wall => {}
            Layer::Ores => out.push(t.meta as u8),
            Layer::Fluid => out.extend_from_slice(&t.meta.to_be_bytes()),
        }
    }
    Ok(out)
}

/// Decodes a stored chunk entry: its codec and tiles.
pub fn decode_chunk(layer: Layer, stored: &[u8]) -> Result<(Codec, Vec<Tile>)> {
    let (codec, raw) = decompress(stored, layer.chunk_bytes())?;
    Ok((codec, decode_tiles(layer, &raw)?))
}

/// Encodes tiles into a stored chunk entry with `codec`.
pub fn encode_chunk(layer: Layer, codec: Codec, tiles: &[Tile]) -> Result<Vec<u8>> {
    compress(codec, &encode_tiles(layer, tiles)?)
}

/// A binary16 amount as a float (for comments; the bits are what is stored).
pub fn half_to_f32(bits: u16) -> f32 {
    let sign = if bits & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((bits >> 10) & 0x1F);
    let frac = f32::from(bits & 0x3FF);
    match exp {
        0 => sign * frac * 2f32.powi(-24),
        31 if frac == 0.0 => sign * f32::INFINITY,
        31 => f32::NAN,
        _ => sign * (1.0 + frac / 1024.0) * 2f32.powi(exp - 15),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ids_and_geometry() {
        assert_eq!(chunk_entry_id(3, 0).unwrap(), 0x1_0300_0000);
        assert_eq!(parse_chunk_entry_id(0x1_0000_0003), Some((0, 3)));
        assert_eq!(parse_chunk_entry_id(-1), None);
        assert!(chunk_entry_id(0, 1 << 24).is_err());
        let g = Geometry::new(180, 180).unwrap();
        assert_eq!(g.chunk_no(1, 1), Some(3));
        assert_eq!(g.coords(3), Some((1, 1)));
        assert_eq!(g.coords(4), None);
        assert!(Geometry::new(89, 180).is_err());
        assert_eq!(half_to_f32(0x3C00), 1.0);
        assert_eq!(half_to_f32(0x3800), 0.5);
    }

    fn tiles(layer: Layer) -> impl Strategy<Value = Vec<Tile>> {
        let meta = 0..=layer.max_meta();
        proptest::collection::vec(
            (any::<u16>(), meta).prop_map(|(number, meta)| Tile { number, meta }),
            CHUNK_TILES,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]
        #[test]
        fn chunks_round_trip(layer in 0u8..4, codec in 0usize..3, seed in tiles(Layer::Fluid)) {
            let layer = Layer::from_index(layer).unwrap();
            let codec = [Codec::Gzip, Codec::Zstd, Codec::Snappy][codec];
            let tiles: Vec<Tile> = seed.iter().map(|t| Tile { number: t.number, meta: t.meta.min(layer.max_meta()) }).collect();
            let stored = encode_chunk(layer, codec, &tiles).unwrap();
            let (found, back) = decode_chunk(layer, &stored).unwrap();
            prop_assert_eq!(found, codec);
            prop_assert_eq!(back, tiles);
        }
    }

    #[test]
    fn bad_sizes_and_meta_are_errors() {
        assert!(decode_tiles(Layer::Ores, &[0; 100]).is_err());
        let mut t = vec![Tile { number: 1, meta: 0 }; CHUNK_TILES];
        assert!(encode_tiles(Layer::Wall, &t[1..]).is_err());
        t[5].meta = 1;
        assert!(encode_tiles(Layer::Terrain, &t).is_err());
        t[5].meta = 256;
        assert!(encode_tiles(Layer::Ores, &t).is_err());
        let short = compress(Codec::Snappy, &[0; 100]).unwrap();
        assert!(decode_chunk(Layer::Terrain, &short).is_err());
    }
}
