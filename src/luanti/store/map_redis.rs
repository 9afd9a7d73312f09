//! The block store of a Luanti world kept in Redis (`backend = redis`).
//!
//! What the engine does (`src/database/database-redis.cpp`): every block is a field of one
//! hash, `redis_hash`, on the server at `redis_address` (a Unix socket when it holds a `/`,
//! else a host with `redis_port`, 6379 when unset), after `AUTH redis_password` when that is
//! set. The field is `i64tos(getBlockAsInteger(pos))`, the same decimal key as LevelDB's
//! (so a field that is not exactly that text of a position in range is never loaded: it is
//! left out of the listing and counted in [`RedisMap::out_of_range`]); blocks are written
//! with `HSET` and removed with `HDEL` between `MULTI` and `EXEC`. So is every commit of
//! worldfs: one `MULTI`/`EXEC`, which Redis applies whole or not at all (a streamed commit
//! sends its `HSET`s as they come, and the server queues them until `EXEC`).
//!
//! Another writer (a running server) may change the hash at any time. A commit `WATCH`es the
//! hash before its `select` reads the stored blocks, so when another writer changed the
//! hash in between, `EXEC` writes nothing and the commit fails with `EAGAIN` (pending
//! changes stay pending and are retried). [`RedisMap::data_version`] is the server's count
//! of writes (`INFO persistence`: `rdb_changes_since_last_save` with the time of the last
//! save): it changes whenever anything was written to the server, which is what the cache
//! needs (a change of another key only costs a re-check).
//!
//! Listing: Redis keeps a hash unordered and `HSCAN` walks it in no useful order, returning
//! an element more than once at times, while the tree lists `blocks/` page by page, each
//! resuming after the key of the last block it showed. The listing key here is the
//! engine's integer position (plus 2⁴⁰, so that none is 0). A page after `after` needs the
//! smallest keys above it: one pass of `HSCAN` keeps, in a set bounded to [`WINDOW`] keys,
//! the smallest keys above `after` it meets (duplicates fold into the set), so memory is
//! bounded whatever the size of the hash. That window serves the following pages for as long
//! as `data_version` stays the same; each page's blobs are then read with one `HSTRLEN` and
//! one `HMGET` for its keys (a field removed meanwhile is skipped, one longer than
//! [`MAX_STORED`] listed without data). A listing of N blocks costs about N / [`WINDOW`]
//! passes over the hash. `HSCAN` of Redis 7.0 returns values too, so a pass reads the blobs
//! as well: bounded by `COUNT` per call, not kept.
//!
//! Connections: the server must answer at open (a clear error names the address, never the
//! password). Connections are pooled; one whose call fails with an I/O error or a timeout
//! is dropped with a log line, the call fails with `EIO`, and the next call connects anew.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use redis::{ConnectionAddr, ConnectionInfo, RedisConnectionInfo, Value};

use crate::error::{Error, Result};
use crate::luanti::codec::block::BlockPos;
use crate::luanti::store::map::{block_key, parse_block_key};
use crate::luanti::store::map::{
    int_to_pos, pos_to_int, too_large, Change, Listed, Produce, Stream, LIST_BYTES, MAX_STORED,
};
use crate::luanti::store::map::{MapBackend, Select};
use crate::luanti::store::world_mt::WorldMt;

/// The most keys one listing pass keeps.
pub const WINDOW: usize = 1 << 16;

/// How long one call may wait for the server before failing with `EIO`.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Offset that makes every integer position (|pos| < 2³⁶) a positive listing key.
const KEY_OFFSET: i64 = 1 << 40;

/// Where the map is: `world.mt`'s Redis settings.
#[derive(Clone)]
pub struct RedisPlace {
    address: String,
    port: u16,
    hash: String,
    password: Option<String>,
}

impl RedisPlace {
    /// Reads `redis_address`, `redis_port`, `redis_hash` and `redis_password` as the engine
    /// does (address and hash are required).
    pub fn from_world_mt(mt: &WorldMt) -> Result<RedisPlace> {
        let (Some(address), Some(hash)) = (mt.get("redis_address"), mt.get("redis_hash")) else {
            return Err(Error::invalid(
                "world.mt: set redis_address and redis_hash to use the redis backend",
            ));
        };
        let port = match mt.get("redis_port") {
            None => 6379,
            Some(p) => p.trim().parse().map_err(|_| {
                Error::invalid(format!("world.mt: redis_port {p:?} is not a port number"))
            })?,
        };
        Ok(RedisPlace {
            address: address.to_string(),
            port,
            hash: hash.to_string(),
            password: mt.get("redis_password").map(str::to_string),
        })
    }

