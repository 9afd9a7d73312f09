//! Luanti (formerly Minetest) worlds: map-block codec, text views, stores and the mounted tree.

pub mod block;
pub mod codec;
pub mod views;
pub mod auth;
pub mod mod_storage;
pub mod players;
