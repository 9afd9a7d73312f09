//! Chunk tiles as Cubeset files: `chunks/LAYER/CX,CY.cubeset` is a 90 × 1 × 90 grid whose
//! cell (x, 0, z) is the tile at chunk-relative (x, y = z), TYPE the tile's name from the
//! world's `tileNumberToNameMap` and META the ore placement byte or the fluid amount's
//! binary16 bits (0 for terrain and wall), so every stored bit round-trips.
//!
//! A tile number missing from the map is shown as its decimal number (no tile name is a
//! bare number) and read back as that number. A name that is neither in the map nor a
//! number is rejected with its line, since adding a name means editing the world JSON.

use std::collections::HashMap;

use serde_json::Value;

use crate::cubeset::{self, Definition, Grid};
use crate::error::{Error, Result};
use crate::tvda::codec::chunk::{
    decode_chunk, encode_chunk, half_to_f32, Geometry, Layer, Tile, CHUNK_SIZE, CHUNK_TILES,
};
use crate::tvda::codec::compress::Codec;
use crate::tvda::views::json::parse_stored;

/// Tile number ⇄ name, from `tileNumberToNameMap`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TileNames {
    by_number: HashMap<u16, String>,
    by_name: HashMap<String, u16>,
}

impl TileNames {
    /// Builds the table from `(number, name)` pairs; a name used twice maps back to its
    /// lowest number.
    pub fn new(pairs: impl IntoIterator<Item = (u16, String)>) -> TileNames {
        let mut names = TileNames::default();
        let mut pairs: Vec<(u16, String)> = pairs.into_iter().collect();
        pairs.sort();
        for (number, name) in pairs {
            names.by_name.entry(name.clone()).or_insert(number);
            names.by_number.insert(number, name);
        }
        names
    }

    /// The TYPE shown for a tile number: its name, or its decimal number when the map has
    /// no name for it or the name belongs to a lower number.
    pub fn name(&self, number: u16) -> String {
        match self.by_number.get(&number) {
            Some(name) if self.by_name.get(name) == Some(&number) => name.clone(),
            _ => number.to_string(),
        }
    }

    /// Whether the map names this tile number.
    pub fn is_named(&self, number: u16) -> bool {
        self.by_number.contains_key(&number)
    }

    /// The tile number of a TYPE: a name from the map or a canonical decimal number.
    pub fn number(&self, kind: &str) -> Option<u16> {
        if let Some(&n) = self.by_name.get(kind) {
            return Some(n);
        }
        let n: u16 = kind.parse().ok()?;
        (n.to_string() == kind).then_some(n)
    }
}

/// What the chunk views need from the world JSON (entry -1 of a world disk).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct World {
    /// The chunk grid, from `width` and `height`.
    pub geometry: Geometry,
    /// Tile names, from `tileNumberToNameMap`.
    pub names: TileNames,
    /// The codec for new chunk entries, from `comp` (1 gzip, 3 zstd, otherwise Snappy, the
    /// game's default).
    pub codec: Codec,
}

impl World {
    /// Reads the world facts from the stored world JSON.
    pub fn from_json(stored: &[u8]) -> Result<World> {
        let value = parse_stored(stored)?;
        let size = |key: &str| {
            value
                .get(key)
                .and_then(Value::as_u64)
                .ok_or_else(|| Error::corrupt(format!("world JSON has no numeric \"{key}\"")))
        };
        let geometry = Geometry::new(size("width")?, size("height")?)?;
        let map = value
            .get("tileNumberToNameMap")
            .and_then(Value::as_object)
            .ok_or_else(|| Error::corrupt("world JSON has no tileNumberToNameMap"))?;
        let mut pairs = Vec::with_capacity(map.len());
        for (key, name) in map {
            match (key.parse::<u16>(), name.as_str()) {
                (Ok(n), Some(name)) => pairs.push((n, name.to_string())),
                _ => log::warn!("tileNumberToNameMap: ignoring {key:?} = {name}"),
            }
        }
        let codec = match value.get("comp").and_then(Value::as_u64) {
            Some(1) => Codec::Gzip,
            Some(3) => Codec::Zstd,
            _ => Codec::Snappy,
        };
        Ok(World {
            geometry,
            names: TileNames::new(pairs),
            codec,
        })
    }
}