    /// The server as shown to a user: the socket, or `host:port`. Never the password.
    pub fn server(&self) -> String {
        if self.address.contains('/') {
            self.address.clone()
        } else {
            format!("{}:{}", self.address, self.port)
        }
    }

    fn info(&self) -> ConnectionInfo {
        let addr = if self.address.contains('/') {
            ConnectionAddr::Unix(PathBuf::from(&self.address))
        } else {
            ConnectionAddr::Tcp(self.address.clone(), self.port)
        };
        ConnectionInfo {
            addr,
            redis: RedisConnectionInfo {
                password: self.password.clone(),
                ..RedisConnectionInfo::default()
            },
        }
    }
}

/// The keys of one listing pass: the smallest keys above `after` at `version`.
struct Window {
    after: u64,
    version: i64,
    keys: Vec<u64>,
    /// Whether every key above `after` is in `keys`.
    complete: bool,
}

/// A map in a Redis hash.
pub struct RedisMap {
    place: RedisPlace,
    read_only: bool,
    pool: Mutex<Vec<redis::Connection>>,
    window: Mutex<Option<Window>>,
}

impl RedisMap {
    /// Connects to the server `world.mt` names; fails clearly when it does not answer.
    pub fn open(world_mt: &WorldMt, read_only: bool) -> Result<RedisMap> {
        let store = RedisMap {
            place: RedisPlace::from_world_mt(world_mt)?,
            read_only,
            pool: Mutex::new(Vec::new()),
            window: Mutex::new(None),
        };
        let con = store.connect()?;
        store.release(con);
        Ok(store)
    }

    /// An error of the server, the password scrubbed in case it ever appears.
    fn error(&self, what: &str, e: &redis::RedisError) -> Error {
        let mut text = e.to_string();
        if let Some(p) = self.place.password.as_deref().filter(|p| !p.is_empty()) {
            text = text.replace(p, "***");
        }
        Error::new(
            libc::EIO,
            format!("redis {} {what}: {text}", self.place.server()),
        )
    }

    fn connect(&self) -> Result<redis::Connection> {
        let client =
            redis::Client::open(self.place.info()).map_err(|e| self.error("cannot be used", &e))?;
        let con = client
            .get_connection_with_timeout(TIMEOUT)
            .map_err(|e| self.error("does not answer", &e))?;
        con.set_read_timeout(Some(TIMEOUT))
            .and_then(|()| con.set_write_timeout(Some(TIMEOUT)))
            .map_err(|e| self.error("cannot be used", &e))?;
        Ok(con)
    }

    fn release(&self, con: redis::Connection) {
        if let Ok(mut pool) = self.pool.lock() {
            if pool.len() < 8 {
                pool.push(con);
            }
        }
    }

