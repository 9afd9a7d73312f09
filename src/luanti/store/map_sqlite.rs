//! `map.sqlite`: the block store of a Luanti world, in either schema.
//!
//! The engine picks the schema by the presence of a `z` column (new worlds since 5.12.0 use
//! `blocks(x, y, z, data)`, older ones `blocks(pos, data)` forever); so do we. Every read is
//! one short statement (listing is paged by key, a walk reads ahead a few dozen blocks at a
//! time, see [`read_ahead`](super::read_ahead)), so a reader never holds a lock long enough
//! to make a running server wait; every write is one transaction, so a crash leaves each
//! block either old or new. A streamed commit keeps its blocks in a temporary table until it
//! copies them into `blocks` ([`SqliteMap::commit_stream`]). The store never changes the database's journal mode or schema.
//!
//! A `map.sqlite` replaced under the mount (a backup copied back with `rsync` or `mv`, which
//! rename a new file over the old) or removed is followed ([`SqliteMap::follow_file`]): an
//! open connection would go on reading the old file, and a commit on it would be lost with
//! that file (and its rollback journal, named by path, would belong to the new one).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use rusqlite::{params, Connection, OptionalExtension};

use crate::error::{lock, Error, Result};
use crate::luanti::codec::block::BlockPos;
use crate::luanti::store::map::{
    int_to_pos, is_last_page, pos_to_int, push_listed, too_large, Change, Listed, Produce, Stream,
    MAX_STORED,
};
use crate::luanti::store::map::{AxisOrder, MapBackend, Select};
use crate::luanti::store::map::{POS_MAX, POS_MIN};
use crate::luanti::store::read_ahead::{Filled, ReadAhead, LOCAL, MAX_BYTES};
use crate::luanti::store::snapshot;
use crate::luanti::store::sqlite::{self, file_id};

/// The two `map.sqlite` schemas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schema {
    /// `blocks(pos INT PRIMARY KEY, data BLOB)`, pos = z·2²⁴ + y·2¹² + x.
    Pos,
    /// `blocks(x, y, z, data)` with primary key (x, z, y).
    Xyz,
}

impl Schema {
    /// The name shown by `worldfs info`.
    pub fn name(self) -> &'static str {
        match self {
            Schema::Pos => "pos",
            Schema::Xyz => "x,y,z",
        }
    }
}

/// An open `map.sqlite`.
///
/// Lock order: `writer`, then `followed`, then `readers` or `version`; none is taken while
/// a later one is held.
pub struct SqliteMap {
    path: PathBuf,
    schema: Schema,
    read_only: bool,
    /// Reading connections, each with the [`Followed::generation`] it was opened in.
    readers: Mutex<Vec<(u64, Connection)>>,
    writer: Mutex<Option<Connection>>,
    /// `PRAGMA data_version` is per connection: one connection is kept for asking it.
    version: Mutex<Option<Connection>>,
    /// Whether the rows left out of the listing were counted and reported.
    reported: AtomicBool,
    /// Whether the table is keyed as the engine's are (see [`keyed_as_the_engine_keys`]): only
    /// then is what is read ahead what [`SqliteMap::get`] reads.
    keyed: bool,
    /// Blocks read ahead of walks.
    ahead: ReadAhead,
    /// The file at the path as the mount follows it, in one state.
    followed: Mutex<Followed>,
    /// Whether the database was in WAL mode when opened.
    wal: bool,
}

/// A file's device and inode ([`file_id`]).
type FileId = (u64, u64);

/// The file at the database's path, as the mount follows it (see
/// [`SqliteMap::follow_file`]).
#[derive(Clone, Debug, PartialEq)]
enum File {
    /// No database there (none at open, or removed since; `Some`: an empty file there): reads
    /// see no blocks and create nothing, the first commit creates it ([`MAP_SCHEMA`]).
    Absent(Option<FileId>),
    /// The connections are open on this file.
    Open(FileId),
    /// The file now at the path cannot be followed: every read, look and commit fails with
    /// `message` until the path holds `had`'s file again, or one that can be followed.
    Refused { had: Box<File>, message: String },
}

impl File {
    /// The file the connections were, or would be, opened on.
    fn id(&self) -> Option<FileId> {
        match self {
            File::Absent(id) => *id,
            File::Open(id) => Some(*id),
            File::Refused { had, .. } => had.id(),
        }
    }
}

/// What [`SqliteMap`] knows of the file at its path, under one lock.
struct Followed {
    file: File,
    /// How many times the database was found replaced or removed: part of every change
    /// token ([`Token::value`]), so each such change is one.
    generation: u64,
    /// `data_version` as last read on the writer's connection ([`Token::Writer`]; `None`:
    /// none yet in this generation), answered while the writer commits.
    writer_version: Option<i64>,
}

/// What [`SqliteMap::others_version`] answers, made one number by [`Token::value`].
enum Token {
    /// No database at the path.
    Absent,
    /// The file at the path cannot be followed.
    Refused,
    /// `data_version` on the dedicated connection (a read-only mount, or before our first
    /// commit creates the database).
    Dedicated(i64),
    /// `data_version` on the writer's connection.
    Writer(i64),
}

impl Token {
    /// The token as a number, unlike any other token's: `data_version` is never negative,
    /// the connection it came from is its lowest bit, and the file's generation is added
    /// above (each new file's connections count from their own start).
    fn value(self, generation: u64) -> i64 {
        let generation = (generation as i64).wrapping_shl(40);
        match self {
            Token::Absent => -1,
            Token::Refused => -3,
            Token::Dedicated(v) => v.wrapping_mul(2).wrapping_add(generation),
            Token::Writer(v) => (v.wrapping_mul(2) | 1).wrapping_add(generation),
        }
    }
}

/// Whether a write-ahead log lies beside the database at `path`.
fn wal_beside(path: &Path) -> bool {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    std::fs::symlink_metadata(wal).is_ok()
}

/// The schema of the database open on `conn`, and whether its table is keyed as the
/// engine's are (see [`keyed_as_the_engine_keys`]); an error naming `path` when it is not
/// a Luanti map database.
fn read_schema(conn: &Connection, path: &Path) -> Result<(Schema, bool)> {
    let mut has = (false, false, false);
    let mut columns = Vec::new();
    let mut stmt = conn
        .prepare("SELECT name, type, pk FROM pragma_table_info('blocks')")
        .map_err(|e| Error::from(e).context(path.display()))?;
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, i64>(2)?,
        ))
    })?;
    for row in rows {
        let (name, kind, pk) = row?;
        match name.as_str() {
            "pos" => has.0 = true,
            "z" => has.1 = true,
            "data" => has.2 = true,
            _ => {}
        }
        columns.push((name, kind, pk));
    }
    let schema = match has {
        (_, true, true) => Schema::Xyz,
        (true, false, true) => Schema::Pos,
        _ => {
            return Err(Error::unsupported(format!(
            "{}: not a Luanti map database (no table blocks(pos, data) or blocks(x, y, z, data))",
            path.display()
        )))
        }
    };
    Ok((schema, keyed_as_the_engine_keys(schema, &columns)))
}

/// Whether the key columns of `blocks` (`columns`: name, declared type, place in the
/// primary key) are the primary key and store their values as integers, as in every table
/// the engine makes. Another table (made by hand) may hold one position twice, or as a real
/// number `get` finds and a range read in key order does not; its blocks are read one by one.
fn keyed_as_the_engine_keys(schema: Schema, columns: &[(String, String, i64)]) -> bool {
    let keys: &[&str] = match schema {
        Schema::Pos => &["pos"],
        Schema::Xyz => &["x", "y", "z"],
    };
    // SQLite's rules for a column's affinity from its declared type: INTEGER and NUMERIC
    // store an integral value as an integer.
    let integral = |kind: &str| {
        let t = kind.to_ascii_uppercase();
        t.contains("INT")
            || !(t.is_empty()
                || ["CHAR", "CLOB", "TEXT", "BLOB", "REAL", "FLOA", "DOUB"]
                    .iter()
                    .any(|k| t.contains(k)))
    };
    let in_key = columns.iter().filter(|(_, _, pk)| *pk > 0).count();
    in_key == keys.len()
        && keys.iter().all(|k| {
            columns
                .iter()
                .any(|(name, kind, pk)| name == k && *pk > 0 && integral(kind))
        })
}

/// The schema Luanti 5.6.1 creates (`MapDatabaseSQLite3::createDatabase`), byte for byte;
/// every later engine still reads it, while 5.6 cannot read the newer `x, y, z` one.
const MAP_SCHEMA: &str =
    "CREATE TABLE IF NOT EXISTS `blocks` (\n\t`pos` INT PRIMARY KEY,\n\t`data` BLOB\n);\n";

/// The statement of a listing page in `schema` (`data`: the data column or `NULL`): the rows
/// after a resume point, in key order.
fn list_sql(schema: Schema, data: &str) -> String {
    let rows = loadable_rows(schema);
    match schema {
        Schema::Pos => {
            format!(
                "SELECT pos, {data} FROM blocks WHERE pos > ?1 AND {rows} ORDER BY pos LIMIT ?2"
            )
        }
        Schema::Xyz => format!(
            "SELECT x, y, z, {data} FROM blocks WHERE (x, z, y) > (?1, ?2, ?3) AND {rows} \
             ORDER BY x, z, y LIMIT ?4"
        ),
    }
}

/// The rows of a listing page in the `pos` schema (`data`: the data column or `NULL`), handed
/// to `take` in key order until it returns false.
fn rows_pos(
    c: &Connection,
    after: u64,
    limit: i64,
    data: &str,
    take: &mut dyn FnMut(Listed) -> bool,
) -> Result<()> {
    let sql = list_sql(Schema::Pos, data);
    let after = if after == 0 {
        i64::MIN
    } else {
        after as i64 - POS_KEY_OFFSET
    };
    take_rows(c, &sql, params![after, limit], take, |r| {
        let p: i64 = r.get(0)?;
        Ok(Listed {
            pos: int_to_pos(p),
            key: (p + POS_KEY_OFFSET) as u64,
            data: r.get(1)?,
            from_seed: false,
        })
    })
}

