//! Unit tests of the Cubeset renderer and parser internals.

use super::*;

fn def(kind: &str, meta: u32) -> Definition {
    Definition {
        kind: kind.into(),
        meta,
    }
}

#[test]
fn renders_in_first_use_order_and_merges_duplicates() {
    let grid = Grid {
        size: [2, 1, 2],
        palette: vec![def("x", 0), def("unused", 1), def("y", 0), def("x", 0)],
        cells: vec![2, 0, 3, 2],
    };
    let text = String::from_utf8(render(&grid, &|_| None)).unwrap();
    assert!(
        text.contains("\"a: y: 0\",\n\t\t\t\t\"b: x: 0\",\n"),
        "{text}"
    );
    assert!(!text.contains("unused"));
    assert!(
        text.contains("\"ab\",  -- 0\n\t\t\t\t\"ba\",  -- 1\n"),
        "{text}"
    );
    let parsed = parse(text.as_bytes()).unwrap();
    assert_eq!(parsed.palette, vec![def("y", 0), def("x", 0)]);
    assert_eq!(parsed.cells, vec![0, 1, 1, 0]);
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