    /// Runs `f` on a pooled connection. A connection that failed is dropped (logged), so
    /// the next call connects anew.
    fn with<T>(
        &self,
        what: &str,
        f: impl FnOnce(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Result<T> {
        let pooled = self.pool.lock().map(|mut p| p.pop()).unwrap_or(None);
        let mut con = match pooled {
            Some(c) => c,
            None => self.connect()?,
        };
        match f(&mut con) {
            Ok(v) => {
                self.release(con);
                Ok(v)
            }
            Err(e) => {
                let err = self.error(what, &e);
                if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() {
                    log::warn!("{err}; the connection is dropped and made anew on next use");
                } else {
                    self.release(con);
                }
                Err(err)
            }
        }
    }

    /// Calls `each(field)` for every field of the hash (some more than once), one `HSCAN`
    /// call of a bounded count at a time.
    fn scan(&self, mut each: impl FnMut(&[u8])) -> Result<()> {
        let hash = &self.place.hash;
        let mut cursor = 0u64;
        loop {
            let (next, items): (u64, Vec<Vec<u8>>) = self.with("HSCAN", |c| {
                redis::cmd("HSCAN")
                    .arg(hash)
                    .arg(cursor)
                    .arg("COUNT")
                    .arg(256)
                    .query(c)
            })?;
            for field in items.iter().step_by(2) {
                each(field);
            }
            if next == 0 {
                return Ok(());
            }
            cursor = next;
        }
    }

    /// One pass over the hash: the [`WINDOW`] smallest listing keys above `after`.
    fn pass(&self, after: u64, version: i64) -> Result<Window> {
        let mut keys = BTreeSet::new();
        let mut complete = true;
        self.scan(|field| {
            let Some(pos) = parse_block_key(field) else {
                return;
            };
            let key = self.key_of(pos);
            if key <= after {
                return;
            }
            if keys.len() >= WINDOW {
                complete = false;
                if keys.last().is_some_and(|&last| key >= last) {
                    return;
                }
                keys.pop_last();
            }
            keys.insert(key);
        })?;
        Ok(Window {
            after,
            version,
            keys: keys.into_iter().collect(),
            complete,
        })
    }

    /// Up to `limit` keys above `after`, in order, from the window or a new pass.
    fn page_keys(&self, after: u64, limit: usize) -> Result<Vec<u64>> {
        let version = self.data_version()?;
        let mut guard = crate::error::lock_named(&self.window, "listing window")?;
        let serves = |w: &Window| {
            w.version == version
                && w.after <= after
                && (w.complete || w.keys.partition_point(|&k| k <= after) + limit <= w.keys.len())
        };
        if !guard.as_ref().is_some_and(serves) {
            *guard = Some(self.pass(after, version)?);
        }
        let w = guard
            .as_ref()
            .ok_or_else(|| Error::corrupt("listing window unavailable"))?;
        let from = w.keys.partition_point(|&k| k <= after);
        Ok(w.keys.iter().skip(from).take(limit).copied().collect())
    }

    fn exists(&self, field: &str) -> Result<bool> {
        let hash = &self.place.hash;
        self.with("HEXISTS", |c| {
            redis::cmd("HEXISTS").arg(hash).arg(field).query(c)
        })
    }
}

/// The most bytes of blobs a streamed commit gathers before sending them to the server.
const STREAM_BATCH: usize = 1 << 20;

/// The transaction of a streamed commit of [`RedisMap`], between `MULTI` and `EXEC`.
struct Queued<'a> {
    map: &'a RedisMap,
    con: &'a mut redis::Connection,
    /// `HSET`s not sent yet, of `bytes` bytes of blobs.
    pipe: redis::Pipeline,
    bytes: usize,
    /// Whether a send failed (the connection is then in an unknown state: dropped).
    broken: bool,
}

impl Queued<'_> {
    /// Sends the gathered `HSET`s, which the server queues.
    fn send(&mut self) -> Result<()> {
        if self.bytes == 0 {
            return Ok(());
        }
        let pipe = std::mem::replace(&mut self.pipe, redis::pipe());
        self.bytes = 0;
        pipe.query::<()>(self.con).map_err(|e| {
            self.broken = true;
            let err = self.map.error("HSET (queued)", &e);
            log::warn!("{err}; the connection is dropped and made anew on next use");
            err
        })
    }
}

impl Stream for Queued<'_> {
    fn get(&mut self, pos: BlockPos) -> Result<Option<Vec<u8>>> {
        self.map.get(pos)
    }

    fn put(&mut self, pos: BlockPos, data: &[u8]) -> Result<()> {
        self.pipe
            .cmd("HSET")
            .arg(&self.map.place.hash)
            .arg(block_key(pos))
            .arg(data)
            .ignore();
        self.bytes += data.len().max(1);
        if self.bytes >= STREAM_BATCH {
            self.send()?;
        }
        Ok(())
    }
}

impl MapBackend for RedisMap {
    /// `key: value` lines for `worldfs info` (never the password).
    fn describe(&self) -> Vec<(&'static str, String)> {
        vec![
            ("format", "Luanti world (Redis)".to_string()),
            (
                "map",
                format!("redis {} hash {}", self.place.server(), self.place.hash),
            ),
        ]
    }

    /// A name for the sidecars kept per store: the server and the hash.
    fn identity(&self) -> PathBuf {
        PathBuf::from(format!(
            "redis://{}#{}",
            self.place.server(),
            self.place.hash
        ))
    }

