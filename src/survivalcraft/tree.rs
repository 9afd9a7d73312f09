//! The mounted tree of a Survivalcraft world (docs/survivalcraft.md; docs/architecture.md):
//!
//! ```text
//! Project.xml                      read/write, committed through the store
//! chunks/CX,CZ/                    one folder per stored chunk
//!     blocks.cubeset               cells: block id and data (Cubeset)
//!     light.txt                    cell light (not for region worlds, which store none)
//!     surface.txt                  per column: top height, temperature, humidity (and in
//!                                  Chunks*.dat the bottom and sunlight heights)
//! players/NAME/inventory           a player's inventories in Project.xml
//! containers/X,Y,Z/inventory       a chest's, furnace's, crafting table's... slots
//! index/blocks/ID/, index/items/ID  whole-world answers (see [`index`]; reached by name,
//!                                  not listed)
//! Project.bak, Mods/, ...           the world folder's other files, folders and links, as they are
//! ```
//!
//! Region worlds (2.3+) store no cell light: the game relights every chunk it loads, so
//! their chunk folders have no `light.txt`. A `.scworld` file is a ZIP and is mounted
//! read-only; to edit it, unpack it into a folder and mount that.
//!
//! Paths are mapped to objects and views here; decoding, caching and committing live in
//! [`Objects`], the formats in the codecs and the views.

mod index;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use crate::error::{Error, Result};
use crate::index_tree;
use crate::names;
use crate::storekit::folder::FolderFiles;
use crate::storekit::mtimes::content_hash;
use crate::storekit::scratch::looks_like_scratch;
use crate::survivalcraft::cache::Objects;
use crate::survivalcraft::codec::chunk::{Chunk, ChunkPos};
use crate::survivalcraft::codec::format::TerrainFormat;
use crate::survivalcraft::codec::project::{self, Holder, ProjectInfo};
use crate::survivalcraft::index::Index;
use crate::survivalcraft::views::{self, inventory::ValueLayout};
use crate::vfs::tree::{
    base_time, no_link_here, not_a_link, not_found, stream, Entry, NewFile, Options, Owner,
    Removal, Stat, Tree, TreePath, MAX_TREE_COOKIE,
};

/// The files of a chunk folder, in listing order, with how each is rendered and parsed.
pub struct View {
    pub name: &'static str,
    pub render: fn(&Chunk) -> Vec<u8>,
    pub parse: fn(&Chunk, &[u8]) -> Result<Chunk>,
}

const VIEWS: [View; 3] = [
    View {
        name: "blocks.cubeset",
        render: views::blocks::render,
        parse: views::blocks::parse,
    },
    View {
        name: "light.txt",
        render: views::light::render,
        parse: views::light::parse,
    },
    View {
        name: "surface.txt",
        render: views::surface::render,
        parse: views::surface::parse,
    },
];

/// The views a chunk of `format` shows (no `light.txt` where light is not stored).
pub fn views_for(format: TerrainFormat) -> impl Iterator<Item = &'static View> {
    VIEWS
        .iter()
        .filter(move |v| v.name != "light.txt" || format.stores_light())
}

/// Entities with inventories, by the folder they are shown in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HolderKind {
    Player,
    Container,
}

impl HolderKind {
    fn dir(self) -> &'static str {
        match self {
            HolderKind::Player => "players",
            HolderKind::Container => "containers",
        }
    }
}

const PROJECT: &str = "Project.xml";
const INVENTORY: &str = "inventory";

