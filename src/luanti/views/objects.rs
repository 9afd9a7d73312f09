//! `objects.txt`: the static objects stored with a block, in stored order.
//!
//! ```text
//! # Static objects. pos is in nodes relative to the block origin (node = 16 * block + pos);
//! # velocity, yaw, pitch and roll are the stored values / 1000.
//!
//! [lua_entity]
//! pos = 7.5000, 1.0000, 3.2500
//! name = mobs_animal:sheep
//! hp = 8
//! velocity = 0.000, -0.250, 0.000
//! yaw = 1.571
//! version2 = 2
//! pitch = 0.000
//! roll = 0.000
//! guid = 00112233445566778899aabbccddeeff
//! state = "return {[\"gotten\"] = false}"
//!
//! [object]
//! type = 3
//! pos = 2.0000, 0.5000, 15.0000
//! data = 0102ff
//! ```
//!
//! A position is stored as node × 10,000, so four decimals are exact; velocity, yaw, pitch and
//! roll are stored × 1000, so three are. `version2`, `pitch` and `roll` are present when the
//! stored entity has the version2 trailer (`guid` from version2 2 on). `name` is written
//! without quotes when it has no spaces, `#`, quotes, backslashes or control characters;
//! `state` is always quoted with the escapes `\n \r \t \0 \\ \" \xHH` (bytes that are not
//! UTF-8 are `\xHH`). `[object]` is any other object type, or entity data the engine could
//! not parse, with its data as hexadecimal bytes.
//!
//! Reading takes sections in any number (up to 65,535), keys in any order, each once; the
//! keys written above are all required (the version2 group only together). A position's
//! absolute value (block origin + relative) must fit the stored 32-bit integers. The engine
//! files an object under the block of its rounded position, so objects usually lie in
//! -0.5 ≤ p < 15.5, but a block may hold one outside (a block copied whole to another
//! position keeps its objects' absolute positions, and the engine loads it): any position
//! that fits is taken, so every stored object's text reads back as it is.

use crate::error::{excerpt, Error, Result};
use crate::luanti::codec::block::{
    BlockPos, LuaEntity, LuaEntityExtra, MapBlock, ObjectData, StaticObject,
};
use crate::text::{format_fixed, key_value, lines, push_quoted, Cursor, Line};

const HEADER: &str = "\
# Static objects. pos is in nodes relative to the block origin (node = 16 * block + pos);
# velocity, yaw, pitch and roll are the stored values / 1000.
";

/// Units of a stored position per node.
const UNIT: i64 = 10_000;

const LUA_KEYS: &[&str] = &[
    "pos", "name", "hp", "velocity", "yaw", "version2", "pitch", "roll", "guid", "state",
];
const RAW_KEYS: &[&str] = &["type", "pos", "data"];

/// The block origin in stored units.
fn origin(pos: BlockPos) -> [i64; 3] {
    [pos.x, pos.y, pos.z].map(|c| i64::from(c) * 16 * UNIT)
}

/// `objects.txt`: static objects, positions relative to the block at `pos`.
pub fn render_objects(block: &MapBlock, pos: BlockPos) -> Vec<u8> {
    let origin = origin(pos);
    let mut out = String::with_capacity(HEADER.len() + block.objects.len() * 200);
    out.push_str(HEADER);
    for object in &block.objects {
        let rel: Vec<String> = object
            .pos
            .iter()
            .zip(origin)
            .map(|(&p, o)| format_fixed(i64::from(p) - o, 4))
            .collect();
        let rel = rel.join(", ");
        match &object.data {
            ObjectData::LuaEntity(e) => {
                out.push_str(&format!("\n[lua_entity]\npos = {rel}\nname = "));
                if needs_quotes(&e.name) {
                    push_quoted(&mut out, e.name.as_bytes());
                } else {
                    out.push_str(&e.name);
                }
                let [vx, vy, vz] = e.velocity.map(|v| format_fixed(i64::from(v), 3));
                out.push_str(&format!(
                    "\nhp = {}\nvelocity = {vx}, {vy}, {vz}\nyaw = {}\n",
                    e.hp,
                    format_fixed(i64::from(e.yaw), 3)
                ));
                if let Some(extra) = &e.extra {
                    out.push_str(&format!(
                        "version2 = {}\npitch = {}\nroll = {}\n",
                        extra.version2,
                        format_fixed(i64::from(extra.pitch), 3),
                        format_fixed(i64::from(extra.roll), 3)
                    ));
                    if let Some(guid) = &extra.guid {
                        out.push_str("guid = ");
                        out.push_str(&hex(guid));
                        out.push('\n');
                    }
                }
                out.push_str("state = ");
                push_quoted(&mut out, &e.state);
                out.push('\n');
            }
            ObjectData::Raw(data) => {
                out.push_str(&format!(
                    "\n[object]\ntype = {}\npos = {rel}\ndata = {}\n",
                    object.kind,
                    hex(data)
                ));
            }
        }
    }
    out.into_bytes()
}

