//! Node timers (`NodeTimerList`): the version-24 form (`u8 0` = none, `u8 1` + count) and
//! the form of versions ≥ 25 (`u8 10` = bytes per timer, `u16 count`).
//!
//! Like the engine, decoding drops timers whose timeout is not positive and keeps the
//! first of several timers at one position; the result is sorted by position.

use std::collections::BTreeMap;

use super::nodemeta::{pos_index, rel_pos};
use crate::bytes::{put_i32, put_u16, Reader};
use crate::error::{Error, Result};
use crate::luanti::codec::block::NodeTimer;

/// Reads the timers of a block of `version` (24 or ≥ 25).
pub fn read_timers(r: &mut Reader<'_>, version: u8) -> Result<Vec<NodeTimer>> {
    if version == 24 {
        match r.u8("node timers version")? {
            0 => return Ok(Vec::new()),
            1 => {}
            v => {
                return Err(Error::corrupt(format!(
                    "node timers version {v} is not supported"
                )))
            }
        }
    } else {
        let len = r.u8("node timer length")?;
        if len != 10 {
            return Err(Error::corrupt(format!(
                "node timer length {len} is not supported (expected 10)"
            )));
        }
    }
    let count = usize::from(r.u16("node timers count")?);
    if count > r.remaining() / 10 {
        return Err(Error::corrupt(format!(
            "node timers: {count} timers cannot fit in {} bytes",
            r.remaining()
        )));
    }
    let mut timers = BTreeMap::new();
    for _ in 0..count {
        let pos = rel_pos(r.u16("node timer")?, "node timer")?;
        let timeout = r.i32("node timer")?;
        let elapsed = r.i32("node timer")?;
        if timeout > 0 {
            timers.entry(pos.index()).or_insert(NodeTimer {
                pos,
                timeout,
                elapsed,
            });
        }
    }
    Ok(timers.into_values().collect())
}

/// Writes the timers in the form of block `version` (24 or ≥ 25).
pub fn write_timers(timers: &[NodeTimer], version: u8, out: &mut Vec<u8>) -> Result<()> {
    let mut last = None;
    for t in timers {
        let index = pos_index(t.pos, "node timer")?;
        if last.is_some_and(|l| l >= index) {
            return Err(Error::invalid(
                "node timers are not sorted by position or two share a position",
            ));
        }
        last = Some(index);
        if t.timeout <= 0 {
            return Err(Error::invalid(format!(
                "node timer at index {index}: timeout {} ms is not positive",
                t.timeout
            )));
        }
    }
    if version == 24 {
        if timers.is_empty() {
            out.push(0);
            return Ok(());
        }
        out.push(1);
    } else {
        out.push(10);
    }
    put_u16(out, timers.len() as u16);
    for t in timers {
        put_u16(out, t.pos.index());
        put_i32(out, t.timeout);
        put_i32(out, t.elapsed);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::luanti::codec::block::RelPos;

    fn timer(index: u16, timeout: i32) -> NodeTimer {
        NodeTimer {
            pos: RelPos::from_index(index).unwrap(),
            timeout,
            elapsed: 5,
        }
    }

    #[test]
    fn both_forms_round_trip() {
        let timers = vec![timer(1, 1000), timer(4095, 2500)];
        for version in [24u8, 25, 29] {
            let mut out = Vec::new();
            write_timers(&timers, version, &mut out).unwrap();
            assert_eq!(
                read_timers(&mut Reader::new(&out), version).unwrap(),
                timers
            );
        }
        let mut out = Vec::new();
        write_timers(&[], 24, &mut out).unwrap();
        assert_eq!(out, [0]);
    }

    #[test]
    fn engine_drops_and_dedupes() {
        let data = [
            10, 0, 3, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 1, 0, 0, 0, 0, 0, 8, 0, 0, 0, 2,
            0, 0, 0, 0,
        ];
        let timers = read_timers(&mut Reader::new(&data), 25).unwrap();
        assert_eq!(timers.len(), 1);
        assert_eq!(timers[0].timeout, 1);
        assert!(write_timers(&[timer(1, 0)], 25, &mut Vec::new()).is_err());
        assert!(read_timers(&mut Reader::new(&[11, 0, 0]), 25).is_err());
    }
}
