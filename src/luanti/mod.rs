//! Luanti (formerly Minetest) worlds: map-block codec, text views, stores and the mounted tree.
//!
//! - `codec/`: bytes ⇄ structs (map blocks, player files, Settings syntax, auth.txt lines);
//!   pure, no I/O.
//! - `views/`: decoded blocks ⇄ the text files shown in a block's folder; pure.
//! - `store/`: the containers and their transactions: `map.sqlite`, the players, auth and
//!   mod storage backends `world.mt` names, and the `world.mt` reader.
//! - `cache.rs`: decoded blocks on demand, per-block locks and read-modify-write commits.
//! - `summaries.rs`: what the stats of a block's files need, kept past the cache.
//! - `tree.rs` (+ `tree/`): paths → blocks and accounts (the `Tree` the mount serves).
//! - `inspect.rs`: `worldfs info` and `worldfs check`.

pub mod cache;
pub mod codec;
pub mod index;
pub mod inspect;
pub mod store;
pub mod stored_hashes;
pub mod summaries;
pub mod summary_file;
#[cfg(test)]
pub(crate) mod test_map;
pub mod tree;
pub mod views;
