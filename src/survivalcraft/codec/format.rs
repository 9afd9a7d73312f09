//! Which terrain format a world uses, and what each format can hold.
//!
//! Survivalcraft changed its terrain storage four times (spec §0): `Chunks.dat` (1.4–1.28,
//! 16-bit cells), `Chunks32.dat` (1.29–2.1, 32-bit cells), `Chunks32h.dat` (2.2, 256 cells
//! high) and `Regions/Region X,Z.dat` (2.3+, RLE + raw deflate per chunk). Every other
//! module asks this type about limits (height, bit widths, what is stored) instead of
//! matching on file names itself; it depends on nothing (the store tells formats apart by
//! file names and [`super::region`] and [`super::fixed`] headers).

/// A terrain storage format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TerrainFormat {
    /// `Chunks.dat`: 16-bit cells, 128 high, directory of byte offsets.
    Chunks16,
    /// `Chunks32.dat`: 32-bit cells, 128 high, directory of slot indices.
    Chunks32,
    /// `Chunks32h.dat`: 32-bit cells, 256 high, directory of slot indices.
    Chunks32h,
    /// `Regions/Region X,Z.dat`: 32-bit cells, 256 high, RLE + raw deflate, no light stored.
    Regions,
}

/// Size of the 1.x–2.2 chunk directory: 65537 entries of 12 bytes (spec §2.1).
pub const DIRECTORY_BYTES: usize = 65537 * 12;

/// Most chunks a fixed-size chunk file can list (spec §2.5).
pub const MAX_DIRECTORY_CHUNKS: usize = 65536;

impl TerrainFormat {
    /// Cells per column.
    pub fn height(self) -> usize {
        match self {
            TerrainFormat::Chunks16 | TerrainFormat::Chunks32 => 128,
            TerrainFormat::Chunks32h | TerrainFormat::Regions => 256,
        }
    }

    /// Largest block id a cell can hold.
    pub fn max_id(self) -> u16 {
        match self {
            TerrainFormat::Chunks16 => 255,
            _ => 1023,
        }
    }

    /// Largest block data value a cell can hold.
    pub fn max_data(self) -> u32 {
        match self {
            TerrainFormat::Chunks16 => 0xF,
            _ => 0x3_FFFF,
        }
    }

    /// Whether cell light is stored (region files zero it; the game relights on load).
    pub fn stores_light(self) -> bool {
        self != TerrainFormat::Regions
    }

    /// Whether the per-column top, bottom and sunlight heights are stored.
    pub fn stores_heights(self) -> bool {
        self != TerrainFormat::Regions
    }

    /// The file name of a fixed-size chunk file, `None` for region files.
    pub fn file_name(self) -> Option<&'static str> {
        match self {
            TerrainFormat::Chunks16 => Some("Chunks.dat"),
            TerrainFormat::Chunks32 => Some("Chunks32.dat"),
            TerrainFormat::Chunks32h => Some("Chunks32h.dat"),
            TerrainFormat::Regions => None,
        }
    }

    /// Bytes of one chunk record in a fixed-size chunk file (header, cells, shafts).
    pub fn record_bytes(self) -> usize {
        let cell_bytes = if self == TerrainFormat::Chunks16 {
            2
        } else {
            4
        };
        16 + 256 * self.height() * cell_bytes + 1024
    }

    /// The terrain format of a game version from Project.xml's `Version` (e.g. `1.27`, `2.2`).
    pub fn for_game_version(version: &str) -> Option<TerrainFormat> {
        let mut parts = version.trim().split('.');
        let major: u32 = parts.next()?.parse().ok()?;
        let minor: u32 = parts.next().unwrap_or("0").parse().ok()?;
        match (major, minor) {
            (1, 4..=28) => Some(TerrainFormat::Chunks16),
            (1, 29..) | (2, 0 | 1) => Some(TerrainFormat::Chunks32),
            (2, 2) => Some(TerrainFormat::Chunks32h),
            (2, 3..) => Some(TerrainFormat::Regions),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_sizes_match_the_spec() {
        assert_eq!(TerrainFormat::Chunks16.record_bytes(), 66576);
        assert_eq!(TerrainFormat::Chunks32.record_bytes(), 132112);
        assert_eq!(TerrainFormat::Chunks32h.record_bytes(), 263184);
        assert_eq!(DIRECTORY_BYTES, 786444);
    }

    #[test]
    fn game_versions_map_to_formats() {
        assert_eq!(
            TerrainFormat::for_game_version("1.27"),
            Some(TerrainFormat::Chunks16)
        );
        assert_eq!(
            TerrainFormat::for_game_version("1.29"),
            Some(TerrainFormat::Chunks32)
        );
        assert_eq!(
            TerrainFormat::for_game_version("2.1"),
            Some(TerrainFormat::Chunks32)
        );
        assert_eq!(
            TerrainFormat::for_game_version("2.2"),
            Some(TerrainFormat::Chunks32h)
        );
        assert_eq!(
            TerrainFormat::for_game_version("2.4"),
            Some(TerrainFormat::Regions)
        );
        assert_eq!(TerrainFormat::for_game_version("1.3"), None);
        assert_eq!(TerrainFormat::for_game_version("SCNET-1"), None);
    }
}
