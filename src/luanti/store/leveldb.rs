//! A minimal safe binding of the system's LevelDB (`leveldb/c.h` of Debian's `libleveldb`).
//!
//! Why our own binding over the C API: Debian's engine links the same `libleveldb`, so what
//! one writes the other reads (table format, snappy compression, manifest) with no question
//! of compatibility, and the few calls worldfs needs (open, get, an atomic write batch, an
//! iterator seeking a key) are a page of code. The crates that bundle a LevelDB build their
//! own copy of it instead.
//!
//! LevelDB is safe for concurrent use from many threads (one `leveldb_t`); an iterator is
//! used by one thread at a time, which [`Db::scan`] guarantees by keeping it inside the
//! call. LevelDB allows one process per database: [`Db::open`] turns the failure to take its
//! `LOCK` into an error naming that file.
//!
//! A write that fails (a full disk) may leave a torn record at the end of LevelDB's log,
//! and LevelDB appends the next write after it; opening the database later then drops the
//! rest of that log block, writes that had succeeded since included (a restore run again
//! after freeing space lost blocks so, reporting success). So after a failed write [`Db`]
//! closes and reopens the database, whose recovery ends the torn log, before it writes
//! again, and fails every call while it cannot.

use std::ffi::{c_char, c_int, c_uchar, c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{RwLock, RwLockReadGuard};

use crate::error::{Error, Result};

#[allow(non_camel_case_types)]
mod sys {
    use super::{c_char, c_int, c_uchar, c_void};

    pub enum leveldb_t {}
    pub enum leveldb_options_t {}
    pub enum leveldb_readoptions_t {}
    pub enum leveldb_writeoptions_t {}
    pub enum leveldb_writebatch_t {}
    pub enum leveldb_iterator_t {}

    #[link(name = "leveldb")]
    extern "C" {
        pub fn leveldb_open(
            options: *const leveldb_options_t,
            name: *const c_char,
            errptr: *mut *mut c_char,
        ) -> *mut leveldb_t;
        pub fn leveldb_close(db: *mut leveldb_t);
        pub fn leveldb_get(
            db: *mut leveldb_t,
            options: *const leveldb_readoptions_t,
            key: *const c_char,
            keylen: usize,
            vallen: *mut usize,
            errptr: *mut *mut c_char,
        ) -> *mut c_char;
        pub fn leveldb_write(
            db: *mut leveldb_t,
            options: *const leveldb_writeoptions_t,
            batch: *mut leveldb_writebatch_t,
            errptr: *mut *mut c_char,
        );
        pub fn leveldb_create_iterator(
            db: *mut leveldb_t,
            options: *const leveldb_readoptions_t,
        ) -> *mut leveldb_iterator_t;
        pub fn leveldb_iter_destroy(it: *mut leveldb_iterator_t);
        pub fn leveldb_iter_valid(it: *const leveldb_iterator_t) -> c_uchar;
        pub fn leveldb_iter_seek_to_first(it: *mut leveldb_iterator_t);
        pub fn leveldb_iter_seek(it: *mut leveldb_iterator_t, k: *const c_char, klen: usize);
        pub fn leveldb_iter_next(it: *mut leveldb_iterator_t);
        pub fn leveldb_iter_key(it: *const leveldb_iterator_t, klen: *mut usize) -> *const c_char;
        pub fn leveldb_iter_value(it: *const leveldb_iterator_t, vlen: *mut usize)
            -> *const c_char;
        pub fn leveldb_iter_get_error(it: *const leveldb_iterator_t, errptr: *mut *mut c_char);
        pub fn leveldb_writebatch_create() -> *mut leveldb_writebatch_t;
        pub fn leveldb_writebatch_destroy(b: *mut leveldb_writebatch_t);
        pub fn leveldb_writebatch_put(
            b: *mut leveldb_writebatch_t,
            key: *const c_char,
            klen: usize,
            val: *const c_char,
            vlen: usize,
        );
        pub fn leveldb_writebatch_delete(
            b: *mut leveldb_writebatch_t,
            key: *const c_char,
            klen: usize,
        );
        pub fn leveldb_options_create() -> *mut leveldb_options_t;
        pub fn leveldb_options_destroy(o: *mut leveldb_options_t);
        pub fn leveldb_options_set_create_if_missing(o: *mut leveldb_options_t, v: c_uchar);
        pub fn leveldb_options_set_max_open_files(o: *mut leveldb_options_t, n: c_int);
        pub fn leveldb_readoptions_create() -> *mut leveldb_readoptions_t;
        pub fn leveldb_readoptions_destroy(o: *mut leveldb_readoptions_t);
        pub fn leveldb_readoptions_set_fill_cache(o: *mut leveldb_readoptions_t, v: c_uchar);
        pub fn leveldb_writeoptions_create() -> *mut leveldb_writeoptions_t;
        pub fn leveldb_writeoptions_destroy(o: *mut leveldb_writeoptions_t);
        pub fn leveldb_writeoptions_set_sync(o: *mut leveldb_writeoptions_t, v: c_uchar);
        pub fn leveldb_free(ptr: *mut c_void);
    }
}

/// Takes the error string LevelDB allocated, if any.
fn take_error(err: *mut c_char) -> Option<String> {
    if err.is_null() {
        return None;
    }
    // SAFETY: LevelDB hands over a NUL-terminated string allocated with malloc, ours to free.
    let text = unsafe { CStr::from_ptr(err) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: freed once, with LevelDB's own free.
    unsafe { sys::leveldb_free(err.cast()) };
    Some(text)
}

/// One change of a write batch: a value to put, or `None` to delete the key.
pub type Write<'a> = (&'a [u8], Option<&'a [u8]>);

/// A write batch being filled: it copies each key and value put into it (in LevelDB's
/// memory) until [`Db::write_batch`] applies it atomically.
pub struct Batch {
    batch: *mut sys::leveldb_writebatch_t,
}

impl Default for Batch {
    /// An empty batch.
    fn default() -> Batch {
        // SAFETY: a new, empty batch, destroyed once on drop.
        Batch {
            batch: unsafe { sys::leveldb_writebatch_create() },
        }
    }
}

impl Batch {
    /// Puts `value` at `key` (both copied).
    pub fn put(&mut self, key: &[u8], value: &[u8]) {
        // SAFETY: the batch is alive; LevelDB copies the slices during the call.
        unsafe {
            sys::leveldb_writebatch_put(
                self.batch,
                key.as_ptr().cast(),
                key.len(),
                value.as_ptr().cast(),
                value.len(),
            )
        }
    }

    /// Deletes `key` (copied).
    pub fn delete(&mut self, key: &[u8]) {
        // SAFETY: as in `put`.
        unsafe { sys::leveldb_writebatch_delete(self.batch, key.as_ptr().cast(), key.len()) }
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        // SAFETY: made by `leveldb_writebatch_create`, destroyed once.
        unsafe { sys::leveldb_writebatch_destroy(self.batch) }
    }
}

/// An open LevelDB database.
pub struct Db {
    /// The handle: `None` only between closing it after a failed write and a reopen that
    /// succeeded. Calls hold the read lock; only a reopen takes the write lock.
    db: RwLock<Option<Handle>>,
    /// A write failed: reopen before the next write.
    torn: AtomicBool,
    path: PathBuf,
}

/// An open `leveldb_t`, closed when dropped.
struct Handle(*mut sys::leveldb_t);

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: closed once; no iterator outlives a `scan` call, which holds the handle.
        unsafe { sys::leveldb_close(self.0) }
    }
}

