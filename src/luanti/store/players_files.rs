//! The files player backend: one player file per player in `WORLD/players/`.
//!
//! The file name is normally the player's name, but the engine falls back to `NAME0` …
//! `NAME999` when a file of that name belongs to someone else, so a player is found by the
//! `name` inside the file: first among those candidates (the engine's order), then anywhere in
//! the folder. Files are replaced through a temporary file and a rename.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::luanti::codec::player::{read_player_file, render_player, Player};
use crate::luanti::store::players::PlayerBackend;
use crate::storekit::replace::{read_no_follow, remove_durably, write_atomic};

/// How many alternative file names the engine tries (`PLAYER_FILE_ALTERNATE_TRIES`).
const ALTERNATE_TRIES: usize = 1000;

/// The mode of a new player file.
const FILE_MODE: u32 = 0o644;

/// A `players/` folder.
pub struct FilesPlayers {
    dir: PathBuf,
}

impl FilesPlayers {
    /// The backend for `dir` (usually `WORLD/players`); the folder is created on first save.
    pub fn new(dir: &Path) -> FilesPlayers {
        FilesPlayers {
            dir: dir.to_path_buf(),
        }
    }

    /// Player names and the file holding each, sorted by name. Files that are not player files
    /// are skipped with a warning; of two files with the same name inside, the one the engine
    /// would load wins.
    pub fn list_files(&self) -> Result<BTreeMap<String, String>> {
        let mut found: BTreeMap<String, String> = BTreeMap::new();
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(found),
            Err(e) => return Err(Error::from(e).context(self.dir.display())),
        };
        for entry in entries {
            let entry = entry?;
            let Ok(file_name) = entry.file_name().into_string() else {
                continue;
            };
            if file_name.starts_with('.') || !entry.file_type()?.is_file() {
                continue;
            }
            let player = match self.read(&file_name) {
                Ok(p) => p,
                Err(e) => {
                    log::warn!("{}: skipped: {e}", entry.path().display());
                    continue;
                }
            };
            let better = match found.get(&player.name) {
                None => true,
                Some(current) => rank(&player.name, &file_name) < rank(&player.name, current),
            };
            if better {
                found.insert(player.name, file_name);
            }
        }
        Ok(found)
    }

    fn read(&self, file_name: &str) -> Result<Player> {
        let path = self.dir.join(file_name);
        let bytes = read_no_follow(&path)?;
        read_player_file(&bytes).map_err(|e| e.context(path.display()))
    }

    /// The file that holds player `name`, if any: the engine's candidates in order while they
    /// exist, then a scan of the folder.
    pub fn file_of(&self, name: &str) -> Result<Option<String>> {
        for candidate in candidates(name) {
            if !self.dir.join(&candidate).is_file() {
                break;
            }
            if self.read(&candidate).is_ok_and(|p| p.name == name) {
                return Ok(Some(candidate));
            }
        }
        Ok(self.list_files()?.remove(name))
    }
}

/// `NAME`, `NAME0`, …, `NAME999`.
fn candidates(name: &str) -> impl Iterator<Item = String> + '_ {
    std::iter::once(name.to_string()).chain((0..ALTERNATE_TRIES).map(move |i| format!("{name}{i}")))
}

/// The engine's preference for a file holding `name`: its own name first, then `NAME0`… in
/// order, then any other file (by file name).
fn rank(name: &str, file_name: &str) -> (usize, String) {
    if file_name == name {
        return (0, String::new());
    }
    let index = file_name
        .strip_prefix(name)
        .filter(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|rest| rest.parse::<usize>().ok())
        .filter(|&i| i < ALTERNATE_TRIES && format!("{name}{i}") == file_name);
    match index {
        Some(i) => (i + 1, String::new()),
        None => (ALTERNATE_TRIES + 1, file_name.to_string()),
    }
}

fn check_file_name(name: &str) -> Result<()> {
    if name.contains('/') || name == "." || name == ".." || name.starts_with('.') {
        return Err(Error::invalid(format!(
            "player name {name:?} cannot be a file name in players/"
        )));
    }
    Ok(())
}

impl PlayerBackend for FilesPlayers {
    fn backend(&self) -> &'static str {
        "files"
    }

    /// The names of all players, sorted.
    fn list(&self) -> Result<Vec<String>> {
        Ok(self.list_files()?.into_keys().collect())
    }

    /// Loads one player.
    fn load(&self, name: &str) -> Result<Player> {
        let file = self
            .file_of(name)?
            .ok_or_else(|| Error::no_such_object(format!("no player {name:?}")))?;
        self.read(&file)
    }

    /// Replaces an existing player's file.
    fn save(&mut self, player: &Player) -> Result<()> {
        player.validate()?;
        let file = self
            .file_of(&player.name)?
            .ok_or_else(|| Error::no_such_object(format!("no player {:?}", player.name)))?;
        write_atomic(&self.dir.join(file), &render_player(player), FILE_MODE)
    }

    /// Writes a new player's file under the first free name the engine would use.
    fn create(&mut self, player: &Player) -> Result<()> {
        player.validate()?;
        check_file_name(&player.name)?;
        if self.file_of(&player.name)?.is_some() {
            return Err(Error::exists(format!("player {:?} exists", player.name)));
        }
        let file = candidates(&player.name)
            .find(|c| !self.dir.join(c).exists())
            .ok_or_else(|| Error::exists(format!("no free file name for {:?}", player.name)))?;
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| Error::from(e).context(self.dir.display()))?;
        write_atomic(&self.dir.join(file), &render_player(player), FILE_MODE)
    }

    /// Deletes a player's file.
    fn delete(&mut self, name: &str) -> Result<()> {
        let file = self
            .file_of(name)?
            .ok_or_else(|| Error::no_such_object(format!("no player {name:?}")))?;
        remove_durably(&self.dir.join(file))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_follows_the_engine_order() {
        assert!(rank("bob", "bob") < rank("bob", "bob0"));
        assert!(rank("bob", "bob0") < rank("bob", "bob12"));
        assert!(rank("bob", "bob12") < rank("bob", "alice"));
        assert!(rank("bob", "bob007") > rank("bob", "bob999"));
    }
}
