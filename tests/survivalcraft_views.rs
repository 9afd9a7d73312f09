//! Property tests of the Survivalcraft views and codecs, and malformed text inputs.

use proptest::prelude::*;
use worldfs::survivalcraft::codec::chunk::{Cell, Chunk, ChunkPos, Column};
use worldfs::survivalcraft::codec::format::TerrainFormat;
use worldfs::survivalcraft::codec::{self, project};
use worldfs::survivalcraft::views::{blocks, inventory, light, surface};

fn any_format() -> impl Strategy<Value = TerrainFormat> {
    prop_oneof![
        Just(TerrainFormat::Chunks16),
        Just(TerrainFormat::Chunks32),
        Just(TerrainFormat::Chunks32h),
        Just(TerrainFormat::Regions),
    ]
}

/// A chunk with a few hundred random cells and random columns, valid for its format.
fn any_chunk() -> impl Strategy<Value = Chunk> {
    (
        any_format(),
        prop::collection::vec(
            (
                0usize..16,
                0usize..256,
                0usize..16,
                any::<u16>(),
                any::<u8>(),
                any::<u32>(),
            ),
            0..300,
        ),
        prop::collection::vec(
            (any::<u8>(), 0u8..16, 0u8..16, any::<u8>(), any::<u8>()),
            256,
        ),
    )
        .prop_map(|(format, cells, cols)| {
            let mut c = Chunk::empty(format);
            for (x, y, z, id, light, data) in cells {
                let cell = Cell {
                    id: id % (format.max_id() + 1),
                    light: if format.stores_light() { light % 16 } else { 0 },
                    data: data % (format.max_data() + 1),
                };
                c.set_cell(x, y % format.height(), z, cell).unwrap();
            }
            for (i, (top, t, h, b, s)) in cols.into_iter().enumerate() {
                let (x, z) = (i % 16, i / 16);
                let col = if format.stores_heights() {
                    Column {
                        top,
                        temperature: t,
                        humidity: h,
                        bottom: b,
                        sunlight: s,
                    }
                } else {
                    Column {
                        top: c.computed_top(x, z),
                        temperature: t,
                        humidity: h,
                        bottom: 0,
                        sunlight: 0,
                    }
                };
                c.set_column(x, z, col).unwrap();
            }
            c
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn chunks_round_trip_through_their_codec(c in any_chunk(), cx in any::<i32>(), cz in any::<i32>()) {
        let raw = codec::encode_chunk(&c, ChunkPos::new(cx, cz)).unwrap();
        let back = codec::decode_chunk(c.format(), &raw).unwrap();
        prop_assert_eq!(&back, &c);
        if c.format() != TerrainFormat::Regions {
            prop_assert_eq!(codec::encode_chunk(&back, ChunkPos::new(cx, cz)).unwrap(), raw);
        }
    }

    #[test]
    fn light_and_surface_views_round_trip(c in any_chunk()) {
        prop_assert_eq!(&light::parse(&c, &light::render(&c)).unwrap(), &c);
        prop_assert_eq!(&surface::parse(&c, &surface::render(&c)).unwrap(), &c);
        // Parsing onto another chunk of the format carries the view's fields over.
        let blank = Chunk::empty(c.format());
        let lit = light::parse(&blank, &light::render(&c)).unwrap();
        prop_assert!(lit.cells().iter().zip(c.cells()).all(|(a, b)| a.light == b.light));
    }

    #[test]
    fn block_grids_round_trip(c in any_chunk()) {
        prop_assert_eq!(&blocks::from_grid(&c, &blocks::to_grid(&c)).unwrap(), &c);
        let moved = blocks::from_grid(&Chunk::empty(c.format()), &blocks::to_grid(&c)).unwrap();
        prop_assert!(moved.cells().iter().zip(c.cells()).all(|(a, b)| (a.id, a.data) == (b.id, b.data)));
        for z in 0..16 {
            for x in 0..16 {
                let top = moved.column(x, z).unwrap().top;
                prop_assert!(top == moved.computed_top(x, z) || top == 0);
            }
        }
    }

    #[test]
    fn block_text_round_trips(c in any_chunk()) {
        prop_assert_eq!(&blocks::parse(&c, &blocks::render(&c)).unwrap(), &c);
    }

    #[test]
    fn inventories_round_trip(
        invs in prop::collection::vec(
            ("[A-Za-z_][A-Za-z0-9_]{0,12}", prop::collection::btree_map(0u32..=project::MAX_SLOT, (any::<i32>(), 1i32..=i32::MAX), 0..12)),
            0..4,
        ),
        sixteen in any::<bool>(),
    ) {
        let mut list: Vec<project::Inventory> = Vec::new();
        for (name, slots) in invs {
            if list.iter().any(|i| i.component == name) {
                continue;
            }
            let slots = slots.into_iter().map(|(index, (contents, count))| project::Slot { index, contents, count }).collect();
            list.push(project::Inventory { component: name, slots });
        }
        let layout = if sixteen { inventory::ValueLayout::Bits16 } else { inventory::ValueLayout::Bits32 };
        prop_assert_eq!(inventory::parse(&inventory::render(&list, layout)).unwrap(), list);
    }

    #[test]
    fn arbitrary_text_never_panics(text in prop::collection::vec(any::<u8>(), 0..2000)) {
        let c = Chunk::empty(TerrainFormat::Chunks16);
        let _ = light::parse(&c, &text);
        let _ = surface::parse(&c, &text);
        let _ = inventory::parse(&text);
        let _ = project::read(&text);
        let _ = codec::decode_chunk(TerrainFormat::Regions, &text);
    }

    #[test]
    fn mutated_views_never_panic(c in any_chunk(), at in any::<prop::sample::Index>(), byte in any::<u8>()) {
        for text in [light::render(&c), surface::render(&c), blocks::render(&c)] {
            let mut t = text.clone();
            let i = at.index(t.len());
            t[i] = byte;
            let _ = light::parse(&c, &t);
            let _ = surface::parse(&c, &t);
            let _ = light::parse(&c, &t[..i]);
            let _ = surface::parse(&c, &t[..i]);
            let _ = blocks::parse(&c, &t);
            let _ = blocks::parse(&c, &t[..i]);
        }
    }
}

#[test]
fn malformed_view_inputs_are_errors_with_positions() {
    let c = Chunk::empty(TerrainFormat::Chunks32h);
    let text = String::from_utf8(light::render(&c)).unwrap();
    for (bad, want) in [
        (
            text.replacen("0000000000000000", "00000000000000z0", 1),
            "line 3, column 15",
        ),
        (
            text.replacen("0000000000000000\n", "", 1),
            "rows, expected 4096",
        ),
        (format!("{text}\u{e9}"), "column 1"),
    ] {
        let e = light::parse(&c, bad.as_bytes()).unwrap_err();
        assert!(e.message().contains(want), "{e}");
        assert_eq!(e.errno(), libc::EINVAL);
    }
    let e = light::parse(&c, b"\xff\xfe").unwrap_err();
    assert_eq!(e.message(), "line 1, column 1: text is not UTF-8");
    let s = String::from_utf8(surface::render(&c)).unwrap();
    let e = surface::parse(&c, s.replacen("0 0 0 0 0", "0 0 256 0 0", 1).as_bytes()).unwrap_err();
    assert_eq!(
        e.message(),
        "line 3, column 5: TOP 256 is out of range 0-255"
    );
    let e =
        surface::parse(&c, s.replacen("0 0 0 0 0", "0 0 0 0 \u{3b1}", 1).as_bytes()).unwrap_err();
    assert_eq!(e.message(), "line 3, column 9: unknown character '\u{3b1}'");
    let mut g = blocks::to_grid(&c);
    g.palette[0].kind = "1024".into();
    assert!(blocks::from_grid(&c, &g)
        .unwrap_err()
        .message()
        .contains("over 1023"));
}
