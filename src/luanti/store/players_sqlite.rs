//! `players.sqlite`: tables `player`, `player_inventories`, `player_inventory_items` and
//! `player_metadata`, in both the current schema (TEXT/NUMERIC columns) and the older one
//! (VARCHAR(50)/NUMERIC(11,4), nullable metadata values) — the column names are the same, so
//! the statements here work on both.
//!
//! Saving a player rewrites its row and all its child rows in one transaction, deleting the
//! child rows itself (the engine enables foreign keys per connection; worldfs does not rely on
//! them). Every slot is a row, an empty slot is `''`, `inv_id` is the list's index.

use std::path::Path;

use rusqlite::types::ValueRef;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use crate::error::{Error, Result};
use crate::luanti::codec::block::{Inventory, InventoryList, ItemStack};
use crate::luanti::codec::inventory::{parse_itemstring, serialize_itemstring, MAX_SLOTS};
use crate::luanti::codec::player::Player;
use crate::luanti::store::players::PlayerBackend;
use crate::luanti::store::sqlite;

/// The schema a new `players.sqlite` gets (the engine's current one).
const CREATE_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS `player` (`name` TEXT NOT NULL,`pitch` NUMERIC NOT NULL,`yaw` NUMERIC NOT NULL,`posX` NUMERIC NOT NULL,`posY` NUMERIC NOT NULL,`posZ` NUMERIC NOT NULL,`hp` INT NOT NULL,`breath` INT NOT NULL,`creation_date` DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,`modification_date` DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,PRIMARY KEY (`name`));
CREATE TABLE IF NOT EXISTS `player_metadata` (`player` TEXT NOT NULL,`metadata` TEXT NOT NULL,`value` TEXT NOT NULL,PRIMARY KEY(`player`, `metadata`),FOREIGN KEY (`player`) REFERENCES player (`name`) ON DELETE CASCADE );
CREATE TABLE IF NOT EXISTS `player_inventories` (`player` TEXT NOT NULL,`inv_id` INT NOT NULL,`inv_width` INT NOT NULL,`inv_name` TEXT NOT NULL DEFAULT '',`inv_size` INT NOT NULL,PRIMARY KEY(player, inv_id),FOREIGN KEY (`player`) REFERENCES player (`name`) ON DELETE CASCADE );
CREATE TABLE IF NOT EXISTS `player_inventory_items` (`player` TEXT NOT NULL,`inv_id` INT NOT NULL,`slot_id` INT NOT NULL,`item` TEXT NOT NULL DEFAULT '',PRIMARY KEY(player, inv_id, slot_id),FOREIGN KEY (`player`) REFERENCES player (`name`) ON DELETE CASCADE );
";

/// An open `players.sqlite`.
pub struct SqlitePlayers {
    conn: Connection,
}

impl SqlitePlayers {
    /// Opens an existing database.
    pub fn open(path: &Path, read_only: bool) -> Result<SqlitePlayers> {
        Ok(SqlitePlayers {
            conn: sqlite::open(path, read_only)?,
        })
    }

    /// Opens the database, creating it with the current schema when it does not exist.
    pub fn open_or_create(path: &Path) -> Result<SqlitePlayers> {
        Ok(SqlitePlayers {
            conn: sqlite::open_or_create(path, CREATE_SCHEMA)?,
        })
    }

    /// SQLite's `PRAGMA data_version`: changes when another connection commits.
    pub fn data_version(&self) -> Result<i64> {
        sqlite::data_version(&self.conn)
    }

    /// Whether a player of that name exists.
    pub fn exists(&self, name: &str) -> Result<bool> {
        Ok(self
            .conn
            .query_row("SELECT 1 FROM `player` WHERE `name` = ?1", [name], |_| {
                Ok(())
            })
            .optional()?
            .is_some())
    }
}

fn delete_children(conn: &Connection, name: &str) -> Result<()> {
    for table in [
        "player_inventories",
        "player_inventory_items",
        "player_metadata",
    ] {
        conn.execute(
            &format!("DELETE FROM `{table}` WHERE `player` = ?1"),
            [name],
        )?;
    }
    Ok(())
}

