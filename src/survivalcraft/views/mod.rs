//! Text views of Survivalcraft objects: the files a user reads and edits in the tree.
//!
//! Each view renders a decoded object to bytes and parses edited bytes back onto the
//! object it came from (`parse(base, text)`), so everything the file does not show is kept.

pub mod blocks;
pub mod inventory;
pub mod light;
pub mod surface;

use crate::error::Result;
use crate::text::{self, Line};

/// The lines of a view file that hold data (without trailing blanks; blank lines and lines
/// starting with `#` left out), and the number of the line after the last one.
fn data_lines(text: &[u8]) -> Result<(impl Iterator<Item = Line<'_>>, usize)> {
    let text = text::decode(text, "text is not UTF-8")?;
    let lines = text::numbered(text)
        .map(Line::trim_end)
        .filter(|l| !l.is_blank_or_comment());
    Ok((lines, text.lines().count() + 1))
}
