//! `auth.db`: the auth entries of a world kept in LevelDB (`auth_backend = leveldb`).
//!
//! As the engine's `AuthDatabaseLevelDB` (`src/database/database-leveldb.cpp`): one record
//! per player, keyed by the name, in the binary form of
//! [`leveldb_records`](crate::luanti::codec::leveldb_records). An edited `auth.txt` is
//! applied as one LevelDB write batch: every entry of it is stored old or new together.

use std::path::Path;

use crate::error::{Error, Result};
use crate::luanti::codec::auth_line::AuthEntry;
use crate::luanti::codec::leveldb_records::{decode_auth, encode_auth};
use crate::luanti::store::auth::AuthBackend;
use crate::luanti::store::auth::{diff, AuthChanges};
use crate::luanti::store::leveldb::Db;
use crate::luanti::store::token;

/// An open `auth.db`.
pub struct LevelDbAuth {
    db: Db,
    read_only: bool,
}

impl LevelDbAuth {
    /// Opens the database, creating it when `create` (as the engine would on start).
    pub fn open(path: &Path, read_only: bool, create: bool) -> Result<LevelDbAuth> {
        Ok(LevelDbAuth {
            db: Db::open(path, create)?,
            read_only,
        })
    }

    /// The names, sizes and modification times of the database's files, which change with
    /// every write (LevelDB appends each one to its log): a token of its content that costs
    /// a listing of a few files, also where the database was written while this store had
    /// it closed (a reopen after a failure, files copied in by a restore).
    pub fn stamp(&self) -> Option<u64> {
        use std::hash::{Hash, Hasher};
        use std::os::unix::fs::MetadataExt;
        let mut files: Vec<(std::ffi::OsString, u64, i64, i64)> = std::fs::read_dir(self.db.path())
            .ok()?
            .flatten()
            .filter_map(|e| {
                let m = e.metadata().ok()?;
                Some((e.file_name(), m.size(), m.mtime(), m.mtime_nsec()))
            })
            .collect();
        files.sort();
        let mut h = std::collections::hash_map::DefaultHasher::new();
        files.hash(&mut h);
        Some(h.finish())
    }
}

impl AuthBackend for LevelDbAuth {
    fn backend(&self) -> &'static str {
        "leveldb"
    }

    fn version(&self) -> Option<u64> {
        self.stamp().map(token)
    }

    /// Every entry, sorted by name (LevelDB's order).
    fn entries(&self) -> Result<Vec<AuthEntry>> {
        let mut out = Vec::new();
        let path = self.db.path();
        self.db.scan(None, true, |key, value| {
            let name = std::str::from_utf8(key).map_err(|_| {
                Error::corrupt(format!("{}: a key that is not UTF-8", path.display()))
            })?;
            let entry = decode_auth(name, value.unwrap_or_default())
                .map_err(|e| e.context(format!("{}: {name:?}", path.display())))?;
            entry
                .validate()
                .map_err(|m| Error::corrupt(format!("{}: {name:?}: {m}", path.display())))?;
            out.push(entry);
            Ok(true)
        })?;
        Ok(out)
    }

    /// Applies the edited list of entries (already parsed and checked) in one write batch.
    fn apply(&mut self, edited: &[AuthEntry]) -> Result<AuthChanges> {
        if self.read_only {
            return Err(Error::read_only("the mount is read-only"));
        }
        let changes = diff(&self.entries()?, edited);
        let mut records = Vec::new();
        for entry in edited {
            if changes.added.contains(&entry.name) || changes.changed.contains(&entry.name) {
                records.push((entry.name.as_bytes(), Some(encode_auth(entry)?)));
            }
        }
        let mut writes: Vec<(&[u8], Option<&[u8]>)> = changes
            .removed
            .iter()
            .map(|name| (name.as_bytes(), None))
            .collect();
        writes.extend(records.iter().map(|(k, v)| (*k, v.as_deref())));
        if !writes.is_empty() {
            self.db.write(&writes)?;
        }
        Ok(changes)
    }
}