fn write_children(conn: &Connection, player: &Player) -> Result<()> {
    delete_children(conn, &player.name)?;
    let mut add_list = conn.prepare(
        "INSERT INTO `player_inventories` (`player`, `inv_id`, `inv_width`, `inv_name`, `inv_size`) \
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )?;
    let mut add_item = conn.prepare(
        "INSERT INTO `player_inventory_items` (`player`, `inv_id`, `slot_id`, `item`) \
         VALUES (?1, ?2, ?3, ?4)",
    )?;
    for (inv_id, list) in player.inventory.lists.iter().enumerate() {
        add_list.execute(params![
            player.name,
            inv_id as i64,
            list.width,
            list.name,
            list.slots.len() as i64
        ])?;
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
            add_item.execute(params![player.name, inv_id as i64, slot_id as i64, text])?;
        }
    }
    let mut add_meta = conn.prepare(
        "INSERT INTO `player_metadata` (`player`, `metadata`, `value`) VALUES (?1, ?2, ?3)",
    )?;
    for (key, value) in &player.metadata {
        add_meta.execute(params![player.name, key, value])?;
    }
    Ok(())
}

/// Text stored in a TEXT (or BLOB) column; NULL reads as empty (old schemas allow it).
fn text(value: ValueRef<'_>, what: &str) -> Result<String> {
    let bytes = match value {
        ValueRef::Null => return Ok(String::new()),
        ValueRef::Text(t) | ValueRef::Blob(t) => t,
        ValueRef::Integer(i) => return Ok(i.to_string()),
        ValueRef::Real(f) => return Ok(f.to_string()),
    };
    String::from_utf8(bytes.to_vec()).map_err(|_| Error::corrupt(format!("{what} is not UTF-8")))
}

fn number(value: ValueRef<'_>, what: &str) -> Result<f64> {
    match value {
        ValueRef::Integer(i) => Ok(i as f64),
        ValueRef::Real(f) => Ok(f),
        ValueRef::Text(t) => std::str::from_utf8(t)
            .ok()
            .and_then(|s| s.trim().parse::<f64>().ok())
            .ok_or_else(|| Error::corrupt(format!("{what} is not a number"))),
        _ => Err(Error::corrupt(format!("{what} is not a number"))),
    }
}

/// An integer column clamped to u16, as the engine loads hp and breath.
fn clamped_u16(value: ValueRef<'_>, what: &str) -> Result<u16> {
    let v = number(value, what)?;
    Ok(v.clamp(0.0, f64::from(u16::MAX)) as u16)
}

fn load(conn: &Connection, name: &str) -> Result<Player> {
    let mut stmt = conn.prepare(
        "SELECT `pitch`, `yaw`, `posX`, `posY`, `posZ`, `hp`, `breath` FROM `player` WHERE `name` = ?1",
    )?;
    let mut rows = stmt.query([name])?;
    let row = rows
        .next()?
        .ok_or_else(|| Error::no_such_object(format!("no player {name:?}")))?;
    let f = |i: usize, what: &str| -> Result<f32> { Ok(number(row.get_ref(i)?, what)? as f32) };
    let mut player = Player {
        name: name.to_string(),
        pitch: f(0, "pitch")?,
        yaw: f(1, "yaw")?,
        position: [f(2, "posX")?, f(3, "posY")?, f(4, "posZ")?],
        hp: clamped_u16(row.get_ref(5)?, "hp")?,
        breath: clamped_u16(row.get_ref(6)?, "breath")?,
        ..Player::default()
    };
    player.inventory = load_inventory(conn, name)?;
    let mut meta =
        conn.prepare("SELECT `metadata`, `value` FROM `player_metadata` WHERE `player` = ?1")?;
    let mut rows = meta.query([name])?;
    while let Some(row) = rows.next()? {
        let key = text(row.get_ref(0)?, "metadata key")?;
        let value = text(row.get_ref(1)?, "metadata value")?;
        player.metadata.insert(key, value);
    }
    Ok(player)
}

