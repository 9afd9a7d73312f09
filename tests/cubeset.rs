//! Cubeset format: round trips of arbitrary grids, byte stability, and the error messages a
//! person sees for typical mistakes.

use proptest::prelude::*;
use worldfs::cubeset::{self, Definition, Grid};

fn def(kind: &str, meta: u32) -> Definition {
    Definition {
        kind: kind.to_string(),
        meta,
    }
}

/// The canonical form of a grid: duplicates merged, first-use order, unused entries dropped.
fn canonical(grid: &Grid) -> Grid {
    let mut palette: Vec<Definition> = Vec::new();
    let cells = grid
        .cells
        .iter()
        .map(|&c| {
            let d = &grid.palette[c as usize];
            match palette.iter().position(|p| p == d) {
                Some(i) => i as u32,
                None => {
                    palette.push(d.clone());
                    (palette.len() - 1) as u32
                }
            }
        })
        .collect();
    Grid {
        size: grid.size,
        palette,
        cells,
    }
}

fn kind() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z_]{1,8}:[a-z0-9_]{1,10}",
        "[0-9]{1,4}",
        // Anything printable, including quotes, backslashes, colons, non-ASCII; no edge spaces.
        "[^\\s\\p{Cc}][^\\p{Cc}]{0,6}[^\\s\\p{Cc}]",
        "[^\\s]{1}[\\x00-\\x1f\"\\\\]{0,3}[^\\s]{1}",
    ]
}