/// Where a path points.
enum Place<'a> {
    Root,
    /// A file, folder or link of the world folder itself.
    WorldFile,
    Project,
    Chunks,
    Chunk(ChunkPos),
    View(ChunkPos, &'static View),
    Holders(HolderKind),
    Holder(HolderKind, &'a str),
    Inventory(HolderKind, &'a str),
    /// `index/…`: whole-world answers (see [`index`]).
    Index(index::At),
}

/// The renames that change `index/`.
const INDEX_RENAMES: &str = "mv of index/blocks/ID or index/items/ID";

/// The names of the world folder the tree shows otherwise (or never): the terrain stores,
/// and folders named like a view (the view wins).
fn hidden_world_file(name: &str) -> bool {
    name == PROJECT
        || (name.starts_with("Chunks") && name.ends_with(".dat"))
        || matches!(
            name,
            "Regions" | "Chunks" | "chunks" | "players" | "containers" | index::INDEX
        )
        || name.contains(".worldfs-")
}

/// The listing cookie of a chunk folder: its position, so it never changes. Chunks beyond
/// ±2^30 (far outside any world the game can make) have none.
fn chunk_cookie(pos: ChunkPos) -> Option<u64> {
    const HALF: i64 = 1 << 30;
    let x = i64::from(pos.cx) + HALF;
    let z = i64::from(pos.cz) + HALF;
    if !(0..2 * HALF).contains(&x) || !(0..2 * HALF).contains(&z) {
        return None;
    }
    let cookie = ((x as u64) << 31 | z as u64) + 1;
    (cookie <= MAX_TREE_COOKIE).then_some(cookie)
}

/// Holders of one kind with their (escaped) folder names, unique within the kind.
fn holders(info: &ProjectInfo, kind: HolderKind) -> Vec<(String, &Holder)> {
    match kind {
        HolderKind::Player => info
            .players()
            .into_iter()
            .map(|(n, h)| (names::escape(n.as_bytes()), h))
            .collect(),
        HolderKind::Container => {
            let containers: Vec<(&String, &Holder)> = info
                .holders
                .iter()
                .filter(|h| h.player_name.is_none() && !h.inventories.is_empty())
                .filter_map(|h| h.coordinates.as_ref().map(|c| (c, h)))
                .collect();
            containers
                .iter()
                .map(|(c, h)| {
                    let shared = containers.iter().filter(|(o, _)| o == c).count() > 1;
                    let name = if shared {
                        format!("{c}#{}", h.entity_id)
                    } else {
                        (*c).clone()
                    };
                    (names::escape(name.as_bytes()), *h)
                })
                .collect()
        }
    }
}

/// A Survivalcraft world (folder or `.scworld`) as a tree.
pub struct SurvivalcraftTree {
    objects: Objects,
    /// The whole-world answers of `index/`.
    index: Arc<Index>,
    files: Option<FolderFiles>,
    read_only: bool,
    /// The `.scworld` file, when the world is packed (read-only).
    archive: Option<String>,
    /// The world folder or the `.scworld` file.
    source: PathBuf,
    /// What guards the views on disk: the terrain store (`Regions/` or `Chunks*.dat`) and
    /// the project file, each else the world folder (`index/` reads both).
    terrain_and_project: [PathBuf; 2],
}

/// The first of `names` in the world folder `source`, else the folder itself.
fn first_in(source: &Path, names: &[&str]) -> PathBuf {
    names
        .iter()
        .map(|name| source.join(name))
        .find(|p| p.exists())
        .unwrap_or_else(|| source.to_path_buf())
}

/// The message for a packed world that someone wants to write.
fn unpack_hint(scworld: &str) -> String {
    format!(
        "{scworld} is a packed world (a ZIP) and can only be mounted read-only (--read-only); \
         to edit it, unpack it into a folder and mount that: \
         mkdir WORLD && unzip '{scworld}' -d WORLD && worldfs mount WORLD MOUNTPOINT \
         (pack it again with: cd WORLD && zip -r ../NEW.scworld .)"
    )
}

impl SurvivalcraftTree {
    /// Opens the world at `source` (nothing is decoded). A `.scworld` file needs
    /// `read_only`.
    pub fn open(source: &Path, options: &Options) -> Result<SurvivalcraftTree> {
        let archive = (!source.is_dir()).then(|| source.display().to_string());
        if let (Some(a), false) = (&archive, options.read_only) {
            return Err(Error::read_only(unpack_hint(a)));
        }
        let objects = Objects::open(source, options.read_only, options.cache_bytes)?;
        Ok(SurvivalcraftTree {
            index: Index::new(&objects, options.cache_bytes),
            objects,
            files: source
                .is_dir()
                .then(|| FolderFiles::new(source, hidden_world_file, options.read_only)),
            read_only: options.read_only,
            archive,
            source: source.to_path_buf(),
            terrain_and_project: [
                first_in(
                    source,
                    &["Regions", "Chunks32h.dat", "Chunks32.dat", "Chunks.dat"],
                ),
                first_in(source, &["Project.xml", "Project.json"]),
            ],
        })
    }

    /// The decoded objects under this tree.
    pub fn objects(&self) -> &Objects {
        &self.objects
    }

    /// The whole-world answers of `index/`.
    pub fn index(&self) -> &Index {
        &self.index
    }

    fn layout(&self) -> ValueLayout {
        if self.objects.format() == TerrainFormat::Chunks16 {
            ValueLayout::Bits16
        } else {
            ValueLayout::Bits32
        }
    }

    fn place<'a>(&self, path: &'a TreePath) -> Result<Place<'a>> {
        let parts: Vec<&str> = path.iter().map(String::as_str).collect();
        let chunk = |s: &str| s.parse::<ChunkPos>().map_err(|_| not_found(path));
        let kind = |s: &str| match s {
            "players" => Some(HolderKind::Player),
            "containers" => Some(HolderKind::Container),
            _ => None,
        };
        Ok(match parts.as_slice() {
            [] => Place::Root,
            ["chunks"] => Place::Chunks,
            [PROJECT] => Place::Project,
            [index::INDEX, rest @ ..] => Place::Index(self.index_at(path, rest)?),
            [d] if kind(d).is_some() => Place::Holders(kind(d).ok_or_else(|| not_found(path))?),
            [top, ..]
                if !matches!(*top, "chunks" | PROJECT | index::INDEX) && kind(top).is_none() =>
            {
                Place::WorldFile
            }
            ["chunks", c] => Place::Chunk(chunk(c)?),
            ["chunks", c, v] => {
                let view = views_for(self.objects.format())
                    .find(|x| x.name == *v)
                    .ok_or_else(|| not_found(path))?;
                Place::View(chunk(c)?, view)
            }
            [d, n] if kind(d).is_some() => {
                Place::Holder(kind(d).ok_or_else(|| not_found(path))?, n)
            }
            [d, n, INVENTORY] if kind(d).is_some() => {
                Place::Inventory(kind(d).ok_or_else(|| not_found(path))?, n)
            }
            _ => return Err(not_found(path)),
        })
    }

    fn dir_stat(&self, mtime: SystemTime) -> Stat {
        Stat::dir(mtime, false)
    }

    fn file_stat(&self, size: usize, mtime: SystemTime) -> Stat {
        Stat::file(size as u64, mtime, false)
    }

    fn world_files(&self) -> Result<&FolderFiles> {
        self.files
            .as_ref()
            .ok_or_else(|| Error::not_found("a .scworld file has no world folder"))
    }

    /// Every inventory file derived from `info`, by tree path, rendered.
    fn inventory_files(&self, info: &ProjectInfo) -> Vec<(String, Vec<u8>)> {
        let mut out = Vec::new();
        for kind in [HolderKind::Player, HolderKind::Container] {
            for (name, h) in holders(info, kind) {
                out.push((
                    format!("{}/{name}/{INVENTORY}", kind.dir()),
                    views::inventory::render(&h.inventories, self.layout()),
                ));
            }
        }
        out
    }

    /// The rendered inventory file of holder `name` and its mtime.
    fn inventory(&self, kind: HolderKind, name: &str) -> Result<(Vec<u8>, SystemTime)> {
        let p = self.objects.require_project()?;
        let (_, h) = holders(&p.info, kind)
            .into_iter()
            .find(|(n, _)| n == name)
            .ok_or_else(|| Error::not_found(format!("{}/{name}: no such entity", kind.dir())))?;
        let data = views::inventory::render(&h.inventories, self.layout());
        let mtime = self
            .objects
            .mtime_of(&format!("{}/{name}/{INVENTORY}", kind.dir()), &data);
        Ok((data, mtime))
    }

    /// The content hash and mtime of every view of the chunk at `pos`.
    fn view_times(&self, pos: ChunkPos) -> Result<Vec<(&'static str, u64, SystemTime)>> {
        views_for(self.objects.format())
            .map(|v| {
                let (data, mtime) = self.objects.chunk_view(pos, v.name, v.render)?;
                Ok((v.name, content_hash(&data), mtime))
            })
            .collect()
    }

    /// Edits a chunk; the views whose content the edit leaves unchanged keep their mtimes,
    /// so an incremental rsync sends only the changed files.
    fn modify_chunk(
        &self,
        pos: ChunkPos,
        edit: impl FnOnce(&Chunk) -> Result<Chunk>,
    ) -> Result<()> {
        let before = self.view_times(pos)?;
        self.objects.modify_chunk(pos, edit)?;
        let after = self.view_times(pos)?;
        let keep: Vec<(&str, u64, SystemTime)> = before
            .into_iter()
            .zip(after)
            .filter(|((_, h0, t0), (_, h1, t1))| h0 == h1 && t0 != t1)
            .map(|(b, _)| b)
            .collect();
        self.objects.set_view_mtimes(pos, &keep);
        Ok(())
    }

    fn has_project(&self) -> Result<bool> {
        Ok(self.objects.project()?.is_some())
    }

    fn read_place(&self, place: &Place<'_>, path: &TreePath) -> Result<Arc<Vec<u8>>> {
        match place {
            Place::WorldFile => self.world_files()?.read(path),
            Place::Project => Ok(self.objects.require_project()?.xml.clone()),
            Place::View(pos, view) => Ok(self.objects.chunk_view(*pos, view.name, view.render)?.0),
            Place::Inventory(kind, name) => Ok(Arc::new(self.inventory(*kind, name)?.0)),
            Place::Index(at) => index_tree::read(path, self.index_shown(path, at)?),
            _ => Err(Error::is_dir("is a directory")),
        }
    }

    fn chunk_listing(&self, after: u64, sink: &mut dyn FnMut(Entry) -> bool) -> Result<()> {
        let sorted = self.objects.sorted_chunks()?;
        let start = sorted.partition_point(|p| chunk_cookie(*p).map_or(true, |c| c <= after));
        for pos in &sorted[start..] {
            let Some(cookie) = chunk_cookie(*pos) else {
                log::warn!("chunk {pos} lies outside any world; not listed");
                continue;
            };
            if !sink(Entry {
                name: pos.to_string(),
                cookie,
                stat: self.dir_stat(base_time()),
            }) {
                break;
            }
        }
        Ok(())
    }

    /// The root folder: Project.xml, `chunks`, the holder folders, the world's other files.
    fn root_entries(&self) -> Result<Vec<Entry>> {
        let mut entries = Vec::new();
        let project = self.objects.project()?;
        if let Some(p) = &project {
            entries.push(Entry {
                name: PROJECT.into(),
                cookie: 1,
                stat: self.file_stat(p.xml.len(), p.mtime),
            });
        }
        entries.push(Entry {
            name: "chunks".into(),
            cookie: 2,
            stat: self.dir_stat(base_time()),
        });
        if project.is_some() {
            for (cookie, kind) in [(3, HolderKind::Container), (4, HolderKind::Player)] {
                entries.push(Entry {
                    name: kind.dir().into(),
                    cookie,
                    stat: self.dir_stat(base_time()),
                });
            }
        }
        if let Some(files) = &self.files {
            entries.extend(files.entries(&[], 5)?);
        }
        Ok(entries)
    }
}