/// As [`rows_pos`], in the `x, y, z` schema.
fn rows_xyz(
    c: &Connection,
    after: u64,
    limit: i64,
    data: &str,
    take: &mut dyn FnMut(Listed) -> bool,
) -> Result<()> {
    let sql = list_sql(Schema::Xyz, data);
    let a = if after == 0 {
        (i64::MIN, i64::MIN, i64::MIN)
    } else {
        let p = xyz_from_key(after);
        (i64::from(p.x), i64::from(p.z), i64::from(p.y))
    };
    let coord = |v: i64| {
        i16::try_from(v).map_err(|_| Error::corrupt(format!("block coordinate {v} out of range")))
    };
    take_rows(c, &sql, params![a.0, a.1, a.2, limit], take, |r| {
        let (x, y, z): (i64, i64, i64) = (r.get(0)?, r.get(1)?, r.get(2)?);
        let pos = BlockPos {
            x: coord(x)?,
            y: coord(y)?,
            z: coord(z)?,
        };
        Ok(Listed {
            pos,
            key: xyz_key(pos),
            data: r.get(3)?,
            from_seed: false,
        })
    })
}

/// Runs the listing statement `sql` with `params` and hands each row, made a [`Listed`] by
/// `listed`, to `take` until it returns false.
fn take_rows(
    c: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
    take: &mut dyn FnMut(Listed) -> bool,
    listed: impl Fn(&rusqlite::Row<'_>) -> Result<Listed>,
) -> Result<()> {
    let mut stmt = c.prepare_cached(sql)?;
    let mut rows = stmt.query(params)?;
    while let Some(r) = rows.next()? {
        if !take(listed(r)?) {
            break;
        }
    }
    Ok(())
}

fn xyz_key(p: BlockPos) -> u64 {
    AxisOrder::Xzy.number(p)
}

fn xyz_from_key(k: u64) -> BlockPos {
    AxisOrder::Xzy.pos(k)
}

/// Offset that makes every `pos` integer (|pos| < 2³⁶) a positive key.
const POS_KEY_OFFSET: i64 = 1 << 40;

/// The condition on the rows of `schema` whose key is a block the engine can load (for the
/// `x, y, z` schema: each an `s16`). The unary `+` keeps SQLite seeking the listing's resume
/// point (`pos > …`, `(x, z, y) > (…)`) in the primary key rather than the start of the
/// range, which would make it step over every row before the resume point on every page.
fn loadable_rows(schema: Schema) -> String {
    match schema {
        Schema::Pos => {
            format!("(typeof(pos) = 'integer' AND +pos BETWEEN {POS_MIN} AND {POS_MAX})")
        }
        Schema::Xyz => {
            let s16 =
                |c: &str| format!("typeof({c}) = 'integer' AND +{c} BETWEEN -32768 AND 32767");
            format!("({} AND {} AND {})", s16("x"), s16("y"), s16("z"))
        }
    }
}

/// The stored data as bytes, whatever its SQL type: what the engine's `sqlite3_column_blob`
/// reads (text as its bytes, a number as its decimal text, NULL as nothing), so a row of the
/// wrong type lists like any other and fails only when its block is decoded. NULL when the
/// data is longer than [`MAX_STORED`] (`octet_length` reads only the row's header).
fn data_column() -> String {
    format!("CASE WHEN octet_length(data) > {MAX_STORED} THEN NULL ELSE IFNULL(CAST(data AS BLOB), X'') END")
}

/// One row of [`SqliteMap::get`]: the data (NULL when too long) and its length.
type DataRow = (Option<Vec<u8>>, Option<i64>);

/// Whether `path` holds no database yet: nothing is there, or an empty file. SQLite reads an
/// empty file as an empty database, and the engine starts on one by creating its table; a
/// crash of another program between creating the file and writing it leaves one.
fn holds_nothing(path: &Path) -> bool {
    match std::fs::symlink_metadata(path) {
        Ok(meta) => meta.is_file() && meta.len() == 0,
        Err(_) => true,
    }
}

impl SqliteMap {
    /// Opens `map.sqlite`; fails clearly when it is not a Luanti map database. A file that
    /// does not exist, or is empty, is an empty map until the first commit creates it.
    pub fn open(path: &Path, read_only: bool) -> Result<SqliteMap> {
        let store = SqliteMap {
            path: path.to_path_buf(),
            schema: Schema::Pos,
            read_only,
            readers: Mutex::new(Vec::new()),
            writer: Mutex::new(None),
            version: Mutex::new(None),
            reported: AtomicBool::new(false),
            keyed: true,
            ahead: ReadAhead::new(LOCAL),
            followed: Mutex::new(Followed {
                file: File::Absent(None),
                generation: 0,
                writer_version: None,
            }),
            wal: false,
        };
        if holds_nothing(path) {
            return Ok(store);
        }
        // Taken before the connection opens: a file replaced in between is then followed.
        if let Some(id) = file_id(path) {
            lock(&store.followed)?.file = File::Open(id);
        }
        let conn = store.connect(true)?;
        let (schema, keyed) = read_schema(&conn, path)?;
        let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0))?;
        if snapshot::on() {
            // The one connection of a snapshot, in its read transaction (see `with_reader`).
            lock(&store.readers)?.push((0, conn));
        } else {
            store.release(0, conn);
        }
        Ok(SqliteMap {
            schema,
            keyed,
            wal: mode.eq_ignore_ascii_case("wal"),
            ..store
        })
    }

    /// The schema of this database.
    pub fn schema(&self) -> Schema {
        self.schema
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn connect(&self, read_only: bool) -> Result<Connection> {
        let conn = sqlite::open(&self.path, read_only)?;
        // Several pooled readers each keep a page cache; blobs are read once and decoded
        // objects are cached above, so a small one per connection is enough.
        conn.execute_batch("PRAGMA cache_size = -512")?;
        Ok(conn)
    }

    /// Whether no database is at the path (see [`File::Absent`]; one another program
    /// created since is read, and followed at the next look).
    fn is_absent(&self) -> Result<bool> {
        let absent = matches!(lock(&self.followed)?.file, File::Absent(_));
        if snapshot::on() {
            // A snapshot shows the map as it was at the mount, absent or not.
            return Ok(absent);
        }
        Ok(absent && holds_nothing(&self.path))
    }

    /// The generation of the file followed; fails while the file at the path cannot be
    /// followed (see [`SqliteMap::follow_file`]).
    fn generation(&self) -> Result<u64> {
        let followed = lock(&self.followed)?;
        match &followed.file {
            File::Refused { message, .. } => Err(Error::new(libc::EIO, message.clone())),
            _ => Ok(followed.generation),
        }
    }

    fn with_reader<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        if snapshot::on() {
            // Every read of a snapshot on its one connection, whose read transaction holds
            // the moment of the mount (see `snapshot`).
            let pool = lock(&self.readers)?;
            let (_, conn) = pool
                .first()
                .ok_or_else(|| Error::corrupt("the snapshot's connection is gone"))?;
            return f(conn);
        }
        let generation = self.generation()?;
        // One opened on a file replaced since is dropped (see `release`).
        let pooled = lock(&self.readers)?.pop().filter(|(g, _)| *g == generation);
        let conn = match pooled {
            Some((_, conn)) => conn,
            None => self.connect(true)?,
        };
        let result = f(&conn);
        self.release(generation, conn);
        result
    }

    /// Puts a reading connection opened in `generation` back in the pool, unless the file
    /// was replaced since (one replaced between this look and the push is dropped when
    /// popped).
    fn release(&self, generation: u64, conn: Connection) {
        if self.generation().ok() != Some(generation) {
            return;
        }
        if let Ok(mut pool) = self.readers.lock() {
            if pool.len() < 16 {
                pool.push((generation, conn));
            }
        }
    }

    /// Follows a database replaced or removed since the connections were opened on it (see
    /// the module docs), under the writer's lock (`writer`: its connection): every
    /// connection is dropped and opened again on the file now at the path, and what was read
    /// ahead is dropped (the change token changes). A removed database is an empty map until
    /// the next commit creates it, as for the engine. Some cannot be followed: a new database
    /// of the other schema or not a map (its blocks would be listed in another order), the
    /// removal of one in the `x, y, z` schema, and any replacement of a database in WAL mode
    /// (its write-ahead log, found by name, would be read with the new file). Then every
    /// read, look and commit fails with the reason ([`SqliteMap::generation`]) until the file at
    /// the path is one that can be followed.
    ///
    /// Only this and [`SqliteMap::open_writer`] change [`Followed::file`], both under the
    /// writer's lock: what they look at stays true while they decide, so `followed` is
    /// taken only to read it and to set what they decided, never across a connection's
    /// opening, and readers never wait for one.
    fn follow_file(&self, writer: &mut Option<Connection>) -> Result<()> {
        let now = file_id(&self.path);
        let (known, refused) = {
            let followed = lock(&self.followed)?;
            let refused = matches!(followed.file, File::Refused { .. });
            (followed.file.id(), refused)
        };
        if known == now {
            if refused {
                // The file the mount had open, put back after one it could not follow.
                let mut followed = lock(&self.followed)?;
                if let File::Refused { had, .. } = &followed.file {
                    followed.file = (**had).clone();
                }
            }
            return Ok(());
        }
        let Some(now) = now.filter(|_| !holds_nothing(&self.path)) else {
            if known.is_some() {
                self.drop_connections(writer)?;
                if self.schema != Schema::Pos {
                    // A new database is made in the `pos` schema (see `MAP_SCHEMA`).
                    let why = format!(
                        "removed under the mount (it had the {} schema)",
                        self.schema.name()
                    );
                    return Err(self.refuse(why));
                }
                if self.wal {
                    return Err(self.refuse("removed under the mount while in WAL mode".into()));
                }
                log::warn!(
                    "{}: removed under the mount; the map is empty until a commit creates it",
                    self.path.display()
                );
            }
            lock(&self.followed)?.file = File::Absent(now);
            return Ok(());
        };
        // Created since by another program while there was none (ours records what it
        // creates), or replaced: connections may already be open on it, or on one it
        // replaced; all are opened again.
        self.drop_connections(writer)?;
        if let Some(why) = self.unfollowable(known.is_some())? {
            return Err(self.refuse(why));
        }
        lock(&self.followed)?.file = File::Open(now);
        if known.is_some() {
            log::warn!(
                "{}: replaced under the mount; reading and writing the new file",
                self.path.display()
            );
        }
        Ok(())
    }

    /// Drops every connection, opened on a file no longer at the path, and starts the next
    /// generation (under the writer's lock; a reader opened meanwhile is dropped when it is
    /// put back or popped, being of an earlier generation).
    fn drop_connections(&self, writer: &mut Option<Connection>) -> Result<()> {
        *writer = None;
        {
            let mut followed = lock(&self.followed)?;
            followed.generation += 1;
            followed.writer_version = None;
        }
        lock(&self.readers)?.clear();
        *lock(&self.version)? = None;
        Ok(())
    }

    /// Why the database now at the path cannot be followed (see [`SqliteMap::follow_file`]),
    /// if it cannot; `replaced`: it took the place of the one the mount had open.
    fn unfollowable(&self, replaced: bool) -> Result<Option<String>> {
        if replaced && (self.wal || wal_beside(&self.path)) {
            return Ok(Some(
                "replaced under the mount while in WAL mode (its write-ahead log, found by \
                 name, may be the replaced file's)"
                    .to_string(),
            ));
        }
        let (schema, keyed) = match self.connect(true).and_then(|c| read_schema(&c, &self.path)) {
            Ok(found) => found,
            Err(e) => {
                return Ok(Some(format!(
                    "replaced under the mount by a file that is not a map ({e})"
                )))
            }
        };
        Ok(((schema, keyed) != (self.schema, self.keyed)).then(|| {
            format!(
                "replaced under the mount by a database of schema {} (the mount has {}), keyed {}",
                schema.name(),
                self.schema.name(),
                if keyed {
                    "as the engine's"
                } else {
                    "otherwise"
                }
            )
        }))
    }

    /// Notes that the database at the path cannot be followed (`why`), logging it once, and
    /// returns the error every use gets until it can.
    fn refuse(&self, why: String) -> Error {
        let message = format!(
            "{}: {why}; the mount cannot follow it: unmount and mount again",
            self.path.display()
        );
        let mut followed = match lock(&self.followed) {
            Ok(followed) => followed,
            Err(e) => return e,
        };
        let had = match &followed.file {
            File::Refused { had, message: was } => {
                if *was == message {
                    return Error::new(libc::EIO, message);
                }
                had.clone()
            }
            file => Box::new(file.clone()),
        };
        log::error!("{message}");
        followed.file = File::Refused {
            had,
            message: message.clone(),
        };
        Error::new(libc::EIO, message)
    }

    /// The stored blob of one block, read on the connection `c`.
    fn get_on(&self, c: &Connection, pos: BlockPos) -> Result<Option<Vec<u8>>> {
        let row = match self.schema {
            Schema::Pos => c
                .prepare_cached(&format!(
                    "SELECT {}, octet_length(data) FROM blocks WHERE pos = ?1 LIMIT 1",
                    data_column()
                ))?
                .query_row(params![pos_to_int(pos)], |r| {
                    Ok::<DataRow, _>((r.get(0)?, r.get(1)?))
                })
                .optional()?,
            Schema::Xyz => c
                .prepare_cached(&format!(
                    "SELECT {}, octet_length(data) FROM blocks \
                     WHERE x = ?1 AND y = ?2 AND z = ?3 LIMIT 1",
                    data_column()
                ))?
                .query_row(params![pos.x, pos.y, pos.z], |r| {
                    Ok::<DataRow, _>((r.get(0)?, r.get(1)?))
                })
                .optional()?,
        };
        match row {
            None => Ok(None),
            Some((Some(data), _)) => Ok(Some(data)),
            Some((None, length)) => Err(too_large(pos, length.map(|n: i64| n as u64))),
        }
    }

    /// Up to `rows` loadable blocks from `pos` on in key order, in one statement, cut after
    /// [`MAX_BYTES`] of data beyond the first and before a row longer than that. The block at
    /// `pos` itself is read whatever its length, as [`SqliteMap::get`] reads it (and fails
    /// as it does).
    fn fill(&self, c: &Connection, pos: BlockPos, rows: usize) -> Result<Filled> {
        let key = self.key_of(pos);
        let data = format!(
            "CASE WHEN octet_length(data) > {MAX_BYTES} THEN NULL \
             ELSE IFNULL(CAST(data AS BLOB), X'') END"
        );
        let limit = i64::try_from(rows).unwrap_or(i64::MAX);
        let (mut out, mut bytes) = (Vec::new(), 0usize);
        let mut complete_to = u64::MAX;
        let mut first_too_long = false;
        // Listing resumes after a key: one below `key`. For `key` 1 that is 0, which lists
        // from the start: the row under key 0 comes first, is skipped, and is not counted.
        let mut take = |l: Listed| -> bool {
            match l.data {
                _ if l.key < key => true,
                Some(d) if out.is_empty() || bytes + d.len() <= MAX_BYTES => {
                    bytes += if out.is_empty() { 0 } else { d.len() };
                    out.push((l.key, d));
                    true
                }
                None if out.is_empty() && l.key == key => {
                    first_too_long = true;
                    false
                }
                _ => {
                    complete_to = l.key.saturating_sub(1);
                    false
                }
            }
        };
        let limit = limit.saturating_add(i64::from(key == 1));
        self.rows(c, key.saturating_sub(1), limit, &data, &mut take)?;
        if first_too_long {
            let data = self.get_on(c, pos)?;
            return Ok(Filled {
                rows: data.map(|d| (key, d)).into_iter().collect(),
                complete_to: key,
            });
        }
        if complete_to == u64::MAX && out.len() >= rows {
            complete_to = out.last().map_or(key, |(k, _)| *k);
        }
        Ok(Filled {
            rows: out,
            complete_to,
        })
    }

    /// The rows after the key `after` (0: from the start) in key order, in this schema (see
    /// [`rows_pos`]).
    fn rows(
        &self,
        c: &Connection,
        after: u64,
        limit: i64,
        data: &str,
        take: &mut dyn FnMut(Listed) -> bool,
    ) -> Result<()> {
        match self.schema {
            Schema::Pos => rows_pos(c, after, limit, data, take),
            Schema::Xyz => rows_xyz(c, after, limit, data, take),
        }
    }

    /// Logs once, when a listing first reaches its end, how many rows it left out.
    fn report_out_of_range(&self) {
        if self.reported.swap(true, Ordering::Relaxed) {
            return;
        }
        match self.out_of_range() {
            Ok(0) => {}
            Ok(n) => log::warn!(
                "{}: {n} rows of table blocks have a position no block can have (not an \
                 integer, or out of range); they are not shown, and the engine never loads them",
                self.path.display()
            ),
            Err(e) => log::warn!("{}: counting unusable rows: {e}", self.path.display()),
        }
    }

    /// [`SqliteMap::follow_file`] for [`SqliteMap::others_version`]: a database that cannot
    /// be followed is one more change ([`Token::Refused`], returned), so the watcher checks
    /// what the kernel keeps (and finds it fails).
    fn follow_for_look(&self, writer: &mut Option<Connection>) -> Result<Option<i64>> {
        match self.follow_file(writer) {
            Ok(_) => Ok(None),
            Err(_) if self.generation().is_err() => {
                let token = Token::Refused.value(0);
                self.ahead.seen_version(token);
                Ok(Some(token))
            }
            Err(e) => Err(e),
        }
    }

    /// The writer's connection (made on first use, creating the database if it does not
    /// exist yet), under its lock.
    fn writer(&self) -> Result<std::sync::MutexGuard<'_, Option<Connection>>> {
        if self.read_only {
            return Err(Error::read_only("the mount is read-only"));
        }
        let mut guard = crate::error::lock_named(&self.writer, "map store writer")?;
        self.follow_file(&mut guard)?;
        self.open_writer(guard)
    }

    /// [`SqliteMap::others_version`]'s token, read on the writer's connection `conn` (under
    /// the writer's lock) and kept for looks while the writer commits.
    fn read_writer_token(&self, conn: &Connection) -> Result<i64> {
        let version = sqlite::data_version(conn)?;
        let mut followed = lock(&self.followed)?;
        followed.writer_version = Some(version);
        Ok(Token::Writer(version).value(followed.generation))
    }

    /// Makes the writer's connection in `guard` if there is none yet.
    fn open_writer<'a>(
        &self,
        mut guard: std::sync::MutexGuard<'a, Option<Connection>>,
    ) -> Result<std::sync::MutexGuard<'a, Option<Connection>>> {
        if guard.is_none() {
            // Under the writer's lock (see `follow_file`): `followed` is not held while the
            // database is created.
            let absent = matches!(lock(&self.followed)?.file, File::Absent(_));
            if absent {
                drop(sqlite::open_or_create(&self.path, MAP_SCHEMA)?);
                // Created just now, or by another program since the last look.
                if let Some(id) = file_id(&self.path) {
                    lock(&self.followed)?.file = File::Open(id);
                }
            }
            let conn = self.connect(false)?;
            // A streamed commit keeps its blobs in a temporary table: in a file, not memory.
            conn.execute_batch("PRAGMA temp_store = FILE")?;
            *guard = Some(conn);
        }
        Ok(guard)
    }

    /// Fails when the file at the path is no longer the one the connections were opened on.
    /// Asked as a transaction begins (`began`: replaced between the look before it and its
    /// start; the transaction holds the replaced file, and nothing is written) and after it
    /// committed (replaced while it ran: the commit went into the replaced file, and a caller
    /// that keeps its changes commits them again, into the new file).
    fn still_the_file(&self, began: bool) -> Result<()> {
        if file_id(&self.path) == lock(&self.followed)?.file.id() {
            return Ok(());
        }
        let what = if began {
            "as a commit began; nothing was written, the next commit writes the new file"
        } else {
            "while a commit ran; the commit went into the replaced file, and none of it is in \
             the new one"
        };
        Err(Error::new(
            libc::EIO,
            format!("{}: replaced under the mount {what}", self.path.display()),
        ))
    }
}

