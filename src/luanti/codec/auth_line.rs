//! The auth.txt line format: `name:password:priv1,priv2:last_login`, one line per player.
//!
//! The password field is the stored hash (`#1#salt#verifier` SRP, an older base64 hash, or
//! empty) and passes through as text. [`parse_auth`] is the strict reader for an edited
//! auth.txt (three or four fields, no duplicate players or privileges, errors with line and
//! column); [`read_auth_file`] reads a stored auth.txt the way the engine does.

use std::collections::HashMap;

use crate::error::{excerpt, Error, Result};
use crate::luanti::codec::player::check_name;

/// One player's authentication data.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AuthEntry {
    pub name: String,
    /// The password hash as stored.
    pub password: String,
    pub privileges: Vec<String>,
    /// Unix time of the last login (0 = never).
    pub last_login: i64,
}

impl AuthEntry {
    /// The entry as one auth.txt line, without the line break.
    pub fn to_line(&self) -> String {
        format!(
            "{}:{}:{}:{}",
            self.name,
            self.password,
            self.privileges.join(","),
            self.last_login
        )
    }

    /// Checks that the entry can be written as one line and read back unchanged.
    pub fn validate(&self) -> std::result::Result<(), String> {
        check_name(&self.name).map_err(|m| format!("name {:?}: {m}", self.name))?;
        if let Some(c) = self.password.chars().find(|&c| c == ':' || c.is_control()) {
            return Err(format!("{}: character {c:?} in the password", self.name));
        }
        for privilege in &self.privileges {
            check_privilege(privilege).map_err(|m| format!("{}: {m}", self.name))?;
        }
        Ok(())
    }
}

fn check_privilege(privilege: &str) -> std::result::Result<(), String> {
    if privilege.is_empty() {
        return Err("empty privilege name".to_string());
    }
    if let Some(c) = privilege
        .chars()
        .find(|&c| c == ',' || c == ':' || c.is_whitespace() || c.is_control())
    {
        return Err(format!(
            "character {c:?} in privilege {:?}",
            excerpt(privilege)
        ));
    }
    Ok(())
}

/// Writes entries as auth.txt text, one line each.
pub fn render_auth(entries: &[AuthEntry]) -> Vec<u8> {
    let mut out = String::new();
    for entry in entries {
        out.push_str(&entry.to_line());
        out.push('\n');
    }
    out.into_bytes()
}

/// Parses an edited auth.txt strictly. Blank lines are skipped.
pub fn parse_auth(text: &[u8]) -> Result<Vec<AuthEntry>> {
    let mut entries: Vec<AuthEntry> = Vec::new();
    let mut lines_of: HashMap<String, usize> = HashMap::new();
    for (i, raw) in text.split(|&b| b == b'\n').enumerate() {
        let number = i + 1;
        let line = std::str::from_utf8(raw)
            .map_err(|e| Error::at(number, e.valid_up_to() + 1, "text is not valid UTF-8"))?;
        if line.trim().is_empty() {
            continue;
        }
        let entry = parse_auth_line(line, number)?;
        if let Some(first) = lines_of.insert(entry.name.clone(), number) {
            return Err(Error::at(
                number,
                1,
                format!(
                    "player {:?} appears twice (first on line {first})",
                    entry.name
                ),
            ));
        }
        entries.push(entry);
    }
    Ok(entries)
}

/// Parses one line strictly; `number` is its line number for errors.
pub fn parse_auth_line(line: &str, number: usize) -> Result<AuthEntry> {
    if let Some((col, c)) = line.char_indices().find(|(_, c)| c.is_control()) {
        return Err(Error::at(
            number,
            col + 1,
            format!("control character {c:?}"),
        ));
    }
    let fields: Vec<&str> = line.split(':').collect();
    let (name, password, privileges, last_login) = match fields.as_slice() {
        [n, p, r] => (*n, *p, *r, None),
        [n, p, r, l] => (*n, *p, *r, Some(*l)),
        _ => {
            return Err(Error::at(
                number,
                1,
                format!(
                    "expected name:password:privileges:last_login, found {} fields",
                    fields.len()
                ),
            ))
        }
    };
    check_name(name).map_err(|m| Error::at(number, 1, format!("player name: {m}")))?;
    let privileges_col = name.len() + password.len() + 3;
    let mut privs: Vec<String> = Vec::new();
    if !privileges.is_empty() {
        let mut col = privileges_col;
        for privilege in privileges.split(',') {
            check_privilege(privilege).map_err(|m| Error::at(number, col, m))?;
            if privs.iter().any(|p| p == privilege) {
                return Err(Error::at(
                    number,
                    col,
                    format!("privilege {:?} appears twice", excerpt(privilege)),
                ));
            }
            privs.push(privilege.to_string());
            col += privilege.len() + 1;
        }
    }
    let last_login = match last_login {
        None | Some("") => 0,
        Some(text) => text.parse::<i64>().map_err(|_| {
            Error::at(
                number,
                privileges_col + privileges.len() + 1,
                format!("last_login {:?} is not a whole number", excerpt(text)),
            )
        })?,
    };
    Ok(AuthEntry {
        name: name.to_string(),
        password: password.to_string(),
        privileges: privs,
        last_login,
    })
}