impl Tree for SurvivalcraftTree {
    /// The world folder for the root; the terrain store (`Regions/` or `Chunks*.dat`) for
    /// `chunks/` and `index/`; the project file for what it holds; a packed world's
    /// `.scworld` for everything.
    fn source_files(&self, top: Option<&str>) -> &[PathBuf] {
        let Some(top) = top else {
            return std::slice::from_ref(&self.source);
        };
        if self.archive.is_some() {
            return std::slice::from_ref(&self.source);
        }
        if top == "chunks" {
            return std::slice::from_ref(&self.terrain_and_project[0]);
        }
        if top == index::INDEX {
            return &self.terrain_and_project;
        }
        if matches!(self.place(&[top.to_string()]), Ok(Place::WorldFile)) {
            return &[];
        }
        std::slice::from_ref(&self.terrain_and_project[1])
    }

    /// Changes are committed at once; the mtime records waiting are written.
    fn sync(&self) -> Result<()> {
        self.objects.flush_times();
        Ok(())
    }

    fn stat(&self, path: &TreePath) -> Result<Stat> {
        let place = self.place(path)?;
        match &place {
            Place::Root | Place::Chunks => Ok(self.dir_stat(base_time())),
            Place::WorldFile => self.world_files()?.stat(path),
            Place::Project => {
                let p = self.objects.require_project()?;
                Ok(self.file_stat(p.xml.len(), p.mtime))
            }
            Place::Chunk(pos) => {
                if !self.objects.contains(*pos)? {
                    return Err(not_found(path));
                }
                Ok(self.dir_stat(base_time()))
            }
            Place::View(pos, view) => {
                let (data, mtime) = self.objects.chunk_view(*pos, view.name, view.render)?;
                Ok(self.file_stat(data.len(), mtime))
            }
            Place::Holders(_) => {
                if !self.has_project()? {
                    return Err(not_found(path));
                }
                Ok(self.dir_stat(base_time()))
            }
            Place::Holder(kind, name) => {
                let (_, mtime) = self.inventory(*kind, name)?;
                Ok(self.dir_stat(mtime))
            }
            Place::Inventory(kind, name) => {
                let (data, mtime) = self.inventory(*kind, name)?;
                Ok(self.file_stat(data.len(), mtime))
            }
            Place::Index(at) => Ok(index_tree::stat(&self.index_shown(path, at)?, |t| {
                self.dir_stat(t)
            })),
        }
    }