fn grid(max_palette: usize) -> impl Strategy<Value = Grid> {
    (
        (1usize..6, 1usize..6, 1usize..6),
        prop::collection::vec((kind(), any::<u32>()), 1..max_palette),
    )
        .prop_flat_map(|((sx, sy, sz), palette)| {
            let n = palette.len() as u32;
            let palette: Vec<Definition> = palette
                .into_iter()
                .map(|(k, m)| Definition { kind: k, meta: m })
                .collect();
            prop::collection::vec(0..n, sx * sy * sz).prop_map(move |cells| Grid {
                size: [sx, sy, sz],
                palette: palette.clone(),
                cells,
            })
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn round_trip_is_canonical_and_byte_stable(g in grid(12)) {
        let text = cubeset::render(&g, &|_| None);
        let parsed = cubeset::parse(&text).map_err(|e| {
            TestCaseError::fail(format!("{e}\n{}", String::from_utf8_lossy(&text)))
        })?;
        prop_assert_eq!(&parsed, &canonical(&g));
        prop_assert_eq!(cubeset::render(&parsed, &|_| None), text);
    }

    #[test]
    fn comments_do_not_change_the_grid(g in grid(6)) {
        let text = cubeset::render(&g, &|d| Some(format!("{} -- \"{}\"\nnext", d.kind, d.meta)));
        prop_assert_eq!(cubeset::parse(&text).unwrap(), canonical(&g));
    }
}

#[test]
fn many_definitions_use_unicode_characters() {
    let n = 5000;
    let g = Grid {
        size: [n, 1, 1],
        palette: (0..n).map(|i| def("x", i as u32)).collect(),
        cells: (0..n as u32).collect(),
    };
    let text = cubeset::render(&g, &|_| None);
    let s = String::from_utf8(text.clone()).unwrap();
    assert!(
        s.contains("\"\u{c0}: x: 91\""),
        "the 92nd definition is U+00C0"
    );
    assert_eq!(cubeset::parse(&text).unwrap(), g);
}

const HAND_WRITTEN: &str = r#"
-- typed by a person: odd spacing, single quotes, semicolons, brackets, comments everywhere
Cubeset = {
  Metadata = { ["CubesetFormatVersion"] = 1; IntendedUse = 'worldfs' };
  --[[ a block
       comment ]]
  Pieces = { {
      BlockDefinitions = {
          "z : default:dirt:1",   -- META after the last colon
          'y:air:0',
          "q: air: 0",            -- same as y: allowed, merged
      },
      Size = {x=3,y=2,z=1},
      BlockData = {
        "zyq", -- Level 0
        'qqz'
      }
  } }
}"#;

#[test]
fn hand_written_file_parses() {
    let g = cubeset::parse(HAND_WRITTEN.as_bytes()).unwrap();
    assert_eq!(g.size, [3, 2, 1]);
    assert_eq!(g.palette, vec![def("default:dirt", 1), def("air", 0)]);
    assert_eq!(g.cells, vec![0, 1, 1, 1, 1, 0]);
}

fn error_of(text: &str) -> String {
    cubeset::parse(text.as_bytes()).unwrap_err().to_string()
}

#[test]
fn error_syntax() {
    let text = HAND_WRITTEN.replace("'qqz'", "'qqz'\n  } \"oops\"");
    let e = error_of(&text);
    assert!(e.starts_with("line 17, column 5:"), "{e}");
    assert!(e.contains("expected `,` or `}`"), "{e}");
}

#[test]
fn error_unknown_character() {
    let e = error_of(&HAND_WRITTEN.replace("'qqz'", "'qXz'"));
    assert_eq!(
        e,
        "line 16, column 11: unknown character 'X' (no definition in BlockDefinitions)"
    );
}

#[test]
fn error_short_and_long_rows() {
    let e = error_of(&HAND_WRITTEN.replace("'qqz'", "'qz'"));
    assert_eq!(
        e,
        "line 16, column 9: row too short: level 1 row 0 has 2 characters, expected 3"
    );
    let e = error_of(&HAND_WRITTEN.replace("'qqz'", "'qqzz'"));
    assert_eq!(
        e,
        "line 16, column 13: row too long: level 1 row 0 must have 3 characters"
    );
}

#[test]
fn error_row_count() {
    let e = error_of(&HAND_WRITTEN.replace("'qqz'", "'qqz', 'zzz'"));
    assert!(e.starts_with("line 16, column 16: too many rows"), "{e}");
    let e = error_of(&HAND_WRITTEN.replace("'qqz'\n", "\n"));
    assert!(
        e.contains("BlockData has 1 rows, expected 2 levels of 1 rows"),
        "{e}"
    );
}

#[test]
fn error_bad_number() {
    let e = error_of(&HAND_WRITTEN.replace("default:dirt:1", "default:dirt:one"));
    assert!(
        e.starts_with("line 9, column 11: META `one` must be a whole number"),
        "{e}"
    );
    let e = error_of(&HAND_WRITTEN.replace("x=3", "x=3x"));
    assert!(e.contains("malformed number `3x`"), "{e}");
    let e = error_of(&HAND_WRITTEN.replace("x=3", "x=0"));
    assert!(
        e.contains("Size.x must be a whole number from 1 to 65536"),
        "{e}"
    );
}

#[test]
fn error_definition_mistakes() {
    let e = error_of(&HAND_WRITTEN.replace("'y:air:0'", "'z:air:0'"));
    assert!(e.contains("character 'z' is defined twice"), "{e}");
    let e = error_of(&HAND_WRITTEN.replace("'y:air:0'", "'y air 0'"));
    assert!(e.contains("expected `:` after the character 'y'"), "{e}");
    let e = error_of(&HAND_WRITTEN.replace("'y:air:0'", "y"));
    assert!(
        e.contains("found the name `y` (strings need quotes)"),
        "{e}"
    );
}

#[test]
fn error_structure() {
    let e = error_of(&HAND_WRITTEN.replace("IntendedUse", "CubesetFormatVersion"));
    assert!(e.contains("`CubesetFormatVersion` is given twice"), "{e}");
    let e = error_of(&HAND_WRITTEN.replace("] = 1", "] = 2"));
    assert!(e.contains("only CubesetFormatVersion = 1"), "{e}");
    let e = error_of(&HAND_WRITTEN.replace("Size =", "Sise ="));
    assert!(e.contains("unknown key `Sise`"), "{e}");
    let e = error_of(&HAND_WRITTEN.replace("} }\n}", "}, {} }\n}"));
    assert!(e.contains("exactly one piece"), "{e}");
    let e = error_of(&HAND_WRITTEN.replace("'qqz'", "'qqz"));
    assert!(e.contains("unfinished string"), "{e}");
    let e = error_of(&format!("{HAND_WRITTEN} x"));
    assert!(e.contains("unexpected text after the table"), "{e}");
    let e = cubeset::parse(b"Cubeset = { \xff }")
        .unwrap_err()
        .to_string();
    assert_eq!(e, "line 1, column 13: the file is not UTF-8");
}

#[test]
fn expected_size_and_definition_checks() {
    let e = cubeset::parse_checked(HAND_WRITTEN.as_bytes(), Some([16, 16, 16]), &|_| Ok(()))
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("line 13, column 14: the size must be x = 16, y = 16, z = 16"),
        "{e}"
    );
    let e = cubeset::parse_checked(HAND_WRITTEN.as_bytes(), None, &|d| {
        if d.meta > 0 {
            Err(format!("param2 {} too large", d.meta))
        } else {
            Ok(())
        }
    })
    .unwrap_err()
    .to_string();
    assert_eq!(e, "line 9, column 11: param2 1 too large");
}

#[test]
fn truncations_and_mutations_never_panic() {
    let g = Grid {
        size: [4, 3, 2],
        palette: vec![def("a:b", 1), def("é\"\\", 2), def("c", 3)],
        cells: (0..24).map(|i| (i % 3) as u32).collect(),
    };
    let text = cubeset::render(&g, &|d| Some(d.kind.clone()));
    for len in 0..text.len() {
        let _ = cubeset::parse(&text[..len]);
    }
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..3000 {
        let mut t = text.clone();
        for _ in 0..3 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let i = (state as usize) % t.len();
            t[i] = (state >> 32) as u8;
        }
        let _ = cubeset::parse(&t);
    }
}