/// The transaction of a streamed commit of [`SqliteMap`] (a failure drops it: rolled back,
/// temporary table included).
struct SqliteStream<'a> {
    map: &'a SqliteMap,
    tx: &'a rusqlite::Transaction<'a>,
}

impl Stream for SqliteStream<'_> {
    fn get(&mut self, pos: BlockPos) -> Result<Option<Vec<u8>>> {
        self.map.get_on(self.tx, pos)
    }

    fn put(&mut self, pos: BlockPos, data: &[u8]) -> Result<()> {
        match self.map.schema {
            Schema::Pos => self
                .tx
                .prepare_cached("REPLACE INTO temp.worldfs_stream (pos, data) VALUES (?1, ?2)")?
                .execute(params![pos_to_int(pos), data])?,
            Schema::Xyz => self
                .tx
                .prepare_cached(
                    "REPLACE INTO temp.worldfs_stream (x, y, z, data) VALUES (?1, ?2, ?3, ?4)",
                )?
                .execute(params![pos.x, pos.y, pos.z, data])?,
        };
        Ok(())
    }
}

impl MapBackend for SqliteMap {
    fn identity(&self) -> PathBuf {
        self.path().to_path_buf()
    }
    /// What `worldfs info` shows of this map.
    fn condition(&self) -> Option<(bool, String)> {
        let followed = lock(&self.followed).ok()?;
        let replaced = followed.generation;
        match &followed.file {
            File::Refused { message, .. } => Some((true, message.clone())),
            File::Absent(_) => Some((
                false,
                format!(
                    "{}: no database there; the first commit creates it",
                    self.path.display()
                ),
            )),
            File::Open(_) if replaced > 0 => Some((
                false,
                format!(
                    "{}: replaced or removed under the mount ({replaced} time(s)); following \
                     the file now there",
                    self.path.display()
                ),
            )),
            File::Open(_) => None,
        }
    }