// SAFETY: a `leveldb::DB` is documented safe for concurrent access from several threads
// without external synchronisation; iterators never leave the call that made them.
unsafe impl Send for Db {}
// SAFETY: as above.
unsafe impl Sync for Db {}

impl Db {
    /// Opens the database folder `path`, creating it when `create` (as the engine does:
    /// `create_if_missing`). A database another process holds fails with `EBUSY` and a
    /// message naming its `LOCK` file.
    pub fn open(path: &Path, create: bool) -> Result<Db> {
        Ok(Db {
            db: RwLock::new(Some(open_handle(path, create)?)),
            torn: AtomicBool::new(false),
            path: path.to_path_buf(),
        })
    }

    /// Runs `f` with the open handle; when a reopen after a failed write did not succeed
    /// (the disk was still full), tries it again first.
    fn with<R>(&self, f: impl FnOnce(*mut sys::leveldb_t) -> Result<R>) -> Result<R> {
        let read = || -> Result<RwLockReadGuard<'_, Option<Handle>>> {
            self.db
                .read()
                .map_err(|_| self.fail("handle", "poisoned".into()))
        };
        let mut guard = read()?;
        if guard.is_none() {
            drop(guard);
            self.reopen_if_torn()?;
            guard = read()?;
        }
        match guard.as_ref() {
            Some(handle) => f(handle.0),
            None => Err(self.fail(
                "handle",
                "closed after a failed write and not open again yet".into(),
            )),
        }
    }

    /// After a failed write: closes the database and opens it again, so that the next
    /// write starts a new log instead of following a torn record.
    fn reopen_if_torn(&self) -> Result<()> {
        if !self.torn.load(Ordering::SeqCst) {
            return Ok(());
        }
        let mut guard = self
            .db
            .write()
            .map_err(|_| self.fail("handle", "poisoned".into()))?;
        if !self.torn.load(Ordering::SeqCst) {
            return Ok(());
        }
        // Closed first: LevelDB allows one open handle per database.
        *guard = None;
        let handle = open_handle(&self.path, false).map_err(|e| {
            e.context(format!(
                "{}: a write failed earlier, and LevelDB cannot be opened again before the \
                 next one",
                self.path.display()
            ))
        })?;
        *guard = Some(handle);
        self.torn.store(false, Ordering::SeqCst);
        log::info!(
            "{}: LevelDB opened again after a failed write",
            self.path.display()
        );
        Ok(())
    }

    /// The database folder.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Whether the folder `path` is what a creation of a database that was interrupted (a
