//! Players in PostgreSQL (`player_backend = postgresql`, `pgsql_player_connection`).
//!
//! As `PlayerDatabasePostgreSQL` in the engine's `src/database/database-postgresql.cpp`:
//! tables `player(name, pitch, yaw, posX, posY, posZ NUMERIC(15, 7), hp, breath INT, …)`,
//! `player_inventories(player, inv_id, inv_width, inv_name, inv_size)`,
//! `player_inventory_items(player, inv_id, slot_id, item)` and
//! `player_metadata(player, attr, value)`, children deleted with their player (`ON DELETE
//! CASCADE`). Saving is the engine's `savePlayer`: in one transaction, its upsert of the
//! player row (`save_player`), then every inventory list, every slot (an empty one as `''`)
//! and every metadata entry deleted and written again. The numbers are passed as `float8`
//! (the engine passes its `ftos` text, six significant digits): the column keeps what was
//! written to its seven decimals, so a player file reads back as it was saved.

use postgres::Client;

use crate::error::{Error, Result};
use crate::luanti::codec::block::{Inventory, InventoryList, ItemStack};
use crate::luanti::codec::inventory::{parse_itemstring, serialize_itemstring, MAX_SLOTS};
use crate::luanti::codec::player::Player;
use crate::luanti::store::players::PlayerBackend;
use crate::luanti::store::postgres::{create_tables, error, no_table, Server};
use crate::luanti::store::world_mt::WorldMt;

/// The engine's tables (`PlayerDatabasePostgreSQL::createDatabase`).
const TABLES: [(&str, &str); 4] = [
    (
        "player",
        "CREATE TABLE player (name VARCHAR(60) NOT NULL,pitch NUMERIC(15, 7) NOT NULL,\
         yaw NUMERIC(15, 7) NOT NULL,posX NUMERIC(15, 7) NOT NULL,posY NUMERIC(15, 7) NOT NULL,\
         posZ NUMERIC(15, 7) NOT NULL,hp INT NOT NULL,breath INT NOT NULL,\
         creation_date TIMESTAMP WITHOUT TIME ZONE NOT NULL DEFAULT NOW(),\
         modification_date TIMESTAMP WITHOUT TIME ZONE NOT NULL DEFAULT NOW(),\
         PRIMARY KEY (name));",
    ),
    (
        "player_inventories",
        "CREATE TABLE player_inventories (player VARCHAR(60) NOT NULL,inv_id INT NOT NULL,\
         inv_width INT NOT NULL,inv_name TEXT NOT NULL DEFAULT '',inv_size INT NOT NULL,\
         PRIMARY KEY(player, inv_id),CONSTRAINT player_inventories_fkey FOREIGN KEY (player) \
         REFERENCES player (name) ON DELETE CASCADE);",
    ),
    (
        "player_inventory_items",
        "CREATE TABLE player_inventory_items (player VARCHAR(60) NOT NULL,inv_id INT NOT NULL,\
         slot_id INT NOT NULL,item TEXT NOT NULL DEFAULT '',PRIMARY KEY(player, inv_id, slot_id),\
         CONSTRAINT player_inventory_items_fkey FOREIGN KEY (player) REFERENCES \
         player (name) ON DELETE CASCADE);",
    ),
    (
        "player_metadata",
        "CREATE TABLE player_metadata (player VARCHAR(60) NOT NULL,attr VARCHAR(256) NOT NULL,\
         value TEXT,PRIMARY KEY(player, attr),CONSTRAINT player_metadata_fkey FOREIGN KEY \
         (player) REFERENCES player (name) ON DELETE CASCADE);",
    ),
];

/// The engine's `save_player` upsert, its numbers passed as `float8`.
const SAVE_PLAYER: &str = "INSERT INTO player(name, pitch, yaw, posX, posY, posZ, hp, breath) \
    VALUES ($1, $2::float8, $3::float8, $4::float8, $5::float8, $6::float8, $7::int, $8::int)\
    ON CONFLICT ON CONSTRAINT player_pkey DO UPDATE SET pitch = $2::float8, yaw = $3::float8, \
    posX = $4::float8, posY = $5::float8, posZ = $6::float8, hp = $7::int, breath = $8::int, \
    modification_date = NOW()";

/// Players in PostgreSQL.
pub struct PostgresPlayers {
    server: Server,
}

impl PostgresPlayers {
    /// Connects to the server `pgsql_player_connection` names.
    pub fn open(world_mt: &WorldMt) -> Result<PostgresPlayers> {
        Ok(PostgresPlayers {
            server: Server::open(world_mt, "pgsql_player_connection")?,
        })
    }

