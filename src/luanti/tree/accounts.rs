//! The accounts part of the mounted Luanti tree: `players/NAME`, `auth.txt` and
//! `mod_storage/MOD/KEY`, whatever backend `world.mt` names for each.
//!
//! [`Accounts`] maps these paths onto the stores of [`crate::luanti::store::players`],
//! [`crate::luanti::store::auth`] and [`crate::luanti::store::mod_storage`] with the same
//! operations as the [`crate::vfs::tree::Tree`] trait, so the Luanti tree only dispatches to
//! it. Behaviour:
//!
//! - `players/NAME` is the player file format. Writing it parses the whole file strictly and
//!   commits every table in one transaction (or replaces the player file); an unchanged file is
//!   not rewritten. A new file name adds a player. The `name =` line must equal the file name:
//!   a different name is rejected with its line (rename the file to rename a player). Removing
//!   the file deletes the player and all its rows; its auth entry stays (as the engine's
//!   `remove_player` leaves it).
//! - `auth.txt` (mode 0600) shows every auth entry; writing it applies the difference (added,
//!   removed, changed lines) in one transaction. It cannot be absent: removing it is a no-op,
//!   so an editor that moves it aside keeps the entries; an empty file removes every entry.
//! - `mod_storage/MOD/KEY` is one entry's value plus one `\n` (removed again on write).
//!   `mkdir mod_storage/MOD` makes an empty mod folder that exists in memory until a key is
//!   written; the folder of a mod whose last key was removed stays until `rmdir`.
//!
//! Names are escaped with [`crate::names`]; a file name that is not the canonical escape of a
//! name is no object, so every object has exactly one path and none reaches outside its
//! folder. A backend database that does not exist yet is not created by reading: the folder or
//! file is empty until the first write creates it. Objects have no stored time, so mtimes come
//! from [`crate::storekit::mtimes`]: derived from the content, the commit time once edited here.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use super::{value_from_file, value_to_file};
use crate::error::{lock, Error, Result};
use crate::luanti::codec::block::Inventory;
use crate::luanti::codec::player::check_name;
use crate::luanti::store::auth::{parse_auth, AuthStore};
use crate::luanti::store::mod_storage::ModStorage;
use crate::luanti::store::players::{render_player, PlayerStore};
use crate::luanti::store::world_mt::WorldMt;
use crate::names;
use crate::storekit::mtimes::{content_hash, Mtimes};
use crate::storekit::scratch::looks_like_scratch;
use crate::vfs::tree::{base_time, not_found, stream, Entry, Kind, NewFile, Stat, TreePath};
use files::{check_mod_name, cookie, object_name, parse_player_file, text_name};
use lazy::Lazy;

mod files;
mod lazy;

/// The top-level name of the players folder.
pub const PLAYERS: &str = "players";
/// The top-level name of the auth file.
pub const AUTH: &str = "auth.txt";
/// The top-level name of the mod-storage folder.
pub const MOD_STORAGE: &str = "mod_storage";

/// World-folder files the accounts show decoded (or whose name they take), hidden from the
/// pass-through of the world folder's other files.
pub fn hidden_world_file(name: &str) -> bool {
    name == AUTH
        || name.starts_with("players.sqlite")
        || name.starts_with("auth.sqlite")
        || name.starts_with("mod_storage.sqlite")
        || name == "players.db"
        || name == "auth.db"
}

/// Where an accounts path points.
enum Spot {
    Players,
    Player(String),
    Auth,
    Mods,
    Mod(String),
    Entry(String, Vec<u8>),
}