    fn list(&self, dir: &TreePath, after: u64, sink: &mut dyn FnMut(Entry) -> bool) -> Result<()> {
        match self.place(dir)? {
            Place::Root => {
                stream(self.root_entries()?, after, sink);
                Ok(())
            }
            Place::Chunks => self.chunk_listing(after, sink),
            Place::WorldFile => self.world_files()?.list(dir, 1, after, sink),
            Place::Chunk(pos) => {
                let mut entries = Vec::new();
                for (i, v) in views_for(self.objects.format()).enumerate() {
                    let (data, mtime) = self.objects.chunk_view(pos, v.name, v.render)?;
                    entries.push(Entry {
                        name: v.name.into(),
                        cookie: i as u64 + 1,
                        stat: self.file_stat(data.len(), mtime),
                    });
                }
                stream(entries, after, sink);
                Ok(())
            }
            Place::Holders(kind) => {
                let p = self.objects.require_project()?;
                let entries = holders(&p.info, kind)
                    .into_iter()
                    .enumerate()
                    .map(|(i, (name, h))| {
                        let data = views::inventory::render(&h.inventories, self.layout());
                        let mtime = self
                            .objects
                            .mtime_of(&format!("{}/{name}/{INVENTORY}", kind.dir()), &data);
                        Entry {
                            name,
                            cookie: i as u64 + 1,
                            stat: self.dir_stat(mtime),
                        }
                    })
                    .collect();
                stream(entries, after, sink);
                Ok(())
            }
            Place::Index(at) => self.index_list(&at, after, sink),
            Place::Holder(kind, name) => {
                let (data, mtime) = self.inventory(kind, name)?;
                stream(
                    vec![Entry {
                        name: INVENTORY.into(),
                        cookie: 1,
                        stat: self.file_stat(data.len(), mtime),
                    }],
                    after,
                    sink,
                );
                Ok(())
            }
            _ => Err(Error::not_dir("not a directory")),
        }
    }