    /// The stored blob of one block.
    fn get(&self, pos: BlockPos) -> Result<Option<Vec<u8>>> {
        let field = block_key(pos);
        let hash = &self.place.hash;
        let len: usize = self.with("HSTRLEN", |c| {
            redis::cmd("HSTRLEN").arg(hash).arg(&field).query(c)
        })?;
        if len > MAX_STORED {
            return Err(too_large(pos, Some(len as u64)));
        }
        self.with("HGET", |c| {
            redis::cmd("HGET").arg(hash).arg(&field).query(c)
        })
    }

    /// The listing key of a position.
    fn key_of(&self, pos: BlockPos) -> u64 {
        (pos_to_int(pos) + KEY_OFFSET) as u64
    }

    /// Up to `limit` blocks with a listing key greater than `after` (0 = from the start),
    /// in key order, with their blobs when `with_data`; a page stops early past
    /// [`LIST_BYTES`] of data.
    fn list(&self, after: u64, limit: usize, with_data: bool) -> Result<Vec<Listed>> {
        let keys = self.page_keys(after, limit)?;
        let positions: Vec<BlockPos> = keys
            .iter()
            .map(|&k| int_to_pos(k as i64 - KEY_OFFSET))
            .collect();
        let fields: Vec<String> = positions.iter().map(|&p| block_key(p)).collect();
        if fields.is_empty() {
            return Ok(Vec::new());
        }
        let hash = &self.place.hash;
        let lengths: Vec<usize> = self.with("HSTRLEN", |c| {
            let mut pipe = redis::pipe();
            for f in &fields {
                pipe.cmd("HSTRLEN").arg(hash).arg(f);
            }
            pipe.query(c)
        })?;
        // The fields to read: each small enough, together at most LIST_BYTES.
        let mut wanted = Vec::new();
        let mut bytes = 0usize;
        let mut count = 0usize;
        for (i, &len) in lengths.iter().enumerate() {
            count = i + 1;
            if with_data && len <= MAX_STORED {
                wanted.push(i);
                bytes += len;
            }
            if bytes >= LIST_BYTES {
                break;
            }
        }
        let mut data: Vec<Option<Vec<u8>>> = vec![None; count];
        if !wanted.is_empty() {
            let values: Vec<Option<Vec<u8>>> = self.with("HMGET", |c| {
                let mut cmd = redis::cmd("HMGET");
                cmd.arg(hash);
                for &i in &wanted {
                    cmd.arg(&fields[i]);
                }
                cmd.query(c)
            })?;
            for (&i, v) in wanted.iter().zip(values) {
                data[i] = v;
            }
        }
        let mut out = Vec::with_capacity(count);
        for i in 0..count {
            let present = lengths[i] > 0 || data[i].is_some();
            // HSTRLEN is 0 for a missing field and for an empty value; HMGET tells them
            // apart when the data was read.
            let gone = if with_data && lengths[i] <= MAX_STORED {
                data[i].is_none()
            } else {
                !present && !self.exists(&fields[i])?
            };
            if gone {
                continue;
            }
            out.push(Listed {
                pos: positions[i],
                key: keys[i],
                data: data[i].take(),
                from_seed: false,
            });
        }
        Ok(out)
    }

    /// The number of fields that are no block the engine can load (left out of listings),
    /// counted up to [`WINDOW`] (`HSCAN` may return a field twice: they are told apart by
    /// name, in bounded memory).
    fn out_of_range(&self) -> Result<u64> {
        let mut fields = BTreeSet::new();
        let mut n = 0u64;
        self.scan(|field| {
            if parse_block_key(field).is_none()
                && fields.len() < WINDOW
                && fields.insert(field.to_vec())
            {
                n += 1;
            }
        })?;
        Ok(n)
    }

    /// The number of fields of the hash.
    fn count(&self) -> Result<u64> {
        let hash = &self.place.hash;
        self.with("HLEN", |c| redis::cmd("HLEN").arg(hash).query(c))
    }