/// Players, auth and mod storage of one world folder.
pub struct Accounts {
    players: Option<Lazy<PlayerStore>>,
    auth: Option<Lazy<AuthStore>>,
    mods: Option<Lazy<ModStorage>>,
    /// Mod folders made with mkdir (or emptied) that have no stored entry.
    empty_mods: Mutex<BTreeSet<String>>,
    mtimes: Mtimes,
    /// The size and content hash of `auth.txt` as last rendered, with the store's version
    /// then ([`AuthStore::version`]): a `stat` renders every account only when the store
    /// changed (a server's auth data holds a million accounts; `ls -l`, `rsync` and the
    /// kernel stat far more often than anything changes).
    auth_shown: Mutex<Option<AuthShown>>,
    /// The same for mod-storage entries, by path, with each entry's version
    /// ([`ModStorage::version`]): the kernel asks for a file's attributes before each read
    /// of it, and a value of 200 MB must not be read whole for each (up to
    /// [`ENTRIES_SHOWN`] entries).
    entries_shown: Mutex<HashMap<Vec<String>, AuthShown>>,
    /// Moves at the start and the end of every change through the mount, and is part of
    /// each kept entry's version and of auth.txt's: the mount's own commits do not change SQLite's data
    /// version as its own connection sees it, and a stat that read during a change must not
    /// be kept past it.
    changes: AtomicU64,
    /// Tests: how many times `auth.txt` was rendered for a stat.
    #[cfg(test)]
    auth_renders: std::sync::atomic::AtomicU64,
    /// Tests: how many times a mod-storage value was read for a stat.
    #[cfg(test)]
    entry_reads: std::sync::atomic::AtomicU64,
}

/// Moves the count of changes again when dropped (the end of a change).
struct Changing<'a>(&'a AtomicU64);

impl Drop for Changing<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// How many mod-storage entries' sizes are kept (a few hundred bytes each).
const ENTRIES_SHOWN: usize = 4096;

/// What a `stat` of `auth.txt` (or of a mod-storage entry) needs, kept with the store
/// version it is true for.
#[derive(Clone, Copy)]
struct AuthShown {
    /// The store's version and the identity of the database file it was read from.
    version: (u64, Option<(u64, u64)>),
    len: u64,
    hash: u64,
}

impl Accounts {
    /// Writes the waiting mtime records now (see [`crate::storekit::mtimes`]).
    pub fn flush_times(&self) {
        self.mtimes.flush();
    }

    /// The accounts of the world folder `world`, with the backends its `world.mt` (read by
    /// the caller, [`WorldMt::read`]) names (nothing is opened yet). Backends worldfs cannot
    /// read are left out of the tree.
    pub fn open(world: &Path, world_mt: &WorldMt, read_only: bool) -> Result<Accounts> {
        let identity = world
            .canonicalize()
            .unwrap_or_else(|_| world.to_path_buf())
            .join("accounts");
        Ok(Accounts {
            players: Lazy::new(
                world,
                world_mt,
                read_only,
                "player_backend",
                ("players.sqlite", Some("players.db"), "players/"),
                PlayerStore::open,
            ),
            auth: Lazy::new(
                world,
                world_mt,
                read_only,
                "auth_backend",
                ("auth.sqlite", Some("auth.db"), "auth.txt"),
                AuthStore::open,
            ),
            mods: Lazy::new(
                world,
                world_mt,
                read_only,
                "mod_storage_backend",
                ("mod_storage.sqlite", None, "mod_storage/"),
                ModStorage::open,
            ),
            empty_mods: Mutex::new(BTreeSet::new()),
            mtimes: Mtimes::open(&identity, read_only),
            auth_shown: Mutex::new(None),
            entries_shown: Mutex::new(HashMap::new()),
            changes: AtomicU64::new(0),
            #[cfg(test)]
            auth_renders: Default::default(),
            #[cfg(test)]
            entry_reads: Default::default(),
        })
    }

    /// The top-level names the accounts show (those whose backend worldfs reads), sorted.
    pub fn top_names(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.auth.is_some() {
            out.push(AUTH);
        }
        if self.mods.is_some() {
            out.push(MOD_STORAGE);
        }
        if self.players.is_some() {
            out.push(PLAYERS);
        }
        out
    }

    /// Every player's inventory, by player name, sorted (none when the player backend is
    /// not read). A player that does not load is left out, with a warning.
    pub fn inventories(&self) -> Result<Vec<(String, Inventory)>> {
        let Some(players) = &self.players else {
            return Ok(Vec::new());
        };
        players.with(
            false,
            || Ok(Vec::new()),
            |s| {
                let mut names = s.list()?;
                names.sort();
                Ok(names
                    .into_iter()
                    .filter_map(|n| match s.load(&n) {
                        Ok(p) => Some((n, p.inventory)),
                        Err(e) => {
                            log::warn!("player {n:?} left out of index/items: {e}");
                            None
                        }
                    })
                    .collect())
            },
        )
    }