    fn describe(&self) -> Vec<(&'static str, String)> {
        vec![
            ("format", "Luanti world (map.sqlite)".to_string()),
            ("map", self.path.display().to_string()),
            ("schema", self.schema.name().to_string()),
        ]
    }

    /// The stored blob of one block.
    fn get(&self, pos: BlockPos) -> Result<Option<Vec<u8>>> {
        if self.is_absent()? {
            return Ok(None);
        }
        self.with_reader(|c| self.get_on(c, pos))
    }

    /// The stored blob of one block, for showing it: as fresh as the last look at
    /// [`SqliteMap::others_version`], read ahead of a walk. A position with no key of its own
    /// (beyond the engine's limits in the `pos` schema), or any block of a table not keyed as
    /// the engine keys its tables, is read alone.
    fn read_ahead(&self, pos: BlockPos) -> Result<Option<Vec<u8>>> {
        if self.is_absent()? {
            return Ok(None);
        }
        if !self.keyed || (self.schema == Schema::Pos && int_to_pos(pos_to_int(pos)) != pos) {
            return self.get(pos);
        }
        // A failure reading the rows after it (a damaged page further on) must not fail this
        // block: `get` reads it alone, and fails exactly as it fails.
        self.ahead
            .get(self.key_of(pos), |_, rows| {
                self.with_reader(|c| self.fill(c, pos, rows))
            })
            .or_else(|_| self.get(pos))
    }

    /// The listing key of a position (for resuming a listing just after it).
    fn key_of(&self, pos: BlockPos) -> u64 {
        match self.schema {
            Schema::Pos => (pos_to_int(pos) + POS_KEY_OFFSET) as u64,
            Schema::Xyz => xyz_key(pos),
        }
    }

    fn axis_order(&self) -> AxisOrder {
        match self.schema {
            Schema::Pos => AxisOrder::Zyx,
            Schema::Xyz => AxisOrder::Xzy,
        }
    }

    /// Up to `limit` blocks with a key greater than `after` (0 = from the start), in key order;
    /// with their blobs when `with_data`. One short statement per call.
    ///
    /// A page holding [`LIST_BYTES`](crate::luanti::store::map::LIST_BYTES) of data ends early, before `limit` rows: the listing
    /// goes on after its last key.
    fn list(&self, after: u64, limit: usize, with_data: bool) -> Result<Vec<Listed>> {
        if self.is_absent()? {
            return Ok(Vec::new());
        }
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let data = if with_data {
            data_column()
        } else {
            "NULL".to_string()
        };
        let listed = self.with_reader(|c| {
            let (mut out, mut bytes) = (Vec::new(), 0);
            self.rows(c, after, limit, &data, &mut |l| {
                !push_listed(&mut out, &mut bytes, l)
            })?;
            Ok(out)
        })?;
        if is_last_page(&listed, usize::try_from(limit).unwrap_or(usize::MAX)) {
            self.report_out_of_range();
        }
        Ok(listed)
    }

    /// The number of rows whose key is no block the engine can load (left out of listings).
    fn out_of_range(&self) -> Result<u64> {
        if self.is_absent()? {
            return Ok(0);
        }
        let rows = loadable_rows(self.schema);
        self.with_reader(|c| {
            let n: i64 = c.query_row(
                &format!("SELECT COUNT(*) FROM blocks WHERE NOT {rows}"),
                [],
                |r| r.get(0),
            )?;
            Ok(u64::try_from(n).unwrap_or(0))
        })
    }

    /// Number of stored blocks.
    fn count(&self) -> Result<u64> {
        if self.is_absent()? {
            return Ok(0);
        }
        self.with_reader(|c| {
            let n: i64 = c.query_row("SELECT COUNT(*) FROM blocks", [], |r| r.get(0))?;
            Ok(u64::try_from(n).unwrap_or(0))
        })
    }

    /// SQLite's `PRAGMA data_version` on a dedicated connection: changes whenever another
    /// connection (another process, or our own writer) has committed.
    fn data_version(&self) -> Result<i64> {
        if snapshot::on() {
            return Ok(Token::Dedicated(0).value(0));
        }
        loop {
            let generation = self.generation()?;
            if self.is_absent()? {
                return Ok(0);
            }
            let mut guard = crate::error::lock_named(&self.version, "map store version")?;
            if guard.is_none() {
                *guard = Some(self.connect(true)?);
            }
            let conn = guard
                .as_ref()
                .ok_or_else(|| Error::corrupt("map store version connection unavailable"))?;
            let version = sqlite::data_version(conn)?;
            drop(guard);
            // A file followed meanwhile: this count may be the new file's, which starts
            // again; it is asked again, to be tagged with the new generation.
            if self.generation()? == generation {
                return Ok(Token::Dedicated(version).value(generation));
            }
        }
    }

    /// A token that changes when another program committed, and not for our own commits;
    /// SQLite's `data_version` on a connection does not change for that connection's own
    /// commits, so it is asked of the writer's connection. While our writer commits, the
    /// token read when its transaction took the write lock is answered: no other program
    /// can commit until it ends (`None` before the writer's first read: ask again later;
    /// nothing is missed, the token then tells of every other commit since). It is asked of
    /// the dedicated connection on a read-only mount, which makes no
    /// commits, and until our first commit creates a database that did not exist at open
    /// (making the writer's connection on a look would create it); the token tells which
    /// connection it came from, so it changes once then. What was read ahead is dropped
    /// when it changes.
    fn others_version(&self) -> Result<Option<i64>> {
        if snapshot::on() {
            // The moment a snapshot reads never changes, whatever the server commits.
            return Ok(Some(Token::Dedicated(0).value(0)));
        }
        let absent = Token::Absent.value(0);
        if self.is_absent()? {
            return Ok(Some(absent));
        }
        let created_by_another = matches!(lock(&self.followed)?.file, File::Absent(_));
        let token = if self.read_only || created_by_another {
            // Not while our first commit creates the database (it then follows it itself).
            if let Ok(mut writer) = self.writer.try_lock() {
                if let Some(token) = self.follow_for_look(&mut writer)? {
                    return Ok(Some(token));
                }
            }
            if self.is_absent()? {
                return Ok(Some(absent));
            }
            self.data_version()?
        } else {
            match self.writer.try_lock() {
                Ok(mut g) => {
                    if let Some(token) = self.follow_for_look(&mut g)? {
                        return Ok(Some(token));
                    }
                    if self.is_absent()? {
                        return Ok(Some(absent));
                    }
                    let guard = self.open_writer(g)?;
                    let conn = guard
                        .as_ref()
                        .ok_or_else(|| Error::corrupt("map store writer unavailable"))?;
                    self.read_writer_token(conn)?
                }
                Err(std::sync::TryLockError::WouldBlock) => {
                    let followed = lock(&self.followed)?;
                    match followed.writer_version {
                        None => return Ok(None),
                        Some(v) => Token::Writer(v).value(followed.generation),
                    }
                }
                Err(std::sync::TryLockError::Poisoned(_)) => {
                    return Err(Error::corrupt("map store writer lock poisoned"))
                }
            }
        };
        self.ahead.seen_version(token);
        Ok(Some(token))
    }