    fn read(&self, path: &TreePath) -> Result<Arc<Vec<u8>>> {
        let place = self.place(path)?;
        self.read_place(&place, path)
    }

    fn write(&self, path: &TreePath, data: &[u8]) -> Result<()> {
        let renders = |info: &ProjectInfo| self.inventory_files(info);
        match self.place(path)? {
            Place::WorldFile => self.world_files()?.write(path, data),
            Place::Project => self.objects.modify_project(|_| Ok(data.to_vec()), renders),
            Place::View(pos, view) => self.modify_chunk(pos, |c| (view.parse)(c, data)),
            Place::Inventory(kind, name) => {
                let inventories = views::inventory::parse(data)?;
                self.objects.modify_project(
                    |p| {
                        let (_, h) = holders(&p.info, kind)
                            .into_iter()
                            .find(|(n, _)| *n == name)
                            .ok_or_else(|| not_found(path))?;
                        project::write_inventories(&p.xml, &h.entity_id, &inventories)
                    },
                    renders,
                )
            }
            Place::Index(_) => Err(index_tree::read_only(INDEX_RENAMES)),
            _ => Err(Error::is_dir("is a directory")),
        }
    }

    fn check(&self, path: &TreePath, data: &[u8]) -> Result<()> {
        match self.place(path)? {
            Place::WorldFile => Ok(()),
            Place::Project => project::read(data)
                .map(drop)
                .map_err(|e| Error::invalid(e.message())),
            Place::View(pos, view) => (view.parse)(&self.objects.chunk(pos)?.chunk, data).map(drop),
            Place::Inventory(..) => views::inventory::parse(data).map(drop),
            Place::Index(_) => Err(index_tree::read_only(INDEX_RENAMES)),
            _ => Err(Error::is_dir("is a directory")),
        }
    }