/// Reads a stored auth.txt as the engine does: fields split at `:` (a trailing empty field
/// dropped), lines with fewer than three fields skipped, empty privilege names dropped,
/// `last_login` read like `atol`, a later line for the same player replacing the earlier one.
/// Entries that could not be written back unchanged are reported as corrupt.
pub fn read_auth_file(text: &[u8]) -> Result<Vec<AuthEntry>> {
    let mut entries: Vec<AuthEntry> = Vec::new();
    let mut index_of: HashMap<String, usize> = HashMap::new();
    for (i, raw) in text.split(|&b| b == b'\n').enumerate() {
        let line = std::str::from_utf8(raw)
            .map_err(|_| Error::corrupt(format!("auth.txt line {}: not valid UTF-8", i + 1)))?;
        let mut parts: Vec<&str> = line.split(':').collect();
        if parts.last() == Some(&"") {
            parts.pop();
        }
        let [name, password, privileges, rest @ ..] = parts.as_slice() else {
            continue;
        };
        let entry = AuthEntry {
            name: name.to_string(),
            password: password.to_string(),
            privileges: privileges
                .split(',')
                .filter(|p| !p.is_empty())
                .map(str::to_string)
                .collect(),
            last_login: rest.first().map_or(0, |t| atol(t)),
        };
        entry
            .validate()
            .map_err(|m| Error::corrupt(format!("auth.txt line {}: {m}", i + 1)))?;
        match index_of.get(&entry.name) {
            Some(&at) => {
                if let Some(slot) = entries.get_mut(at) {
                    *slot = entry;
                }
            }
            None => {
                index_of.insert(entry.name.clone(), entries.len());
                entries.push(entry);
            }
        }
    }
    Ok(entries)
}

/// C's `atol`: optional spaces and sign, then digits; anything else ends the number.
fn atol(text: &str) -> i64 {
    let t = text.trim_start();
    let (negative, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let mut value: i64 = 0;
    for b in digits.bytes().take_while(u8::is_ascii_digit) {
        value = value.saturating_mul(10).saturating_add(i64::from(b - b'0'));
    }
    if negative {
        -value
    } else {
        value
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn engine_file_rules() {
        let text = b"a:h:x,,y:12\nshort:\nbar::\nc::interact\na:h2::-5junk\n";
        let entries = read_auth_file(text).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].to_line(), "a:h2::-5");
        assert_eq!(entries[1].to_line(), "c::interact:0");
    }

    #[test]
    fn strict_errors_have_positions() {
        let e = parse_auth(b"a::interact, shout:0\n").unwrap_err();
        assert!(e.message().starts_with("line 1, column 13:"), "{e}");
        let e = parse_auth(b"a::x:0\n\nb::y:zero\n").unwrap_err();
        assert!(e.message().starts_with("line 3, column 6:"), "{e}");
        let e = parse_auth(b"a::x:0\na::y:0\n").unwrap_err();
        assert!(e.message().contains("appears twice"), "{e}");
        assert!(parse_auth(b"a:b\n").is_err());
        assert!(parse_auth(b"a:b:c:d:e\n").is_err());
        assert!(parse_auth(b"a::x,x:0\n").is_err());
        assert_eq!(parse_auth(b"bar::\n").unwrap()[0].to_line(), "bar:::0");
    }

    fn entry_strategy() -> impl Strategy<Value = AuthEntry> {
        (
            "[A-Za-z0-9_-]{1,20}",
            "(#1#[A-Za-z0-9+/]{4,22}#[A-Za-z0-9+/]{0,40})?",
            proptest::collection::btree_set("[a-z_]{1,12}", 0..6),
            any::<i64>(),
        )
            .prop_map(|(name, password, privileges, last_login)| AuthEntry {
                name,
                password,
                privileges: privileges.into_iter().collect(),
                last_login,
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn lines_round_trip(entry in entry_strategy()) {
            let line = entry.to_line();
            prop_assert_eq!(parse_auth_line(&line, 1).unwrap(), entry.clone());
            prop_assert_eq!(read_auth_file(line.as_bytes()).unwrap(), vec![entry]);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = parse_auth(&bytes);
            let _ = read_auth_file(&bytes);
        }
    }
}
