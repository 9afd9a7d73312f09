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

use crate::error::{Error, Result};
use crate::luanti::block::{MapBlock, NODE_COUNT};
use crate::luanti::views::text::lines;

const HEADER: &str = "\
# param1 of every node as two hexadecimal digits (for lit nodes: night light, day light).
# 16 levels y = 0..15 bottom-up; in each, rows z = 0..15; in each row, x = 0..15.
";

const HEX: &[u8; 16] = b"0123456789abcdef";

/// `light.txt`: param1 of every node, layer by layer.
pub fn render_light(block: &MapBlock) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER.len() + 16 * 20 + NODE_COUNT * 3);
    out.extend_from_slice(HEADER.as_bytes());
    for y in 0..16 {
        if y > 0 {
            out.push(b'\n');
        }
        out.extend_from_slice(format!("# Level {y}\n").as_bytes());
        for z in 0..16 {
            let start = z * 256 + y * 16;
            let row = block.param1.get(start..start + 16).unwrap_or(&[]);
            for x in 0..16 {
                let v = row.get(x).copied().unwrap_or(0);
                out.push(HEX[usize::from(v >> 4)]);
                out.push(HEX[usize::from(v & 15)]);
                out.push(if x == 15 { b'\n' } else { b' ' });
            }
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
        for word in content.split_whitespace() {
            if x == 16 {
                return Err(line.error_at(word, "too many values: a row has 16 nodes"));
            }
            let value = ((1..=2).contains(&word.len())
                && word.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| u8::from_str_radix(word, 16).ok())
            .flatten()
            .ok_or_else(|| {
                line.error_at(
                    word,
                    format!("`{word}` is not a light value (two hexadecimal digits, 00 to ff)"),
                )
            })?;
            param1[z * 256 + y * 16 + x] = value;
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
