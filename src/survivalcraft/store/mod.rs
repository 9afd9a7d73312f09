//! Survivalcraft worlds as stores: a world folder (read/write) or a `.scworld` file (a ZIP,
//! read-only).
//!
//! [`World::open`] finds the terrain format (spec §0, §9), reads only the chunk directories
//! and decodes nothing. Chunks are read as raw stored bytes ([`World::read_raw`]) and
//! decoded on demand ([`World::read_chunk`]); [`World::commit_chunks`] writes a set of
//! changed chunks crash-safely and never touches the bytes of any other chunk;
//! [`World::commit_project`] replaces Project.xml by rename.

mod blob;
mod durable;
mod fixed_file;
mod regions;

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::storekit::replace::{open_no_follow, remove_leftovers, write_atomic};
use crate::survivalcraft::codec;
use crate::survivalcraft::codec::chunk::{Chunk, ChunkPos};
use crate::survivalcraft::codec::format::TerrainFormat;
use blob::{Archive, Blob};
use fixed_file::FixedFile;
use regions::RegionStore;

/// Mode of a Project.xml worldfs creates (less the umask).
const NEW_FILE_MODE: u32 = 0o644;

/// Largest Project.xml read (real ones are tens of kilobytes).
const MAX_PROJECT_BYTES: u64 = 16 << 20;

enum Terrain {
    Fixed(FixedFile),
    Regions(RegionStore),
}

/// An opened world.
pub struct World {
    /// The world folder; `None` for a `.scworld` file.
    folder: Option<PathBuf>,
    read_only: bool,
    format: TerrainFormat,
    terrain: Terrain,
    project: Option<Blob>,
}

/// The game version a project file names: `<Project … Version="2.2">` in `Project.xml`,
/// `"Version":["string","2.4"]` in `Project.json`.
fn project_version(head: &[u8]) -> Option<String> {
    let text = match std::str::from_utf8(head.get(..head.len().min(4096))?) {
        Ok(t) => t,
        Err(e) => std::str::from_utf8(head.get(..e.valid_up_to())?).ok()?,
    };
    if let Some(tag_start) = text.find("<Project") {
        let tag = &text[tag_start..tag_start + text[tag_start..].find('>')?];
        let v = tag.find(" Version=\"")? + " Version=\"".len();
        return Some(tag[v..v + tag[v..].find('"')?].to_string());
    }
    let key = "\"Version\":[\"string\",\"";
    let v = text.find(key)? + key.len();
    Some(text[v..v + text[v..].find('"')?].to_string())
}

/// The project file a world folder's terrain format is chosen by: its name (for messages)
/// and its first bytes.
type ProjectHead<'a> = Option<(&'a str, &'a [u8])>;

fn choose(
    candidates: &[TerrainFormat],
    project: ProjectHead<'_>,
    what: &Path,
) -> Result<TerrainFormat> {
    let version = project.and_then(|(_, head)| project_version(head));
    let by_version = version.as_deref().and_then(TerrainFormat::for_game_version);
    match (candidates, by_version) {
        ([only], _) => Ok(*only),
        ([], Some(f)) => Ok(f),
        (many, Some(f)) if many.contains(&f) => Ok(f),
        // No terrain and a project file naming no version: garbage, or not a Survivalcraft
        // project at all (a mistyped path), which must not mount as an empty world.
        ([], None) if project.is_some() && version.is_none() => {
            let name = project.map_or("Project.xml", |(n, _)| n);
            Err(Error::unsupported(format!(
                "{}: {name}: names no game version (not a Survivalcraft project file?); a \
                 folder without terrain mounts only with one",
                what.display()
            )))
        }
        // A restore into a folder holding the project file alone, of a version worldfs
        // does not know (a fork's "SCNET-1"): the newest games' region files.
        ([], None) if project.is_some_and(|(_, h)| !names_old_game(h)) => {
            log::warn!(
                "{}: no terrain yet and the project file names no game version worldfs knows: \
                 new chunks go to Regions/ (the format of 2.3 and later)",
                what.display()
            );
            Ok(TerrainFormat::Regions)
        }
        ([], None) => Err(Error::unsupported(format!(
            "{}: no terrain (Chunks.dat, Chunks32.dat, Chunks32h.dat or Regions/) and no project file of 1.4 or later",
            what.display()
        ))),
        (many, _) => Err(Error::unsupported(format!(
            "{}: several terrain stores ({many:?}) and Project.xml's version does not say which is current",
            what.display()
        ))),
    }
}

