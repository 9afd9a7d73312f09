//! Reversible escaping of object names (metadata keys, player names, mod-storage keys) into
//! file names.
//!
//! A name becomes a file name as it is, unless it contains `/`, `%` or a control character
//! (NUL to 0x1F and DEL: a newline in a name breaks `ls | head` and every line-based tool), is
//! empty, or is `.`/`..`: then those bytes (and, for `.`/`..`, the dots) are percent-escaped
//! as `%XX` (a newline is `%0A`).
//! Bytes that are not UTF-8 are escaped too, so every file name is valid UTF-8 and every
//! escaped name decodes back to exactly the original bytes. No escaped name can contain a
//! path separator, so no name reaches outside its folder in either direction.
//!
//! A file name has at most [`NAME_MAX`] (255) bytes, but a game stores longer keys (mod
//! storage, metadata fields). Such a name is shown in its long form: the start of its
//! escaped form, `%#` and the 16 hexadecimal digits of a 64-bit hash of the whole name
//! (FNV-1a), 255 bytes in all. `%#` appears in no other escaped name, so the two forms never
//! meet. A long form does not hold the whole name: it is reversed by looking the name up
//! among the names stored in its folder ([`find`]), so it opens, changes, renames and removes
//! the stored object, but cannot make a new one.

use crate::error::{Error, Result};
use crate::storekit::mtimes::content_hash;

/// Whether `name` is exactly a temporary that a tool makes next to the file it edits, in a
/// folder where every other name is a stored key (mod storage, metadata fields): `sed -i`'s
/// `sedXXXXXX`, rsync's `.NAME.XXXXXX`, vim's swap files `.NAME.swp` (`.swo`, …, `.swpx`),
/// backup `NAME~` and write test `4913`. Such a file is held by the core until it is renamed
/// over a key (which stores its content under that key); every other name is a key.
pub fn is_tool_temporary(name: &str) -> bool {
    let alnum6 = |s: &str| s.len() == 6 && s.bytes().all(|b| b.is_ascii_alphanumeric());
    let sed = name.strip_prefix("sed").is_some_and(alnum6);
    let dotted = name
        .strip_prefix('.')
        .and_then(|rest| rest.rsplit_once('.'))
        .filter(|(file, _)| !file.is_empty());
    let rsync = dotted.is_some_and(|(_, suffix)| alnum6(suffix));
    // `.swpx` is vim's probe of whether the file system keeps long swap names.
    let vim_swap = dotted.is_some_and(|(_, suffix)| {
        (suffix.len() == 3 && suffix.starts_with("sw") && suffix.as_bytes()[2].is_ascii_lowercase())
            || suffix == "swpx"
    });
    let backup = name.len() > 1 && name.ends_with('~');
    sed || rsync || vim_swap || backup || name == "4913"
}

/// The longest file name, in bytes (Linux `NAME_MAX`).
pub const NAME_MAX: usize = 255;

/// What separates the start of a long name from its hash.
const LONG_MARK: &str = "%#";
/// Hexadecimal digits of the hash of a long name.
const HASH_DIGITS: usize = 16;

/// The hash of a long name: FNV-1a ([`content_hash`]), stable across builds and machines,
/// so a long form never changes.
fn hash(name: &[u8]) -> u64 {
    content_hash(name)
}

