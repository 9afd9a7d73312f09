//! `surface.txt`: per column, the top height, temperature and humidity, and in the formats
//! that store them the bottom and sunlight heights.
//!
//! Format: lines starting with `#` are comments, blank lines are ignored, and every other
//! line is `X Z TOP TEMPERATURE HUMIDITY [BOTTOM SUNLIGHT]` (decimal, separated by spaces or
//! tabs): X and Z the column inside the chunk (0–15), TOP the y of its highest non-air cell
//! (a byte, 0–255, as stored), temperature and humidity 0–15, BOTTOM and SUNLIGHT the
//! shaft's two other bytes (0–255, as stored). Each of the 256 columns appears exactly
//! once, in any order. TOP is derived data: editing `blocks.cubeset` recomputes it; writing
//! it here stores the value for formats that store it and must match the cells for region
//! chunks, which do not.
//!
//! The fixed-size formats (`Chunks*.dat`) store all four shaft bytes, and they show all
//! seven numbers, so a chunk restored from a backup gets back its bottom and sunlight
//! heights too (derived values the game recomputes, but the stored bytes are the world's).
//! A line of five numbers keeps the two bytes the chunk held. Region chunks store neither,
//! and their lines have five numbers.

use crate::error::{Error, Result};
use crate::survivalcraft::codec::chunk::{Chunk, Column};
use crate::survivalcraft::views::data_lines;
use crate::text::Line;

/// Renders `surface.txt`.
pub fn render(chunk: &Chunk) -> Vec<u8> {
    let all = chunk.format().stores_heights();
    let mut out = String::from(if all {
        "# Surface of each column: X Z TOP TEMPERATURE HUMIDITY BOTTOM SUNLIGHT\n\
         # X, Z: column in the chunk (0-15); TOP: y of the highest non-air cell; TEMPERATURE, HUMIDITY: 0-15; BOTTOM, SUNLIGHT: the shaft's other bytes (0-255)\n"
    } else {
        "# Surface of each column: X Z TOP TEMPERATURE HUMIDITY\n\
         # X, Z: column in the chunk (0-15); TOP: y of the highest non-air cell; TEMPERATURE, HUMIDITY: 0-15\n"
    });
    for z in 0..16 {
        for x in 0..16 {
            let c = chunk.column(x, z).unwrap_or_default();
            out.push_str(&format!(
                "{x} {z} {} {} {}",
                c.top, c.temperature, c.humidity
            ));
            if all {
                out.push_str(&format!(" {} {}", c.bottom, c.sunlight));
            }
            out.push('\n');
        }
    }
    out.into_bytes()
}

/// The numbers of a line, in order.
const NAMES: [&str; 7] = [
    "X",
    "Z",
    "TOP",
    "TEMPERATURE",
    "HUMIDITY",
    "BOTTOM",
    "SUNLIGHT",
];