    /// Replaces item `from` by `to` in every player's inventory (count, wear and item
    /// metadata kept): each changed player is saved in its own transaction (the player
    /// backend is another database than the map). Returns how many players changed.
    pub fn rename_item(&self, from: &[u8], to: &[u8]) -> Result<usize> {
        let _changing = self.changing();
        let Some(players) = &self.players else {
            return Ok(0);
        };
        players.with(
            false,
            || Ok(0),
            |s| {
                let mut changed = 0;
                for name in s.list()? {
                    let mut player = s.load(&name)?;
                    if crate::luanti::index::rename_item(&mut player.inventory, from, to) > 0 {
                        s.save(&player)?;
                        changed += 1;
                    }
                }
                Ok(changed)
            },
        )
    }

    /// Whether the top-level name `name` belongs to the accounts.
    pub fn owns(&self, name: &str) -> bool {
        self.top_names().contains(&name)
    }

    fn players(&self) -> Result<&Lazy<PlayerStore>> {
        self.players
            .as_ref()
            .ok_or_else(|| Error::unsupported("the player backend is not supported"))
    }

    fn auth(&self) -> Result<&Lazy<AuthStore>> {
        self.auth
            .as_ref()
            .ok_or_else(|| Error::unsupported("the auth backend is not supported"))
    }

    fn mods(&self) -> Result<&Lazy<ModStorage>> {
        self.mods
            .as_ref()
            .ok_or_else(|| Error::unsupported("the mod storage backend is not supported"))
    }

    fn spot(&self, path: &TreePath) -> Result<Spot> {
        let parts: Vec<&str> = path.iter().map(String::as_str).collect();
        let spot = match parts.as_slice() {
            [PLAYERS] => Spot::Players,
            [PLAYERS, name] => Spot::Player(self.player_name(name).ok_or_else(|| not_found(path))?),
            [AUTH] => Spot::Auth,
            [MOD_STORAGE] => Spot::Mods,
            [MOD_STORAGE, m] => Spot::Mod(self.mod_name(m).ok_or_else(|| not_found(path))?),
            [MOD_STORAGE, m, key] => {
                let m = self.mod_name(m).ok_or_else(|| not_found(path))?;
                let key = if names::is_long(key) {
                    let keys = self.keys(&m).unwrap_or_default();
                    names::find(key, keys)
                } else {
                    object_name(key)
                };
                Spot::Entry(m, key.ok_or_else(|| not_found(path))?)
            }
            _ => return Err(not_found(path)),
        };
        if parts.first().is_some_and(|top| !self.owns(top)) {
            return Err(not_found(path));
        }
        Ok(spot)
    }

    /// The player a file name in `players/` stands for (a long form: among the stored ones).
    fn player_name(&self, file: &str) -> Option<String> {
        if !names::is_long(file) {
            return text_name(file);
        }
        let players = self.players().ok()?;
        let stored = players.with(false, || Ok(Vec::new()), |s| s.list()).ok()?;
        names::find(file, stored)
    }

    /// The mod a folder name in `mod_storage/` stands for (a long form: among the stored ones).
    fn mod_name(&self, file: &str) -> Option<String> {
        if !names::is_long(file) {
            return text_name(file);
        }
        names::find(file, self.mod_list().ok()?)
    }

    fn dir_stat(&self) -> Stat {
        Stat {
            kind: Kind::Dir,
            size: 0,
            mtime: base_time(),
            perm: 0o755,
            volatile: true,
            source: None,
            owner: None,
            file: None,
        }
    }

    /// The listing entry of the file `name` at `path` holding `text`. One that exists but
    /// cannot be read (a player record that does not decode) is listed all the same, so a
    /// backup reports the error its own `stat` and reads give instead of taking it for
    /// deleted (`rsync --delete`).
    fn listed_file(&self, path: &TreePath, name: String, text: Result<Vec<u8>>) -> Entry {
        let text = text.unwrap_or_else(|e| {
            log::warn!(
                "{}: listed, but it cannot be read: {}",
                path.join("/"),
                e.message()
            );
            Vec::new()
        });
        Entry {
            cookie: cookie(&name),
            stat: self.file_stat(path, &text, false),
            name,
        }
    }