/// Whether a project file names a game version before 1.4 (its `Chunks/` folders are not
/// supported).
fn names_old_game(head: &[u8]) -> bool {
    project_version(head).is_some_and(|v| {
        let mut parts = v.trim().split('.');
        let major = parts.next().and_then(|p| p.parse::<u32>().ok());
        let minor = parts.next().unwrap_or("0").parse::<u32>().ok();
        matches!((major, minor), (Some(0), _) | (Some(1), Some(0..=3)))
    })
}

/// The first bytes of `Project.json` (a world without `Project.xml`), for its version.
fn json_head(root: &Path) -> Result<Option<Vec<u8>>> {
    match open_no_follow(&root.join("Project.json"), false) {
        Ok(f) => Ok(Some(Blob::File(f).head(4096)?)),
        Err(e) if e.errno() == libc::ENOENT => Ok(None),
        Err(e) => Err(e),
    }
}

/// The name of a fixed-size chunk file renamed to `.old` in `root`, if any. The game's
/// 2.1→2.2 and 2.2→2.3 converters rename `Chunks32.dat` and `Chunks32h.dat` so once the new
/// store is written, and delete the `.old` file only when the whole conversion is done
/// (spec §0; on an error they rename it back, see the spec's sources): without a current store beside it, the
/// world's terrain is all in the `.old` file. `Chunks.dat.old`, which the game does not make
/// (its 1.28→1.29 converter deletes `Chunks.dat`), would be hidden alike.
fn renamed_store(root: &Path) -> Option<String> {
    [
        TerrainFormat::Chunks32h,
        TerrainFormat::Chunks32,
        TerrainFormat::Chunks16,
    ]
    .iter()
    .filter_map(|f| f.file_name())
    .map(|name| format!("{name}.old"))
    .find(|old| root.join(old).symlink_metadata().is_ok())
}

/// Whether `dir` looks like a Survivalcraft world folder: a project file. Terrain is not
/// needed: a restore starts from the backup's `Project.xml` alone, whose game version says
/// which terrain store the first new chunk creates (opening refuses a project file naming
/// no version when there is no terrain, and terrain kinds worldfs cannot open).
pub fn is_world_folder(dir: &Path) -> bool {
    ["Project.xml", "Project.json"]
        .iter()
        .any(|n| dir.join(n).is_file())
}

/// Whether `file` is a `.scworld`: a ZIP archive with a Project.xml in it.
pub fn is_scworld(file: &Path) -> bool {
    let Ok(f) = File::open(file) else {
        return false;
    };
    let mut magic = [0u8; 4];
    if std::io::Read::read_exact(&mut &f, &mut magic).is_err() || &magic != b"PK\x03\x04" {
        return false;
    }
    zip::ZipArchive::new(f).is_ok_and(|z| {
        z.file_names()
            .any(|n| n.rsplit('/').next() == Some("Project.xml"))
    })
}

impl World {
    /// Opens a world folder, or a `.scworld` file (always read-only).
    pub fn open(path: &Path, read_only: bool) -> Result<World> {
        let meta = fs::metadata(path).map_err(|e| Error::from(e).context(path.display()))?;
        if meta.is_dir() {
            Self::open_folder(path, read_only)
        } else {
            Self::open_archive(path).map_err(|e| e.context(path.display()))
        }
    }