/// The grid of a chunk's tiles; definitions in order of first appearance.
pub fn chunk_grid(tiles: &[Tile], names: &TileNames) -> Grid {
    let mut index: HashMap<Tile, u32> = HashMap::new();
    let mut palette = Vec::new();
    let cells = tiles
        .iter()
        .map(|t| {
            *index.entry(*t).or_insert_with(|| {
                palette.push(Definition {
                    kind: names.name(t.number),
                    meta: u32::from(t.meta),
                });
                (palette.len() - 1) as u32
            })
        })
        .collect();
    Grid {
        size: [CHUNK_SIZE, 1, CHUNK_SIZE],
        palette,
        cells,
    }
}

/// The tile a definition stands for in `layer`, or why it stands for none.
fn definition_tile(
    layer: Layer,
    def: &Definition,
    names: &TileNames,
) -> std::result::Result<Tile, String> {
    let number = names.number(&def.kind).ok_or_else(|| {
        format!(
            "tile name {:?} is not in the world's tileNumberToNameMap",
            def.kind
        )
    })?;
    let meta = u16::try_from(def.meta)
        .ok()
        .filter(|&m| m <= layer.max_meta())
        .ok_or_else(|| {
            format!(
                "{} META {} out of range 0..={}",
                layer.name(),
                def.meta,
                layer.max_meta()
            )
        })?;
    Ok(Tile { number, meta })
}

/// The tiles of a chunk grid.
pub fn grid_tiles(layer: Layer, grid: &Grid, names: &TileNames) -> Result<Vec<Tile>> {
    if grid.size != [CHUNK_SIZE, 1, CHUNK_SIZE] || grid.cells.len() != CHUNK_TILES {
        return Err(Error::invalid(format!(
            "a chunk is {CHUNK_SIZE} x 1 x {CHUNK_SIZE} cells, not {} x {} x {}",
            grid.size[0], grid.size[1], grid.size[2]
        )));
    }
    let palette = grid
        .palette
        .iter()
        .map(|d| definition_tile(layer, d, names).map_err(Error::invalid))
        .collect::<Result<Vec<Tile>>>()?;
    grid.cells
        .iter()
        .map(|&c| {
            palette
                .get(c as usize)
                .copied()
                .ok_or_else(|| Error::invalid(format!("cell refers to undefined definition {c}")))
        })
        .collect()
}

/// The Cubeset text of a chunk's tiles.
pub fn render_chunk(layer: Layer, tiles: &[Tile], names: &TileNames) -> Vec<u8> {
    let grid = chunk_grid(tiles, names);
    let comment = |d: &Definition| -> Option<String> {
        let number = names.number(&d.kind)?;
        let mut notes = Vec::new();
        if !names.is_named(number) {
            notes.push("tile number not in tileNumberToNameMap".to_string());
        }
        if layer == Layer::Fluid {
            notes.push(format!("amount {}", half_to_f32(d.meta as u16)));
        }
        (!notes.is_empty()).then(|| notes.join("; "))
    };
    cubeset::render(&grid, &comment)
}

/// The tiles of a chunk's Cubeset text.
pub fn parse_chunk(text: &[u8], layer: Layer, names: &TileNames) -> Result<Vec<Tile>> {
    let check = |d: &Definition| definition_tile(layer, d, names).map(|_| ());
    let grid = cubeset::parse_checked(text, Some([CHUNK_SIZE, 1, CHUNK_SIZE]), &check)?;
    grid_tiles(layer, &grid, names)
}

/// The Cubeset text of a stored chunk entry.
pub fn render_stored_chunk(layer: Layer, stored: &[u8], names: &TileNames) -> Result<Vec<u8>> {
    let (_, tiles) = decode_chunk(layer, stored)?;
    Ok(render_chunk(layer, &tiles, names))
}

