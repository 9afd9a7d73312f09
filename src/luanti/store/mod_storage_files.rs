//! The files mod-storage backend: `WORLD/mod_storage/MOD`, one JSON object per mod mapping
//! keys to string values. A change rewrites that mod's file through a temporary file and a
//! rename; the other keys keep their order and their JSON values as stored. The engine reads
//! a non-string value with jsoncpp's `asString()` (numbers and booleans as text, null as
//! empty), and so does this reader.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::luanti::store::mod_storage::{not_found, ModStorageBackend};
use crate::luanti::store::token;
use crate::storekit::replace::{read_no_follow, remove_durably, write_atomic};

/// The mode of a new mod file.
const FILE_MODE: u32 = 0o644;

/// A world's `mod_storage/` folder.
pub struct FilesModStorage {
    dir: PathBuf,
}

impl FilesModStorage {
    /// The backend for `dir` (usually `WORLD/mod_storage`), created on the first write.
    pub fn new(dir: &Path) -> FilesModStorage {
        FilesModStorage {
            dir: dir.to_path_buf(),
        }
    }

    /// The identity, size and modification time of the mod's file (`None` when it cannot
    /// be looked at): the engine and the mount replace the whole file at each write.
    pub fn stamp(&self, modname: &str) -> Option<(u64, u64, u64, i64, i64)> {
        use std::os::unix::fs::MetadataExt;
        match std::fs::symlink_metadata(self.path(modname).ok()?) {
            Ok(m) => Some((m.dev(), m.ino(), m.size(), m.mtime(), m.mtime_nsec())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some((0, 0, 0, 0, 0)),
            Err(_) => None,
        }
    }

    fn path(&self, modname: &str) -> Result<PathBuf> {
        if modname.is_empty() || modname.starts_with('.') || modname.contains(['/', '\0']) {
            return Err(Error::invalid(format!(
                "mod name {modname:?} cannot be a file name in mod_storage/"
            )));
        }
        Ok(self.dir.join(modname))
    }

    /// The mod's JSON object; a mod without a file has none.
    fn load(&self, modname: &str) -> Result<Option<Map<String, Value>>> {
        let path = self.path(modname)?;
        let bytes = match read_no_follow(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.errno() == libc::ENOENT => return Ok(None),
            Err(e) => return Err(e),
        };
        match serde_json::from_slice::<Value>(&bytes) {
            Ok(Value::Object(map)) => Ok(Some(map)),
            Ok(Value::Null) => Ok(Some(Map::new())),
            Ok(_) => Err(Error::corrupt(format!(
                "{}: not a JSON object",
                path.display()
            ))),
            Err(e) => Err(Error::corrupt(format!("{}: {e}", path.display()))),
        }
    }

    fn store(&self, modname: &str, map: &Map<String, Value>) -> Result<()> {
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| Error::from(e).context(self.dir.display()))?;
        let bytes = serde_json::to_vec(map).map_err(|e| Error::invalid(e.to_string()))?;
        write_atomic(&self.path(modname)?, &bytes, FILE_MODE)
    }

    fn set(&mut self, modname: &str, key: &[u8], value: &[u8], exclusive: bool) -> Result<()> {
        let text = |b: &[u8], what: &str| {
            String::from_utf8(b.to_vec()).map_err(|_| {
                Error::invalid(format!(
                    "mod storage {modname}: the files backend stores only UTF-8 text ({what})"
                ))
            })
        };
        let key = text(key, "key")?;
        let value = text(value, "value")?;
        let mut map = self.load(modname)?.unwrap_or_default();
        if exclusive && map.contains_key(&key) {
            return Err(Error::exists(format!(
                "mod storage {modname}: key {key:?} exists"
            )));
        }
        map.insert(key, Value::String(value));
        self.store(modname, &map)
    }
}

impl ModStorageBackend for FilesModStorage {
    fn backend(&self) -> &'static str {
        "files"
    }

    fn version(&self, modname: &str, _key: &[u8]) -> Option<u64> {
        self.stamp(modname).map(token)
    }

    /// Mods that have a file, sorted.
    fn list_mods(&self) -> Result<Vec<String>> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Error::from(e).context(self.dir.display())),
        };
        let mut mods = Vec::new();
        for entry in entries {
            let entry = entry?;
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            if !name.starts_with('.') && entry.file_type()?.is_file() {
                mods.push(name);
            }
        }
        mods.sort();
        Ok(mods)
    }

    /// The keys of one mod, sorted.
    fn list_keys(&self, modname: &str) -> Result<Vec<Vec<u8>>> {
        let mut keys: Vec<Vec<u8>> = self
            .load(modname)?
            .unwrap_or_default()
            .keys()
            .map(|k| k.as_bytes().to_vec())
            .collect();
        keys.sort();
        Ok(keys)
    }

    /// The value of one entry.
    fn read(&self, modname: &str, key: &[u8]) -> Result<Vec<u8>> {
        let map = self.load(modname)?.unwrap_or_default();
        let value = std::str::from_utf8(key)
            .ok()
            .and_then(|k| map.get(k))
            .ok_or_else(|| not_found(modname, key))?;
        Ok(match value {
            Value::String(s) => s.clone().into_bytes(),
            Value::Null => Vec::new(),
            Value::Bool(b) => b.to_string().into_bytes(),
            Value::Number(n) => n.to_string().into_bytes(),
            Value::Array(_) | Value::Object(_) => {
                return Err(Error::corrupt(format!(
                    "mod storage {modname}: the value of {:?} is not a string",
                    String::from_utf8_lossy(key)
                )))
            }
        })
    }

    /// Sets an entry (creating or replacing it).
    fn write(&mut self, modname: &str, key: &[u8], value: &[u8]) -> Result<()> {
        self.set(modname, key, value, false)
    }

    /// Adds an entry that must not exist yet.
    fn create(&mut self, modname: &str, key: &[u8], value: &[u8]) -> Result<()> {
        self.set(modname, key, value, true)
    }

    /// Deletes one entry (the mod's file stays, possibly as `{}`, as the engine leaves it).
    fn delete(&mut self, modname: &str, key: &[u8]) -> Result<()> {
        let mut map = self.load(modname)?.unwrap_or_default();
        let removed = std::str::from_utf8(key)
            .ok()
            .and_then(|k| map.shift_remove(k))
            .is_some();
        if !removed {
            return Err(not_found(modname, key));
        }
        self.store(modname, &map)
    }

    /// Removes the file of a mod that has no entries left (`ENOTEMPTY` while it has some).
    fn remove_mod(&mut self, modname: &str) -> Result<()> {
        match self.load(modname)? {
            None => Ok(()),
            Some(map) if map.is_empty() => remove_durably(&self.path(modname)?),
            Some(_) => Err(Error::not_empty(format!(
                "mod storage {modname}: has entries"
            ))),
        }
    }
}