/// crash, a kill) leaves: no `CURRENT` file, and no table or log holding any data (a
/// manifest, the temporary file `CURRENT` is written to, `LOCK` and `LOG`s may be there).
/// LevelDB writes `CURRENT` at the end of creating a database, so such a folder holds no
/// record, and opening it with `create_if_missing`, as the engine does, creates the database
/// over it. A folder without `CURRENT` that holds data is not one: that is damage, shown as
/// an error (creating over it would delete its tables). Any error reading the folder
/// answers no.
pub fn unfinished_creation(path: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(path) else {
        return false;
    };
    if !matches!(path.join("CURRENT").try_exists(), Ok(false)) {
        return false;
    }
    entries.into_iter().all(|e| {
        let Ok(e) = e else {
            return false;
        };
        let name = e.file_name();
        let name = name.to_string_lossy();
        let holds_data = name.ends_with(".ldb")
            || name.ends_with(".sst")
            || (name.ends_with(".log") && e.metadata().map_or(true, |m| m.len() > 0));
        !holds_data
    })
}

/// Whether opening the database folder `path` may create it: when there is none, or when a
/// creation was interrupted (see [`unfinished_creation`]), asked right before the open.
pub fn may_create(path: &Path) -> bool {
    matches!(std::fs::symlink_metadata(path), Err(e) if e.kind() == std::io::ErrorKind::NotFound)
        || unfinished_creation(path)
}