/// The stored entry for an edited chunk text: compressed with the codec of the `previous`
/// stored entry (or `new_codec` for a new chunk); the previous bytes themselves when the
/// tiles did not change.
pub fn store_chunk(
    text: &[u8],
    layer: Layer,
    names: &TileNames,
    previous: Option<&[u8]>,
    new_codec: Codec,
) -> Result<Vec<u8>> {
    let tiles = parse_chunk(text, layer, names)?;
    match previous.map(|p| (p, decode_chunk(layer, p))) {
        Some((p, Ok((_, old)))) if old == tiles => Ok(p.to_vec()),
        Some((_, Ok((codec, _)))) => encode_chunk(layer, codec, &tiles),
        Some((p, Err(_))) => encode_chunk(layer, Codec::detect(p).unwrap_or(new_codec), &tiles),
        None => encode_chunk(layer, new_codec, &tiles),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> TileNames {
        TileNames::new([
            (0, "basegame:0".into()),
            (3, "ores@basegame:1".into()),
            (7, "basegame:0".into()),
        ])
    }

    #[test]
    fn grid_round_trip_keeps_numbers_and_meta() {
        let names = names();
        let mut tiles = vec![Tile { number: 0, meta: 0 }; CHUNK_TILES];
        tiles[1] = Tile {
            number: 3,
            meta: 200,
        };
        tiles[2] = Tile { number: 7, meta: 0 };
        tiles[8099] = Tile {
            number: 999,
            meta: 1,
        };
        let grid = chunk_grid(&tiles, &names);
        assert_eq!(grid.palette.len(), 4);
        assert_eq!(grid.palette[2].kind, "7", "duplicate name keeps its number");
        assert_eq!(grid.palette[3].kind, "999");
        assert_eq!(grid_tiles(Layer::Ores, &grid, &names).unwrap(), tiles);
        assert!(
            grid_tiles(Layer::Terrain, &grid, &names).is_err(),
            "meta on terrain"
        );
    }

    #[test]
    fn text_round_trip_and_errors_with_lines() {
        let names = names();
        let mut tiles = vec![Tile { number: 0, meta: 0 }; CHUNK_TILES];
        tiles[100] = Tile {
            number: 3,
            meta: 0x3800,
        };
        let text = render_chunk(Layer::Fluid, &tiles, &names);
        assert!(String::from_utf8_lossy(&text).contains("amount 0.5"));
        assert_eq!(parse_chunk(&text, Layer::Fluid, &names).unwrap(), tiles);
        let bad = String::from_utf8(text.clone())
            .unwrap()
            .replace("ores@basegame:1", "basegame:nope");
        let e = parse_chunk(bad.as_bytes(), Layer::Fluid, &names).unwrap_err();
        assert_eq!(e.errno(), libc::EINVAL);
        assert!(e.message().starts_with("line "), "{e}");
        assert!(e.message().contains("basegame:nope"), "{e}");
        assert!(
            parse_chunk(&text, Layer::Ores, &names).is_err(),
            "amount too big for ores"
        );
        assert!(parse_chunk(&text[..text.len() / 2], Layer::Fluid, &names).is_err());
        let mut grid = chunk_grid(&tiles, &names);
        grid.size = [90, 2, 45];
        assert!(grid_tiles(Layer::Wall, &grid, &names).is_err());
    }

    #[test]
    fn world_json_gives_geometry_names_and_codec() {
        let w = World::from_json(br#"{"genver":1,"width":180,"height":270,"comp":3,"tileNumberToNameMap":{"0":"basegame:0","65535":"basegame:-2"}}"#).unwrap();
        assert_eq!((w.geometry.chunks_x, w.geometry.chunks_y), (2, 3));
        assert_eq!(w.names.number("basegame:-2"), Some(65535));
        assert_eq!(w.codec, Codec::Zstd);
        assert!(World::from_json(br#"{"genver":1,"width":180}"#).is_err());
    }
}
