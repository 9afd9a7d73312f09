//! How accounts objects are named and shown as files: the canonical escape of player, mod
//! and key names ([`crate::names`]), value files (the value plus one `\n`), listing cookies,
//! and the player file's check that its `name =` line matches the file name.

use crate::error::{Error, Result};
use crate::luanti::codec::player::{parse_player, Player};
use crate::names;
use crate::storekit::mtimes::content_hash;
use crate::vfs::tree::MAX_TREE_COOKIE;

/// The player an edited file `data` of player `name` describes (`stored`: the player as
/// stored, if it exists).
pub(super) fn parse_player_file(
    name: &str,
    data: &[u8],
    stored: Option<&Player>,
) -> Result<Player> {
    if stored.is_none() && data.iter().all(u8::is_ascii_whitespace) {
        return Err(Error::invalid(format!(
            "an empty file is no player: a new player {name:?} needs a whole player file (copy \
             another player's file and change its name line)"
        )));
    }
    let player = parse_player(data, stored)?;
    if player.name != name {
        return Err(Error::at(
            name_line(data),
            1,
            format!(
                "name {:?} differs from the file name {name:?} (rename the file to rename a \
                 player)",
                player.name
            ),
        ));
    }
    Ok(player)
}

/// A stable listing cookie for a name.
pub(super) fn cookie(name: &str) -> u64 {
    content_hash(name.as_bytes()) % (MAX_TREE_COOKIE - 1) + 1
}

/// The object name a file name stands for, if it is that name's canonical escape.
pub(super) fn object_name(file_name: &str) -> Option<Vec<u8>> {
    let name = names::unescape(file_name).ok()?;
    (names::escape(&name) == file_name).then_some(name)
}

/// A player or mod name from a file name.
pub(super) fn text_name(file_name: &str) -> Option<String> {
    String::from_utf8(object_name(file_name)?).ok()
}

/// Mod names as the engine allows them (`[a-z0-9_]+`).
pub(super) fn check_mod_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "{name:?} is not a mod name (only a-z, 0-9 and _)"
        )))
    }
}

/// The line of the first `name =` setting in a player file (1 when there is none).
pub(super) fn name_line(text: &[u8]) -> usize {
    text.split(|&b| b == b'\n')
        .position(|line| {
            let line = String::from_utf8_lossy(line);
            line.split_once('=')
                .is_some_and(|(key, _)| key.trim() == "name")
        })
        .map_or(1, |i| i + 1)
}
