//! The text views of a Luanti map block: proptest round trips (render → parse gives the block
//! back, and rendering is byte-stable), the error messages of typical mistakes, and a corpus
//! of truncated and mutated views that must give errors, never panics.

#[allow(dead_code)]
mod common;

use common::mapblock::arb::{block_pos, viewed_block};
use common::mapblock::{blank, hand_made};
use proptest::prelude::*;
use worldfs::luanti::codec::block::{BlockPos, MapBlock, ObjectData, NODE_COUNT};
use worldfs::luanti::views;

type Render = fn(&MapBlock, BlockPos) -> Vec<u8>;
type Parse = fn(&[u8], BlockPos, &mut MapBlock) -> worldfs::Result<()>;
/// Copies the fields a view covers from one block to another.
type Copy = fn(&MapBlock, &mut MapBlock);

/// Every view as (file name, render, parse, the fields it covers copied into a block).
fn all_views() -> Vec<(&'static str, Render, Parse, Copy)> {
    vec![
        (
            "nodes.cubeset",
            |b, _| views::render_nodes(b),
            |t, _, b| views::parse_nodes(t, b),
            |from, to| {
                to.names = from.names.clone();
                to.content = from.content.clone();
                to.param2 = from.param2.clone();
            },
        ),
        (
            "light.txt",
            |b, _| views::render_light(b),
            |t, _, b| views::parse_light(t, b),
            |from, to| to.param1 = from.param1.clone(),
        ),
        (
            "block.txt",
            |b, _| views::render_header(b),
            |t, _, b| views::parse_header(t, b),
            |from, to| {
                to.version = from.version;
                to.flags = from.flags;
                to.lighting_complete = from.lighting_complete;
                to.timestamp = from.timestamp;
            },
        ),
        (
            "timers.txt",
            |b, _| views::render_timers(b),
            |t, _, b| views::parse_timers(t, b),
            |from, to| to.timers = from.timers.clone(),
        ),
        (
            "objects.txt",
            views::render_objects,
            views::parse_objects,
            |from, to| to.objects = from.objects.clone(),
        ),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn every_view_round_trips((block, pos) in viewed_block()) {
        for (name, render, parse, copy) in all_views() {
            let text = render(&block, pos);
            let mut parsed = blank();
            parse(&text, pos, &mut parsed).map_err(|e| {
                TestCaseError::fail(format!("{name}: {e}\n{}", String::from_utf8_lossy(&text)))
            })?;
            let mut expected = blank();
            copy(&block, &mut expected);
            prop_assert_eq!(&parsed, &expected, "{}", name);
            prop_assert_eq!(render(&parsed, pos), text, "{} is not byte-stable", name);
        }
    }

    #[test]
    fn all_views_together_rebuild_the_block((block, pos) in viewed_block()) {
        let mut copy = blank();
        for (_, render, parse, _) in all_views() {
            parse(&render(&block, pos), pos, &mut copy).unwrap();
        }
        prop_assert_eq!(copy, block);
    }

    #[test]
    fn objects_keep_their_relative_place_in_another_block(
        (block, pos) in viewed_block(), to in block_pos()
    ) {
        let text = views::render_objects(&block, pos);
        let mut moved = blank();
        views::parse_objects(&text, to, &mut moved).unwrap();
        for (a, b) in block.objects.iter().zip(&moved.objects) {
            let shift = [to.x - pos.x, to.y - pos.y, to.z - pos.z];
            for ((pb, pa), s) in b.pos.iter().zip(a.pos).zip(shift) {
                prop_assert_eq!(i64::from(*pb) - i64::from(pa), i64::from(s) * 160_000);
            }
        }
        prop_assert_eq!(views::render_objects(&moved, to), text);
    }
}

fn view_text(name: &str) -> String {
    let (block, pos) = hand_made();
    let (_, render, _, _) = all_views().into_iter().find(|v| v.0 == name).unwrap();
    String::from_utf8(render(&block, pos)).unwrap()
}

fn error_of(name: &str, text: &str) -> String {
    let (mut block, pos) = hand_made();
    let (_, _, parse, _) = all_views().into_iter().find(|v| v.0 == name).unwrap();
    let before = block.clone();
    let e = parse(text.as_bytes(), pos, &mut block).unwrap_err();
    assert_eq!(block, before, "a failed parse must not change the block");
    assert_eq!(e.errno(), libc::EINVAL);
    e.to_string()
}

/// `text` with the first occurrence of `from` replaced (which must exist).
fn edit(text: &str, from: &str, to: &str) -> String {
    assert!(text.contains(from), "{from:?} not in\n{text}");
    text.replacen(from, to, 1)
}

#[test]
fn hand_edits_are_accepted() {
    let (block, pos) = hand_made();
    let mut b = block.clone();
    // nodes: a new definition, used by one node (x=1, y=0, z=0).
    let nodes = view_text("nodes.cubeset");
    let nodes = edit(
        &nodes,
        "\"b: default:stone: 0\",",
        "\"b: default:stone: 0\", 'S: default:dirt: 7';",
    );
    let nodes = edit(&nodes, "\"bbbbbcbbbbbbbbbb\"", "\"bSbbbcbbbbbbbbbb\"");
    views::parse_nodes(nodes.as_bytes(), &mut b).unwrap();
    assert_eq!(b.names, vec!["default:stone", "default:dirt", "air"]);
    assert_eq!((b.content[1], b.param2[1]), (1, 7));
    // light: upper-case, single digits, odd spacing, no trailing newline.
    let light = view_text("light.txt")
        .replacen("00 01 02", "  0   1 02", 1)
        .replace(" 0a ", " A ");
    views::parse_light(light.trim_end().as_bytes(), &mut b).unwrap();
    assert_eq!(b.param1, block.param1);
    // header: reordered, other spellings, hexadecimal.
    let header = "timestamp=0x10\n\n  generated = no\nunderground=yes # comment\n\
                  day_night_differs = 1\nlighting_expired = false\nlighting_complete = 65535\nversion = 28";
    views::parse_header(header.as_bytes(), &mut b).unwrap();
    assert_eq!(
        (b.version, b.flags, b.lighting_complete, b.timestamp),
        (28, 0x0b, 0xffff, 16)
    );
    // timers: spaces, fewer decimals, any order.
    views::parse_timers(b"# mine\n 2, 0 ,1  5 0.5\n0,0,0 1.25 0   # first\n", &mut b).unwrap();
    let positions: Vec<_> = b
        .timers
        .iter()
        .map(|t| (t.pos.x, t.pos.y, t.pos.z, t.timeout, t.elapsed))
        .collect();
    assert_eq!(positions, vec![(0, 0, 0, 1250, 0), (2, 0, 1, 5000, 500)]);
    // objects: keys in another order, a quoted name, spaced hex.
    let objects = "[object]\ndata = 01 02\npos = 1,2,3 \ntype=9\n[lua_entity]\nstate=\"\"\nyaw=0\n\
                   velocity=1,2,3\nhp=1\nname = \"a b\"\npos = 0,0,0";
    views::parse_objects(objects.as_bytes(), pos, &mut b).unwrap();
    assert_eq!(b.objects[0].pos, [-150_000, 20_000, 510_000]);
    assert_eq!(b.objects[0].data, ObjectData::Raw(vec![1, 2]));
    let ObjectData::LuaEntity(e) = &b.objects[1].data else {
        panic!()
    };
    assert_eq!(
        (e.name.as_str(), e.velocity, e.extra.is_none()),
        ("a b", [1000, 2000, 3000], true)
    );
}

#[test]
fn nodes_unknown_character_is_refused_at_its_place() {
    let nodes = view_text("nodes.cubeset");
    let e = error_of(
        "nodes.cubeset",
        &edit(&nodes, "\"bbbbbcbbbbbbbbbb\"", "\"bbbbbZbbbbbbbbbb\""),
    );
    assert_eq!(
        e,
        "line 26, column 11: unknown character 'Z' (no definition in BlockDefinitions)"
    );
}

#[test]
fn nodes_short_row_is_refused() {
    let nodes = view_text("nodes.cubeset");
    let e = error_of(
        "nodes.cubeset",
        &edit(&nodes, "\"bbbbbcbbbbbbbbbb\"", "\"bbbbbcbbbbbbbbb\""),
    );
    assert_eq!(
        e,
        "line 26, column 5: row too short: level 0 row 0 has 15 characters, expected 16"
    );
}

#[test]
fn nodes_param2_out_of_range_is_refused() {
    let nodes = view_text("nodes.cubeset");
    let e = error_of("nodes.cubeset", &edit(&nodes, "stone: 3", "stone: 256"));
    assert_eq!(
        e,
        "line 21, column 5: param2 256 is out of range (0 to 255)"
    );
}

#[test]
fn nodes_param2_not_a_number_is_refused() {
    let nodes = view_text("nodes.cubeset");
    let e = error_of("nodes.cubeset", &edit(&nodes, "stone: 3", "stone: three"));
    assert!(
        e.starts_with("line 21, column 5: META `three` must be a whole number"),
        "{e}"
    );
}

#[test]
fn nodes_empty_node_name_is_refused() {
    let nodes = view_text("nodes.cubeset");
    let e = error_of(
        "nodes.cubeset",
        &edit(&nodes, "\"c: default:stone: 3\"", "\"c: : 3\""),
    );
    assert_eq!(e, "line 21, column 5: empty node name");
}

#[test]
fn nodes_wrong_size_is_refused() {
    let nodes = view_text("nodes.cubeset");
    let e = error_of("nodes.cubeset", &edit(&nodes, "y = 16", "y = 15"));
    assert!(
        e.starts_with("line 13, column 11: the size must be x = 16, y = 16, z = 16"),
        "{e}"
    );
}

#[test]
fn nodes_missing_comma_between_definitions_is_refused() {
    let nodes = view_text("nodes.cubeset");
    let e = error_of(
        "nodes.cubeset",
        &edit(
            &nodes,
            "\"b: default:stone: 0\",",
            "\"b: default:stone: 0\"",
        ),
    );
    assert!(
        e.starts_with("line 21, column 5: expected `,` or `}`"),
        "{e}"
    );
}

#[test]
fn light_value_not_hexadecimal_is_refused() {
    let light = view_text("light.txt");
    let e = error_of("light.txt", &edit(&light, "00 01 02", "00 0g 02"));
    assert_eq!(
        e,
        "line 4, column 4: `0g` is not a light value (two hexadecimal digits, 00 to ff)"
    );
}

#[test]
fn light_value_of_three_digits_is_refused() {
    let light = view_text("light.txt");
    let e = error_of("light.txt", &edit(&light, "00 01 02", "00 01 102"));
    assert!(
        e.starts_with("line 4, column 7: `102` is not a light value"),
        "{e}"
    );
}

#[test]
fn light_short_row_is_refused() {
    let light = view_text("light.txt");
    let e = error_of("light.txt", &edit(&light, "00 01 02 ", "00 01 "));
    assert_eq!(
        e,
        "line 4, column 1: level 0 row 0 has 15 values, expected 16"
    );
}

#[test]
fn light_long_row_is_refused() {
    let light = view_text("light.txt");
    let e = error_of("light.txt", &edit(&light, "00 01 02 ", "00 01 02 03 "));
    assert!(e.starts_with("line 4, column 49: too many values"), "{e}");
}

#[test]
fn light_extra_row_is_refused() {
    let light = view_text("light.txt");
    let e = error_of("light.txt", &format!("{light}00 00\n"));
    assert!(e.starts_with("line 290, column 1: too many rows"), "{e}");
}

#[test]
fn light_missing_rows_are_refused() {
    let light = view_text("light.txt");
    let short: String = light.lines().take(100).map(|l| format!("{l}\n")).collect();
    let e = error_of("light.txt", &short);
    assert!(
        e.starts_with("line 101, column 1: only 87 rows, expected 256"),
        "{e}"
    );
}

#[test]
fn header_version_out_of_range_is_refused() {
    let header = view_text("block.txt");
    let e = error_of("block.txt", &edit(&header, "version = 29", "version = 30"));
    assert_eq!(
        e,
        "line 1, column 11: version 30 is out of range (22 to 29)"
    );
}

#[test]
fn header_version_not_a_number_is_refused() {
    let header = view_text("block.txt");
    let e = error_of(
        "block.txt",
        &edit(&header, "version = 29", "version = twenty"),
    );
    assert_eq!(e, "line 1, column 11: version must be a whole number");
}

#[test]
fn header_flag_not_a_boolean_is_refused() {
    let header = view_text("block.txt");
    let e = error_of(
        "block.txt",
        &edit(&header, "underground = true", "underground = maybe"),
    );
    assert_eq!(e, "line 2, column 15: underground must be true or false");
}

#[test]
fn header_unknown_key_is_refused() {
    let header = view_text("block.txt");
    let e = error_of("block.txt", &edit(&header, "underground", "undergrund"));
    assert!(
        e.starts_with("line 2, column 1: unknown key `undergrund`"),
        "{e}"
    );
}

#[test]
fn header_key_given_twice_is_refused() {
    let header = view_text("block.txt");
    let e = error_of("block.txt", &format!("{header}version = 29\n"));
    assert_eq!(e, "line 8, column 1: `version` is given twice");
}

#[test]
fn header_negative_timestamp_is_refused() {
    let header = view_text("block.txt");
    let e = error_of(
        "block.txt",
        &edit(&header, "timestamp = 1234", "timestamp = -1"),
    );
    assert!(
        e.starts_with("line 7, column 13: timestamp must be a number of seconds"),
        "{e}"
    );
}

#[test]
fn header_text_after_a_value_is_refused() {
    let header = view_text("block.txt");
    let e = error_of(
        "block.txt",
        &edit(&header, "timestamp = 1234", "timestamp = 12 34"),
    );
    assert_eq!(e, "line 7, column 16: unexpected text");
}

#[test]
fn header_missing_key_is_refused() {
    let header = view_text("block.txt");
    let e = error_of(
        "block.txt",
        &edit(&header, "lighting_complete", "# lighting_complete"),
    );
    assert_eq!(e, "line 8, column 1: `lighting_complete` is missing");
}

#[test]
fn header_line_without_equals_is_refused() {
    let header = view_text("block.txt");
    let e = error_of("block.txt", &edit(&header, "version = 29", "version 29"));
    assert_eq!(e, "line 1, column 1: expected `key = value`");
}

/// Blocks before version 27 have no lighting_complete (the engine reads it only from 27 on):
/// block.txt shows `lighting_expired` alone, takes the old `0xffff` line and refuses others.
#[test]
fn header_before_version_27_has_no_lighting_complete() {
    let (mut block, _) = hand_made();
    block.version = 25;
    block.lighting_complete = 0xffff;
    block.flags = 0x04;
    let text = String::from_utf8(views::render_header(&block)).unwrap();
    assert!(!text.contains("lighting_complete"), "{text}");
    assert!(text.contains("lighting_expired = true"), "{text}");
    let mut parsed = hand_made().0;
    views::parse_header(text.as_bytes(), &mut parsed).unwrap();
    assert_eq!(
        (parsed.version, parsed.flags, parsed.lighting_complete),
        (25, 0x04, 0xffff)
    );
    let from_29 = hand_made().0;
    assert_eq!(from_29.lighting_complete, 0xfffe);
    let mut parsed = from_29.clone();
    let old = format!("{text}lighting_complete = 0xffff\n");
    views::parse_header(old.as_bytes(), &mut parsed).unwrap();
    assert_eq!(
        parsed.lighting_complete, 0xffff,
        "a version-25 block is complete"
    );
    let mut parsed = from_29.clone();
    let e = views::parse_header(
        format!("{text}lighting_complete = 0\n").as_bytes(),
        &mut parsed,
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("line 7, column 1: lighting_complete = 0x0000: blocks before version 27"),
        "{e}"
    );
    assert_eq!(parsed, from_29, "a failed parse changes nothing");
}

#[test]
fn timer_position_out_of_range_is_refused() {
    let e = error_of("timers.txt", "16,0,0 1 1\n");
    assert_eq!(e, "line 1, column 1: x 16 is out of range (0 to 15)");
}

#[test]
fn timer_timeout_with_four_decimals_is_refused() {
    let e = error_of("timers.txt", "1,0,0 1.2345 1\n");
    assert_eq!(
        e,
        "line 1, column 7: timeout: `1.2345` is not a number (at most 3 digits after the point)"
    );
}

#[test]
fn timer_position_without_comma_is_refused() {
    let e = error_of("timers.txt", "1,0 0 1 1\n");
    assert_eq!(e, "line 1, column 5: expected `,` between y and z");
}

#[test]
fn timer_without_elapsed_is_refused() {
    let e = error_of("timers.txt", "1,0,0 1\n");
    assert_eq!(
        e,
        "line 1, column 8: expected the elapsed in seconds, found the end of the line"
    );
}

#[test]
fn timer_given_twice_at_one_node_is_refused() {
    let e = error_of("timers.txt", "1,0,0 1 1\n\n1,0,0 2 2\n");
    assert_eq!(
        e,
        "line 3, column 1: a second timer at 1,0,0 (the first is on line 1)"
    );
}

#[test]
fn timer_timeout_out_of_range_is_refused() {
    let e = error_of("timers.txt", "1,0,0 2147483.648 0\n");
    assert!(
        e.starts_with("line 1, column 7: timeout 2147483.648 is out of range"),
        "{e}"
    );
}

/// The engine drops a timer whose timeout is not positive when it loads the block: such a
/// line is refused at its place (it was refused at the commit, without a line).
#[test]
fn timer_timeout_not_positive_is_refused_at_its_place() {
    for (timeout, shown) in [("0", "0"), ("-1.5", "-1.5"), ("0.0004", "0.0004")] {
        let e = error_of("timers.txt", &format!("0,0,0 1 0\n2,3,4 {timeout} 0\n"));
        let want = format!("line 2, column 7: timeout {shown} is out of range (0.001 to");
        if timeout == "0.0004" {
            assert!(e.starts_with("line 2, column 7: timeout: "), "{e}");
        } else {
            assert!(e.starts_with(&want), "{e}");
        }
    }
    // A negative elapsed time the engine keeps.
    let (mut block, _) = hand_made();
    views::parse_timers(b"1,0,0 1 -2\n", &mut block).unwrap();
    assert_eq!(block.timers[0].elapsed, -2000);
}

#[test]
fn object_unknown_section_is_refused() {
    let objects = view_text("objects.txt");
    let e = error_of("objects.txt", &edit(&objects, "[object]", "[thing]"));
    assert_eq!(
        e,
        "line 16, column 1: unknown section `[thing]` (expected [lua_entity] or [object])"
    );
}

#[test]
fn object_lua_entity_without_hp_is_refused() {
    let objects = view_text("objects.txt");
    let e = error_of("objects.txt", &edit(&objects, "hp = 10\n", ""));
    assert_eq!(e, "line 4, column 1: [lua_entity] has no `hp`");
}

#[test]
fn object_data_of_odd_length_is_refused() {
    let objects = view_text("objects.txt");
    let e = error_of(
        "objects.txt",
        &edit(&objects, "data = 0102ff", "data = 0102f"),
    );
    assert!(
        e.starts_with("line 19, column 8: data must be hexadecimal digits in pairs"),
        "{e}"
    );
}

/// A position outside the block is taken (a block copied whole keeps its objects' absolute
/// positions, and the engine loads it); one whose absolute value does not fit the stored
/// integer is refused with the range this block allows.
#[test]
fn object_positions_outside_the_block_are_kept_and_only_unstorable_ones_refused() {
    let objects = view_text("objects.txt");
    let (mut block, pos) = hand_made();
    let (_, render, parse, _) = all_views()
        .into_iter()
        .find(|v| v.0 == "objects.txt")
        .unwrap();
    let far = edit(&objects, "pos = 0.5000", "pos = -645.0000");
    parse(far.as_bytes(), pos, &mut block).unwrap();
    assert_eq!(String::from_utf8(render(&block, pos)).unwrap(), far);
    let e = error_of(
        "objects.txt",
        &edit(&objects, "pos = 0.5000", "pos = 300000.0000"),
    );
    assert!(
        e.starts_with(
            "line 5, column 7: x 300000.0000 is out of range (-214732.3648 to 214764.3647)"
        ),
        "{e}"
    );
}

#[test]
fn object_pitch_without_version2_is_refused() {
    let objects = view_text("objects.txt");
    let e = error_of("objects.txt", &edit(&objects, "version2 = 2\n", ""));
    assert_eq!(
        e,
        "line 4, column 1: `pitch` needs `version2` (1 for pitch and roll, 2 with guid)"
    );
}

#[test]
fn object_guid_with_version2_1_is_refused() {
    let objects = view_text("objects.txt");
    let e = error_of(
        "objects.txt",
        &edit(&objects, "version2 = 2", "version2 = 1"),
    );
    assert_eq!(e, "line 4, column 1: `guid` needs version2 2 or higher");
}

#[test]
fn object_state_with_unknown_escape_is_refused() {
    let objects = view_text("objects.txt");
    let e = error_of(
        "objects.txt",
        &edit(&objects, "state = \"", "state = \"\\q"),
    );
    assert!(e.starts_with("line 14, column 10: unknown escape"), "{e}");
}

#[test]
fn object_state_without_closing_quote_is_refused() {
    let objects = view_text("objects.txt");
    let e = error_of("objects.txt", &edit(&objects, "\\xff\"", "\\xff"));
    assert_eq!(e, "line 14, column 9: state: missing closing quote");
}

#[test]
fn object_hp_out_of_range_is_refused() {
    let objects = view_text("objects.txt");
    let e = error_of("objects.txt", &edit(&objects, "hp = 10", "hp = 70000"));
    assert_eq!(e, "line 7, column 6: hp 70000 is out of range (0 to 65535)");
}

#[test]
fn object_key_before_any_section_is_refused() {
    let objects = view_text("objects.txt");
    let e = error_of(
        "objects.txt",
        &edit(&objects, "\n[lua_entity]", "hp = 1\n[lua_entity]"),
    );
    assert_eq!(
        e,
        "line 3, column 1: expected a section header, [lua_entity] or [object]"
    );
}

#[test]
fn object_key_given_twice_is_refused() {
    let objects = view_text("objects.txt");
    let e = error_of(
        "objects.txt",
        &edit(&objects, "yaw = 1.571", "yaw = 1.571\nyaw = 2"),
    );
    assert_eq!(e, "line 10, column 1: `yaw` is given twice");
}

#[test]
fn not_utf8_is_rejected_with_its_place() {
    let e = error_of("timers.txt", "0,0,0 1 1\n1,\u{e9}\u{ff}");
    assert!(e.starts_with("line 2, column 3:"), "{e}");
    let mut bytes = b"0,0,0 1 1\n1,0".to_vec();
    bytes.push(0xff);
    let (mut block, _) = hand_made();
    let e = views::parse_timers(&bytes, &mut block)
        .unwrap_err()
        .to_string();
    assert_eq!(e, "line 2, column 4: the file is not UTF-8");
}

/// Truncations at every length and random byte mutations: errors or blocks, never panics.
#[test]
fn malformed_views_never_panic() {
    let (block, pos) = hand_made();
    let mut other = block.clone();
    other.names = vec!["a".into(), "é:\"\\".into(), "c".into()];
    other.content = (0..NODE_COUNT).map(|i| (i % 3) as u16).collect();
    other.param2 = (0..NODE_COUNT).map(|i| (i % 7) as u8).collect();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let (mut ok, mut err) = (0usize, 0usize);
    for b in [&block, &other] {
        for (_, render, parse, _) in all_views() {
            let text = render(b, pos);
            let mut tally = |r: worldfs::Result<()>| match r {
                Ok(()) => ok += 1,
                Err(_) => err += 1,
            };
            for len in 0..=text.len() {
                let mut scratch = blank();
                tally(parse(&text[..len], pos, &mut scratch));
            }
            for _ in 0..400 {
                let mut t = text.clone();
                for _ in 0..1 + next() % 4 {
                    let i = (next() as usize) % t.len();
                    match next() % 3 {
                        0 => t[i] = next() as u8,
                        1 => {
                            t.remove(i);
                        }
                        _ => {
                            let symbols = b"\"#,=:[]\n\\ 0f-.";
                            t.insert(i, symbols[(next() as usize) % symbols.len()]);
                        }
                    }
                }
                let mut scratch = blank();
                tally(parse(&t, pos, &mut scratch));
            }
        }
    }
    assert!(
        err > ok,
        "most damaged files must be rejected ({ok} accepted, {err} rejected)"
    );
}

#[test]
fn blocks_with_many_names_and_param2_values_round_trip() {
    let (mut block, _) = hand_made();
    block.names = (0..300).map(|i| format!("mod:node_{i}")).collect();
    block.content = (0..NODE_COUNT).map(|i| (i % 300) as u16).collect();
    block.param2 = (0..NODE_COUNT).map(|i| (i / 7 % 256) as u8).collect();
    let text = views::render_nodes(&block);
    assert!(
        String::from_utf8_lossy(&text).contains('\u{c0}'),
        "Unicode characters in use"
    );
    let mut parsed = blank();
    views::parse_nodes(&text, &mut parsed).unwrap();
    // Names come back in first use by node index; here that is their order already.
    assert_eq!(parsed.names, block.names);
    assert_eq!(
        (parsed.content, parsed.param2),
        (block.content, block.param2)
    );
}

#[test]
fn content_without_a_name_is_not_silently_written() {
    let (mut block, _) = hand_made();
    block.content[77] = 9;
    let text = views::render_nodes(&block);
    let e = views::parse_nodes(&text, &mut blank())
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown character '\u{fffd}'"), "{e}");
}