    fn open_folder(root: &Path, read_only: bool) -> Result<World> {
        let writable = !read_only;
        let project_path = root.join("Project.xml");
        if writable {
            remove_leftovers(&project_path)?;
        }
        let project = match open_no_follow(&project_path, false) {
            Ok(f) => Some(Blob::File(f)),
            Err(e) if e.errno() == libc::ENOENT => None,
            Err(e) => return Err(e),
        };
        let head = match &project {
            Some(b) => Some(("Project.xml", b.head(4096)?)),
            None => json_head(root)?.map(|h| ("Project.json", h)),
        };
        let mut candidates = Vec::new();
        if root.join("Regions").is_dir() {
            candidates.push(TerrainFormat::Regions);
        }
        for f in [
            TerrainFormat::Chunks32h,
            TerrainFormat::Chunks32,
            TerrainFormat::Chunks16,
        ] {
            if root.join(f.file_name().unwrap_or_default()).is_file() {
                candidates.push(f);
            }
        }
        if candidates.is_empty() && root.join("Chunks32fs.dat").exists() {
            return Err(
                Error::unsupported("Chunks32fs.dat (SingleFileStorage) is not supported")
                    .context(root.display()),
            );
        }
        if candidates.is_empty() && root.join("Chunks").is_dir() {
            return Err(Error::unsupported(
                "1.0-1.3 Chunks/ folders are not supported; open the world in 1.4+ once",
            )
            .context(root.display()));
        }
        if candidates.is_empty() {
            if let Some(old) = renamed_store(root) {
                return Err(Error::unsupported(format!(
                    "{old} but no current terrain store: the world looks half-converted (the \
                     game renames its old store to .old while it converts a world to a newer \
                     version, and back when the conversion fails); worldfs does not read .old \
                     stores and would show an empty world"
                ))
                .context(root.display()));
            }
        }
        let format = choose(
            &candidates,
            head.as_ref().map(|(name, h)| (*name, h.as_slice())),
            root,
        )?;
        let terrain = match format.file_name() {
            Some(name) => Terrain::Fixed(FixedFile::open(format, &root.join(name), writable)?),
            None => Terrain::Regions(RegionStore::open(&root.join("Regions"), writable)?),
        };
        Ok(World {
            folder: Some(root.to_path_buf()),
            read_only,
            format,
            terrain,
            project,
        })
    }

    fn open_archive(path: &Path) -> Result<World> {
        let zip = zip::ZipArchive::new(File::open(path)?).map_err(|e| {
            Error::unsupported(format!("not a world folder or a .scworld (ZIP) file: {e}"))
        })?;
        let names: Vec<String> = zip.file_names().map(str::to_string).collect();
        let archive: Archive = Arc::new(Mutex::new(zip));
        let project_name = names
            .iter()
            .filter(|n| n.rsplit('/').next() == Some("Project.xml"))
            .min_by_key(|n| n.len())
            .cloned();
        let prefix = project_name
            .as_deref()
            .map_or("", |n| &n[..n.len() - "Project.xml".len()])
            .to_string();
        let project = match &project_name {
            Some(n) => Some(Blob::entry(&archive, n)?),
            None => None,
        };
        let head = match &project {
            Some(b) => Some(b.head(4096)?),
            None => None,
        };
        let rel = |n: &str| n.strip_prefix(prefix.as_str()).map(str::to_string);
        let mut candidates = Vec::new();
        if names.iter().filter_map(|n| rel(n)).any(|r| {
            let base = r.strip_prefix("Regions/").unwrap_or(&r);
            codec::region::region_coords(base).is_some()
        }) {
            candidates.push(TerrainFormat::Regions);
        }
        for f in [
            TerrainFormat::Chunks32h,
            TerrainFormat::Chunks32,
            TerrainFormat::Chunks16,
        ] {
            if names.iter().any(|n| rel(n).as_deref() == f.file_name()) {
                candidates.push(f);
            }
        }
        let format = choose(
            &candidates,
            head.as_deref().map(|h| ("Project.xml", h)),
            path,
        )?;
        let terrain = match format.file_name() {
            Some(name) => {
                let full = format!("{prefix}{name}");
                if names.contains(&full) {
                    Terrain::Fixed(
                        FixedFile::in_archive(format, Blob::entry(&archive, &full)?)
                            .map_err(|e| e.context(&full))?,
                    )
                } else {
                    Terrain::Fixed(FixedFile::open(format, Path::new(""), false)?)
                }
            }
            None => Terrain::Regions(RegionStore::in_archive(&archive, &names, &prefix)?),
        };
        Ok(World {
            folder: None,
            read_only: true,
            format,
            terrain,
            project,
        })
    }