    /// Changes whenever the server wrote anything (see the module doc).
    fn data_version(&self) -> Result<i64> {
        let info: String = self.with("INFO", |c| redis::cmd("INFO").arg("persistence").query(c))?;
        let field = |name: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .and_then(|v| v.trim().parse::<i64>().ok())
                .unwrap_or(0)
        };
        let changes = field("rdb_changes_since_last_save");
        let saved = field("rdb_last_save_time");
        Ok(saved.wrapping_mul(1_000_000_007).wrapping_add(changes))
    }

    /// Whether the store refuses every change.
    fn read_only(&self) -> bool {
        self.read_only
    }

    /// A streamed commit (see [`MapBackend::commit_stream`]): the hash is `WATCH`ed, `MULTI`
    /// begins, and each blob put is sent at once as an `HSET` the server queues (in
    /// pipelines of at most `STREAM_BATCH` bytes, so this process holds no more than
    /// that); blocks are read through other connections. `EXEC` applies them all, or none
    /// when another writer changed the hash meanwhile (the commit then fails with `EAGAIN`);
    /// a failure before it sends `DISCARD`. Redis keeps a transaction's queued commands in
    /// the server's memory until `EXEC`: the server holds every blob put until then.
    ///
    /// [`MapBackend::commit_stream`]: crate::luanti::store::map::MapBackend::commit_stream
    fn commit_stream(&self, produce: Produce<'_>) -> Result<()> {
        if self.read_only {
            return Err(Error::read_only("the mount is read-only"));
        }
        let pooled = self.pool.lock().map(|mut p| p.pop()).unwrap_or(None);
        let mut con = match pooled {
            Some(c) => c,
            None => self.connect()?,
        };
        let begun = redis::cmd("WATCH")
            .arg(&self.place.hash)
            .query::<()>(&mut con)
            .and_then(|()| redis::cmd("MULTI").query::<()>(&mut con));
        if let Err(e) = begun {
            return Err(self.error("WATCH/MULTI", &e));
        }
        let mut queued = Queued {
            map: self,
            con: &mut con,
            pipe: redis::pipe(),
            bytes: 0,
            broken: false,
        };
        let produced = produce(&mut queued).and_then(|()| queued.send());
        if let Err(e) = produced {
            if !queued.broken && redis::cmd("DISCARD").query::<()>(&mut con).is_ok() {
                self.release(con);
            }
            return Err(e);
        }
        match redis::cmd("EXEC").query::<Value>(&mut con) {
            Ok(Value::Nil) => {
                self.release(con);
                Err(Error::new(
                    libc::EAGAIN,
                    format!(
                        "redis {}: another writer changed hash {} during the commit; nothing \
                         was written",
                        self.place.server(),
                        self.place.hash
                    ),
                ))
            }
            Ok(_) => {
                self.release(con);
                Ok(())
            }
            Err(e) => {
                let err = self.error("EXEC", &e);
                log::warn!("{err}; the connection is dropped and made anew on next use");
                Err(err)
            }
        }
    }

    /// Commits in one `MULTI`/`EXEC` the changes `select` keeps, and returns them; fails
    /// with `EAGAIN`, writing nothing, when another writer changed the hash meanwhile.
    fn commit_selected(&self, changes: Vec<Change>, select: Select<'_>) -> Result<Vec<Change>> {
        if self.read_only {
            return Err(Error::read_only("the mount is read-only"));
        }
        let hash = self.place.hash.clone();
        let pooled = self.pool.lock().map(|mut p| p.pop()).unwrap_or(None);
        let mut con = match pooled {
            Some(c) => c,
            None => self.connect()?,
        };
        if let Err(e) = redis::cmd("WATCH").arg(&hash).query::<()>(&mut con) {
            return Err(self.error("WATCH", &e));
        }
        let changes = match select(changes) {
            Ok(c) => c,
            Err(e) => {
                let _ = redis::cmd("UNWATCH").query::<()>(&mut con);
                self.release(con);
                return Err(e);
            }
        };
        let mut pipe = redis::pipe();
        pipe.atomic();
        for (pos, data) in &changes {
            match data {
                Some(d) => pipe
                    .cmd("HSET")
                    .arg(&hash)
                    .arg(block_key(*pos))
                    .arg(d.as_slice()),
                None => pipe.cmd("HDEL").arg(&hash).arg(block_key(*pos)),
            }
            .ignore();
        }
        let result: redis::RedisResult<Value> = pipe.query(&mut con);
        match result {
            Ok(Value::Nil) => {
                self.release(con);
                Err(Error::new(
                    libc::EAGAIN,
                    format!(
                        "redis {}: another writer changed hash {} during the commit; nothing \
                         was written",
                        self.place.server(),
                        hash
                    ),
                ))
            }
            Ok(_) => {
                self.release(con);
                Ok(changes)
            }
            Err(e) => {
                let err = self.error("MULTI/EXEC", &e);
                log::warn!("{err}; the connection is dropped and made anew on next use");
                Err(err)
            }
        }
    }
}