/// Whether `file_name` is the long form of a name (see the module documentation): it ends
/// in `%#` and 16 hexadecimal digits, which no short form can (`%` starts `%XX` there).
pub fn is_long(file_name: &str) -> bool {
    let Some(split) = file_name.len().checked_sub(HASH_DIGITS) else {
        return false;
    };
    file_name
        .get(..split)
        .is_some_and(|start| start.ends_with(LONG_MARK))
        && file_name
            .get(split..)
            .is_some_and(|h| h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

/// The stored name, among `names`, whose file name is `file_name`: for a long form, the one
/// it was made from; for any other file name, the name it unescapes to, if stored.
pub fn find<I>(file_name: &str, names: I) -> Option<I::Item>
where
    I: IntoIterator,
    I::Item: AsRef<[u8]>,
{
    names.into_iter().find(|n| escape(n.as_ref()) == file_name)
}

/// The long form of a name whose escaped form `escaped` is longer than [`NAME_MAX`].
fn long_form(name: &[u8], escaped: &str) -> String {
    let mut end = NAME_MAX - LONG_MARK.len() - HASH_DIGITS;
    // Cut at a character boundary and never inside a `%XX` escape.
    while !escaped.is_char_boundary(end) || escaped.as_bytes()[end - 2..end].contains(&b'%') {
        end -= 1;
    }
    format!("{}{LONG_MARK}{:016x}", &escaped[..end], hash(name))
}

/// The file name for an object name.
pub fn escape(name: &[u8]) -> String {
    let escaped = escape_short(name);
    if escaped.len() > NAME_MAX {
        long_form(name, &escaped)
    } else {
        escaped
    }
}

/// The escaped form of a name, whatever its length.
fn escape_short(name: &[u8]) -> String {
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
                '/' | '%' => out.push_str(&format!("%{:02X}", c as u32)),
                c if c.is_ascii_control() => out.push_str(&format!("%{:02X}", c as u32)),
                _ => out.push(c),
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The object name for a file name; rejects names that `escape` never produces, and long
/// forms, which only [`find`] reverses.
pub fn unescape(file_name: &str) -> Result<Vec<u8>> {
    if file_name == "%" {
        return Ok(Vec::new());
    }
    if is_long(file_name) {
        return Err(Error::invalid(format!(
            "file name {:?}…: the long form of a name of more than {NAME_MAX} bytes names \
             only a stored object (a new one needs its whole name, too long for a file name)",
            crate::error::excerpt(file_name)
        )));
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
        } else if bytes[i].is_ascii_control() {
            // `escape` writes every control character as `%XX`: one file name per object.
            return Err(Error::invalid(format!(
                "file name {file_name:?}: a control character in a name is written %{:02X}",
                bytes[i]
            )));
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
        assert_eq!(escape(b"line\nnext"), "line%0Anext");
        assert_eq!(escape(b"tab\there\r\x1b\x7f"), "tab%09here%0D%1B%7F");
        assert_eq!(unescape("line%0Anext").unwrap(), b"line\nnext");
    }

    #[test]
    fn bad_escapes_are_rejected() {
        assert!(unescape("50%").is_err());
        assert!(unescape("%G0").is_err());
        assert!(unescape("line\nnext").is_err(), "only %0A names a newline");
    }

    /// Issue "Nothing lost", point 8: names whose file name would pass 255 bytes.
    #[test]
    fn long_names_get_a_long_form_found_among_stored_names() {
        let key = vec![b'k'; 300];
        let file = escape(&key);
        assert_eq!(file.len(), NAME_MAX, "{file}");
        assert!(file.starts_with("kkkk") && is_long(&file), "{file}");
        assert!(unescape(&file).is_err());
        let other = [vec![b'k'; 299], b"k".repeat(301), key.clone()];
        assert_eq!(find(&file, &other), Some(&key));
        assert_eq!(find(&file, &other[..2]), None);
        // Escapes are never cut, multibyte characters neither.
        for unit in ["/", "é", "€", "%", "\u{10348}"] {
            for n in 60..90 {
                let name = unit.repeat(n).into_bytes();
                let file = escape(&name);
                assert!(file.len() <= NAME_MAX, "{unit} x {n}: {}", file.len());
                if is_long(&file) {
                    let start = &file[..file.len() - 18];
                    let escaped = escape_short(&name);
                    assert!(escaped.starts_with(start), "{unit} x {n}");
                    assert!(unescape(start).is_ok(), "{unit} x {n}: {start}");
                } else {
                    assert_eq!(unescape(&file).unwrap(), name);
                }
            }
        }
        // A name just fits.
        let fits = vec![b'a'; NAME_MAX];
        assert_eq!(escape(&fits).len(), NAME_MAX);
        assert!(!is_long(&escape(&fits)));
        // A short name may end like a long form only escaped: `%` is always `%25`.
        let tricky = format!("x%#{}", "0".repeat(16));
        assert!(!is_long(&escape(tricky.as_bytes())));
        assert_eq!(
            unescape(&escape(tricky.as_bytes())).unwrap(),
            tricky.as_bytes()
        );
    }

    /// Issue "Nothing lost", point 7: only the exact temporaries of sed, rsync and vim are
    /// not keys.
    #[test]
    fn tool_temporaries_are_exact() {
        for t in [
            "sedAb12Cd",
            "sed000000",
            ".settings.Xa3k2P",
            ".a.b.c.Z9z9Z9",
            ".settings.swp",
            ".settings.swo",
            ".settings.swx",
            ".settings.swpx",
            "settings~",
            "4913",
        ] {
            assert!(is_tool_temporary(t), "{t}");
        }
        for key in [
            "settings.tmp",
            "settings",
            "sedan",
            "sedAb12C",
            "sedAb12Cde",
            "sed-b12Cd",
            ".hidden",
            "..x",
            ".x.short",
            ".x.swp2",
            ".swp",
            "~",
            "4914",
            "#autosave#",
            "a.swp",
            "data.json",
        ] {
            assert!(!is_tool_temporary(key), "{key}");
        }
    }

    proptest! {
        #[test]
        fn long_names_stay_file_names(name in proptest::collection::vec(any::<u8>(), 200..700)) {
            let file = escape(&name);
            prop_assert!(file.len() <= NAME_MAX);
            prop_assert!(!file.contains('/') && !file.contains('\0'));
            if is_long(&file) {
                prop_assert_eq!(find(&file, [name.clone()]), Some(name));
            } else {
                prop_assert_eq!(unescape(&file).unwrap(), name);
            }
        }

        #[test]
        fn escape_round_trips(name in proptest::collection::vec(any::<u8>(), 0..40)) {
            let file = escape(&name);
            prop_assert!(!file.contains('/'));
            prop_assert!(!file.bytes().any(|b| b.is_ascii_control()));
            prop_assert!(file != "." && file != ".." && !file.is_empty());
            prop_assert_eq!(unescape(&file).unwrap(), name);
        }
    }
}