    /// The terrain format.
    pub fn format(&self) -> TerrainFormat {
        self.format
    }

    /// Whether commits are refused (read-only mount or a `.scworld` file).
    pub fn read_only(&self) -> bool {
        self.read_only
    }

    /// The journals a crash left in the world folder, each with whether it is sealed (its
    /// commit is pending: the files may hold part of it until a read-write open finishes
    /// it) or torn (its commit never happened; the next read-write open drops it).
    pub fn left_journals(&self) -> Result<Vec<(PathBuf, bool)>> {
        let Some(folder) = &self.folder else {
            return Ok(Vec::new());
        };
        let store = match self.format.file_name() {
            Some(name) => folder.join(name),
            None => folder.join("Regions"),
        };
        let journal = durable::journal_path(&store);
        Ok(durable::left_journal(&journal)?
            .map(|sealed| (journal, sealed))
            .into_iter()
            .collect())
    }

    /// The world folder, `None` for a `.scworld` file.
    pub fn folder(&self) -> Option<&Path> {
        self.folder.as_deref()
    }

    /// Every stored chunk, in directory order (fixed files) or region/slot order.
    pub fn chunks(&self) -> Vec<ChunkPos> {
        match &self.terrain {
            Terrain::Fixed(f) => f.chunks().collect(),
            Terrain::Regions(r) => r.chunks().collect(),
        }
    }

    /// Whether a chunk is stored.
    pub fn contains(&self, pos: ChunkPos) -> bool {
        match &self.terrain {
            Terrain::Fixed(f) => f.contains(pos),
            Terrain::Regions(r) => r.contains(pos),
        }
    }

    /// A chunk's stored bytes: the whole record (fixed files) or the compressed payload
    /// (region files). Stable while the chunk is unchanged (for sizes, mtimes, caches).
    pub fn read_raw(&self, pos: ChunkPos) -> Result<Vec<u8>> {
        match &self.terrain {
            Terrain::Fixed(f) => f.read_raw(pos),
            Terrain::Regions(r) => r.read_raw(pos),
        }
        .map_err(|e| e.context(format!("chunk {pos}")))
    }

    /// Reads and decodes a chunk.
    pub fn read_chunk(&self, pos: ChunkPos) -> Result<Chunk> {
        codec::decode_chunk(self.format, &self.read_raw(pos)?)
            .map_err(|e| e.context(format!("chunk {pos}")))
    }

    /// Writes changed (or new) chunks crash-safely; a later entry for the same position
    /// wins. Every chunk must be of the world's format.
    pub fn commit_chunks(&mut self, changes: &[(ChunkPos, &Chunk)]) -> Result<()> {
        if self.read_only {
            return Err(Error::read_only("the world is opened read-only"));
        }
        let mut encoded: Vec<(ChunkPos, Vec<u8>)> = Vec::with_capacity(changes.len());
        for (pos, chunk) in changes {
            if chunk.format() != self.format {
                return Err(Error::invalid(format!(
                    "chunk {pos} is {:?}, the world is {:?}",
                    chunk.format(),
                    self.format
                )));
            }
            let bytes =
                codec::encode_chunk(chunk, *pos).map_err(|e| e.context(format!("chunk {pos}")))?;
            encoded.retain(|(p, _)| p != pos);
            encoded.push((*pos, bytes));
        }
        self.commit_encoded(&encoded)
    }

