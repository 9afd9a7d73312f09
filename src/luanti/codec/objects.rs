//! Static objects stored with a block, and the LuaEntity (type 7) static data inside them
//! (`StaticObjectList`, `LuaEntitySAO::getStaticData`).
//!
//! Object data is only shown as a [`LuaEntity`] when encoding that value gives back exactly
//! the stored bytes; anything else stays [`ObjectData::Raw`], so re-encoding never changes
//! an object.

use super::Budget;
use crate::bytes::{put_i32, put_string16, put_string32, put_u16, Reader};
use crate::error::{Error, Result};
use crate::luanti::codec::block::{LuaEntity, LuaEntityExtra, ObjectData, StaticObject};

/// The object type of Lua entities.
pub const LUA_ENTITY: u8 = 7;

/// Memory an object's data costs decoded beyond its bytes (the allocations of a LuaEntity).
const DATA_OVERHEAD: usize = 64;

/// Reads a static object list (`u8 version` — ignored, as by the engine — `u16 count`),
/// charging what the objects take decoded to `limits`.
pub(crate) fn read_objects(r: &mut Reader<'_>, limits: &mut Budget) -> Result<Vec<StaticObject>> {
    r.u8("static objects version")?;
    let count = usize::from(r.u16("static objects count")?);
    if count > r.remaining() / 15 {
        return Err(Error::corrupt(format!(
            "static objects: {count} objects cannot fit in {} bytes",
            r.remaining()
        )));
    }
    let what = format!("{count} static objects");
    limits.charge(count * std::mem::size_of::<StaticObject>(), &what)?;
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let what = format!("static object {i}");
        let kind = r.u8(&what)?;
        let pos = [r.i32(&what)?, r.i32(&what)?, r.i32(&what)?];
        let data = r.string16(&what)?;
        limits.charge(
            data.len() + DATA_OVERHEAD,
            &format!("{count} static objects"),
        )?;
        let data = match parse_lua_entity(kind, data) {
            Some(entity) => ObjectData::LuaEntity(entity),
            None => ObjectData::Raw(data.to_vec()),
        };
        out.push(StaticObject { kind, pos, data });
    }
    Ok(out)
}

/// Writes a static object list, version 0.
pub fn write_objects(objects: &[StaticObject], out: &mut Vec<u8>) -> Result<()> {
    let count = u16::try_from(objects.len()).map_err(|_| {
        Error::invalid(format!(
            "a block can hold at most 65535 static objects, not {}",
            objects.len()
        ))
    })?;
    out.push(0);
    put_u16(out, count);
    for (i, obj) in objects.iter().enumerate() {
        let what = format!("static object {i}");
        out.push(obj.kind);
        for c in obj.pos {
            put_i32(out, c);
        }
        match &obj.data {
            ObjectData::Raw(data) => put_string16(out, data, &format!("{what} data"))?,
            ObjectData::LuaEntity(entity) => {
                if obj.kind != LUA_ENTITY {
                    return Err(Error::invalid(format!(
                        "{what}: Lua entity data on an object of type {}",
                        obj.kind
                    )));
                }
                let data = encode_lua_entity(entity).map_err(|e| e.context(&what))?;
                put_string16(out, &data, &format!("{what} data"))?;
            }
        }
    }
    Ok(())
}

/// The LuaEntity in `data`, when `kind` is 7 and the bytes are exactly its encoding.
fn parse_lua_entity(kind: u8, data: &[u8]) -> Option<LuaEntity> {
    if kind != LUA_ENTITY {
        return None;
    }
    let mut r = Reader::new(data);
    if r.u8("").ok()? != 1 {
        return None;
    }
    let name = String::from_utf8(r.string16("").ok()?.to_vec()).ok()?;
    let state = r.string32("").ok()?.to_vec();
    let hp = r.u16("").ok()?;
    let velocity = [r.i32("").ok()?, r.i32("").ok()?, r.i32("").ok()?];
    let yaw = r.i32("").ok()?;
    let extra = if r.remaining() == 0 {
        None
    } else {
        let version2 = r.u8("").ok()?;
        let pitch = r.i32("").ok()?;
        let roll = r.i32("").ok()?;
        let guid = if version2 >= 2 {
            Some(r.guid("").ok()?)
        } else {
            None
        };
        Some(LuaEntityExtra {
            version2,
            pitch,
            roll,
            guid,
        })
    };
    let entity = LuaEntity {
        name,
        state,
        hp,
        velocity,
        yaw,
        extra,
    };
    (encode_lua_entity(&entity).ok()? == data).then_some(entity)
}

/// The static data of a Lua entity (`u8 1`, name, state, hp, velocity, yaw, trailer).
pub fn encode_lua_entity(e: &LuaEntity) -> Result<Vec<u8>> {
    let mut out = vec![1u8];
    put_string16(&mut out, e.name.as_bytes(), "Lua entity name")?;
    put_string32(&mut out, &e.state, "Lua entity state")?;
    put_u16(&mut out, e.hp);
    for v in e.velocity {
        put_i32(&mut out, v);
    }
    put_i32(&mut out, e.yaw);
    if let Some(x) = &e.extra {
        if x.version2 == 0 {
            return Err(Error::invalid(
                "Lua entity trailer version must be at least 1",
            ));
        }
        out.push(x.version2);
        put_i32(&mut out, x.pitch);
        put_i32(&mut out, x.roll);
        match (x.version2 >= 2, &x.guid) {
            (true, Some(guid)) => out.extend_from_slice(guid),
            (false, None) => {}
            (true, None) => {
                return Err(Error::invalid(format!(
                    "Lua entity trailer version {} needs a GUID",
                    x.version2
                )))
            }
            (false, Some(_)) => {
                return Err(Error::invalid(
                    "Lua entity GUID needs trailer version 2 or later",
                ))
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entity(extra: Option<LuaEntityExtra>) -> LuaEntity {
        LuaEntity {
            name: "__builtin:item".into(),
            state: b"return {}".to_vec(),
            hp: 1,
            velocity: [0, -1000, 5],
            yaw: 3141,
            extra,
        }
    }

    #[test]
    fn lua_entities_round_trip_in_all_trailer_forms() {
        for extra in [
            None,
            Some(LuaEntityExtra {
                version2: 1,
                pitch: 1,
                roll: -2,
                guid: None,
            }),
            Some(LuaEntityExtra {
                version2: 2,
                pitch: 1,
                roll: -2,
                guid: Some([7; 16]),
            }),
        ] {
            let e = entity(extra);
            let data = encode_lua_entity(&e).unwrap();
            assert_eq!(parse_lua_entity(7, &data), Some(e));
            assert_eq!(parse_lua_entity(6, &data), None);
        }
    }

    #[test]
    fn odd_data_stays_raw() {
        let mut data = encode_lua_entity(&entity(None)).unwrap();
        data.push(0); // version2 0: the engine reads it, re-encoding would drop it
        assert_eq!(parse_lua_entity(7, &data), None);
        let mut data = encode_lua_entity(&entity(None)).unwrap();
        data[0] = 0;
        assert_eq!(parse_lua_entity(7, &data), None);
        let objs = vec![StaticObject {
            kind: 7,
            pos: [1, 2, 3],
            data: ObjectData::Raw(data),
        }];
        let mut out = Vec::new();
        write_objects(&objs, &mut out).unwrap();
        assert_eq!(
            read_objects(&mut Reader::new(&out), &mut Budget::new()).unwrap(),
            objs
        );
    }
}
