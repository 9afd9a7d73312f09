//! Which game a source belongs to, and opening its tree.

use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::luanti;
use crate::luanti::store::write_back::Window;
use crate::survivalcraft;
use crate::tvda;
use crate::tvda::store::format::DiskFormat;
use crate::vfs::tree::Options;
use crate::vfs::Tree;

/// The games worldfs mounts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Game {
    /// A Luanti world folder or a bare `map.sqlite`.
    Luanti,
    /// A Survivalcraft world folder, or a `.scworld` file (read-only).
    Survivalcraft,
    /// A Terrarum TVDA disk (magic `TEVd`, spec version 254).
    Tvda,
    /// A TEVD v2 or v3 disk (magic `TEVd`, spec version 2 or 3).
    Tevd,
}

fn is_sqlite(path: &Path) -> bool {
    let mut head = [0u8; 16];
    std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
        .map(|_| &head == b"SQLite format 3\0")
        .unwrap_or(false)
}

/// The engine's SQLite databases besides the map: any one of them makes a folder a Luanti
/// world (a world's players or auth kept apart from its map).
const ACCOUNT_DATABASES: [&str; 3] = ["players.sqlite", "auth.sqlite", "mod_storage.sqlite"];

/// Whether `path` is an SQLite database, or an empty file (SQLite makes a new database so).
fn is_sqlite_or_empty(path: &Path) -> bool {
    path.metadata()
        .is_ok_and(|m| m.is_file() && (m.len() == 0 || is_sqlite(path)))
}

/// Detects the game of `source` from its names and content, without decoding anything.
pub fn detect(source: &Path) -> Result<Game> {
    if source.is_dir() {
        // A world.mt alone is a Luanti world too: a restore starts from the backup's copy,
        // and the stores are made by the first writes. So is a folder holding only one of
        // the engine's SQLite databases (a world's players or auth kept apart).
        if source.join("map.sqlite").is_file()
            || source.join("world.mt").is_file()
            || ACCOUNT_DATABASES
                .iter()
                .any(|f| is_sqlite_or_empty(&source.join(f)))
        {
            return Ok(Game::Luanti);
        }
        if survivalcraft::store::is_world_folder(source) {
            return Ok(Game::Survivalcraft);
        }
        if std::fs::read_dir(source).is_ok_and(|mut d| d.next().is_none()) {
            return Err(Error::unsupported(format!(
                "{}: an empty folder, not a world yet (mount it with --create to make it a new Luanti world, e.g. to restore a backup into)",
                source.display()
            )));
        }
    } else if source.is_file() {
        // An empty map.sqlite is an empty map, as for the engine (SQLite makes the file so).
        let empty_map = source.file_name() == Some("map.sqlite".as_ref())
            && source.metadata().is_ok_and(|m| m.len() == 0);
        if empty_map || is_sqlite(source) {
            return Ok(Game::Luanti);
        }
        if survivalcraft::store::is_scworld(source) {
            return Ok(Game::Survivalcraft);
        }
        match tvda::store::format::sniff(source)? {
            Some(DiskFormat::Tvda) => return Ok(Game::Tvda),
            Some(DiskFormat::Tevd) => return Ok(Game::Tevd),
            // A backup's header.txt where a disk is to be restored: the mount makes the disk.
            None if tvda::tree::new_disk_text(source)?.is_some() => return Ok(Game::Tvda),
            None => {}
        }
    } else {
        return Err(Error::not_found(format!(
            "{}: no such file or folder",
            source.display()
        )));
    }
    Err(Error::unsupported(format!(
        "{}: not a world worldfs knows (expected a Luanti world folder or map.sqlite, a Survivalcraft world folder or .scworld, or a TEVd disk, or a Terrarum disk's header.txt to make a new disk from)",
        source.display()
    )))
}

/// The `world.mt` of a world `--create` makes: what the engine writes for a new world whose
/// stores are all `sqlite3` (`loadGameConfAndInitWorld`, src/content/subgames.cpp), with
/// the game `game`. Each store's database is made by the first write into it.
fn new_world_mt(game: &str) -> String {
    format!(
        "gameid = {game}\nbackend = sqlite3\nplayer_backend = sqlite3\nauth_backend = sqlite3\nmod_storage_backend = sqlite3\n"
    )
}

/// Makes `folder` a new, empty Luanti world of game `game` when it is missing or empty (a
/// `world.mt` and nothing else), so a backup can be restored into it. A folder that already
/// is a world of any game is left as it is; any other folder that is not empty is refused,
/// with nothing written.
pub fn create(folder: &Path, game: &str) -> Result<()> {
    if game.is_empty()
        || !game
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err(Error::invalid(format!(
            "--create={game:?}: a game id is letters, digits, '_' and '-' (the name of a folder in the engine's games/, e.g. minetest)"
        )));
    }
    let empty = match std::fs::read_dir(folder) {
        Ok(mut entries) => entries.next().is_none(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(folder)
                .map_err(|e| Error::from(e).context(format!("making {}", folder.display())))?;
            true
        }
        Err(e) => return Err(Error::from(e).context(folder.display())),
    };
    if !empty {
        return match detect(folder) {
            Ok(_) => Ok(()),
            Err(_) => Err(Error::new(
                libc::EEXIST,
                format!(
                    "{}: --create makes a new world only in an empty or missing folder, and this one holds files that are no world worldfs knows",
                    folder.display()
                ),
            )),
        };
    }
    crate::storekit::replace::write_atomic(
        &folder.join("world.mt"),
        new_world_mt(game).as_bytes(),
        0o644,
    )
}

/// Opens the tree of `source` (nothing is decoded), committing each change at once.
pub fn open(
    source: &Path,
    game: Game,
    read_only: bool,
    cache_bytes: usize,
) -> Result<Arc<dyn Tree>> {
    open_grouping(source, game, read_only, cache_bytes, None)
}

/// Opens the tree of `source` as [`open`] does; with `window`, a Luanti tree groups its
/// commits of blocks (see [`write_back`](luanti::store::write_back)). Other games commit
/// each change at once.
pub fn open_grouping(
    source: &Path,
    game: Game,
    read_only: bool,
    cache_bytes: usize,
    window: Option<Window>,
) -> Result<Arc<dyn Tree>> {
    match game {
        Game::Luanti => {
            let tree = luanti::tree::LuantiTree::open(
                source,
                &Options {
                    read_only,
                    cache_bytes,
                },
            )?;
            if let Some(window) = window {
                tree.write_back(window)?;
            }
            Ok(Arc::new(tree))
        }
        Game::Survivalcraft => Ok(Arc::new(survivalcraft::tree::SurvivalcraftTree::open(
            source,
            &Options {
                read_only,
                cache_bytes,
            },
        )?)),
        Game::Tvda => Ok(Arc::new(tvda::tree::TvdaTree::open(
            source,
            &Options {
                read_only,
                cache_bytes,
            },
        )?)),
        Game::Tevd => Ok(Arc::new(tvda::tree::tevd::TevdTree::open(
            source, read_only,
        )?)),
    }
}