    /// Writes chunks already encoded by [`codec::encode_chunk`] (at most one per position)
    /// in one commit, crash-safely and all or nothing: `Chunks*.dat` through one journal,
    /// region files through one journal of every region rewritten (see [`RegionStore`]).
    pub fn commit_encoded(&mut self, encoded: &[(ChunkPos, Vec<u8>)]) -> Result<()> {
        if self.read_only {
            return Err(Error::read_only("the world is opened read-only"));
        }
        match &mut self.terrain {
            Terrain::Fixed(f) => f.commit(encoded),
            Terrain::Regions(r) => r.commit(encoded),
        }
    }

    /// Edits stored chunks in one commit, all or nothing, holding few in memory: `edit`
    /// gets each chunk of `positions` (its stored bytes and decoded form) and gives its new
    /// form (`None`: left alone). `Chunks*.dat`: each new record goes to the journal at once
    /// (see [`FixedFile::commit_edits`]); regions: the new compressed payloads are held and
    /// committed as [`World::commit_encoded`] does. Returns the changed positions.
    pub fn edit_chunks(
        &mut self,
        positions: &[ChunkPos],
        mut edit: impl FnMut(ChunkPos, &[u8], Chunk) -> Result<Option<Chunk>>,
    ) -> Result<Vec<ChunkPos>> {
        if self.read_only {
            return Err(Error::read_only("the world is opened read-only"));
        }
        let format = self.format;
        let mut changed = Vec::new();
        let mut encoded_edit = |pos: ChunkPos, raw: Vec<u8>| -> Result<Option<Vec<u8>>> {
            let chunk =
                codec::decode_chunk(format, &raw).map_err(|e| e.context(format!("chunk {pos}")))?;
            match edit(pos, &raw, chunk)? {
                Some(new) => {
                    changed.push(pos);
                    codec::encode_chunk(&new, pos)
                        .map(Some)
                        .map_err(|e| e.context(format!("chunk {pos}")))
                }
                None => Ok(None),
            }
        };
        match &mut self.terrain {
            Terrain::Fixed(f) => {
                f.commit_edits(positions, encoded_edit)?;
            }
            Terrain::Regions(r) => {
                let mut encoded = Vec::new();
                for &pos in positions {
                    let raw = r
                        .read_raw(pos)
                        .map_err(|e| e.context(format!("chunk {pos}")))?;
                    if let Some(payload) = encoded_edit(pos, raw)? {
                        encoded.push((pos, payload));
                    }
                }
                r.commit(&encoded)?;
            }
        }
        Ok(changed)
    }

    /// Project.xml's bytes, `None` if the world has none (e.g. a JSON project).
    pub fn project_xml(&self) -> Result<Option<Vec<u8>>> {
        match &self.project {
            Some(b) => Ok(Some(b.read_all(MAX_PROJECT_BYTES)?)),
            None => Ok(None),
        }
    }