    /// The server and database, without the password.
    pub fn shown(&self) -> &str {
        self.server.shown()
    }

    fn write(&mut self, player: &Player, existing: bool) -> Result<()> {
        player.validate()?;
        self.server.write(|c| {
            let mut tx = c.transaction().map_err(error)?;
            create_tables(&mut tx, &TABLES)?;
            let found = tx
                .query_opt(
                    "SELECT 1 FROM player WHERE name = $1 FOR UPDATE",
                    &[&player.name],
                )
                .map_err(error)?
                .is_some();
            match (existing, found) {
                (true, false) => {
                    return Err(Error::no_such_object(format!(
                        "no player {:?}",
                        player.name
                    )))
                }
                (false, true) => {
                    return Err(Error::exists(format!("player {:?} exists", player.name)))
                }
                _ => {}
            }
            let (hp, breath) = (i32::from(player.hp), i32::from(player.breath));
            tx.execute(
                SAVE_PLAYER,
                &[
                    &player.name,
                    &f64::from(player.pitch),
                    &f64::from(player.yaw),
                    &f64::from(player.position[0]),
                    &f64::from(player.position[1]),
                    &f64::from(player.position[2]),
                    &hp,
                    &breath,
                ],
            )
            .map_err(error)?;
            write_children(&mut tx, player)?;
            tx.commit().map_err(error)
        })
    }
}

/// The engine's `savePlayer` after the player row: lists, slots and metadata rewritten.
fn write_children(tx: &mut postgres::Transaction<'_>, player: &Player) -> Result<()> {
    let name = &player.name;
    for sql in [
        "DELETE FROM player_inventories WHERE player = $1",
        "DELETE FROM player_inventory_items WHERE player = $1",
        "DELETE FROM player_metadata WHERE player = $1",
    ] {
        tx.execute(sql, &[name]).map_err(error)?;
    }
    let add_list = tx
        .prepare(
            "INSERT INTO player_inventories (player, inv_id, inv_width, inv_name, inv_size) \
             VALUES ($1, $2::int, $3::int, $4, $5::int)",
        )
        .map_err(error)?;
    let add_item = tx
        .prepare(
            "INSERT INTO player_inventory_items (player, inv_id, slot_id, item) VALUES \
             ($1, $2::int, $3::int, $4)",
        )
        .map_err(error)?;
    let int = |v: usize| i32::try_from(v).map_err(|_| Error::invalid("too many slots"));
    for (inv_id, list) in player.inventory.lists.iter().enumerate() {
        let width = i32::try_from(list.width)
            .map_err(|_| Error::invalid(format!("list {:?}: width too large", list.name)))?;
        tx.execute(
            &add_list,
            &[
                name,
                &int(inv_id)?,
                &width,
                &list.name,
                &int(list.slots.len())?,
            ],
        )
        .map_err(error)?;
        for (slot_id, item) in list.slots.iter().enumerate() {
            let text = if item.name.is_empty() {
                Vec::new()
            } else {
                serialize_itemstring(item)
            };
            let text = String::from_utf8(text).map_err(|_| {
                Error::invalid(format!(
                    "list {:?} slot {slot_id}: item is not valid UTF-8 text",
                    list.name
                ))
            })?;
            tx.execute(&add_item, &[name, &int(inv_id)?, &int(slot_id)?, &text])
                .map_err(error)?;
        }
    }
    let add_meta = tx
        .prepare("INSERT INTO player_metadata (player, attr, value) VALUES ($1, $2, $3)")
        .map_err(error)?;
    for (key, value) in &player.metadata {
        tx.execute(&add_meta, &[name, key, value]).map_err(error)?;
    }
    Ok(())
}

/// A value clamped to u16, as the engine loads hp and breath.
fn clamped_u16(v: i32) -> u16 {
    v.clamp(0, i32::from(u16::MAX)) as u16
}

