//! Reversible escaping of object names (metadata keys, player names, mod-storage keys) into
//! file names.
//!
//! A name becomes a file name as it is, unless it contains `/`, NUL or `%`, is empty, or is
//! `.`/`..`: then those bytes (and, for `.`/`..`, the dots) are percent-escaped as `%XX`.
//! Bytes that are not UTF-8 are escaped too, so every file name is valid UTF-8 and every
//! escaped name decodes back to exactly the original bytes. No escaped name can contain a
//! path separator, so no name reaches outside its folder in either direction.

use crate::error::{Error, Result};

/// The file name for an object name.
pub fn escape(name: &[u8]) -> String {
    if name.is_empty() {
        return "%".to_string();
    }
    if name == b"." || name == b".." {
        return "%2E".repeat(name.len());
    }
    let mut out = String::with_capacity(name.len());
    for chunk in name.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '/' | '%' | '\0' => out.push_str(&format!("%{:02X}", c as u32)),
                _ => out.push(c),
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The object name for a file name; rejects names that `escape` never produces.
pub fn unescape(file_name: &str) -> Result<Vec<u8>> {
    if file_name == "%" {
        return Ok(Vec::new());
    }
    let bytes = file_name.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| {
                    Error::invalid(format!(
                        "file name {file_name:?}: '%' must be followed by two hex digits"
                    ))
                })?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn plain_names_stay_plain() {
        assert_eq!(escape(b"infotext"), "infotext");
        assert_eq!(escape("héllo wörld".as_bytes()), "héllo wörld");
    }

    #[test]
    fn dangerous_names_are_escaped() {
        assert_eq!(escape(b".."), "%2E%2E");
        assert_eq!(escape(b"."), "%2E");
        assert_eq!(escape(b"a/b"), "a%2Fb");
        assert_eq!(escape(b"50%"), "50%25");
        assert_eq!(escape(b"a\0b"), "a%00b");
        assert_eq!(escape(b""), "%");
        assert_eq!(escape(b"\xff"), "%FF");
    }

    #[test]
    fn bad_escapes_are_rejected() {
        assert!(unescape("50%").is_err());
        assert!(unescape("%G0").is_err());
    }

    proptest! {
        #[test]
        fn escape_round_trips(name in proptest::collection::vec(any::<u8>(), 0..40)) {
            let file = escape(&name);
            prop_assert!(!file.contains('/'));
            prop_assert!(!file.contains('\0'));
            prop_assert!(file != "." && file != ".." && !file.is_empty());
            prop_assert_eq!(unescape(&file).unwrap(), name);
        }
    }
}