    fn file_stat(&self, path: &TreePath, data: &[u8], secret: bool) -> Stat {
        self.stat_of(path, data.len() as u64, content_hash(data), secret)
    }

    /// The stat of a file of `len` bytes whose content hashes to `hash`.
    fn stat_of(&self, path: &TreePath, len: u64, hash: u64, secret: bool) -> Stat {
        let perm = if secret { 0o600 } else { 0o644 };
        Stat {
            kind: Kind::File,
            size: len,
            mtime: self.mtimes.mtime(mtime_key(path), hash),
            perm,
            volatile: true,
            source: None,
            owner: None,
            file: None,
        }
    }

    /// Notes that the object at `path` now shows `data`, changed at `when`.
    fn record(&self, path: &TreePath, data: &[u8], when: SystemTime) {
        self.mtimes
            .record(mtime_key(path), content_hash(data), when);
    }

    fn player_text(&self, name: &str) -> Result<Vec<u8>> {
        self.players()?.with(
            false,
            || Err(Error::not_found(format!("no player {name:?}"))),
            |s| Ok(render_player(&s.load(name)?)),
        )
    }

    fn auth_text(&self) -> Result<Vec<u8>> {
        self.auth()?.with(false, || Ok(Vec::new()), |s| s.render())
    }

    fn mod_list(&self) -> Result<Vec<String>> {
        let mut mods: BTreeSet<String> = self
            .mods()?
            .with(false, || Ok(Vec::new()), |s| s.list_mods())?
            .into_iter()
            .collect();
        mods.extend(lock(&self.empty_mods)?.iter().cloned());
        Ok(mods.into_iter().collect())
    }

    fn mod_exists(&self, modname: &str) -> Result<bool> {
        Ok(self.mod_list()?.iter().any(|m| m == modname))
    }

    fn keys(&self, modname: &str) -> Result<Vec<Vec<u8>>> {
        self.mods()?
            .with(false, || Ok(Vec::new()), |s| s.list_keys(modname))
    }

    fn value_text(&self, modname: &str, key: &[u8]) -> Result<Vec<u8>> {
        let value = self.mods()?.with(
            false,
            || Err(Error::not_found("no mod storage yet")),
            |s| s.read(modname, key),
        )?;
        Ok(value_to_file(&value))
    }

    /// The object at `path`.
    pub fn stat(&self, path: &TreePath) -> Result<Stat> {
        let spot = self.spot(path)?;
        match &spot {
            Spot::Players | Spot::Mods => Ok(self.dir_stat()),
            Spot::Mod(m) => {
                if self.mod_exists(m)? {
                    Ok(self.dir_stat())
                } else {
                    Err(not_found(path))
                }
            }
            // Only what exists is shown: a world without auth data has no auth.txt until
            // one is written (which creates the store world.mt names, as the engine would).
            Spot::Auth if !self.auth()?.stored() => Err(not_found(path)),
            Spot::Auth => self.auth_stat(path),
            Spot::Entry(m, key) => self.entry_stat(path, m, key),
            Spot::Player(_) => {
                let data = self.content(&spot, path)?;
                Ok(self.file_stat(path, &data, false))
            }
        }
    }

    /// The stat of a mod-storage entry, whose value is read again only when its version
    /// changed since.
    fn entry_stat(&self, path: &TreePath, modname: &str, key: &[u8]) -> Result<Stat> {
        if !self.mod_exists(modname)? {
            return Err(not_found(path));
        }
        let mods = self.mods()?;
        // Read before the value: a change in between makes the next stat read again.
        let changes = self.changes.load(Ordering::SeqCst);
        let version = mods
            .with(false, || Ok(None), |s| Ok(s.version(modname, key)))?
            .map(|v| (v ^ changes.rotate_left(32), mods.database_id()));
        let known = lock(&self.entries_shown)?.get(path).copied();
        let shown = match (version, known) {
            (Some(v), Some(k)) if k.version == v => k,
            _ => {
                #[cfg(test)]
                self.entry_reads
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let data = self.value_text(modname, key)?;
                let shown = AuthShown {
                    version: version.unwrap_or_default(),
                    len: data.len() as u64,
                    hash: content_hash(&data),
                };
                if version.is_some() {
                    let mut kept = lock(&self.entries_shown)?;
                    if kept.len() >= ENTRIES_SHOWN {
                        kept.clear();
                    }
                    kept.insert(path.to_vec(), shown);
                }
                shown
            }
        };
        Ok(self.stat_of(path, shown.len, shown.hash, false))
    }