fn load(c: &mut Client, name: &str) -> Result<Player> {
    let row = match c.query_opt(
        "SELECT pitch::float8, yaw::float8, posX::float8, posY::float8, posZ::float8, hp, breath \
         FROM player WHERE name = $1",
        &[&name],
    ) {
        Ok(row) => row,
        Err(e) if no_table(&e) => None,
        Err(e) => return Err(error(e)),
    };
    let row = row.ok_or_else(|| Error::no_such_object(format!("no player {name:?}")))?;
    let f = |i: usize| row.get::<_, f64>(i) as f32;
    let mut player = Player {
        name: name.to_string(),
        pitch: f(0),
        yaw: f(1),
        position: [f(2), f(3), f(4)],
        hp: clamped_u16(row.get(5)),
        breath: clamped_u16(row.get(6)),
        ..Player::default()
    };
    player.inventory = load_inventory(c, name)?;
    let rows = c
        .query(
            "SELECT attr::text, value FROM player_metadata WHERE player = $1",
            &[&name],
        )
        .map_err(error)?;
    for r in rows {
        let value: Option<String> = r.get(1);
        player.metadata.insert(r.get(0), value.unwrap_or_default());
    }
    Ok(player)
}

fn load_inventory(c: &mut Client, name: &str) -> Result<Inventory> {
    let lists = c
        .query(
            "SELECT inv_id, inv_width, inv_name, inv_size FROM player_inventories \
             WHERE player = $1 ORDER BY inv_id",
            &[&name],
        )
        .map_err(error)?;
    let mut inventory = Inventory::default();
    let mut budget = i64::try_from(MAX_SLOTS).unwrap_or(i64::MAX);
    for row in lists {
        let (inv_id, width, list_name, size): (i32, i32, String, i32) =
            (row.get(0), row.get(1), row.get(2), row.get(3));
        if !(0..=budget).contains(&i64::from(size)) || width < 0 {
            return Err(Error::corrupt(format!(
                "inventory list {list_name:?}: size {size} or width {width} out of range"
            )));
        }
        budget -= i64::from(size);
        let mut list = InventoryList {
            name: list_name,
            width: width.unsigned_abs(),
            slots: vec![ItemStack::default(); size.unsigned_abs() as usize],
        };
        let items = c
            .query(
                "SELECT slot_id, item FROM player_inventory_items WHERE player = $1 AND \
                 inv_id = $2::int",
                &[&name, &inv_id],
            )
            .map_err(error)?;
        for item in items {
            let (slot, itemstring): (i32, String) = (item.get(0), item.get(1));
            if itemstring.is_empty() {
                continue;
            }
            let stack = parse_itemstring(itemstring.as_bytes()).map_err(|e| {
                Error::corrupt(format!("list {:?} slot {slot}: {}", list.name, e.message()))
            })?;
            let target = usize::try_from(slot)
                .ok()
                .and_then(|s| list.slots.get_mut(s))
                .ok_or_else(|| {
                    Error::corrupt(format!(
                        "list {:?}: slot {slot} is outside its size",
                        list.name
                    ))
                })?;
            *target = stack;
        }
        inventory.lists.push(list);
    }
    Ok(inventory)
}

impl PlayerBackend for PostgresPlayers {
    fn backend(&self) -> &'static str {
        "postgresql"
    }

    /// The names of all players, sorted.
    fn list(&self) -> Result<Vec<String>> {
        self.server
            .read(|c| match c.query("SELECT name::text FROM player", &[]) {
                Ok(rows) => {
                    let mut names: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
                    names.sort();
                    Ok(names)
                }
                Err(e) if no_table(&e) => Ok(Vec::new()),
                Err(e) => Err(error(e)),
            })
    }

    /// Loads one player.
    fn load(&self, name: &str) -> Result<Player> {
        self.server
            .read(|c| load(c, name))
            .map_err(|e| e.context(format!("player {name:?}")))
    }

    /// Replaces an existing player, all tables in one transaction.
    fn save(&mut self, player: &Player) -> Result<()> {
        self.write(player, true)
    }

    /// Adds a new player, all tables in one transaction.
    fn create(&mut self, player: &Player) -> Result<()> {
        self.write(player, false)
    }

    /// Deletes a player; its rows go with it (`ON DELETE CASCADE`, deleted here as well).
    fn delete(&mut self, name: &str) -> Result<()> {
        self.server.write(|c| {
            let mut tx = c.transaction().map_err(error)?;
            for table in [
                "player_inventories",
                "player_inventory_items",
                "player_metadata",
            ] {
                match tx.execute(&format!("DELETE FROM {table} WHERE player = $1"), &[&name]) {
                    Ok(_) => {}
                    Err(e) if no_table(&e) => {
                        return Err(Error::no_such_object(format!("no player {name:?}")))
                    }
                    Err(e) => return Err(error(e)),
                }
            }
            let deleted = tx
                .execute("DELETE FROM player WHERE name = $1", &[&name])
                .map_err(error)?;
            if deleted == 0 {
                return Err(Error::no_such_object(format!("no player {name:?}")));
            }
            tx.commit().map_err(error)
        })
    }
}