fn load_inventory(conn: &Connection, name: &str) -> Result<Inventory> {
    let mut lists_stmt = conn.prepare(
        "SELECT `inv_id`, `inv_width`, `inv_name`, `inv_size` FROM `player_inventories` \
         WHERE `player` = ?1 ORDER BY `inv_id`",
    )?;
    let mut items_stmt = conn.prepare(
        "SELECT `slot_id`, `item` FROM `player_inventory_items` WHERE `player` = ?1 AND `inv_id` = ?2",
    )?;
    let mut inventory = Inventory::default();
    let mut budget = MAX_SLOTS as f64;
    let mut rows = lists_stmt.query([name])?;
    while let Some(row) = rows.next()? {
        let inv_id: i64 = row.get(0)?;
        let width = number(row.get_ref(1)?, "inv_width")?;
        let list_name = text(row.get_ref(2)?, "inv_name")?;
        let size = number(row.get_ref(3)?, "inv_size")?;
        if !(0.0..=budget).contains(&size) || !(0.0..=f64::from(u32::MAX)).contains(&width) {
            return Err(Error::corrupt(format!(
                "inventory list {list_name:?}: size {size} or width {width} out of range"
            )));
        }
        budget -= size;
        let mut list = InventoryList {
            name: list_name,
            width: width as u32,
            slots: vec![ItemStack::default(); size as usize],
        };
        let mut items = items_stmt.query(params![name, inv_id])?;
        while let Some(item) = items.next()? {
            let slot: i64 = item.get(0)?;
            let itemstring = text(item.get_ref(1)?, "item")?;
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

impl PlayerBackend for SqlitePlayers {
    fn backend(&self) -> &'static str {
        "sqlite3"
    }

    /// The names of all players, sorted.
    fn list(&self) -> Result<Vec<String>> {
        let mut stmt = self
            .conn
            .prepare("SELECT `name` FROM `player` ORDER BY `name`")?;
        let names = stmt
            .query_map([], |r| r.get::<_, String>(0))?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(names)
    }

    /// Loads one player.
    fn load(&self, name: &str) -> Result<Player> {
        load(&self.conn, name).map_err(|e| e.context(format!("player {name:?}")))
    }

    /// Replaces an existing player, all tables in one transaction.
    fn save(&mut self, player: &Player) -> Result<()> {
        player.validate()?;
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let changed = tx.execute(
            "UPDATE `player` SET `pitch` = ?1, `yaw` = ?2, `posX` = ?3, `posY` = ?4, `posZ` = ?5, \
             `hp` = ?6, `breath` = ?7, `modification_date` = CURRENT_TIMESTAMP WHERE `name` = ?8",
            params![
                f64::from(player.pitch),
                f64::from(player.yaw),
                f64::from(player.position[0]),
                f64::from(player.position[1]),
                f64::from(player.position[2]),
                player.hp,
                player.breath,
                player.name
            ],
        )?;
        if changed == 0 {
            return Err(Error::no_such_object(format!(
                "no player {:?}",
                player.name
            )));
        }
        write_children(&tx, player)?;
        tx.commit()?;
        Ok(())
    }

    /// Adds a new player, all tables in one transaction.
    fn create(&mut self, player: &Player) -> Result<()> {
        player.validate()?;
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let exists = tx
            .query_row(
                "SELECT 1 FROM `player` WHERE `name` = ?1",
                [&player.name],
                |_| Ok(()),
            )
            .optional()?
            .is_some();
        if exists {
            return Err(Error::exists(format!("player {:?} exists", player.name)));
        }
        tx.execute(
            "INSERT INTO `player` (`name`, `pitch`, `yaw`, `posX`, `posY`, `posZ`, `hp`, `breath`) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                player.name,
                f64::from(player.pitch),
                f64::from(player.yaw),
                f64::from(player.position[0]),
                f64::from(player.position[1]),
                f64::from(player.position[2]),
                player.hp,
                player.breath
            ],
        )?;
        write_children(&tx, player)?;
        tx.commit()?;
        Ok(())
    }

    /// Deletes a player and all its rows in one transaction.
    fn delete(&mut self, name: &str) -> Result<()> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        delete_children(&tx, name)?;
        if tx.execute("DELETE FROM `player` WHERE `name` = ?1", [name])? == 0 {
            return Err(Error::no_such_object(format!("no player {name:?}")));
        }
        tx.commit()?;
        Ok(())
    }
}