/// Parses `objects.txt` into `block.objects` for the block at `pos`.
pub fn parse_objects(text: &[u8], pos: BlockPos, block: &mut MapBlock) -> Result<()> {
    let origin = origin(pos);
    let mut objects = Vec::new();
    let mut section: Option<Section<'_>> = None;
    for line in lines(text)? {
        let content = line.content();
        if content.is_empty() {
            continue;
        }
        if content.starts_with('[') {
            if let Some(s) = section.take() {
                objects.push(s.finish()?);
            }
            if objects.len() == usize::from(u16::MAX) {
                return Err(line.error("too many objects (a block stores at most 65535)"));
            }
            let lua = match content {
                "[lua_entity]" => true,
                "[object]" => false,
                _ => {
                    return Err(line.error(format!(
                        "unknown section `{content}` (expected [lua_entity] or [object])"
                    )))
                }
            };
            section = Some(Section {
                line,
                lua,
                values: Values::default(),
                seen: Vec::new(),
            });
            continue;
        }
        let Some(s) = section.as_mut() else {
            return Err(line.error("expected a section header, [lua_entity] or [object]"));
        };
        s.read(&line, origin)?;
    }
    if let Some(s) = section.take() {
        objects.push(s.finish()?);
    }
    block.objects = objects;
    Ok(())
}

/// The values of one section read so far.
#[derive(Default)]
struct Values {
    pos: Option<[i32; 3]>,
    name: Option<String>,
    hp: Option<u16>,
    velocity: Option<[i32; 3]>,
    yaw: Option<i32>,
    version2: Option<u8>,
    pitch: Option<i32>,
    roll: Option<i32>,
    guid: Option<[u8; 16]>,
    state: Option<Vec<u8>>,
    kind: Option<u8>,
    data: Option<Vec<u8>>,
}

/// `pos = X, Y, Z`: coordinates relative to the block's origin, made absolute.
fn read_pos(c: &mut Cursor<'_>, origin: [i64; 3]) -> Result<[i32; 3]> {
    let mut pos = [0i32; 3];
    for (i, (p, o)) in pos.iter_mut().zip(origin).enumerate() {
        if i > 0 {
            c.expect(',', "`,` between the coordinates")?;
        }
        let what = ["x", "y", "z"][i];
        // The relative values whose absolute one fits the stored integer.
        let rel = c.fixed(what, 4, i64::from(i32::MIN) - o, i64::from(i32::MAX) - o)?;
        *p = i32::try_from(o + rel).map_err(|_| {
            c.error(format!(
                "the absolute {what} is out of range for this block"
            ))
        })?;
    }
    Ok(pos)
}

/// `name = "..."` (quoted) or the rest of the line.
fn read_name(c: &mut Cursor<'_>, line: &Line<'_>) -> Result<String> {
    let bytes = if c.next_is('"') {
        c.quoted("name")?
    } else {
        c.rest().as_bytes().to_vec()
    };
    if bytes.len() > usize::from(u16::MAX) {
        return Err(line.error("name longer than 65535 bytes"));
    }
    String::from_utf8(bytes).map_err(|_| line.error("the name is not UTF-8 text"))
}

struct Section<'a> {
    line: Line<'a>,
    lua: bool,
    values: Values,
    seen: Vec<&'a str>,
}

