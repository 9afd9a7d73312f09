//! The map in PostgreSQL (`backend = postgresql`, `pgsql_connection` in `world.mt`).
//!
//! As `MapDatabasePostgreSQL` in the engine's `src/database/database-postgresql.cpp`: one
//! table `blocks(posX, posY, posZ, data BYTEA)` with primary key `(posX, posY, posZ)`, the
//! coordinates `INT` up to 5.6 and `smallint` since (luanti PR #9108); both are read, and a
//! table we create is the newer one, which 5.6 reads and writes as well (it compares and
//! inserts `int4` parameters). A block is written with the engine's own upsert (`INSERT …
//! ON CONFLICT ON CONSTRAINT blocks_pkey DO UPDATE SET data = …`) and deleted with its
//! `DELETE`; every commit is one transaction, which first locks the table against other
//! writers (`SHARE ROW EXCLUSIVE`: readers go on), so what the write-back checks before
//! committing stays true until the commit.
//!
//! A listing is paged by key (`(posX, posY, posZ) > (…) ORDER BY … LIMIT`, the primary key's
//! order), each page streamed row by row and cut at
//! [`LIST_BYTES`](crate::luanti::store::map::LIST_BYTES): memory stays bounded however big
//! the map. A row whose coordinates are no `s16` is never loaded by the engine (it asks for
//! blocks by position) and is left out here too.
//!
//! Every read is a round trip (one: statements are sent with their parameter types, never
//! prepared first), so the reads that show blocks go through a [`ReadAhead`]: a miss reads
//! the blocks that follow in key order in the same round trip (see its module doc).

use postgres::fallible_iterator::FallibleIterator;
use postgres::types::{ToSql, Type};
use postgres::Client;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::{Error, Result};
use crate::luanti::codec::block::BlockPos;
use crate::luanti::store::map::{
    is_last_page, push_listed, too_large, Change, Listed, Produce, Stream, MAX_STORED,
};
use crate::luanti::store::map::{AxisOrder, MapBackend, Select};
use crate::luanti::store::postgres::{create_tables, error, no_table, Server};
use crate::luanti::store::read_ahead::{Filled, ReadAhead, MAX_BYTES};
use crate::luanti::store::world_mt::WorldMt;

/// The table the newest engine creates (`MapDatabasePostgreSQL::createDatabase`).
const MAP_SCHEMA: &str = "CREATE TABLE blocks (posX smallint NOT NULL,\
    posY smallint NOT NULL,posZ smallint NOT NULL,data BYTEA,PRIMARY KEY (posX,posY,posZ));";

/// The engine's upsert (`write_block`, servers since 9.5) and delete (`delete_block`).
const WRITE: &str = "INSERT INTO blocks (posX, posY, posZ, data) VALUES \
    ($1::int4, $2::int4, $3::int4, $4::bytea) ON CONFLICT ON CONSTRAINT blocks_pkey DO \
    UPDATE SET data = $4::bytea";
const DELETE: &str =
    "DELETE FROM blocks WHERE posX = $1::int4 AND posY = $2::int4 AND posZ = $3::int4";

/// The rows whose position is a block the engine can load.
const LOADABLE: &str = "posX BETWEEN -32768 AND 32767 AND posY BETWEEN -32768 AND 32767 \
    AND posZ BETWEEN -32768 AND 32767";

/// The stored data as bytes (NULL as nothing, as the engine reads it), or NULL when longer
/// than [`MAX_STORED`].
fn data_column() -> String {
    format!(
        "CASE WHEN octet_length(data) > {MAX_STORED} THEN NULL ELSE COALESCE(data, ''::bytea) END"
    )
}

/// The listing key of a position: the primary key's order, never 0 (the start).
fn key(p: BlockPos) -> u64 {
    AxisOrder::Xyz.number(p) + 1
}

fn from_key(k: u64) -> BlockPos {
    AxisOrder::Xyz.pos(k.saturating_sub(1))
}

/// A map in PostgreSQL.
pub struct PostgresMap {
    server: Server,
    read_only: bool,
    /// The type of the coordinates (`smallint`, `integer`), for `worldfs info`.
    coordinates: String,
    /// Whether the rows left out of the listing were counted and reported.
    reported: AtomicBool,
    /// Blocks read ahead of walks.
    ahead: ReadAhead,
}

