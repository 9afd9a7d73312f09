//! Luanti (formerly Minetest) worlds: map-block codec, text views, stores and the mounted tree.

pub mod block;
pub mod codec;
pub mod views;
