//! The characters the Cubeset writer assigns to definitions, in order.
//!
//! The first 91 are every printable ASCII character except `"`, `\`, `:` and space, letters
//! first. After them come Unicode letters that editors show as one narrow cell (Latin-1 and
//! Latin Extended-A/B letters, Greek and Cyrillic capitals and small letters), then the CJK
//! Unified Ideographs, the Hangul syllables and CJK Extension B (shown double-width by most
//! terminals). That is 75,486 characters, more than any grid of a supported game can use
//! (the largest, a Survivalcraft chunk, has 65,536 cells).

/// Printable ASCII without `"`, `\`, `:` and space.
const ASCII: &[u8; 91] =
    b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.#+*=%&@$!?~^<>()[]{}|/_-,;'`";

/// Inclusive code-point ranges used after [`ASCII`], in order.
const RANGES: &[(u32, u32)] = &[
    (0x00C0, 0x00D6),   // Latin-1 capitals (without ×)
    (0x00D8, 0x00F6),   // Latin-1 letters (without ÷)
    (0x00F8, 0x024F),   // Latin-1 small letters, Latin Extended-A and -B
    (0x0391, 0x03A1),   // Greek capitals
    (0x03A3, 0x03A9),   // Greek capitals after the unassigned U+03A2
    (0x03B1, 0x03C9),   // Greek small letters
    (0x0410, 0x044F),   // Cyrillic capitals and small letters
    (0x4E00, 0x9FFF),   // CJK Unified Ideographs
    (0xAC00, 0xD7A3),   // Hangul syllables
    (0x20000, 0x2A6DF), // CJK Unified Ideographs Extension B
];

/// The character for definition number `index`, or `None` past the end of the alphabet.
pub fn glyph(index: usize) -> Option<char> {
    if let Some(&b) = ASCII.get(index) {
        return Some(char::from(b));
    }
    let mut rest = index - ASCII.len();
    for &(first, last) in RANGES {
        let len = (last - first + 1) as usize;
        if rest < len {
            return char::from_u32(first + rest as u32);
        }
        rest -= len;
    }
    None
}

/// How many characters the alphabet has.
#[cfg(test)]
fn alphabet_len() -> usize {
    ASCII.len()
        + RANGES
            .iter()
            .map(|&(a, b)| (b - a + 1) as usize)
            .sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn ascii_part_is_printable_ascii_without_the_forbidden_four() {
        let expected: HashSet<u8> = (0x21..=0x7e).filter(|b| !b"\"\\:".contains(b)).collect();
        let got: HashSet<u8> = ASCII.iter().copied().collect();
        assert_eq!(got.len(), ASCII.len(), "duplicate ASCII glyph");
        assert_eq!(got, expected);
    }

    #[test]
    fn alphabet_is_distinct_and_large_enough() {
        let n = alphabet_len();
        assert_eq!(n, 75_486);
        let mut seen = HashSet::new();
        for i in 0..n {
            let c = glyph(i).expect("in range");
            assert!(!c.is_whitespace() && !c.is_control(), "{i}: {c:?}");
            assert!(seen.insert(c), "duplicate glyph {c:?} at {i}");
        }
        assert_eq!(glyph(n), None);
        assert!(!seen.contains(&'\u{FFFD}'));
    }
}
