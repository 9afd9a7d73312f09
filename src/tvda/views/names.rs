//! Readable file names for TVDA entries (tvda.md §5.2, the names Terrarum's own tools show),
//! and the file names of actors, chunks and raw entries in the mounted tree.
//!
//! Names depend on the disk kind: entry -2 is a player's `spritedef` but a world's
//! thumbnail. Disks of undefined kind (very old saves) get only the names both kinds share.
//! Every name parser accepts only the canonical spelling its formatter produces, so each
//! entry has exactly one path.

use crate::tvda::codec::tvda::DiskKind;

/// How a well-known entry is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presentation {
    /// A JSON document, pretty-printed (`views::json`).
    Json,
    /// A gzip-compressed file, shown decompressed.
    Gzip,
    /// The stored bytes as they are.
    Raw,
}

/// A well-known entry and its file name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WellKnown {
    /// Entry ID.
    pub id: i64,
    /// File name in the mount root.
    pub name: &'static str,
    /// How the bytes are shown.
    pub presentation: Presentation,
}

const fn wk(id: i64, name: &'static str, presentation: Presentation) -> WellKnown {
    WellKnown {
        id,
        name,
        presentation,
    }
}

const SHARED: [WellKnown; 2] = [
    wk(-1, "savegameinfo.json", Presentation::Json),
    wk(-4, "loadOrder.txt", Presentation::Raw),
];

const PLAYER: [WellKnown; 10] = [
    wk(-1, "savegameinfo.json", Presentation::Json),
    wk(-2, "spritedef", Presentation::Raw),
    wk(-3, "spritedef-glow", Presentation::Raw),
    wk(-4, "loadOrder.txt", Presentation::Raw),
    wk(-5, "screenshot.tga", Presentation::Gzip),
    wk(-6, "spritedef-emissive", Presentation::Raw),
    wk(-7, "spritedef-emsv", Presentation::Raw),
    wk(-1025, "bodypart-to-entry.map", Presentation::Raw),
    wk(-1026, "bodypartglow-to-entry.map", Presentation::Raw),
    wk(-1027, "bodypartemsv-to-entry.map", Presentation::Raw),
];

const WORLD: [WellKnown; 3] = [
    wk(-1, "savegameinfo.json", Presentation::Json),
    wk(-2, "thumbnail.tga", Presentation::Gzip),
    wk(-4, "loadOrder.txt", Presentation::Raw),
];

/// The well-known entries of a disk kind.
pub fn well_known(kind: DiskKind) -> &'static [WellKnown] {
    match kind {
        DiskKind::Player => &PLAYER,
        DiskKind::World => &WORLD,
        DiskKind::Undefined | DiskKind::Other(_) => &SHARED,
    }
}

/// The well-known entry with this ID.
pub fn by_id(kind: DiskKind, id: i64) -> Option<WellKnown> {
    well_known(kind).iter().find(|w| w.id == id).copied()
}

/// The well-known entry with this file name.
pub fn by_name(kind: DiskKind, name: &str) -> Option<WellKnown> {
    well_known(kind).iter().find(|w| w.name == name).copied()
}

/// Entry IDs shown as actors (`actor #N.json` in Terrarum's tools).
pub const ACTOR_IDS: std::ops::RangeInclusive<i64> = 1_048_576..=2_147_483_647;

/// `actors/ID.json` file name of an actor entry, if `id` is an actor ID.
pub fn actor_file_name(id: i64) -> Option<String> {
    ACTOR_IDS.contains(&id).then(|| format!("{id}.json"))
}

/// The actor ID of an `actors/` file name.
pub fn parse_actor_file_name(name: &str) -> Option<i64> {
    let id = parse_canonical(name.strip_suffix(".json")?)?;
    ACTOR_IDS.contains(&id).then_some(id)
}

/// `entries/ID` file name: the ID in decimal.
pub fn entry_file_name(id: i64) -> String {
    id.to_string()
}

/// The entry ID of an `entries/` file name.
pub fn parse_entry_file_name(name: &str) -> Option<i64> {
    parse_canonical(name)
}

/// `chunks/LAYER/CX,CY.cubeset` file name of a chunk.
pub fn chunk_file_name(cx: u32, cy: u32) -> String {
    format!("{cx},{cy}.cubeset")
}

/// The chunk coordinates of a chunk file name.
pub fn parse_chunk_file_name(name: &str) -> Option<(u32, u32)> {
    let (cx, cy) = name.strip_suffix(".cubeset")?.split_once(',')?;
    let (cx, cy) = (parse_canonical(cx)?, parse_canonical(cy)?);
    Some((u32::try_from(cx).ok()?, u32::try_from(cy).ok()?))
}

fn parse_canonical(s: &str) -> Option<i64> {
    let n: i64 = s.parse().ok()?;
    (n.to_string() == s).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_reject_non_canonical() {
        for kind in [DiskKind::Player, DiskKind::World, DiskKind::Undefined] {
            for w in well_known(kind) {
                assert_eq!(by_name(kind, w.name), Some(*w));
                assert_eq!(by_id(kind, w.id), Some(*w));
            }
        }
        assert_eq!(by_id(DiskKind::World, -2).unwrap().name, "thumbnail.tga");
        assert_eq!(by_id(DiskKind::Player, -2).unwrap().name, "spritedef");
        assert_eq!(by_id(DiskKind::Undefined, -2), None);
        assert_eq!(
            actor_file_name(0x1000_0000).as_deref(),
            Some("268435456.json")
        );
        assert_eq!(actor_file_name(5), None);
        assert_eq!(parse_actor_file_name("268435456.json"), Some(0x1000_0000));
        assert_eq!(parse_actor_file_name("0268435456.json"), None);
        assert_eq!(parse_actor_file_name("5.json"), None);
        assert_eq!(parse_entry_file_name("-4"), Some(-4));
        assert_eq!(parse_entry_file_name("+4"), None);
        assert_eq!(parse_entry_file_name("-0"), None);
        assert_eq!(parse_chunk_file_name("3,0.cubeset"), Some((3, 0)));
        assert_eq!(parse_chunk_file_name("3, 0.cubeset"), None);
        assert_eq!(parse_chunk_file_name("-1,0.cubeset"), None);
        assert_eq!(chunk_file_name(3, 0), "3,0.cubeset");
    }
}
