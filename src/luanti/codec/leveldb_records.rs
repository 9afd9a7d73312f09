//! The binary player and auth records of the LevelDB backends (`players.db`, `auth.db`).
//!
//! Both are written by `src/database/database-leveldb.cpp` (5.6.1, unchanged since), keyed
//! by the player's name; integers big-endian, `f32` as its IEEE bits (`writeF32`),
//! String16/String32 a length then the bytes:
//!
//! * player (`PlayerDatabaseLevelDB::savePlayer`): `u8 version = 1`, `u16 hp`,
//!   `v3f32 position` (BS units), `f32 pitch`, `f32 yaw`, `u16 breath`,
//!   `u32 attribute count` and for each a String16 name and a String32 value, then the
//!   inventory in its text form (`Inventory::serialize`, ending `EndInventory\n`) to the end.
//!   The engine refuses a version above 1 (`loadPlayer` returns false).
//! * auth (`AuthDatabaseLevelDB::saveAuth`): `u8 version = 1`, String16 password,
//!   `u16 privilege count` and each a String16, `s64 last_login`. A version above 1 is
//!   refused the same way.
//!
//! The engine writes player attributes in its hash map's order; worldfs writes them sorted.
//! Decoding never trusts a count: each read checks the bytes left, so any bytes fail
//! cleanly (no panic, no allocation beyond the record's own size).

use std::collections::BTreeMap;

use crate::bytes::{put_string16, put_string32, put_u16, put_u32, Reader};
use crate::error::{Error, Result};
use crate::luanti::codec::auth_line::AuthEntry;
use crate::luanti::codec::inventory::{parse_inventory, serialize_inventory};
use crate::luanti::codec::player::Player;

/// The record version the engine writes and reads.
const VERSION: u8 = 1;

fn text(bytes: &[u8], what: &str) -> Result<String> {
    String::from_utf8(bytes.to_vec())
        .map_err(|_| Error::corrupt(format!("{what} is not UTF-8 text")))
}

fn version(r: &mut Reader<'_>, what: &str) -> Result<()> {
    let v = r.u8(what)?;
    if v > VERSION {
        return Err(Error::corrupt(format!(
            "{what} of version {v}: the engine reads only versions 0 and 1"
        )));
    }
    Ok(())
}

fn f32_of(r: &mut Reader<'_>, what: &str) -> Result<f32> {
    Ok(f32::from_bits(r.u32(what)?))
}

/// The record of one player.
pub fn encode_player(player: &Player) -> Result<Vec<u8>> {
    let mut out = vec![VERSION];
    put_u16(&mut out, player.hp);
    for v in player.position {
        put_u32(&mut out, v.to_bits());
    }
    put_u32(&mut out, player.pitch.to_bits());
    put_u32(&mut out, player.yaw.to_bits());
    put_u16(&mut out, player.breath);
    let count = u32::try_from(player.metadata.len())
        .map_err(|_| Error::invalid("too many player attributes"))?;
    put_u32(&mut out, count);
    for (key, value) in &player.metadata {
        put_string16(&mut out, key.as_bytes(), "player attribute name")?;
        put_string32(&mut out, value.as_bytes(), "player attribute value")?;
    }
    out.extend_from_slice(&serialize_inventory(&player.inventory));
    Ok(out)
}

/// Reads the record of the player `name`; errors are `corrupt`.
pub fn decode_player(name: &str, record: &[u8]) -> Result<Player> {
    let mut r = Reader::new(record);
    version(&mut r, "player record")?;
    let hp = r.u16("hp")?;
    let position = [
        f32_of(&mut r, "position")?,
        f32_of(&mut r, "position")?,
        f32_of(&mut r, "position")?,
    ];
    let pitch = f32_of(&mut r, "pitch")?;
    let yaw = f32_of(&mut r, "yaw")?;
    let breath = r.u16("breath")?;
    let count = r.u32("attribute count")?;
    let mut metadata = BTreeMap::new();
    for _ in 0..count {
        let key = text(r.string16("attribute name")?, "an attribute name")?;
        let value = text(r.string32("attribute value")?, "an attribute value")?;
        metadata.insert(key, value);
    }
    let inventory = parse_inventory(r.rest())
        .map_err(|e| Error::corrupt(format!("inventory: {}", e.message())))?;
    Ok(Player {
        name: name.to_string(),
        hp,
        breath,
        position,
        pitch,
        yaw,
        metadata,
        inventory,
        extra: BTreeMap::new(),
    })
}

/// The record of one auth entry (its name is the key).
pub fn encode_auth(entry: &AuthEntry) -> Result<Vec<u8>> {
    let mut out = vec![VERSION];
    put_string16(&mut out, entry.password.as_bytes(), "password")?;
    let count = u16::try_from(entry.privileges.len())
        .map_err(|_| Error::invalid("more than 65535 privileges"))?;
    put_u16(&mut out, count);
    for privilege in &entry.privileges {
        put_string16(&mut out, privilege.as_bytes(), "privilege")?;
    }
    out.extend_from_slice(&entry.last_login.to_be_bytes());
    Ok(out)
}