impl PostgresMap {
    /// Connects to the server `pgsql_connection` names; fails clearly when it is down or
    /// when its table `blocks` is not a Luanti map. A database without the table is an empty
    /// map until the first commit creates it, as the engine would on start.
    pub fn open(world_mt: &WorldMt, read_only: bool) -> Result<PostgresMap> {
        let server = Server::open(world_mt, "pgsql_connection")?;
        let columns: Vec<(String, String)> = server.read(|c| {
            let rows = c
                .query(
                    "SELECT attname::text, format_type(atttypid, atttypmod) FROM pg_attribute \
                     WHERE attrelid = to_regclass('blocks') AND attnum > 0 AND NOT attisdropped",
                    &[],
                )
                .map_err(error)?;
            Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
        })?;
        let type_of = |name: &str| {
            columns
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, t)| t.clone())
        };
        let coordinates = match (
            type_of("posx"),
            type_of("posy"),
            type_of("posz"),
            type_of("data"),
        ) {
            _ if columns.is_empty() => "smallint (no table yet)".to_string(),
            (Some(x), Some(_), Some(_), Some(d)) if d == "bytea" => x,
            _ => {
                return Err(Error::unsupported(format!(
                    "PostgreSQL ({}): table blocks is not a Luanti map (no columns posX, posY, \
                     posZ, data BYTEA)",
                    server.shown()
                )))
            }
        };
        Ok(PostgresMap {
            server,
            read_only,
            coordinates,
            reported: AtomicBool::new(false),
            ahead: ReadAhead::default(),
        })
    }

    /// The server and database, without the password.
    pub fn shown(&self) -> &str {
        self.server.shown()
    }

    /// Up to `rows` blocks from `pos` on in key order, in one round trip, cut after
    /// [`MAX_BYTES`] of data beyond the first and before a row too long to read.
    fn fill(&self, pos: BlockPos, rows: usize) -> Result<Filled> {
        let sql = format!(
            "SELECT posX::int4, posY::int4, posZ::int4, {}, octet_length(data) FROM blocks \
             WHERE (posX, posY, posZ) >= ($1::int4, $2::int4, $3::int4) AND {LOADABLE} \
             ORDER BY posX, posY, posZ LIMIT $4::int8",
            data_column()
        );
        let (x, y, z) = (i32::from(pos.x), i32::from(pos.y), i32::from(pos.z));
        let limit = i64::try_from(rows).unwrap_or(i64::MAX);
        self.server.read(|c| {
            let params: [(&(dyn ToSql + Sync), Type); 4] = [
                (&x, Type::INT4),
                (&y, Type::INT4),
                (&z, Type::INT4),
                (&limit, Type::INT8),
            ];
            let mut iter = match c.query_typed_raw(sql.as_str(), params) {
                Ok(iter) => iter,
                Err(e) if no_table(&e) => {
                    return Ok(Filled {
                        rows: Vec::new(),
                        complete_to: u64::MAX,
                    })
                }
                Err(e) => return Err(error(e)),
            };
            let (mut out, mut bytes) = (Vec::new(), 0usize);
            let mut complete_to = u64::MAX;
            while let Some(r) = iter.next().map_err(error)? {
                let at = row_pos(&r)?;
                let k = key(at);
                match r.get::<_, Option<Vec<u8>>>(3) {
                    Some(data) if out.is_empty() || bytes + data.len() <= MAX_BYTES => {
                        bytes += if out.is_empty() { 0 } else { data.len() };
                        out.push((k, data));
                    }
                    Some(_) => {
                        complete_to = k - 1;
                        break;
                    }
                    None if out.is_empty() && at == pos => {
                        return Err(too_large(at, r.get::<_, Option<i32>>(4).map(|n| n as u64)))
                    }
                    None => {
                        complete_to = k - 1;
                        break;
                    }
                }
            }
            if complete_to == u64::MAX && out.len() >= rows {
                complete_to = out.last().map_or(key(pos), |(k, _)| *k);
            }
            Ok(Filled {
                rows: out,
                complete_to,
            })
        })
    }

    fn count_where(&self, condition: &str) -> Result<u64> {
        let sql = format!("SELECT count(*) FROM blocks WHERE {condition}");
        self.server.read(|c| match c.query_one(sql.as_str(), &[]) {
            Ok(r) => Ok(u64::try_from(r.get::<_, i64>(0)).unwrap_or(0)),
            Err(e) if no_table(&e) => Ok(0),
            Err(e) => Err(error(e)),
        })
    }

    fn report_out_of_range(&self) {
        if self.reported.swap(true, Ordering::Relaxed) {
            return;
        }
        match self.out_of_range() {
            Ok(0) => {}
            Ok(n) => log::warn!(
                "PostgreSQL ({}): {n} rows of table blocks have a position no block can have; \
                 they are not shown, and the engine never loads them",
                self.server.shown()
            ),
            Err(e) => log::warn!("counting unusable rows: {e}"),
        }
    }
}