/// Parses an edited `surface.txt` onto `base`.
pub fn parse(base: &Chunk, text: &[u8]) -> Result<Chunk> {
    let (lines, end_line) = data_lines(text)?;
    let mut out = base.clone();
    let mut seen = [false; 256];
    for line in lines {
        let n = line.number;
        let ([x, z, top, temperature, humidity], shaft) = numbers(base, &line)?;
        let (x, z) = (x as usize, z as usize);
        let Some(s) = seen.get_mut(z * 16 + x) else {
            return Err(Error::at(n, 1, "column outside the chunk"));
        };
        if std::mem::replace(s, true) {
            return Err(Error::at(n, 1, format!("column {x} {z} is listed twice")));
        }
        let old = base.column(x, z).unwrap_or_default();
        let [bottom, sunlight] = shaft.map_or([old.bottom, old.sunlight], |b| b.map(|b| b as u8));
        let col = Column {
            top: top as u8,
            temperature: temperature as u8,
            humidity: humidity as u8,
            bottom,
            sunlight,
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

/// The numbers of a `X Z TOP TEMPERATURE HUMIDITY [BOTTOM SUNLIGHT]` line, each within its
/// range: the first five, and the last two in the formats that store them when the line
/// has them.
fn numbers(base: &Chunk, line: &Line<'_>) -> Result<([u32; 5], Option<[u32; 2]>)> {
    let stored = base.format().stores_heights();
    // A stored top is a byte; keep any byte the file holds so every chunk round trips.
    let top_max = if stored {
        255
    } else {
        base.height() as u32 - 1
    };
    let max = [15, 15, top_max, 15, 15, 255, 255];
    let most = if stored { 7 } else { 5 };
    let mut v: Vec<u32> = Vec::with_capacity(7);
    for word in line.words() {
        let i = v.len();
        if i == most {
            return Err(line.error_at(
                word,
                format!("a line has {most} numbers: {}", NAMES[..most].join(" ")),
            ));
        }
        if let Some((at, ch)) = word.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
            let at = word.get(at..).unwrap_or(word);
            return Err(line.error_at(at, format!("unknown character {ch:?}")));
        }
        let num = word
            .parse::<u32>()
            .ok()
            .filter(|&x| x <= max[i])
            .ok_or_else(|| {
                line.error_at(
                    word,
                    format!("{} {word} is out of range 0-{}", NAMES[i], max[i]),
                )
            })?;
        if let (&[x, z], false) = (&v[..], stored) {
            if num != u32::from(base.computed_top(x as usize, z as usize)) {
                return Err(
                    line.error_at(word, "region chunks do not store TOP; it follows the cells")
                );
            }
        }
        v.push(num);
    }
    match v[..] {
        [x, z, top, t, h] => Ok(([x, z, top, t, h], None)),
        [x, z, top, t, h, b, s] => Ok(([x, z, top, t, h], Some([b, s]))),
        _ => Err(line.error_at_end(format!("missing {}", NAMES[v.len()]))),
    }
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
    fn surface_round_trips_every_shaft_byte() {
        let c = chunk(TerrainFormat::Chunks16);
        assert_eq!(parse(&c, &render(&c)).unwrap(), c);
        let text = String::from_utf8(render(&c)).unwrap();
        assert!(text.contains("\n4 2 9 3 14 66 0\n"), "{text}");
        // A restore writes the text into an empty chunk: every byte comes back.
        let empty = Chunk::empty(TerrainFormat::Chunks16);
        let restored = parse(&empty, text.as_bytes()).unwrap();
        assert_eq!(restored.column(4, 2), c.column(4, 2));
        let e = parse(
            &c,
            text.replace("4 2 9 3 14 66 0", "4 2 9 15 0 70 1")
                .as_bytes(),
        )
        .unwrap();
        let col = Column {
            top: 9,
            temperature: 15,
            humidity: 0,
            bottom: 70,
            sunlight: 1,
        };
        assert_eq!(e.column(4, 2).unwrap(), col);
        // Five numbers keep the two bytes the chunk held.
        let e = parse(&c, text.replace("4 2 9 3 14 66 0", "4 2 9 15 0").as_bytes()).unwrap();
        assert_eq!(
            e.column(4, 2).unwrap(),
            Column {
                bottom: 66,
                sunlight: 0,
                ..col
            }
        );
    }

    #[test]
    fn errors_have_positions() {
        let c = chunk(TerrainFormat::Chunks16);
        let text = String::from_utf8(render(&c)).unwrap();
        let line = "4 2 9 3 14 66 0";
        let msg = |t: String| parse(&c, t.as_bytes()).unwrap_err().message().to_string();
        assert_eq!(
            msg(text.replace(line, "4 2 9 3 1x 66 0")),
            "line 39, column 10: unknown character 'x'"
        );
        assert_eq!(
            msg(text.replace(line, "4 2 9 16 1")),
            "line 39, column 7: TEMPERATURE 16 is out of range 0-15"
        );
        assert_eq!(
            msg(text.replace(line, "4 2 9 3 14 256 0")),
            "line 39, column 12: BOTTOM 256 is out of range 0-255"
        );
        assert!(msg(text.replace(line, "4 2 256 3 1")).starts_with("line 39, column 5"));
        assert!(msg(text.replace(line, "4 2 9 3")).starts_with("line 39, column 8: missing"));
        assert!(msg(text.replace(line, "4 2 9 3 14 66"))
            .starts_with("line 39, column 14: missing SUNLIGHT"));
        assert!(msg(text.replace(line, "4 2 9 3 1 1 1 1")).starts_with("line 39, column 15"));
        assert!(msg(text.replace(line, "5 2 9 3 14")).contains("listed twice"));
        assert!(msg(text.replace(&format!("{line}\n"), "")).contains("column 4 2 is missing"));
        let r = chunk(TerrainFormat::Regions);
        let t = String::from_utf8(render(&r)).unwrap();
        assert!(
            t.contains("\n4 2 9 3 14\n"),
            "region chunks store no other shaft bytes"
        );
        assert!(parse(&r, t.replace("4 2 9 3 14", "4 2 10 3 14").as_bytes()).is_err());
        assert!(parse(&r, t.replace("4 2 9 3 14", "4 2 9 4 14").as_bytes()).is_ok());
        let e = parse(&r, t.replace("4 2 9 3 14", "4 2 9 3 14 66 0").as_bytes()).unwrap_err();
        assert!(
            e.message().contains("a line has 5 numbers"),
            "{}",
            e.message()
        );
    }
}