    /// Whether the store refuses every change.
    fn read_only(&self) -> bool {
        self.read_only
    }

    /// A streamed commit (see [`MapBackend::commit_stream`]): one transaction that holds the
    /// write lock from the start (other writers wait; readers go on), reads through the
    /// writer's connection, and keeps each blob put into it in a temporary table, which
    /// SQLite keeps in a file of its own and removes itself. The commit copies that table
    /// into `blocks` in one statement: only then does the transaction write the database
    /// (and, in rollback-journal mode, keep readers out until it commits), as long as an
    /// ordinary commit of the same blocks would.
    ///
    /// [`MapBackend::commit_stream`]: crate::luanti::store::map::MapBackend::commit_stream
    fn commit_stream(&self, produce: Produce<'_>) -> Result<()> {
        let mut guard = self.writer()?;
        let conn = guard
            .as_mut()
            .ok_or_else(|| Error::corrupt("map store writer unavailable"))?;
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        // Other programs are kept out until the commit: this token stays true through it.
        self.read_writer_token(&tx)?;
        self.still_the_file(true)?;
        let (table, copy) = match self.schema {
            Schema::Pos => (
                "CREATE TEMP TABLE worldfs_stream (pos INTEGER PRIMARY KEY, data BLOB)",
                "REPLACE INTO main.blocks (pos, data) SELECT pos, data FROM temp.worldfs_stream",
            ),
            Schema::Xyz => (
                "CREATE TEMP TABLE worldfs_stream (x INTEGER, y INTEGER, z INTEGER, \
                 data BLOB, PRIMARY KEY (x, z, y))",
                "REPLACE INTO main.blocks (x, y, z, data) \
                 SELECT x, y, z, data FROM temp.worldfs_stream",
            ),
        };
        tx.execute_batch(table)?;
        produce(&mut SqliteStream { map: self, tx: &tx })?;
        tx.execute_batch(copy)?;
        tx.execute_batch("DROP TABLE temp.worldfs_stream")?;
        let committed = tx.commit();
        self.ahead.committed();
        committed?;
        self.still_the_file(false)?;
        Ok(())
    }