/// Reads the auth record of `name`; errors are `corrupt`. Bytes after `last_login` are
/// ignored, as the engine ignores them.
pub fn decode_auth(name: &str, record: &[u8]) -> Result<AuthEntry> {
    let mut r = Reader::new(record);
    version(&mut r, "auth record")?;
    let password = text(r.string16("password")?, "the password")?;
    let count = r.u16("privilege count")?;
    let mut privileges = Vec::new();
    for _ in 0..count {
        privileges.push(text(r.string16("privilege")?, "a privilege")?);
    }
    let last_login = r.i64("last login")?;
    Ok(AuthEntry {
        name: name.to_string(),
        password,
        privileges,
        last_login,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::luanti::codec::block::{Inventory, InventoryList, ItemStack};
    use proptest::prelude::*;

    fn sample_player() -> Player {
        let mut metadata = BTreeMap::new();
        metadata.insert("mana".to_string(), "12".to_string());
        metadata.insert("note".to_string(), "line\nbreak".to_string());
        Player {
            name: "celeron55".into(),
            hp: 17,
            breath: 9,
            position: [10.5, -20.0, 3.25],
            pitch: -12.5,
            yaw: 271.0,
            metadata,
            inventory: Inventory {
                lists: vec![InventoryList {
                    name: "main".into(),
                    width: 0,
                    slots: vec![
                        ItemStack::default(),
                        ItemStack {
                            name: b"default:dirt".to_vec(),
                            count: 5,
                            ..ItemStack::default()
                        },
                    ],
                }],
            },
            extra: BTreeMap::new(),
        }
    }

    #[test]
    fn a_player_record_is_laid_out_as_the_engine_writes_it() {
        let p = sample_player();
        let rec = encode_player(&p).unwrap();
        assert_eq!(rec[0], 1);
        assert_eq!(&rec[1..3], &17u16.to_be_bytes());
        assert_eq!(&rec[3..7], &10.5f32.to_bits().to_be_bytes());
        assert_eq!(&rec[23..25], &9u16.to_be_bytes());
        assert_eq!(&rec[25..29], &2u32.to_be_bytes());
        assert!(rec.ends_with(b"EndInventoryList\nEndInventory\n"));
        assert_eq!(decode_player("celeron55", &rec).unwrap(), p);
    }

    #[test]
    fn an_auth_record_is_laid_out_as_the_engine_writes_it() {
        let e = AuthEntry {
            name: "foo".into(),
            password: "#1#salt#verifier".into(),
            privileges: vec!["interact".into(), "shout".into()],
            last_login: -2,
        };
        let rec = encode_auth(&e).unwrap();
        let mut want = vec![1, 0, 16];
        want.extend_from_slice(b"#1#salt#verifier");
        want.extend_from_slice(&[0, 2, 0, 8]);
        want.extend_from_slice(b"interact");
        want.extend_from_slice(&[0, 5]);
        want.extend_from_slice(b"shout");
        want.extend_from_slice(&(-2i64).to_be_bytes());
        assert_eq!(rec, want);
        assert_eq!(decode_auth("foo", &rec).unwrap(), e);
    }

    #[test]
    fn newer_versions_and_short_records_are_refused() {
        let mut rec = encode_auth(&AuthEntry::default()).unwrap();
        rec[0] = 2;
        assert_eq!(decode_auth("a", &rec).unwrap_err().errno(), libc::EIO);
        let mut rec = encode_player(&sample_player()).unwrap();
        rec[0] = 2;
        assert!(decode_player("a", &rec).is_err());
        assert!(decode_player("a", &[1, 0]).is_err());
        assert!(decode_auth("a", &[]).is_err());
    }

    proptest! {
        #[test]
        fn any_bytes_fail_cleanly_or_decode(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = decode_auth("x", &bytes);
            let _ = decode_player("x", &bytes);
        }

        #[test]
        fn any_prefix_of_a_player_record_fails_cleanly(cut in 0usize..400, flip in 0usize..400) {
            let rec = encode_player(&sample_player()).unwrap();
            let _ = decode_player("x", &rec[..cut.min(rec.len())]);
            let mut bad = rec.clone();
            let i = flip % bad.len();
            bad[i] ^= 0xFF;
            let _ = decode_player("x", &bad);
        }

        #[test]
        fn auth_records_round_trip(
            password in "[ -~]{0,40}",
            privileges in proptest::collection::vec("[a-z_]{1,12}", 0..8),
            last_login in any::<i64>(),
        ) {
            let e = AuthEntry { name: "n".into(), password, privileges, last_login };
            prop_assert_eq!(decode_auth("n", &encode_auth(&e).unwrap()).unwrap(), e);
        }

        #[test]
        fn player_records_round_trip(
            hp in any::<u16>(), breath in any::<u16>(),
            pos in proptest::array::uniform3(-1e6f32..1e6),
            pitch in -90f32..90.0, yaw in 0f32..360.0,
            metadata in proptest::collection::btree_map("[a-z:_]{1,10}", "\\PC{0,20}", 0..5),
        ) {
            let p = Player { hp, breath, position: pos, pitch, yaw, metadata, ..sample_player() };
            prop_assert_eq!(decode_player("celeron55", &encode_player(&p).unwrap()).unwrap(), p);
        }
    }
}