    fn writable_at(&self, path: &TreePath) -> Result<()> {
        match path.first() {
            Some(top) if top == index::INDEX => Err(index_tree::read_only(INDEX_RENAMES)),
            _ => Ok(()),
        }
    }

    fn classify(&self, dir: &TreePath, name: &str) -> Result<NewFile> {
        Ok(match self.place(dir)? {
            Place::Root
                if self.files.is_some()
                    && !looks_like_scratch(name)
                    && !hidden_world_file(name)
                    && !matches!(name, "chunks" | "players" | "containers") =>
            {
                NewFile::Object
            }
            Place::Chunk(_) if views_for(self.objects.format()).any(|v| v.name == name) => {
                NewFile::Object
            }
            Place::Holder(..) if name == INVENTORY => NewFile::Object,
            // The target of a rename of a block or an item (`mv index/items/A index/items/B`).
            Place::Index(index::At::Folder(_)) => NewFile::Object,
            Place::WorldFile if !looks_like_scratch(name) => NewFile::Object,
            _ => NewFile::Scratch,
        })
    }

    fn remove(&self, path: &TreePath) -> Result<()> {
        match self.place(path)? {
            Place::WorldFile => self.world_files()?.remove(path),
            // Every other file refuses.
            _ => self.check_remove(path).map(drop),
        }
    }

    fn check_remove(&self, path: &TreePath) -> Result<Removal> {
        match self.place(path)? {
            Place::WorldFile => self
                .world_files()?
                .check_remove(path)
                .map(|()| Removal::AtOnce),
            Place::Index(_) => Err(index_tree::read_only(INDEX_RENAMES)),
            Place::Project | Place::View(..) | Place::Inventory(..) => {
                Err(Error::not_permitted(format!(
                    "{}: cannot be removed (write it to change it)",
                    path.join("/")
                )))
            }
            _ => Err(Error::is_dir("is a directory")),
        }
    }

    fn mkdir(&self, path: &TreePath) -> Result<()> {
        match self.place(path)? {
            Place::Chunk(pos) => self.objects.create_chunk(pos),
            Place::WorldFile => self.world_files()?.mkdir(path),
            Place::Index(_) => Err(index_tree::read_only(INDEX_RENAMES)),
            _ => Err(Error::not_permitted(format!(
                "{}: folders here are fixed (chunks/CX,CZ and the world folder's own folders can be created)",
                path.join("/")
            ))),
        }
    }

    fn rmdir(&self, path: &TreePath) -> Result<()> {
        match self.place(path)? {
            Place::WorldFile => self.world_files()?.rmdir(path),
            Place::Index(_) => Err(index_tree::read_only(INDEX_RENAMES)),
            _ => Err(Error::not_permitted(format!(
                "{}: cannot be removed (Survivalcraft chunk files have no way to drop a chunk)",
                path.join("/")
            ))),
        }
    }

    fn rename(&self, from: &TreePath, to: &TreePath) -> Result<()> {
        if from.first().map(String::as_str) == Some(index::INDEX) {
            return self.index_rename(from, to);
        }
        match (self.place(from)?, self.place(to)?) {
            (Place::WorldFile, Place::WorldFile) => self.world_files()?.rename(from, to),
            _ => Err(Error::new(
                libc::EXDEV,
                "only the world folder's plain files can be renamed",
            )),
        }
    }