    /// Replaces Project.xml (temp file, fsync, rename, fsync folder).
    pub fn commit_project(&mut self, xml: &[u8]) -> Result<()> {
        let root = match (&self.folder, self.read_only) {
            (Some(root), false) => root.clone(),
            _ => return Err(Error::read_only("the world is opened read-only")),
        };
        let target = root.join("Project.xml");
        write_atomic(&target, xml, NEW_FILE_MODE)?;
        self.project = Some(Blob::File(open_no_follow(&target, false)?));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An empty 2.3 world folder (Regions/).
    fn region_world() -> (tempfile::TempDir, PathBuf) {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("w");
        fs::create_dir_all(dir.join("Regions")).unwrap();
        let xml = "<Project Version=\"2.3\"><Entities /></Project>";
        fs::write(dir.join("Project.xml"), xml).unwrap();
        (root, dir)
    }

    /// `worldfs check` on a world whose last commit was cut by a crash after its journal was
    /// sealed: the files may hold part of it (regions), so check says a commit is pending
    /// and fails until a read-write open finishes it; a torn journal is only mentioned.
    #[test]
    fn check_reports_a_commit_left_pending_by_a_crash() {
        use crate::survivalcraft::codec::chunk::Chunk;
        let (_root, regions) = region_world();
        let a = [ChunkPos::new(1, 1), ChunkPos::new(40, -3)];
        let mut w = World::open(&regions, false).unwrap();
        let empty = Chunk::empty(TerrainFormat::Regions);
        w.commit_chunks(&[(a[0], &empty), (a[1], &empty)]).unwrap();
        let report = |dir: &Path| {
            let mut out = Vec::new();
            let code = crate::survivalcraft::inspect::check(dir, &mut out).unwrap();
            (
                code == std::process::ExitCode::SUCCESS,
                String::from_utf8(out).unwrap(),
            )
        };
        assert!(report(&regions).0, "{}", report(&regions).1);
        let journal = durable::journal_path(&regions.join("Regions"));
        let mut j = durable::ReplaceJournal::create(&journal).unwrap();
        j.add(7, None, b"x").unwrap();
        drop(j);
        let (ok, text) = report(&regions);
        assert!(ok, "a torn journal changes nothing: {text}");
        assert!(text.contains("torn"), "{text}");
        let mut j = durable::ReplaceJournal::create(&journal).unwrap();
        j.add(7, None, b"x").unwrap();
        j.seal().unwrap();
        let (ok, text) = report(&regions);
        assert!(!ok, "a pending commit passed: {text}");
        assert!(text.contains("pending"), "{text}");
        assert!(journal.exists(), "check replayed or removed the journal");
    }

    /// A folder without terrain mounts only with a recognisable project file: garbage, a
    /// file in another encoding or one naming no version is refused, naming the file (it
    /// mounted as an empty world whose root then failed with EIO); a project of a version
    /// worldfs does not know still gets `Regions/`.
    #[test]
    fn a_folder_without_terrain_needs_a_project_file_naming_a_version() {
        let root = tempfile::tempdir().unwrap();
        let utf16: Vec<u8> = "<Project Version=\"2.2\">"
            .encode_utf16()
            .flat_map(u16::to_le_bytes)
            .collect();
        let cases: [(&str, &[u8]); 6] = [
            ("Project.xml", b"\x8f\x01garbage\xff\xfe\x00\x13"),
            ("Project.xml", &utf16),
            ("Project.xml", b""),
            ("Project.xml", b"<Project Name=\"a\"><Entities /></Project>"),
            ("Project.json", b"{\"Name\":[\"string\",\"a\"]}"),
            ("Project.json", b"\x00\x01\x02"),
        ];
        for (i, (name, bytes)) in cases.iter().enumerate() {
            let dir = root.path().join(i.to_string());
            fs::create_dir(&dir).unwrap();
            fs::write(dir.join(name), bytes).unwrap();
            for read_only in [true, false] {
                let e = World::open(&dir, read_only)
                    .err()
                    .unwrap_or_else(|| panic!("case {i} ({name}) opened"));
                let text = e.to_string();
                assert!(
                    text.contains(&format!("{name}: names no game version")),
                    "case {i}: {text}"
                );
            }
        }
        let dir = root.path().join("scnet");
        fs::create_dir(&dir).unwrap();
        fs::write(dir.join("Project.xml"), "<Project Version=\"SCNET-1\">").unwrap();
        assert_eq!(
            World::open(&dir, false).unwrap().format(),
            TerrainFormat::Regions
        );
        let dir = root.path().join("json");
        fs::create_dir(&dir).unwrap();
        fs::write(
            dir.join("Project.json"),
            "{\"Version\":[\"string\",\"2.4\"]}",
        )
        .unwrap();
        assert_eq!(
            World::open(&dir, false).unwrap().format(),
            TerrainFormat::Regions
        );
    }

    /// A folder whose terrain store the game renamed to `.old` while converting it, with no
    /// current store beside it, is refused naming the `.old` file (it mounted as an empty
    /// world, hiding every chunk); beside a current store an `.old` file changes nothing.
    #[test]
    fn a_half_converted_world_is_refused() {
        let root = tempfile::tempdir().unwrap();
        for (version, old) in [
            ("2.2", "Chunks32h.dat.old"),
            ("2.2", "Chunks32.dat.old"),
            ("1.29", "Chunks.dat.old"),
        ] {
            let dir = root.path().join(old);
            fs::create_dir(&dir).unwrap();
            fs::write(
                dir.join("Project.xml"),
                format!("<Project Version=\"{version}\"><Entities /></Project>"),
            )
            .unwrap();
            fs::write(dir.join(old), b"chunks").unwrap();
            for read_only in [true, false] {
                let e = World::open(&dir, read_only)
                    .err()
                    .unwrap_or_else(|| panic!("{old}: opened"));
                let text = e.to_string();
                assert!(
                    text.contains(old) && text.contains("half-converted"),
                    "{text}"
                );
            }
            assert_eq!(fs::read(dir.join(old)).unwrap(), b"chunks");
            assert_eq!(fs::read_dir(&dir).unwrap().count(), 2, "{old}: files made");
        }
        let (_root, regions) = region_world();
        fs::write(regions.join("Chunks32h.dat.old"), b"chunks").unwrap();
        assert_eq!(
            World::open(&regions, false).unwrap().format(),
            TerrainFormat::Regions
        );
    }

    #[test]
    fn versions_are_read_from_the_project_tag() {
        assert_eq!(
            project_version(b"<Project Guid=\"x\" Version=\"1.27\">").as_deref(),
            Some("1.27")
        );
        assert_eq!(
            project_version(b"<?xml?>\n<Project Version=\"2.2\" Name=\"a\">").as_deref(),
            Some("2.2")
        );
        assert_eq!(project_version(b"<Project Name=\"a\">"), None);
        assert_eq!(
            project_version(b"\xef\xbb\xbf{\"Version\":[\"string\",\"2.4\"],\"Guid\":[]}")
                .as_deref(),
            Some("2.4")
        );
        assert_eq!(project_version(b"{\"Name\":[\"string\",\"a\"]}"), None);
    }

    #[test]
    fn the_format_is_chosen_from_files_and_version() {
        let p = Path::new("w");
        let v22 = Some(("Project.xml", b"<Project Version=\"2.2\">".as_slice()));
        assert_eq!(
            choose(&[TerrainFormat::Chunks16], None, p).ok(),
            Some(TerrainFormat::Chunks16)
        );
        assert_eq!(choose(&[], v22, p).ok(), Some(TerrainFormat::Chunks32h));
        assert_eq!(
            choose(&[TerrainFormat::Chunks32h, TerrainFormat::Chunks32], v22, p).ok(),
            Some(TerrainFormat::Chunks32h)
        );
        assert!(choose(
            &[TerrainFormat::Chunks32h, TerrainFormat::Chunks32],
            None,
            p
        )
        .is_err());
        assert!(choose(&[], None, p).is_err());
        assert_eq!(
            choose(
                &[],
                Some(("Project.xml", b"<Project Version=\"SCNET-1\">".as_slice())),
                p
            )
            .ok(),
            Some(TerrainFormat::Regions),
            "a project of an unknown version and no terrain: regions"
        );
        assert!(
            choose(
                &[],
                Some(("Project.xml", b"<Project Version=\"1.2\">".as_slice())),
                p
            )
            .is_err(),
            "1.0-1.3 (Chunks/ folders) are not supported"
        );
        assert!(
            choose(
                &[TerrainFormat::Chunks32h, TerrainFormat::Chunks32],
                Some(("Project.xml", b"<Project Version=\"SCNET-1\">".as_slice())),
                p
            )
            .is_err(),
            "an unknown version cannot choose between stores"
        );
    }
}
