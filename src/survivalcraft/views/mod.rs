//! Text views of Survivalcraft objects: the files a user reads and edits in the tree.
//!
//! Each view renders a decoded object to bytes and parses edited bytes back onto the
//! object it came from (`parse(base, text)`), so everything the file does not show is kept.

pub mod blocks;
pub mod inventory;
pub mod light;
pub mod surface;

/// What a view says about text that is not UTF-8 (at the first bad byte's position).
const NOT_UTF8: &str = "text is not UTF-8";
