//! Luanti (formerly Minetest) worlds: map-block codec, text views, stores and the mounted tree.

pub mod accounts_tree;
pub mod auth;
pub mod block;
pub mod blocks;
pub mod codec;
pub mod inspect;
pub mod map_store;
pub mod mod_storage;
pub mod players;
pub mod sqlite_db;
pub mod tree;
pub mod views;