/// Opens a handle on the database folder `path` (see [`Db::open`]).
fn open_handle(path: &Path, create: bool) -> Result<Handle> {
    let name = CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| Error::invalid(format!("{}: a NUL in the path", path.display())))?;
    let mut err = std::ptr::null_mut();
    // SAFETY: options live until destroyed below; `name` outlives the call.
    let db = unsafe {
        let options = sys::leveldb_options_create();
        sys::leveldb_options_set_create_if_missing(options, c_uchar::from(create));
        // Each open table keeps a descriptor; a mount keeps few.
        sys::leveldb_options_set_max_open_files(options, 64 as c_int);
        let db = sys::leveldb_open(options, name.as_ptr(), &mut err);
        sys::leveldb_options_destroy(options);
        db
    };
    if let Some(e) = take_error(err) {
        let lock = path.join("LOCK");
        if e.contains("lock") || e.contains("LOCK") {
            return Err(Error::new(
                libc::EBUSY,
                format!(
                    "{}: LevelDB allows one process at a time and another one (a running \
                         server?) holds it: stop it first ({e})",
                    lock.display()
                ),
            ));
        }
        return Err(Error::new(
            libc::EIO,
            format!("{}: LevelDB: {e}", path.display()),
        ));
    }
    if db.is_null() {
        return Err(Error::new(
            libc::EIO,
            format!("{}: LevelDB could not open it", path.display()),
        ));
    }
    Ok(Handle(db))
}

impl Db {
    fn fail(&self, what: &str, e: String) -> Error {
        Error::new(
            libc::EIO,
            format!("{}: LevelDB {what}: {e}", self.path.display()),
        )
    }

