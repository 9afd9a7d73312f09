//! The tree side of every game's `index/` (docs/tree.md "index/"): what a path there shows (a
//! folder, a text file or a link) and how it is stat'ed, read, followed and listed. Each
//! game parses its own paths, builds its own answers ([`crate::storekit::answers`] keeps
//! them) and names their objects; what it shows behaves the same in every game because it
//! goes through here.

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::error::{Error, Result};
use crate::vfs::tree::{base_time, not_a_link, stream, Entry, Stat, TreePath};

/// What a path below `index/` shows.
pub enum Shown {
    /// A folder, with its modification time ([`answer_time`] for one listing part of an
    /// answer, [`items_time`] for an `items/` folder, [`base_time`] for fixed ones).
    Folder(SystemTime),
    /// A text file, with its contents.
    Text(Vec<u8>),
    /// A link, with its target.
    Link(String),
}

/// The stat of what a path shows, folders made by `dir_stat` from their time. Volatile:
/// what `index/` shows depends on the whole world, so the kernel must not keep it (a change
/// of any block may change it).
pub fn stat(shown: &Shown, dir_stat: impl FnOnce(SystemTime) -> Stat) -> Stat {
    let mut stat = match shown {
        Shown::Folder(time) => dir_stat(*time),
        Shown::Text(text) => Stat::file(text.len() as u64, base_time(), true),
        Shown::Link(target) => link_stat(target),
    };
    stat.volatile = true;
    stat
}

/// The stat of a link to `target`.
pub fn link_stat(target: &str) -> Stat {
    Stat::symlink(target.len() as u64, base_time())
}

/// The contents of the text file at `path`.
pub fn read(path: &TreePath, shown: Shown) -> Result<Arc<Vec<u8>>> {
    match shown {
        Shown::Text(text) => Ok(Arc::new(text)),
        Shown::Link(_) => Err(Error::new(
            libc::ELOOP,
            format!("{}: a symbolic link", path.join("/")),
        )),
        Shown::Folder(_) => Err(Error::is_dir("is a directory")),
    }
}

/// The target of the link at `path`.
pub fn readlink(path: &TreePath, shown: Shown) -> Result<Vec<u8>> {
    match shown {
        Shown::Link(target) => Ok(target.into_bytes()),
        _ => Err(not_a_link(path)),
    }
}

/// A listing's `sink` that marks each entry volatile (as [`stat`] does), for a game that
/// streams a large folder itself.
pub fn volatile<'a>(sink: &'a mut dyn FnMut(Entry) -> bool) -> impl FnMut(Entry) -> bool + 'a {
    |mut e: Entry| {
        e.stat.volatile = true;
        sink(e)
    }
}

/// Streams the links of a folder too large to collect: each cookie (ascending), name and
/// target; those at or before `after` are skipped, and a full `sink` ends the listing.
pub fn links(
    links: impl Iterator<Item = (u64, String, String)>,
    after: u64,
    sink: &mut dyn FnMut(Entry) -> bool,
) {
    let mut sink = volatile(sink);
    for (cookie, name, target) in links.filter(|(cookie, ..)| *cookie > after) {
        let e = Entry {
            name,
            cookie,
            stat: link_stat(&target),
        };
        if !sink(e) {
            return;
        }
    }
}

/// Lists `entries` (any order) after the cookie `after`, volatile as [`stat`] makes them.
pub fn list(entries: Vec<Entry>, after: u64, sink: &mut dyn FnMut(Entry) -> bool) {
    stream(entries, after, &mut volatile(sink));
}

/// Entries of one kind, named `names` in order, their cookies counted from 1.
pub fn named(names: impl IntoIterator<Item = String>, stat: Stat) -> Vec<Entry> {
    names
        .into_iter()
        .enumerate()
        .map(|(i, name)| Entry {
            name,
            cookie: i as u64 + 1,
            stat: stat.clone(),
        })
        .collect()
}

/// The text files of an `items/` folder: each cookie and name (shown) with its contents.
pub fn texts<'a>(items: impl IntoIterator<Item = (u64, String, &'a Vec<u8>)>) -> Vec<Entry> {
    items
        .into_iter()
        .map(|(cookie, name, text)| Entry {
            name,
            cookie,
            stat: Stat::file(text.len() as u64, base_time(), true),
        })
        .collect()
}

/// Why a file of `index/` cannot be written; `renames`: the renames that change it.
pub fn read_only(renames: &str) -> Error {
    Error::not_permitted(format!("index/ holds answers: only {renames} changes it"))
}

/// Why a rename under `index/` other than `renames` is refused (`EXDEV`: `mv` then copies,
/// and the copy is refused with [`read_only`]'s reason).
pub fn not_renamed(renames: &str) -> Error {
    Error::new(
        libc::EXDEV,
        format!("only {renames}, within its folder, changes index/"),
    )
}

/// The mtime of an `index/` folder listing part of the `generation`th answer: the kernel
/// keeps a folder's listing until its mtime changes.
pub fn answer_time(generation: u64) -> SystemTime {
    base_time() + Duration::from_secs(generation)
}

/// The mtime of an `items/` folder of `index/`, read afresh (not from an answer): it
/// changes with the names of its files and their sizes.
pub fn items_time<'a, N: Hash + 'a>(
    items: impl IntoIterator<Item = (&'a N, &'a Vec<u8>)>,
) -> SystemTime {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for (name, text) in items {
        name.hash(&mut h);
        text.len().hash(&mut h);
    }
    let nanos = (h.finish() % 1_000_000_000) as u32;
    base_time() + Duration::new(0, nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(p: &str) -> Vec<String> {
        p.split('/').map(String::from).collect()
    }

    #[test]
    fn everything_shown_is_volatile_and_reads_as_what_it_is() {
        let dir = |t| Stat::dir(t, true);
        let text = Shown::Text(b"a line\n".to_vec());
        let link = Shown::Link("../../blocks/1,2,3".to_string());
        let folder = Shown::Folder(answer_time(2));
        assert!([&text, &link, &folder]
            .iter()
            .all(|s| stat(s, dir).volatile));
        assert_eq!(stat(&text, dir).size, 7);
        assert_eq!(stat(&link, dir).size, 18);
        let p = path("index/items/x");
        assert_eq!(*read(&p, text).unwrap(), b"a line\n".to_vec());
        assert_eq!(read(&p, link).unwrap_err().errno(), libc::ELOOP);
        assert_eq!(read(&p, folder).unwrap_err().errno(), libc::EISDIR);
        assert_eq!(
            readlink(&p, Shown::Text(Vec::new())).unwrap_err().errno(),
            libc::EINVAL
        );
    }

    #[test]
    fn listings_resume_after_a_cookie_and_are_volatile() {
        let entries = named(
            ["b", "a", "c"].map(String::from),
            Stat::dir(base_time(), true),
        );
        let mut seen = Vec::new();
        list(entries, 1, &mut |e| {
            assert!(e.stat.volatile);
            seen.push(e.name);
            true
        });
        assert_eq!(seen, ["a", "c"]);
    }
}
