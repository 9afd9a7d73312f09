//! Text views of Survivalcraft objects: the files a user reads and edits in the tree.
//!
//! Each view renders a decoded object to bytes and parses edited bytes back onto the
//! object it came from (`parse(base, text)`), so everything the file does not show is kept.

pub mod blocks;
pub mod inventory;
pub mod light;
pub mod surface;

/// Splits text into lines numbered from 1 with `\r` and trailing whitespace removed.
fn lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines().enumerate().map(|(i, l)| (i + 1, l.trim_end()))
}

/// Text as UTF-8, or an error at the first bad byte.
fn utf8(text: &[u8]) -> crate::error::Result<&str> {
    std::str::from_utf8(text).map_err(|e| {
        let before = &text[..e.valid_up_to()];
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let col = before.iter().rev().take_while(|&&b| b != b'\n').count() + 1;
        crate::error::Error::at(line, col, "text is not UTF-8")
    })
}