    /// The value of `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut len = 0usize;
        let mut err = std::ptr::null_mut();
        // SAFETY: the handle is open while `with` runs; the key slice is valid for the call;
        // options destroyed after it.
        let value = self.with(|db| unsafe {
            let options = sys::leveldb_readoptions_create();
            let v = sys::leveldb_get(
                db,
                options,
                key.as_ptr().cast(),
                key.len(),
                &mut len,
                &mut err,
            );
            sys::leveldb_readoptions_destroy(options);
            Ok(v)
        })?;
        if let Some(e) = take_error(err) {
            return Err(self.fail("read", e));
        }
        if value.is_null() {
            return Ok(None);
        }
        // SAFETY: LevelDB returns `len` bytes allocated with malloc, ours to free.
        let bytes = unsafe { std::slice::from_raw_parts(value.cast::<u8>(), len) }.to_vec();
        // SAFETY: freed once.
        unsafe { sys::leveldb_free(value.cast()) };
        Ok(Some(bytes))
    }

    /// Applies every change in one atomic write batch, synced to disk before it returns.
    pub fn write(&self, changes: &[Write<'_>]) -> Result<()> {
        let mut batch = Batch::default();
        for (key, value) in changes {
            match value {
                Some(v) => batch.put(key, v),
                None => batch.delete(key),
            }
        }
        self.write_batch(batch)
    }

    /// Applies `batch` atomically, synced to disk before it returns. A failed write makes
    /// the next one reopen the database first (see the module docs).
    pub fn write_batch(&self, batch: Batch) -> Result<()> {
        self.reopen_if_torn()?;
        let mut err = std::ptr::null_mut();
        // SAFETY: the handle is open while `with` runs; the batch is alive (destroyed when
        // `batch` drops, after the write); the options are destroyed after the write.
        self.with(|db| {
            unsafe {
                let options = sys::leveldb_writeoptions_create();
                sys::leveldb_writeoptions_set_sync(options, 1);
                sys::leveldb_write(db, options, batch.batch, &mut err);
                sys::leveldb_writeoptions_destroy(options);
            }
            Ok(())
        })?;
        match take_error(err) {
            Some(e) => {
                self.torn.store(true, Ordering::SeqCst);
                Err(self.fail("write", e))
            }
            None => Ok(()),
        }
    }

    /// Calls `each(key, value)` for the keys from `start` (the first key when `None`) in
    /// LevelDB's order (bytewise), until it returns `false` or the keys end. The value is
    /// read only when `with_values`.
    pub fn scan(
        &self,
        start: Option<&[u8]>,
        with_values: bool,
        each: impl FnMut(&[u8], Option<&[u8]>) -> Result<bool>,
    ) -> Result<()> {
        self.with(|db| self.scan_with(db, start, with_values, each))
    }

    /// [`Db::scan`] on `db`, an open handle the caller holds through the call.
    fn scan_with(
        &self,
        db: *mut sys::leveldb_t,
        start: Option<&[u8]>,
        with_values: bool,
        mut each: impl FnMut(&[u8], Option<&[u8]>) -> Result<bool>,
    ) -> Result<()> {
        // SAFETY: `db` is open for the call; the iterator lives inside this call only and is
        // destroyed on every path; key and value slices are copied out before the next move
        // of the iterator.
        let it = unsafe {
            let options = sys::leveldb_readoptions_create();
            // A listing reads every block once: it should not evict what is being edited.
            sys::leveldb_readoptions_set_fill_cache(options, 0);
            let it = sys::leveldb_create_iterator(db, options);
            sys::leveldb_readoptions_destroy(options);
            it
        };
        struct Guard(*mut sys::leveldb_iterator_t);
        impl Drop for Guard {
            fn drop(&mut self) {
                // SAFETY: destroyed once, here.
                unsafe { sys::leveldb_iter_destroy(self.0) }
            }
        }
        let guard = Guard(it);
        // SAFETY: valid iterator; `start` is valid for the call.
        unsafe {
            match start {
                Some(k) => sys::leveldb_iter_seek(guard.0, k.as_ptr().cast(), k.len()),
                None => sys::leveldb_iter_seek_to_first(guard.0),
            }
        }
        // SAFETY: key/value pointers are valid until the iterator moves; copied before.
        while unsafe { sys::leveldb_iter_valid(guard.0) } != 0 {
            let (mut klen, mut vlen) = (0usize, 0usize);
            let key = unsafe { sys::leveldb_iter_key(guard.0, &mut klen) };
            let key = unsafe { std::slice::from_raw_parts(key.cast::<u8>(), klen) };
            let value = if with_values {
                let v = unsafe { sys::leveldb_iter_value(guard.0, &mut vlen) };
                Some(unsafe { std::slice::from_raw_parts(v.cast::<u8>(), vlen) })
            } else {
                None
            };
            if !each(key, value)? {
                return Ok(());
            }
            unsafe { sys::leveldb_iter_next(guard.0) };
        }
        let mut err = std::ptr::null_mut();
        // SAFETY: valid iterator.
        unsafe { sys::leveldb_iter_get_error(guard.0, &mut err) };
        match take_error(err) {
            Some(e) => Err(self.fail("scan", e)),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Makes at `path` what a kill left of a database's creation before LevelDB wrote
    /// `CURRENT` (mount test 87's kill): the first manifest, CURRENT's temporary file.
    pub(crate) fn killed_creation(path: &Path) {
        std::fs::create_dir(path).unwrap();
        for (name, content) in [
            ("LOCK", ""),
            ("LOG", ""),
            ("MANIFEST-000001", "\u{1}partial"),
            ("000001.dbtmp", "MANIFEST-000001\n"),
        ] {
            std::fs::write(path.join(name), content).unwrap();
        }
    }

    #[test]
    fn put_get_delete_scan_and_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.db");
        assert!(Db::open(&path, false).is_err(), "not created unless asked");
        let db = Db::open(&path, true).unwrap();
        db.write(&[(b"b", Some(b"2")), (b"a", Some(b"1")), (b"c", Some(b""))])
            .unwrap();
        assert_eq!(db.get(b"a").unwrap(), Some(b"1".to_vec()));
        assert_eq!(db.get(b"c").unwrap(), Some(Vec::new()));
        assert_eq!(db.get(b"z").unwrap(), None);
        db.write(&[(b"a", None)]).unwrap();
        let mut seen = Vec::new();
        db.scan(Some(b"a"), true, |k, v| {
            seen.push((k.to_vec(), v.unwrap().to_vec()));
            Ok(true)
        })
        .unwrap();
        assert_eq!(
            seen,
            vec![(b"b".to_vec(), b"2".to_vec()), (b"c".to_vec(), Vec::new())]
        );
        let e = Db::open(&path, true).err().unwrap();
        assert_eq!(e.errno(), libc::EBUSY, "{e}");
        assert!(e.message().contains("x.db/LOCK"), "{e}");
        drop(db);
        let db = Db::open(&path, false).unwrap();
        assert_eq!(db.get(b"b").unwrap(), Some(b"2".to_vec()));
    }
}
