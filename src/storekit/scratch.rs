//! Which new file names are scratch files rather than new objects.
//!
//! In folders whose names are free (metadata fields, players, mod-storage keys, the world
//! folder) a created file normally becomes an object. Editors and tools create temporaries
//! there too; those must not be committed when they are made (they are renamed over the
//! file they stand for, or removed). The names below are the ones such tools use:
//! dot files (vim swap files, rsync's `.name.XXXXXX`, emacs `.#name`), backups ending in `~`,
//! vim's `4913` write test, `sed -i`'s `sedXXXXXX`, `#name#` autosaves, and `.tmp`/`.swp`.
//! People use such names too (`.gitignore`): one still there at unmount is stored under its
//! name ([`Vfs::store_scratch`](crate::vfs::Vfs::store_scratch)).

/// Whether `name` is one of the temporary names editors and tools create.
pub fn looks_like_scratch(name: &str) -> bool {
    let sed_temp = name.len() == 9
        && name.starts_with("sed")
        && name[3..].bytes().all(|b| b.is_ascii_alphanumeric());
    name.starts_with('.')
        || name.ends_with('~')
        || name == "4913"
        || sed_temp
        || (name.starts_with('#') && name.ends_with('#'))
        || name.ends_with(".swp")
        || name.ends_with(".tmp")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporaries_of_common_tools_are_scratch() {
        for n in [
            ".infotext.swp",
            ".nodes.cubeset.Xa3k2P",
            "x~",
            "4913",
            "sedAb12Cd",
            "#f#",
            "a.tmp",
        ] {
            assert!(looks_like_scratch(n), "{n}");
        }
        for n in ["infotext", "formspec", "sedan", "owner", "mod_x"] {
            assert!(!looks_like_scratch(n), "{n}");
        }
    }
}
