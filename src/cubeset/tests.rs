//! Unit tests of the Cubeset renderer and parser internals.

use super::*;

fn def(kind: &str, meta: u32) -> Definition {
    Definition {
        kind: kind.into(),
        meta,
    }
}

#[test]
fn renders_in_sorted_order_and_merges_duplicates() {
    let grid = Grid {
        size: [2, 1, 2],
        palette: vec![def("x", 0), def("unused", 1), def("y", 0), def("x", 0)],
        cells: vec![2, 0, 3, 2],
    };
    let text = String::from_utf8(render(&grid, &|_| None)).unwrap();
    assert!(
        text.contains("\"a: x: 0\",\n\t\t\t\t\"b: y: 0\",\n"),
        "{text}"
    );
    assert!(!text.contains("unused"));
    assert!(
        text.contains("\"ba\",  -- 0\n\t\t\t\t\"ab\",  -- 1\n"),
        "{text}"
    );
    let parsed = parse(text.as_bytes()).unwrap();
    assert_eq!(parsed.palette, vec![def("y", 0), def("x", 0)]);
    assert_eq!(parsed.cells, vec![0, 1, 1, 0]);
}

/// Characters follow the sorted definitions, not the cells: changing a cell to a definition
/// the grid already uses keeps every character; numbers sort by value, before names.
#[test]
fn an_edit_keeping_the_definitions_keeps_every_character() {
    let grid = |cells: Vec<u32>| Grid {
        size: [3, 1, 1],
        palette: vec![def("stone", 0), def("10", 0), def("air", 0), def("9", 3)],
        cells,
    };
    let before = String::from_utf8(render(&grid(vec![2, 0, 1]), &|_| None)).unwrap();
    let after = String::from_utf8(render(&grid(vec![0, 2, 1]), &|_| None)).unwrap();
    let legend = |t: &str| {
        t.lines()
            .filter(|l| l.contains(": "))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(legend(&before), legend(&after));
    assert!(
        before.contains("\"a: 10: 0\",\n\t\t\t\t\"b: air: 0\",\n\t\t\t\t\"c: stone: 0\""),
        "{before}"
    );
    assert!(before.contains("\"bca\""), "{before}");
    assert!(after.contains("\"cba\""), "{after}");
    let four = String::from_utf8(render(&grid(vec![3, 1, 2]), &|_| None)).unwrap();
    assert!(
        four.contains("\"a: 9: 3\",\n\t\t\t\t\"b: 10: 0\""),
        "{four}"
    );
    // Types equal as numbers but not as text (`1`, `01`, `+1`) are told apart by their text,
    // so their characters do not follow the cells, and a render of the parsed render is the
    // same bytes.
    let ties = |cells: Vec<u32>| Grid {
        size: [3, 1, 1],
        palette: vec![def("01", 0), def("1", 0), def("+1", 0)],
        cells,
    };
    let text = String::from_utf8(render(&ties(vec![0, 1, 2]), &|_| None)).unwrap();
    let swapped = String::from_utf8(render(&ties(vec![1, 0, 2]), &|_| None)).unwrap();
    assert_eq!(legend(&text), legend(&swapped));
    let parsed = parse(swapped.as_bytes()).unwrap();
    assert_eq!(
        String::from_utf8(render(&parsed, &|_| None)).unwrap(),
        swapped
    );
}

#[test]
fn meta_is_after_the_last_colon() {
    assert_eq!(
        split_definition(" q :  default:stone:with:colons :  17 "),
        Ok(('q', "default:stone:with:colons", 17))
    );
    assert!(split_definition("q: stone").is_err());
    assert!(split_definition("q: stone: -1").is_err());
    assert!(split_definition("q stone: 1").is_err());
}

#[test]
fn out_of_range_cells_are_written_as_undefined() {
    let grid = Grid {
        size: [2, 1, 1],
        palette: vec![def("x", 0)],
        cells: vec![0, 5],
    };
    let text = render(&grid, &|_| None);
    let err = parse(&text).unwrap_err().to_string();
    assert!(err.contains("unknown character"), "{err}");
}
