//! `timers.txt`: the node timers of a block, one per line.
//!
//! ```text
//! # Node timers: x,y,z (relative to the block, 0-15), timeout and elapsed time in seconds.
//! 3,0,12 10.000 2.500
//! ```
//!
//! Times are stored in milliseconds, so three decimals are exact; reading accepts fewer
//! decimals (`10` or `2.5`), spaces around the commas, blank lines and `#` comments, lines in
//! any order (they are sorted by node index, as the codec keeps them), and rejects a position given twice, a coordinate
//! outside 0–15, a time outside ±2,147,483.647 s or with more than three decimals, and a
//! timeout that is not positive (the engine drops such a timer as it loads the block).

use crate::error::Result;
use crate::luanti::codec::block::{MapBlock, NodeTimer, RelPos};
use crate::text::{format_fixed, lines, Cursor};

const HEADER: &str =
    "# Node timers: x,y,z (relative to the block, 0-15), timeout and elapsed time in seconds.\n";

/// `timers.txt`: node timers, positions relative to the block.
pub fn render_timers(block: &MapBlock) -> Vec<u8> {
    let mut out = String::with_capacity(HEADER.len() + block.timers.len() * 24);
    out.push_str(HEADER);
    for t in &block.timers {
        out.push_str(&format!(
            "{},{},{} {} {}\n",
            t.pos.x,
            t.pos.y,
            t.pos.z,
            format_fixed(i64::from(t.timeout), 3),
            format_fixed(i64::from(t.elapsed), 3)
        ));
    }
    out.into_bytes()
}

/// Parses `timers.txt` into `block.timers`.
pub fn parse_timers(text: &[u8], block: &mut MapBlock) -> Result<()> {
    let mut timers: Vec<(NodeTimer, usize)> = Vec::new();
    for line in lines(text)? {
        if line.content().is_empty() {
            continue;
        }
        let mut c = line.cursor();
        let pos = rel_pos(&mut c)?;
        // The engine drops a timer whose timeout is not positive as it loads the block.
        let timeout = millis(&mut c, "timeout", 1)?;
        let elapsed = millis(&mut c, "elapsed", i64::from(i32::MIN))?;
        c.end()?;
        timers.push((
            NodeTimer {
                pos,
                timeout,
                elapsed,
            },
            line.number,
        ));
    }
    timers.sort_by_key(|(t, _)| t.pos.index());
    for pair in timers.windows(2) {
        if let [(a, first), (b, second)] = pair {
            if a.pos == b.pos {
                let (first, second) = ((*first).min(*second), (*first).max(*second));
                return Err(crate::error::Error::at(
                    second,
                    1,
                    format!(
                        "a second timer at {},{},{} (the first is on line {first})",
                        a.pos.x, a.pos.y, a.pos.z
                    ),
                ));
            }
        }
    }
    block.timers = timers.into_iter().map(|(t, _)| t).collect();
    Ok(())
}

/// `x,y,z` with each coordinate 0–15.
fn rel_pos(c: &mut Cursor<'_>) -> Result<RelPos> {
    let x = c.int("x", 0, 15)? as u8;
    c.expect(',', "`,` between x and y")?;
    let y = c.int("y", 0, 15)? as u8;
    c.expect(',', "`,` between y and z")?;
    let z = c.int("z", 0, 15)? as u8;
    Ok(RelPos { x, y, z })
}

fn millis(c: &mut Cursor<'_>, what: &str, min: i64) -> Result<i32> {
    if c.at_end() {
        return Err(c.error(format!("expected the {what} in seconds")));
    }
    Ok(c.fixed(what, 3, min, i64::from(i32::MAX))? as i32)
}
