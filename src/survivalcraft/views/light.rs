//! `light.txt`: the light (0–15) of every cell, one hex digit per cell.
//!
//! Format: lines starting with `#` are comments and blank lines are ignored; every other
//! line is one row of 16 hex digits (`0`–`9`, `a`–`f` or `A`–`F`), x = 0..15 left to right.
//! Rows come z = 0..15 within a level and levels y = 0..height−1 bottom-up, so there are
//! 16 × height rows. The writer puts a `# y N` comment before each level. Region chunks do
//! not store light (the game relights them), so their file is all zeros and a non-zero
//! digit is an error.

use crate::error::{Error, Result};
use crate::survivalcraft::codec::chunk::{Cell, Chunk};
use crate::survivalcraft::views::data_lines;

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Renders `light.txt`.
pub fn render(chunk: &Chunk) -> Vec<u8> {
    let mut out = Vec::with_capacity(chunk.height() * (16 * 17 + 10) + 200);
    out.extend_from_slice(
        b"# Light of every cell (hex 0-f). Per level y (bottom-up): 16 rows z = 0..15, x = 0..15 left to right.\n",
    );
    for y in 0..chunk.height() {
        out.extend_from_slice(format!("# y {y}\n").as_bytes());
        for z in 0..16 {
            for x in 0..16 {
                let l = chunk.cell(x, y, z).map_or(0, |c| c.light);
                out.push(HEX[usize::from(l & 15)]);
            }
            out.push(b'\n');
        }
    }
    out
}

/// Parses an edited `light.txt` onto `base` (ids, data and columns kept).
pub fn parse(base: &Chunk, text: &[u8]) -> Result<Chunk> {
    let (lines, end_line) = data_lines(text)?;
    let rows_needed = 16 * base.height();
    let mut cells: Vec<Cell> = base.cells().to_vec();
    let mut row = 0;
    for line in lines {
        let n = line.number;
        if row >= rows_needed {
            return Err(Error::at(n, 1, format!("more than {rows_needed} rows")));
        }
        let t = line.text.trim_start();
        let (y, z) = (row / 16, row % 16);
        let mut x = 0;
        for (i, ch) in t.char_indices() {
            let at = t.get(i..).unwrap_or(t);
            let Some(l) = ch.to_digit(16) else {
                return Err(line.error_at(at, format!("unknown character {ch:?} (a light is 0-f)")));
            };
            if x >= 16 {
                return Err(line.error_at(at, "a row has 16 cells"));
            }
            if l != 0 && !base.format().stores_light() {
                return Err(line.error_at(at, "region chunks do not store light (it must be 0)"));
            }
            if let Some(c) = cells.get_mut(Chunk::index(x, y, z)) {
                c.light = l as u8;
            }
            x += 1;
        }
        if x < 16 {
            return Err(line.error_at_end(format!("row has {x} cells, not 16")));
        }
        row += 1;
    }
    if row < rows_needed {
        return Err(Error::at(
            end_line,
            1,
            format!("{row} rows, expected {rows_needed}"),
        ));
    }
    Chunk::from_parts(base.format(), cells, base.columns().to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::survivalcraft::codec::format::TerrainFormat;

    #[test]
    fn light_round_trips() {
        let mut c = Chunk::empty(TerrainFormat::Chunks32);
        c.set_cell(
            3,
            100,
            7,
            Cell {
                id: 1,
                light: 11,
                data: 0,
            },
        )
        .unwrap();
        let text = render(&c);
        assert_eq!(
            parse(&Chunk::empty(TerrainFormat::Chunks32), &text)
                .unwrap()
                .cell(3, 100, 7)
                .unwrap()
                .light,
            11
        );
        assert_eq!(parse(&c, &text).unwrap(), c);
    }

    #[test]
    fn errors_have_positions() {
        let c = Chunk::empty(TerrainFormat::Chunks16);
        let text = String::from_utf8(render(&c)).unwrap();
        let bad = text.replacen("0000000000000000", "000g000000000000", 1);
        let e = parse(&c, bad.as_bytes()).unwrap_err();
        assert_eq!(
            e.message(),
            "line 3, column 4: unknown character 'g' (a light is 0-f)"
        );
        let short = text.replacen("0000000000000000\n", "000000000000000\n", 1);
        assert!(parse(&c, short.as_bytes())
            .unwrap_err()
            .message()
            .starts_with("line 3, column 16"));
        let fewer: String = text.lines().take(100).map(|l| format!("{l}\n")).collect();
        assert!(parse(&c, fewer.as_bytes()).is_err());
        let more = format!("{text}0000000000000000\n");
        assert!(parse(&c, more.as_bytes()).is_err());
        let r = Chunk::empty(TerrainFormat::Regions);
        let t = String::from_utf8(render(&r))
            .unwrap()
            .replacen("0000", "0001", 1);
        assert!(parse(&r, t.as_bytes()).is_err());
    }
}