/// The transaction of a streamed commit of [`PostgresMap`]: each blob put is sent to the
/// server at once (it holds them until the commit; a failure rolls them all back).
struct PgStream<'a, 'b> {
    map: &'a PostgresMap,
    tx: &'a mut postgres::Transaction<'b>,
    write: postgres::Statement,
}

impl Stream for PgStream<'_, '_> {
    /// Read on another connection: what is committed, which no other writer can change
    /// while the transaction holds the table's lock; blobs put are not seen before the
    /// commit.
    fn get(&mut self, pos: BlockPos) -> Result<Option<Vec<u8>>> {
        self.map.get(pos)
    }

    fn put(&mut self, pos: BlockPos, data: &[u8]) -> Result<()> {
        let (x, y, z) = (i32::from(pos.x), i32::from(pos.y), i32::from(pos.z));
        self.tx
            .execute(&self.write, &[&x, &y, &z, &data])
            .map_err(error)?;
        Ok(())
    }
}

/// The position in the first three columns of a row.
fn row_pos(r: &postgres::Row) -> Result<BlockPos> {
    let coord = |i: usize| {
        let v: i32 = r.get(i);
        i16::try_from(v).map_err(|_| Error::corrupt(format!("block coordinate {v} out of range")))
    };
    Ok(BlockPos {
        x: coord(0)?,
        y: coord(1)?,
        z: coord(2)?,
    })
}

/// One page of a listing, read row by row until `LIST_BYTES` of data.
fn list_page(c: &mut Client, sql: &str, start: (i32, i32, i32), rows: i64) -> Result<Vec<Listed>> {
    let params: [&(dyn ToSql + Sync); 4] = [&start.0, &start.1, &start.2, &rows];
    let mut iter = match c.query_raw(sql, params) {
        Ok(iter) => iter,
        Err(e) if no_table(&e) => return Ok(Vec::new()),
        Err(e) => return Err(error(e)),
    };
    let (mut out, mut bytes) = (Vec::new(), 0);
    while let Some(r) = iter.next().map_err(error)? {
        let pos = row_pos(&r)?;
        let listed = Listed {
            pos,
            key: key(pos),
            data: r.get(3),
            from_seed: false,
        };
        if push_listed(&mut out, &mut bytes, listed) {
            break;
        }
    }
    Ok(out)
}

impl MapBackend for PostgresMap {
    fn identity(&self) -> PathBuf {
        PathBuf::from(format!("postgresql {}", self.shown()))
    }
    /// What `worldfs info` shows of this map (never the password).
    fn describe(&self) -> Vec<(&'static str, String)> {
        vec![
            ("format", "Luanti world (PostgreSQL)".to_string()),
            ("map", format!("postgresql {}", self.server.shown())),
            ("schema", format!("posX,posY,posZ ({})", self.coordinates)),
        ]
    }

    /// The stored blob of one block, read now.
    fn get(&self, pos: BlockPos) -> Result<Option<Vec<u8>>> {
        let sql = format!(
            "SELECT {}, octet_length(data) FROM blocks \
             WHERE posX = $1::int4 AND posY = $2::int4 AND posZ = $3::int4",
            data_column()
        );
        let row = self.server.read(|c| {
            let (x, y, z) = (i32::from(pos.x), i32::from(pos.y), i32::from(pos.z));
            let params: [(&(dyn ToSql + Sync), Type); 3] =
                [(&x, Type::INT4), (&y, Type::INT4), (&z, Type::INT4)];
            match c.query_typed_opt(sql.as_str(), &params) {
                Ok(row) => {
                    Ok(row.map(|r| (r.get::<_, Option<Vec<u8>>>(0), r.get::<_, Option<i32>>(1))))
                }
                Err(e) if no_table(&e) => Ok(None),
                Err(e) => Err(error(e)),
            }
        })?;
        match row {
            None => Ok(None),
            Some((Some(data), _)) => Ok(Some(data)),
            Some((None, length)) => Err(too_large(pos, length.map(|n| n as u64))),
        }
    }

    /// The stored blob of one block, for showing it: as fresh as the last look at
    /// [`PostgresMap::data_version`], read ahead of a walk.
    fn read_ahead(&self, pos: BlockPos) -> Result<Option<Vec<u8>>> {
        self.ahead
            .get(key(pos), |from, rows| self.fill(from_key(from), rows))
    }

    /// The listing key of a position.
    fn key_of(&self, pos: BlockPos) -> u64 {
        key(pos)
    }

    fn axis_order(&self) -> AxisOrder {
        AxisOrder::Xyz
    }