    fn set_mtime(&self, path: &TreePath, mtime: SystemTime) -> Result<()> {
        match self.place(path)? {
            Place::Root | Place::Chunks | Place::Chunk(_) | Place::Holders(_) | Place::Index(_) => {
                Ok(())
            }
            Place::Holder(kind, name) => self.inventory(kind, name).map(|_| ()),
            Place::WorldFile => self.world_files()?.set_mtime(path, mtime),
            Place::Project => self.objects.set_project_mtime(mtime),
            Place::View(pos, view) => {
                let (data, _) = self.objects.chunk_view(pos, view.name, view.render)?;
                self.objects
                    .set_view_mtimes(pos, &[(view.name, content_hash(&data), mtime)]);
                Ok(())
            }
            Place::Inventory(kind, name) => {
                let (data, _) = self.inventory(kind, name)?;
                self.objects.set_mtime_of(
                    &format!("{}/{name}/{INVENTORY}", kind.dir()),
                    &data,
                    mtime,
                );
                Ok(())
            }
        }
    }

    fn set_perm(&self, path: &TreePath, perm: u16) -> Result<()> {
        match self.place(path)? {
            Place::WorldFile => self.world_files()?.set_perm(path, perm),
            _ => Ok(()),
        }
    }

    fn set_owner(&self, path: &TreePath, owner: Owner) -> Result<()> {
        match self.place(path)? {
            Place::WorldFile => self.world_files()?.set_owner(path, owner),
            _ => Ok(()),
        }
    }

    fn read_only(&self) -> bool {
        self.read_only
    }

    /// A change to a chunk's file changes its other views; one to the project or a holder
    /// (both stored in the project file) may change any of them, and a rename under
    /// `index/` chunks all over the world.
    fn change_scope(&self, path: &TreePath) -> usize {
        if path.first().map(String::as_str) == Some(index::INDEX) {
            return 0;
        }
        match self.place(path) {
            Ok(Place::View(..) | Place::Chunk(_)) => 2,
            Ok(Place::WorldFile) => path.len(),
            _ => 0,
        }
    }

    fn underneath(&self) -> Option<u64> {
        Some(self.objects.underneath())
    }

    /// A packed world says how to unpack it to edit it.
    fn read_only_error(&self) -> Error {
        match &self.archive {
            Some(a) => Error::read_only(unpack_hint(a)),
            None => Error::read_only("the mount is read-only"),
        }
    }

    fn readlink(&self, path: &TreePath) -> Result<Vec<u8>> {
        match self.place(path)? {
            Place::WorldFile => self.world_files()?.readlink(path),
            Place::Index(at) => index_tree::readlink(path, self.index_shown(path, &at)?),
            _ => Err(not_a_link(path)),
        }
    }

    fn symlink(&self, path: &TreePath, target: &[u8]) -> Result<()> {
        match self.place(path)? {
            Place::WorldFile => self.world_files()?.symlink(path, target),
            _ => Err(no_link_here(path)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_cookies_follow_position_order_within_bounds() {
        let positions = [
            ChunkPos::new(-(1 << 30), -(1 << 30)),
            ChunkPos::new(-5, 7),
            ChunkPos::new(-5, 8),
            ChunkPos::new(0, -1),
            ChunkPos::new(0, 0),
            ChunkPos::new((1 << 30) - 1, (1 << 30) - 1),
        ];
        let cookies: Vec<u64> = positions
            .iter()
            .map(|p| chunk_cookie(*p).unwrap())
            .collect();
        assert!(cookies.windows(2).all(|w| w[0] < w[1]), "{cookies:?}");
        assert_eq!(cookies[0], 1);
        assert_eq!(*cookies.last().unwrap(), MAX_TREE_COOKIE);
        assert_eq!(chunk_cookie(ChunkPos::new(1 << 30, 0)), None);
        assert_eq!(chunk_cookie(ChunkPos::new(0, i32::MIN)), None);
    }

    #[test]
    fn stored_terrain_and_worldfs_files_are_hidden() {
        for n in [
            "Project.xml",
            "Chunks.dat",
            "Chunks32h.dat",
            "Chunks.dat.worldfs-journal",
            ".Project.xml.worldfs-tmp",
        ] {
            assert!(hidden_world_file(n), "{n}");
        }
        for n in ["Project.bak", "Project.json", "notes.txt"] {
            assert!(!hidden_world_file(n), "{n}");
        }
    }
}