    /// Marks a change through the mount, now and when the guard goes (see `changes`).
    fn changing(&self) -> Changing<'_> {
        self.changes.fetch_add(1, Ordering::SeqCst);
        Changing(&self.changes)
    }

    /// The stat of `auth.txt`, rendered again only when the store changed since.
    fn auth_stat(&self, path: &TreePath) -> Result<Stat> {
        let auth = self.auth()?;
        // Read before the entries: a change in between makes the next stat render again
        // (the count of the mount's own changes too, which SQLite's data version does not
        // show to the connection that made them).
        let changes = self.changes.load(Ordering::SeqCst);
        let version = auth
            .with(false, || Ok(None), |s| Ok(s.version()))?
            .map(|v| (v ^ changes.rotate_left(32), auth.database_id()));
        let known = *lock(&self.auth_shown)?;
        let shown = match (version, known) {
            (Some(v), Some(k)) if k.version == v => k,
            _ => {
                #[cfg(test)]
                self.auth_renders
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let data = self.auth_text()?;
                let shown = AuthShown {
                    version: version.unwrap_or_default(),
                    len: data.len() as u64,
                    hash: content_hash(&data),
                };
                *lock(&self.auth_shown)? = version.map(|_| shown);
                shown
            }
        };
        Ok(self.stat_of(path, shown.len, shown.hash, true))
    }

    /// Streams the entries of a folder after cookie `after` (see the `Tree` trait).
    pub fn list(
        &self,
        dir: &TreePath,
        after: u64,
        sink: &mut dyn FnMut(Entry) -> bool,
    ) -> Result<()> {
        let mut entries = Vec::new();
        match self.spot(dir)? {
            Spot::Players => {
                let names = self
                    .players()?
                    .with(false, || Ok(Vec::new()), |s| s.list())?;
                for name in names {
                    let file = names::escape(name.as_bytes());
                    let path = [PLAYERS.to_string(), file.clone()];
                    entries.push(self.listed_file(&path, file, self.player_text(&name)));
                }
            }
            Spot::Mods => {
                for m in self.mod_list()? {
                    let file = names::escape(m.as_bytes());
                    entries.push(Entry {
                        cookie: cookie(&file),
                        stat: self.dir_stat(),
                        name: file,
                    });
                }
            }
            Spot::Mod(m) => {
                if !self.mod_exists(&m)? {
                    return Err(not_found(dir));
                }
                let mut shown = BTreeSet::new();
                for key in self.keys(&m)? {
                    let file = names::escape(&key);
                    if !shown.insert(file.clone()) {
                        // Two long keys whose long forms collide: the first one shows.
                        log::warn!(
                            "{}/{file}: a second key with this long file name is not shown",
                            dir.join("/")
                        );
                        continue;
                    }
                    let mut path = dir.to_vec();
                    path.push(file.clone());
                    entries.push(self.listed_file(&path, file, self.value_text(&m, &key)));
                }
            }
            Spot::Player(_) | Spot::Auth | Spot::Entry(..) => {
                return Err(Error::not_dir("not a directory"))
            }
        }
        stream(entries, after, sink);
        Ok(())
    }

    /// The content of a file.
    pub fn read(&self, path: &TreePath) -> Result<Arc<Vec<u8>>> {
        Ok(Arc::new(self.content(&self.spot(path)?, path)?))
    }

    fn content(&self, spot: &Spot, path: &TreePath) -> Result<Vec<u8>> {
        match spot {
            Spot::Player(name) => self.player_text(name),
            Spot::Auth => self.auth_text(),
            Spot::Entry(m, key) => {
                if !self.mod_exists(m)? {
                    return Err(not_found(path));
                }
                self.value_text(m, key)
            }
            Spot::Players | Spot::Mods | Spot::Mod(_) => Err(Error::is_dir("is a directory")),
        }
    }

    /// Parses and commits a whole file (creating the player or entry when it is new).
    pub fn write(&self, path: &TreePath, data: &[u8]) -> Result<()> {
        let _changing = self.changing();
        let spot = self.spot(path)?;
        if matches!(spot, Spot::Auth) {
            // Its own commits do not change SQLite's data version: the next stat renders.
            *lock(&self.auth_shown)? = None;
        }
        let shown = match spot {
            Spot::Player(name) => self.write_player(&name, data)?,
            Spot::Auth => self.auth()?.with(
                true,
                || Ok(None),
                |s| {
                    if s.apply(data)?.is_empty() {
                        return Ok(None);
                    }
                    s.render().map(Some)
                },
            )?,
            Spot::Entry(m, key) => {
                if !self.mod_exists(&m)? {
                    return Err(not_found(path));
                }
                let value = value_from_file(data);
                let changed = self.mods()?.with(
                    true,
                    || Ok(false),
                    |s| {
                        match s.read(&m, &key) {
                            Ok(old) if old == value => return Ok(false),
                            Ok(_) => {}
                            Err(e) if e.is_no_such_object() => {}
                            Err(e) => return Err(e),
                        }
                        s.write(&m, &key, value)?;
                        Ok(true)
                    },
                )?;
                if changed {
                    lock(&self.empty_mods)?.remove(&m);
                }
                changed.then(|| value_to_file(value))
            }
            Spot::Players | Spot::Mods | Spot::Mod(_) => {
                return Err(Error::is_dir("is a directory"))
            }
        };
        if let Some(shown) = shown {
            self.record(path, &shown, SystemTime::now());
        }
        Ok(())
    }

    /// Parses a whole file as `write` would, storing nothing.
    pub fn check(&self, path: &TreePath, data: &[u8]) -> Result<()> {
        match self.spot(path)? {
            Spot::Player(name) => self.players()?.with(
                false,
                || parse_player_file(&name, data, None).map(drop),
                |s| {
                    let stored = match s.load(&name) {
                        Ok(p) => Some(p),
                        Err(e) if e.is_no_such_object() => None,
                        Err(e) => return Err(e),
                    };
                    parse_player_file(&name, data, stored.as_ref()).map(drop)
                },
            ),
            Spot::Auth => parse_auth(data).map(drop),
            Spot::Entry(m, _) if self.mod_exists(&m)? => Ok(()),
            Spot::Entry(..) => Err(not_found(path)),
            Spot::Players | Spot::Mods | Spot::Mod(_) => Err(Error::is_dir("is a directory")),
        }
    }

    /// Saves or creates the player `name` from an edited file; the text shown afterwards, or
    /// `None` when nothing changed.
    fn write_player(&self, name: &str, data: &[u8]) -> Result<Option<Vec<u8>>> {
        self.players()?.with(
            true,
            || Ok(None),
            |s| {
                let stored = match s.load(name) {
                    Ok(p) => Some(p),
                    Err(e) if e.is_no_such_object() => None,
                    Err(e) => return Err(e),
                };
                let player = parse_player_file(name, data, stored.as_ref())?;
                match &stored {
                    Some(old) if *old == player => return Ok(None),
                    Some(_) => s.save(&player)?,
                    None => s.create(&player)?,
                }
                Ok(Some(render_player(&s.load(name)?)))
            },
        )
    }

    /// What a new file `name` in `dir` becomes.
    pub fn classify(&self, dir: &TreePath, name: &str) -> Result<NewFile> {
        let spot = self.spot(dir)?;
        // Mod-storage keys are free: every name is a key but the exact temporaries of sed,
        // rsync and vim (`settings.tmp` is a key).
        let temporary = match spot {
            Spot::Mod(_) => names::is_tool_temporary(name),
            _ => looks_like_scratch(name),
        };
        if temporary {
            return Ok(NewFile::Scratch);
        }
        match spot {
            Spot::Players => {
                let player = text_name(name)
                    .ok_or_else(|| Error::invalid(format!("{name:?} is not a player file name")))?;
                check_name(&player)
                    .map_err(|m| Error::invalid(format!("player name {player:?}: {m}")))?;
                Ok(NewFile::Object)
            }
            Spot::Mod(_) => {
                let key = names::unescape(name)?;
                if names::escape(&key) != name {
                    return Err(Error::invalid(format!(
                        "{:?} is not a key file name ('%' must start an escape such as %25, \
                         and only where it is needed)",
                        crate::error::excerpt(name)
                    )));
                }
                Ok(NewFile::Object)
            }
            _ => Ok(NewFile::Scratch),
        }
    }

    /// Deletes the player or mod-storage entry at `path` (`auth.txt`: a no-op).
    pub fn remove(&self, path: &TreePath) -> Result<()> {
        let _changing = self.changing();
        match self.spot(path)? {
            Spot::Player(name) => {
                self.players()?
                    .with(true, || Err(not_found(path)), |s| s.delete(&name))
            }
            Spot::Auth => Ok(()),
            Spot::Entry(m, key) => {
                self.mods()?
                    .with(true, || Err(not_found(path)), |s| s.delete(&m, &key))?;
                lock(&self.empty_mods)?.insert(m);
                Ok(())
            }
            Spot::Players | Spot::Mods | Spot::Mod(_) => Err(Error::is_dir("is a directory")),
        }
    }

    /// Creates a mod folder (`mod_storage/MOD`); other folders here are fixed.
    pub fn mkdir(&self, path: &TreePath) -> Result<()> {
        let _changing = self.changing();
        match self.spot(path) {
            Ok(Spot::Mod(m)) => {
                check_mod_name(&m)?;
                if self.mod_exists(&m)? {
                    return Err(Error::exists(format!("mod folder {m:?} exists")));
                }
                lock(&self.empty_mods)?.insert(m);
                Ok(())
            }
            _ => Err(Error::not_permitted(format!(
                "{}: only mod_storage/MOD folders can be created here",
                path.join("/")
            ))),
        }
    }

    /// Removes an empty mod folder; the fixed folders accept it as a no-op when empty so
    /// that `rm -r` can proceed.
    pub fn rmdir(&self, path: &TreePath) -> Result<()> {
        let _changing = self.changing();
        let not_empty = || Error::not_empty(format!("{}: not empty", path.join("/")));
        match self.spot(path)? {
            Spot::Players => {
                let any =
                    self.players()?
                        .with(false, || Ok(false), |s| Ok(!s.list()?.is_empty()))?;
                if any {
                    return Err(not_empty());
                }
                Ok(())
            }
            Spot::Mods => {
                if self.mod_list()?.is_empty() {
                    Ok(())
                } else {
                    Err(not_empty())
                }
            }
            Spot::Mod(m) => {
                if !self.mod_exists(&m)? {
                    return Err(not_found(path));
                }
                if !self.keys(&m)?.is_empty() {
                    return Err(not_empty());
                }
                self.mods()?.with(false, || Ok(()), |s| s.remove_mod(&m))?;
                lock(&self.empty_mods)?.remove(&m);
                Ok(())
            }
            // Only what exists is shown: a world without auth data has no auth.txt until
            // one is written (which creates the store world.mt names, as the engine would).
            Spot::Auth if !self.auth()?.stored() => Err(not_found(path)),
            Spot::Player(_) | Spot::Auth | Spot::Entry(..) => {
                Err(Error::not_dir("not a directory"))
            }
        }
    }

    /// Renames a player (its stored name follows) or a mod-storage entry (within or across
    /// mods); the target is replaced when it exists.
    pub fn rename(&self, from: &TreePath, to: &TreePath) -> Result<()> {
        let _changing = self.changing();
        match (self.spot(from)?, self.spot(to)?) {
            (Spot::Player(a), Spot::Player(b)) => {
                if a == b {
                    return Ok(());
                }
                check_name(&b).map_err(|m| Error::invalid(format!("player name {b:?}: {m}")))?;
                let shown = self.players()?.with(
                    true,
                    || Err(not_found(from)),
                    |s| {
                        let mut player = s.load(&a)?;
                        player.name = b.clone();
                        match s.load(&b) {
                            Ok(_) => s.save(&player)?,
                            Err(e) if e.is_no_such_object() => s.create(&player)?,
                            Err(e) => return Err(e),
                        }
                        s.delete(&a)?;
                        Ok(render_player(&player))
                    },
                )?;
                self.record(to, &shown, SystemTime::now());
                Ok(())
            }
            (Spot::Entry(ma, ka), Spot::Entry(mb, kb)) => {
                if !self.mod_exists(&mb)? {
                    return Err(not_found(to));
                }
                if (&ma, &ka) == (&mb, &kb) {
                    return Ok(());
                }
                let value = self.mods()?.with(
                    true,
                    || Err(not_found(from)),
                    |s| {
                        let value = s.read(&ma, &ka)?;
                        s.write(&mb, &kb, &value)?;
                        s.delete(&ma, &ka)?;
                        Ok(value)
                    },
                )?;
                let mut empty = lock(&self.empty_mods)?;
                empty.remove(&mb);
                empty.insert(ma);
                drop(empty);
                self.record(to, &value_to_file(&value), SystemTime::now());
                Ok(())
            }
            _ => Err(Error::new(
                libc::EXDEV,
                "only players within players/ and entries within mod_storage/ can be renamed",
            )),
        }
    }

    /// Sets the mtime a file shows while its content stays as it is.
    pub fn set_mtime(&self, path: &TreePath, mtime: SystemTime) -> Result<()> {
        match self.spot(path)? {
            Spot::Players | Spot::Mods | Spot::Mod(_) => Ok(()),
            // Only what exists is shown: a world without auth data has no auth.txt until
            // one is written (which creates the store world.mt names, as the engine would).
            Spot::Auth if !self.auth()?.stored() => Err(not_found(path)),
            Spot::Player(_) | Spot::Auth | Spot::Entry(..) => {
                let data = self.read(path)?;
                self.record(path, &data, mtime);
                Ok(())
            }
        }
    }

    /// Opens every store now (a `--snapshot` mount reads each as of the mount, not as of
    /// its first read): a store whose database cannot be read so fails the mount.
    pub fn open_every_store(&self) -> Result<()> {
        if let Some(players) = &self.players {
            players.open_for_snapshot()?;
        }
        if let Some(auth) = &self.auth {
            auth.open_for_snapshot()?;
        }
        if let Some(mods) = &self.mods {
            mods.open_for_snapshot()?;
        }
        Ok(())
    }

    /// One line per backend for `worldfs info`: its kind and how much it holds, or that it
    /// holds nothing yet (its file or folder is made by the first write).
    pub fn summary(&self) -> Vec<String> {
        let mut out = Vec::new();
        let line = |what: &str, label: &str, stored: bool, r: Result<String>| {
            let held = match r {
                _ if !stored => format!("none ({label} is made by the first write)"),
                Ok(text) => format!("{text} ({label})"),
                Err(e) => format!("unreadable ({e}) ({label})"),
            };
            format!("{what}: {held}")
        };
        if let Some(players) = &self.players {
            let n = players.with(false, || Ok(0), |s| Ok(s.list()?.len()));
            let n = n.map(|n| n.to_string());
            out.push(line("players", &players.label, players.stored(), n));
        }
        if let Some(auth) = &self.auth {
            let n = auth.with(false, || Ok(0), |s| Ok(s.entries()?.len()));
            let n = n.map(|n| n.to_string());
            out.push(line("auth entries", &auth.label, auth.stored(), n));
        }
        if let Some(mods) = &self.mods {
            let n = mods.with(
                false,
                || Ok((0, 0)),
                |s| {
                    let list = s.list_mods()?;
                    let mut keys = 0;
                    for m in &list {
                        keys += s.list_keys(m)?.len();
                    }
                    Ok((list.len(), keys))
                },
            );
            let text = n.map(|(m, k)| format!("{m} mods, {k} entries"));
            out.push(line("mod storage", &mods.label, mods.stored(), text));
        }
        out
    }
}

/// The key under which the mtime of the object at `path` is recorded.
fn mtime_key(path: &TreePath) -> u64 {
    content_hash(path.join("/").as_bytes())
}

#[cfg(test)]
mod tests;
