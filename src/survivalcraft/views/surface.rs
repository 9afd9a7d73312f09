//! `surface.txt`: per column, the top height, temperature and humidity.
//!
//! Format: lines starting with `#` are comments, blank lines are ignored, and every other
//! line is `X Z TOP TEMPERATURE HUMIDITY` (decimal, separated by spaces or tabs): X and Z
//! the column inside the chunk (0–15), TOP the y of its highest non-air cell (a byte,
//! 0–255, as stored), temperature and humidity 0–15. Each of the 256 columns appears exactly once, in any order. TOP is
//! derived data: editing `blocks.cubeset` recomputes it; writing it here stores the value
//! for formats that store it and must match the cells for region chunks, which do not.
//! Shaft bytes the file does not show (bottom and sunlight heights) are kept.

use crate::error::{Error, Result};
use crate::survivalcraft::codec::chunk::{Chunk, Column};
use crate::survivalcraft::views::data_lines;
use crate::text::Line;

/// Renders `surface.txt`.
pub fn render(chunk: &Chunk) -> Vec<u8> {
    let mut out = String::from(
        "# Surface of each column: X Z TOP TEMPERATURE HUMIDITY\n\
         # X, Z: column in the chunk (0-15); TOP: y of the highest non-air cell; TEMPERATURE, HUMIDITY: 0-15\n",
    );
    for z in 0..16 {
        for x in 0..16 {
            let c = chunk.column(x, z).unwrap_or_default();
            out.push_str(&format!(
                "{x} {z} {} {} {}\n",
                c.top, c.temperature, c.humidity
            ));
        }
    }
    out.into_bytes()
}

/// The numbers of a line, in order.
const NAMES: [&str; 5] = ["X", "Z", "TOP", "TEMPERATURE", "HUMIDITY"];

/// Parses an edited `surface.txt` onto `base`.
pub fn parse(base: &Chunk, text: &[u8]) -> Result<Chunk> {
    let (lines, end_line) = data_lines(text)?;
    let mut out = base.clone();
    let mut seen = [false; 256];
    for line in lines {
        let n = line.number;
        let v = numbers(base, &line)?;
        let (x, z) = (v[0] as usize, v[1] as usize);
        let Some(s) = seen.get_mut(z * 16 + x) else {
            return Err(Error::at(n, 1, "column outside the chunk"));
        };
        if std::mem::replace(s, true) {
            return Err(Error::at(n, 1, format!("column {x} {z} is listed twice")));
        }
        let old = base.column(x, z).unwrap_or_default();
        let col = Column {
            top: v[2] as u8,
            temperature: v[3] as u8,
            humidity: v[4] as u8,
            ..old
        };
        out.set_column(x, z, col)
            .map_err(|e| Error::at(n, 1, e.message()))?;
    }
    if let Some(i) = seen.iter().position(|s| !s) {
        return Err(Error::at(
            end_line,
            1,
            format!("column {} {} is missing", i % 16, i / 16),
        ));
    }
    Ok(out)
}

/// The five numbers of a `X Z TOP TEMPERATURE HUMIDITY` line, each within its range.
fn numbers(base: &Chunk, line: &Line<'_>) -> Result<[u32; 5]> {
    // A stored top is a byte; keep any byte the file holds so every chunk round trips.
    let top_max = if base.format().stores_heights() {
        255
    } else {
        base.height() as u32 - 1
    };
    let max = [15, 15, top_max, 15, 15];
    let mut v = [0u32; 5];
    let mut fields = 0;
    for word in line.words() {
        if fields == 5 {
            return Err(line.error_at(word, "a line has 5 numbers: X Z TOP TEMPERATURE HUMIDITY"));
        }
        if let Some((i, ch)) = word.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
            let at = word.get(i..).unwrap_or(word);
            return Err(line.error_at(at, format!("unknown character {ch:?}")));
        }
        let num = word
            .parse::<u32>()
            .ok()
            .filter(|&x| x <= max[fields])
            .ok_or_else(|| {
                line.error_at(
                    word,
                    format!("{} {word} is out of range 0-{}", NAMES[fields], max[fields]),
                )
            })?;
        if fields == 2 && !base.format().stores_heights() {
            let (x, z) = (v[0] as usize, v[1] as usize);
            if num != u32::from(base.computed_top(x, z)) {
                return Err(
                    line.error_at(word, "region chunks do not store TOP; it follows the cells")
                );
            }
        }
        v[fields] = num;
        fields += 1;
    }
    if fields < 5 {
        return Err(line.error_at_end(format!("missing {}", NAMES[fields])));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::survivalcraft::codec::chunk::Cell;
    use crate::survivalcraft::codec::format::TerrainFormat;

    fn chunk(format: TerrainFormat) -> Chunk {
        let mut c = Chunk::empty(format);
        c.set_cell(
            4,
            9,
            2,
            Cell {
                id: 8,
                light: 0,
                data: 0,
            },
        )
        .unwrap();
        c.set_column(
            4,
            2,
            Column {
                top: 9,
                temperature: 3,
                humidity: 14,
                bottom: 66,
                sunlight: 0,
            },
        )
        .unwrap();
        c
    }

    #[test]
    fn surface_round_trips_and_keeps_hidden_bytes() {
        let c = chunk(TerrainFormat::Chunks16);
        assert_eq!(parse(&c, &render(&c)).unwrap(), c);
        let text = String::from_utf8(render(&c))
            .unwrap()
            .replace("4 2 9 3 14", "4 2 9 15 0");
        let e = parse(&c, text.as_bytes()).unwrap();
        assert_eq!(
            e.column(4, 2).unwrap(),
            Column {
                top: 9,
                temperature: 15,
                humidity: 0,
                bottom: 66,
                sunlight: 0
            }
        );
    }

    #[test]
    fn errors_have_positions() {
        let c = chunk(TerrainFormat::Chunks16);
        let text = String::from_utf8(render(&c)).unwrap();
        let msg = |t: String| parse(&c, t.as_bytes()).unwrap_err().message().to_string();
        assert_eq!(
            msg(text.replace("4 2 9 3 14", "4 2 9 3 1x")),
            "line 39, column 10: unknown character 'x'"
        );
        assert_eq!(
            msg(text.replace("4 2 9 3 14", "4 2 9 16 1")),
            "line 39, column 7: TEMPERATURE 16 is out of range 0-15"
        );
        assert!(msg(text.replace("4 2 9 3 14", "4 2 256 3 1")).starts_with("line 39, column 5"));
        assert!(
            msg(text.replace("4 2 9 3 14", "4 2 9 3")).starts_with("line 39, column 8: missing")
        );
        assert!(msg(text.replace("4 2 9 3 14", "4 2 9 3 1 1")).starts_with("line 39, column 11"));
        assert!(msg(text.replace("4 2 9 3 14", "5 2 9 3 14")).contains("listed twice"));
        assert!(msg(text.replace("4 2 9 3 14\n", "")).contains("column 4 2 is missing"));
        let r = chunk(TerrainFormat::Regions);
        let t = String::from_utf8(render(&r)).unwrap();
        assert!(parse(&r, t.replace("4 2 9 3 14", "4 2 10 3 14").as_bytes()).is_err());
        assert!(parse(&r, t.replace("4 2 9 3 14", "4 2 9 4 14").as_bytes()).is_ok());
    }
}