impl<'a> Section<'a> {
    fn read(&mut self, line: &Line<'a>, origin: [i64; 3]) -> Result<()> {
        let (key, mut c) = key_value(line)?;
        let allowed = if self.lua { LUA_KEYS } else { RAW_KEYS };
        if !allowed.contains(&key) {
            return Err(line.error(format!(
                "unknown key `{}` in {} (expected {})",
                excerpt(key),
                self.line.content(),
                allowed.join(", ")
            )));
        }
        if self.seen.contains(&key) {
            return Err(line.error(format!("`{key}` is given twice")));
        }
        self.seen.push(key);
        let v = &mut self.values;
        let milli = |c: &mut Cursor<'_>, what: &str| -> Result<i32> {
            Ok(c.fixed(what, 3, i64::from(i32::MIN), i64::from(i32::MAX))? as i32)
        };
        match key {
            "pos" => v.pos = Some(read_pos(&mut c, origin)?),
            "name" => v.name = Some(read_name(&mut c, line)?),
            "hp" => v.hp = Some(c.int("hp", 0, i64::from(u16::MAX))? as u16),
            "velocity" => {
                let mut vel = [0i32; 3];
                for (i, p) in vel.iter_mut().enumerate() {
                    if i > 0 {
                        c.expect(',', "`,` between the coordinates")?;
                    }
                    *p = milli(&mut c, "velocity")?;
                }
                v.velocity = Some(vel);
            }
            "yaw" => v.yaw = Some(milli(&mut c, "yaw")?),
            "pitch" => v.pitch = Some(milli(&mut c, "pitch")?),
            "roll" => v.roll = Some(milli(&mut c, "roll")?),
            "version2" => v.version2 = Some(c.int("version2", 1, 255)? as u8),
            "guid" => {
                let bytes = hex_bytes(&mut c, "guid")?;
                let guid = <[u8; 16]>::try_from(bytes.as_slice())
                    .map_err(|_| line.error("guid must be 32 hexadecimal digits"))?;
                v.guid = Some(guid);
            }
            "state" => {
                let state = c.quoted("state")?;
                if state.len() > u32::MAX as usize {
                    return Err(line.error("state too long"));
                }
                v.state = Some(state);
            }
            "type" => v.kind = Some(c.int("type", 0, 255)? as u8),
            _ => {
                let data = hex_bytes(&mut c, "data")?;
                if data.len() > usize::from(u16::MAX) {
                    return Err(line.error("data longer than 65535 bytes"));
                }
                v.data = Some(data);
            }
        }
        c.end()
    }

    fn finish(self) -> Result<StaticObject> {
        let missing = |key: &str| {
            self.line
                .error(format!("{} has no `{key}`", self.line.content()))
        };
        let v = self.values;
        let pos = v.pos.ok_or_else(|| missing("pos"))?;
        if !self.lua {
            return Ok(StaticObject {
                kind: v.kind.ok_or_else(|| missing("type"))?,
                pos,
                data: ObjectData::Raw(v.data.ok_or_else(|| missing("data"))?),
            });
        }
        let extra = match v.version2 {
            None => {
                for (key, given) in [
                    ("pitch", v.pitch.is_some()),
                    ("roll", v.roll.is_some()),
                    ("guid", v.guid.is_some()),
                ] {
                    if given {
                        return Err(self.line.error(format!(
                            "`{key}` needs `version2` (1 for pitch and roll, 2 with guid)"
                        )));
                    }
                }
                None
            }
            Some(version2) => {
                let guid = match (version2 >= 2, v.guid) {
                    (true, Some(g)) => Some(g),
                    (false, None) => None,
                    (true, None) => return Err(missing("guid")),
                    (false, Some(_)) => {
                        return Err(self.line.error("`guid` needs version2 2 or higher"))
                    }
                };
                Some(LuaEntityExtra {
                    version2,
                    pitch: v.pitch.ok_or_else(|| missing("pitch"))?,
                    roll: v.roll.ok_or_else(|| missing("roll"))?,
                    guid,
                })
            }
        };
        Ok(StaticObject {
            kind: 7,
            pos,
            data: ObjectData::LuaEntity(LuaEntity {
                name: v.name.ok_or_else(|| missing("name"))?,
                state: v.state.ok_or_else(|| missing("state"))?,
                hp: v.hp.ok_or_else(|| missing("hp"))?,
                velocity: v.velocity.ok_or_else(|| missing("velocity"))?,
                yaw: v.yaw.ok_or_else(|| missing("yaw"))?,
                extra,
            }),
        })
    }
}

fn needs_quotes(name: &str) -> bool {
    name.is_empty()
        || name
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '#' | '"' | '\\'))
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    s
}

/// Hexadecimal bytes; whitespace between pairs is allowed.
fn hex_bytes(c: &mut Cursor<'_>, what: &str) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    while !c.at_end() {
        let word = c.word(&[]);
        if word.len() % 2 != 0 || !word.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(c.line.error_at(
                word,
                format!("{what} must be hexadecimal digits in pairs, like 0a1b"),
            ));
        }
        for pair in word.as_bytes().chunks(2) {
            let digits = std::str::from_utf8(pair).unwrap_or("");
            let byte = u8::from_str_radix(digits, 16)
                .map_err(|_| Error::invalid(format!("{what}: bad hexadecimal")))?;
            out.push(byte);
        }
    }
    Ok(out)
}