    /// Commits in one transaction the changes `select` keeps, and returns them. `select` runs
    /// once the transaction holds the write lock: no other connection can commit until it
    /// ends, so what `select` reads of the store ([`SqliteMap::get`], `data_version`) stays
    /// true until the commit.
    fn commit_selected(&self, changes: Vec<Change>, select: Select<'_>) -> Result<Vec<Change>> {
        let mut guard = self.writer()?;
        let conn = guard
            .as_mut()
            .ok_or_else(|| Error::corrupt("map store writer unavailable"))?;
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        // Other programs are kept out until the commit: this token stays true through it.
        self.read_writer_token(&tx)?;
        self.still_the_file(true)?;
        let changes = select(changes)?;
        for (pos, data) in &changes {
            match (self.schema, data) {
                (Schema::Pos, Some(d)) => {
                    tx.prepare_cached("REPLACE INTO blocks (pos, data) VALUES (?1, ?2)")?
                        .execute(params![pos_to_int(*pos), d])?;
                }
                (Schema::Pos, None) => {
                    tx.prepare_cached("DELETE FROM blocks WHERE pos = ?1")?
                        .execute(params![pos_to_int(*pos)])?;
                }
                (Schema::Xyz, Some(d)) => {
                    tx.prepare_cached(
                        "REPLACE INTO blocks (x, y, z, data) VALUES (?1, ?2, ?3, ?4)",
                    )?
                    .execute(params![pos.x, pos.y, pos.z, d])?;
                }
                (Schema::Xyz, None) => {
                    tx.prepare_cached("DELETE FROM blocks WHERE x = ?1 AND y = ?2 AND z = ?3")?
                        .execute(params![pos.x, pos.y, pos.z])?;
                }
            }
        }
        let committed = tx.commit();
        self.ahead.committed();
        committed?;
        self.still_the_file(false)?;
        Ok(changes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::luanti::store::map::LIST_BYTES;
    use proptest::prelude::*;

    fn pos(x: i16, y: i16, z: i16) -> BlockPos {
        BlockPos { x, y, z }
    }

    fn commit(store: &SqliteMap, changes: &[Change]) -> Result<()> {
        store
            .commit_selected(changes.to_vec(), Box::new(Ok))
            .map(drop)
    }

    proptest! {
        #[test]
        fn xyz_keys_round_trip(x: i16, y: i16, z: i16) {
            prop_assert_eq!(xyz_from_key(xyz_key(pos(x, y, z))), pos(x, y, z));
        }
    }

    fn make_db(dir: &Path, schema: Schema) -> PathBuf {
        let path = dir.join("map.sqlite");
        let c = Connection::open(&path).unwrap();
        match schema {
            Schema::Pos => c
                .execute("CREATE TABLE blocks (pos INT PRIMARY KEY, data BLOB)", [])
                .unwrap(),
            Schema::Xyz => c
                .execute(
                    "CREATE TABLE blocks (x INTEGER, y INTEGER, z INTEGER, data BLOB NOT NULL, PRIMARY KEY (x, z, y))",
                    [],
                )
                .unwrap(),
        };
        path
    }

    #[test]
    fn both_schemas_store_list_and_delete() {
        for schema in [Schema::Pos, Schema::Xyz] {
            let dir = tempfile::tempdir().unwrap();
            let path = make_db(dir.path(), schema);
            let store = SqliteMap::open(&path, false).unwrap();
            assert_eq!(store.schema(), schema);
            let blocks: Vec<_> = [(-3, 1, 2), (0, 0, 0), (5, -7, -1), (0, 1, 0)]
                .iter()
                .map(|&(x, y, z)| (pos(x, y, z), Some(vec![x as u8, y as u8, z as u8])))
                .collect();
            commit(&store, &blocks).unwrap();
            assert_eq!(store.count().unwrap(), 4);
            assert_eq!(store.get(pos(5, -7, -1)).unwrap(), Some(vec![5, 249, 255]));
            assert_eq!(store.get(pos(9, 9, 9)).unwrap(), None);
            // Paged listing with resume keys sees every block exactly once, in key order.
            let mut seen = Vec::new();
            let mut after = 0;
            loop {
                let page = store.list(after, 1, true).unwrap();
                let Some(last) = page.last() else { break };
                after = last.key;
                assert_eq!(store.key_of(last.pos), last.key);
                seen.extend(page.into_iter().map(|l| l.pos));
            }
            assert_eq!(seen.len(), 4);
            let mut sorted = seen.clone();
            sorted.sort_by_key(|p| store.key_of(*p));
            assert_eq!(seen, sorted);
            commit(&store, &[(pos(0, 0, 0), None)]).unwrap();
            assert_eq!(store.count().unwrap(), 3);
            let ro = SqliteMap::open(&path, true).unwrap();
            assert_eq!(
                commit(&ro, &[(pos(0, 0, 0), None)]).unwrap_err().errno(),
                libc::EROFS
            );
        }
    }

    /// Reads ahead answer exactly as `get` does, in any order, for every kind of row (absent,
    /// too long to read ahead, too long to read, NULL, out of the engine's range), and see
    /// our commits at once and another writer's at the next look at the change token.
    #[test]
    fn reads_ahead_answer_as_get_does() {
        for schema in [Schema::Pos, Schema::Xyz] {
            let dir = tempfile::tempdir().unwrap();
            let path = make_db(dir.path(), schema);
            let store = SqliteMap::open(&path, false).unwrap();
            let mut blocks: Vec<Change> = (0..300)
                .filter(|i| i % 7 != 3)
                .map(|i| {
                    (
                        pos(i % 20, i / 20, 0),
                        Some(vec![i as u8; 1 + i as usize % 50]),
                    )
                })
                .collect();
            blocks.push((pos(4, 1, 0), Some(vec![1; MAX_BYTES + 1])));
            blocks.push((pos(5, 1, 0), Some(vec![2; MAX_STORED + 1])));
            blocks.push((pos(6, 1, 0), Some(vec![3; MAX_BYTES / 2 + 1])));
            blocks.push((pos(7, 1, 0), Some(vec![4; MAX_BYTES / 2 + 1])));
            commit(&store, &blocks).unwrap();
            let c = Connection::open(&path).unwrap();
            if schema == Schema::Pos {
                c.execute(
                    "UPDATE blocks SET data = NULL WHERE pos = ?1",
                    [pos_to_int(pos(8, 1, 0))],
                )
                .unwrap();
                c.execute("INSERT INTO blocks VALUES (?1, x'01')", [POS_MAX + 1])
                    .unwrap();
                c.execute("INSERT INTO blocks VALUES ('9x', x'02')", [])
                    .unwrap();
            }
            let mut asks: Vec<BlockPos> = (-2..22)
                .flat_map(|x| (-1..17).map(move |y| pos(x, y, 0)))
                .collect();
            asks.push(pos(2048, 0, 0));
            asks.push(pos(-2049, 3, 0));
            let same = |p: BlockPos| {
                let (ahead, got) = (store.read_ahead(p), store.get(p));
                match (&ahead, &got) {
                    (Ok(a), Ok(g)) => assert!(a == g, "{schema:?} {p:?}"),
                    (Err(a), Err(g)) => assert_eq!(a.to_string(), g.to_string()),
                    _ => panic!("{schema:?} {p:?}: {:?} vs {:?}", ahead.is_ok(), got.is_ok()),
                }
            };
            for p in &asks {
                for _ in 0..3 {
                    same(*p);
                }
            }
            for p in asks.iter().rev() {
                same(*p);
            }
            for i in 0..asks.len() {
                same(asks[(i * 37) % asks.len()]);
            }
            // Our commit is seen at once; another writer's once the token is looked at.
            store.read_ahead(pos(1, 0, 0)).unwrap();
            commit(
                &store,
                &[(pos(2, 0, 0), Some(vec![9])), (pos(3, 0, 0), None)],
            )
            .unwrap();
            assert_eq!(store.read_ahead(pos(2, 0, 0)).unwrap(), Some(vec![9]));
            assert_eq!(store.read_ahead(pos(3, 0, 0)).unwrap(), None);
            store.others_version().unwrap();
            store.read_ahead(pos(10, 0, 0)).unwrap();
            let other = SqliteMap::open(&path, false).unwrap();
            commit(&other, &[(pos(11, 0, 0), Some(vec![8]))]).unwrap();
            store.others_version().unwrap();
            assert_eq!(store.read_ahead(pos(11, 0, 0)).unwrap(), Some(vec![8]));
        }
    }

    /// `others_version` stays put through our own commits and moves with another
    /// connection's, also one made just before ours; it cannot be told while our writer
    /// commits, and then tells of what happened meanwhile. A map that did not exist at open
    /// changes it once, when our first commit creates it.
    #[test]
    fn others_version_tells_of_other_writers_only() {
        for schema in [Schema::Pos, Schema::Xyz] {
            let dir = tempfile::tempdir().unwrap();
            let path = make_db(dir.path(), schema);
            let ours = SqliteMap::open(&path, false).unwrap();
            let other = SqliteMap::open(&path, false).unwrap();
            let v = ours.others_version().unwrap().unwrap();
            commit(&ours, &[(pos(1, 0, 0), Some(vec![1]))]).unwrap();
            commit(
                &ours,
                &[(pos(2, 0, 0), Some(vec![2])), (pos(1, 0, 0), None)],
            )
            .unwrap();
            assert_eq!(ours.others_version().unwrap(), Some(v), "{schema:?}");

            commit(&other, &[(pos(3, 0, 0), Some(vec![3]))]).unwrap();
            let v2 = ours.others_version().unwrap().unwrap();
            assert_ne!(v2, v, "{schema:?}: another writer's commit");
            assert_eq!(ours.others_version().unwrap(), Some(v2));

            commit(&other, &[(pos(4, 0, 0), Some(vec![4]))]).unwrap();
            commit(&ours, &[(pos(5, 0, 0), Some(vec![5]))]).unwrap();
            let v3 = ours.others_version().unwrap().unwrap();
            assert_ne!(v3, v2, "{schema:?}: not hidden by our commit after it");

            // While our writer commits (here: only its lock is held), the token it read
            // last is answered; the next look after it tells of what happened meanwhile.
            let held = ours.writer.lock().unwrap();
            commit(&other, &[(pos(6, 0, 0), Some(vec![6]))]).unwrap();
            assert_eq!(
                ours.others_version().unwrap(),
                Some(v3),
                "our writer is busy"
            );
            drop(held);
            let v4 = ours.others_version().unwrap().unwrap();
            assert_ne!(v4, v3, "{schema:?}");
            // Our transaction reads the token once it holds the write lock: another commit
            // just before it is told at once.
            commit(&other, &[(pos(8, 0, 0), Some(vec![8]))]).unwrap();
            let mut during = None;
            ours.commit_selected(
                vec![(pos(9, 0, 0), Some(vec![9]))],
                Box::new(|c| {
                    during = ours.others_version()?;
                    Ok(c)
                }),
            )
            .unwrap();
            assert!(during.is_some_and(|d| d != v4), "{schema:?}: {during:?}");
            assert_eq!(ours.others_version().unwrap(), during);
            let busy = SqliteMap::open(&path, false).unwrap();
            let held = busy.writer.lock().unwrap();
            assert_eq!(busy.others_version().unwrap(), None, "no token read yet");
            drop(held);

            let reader = SqliteMap::open(&path, true).unwrap();
            let r = reader.others_version().unwrap();
            assert_eq!(reader.others_version().unwrap(), r);
            commit(&ours, &[(pos(7, 0, 0), Some(vec![7]))]).unwrap();
            assert_ne!(
                reader.others_version().unwrap(),
                r,
                "a read-only mount sees ours"
            );
        }
        let dir = tempfile::tempdir().unwrap();
        let fresh = SqliteMap::open(&dir.path().join("map.sqlite"), false).unwrap();
        let v = fresh.others_version().unwrap();
        assert_eq!(fresh.others_version().unwrap(), v);
        commit(&fresh, &[(pos(1, 0, 0), Some(vec![1]))]).unwrap();
        let created = fresh.others_version().unwrap();
        assert_ne!(created, v, "the database now exists");
        commit(&fresh, &[(pos(2, 0, 0), Some(vec![2]))]).unwrap();
        assert_eq!(fresh.others_version().unwrap(), created);
    }

    /// A read ahead from the key just above the lowest one lists from the start, and does not
    /// take the block below it for its own.
    #[test]
    fn a_read_ahead_at_the_second_key_answers_its_own_block() {
        let dir = tempfile::tempdir().unwrap();
        let path = make_db(dir.path(), Schema::Xyz);
        let store = SqliteMap::open(&path, false).unwrap();
        let (low, next) = (
            pos(i16::MIN, i16::MIN, i16::MIN),
            pos(i16::MIN, i16::MIN + 1, i16::MIN),
        );
        assert_eq!(store.key_of(low), 0);
        commit(&store, &[(low, Some(vec![1]))]).unwrap();
        assert_eq!(store.read_ahead(next).unwrap(), None);
        commit(&store, &[(next, Some(vec![2]))]).unwrap();
        assert_eq!(store.read_ahead(next).unwrap(), Some(vec![2]));
        assert_eq!(store.read_ahead(low).unwrap(), Some(vec![1]));
    }

    /// A table not keyed as the engine's (no primary key: a position twice; no integer
    /// affinity: a position stored as a real number) is read block by block, as `get` reads.
    #[test]
    fn hand_made_tables_are_read_as_get_reads() {
        let engine = [
            ("CREATE TABLE blocks (pos INT PRIMARY KEY, data BLOB)", true),
            ("CREATE TABLE blocks (pos INT NOT NULL, data BLOB NOT NULL, PRIMARY KEY (pos))", true),
            ("CREATE TABLE blocks (x INTEGER, y INTEGER, z INTEGER, data BLOB NOT NULL, PRIMARY KEY (x, z, y))", true),
            ("CREATE TABLE blocks (pos, data)", false),
            ("CREATE TABLE blocks (pos REAL PRIMARY KEY, data)", false),
            ("CREATE TABLE blocks (pos INT, data BLOB)", false),
            ("CREATE TABLE blocks (x INTEGER, y INTEGER, z INTEGER, data BLOB, PRIMARY KEY (x, z))", false),
            ("CREATE TABLE blocks (x INT, y INT, z TEXT, data BLOB, PRIMARY KEY (x, z, y))", false),
        ];
        for (table, keyed) in engine {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("map.sqlite");
            let c = Connection::open(&path).unwrap();
            c.execute(table, []).unwrap();
            let store = SqliteMap::open(&path, false).unwrap();
            assert_eq!(store.keyed, keyed, "{table}");
            let insert = match store.schema() {
                Schema::Xyz => "INSERT OR IGNORE INTO blocks VALUES (?1, 0, 0, ?2)",
                Schema::Pos => "INSERT OR IGNORE INTO blocks VALUES (?1, ?2)",
            };
            for i in 0..20u8 {
                for copy in 0..2u8 {
                    c.execute(insert, params![f64::from(i), vec![i, copy]])
                        .unwrap();
                }
            }
            for x in -1..22 {
                for _ in 0..2 {
                    let p = pos(x, 0, 0);
                    assert_eq!(
                        store.read_ahead(p).unwrap(),
                        store.get(p).unwrap(),
                        "{table} {p:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_listing_page_holds_at_most_list_bytes_of_data() {
        for schema in [Schema::Pos, Schema::Xyz] {
            let dir = tempfile::tempdir().unwrap();
            let path = make_db(dir.path(), schema);
            let store = SqliteMap::open(&path, false).unwrap();
            let rows = LIST_BYTES / (1 << 20) + 8;
            let blocks: Vec<_> = (0..rows)
                .map(|i| (pos(i as i16, 0, 0), Some(vec![i as u8; 1 << 20])))
                .collect();
            commit(&store, &blocks).unwrap();
            let page = store.list(0, 512, true).unwrap();
            let bytes: usize = page.iter().map(|l| l.data.as_ref().unwrap().len()).sum();
            assert!(page.len() < rows, "{schema:?}: the page stops early");
            assert!(bytes <= LIST_BYTES, "{schema:?}: {bytes} bytes");
            assert_eq!(listed(&store, 512).len(), rows, "{schema:?}: and goes on");
        }
    }

    /// A listing page costs the same wherever it starts: SQLite seeks its resume point in
    /// the primary key (it used to seek the start of the loadable range and step over every
    /// row before the resume point, so a whole listing cost the square of the blocks: hours
    /// for ten million).
    #[test]
    fn a_listing_page_steps_over_its_own_rows_only() {
        for schema in [Schema::Pos, Schema::Xyz] {
            let dir = tempfile::tempdir().unwrap();
            let path = make_db(dir.path(), schema);
            let store = SqliteMap::open(&path, false).unwrap();
            let blocks: Vec<_> = (0..20_000)
                .map(|i| (pos((i % 100) as i16, (i / 100) as i16, 0), Some(vec![1])))
                .collect();
            commit(&store, &blocks).unwrap();
            for data in ["NULL".to_string(), data_column()] {
                let sql = list_sql(schema, &data);
                let steps = |after: u64| {
                    store
                        .with_reader(|c| {
                            c.prepare_cached(&sql)?
                                .reset_status(rusqlite::StatementStatus::VmStep);
                            let mut page = Vec::new();
                            store.rows(c, after, 100, &data, &mut |l| {
                                page.push(l);
                                true
                            })?;
                            assert_eq!(page.len(), 100);
                            let steps = c
                                .prepare_cached(&sql)?
                                .get_status(rusqlite::StatementStatus::VmStep);
                            Ok((steps, page[99].key))
                        })
                        .unwrap()
                };
                let (first, mut after) = steps(0);
                let mut last = first;
                for _ in 0..198 {
                    (last, after) = steps(after);
                }
                assert!(
                    last < first * 2,
                    "{schema:?} {data}: the last page took {last} steps, the first {first}"
                );
            }
        }
    }

    /// Every listed position of the whole listing, page by page.
    fn listed(store: &SqliteMap, page: usize) -> Vec<(BlockPos, Option<Vec<u8>>)> {
        let mut out = Vec::new();
        let mut after = 0;
        loop {
            let rows = store.list(after, page, true).unwrap();
            let Some(last) = rows.last() else { break };
            after = last.key;
            out.extend(rows.into_iter().map(|l| (l.pos, l.data)));
        }
        out
    }

    /// A database of `schema` with rows of every kind of trouble: data that is no blob (text,
    /// an integer, NULL), positions the engine cannot load, and a row too long to be read.
    fn bad_rows_db(dir: &Path, schema: Schema) -> PathBuf {
        let far = 1i64 << 60;
        let path = make_db(dir, schema);
        let c = Connection::open(&path).unwrap();
        let rows: Vec<(i64, i64, i64, rusqlite::types::Value)> = vec![
            (0, 0, 0, rusqlite::types::Value::Blob(vec![29, 1, 2])),
            (1, 0, 0, rusqlite::types::Value::Text("not a block".into())),
            (2, 0, 0, rusqlite::types::Value::Integer(12345)),
            (3, 0, 0, rusqlite::types::Value::Blob(vec![25])),
        ];
        for (x, y, z, data) in &rows {
            match schema {
                Schema::Pos => c.execute(
                    "INSERT INTO blocks (pos, data) VALUES (?1, ?2)",
                    params![pos_to_int(pos(*x as i16, *y as i16, *z as i16)), data],
                ),
                Schema::Xyz => c.execute(
                    "INSERT INTO blocks (x, y, z, data) VALUES (?1, ?2, ?3, ?4)",
                    params![x, y, z, data],
                ),
            }
            .unwrap();
        }
        match schema {
            Schema::Pos => {
                c.execute("INSERT INTO blocks VALUES (4, NULL)", [])
                    .unwrap();
                for bad in [far, -far, POS_MAX + 1, POS_MIN - 1] {
                    c.execute("INSERT INTO blocks VALUES (?1, X'1d')", [bad])
                        .unwrap();
                }
                c.execute("INSERT INTO blocks VALUES ('a', X'1d')", [])
                    .unwrap();
                c.execute("INSERT INTO blocks VALUES (5.5, X'1d')", [])
                    .unwrap();
                c.execute("INSERT INTO blocks VALUES (NULL, X'1d')", [])
                    .unwrap();
            }
            Schema::Xyz => {
                for (x, y, z) in [(far, 0, 0), (0, -far, 0), (0, 0, 40000), (-40000, 1, 1)] {
                    c.execute("INSERT INTO blocks VALUES (?1, ?2, ?3, X'1d')", [x, y, z])
                        .unwrap();
                }
                c.execute("INSERT INTO blocks VALUES ('a', 0, 0, X'1d')", [])
                    .unwrap();
                c.execute("INSERT INTO blocks VALUES (0, 0.5, 0, X'1d')", [])
                    .unwrap();
            }
        }
        // A row too long to be read.
        match schema {
            Schema::Pos => c.execute(
                "INSERT INTO blocks VALUES (?1, zeroblob(?2))",
                params![pos_to_int(pos(5, 0, 0)), MAX_STORED as i64 + 1],
            ),
            Schema::Xyz => c.execute(
                "INSERT INTO blocks VALUES (5, 0, 0, zeroblob(?1))",
                params![MAX_STORED as i64 + 1],
            ),
        }
        .unwrap();
        path
    }

    /// A row whose data is not a blob costs only its own block; rows whose position the
    /// engine can never load are left out of the listing (they used to fail it or show up
    /// as a second block of another position).
    #[test]
    fn bad_rows_cost_only_themselves() {
        for schema in [Schema::Pos, Schema::Xyz] {
            let dir = tempfile::tempdir().unwrap();
            let path = bad_rows_db(dir.path(), schema);
            let store = SqliteMap::open(&path, true).unwrap();
            for page in [1, 2, 512] {
                let got = listed(&store, page);
                let positions: Vec<BlockPos> = got.iter().map(|(p, _)| *p).collect();
                let mut want = vec![pos(0, 0, 0), pos(1, 0, 0), pos(2, 0, 0), pos(3, 0, 0)];
                if schema == Schema::Pos {
                    want.push(pos(4, 0, 0));
                }
                want.push(pos(5, 0, 0));
                assert_eq!(positions, want, "{schema:?}, pages of {page}");
                assert_eq!(got.last().unwrap().1, None, "too long to be read");
            }
            let e = store.get(pos(5, 0, 0)).unwrap_err();
            assert_eq!(e.errno(), libc::EIO);
            assert!(e.message().contains("8388609 bytes"), "{e}");
            assert_eq!(
                store.get(pos(1, 0, 0)).unwrap(),
                Some(b"not a block".to_vec())
            );
            assert_eq!(store.get(pos(2, 0, 0)).unwrap(), Some(b"12345".to_vec()));
            if schema == Schema::Pos {
                assert_eq!(store.get(pos(4, 0, 0)).unwrap(), Some(Vec::new()));
            }
            let bad = if schema == Schema::Pos { 7 } else { 6 };
            assert_eq!(store.out_of_range().unwrap(), bad, "{schema:?}");
        }
    }

    /// The stored `CREATE TABLE` of `path`'s tables, read by a plain connection.
    fn tables(path: &Path) -> Vec<String> {
        let c = Connection::open(path).unwrap();
        let mut stmt = c
            .prepare("SELECT sql FROM sqlite_master WHERE type = 'table' ORDER BY name")
            .unwrap();
        let rows = stmt.query_map([], |r| r.get(0)).unwrap();
        rows.map(|r| r.unwrap()).collect()
    }

    /// `map.sqlite` at `path` replaced by a copy of itself in which block `at` holds `blob`,
    /// renamed over it (as `rsync` and `mv` replace a file).
    fn replace_with_copy(path: &Path, at: BlockPos, blob: &[u8]) {
        let copy = path.with_extension("new");
        std::fs::copy(path, &copy).unwrap();
        Connection::open(&copy)
            .unwrap()
            .execute(
                "REPLACE INTO blocks (pos, data) VALUES (?1, ?2)",
                params![pos_to_int(at), blob],
            )
            .unwrap();
        std::fs::rename(&copy, path).unwrap();
    }

    fn stored(path: &Path, at: BlockPos) -> Option<Vec<u8>> {
        Connection::open(path)
            .unwrap()
            .query_row(
                "SELECT data FROM blocks WHERE pos = ?1",
                params![pos_to_int(at)],
                |r| r.get(0),
            )
            .optional()
            .unwrap()
    }

    /// A `pos`-schema map holding block 1,0,0 (`old`), open read-write in a folder of its own.
    fn map_with_a_block() -> (tempfile::TempDir, PathBuf, SqliteMap) {
        let dir = tempfile::tempdir().unwrap();
        let path = make_db(dir.path(), Schema::Pos);
        let store = SqliteMap::open(&path, false).unwrap();
        commit(&store, &[(pos(1, 0, 0), Some(b"old".to_vec()))]).unwrap();
        (dir, path, store)
    }

    #[test]
    fn a_database_replaced_under_the_store_is_followed() {
        let (_dir, path, store) = map_with_a_block();
        let before = store.others_version().unwrap();
        assert_eq!(
            store.others_version().unwrap(),
            before,
            "nothing changed yet"
        );
        replace_with_copy(&path, pos(2, 0, 0), b"restored");
        let after = store.others_version().unwrap();
        assert_ne!(after, before, "the replacement is a change");
        assert_eq!(store.others_version().unwrap(), after, "and only one");
        assert_eq!(store.get(pos(2, 0, 0)).unwrap(), Some(b"restored".to_vec()));
        assert_eq!(
            store.read_ahead(pos(2, 0, 0)).unwrap(),
            Some(b"restored".to_vec())
        );
        // A commit after the replacement lands in the new file, not in the old one.
        replace_with_copy(&path, pos(3, 0, 0), b"again");
        commit(&store, &[(pos(1, 0, 0), Some(b"new".to_vec()))]).unwrap();
        assert_eq!(stored(&path, pos(1, 0, 0)), Some(b"new".to_vec()));
        assert_eq!(stored(&path, pos(3, 0, 0)), Some(b"again".to_vec()));
        let listed: Vec<BlockPos> = store
            .list(0, 100, false)
            .unwrap()
            .iter()
            .map(|l| l.pos)
            .collect();
        assert_eq!(listed, [pos(1, 0, 0), pos(2, 0, 0), pos(3, 0, 0)]);
    }

    #[test]
    fn a_read_only_store_follows_a_replaced_database() {
        let dir = tempfile::tempdir().unwrap();
        let path = make_db(dir.path(), Schema::Pos);
        let store = SqliteMap::open(&path, true).unwrap();
        assert_eq!(store.get(pos(2, 0, 0)).unwrap(), None);
        let before = store.others_version().unwrap();
        replace_with_copy(&path, pos(2, 0, 0), b"restored");
        assert_ne!(store.others_version().unwrap(), before);
        assert_eq!(store.get(pos(2, 0, 0)).unwrap(), Some(b"restored".to_vec()));
    }

    #[test]
    fn a_removed_database_is_an_empty_map_until_a_commit_makes_it_again() {
        let (_dir, path, store) = map_with_a_block();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(
            store.others_version().unwrap(),
            Some(Token::Absent.value(0))
        );
        assert_eq!(store.get(pos(1, 0, 0)).unwrap(), None);
        assert_eq!(store.count().unwrap(), 0);
        assert!(!path.exists(), "a look creates nothing");
        commit(&store, &[(pos(4, 0, 0), Some(b"fresh".to_vec()))]).unwrap();
        assert_eq!(stored(&path, pos(4, 0, 0)), Some(b"fresh".to_vec()));
        assert_eq!(stored(&path, pos(1, 0, 0)), None);
        assert_eq!(store.get(pos(4, 0, 0)).unwrap(), Some(b"fresh".to_vec()));
    }

    #[test]
    fn a_database_of_the_other_schema_in_its_place_fails_every_commit() {
        let (_dir, path, store) = map_with_a_block();
        let other = tempfile::tempdir().unwrap();
        let xyz = make_db(other.path(), Schema::Xyz);
        let before = store.others_version().unwrap();
        std::fs::rename(&xyz, &path).unwrap();
        for _ in 0..2 {
            let err = commit(&store, &[(pos(1, 0, 0), Some(b"new".to_vec()))]).unwrap_err();
            assert_eq!(err.errno(), libc::EIO);
            assert!(
                err.message().contains("unmount and mount again"),
                "{}",
                err.message()
            );
            // Reads fail with the reason too, and the watcher sees one change.
            let read = store.get(pos(1, 0, 0)).unwrap_err();
            assert!(
                read.message().contains("schema x,y,z"),
                "{}",
                read.message()
            );
            assert_eq!(
                store.others_version().unwrap(),
                Some(Token::Refused.value(0))
            );
        }
        assert_ne!(before, Some(Token::Refused.value(0)));
        let rows: i64 = Connection::open(&path)
            .unwrap()
            .query_row("SELECT COUNT(*) FROM blocks", [], |r| r.get(0))
            .unwrap();
        assert_eq!(rows, 0, "nothing was written to the new database");
        // A map of the mount's schema put in its place is followed again.
        let good = make_db(other.path(), Schema::Pos);
        std::fs::rename(&good, &path).unwrap();
        assert_ne!(
            store.others_version().unwrap(),
            Some(Token::Refused.value(0))
        );
        assert_eq!(store.get(pos(1, 0, 0)).unwrap(), None);
        commit(&store, &[(pos(1, 0, 0), Some(b"new".to_vec()))]).unwrap();
        assert_eq!(stored(&path, pos(1, 0, 0)), Some(b"new".to_vec()));
    }

    #[test]
    fn the_database_put_back_after_one_that_cannot_be_followed_is_followed_as_before() {
        let (_dir, path, store) = map_with_a_block();
        let other = tempfile::tempdir().unwrap();
        let kept = other.path().join("kept.sqlite");
        std::fs::rename(&path, &kept).unwrap();
        std::fs::rename(make_db(other.path(), Schema::Xyz), &path).unwrap();
        let refused = Some(Token::Refused.value(0));
        assert_eq!(store.others_version().unwrap(), refused);
        assert_eq!(store.get(pos(1, 0, 0)).unwrap_err().errno(), libc::EIO);
        std::fs::rename(&kept, &path).unwrap();
        assert_ne!(store.others_version().unwrap(), refused);
        assert_eq!(store.get(pos(1, 0, 0)).unwrap(), Some(b"old".to_vec()));
        commit(&store, &[(pos(2, 0, 0), Some(b"new".to_vec()))]).unwrap();
        assert_eq!(stored(&path, pos(2, 0, 0)), Some(b"new".to_vec()));
    }

    #[test]
    fn a_database_in_wal_mode_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let path = make_db(dir.path(), Schema::Pos);
        Connection::open(&path)
            .unwrap()
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0))
            .unwrap();
        let store = SqliteMap::open(&path, false).unwrap();
        commit(&store, &[(pos(1, 0, 0), Some(b"old".to_vec()))]).unwrap();
        let other = tempfile::tempdir().unwrap();
        let copy = make_db(other.path(), Schema::Pos);
        std::fs::rename(&copy, &path).unwrap();
        let err = commit(&store, &[(pos(2, 0, 0), Some(b"new".to_vec()))]).unwrap_err();
        assert_eq!(err.errno(), libc::EIO);
        assert!(err.message().contains("WAL mode"), "{}", err.message());
        assert!(store.get(pos(1, 0, 0)).is_err());
    }

    #[test]
    fn a_linked_database_removed_and_put_back_takes_commits_again() {
        let dir = tempfile::tempdir().unwrap();
        let store_dir = dir.path().join("store");
        std::fs::create_dir(&store_dir).unwrap();
        let real = make_db(&store_dir, Schema::Pos);
        let backup = dir.path().join("backup.sqlite");
        std::fs::copy(&real, &backup).unwrap();
        let path = dir.path().join("map.sqlite");
        std::os::unix::fs::symlink(&real, &path).unwrap();
        let store = SqliteMap::open(&path, false).unwrap();
        commit(&store, &[(pos(1, 0, 0), Some(b"old".to_vec()))]).unwrap();
        std::fs::remove_file(&real).unwrap();
        // A link to nothing: reads and commits fail (no database is made through a link).
        let _ = store.others_version();
        assert!(commit(&store, &[(pos(2, 0, 0), Some(b"no".to_vec()))]).is_err());
        assert!(!real.exists());
        std::fs::copy(&backup, &real).unwrap();
        store.others_version().unwrap();
        commit(&store, &[(pos(2, 0, 0), Some(b"new".to_vec()))]).unwrap();
        assert_eq!(stored(&real, pos(2, 0, 0)), Some(b"new".to_vec()));
        assert!(path.is_symlink(), "the link is left as it was");
    }

    #[test]
    fn a_commit_whose_file_was_replaced_while_it_ran_fails() {
        let (_dir, path, store) = map_with_a_block();
        // Replaced once the transaction holds the old file: SQLite itself refuses to write
        // a file moved since it was opened, or the check after the commit fails it.
        let err = store
            .commit_selected(
                vec![(pos(2, 0, 0), Some(b"lost".to_vec()))],
                Box::new(|changes| {
                    replace_with_copy(&path, pos(3, 0, 0), b"restored");
                    Ok(changes)
                }),
            )
            .unwrap_err();
        assert_eq!(err.errno(), libc::EIO, "{}", err.message());
        assert!(err.message().contains("replaced"), "{}", err.message());
        assert_eq!(stored(&path, pos(2, 0, 0)), None);
        // The next commit follows the new file.
        commit(&store, &[(pos(2, 0, 0), Some(b"again".to_vec()))]).unwrap();
        assert_eq!(stored(&path, pos(2, 0, 0)), Some(b"again".to_vec()));
        assert_eq!(stored(&path, pos(3, 0, 0)), Some(b"restored".to_vec()));
    }

    #[test]
    fn a_new_database_appears_whole_with_the_engines_table() {
        use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("map.sqlite");
        let store = SqliteMap::open(&path, false).unwrap();
        assert!(!path.exists(), "created by the first commit only");
        let watch = Inotify::init(InitFlags::IN_NONBLOCK).unwrap();
        watch
            .add_watch(
                dir.path(),
                AddWatchFlags::IN_CREATE | AddWatchFlags::IN_MOVED_TO,
            )
            .unwrap();
        commit(&store, &[(pos(1, 2, 3), Some(b"blob".to_vec()))]).unwrap();
        let events = watch.read_events().unwrap();
        let first = events
            .iter()
            .find(|e| e.name.as_deref() == Some(std::ffi::OsStr::new("map.sqlite")))
            .expect("no event for map.sqlite");
        assert_eq!(
            first.mask,
            AddWatchFlags::IN_MOVED_TO,
            "map.sqlite appeared other than by a rename: {events:?}"
        );
        assert_eq!(
            tables(&path),
            ["CREATE TABLE `blocks` (\n\t`pos` INT PRIMARY KEY,\n\t`data` BLOB\n)"]
        );
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["map.sqlite"], "a temporary was left");
        assert_eq!(store.get(pos(1, 2, 3)).unwrap(), Some(b"blob".to_vec()));
    }

    #[test]
    fn an_empty_file_is_an_empty_map_as_for_the_engine() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("map.sqlite");
        std::fs::write(&path, b"").unwrap();
        let store = SqliteMap::open(&path, false).unwrap();
        assert_eq!(store.count().unwrap(), 0);
        assert_eq!(store.get(pos(0, 0, 0)).unwrap(), None);
        assert!(store.list(0, 10, true).unwrap().is_empty());
        commit(&store, &[(pos(0, 0, 0), Some(b"blob".to_vec()))]).unwrap();
        let again = SqliteMap::open(&path, true).unwrap();
        assert_eq!(again.schema(), Schema::Pos);
        assert_eq!(again.get(pos(0, 0, 0)).unwrap(), Some(b"blob".to_vec()));
    }

    #[test]
    fn a_database_without_blocks_is_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.sqlite");
        Connection::open(&path)
            .unwrap()
            .execute("CREATE TABLE other (a)", [])
            .unwrap();
        let err = SqliteMap::open(&path, true).err().unwrap();
        assert!(
            err.to_string().contains("not a Luanti map database"),
            "{err}"
        );
    }
}
