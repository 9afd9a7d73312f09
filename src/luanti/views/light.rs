//! `light.txt`: param1 (the light of most nodes) of every node of a block.
//!
//! ```text
//! # param1 of every node as two hexadecimal digits (for lit nodes: night light, day light).
//! # 16 levels y = 0..15 bottom-up; in each, rows z = 0..15; in each row, x = 0..15.
//! # Level 0
//! 00 00 0f 0f 00 00 00 00 00 00 00 00 00 00 00 00
//! ... 16 rows ...
//!
//! # Level 1
//! ...
//! ```
//!
//! The layout is the one of `nodes.cubeset`: levels bottom-up, rows in Z order, X left to
//! right. Reading ignores blank lines and `#` comments (the `# Level` lines are for people)
//! and takes exactly 256 rows of 16 values of one or two hexadecimal digits each, separated
//! by whitespace, either case.

use crate::error::{excerpt, Error, Result};
use crate::luanti::codec::block::{MapBlock, NODE_COUNT};
use crate::text::lines;

const HEADER: &str = "\
# param1 of every node as two hexadecimal digits (for lit nodes: night light, day light).
# 16 levels y = 0..15 bottom-up; in each, rows z = 0..15; in each row, x = 0..15.
";

/// The two lower-case hexadecimal digits of every byte.
const PAIRS: [[u8; 2]; 256] = {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut pairs = [[0u8; 2]; 256];
    let mut i = 0;
    while i < 256 {
        pairs[i] = [HEX[i >> 4], HEX[i & 15]];
        i += 1;
    }
    pairs
};

/// `light.txt`: param1 of every node, layer by layer.
pub fn render_light(block: &MapBlock) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER.len() + 16 * 20 + NODE_COUNT * 3);
    out.extend_from_slice(HEADER.as_bytes());
    let mut row = [b' '; 48];
    row[47] = b'\n';
    for y in 0..16 {
        if y > 0 {
            out.push(b'\n');
        }
        out.extend_from_slice(format!("# Level {y}\n").as_bytes());
        for z in 0..16 {
            let start = z * 256 + y * 16;
            let values = block.param1.get(start..start + 16).unwrap_or(&[0; 16]);
            for (cell, &v) in row.chunks_exact_mut(3).zip(values) {
                cell[..2].copy_from_slice(&PAIRS[usize::from(v)]);
            }
            out.extend_from_slice(&row);
        }
    }
    out
}

/// Parses `light.txt` into `block.param1`.
pub fn parse_light(text: &[u8], block: &mut MapBlock) -> Result<()> {
    let mut param1 = vec![0u8; NODE_COUNT];
    let mut row = 0usize;
    let mut last_line = 0;
    for line in lines(text)? {
        last_line = line.number;
        let content = line.content();
        if content.is_empty() {
            continue;
        }
        if row == 256 {
            return Err(line.error("too many rows: a block has 16 levels of 16 rows"));
        }
        let (y, z) = (row / 16, row % 16);
        let mut x = 0;
        for word in content.split_ascii_whitespace() {
            if x == 16 {
                return Err(line.error_at(word, "too many values: a row has 16 nodes"));
            }
            let value = hex_value(word).ok_or_else(|| {
                line.error_at(
                    word,
                    format!(
                        "`{}` is not a light value (two hexadecimal digits, 00 to ff)",
                        excerpt(word)
                    ),
                )
            })?;
            if let Some(slot) = param1.get_mut(z * 256 + y * 16 + x) {
                *slot = value;
            }
            x += 1;
        }
        if x < 16 {
            return Err(line.error(format!("level {y} row {z} has {x} values, expected 16")));
        }
        row += 1;
    }
    if row < 256 {
        return Err(Error::at(
            last_line + 1,
            1,
            format!("only {row} rows, expected 256 (16 levels of 16 rows)"),
        ));
    }
    block.param1 = param1;
    Ok(())
}

/// One or two hexadecimal digits.
fn hex_value(word: &str) -> Option<u8> {
    let digit = |b: u8| char::from(b).to_digit(16).map(|d| d as u8);
    match *word.as_bytes() {
        [a] => digit(a),
        [a, b] => Some(digit(a)? << 4 | digit(b)?),
        _ => None,
    }
}
