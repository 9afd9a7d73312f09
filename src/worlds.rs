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

/// Detects the game of `source` from its names and content, without decoding anything.
pub fn detect(source: &Path) -> Result<Game> {
    if source.is_dir() {
        // A world.mt alone is a Luanti world too: a restore starts from the backup's copy,
        // and the stores are made by the first writes.
        if source.join("map.sqlite").is_file() || source.join("world.mt").is_file() {
            return Ok(Game::Luanti);
        }
        if survivalcraft::store::is_world_folder(source) {
            return Ok(Game::Survivalcraft);
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