    /// Up to `limit` blocks after the key `after`, streamed and cut at `LIST_BYTES`.
    fn list(&self, after: u64, limit: usize, with_data: bool) -> Result<Vec<Listed>> {
        let data = if with_data {
            data_column()
        } else {
            "NULL::bytea".to_string()
        };
        let sql = format!(
            "SELECT posX::int4, posY::int4, posZ::int4, {data} FROM blocks \
             WHERE (posX, posY, posZ) > ($1::int4, $2::int4, $3::int4) AND {LOADABLE} \
             ORDER BY posX, posY, posZ LIMIT $4::int8"
        );
        let start = if after == 0 {
            (i32::MIN, i32::MIN, i32::MIN)
        } else {
            let p = from_key(after);
            (i32::from(p.x), i32::from(p.y), i32::from(p.z))
        };
        let rows = i64::try_from(limit).unwrap_or(i64::MAX);
        let listed = self.server.read(|c| list_page(c, &sql, start, rows))?;
        if is_last_page(&listed, limit) {
            self.report_out_of_range();
        }
        Ok(listed)
    }

    /// The number of rows whose position is no block the engine can load.
    fn out_of_range(&self) -> Result<u64> {
        self.count_where(&format!("NOT ({LOADABLE})"))
    }

    /// Number of stored blocks.
    fn count(&self) -> Result<u64> {
        self.count_where("true")
    }

    /// The server's write-ahead log position: it moves with every commit to the cluster
    /// (ours, the engine's, another database's), so it tells when the map may have changed.
    fn data_version(&self) -> Result<i64> {
        if super::snapshot::on() {
            // The snapshot a `--snapshot` mount reads never changes, whatever is written.
            return Ok(0);
        }
        self.server
            .read(|c| {
                let r = c
                    .query_one(
                        "SELECT ((CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() \
                     ELSE pg_current_wal_lsn() END) - '0/0'::pg_lsn)::int8",
                        &[],
                    )
                    .map_err(error)?;
                Ok(r.get::<_, Option<i64>>(0).unwrap_or(0))
            })
            .inspect(|v| self.ahead.seen_version(*v))
    }

    /// Whether the store refuses every change.
    fn read_only(&self) -> bool {
        self.read_only
    }

    /// Runs `produce` inside one transaction that first locks other writers out; each blob
    /// it puts is written at once with the engine's upsert, so the server, not this process,
    /// holds them until the commit (see [`MapBackend::commit_stream`](super::map::MapStore)).
    fn commit_stream(&self, produce: Produce<'_>) -> Result<()> {
        if self.read_only {
            return Err(Error::read_only("the mount is read-only"));
        }
        let committed = self.server.write(move |c| {
            let mut tx = c.transaction().map_err(error)?;
            create_tables(&mut tx, &[("blocks", MAP_SCHEMA)])?;
            tx.batch_execute("LOCK TABLE blocks IN SHARE ROW EXCLUSIVE MODE")
                .map_err(error)?;
            let write = tx.prepare(WRITE).map_err(error)?;
            produce(&mut PgStream {
                map: self,
                tx: &mut tx,
                write,
            })?;
            tx.commit().map_err(error)
        });
        self.ahead.committed();
        committed
    }

    /// Commits in one transaction the changes `select` keeps (run once other writers are
    /// locked out), and returns them.
    fn commit_selected(&self, changes: Vec<Change>, select: Select<'_>) -> Result<Vec<Change>> {
        if self.read_only {
            return Err(Error::read_only("the mount is read-only"));
        }
        let committed = self.server.write(|c| {
            let mut tx = c.transaction().map_err(error)?;
            create_tables(&mut tx, &[("blocks", MAP_SCHEMA)])?;
            tx.batch_execute("LOCK TABLE blocks IN SHARE ROW EXCLUSIVE MODE")
                .map_err(error)?;
            let changes = select(changes)?;
            let write = tx.prepare(WRITE).map_err(error)?;
            let delete = tx.prepare(DELETE).map_err(error)?;
            for (pos, data) in &changes {
                let (x, y, z) = (i32::from(pos.x), i32::from(pos.y), i32::from(pos.z));
                match data {
                    Some(d) => tx.execute(&write, &[&x, &y, &z, d]),
                    None => tx.execute(&delete, &[&x, &y, &z]),
                }
                .map_err(error)?;
            }
            tx.commit().map_err(error)?;
            Ok(changes)
        });
        self.ahead.committed();
        committed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn keys_round_trip_in_primary_key_order(a: (i16, i16, i16), b: (i16, i16, i16)) {
            let p = |(x, y, z)| BlockPos { x, y, z };
            prop_assert_eq!(from_key(key(p(a))), p(a));
            prop_assert!(key(p(a)) > 0);
            prop_assert_eq!(key(p(a)).cmp(&key(p(b))), a.cmp(&b));
        }
    }
}
