//! One world of each game copied to a temporary folder (a Luanti world folder, a
//! Survivalcraft region world, a Terrarum TVDA disk from `../shared/samples`), with one file
//! of its tree and a good and a bad edit of that file: what `tests/semantics.rs` and the
//! reference model of the game trees (`tests/reftest_games.rs`) run on.

use std::path::PathBuf;

use worldfs::vfs::Vfs;
use worldfs::worlds::{self, Game};

use super::samples;
use super::scratch::{copy_dir, state_dir};

/// One game's world copied to a temporary folder, and the edit every test makes in it.
pub struct Fixture {
    pub name: &'static str,
    pub _dir: tempfile::TempDir,
    pub source: PathBuf,
    pub game: Game,
    /// The file holding the store, compared byte for byte.
    pub store: PathBuf,
    /// A decoded, parsed file of the tree (its folder and its name).
    pub dir: Vec<String>,
    pub file: String,
    /// Turns the file's text into a valid edit of it, or into text that must be refused.
    pub good: fn(&str) -> String,
    pub bad: fn(&str) -> String,
}

/// Replaces the first data token (after `#` comment lines) of a view by `token`.
pub fn first_token(text: &str, token: &dyn Fn(&str) -> String) -> String {
    let mut out = String::new();
    let mut done = false;
    for line in text.split_inclusive('\n') {
        if !done && !line.starts_with('#') && !line.trim().is_empty() {
            let (head, rest) = line.split_at(line.find(' ').unwrap_or(line.len() - 1));
            out.push_str(&token(head));
            out.push_str(rest);
            done = true;
        } else {
            out.push_str(line);
        }
    }
    assert!(done, "no data line in {text}");
    out
}

pub fn luanti() -> Fixture {
    state_dir();
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("world");
    copy_dir(&samples::path(samples::MESECONS_WORLD), &source);
    let tree = worlds::open(&source, Game::Luanti, true, 1 << 20).unwrap();
    let mut first = None;
    tree.list(&["blocks".to_string()], 0, &mut |e| {
        first = Some(e.name);
        false
    })
    .unwrap();
    Fixture {
        name: "luanti",
        store: source.join("map.sqlite"),
        source,
        _dir: dir,
        game: Game::Luanti,
        dir: vec!["blocks".into(), first.unwrap()],
        file: "light.txt".into(),
        good: |t| {
            first_token(t, &|h| {
                format!("{}{}", if &h[..2] == "00" { "11" } else { "00" }, &h[2..])
            })
        },
        bad: |t| first_token(t, &|h| format!("zz{}", &h[2..])),
    }
}

pub fn survivalcraft() -> Fixture {
    state_dir();
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("world");
    copy_dir(&samples::path(samples::SC_REGION_WORLD), &source);
    let tree = worlds::open(&source, Game::Survivalcraft, true, 1 << 20).unwrap();
    let mut first = None;
    tree.list(&["chunks".to_string()], 0, &mut |e| {
        first = Some(e.name);
        false
    })
    .unwrap();
    let chunk = first.unwrap();
    let (cx, cz) = chunk.split_once(',').unwrap();
    let (cx, cz): (i32, i32) = (cx.parse().unwrap(), cz.parse().unwrap());
    let region = source.join(format!(
        "Regions/Region {},{}.dat",
        cx.div_euclid(16),
        cz.div_euclid(16)
    ));
    assert!(region.is_file(), "{}", region.display());
    Fixture {
        name: "survivalcraft",
        store: region,
        source,
        _dir: dir,
        game: Game::Survivalcraft,
        dir: vec!["chunks".into(), chunk],
        file: "surface.txt".into(),
        // "X Z TOP TEMPERATURE HUMIDITY": change the first column's humidity.
        good: |t| {
            let mut out = String::new();
            let mut done = false;
            for line in t.split_inclusive('\n') {
                if !done && !line.starts_with('#') {
                    let mut f: Vec<String> = line.split_whitespace().map(String::from).collect();
                    f[4] = if f[4] == "3" { "4".into() } else { "3".into() };
                    out.push_str(&(f.join(" ") + "\n"));
                    done = true;
                } else {
                    out.push_str(line);
                }
            }
            out
        },
        bad: |t| first_token(t, &|_| "x".into()),
    }
}

pub fn tvda() -> Fixture {
    state_dir();
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("disk.tvda");
    std::fs::copy(samples::path(samples::TVDA_WORLD), &source).unwrap();
    Fixture {
        name: "tvda",
        store: source.clone(),
        source,
        _dir: dir,
        game: Game::Tvda,
        dir: vec![],
        file: "savegameinfo.json".into(),
        good: |t| t.replacen("\"genver\": ", "\"genver\": 9", 1),
        bad: |t| t[..t.len() / 2].to_string(),
    }
}

pub fn fixtures() -> Vec<Fixture> {
    vec![luanti(), survivalcraft(), tvda()]
}

impl Fixture {
    pub fn vfs(&self, read_only: bool) -> Vfs {
        let tree = worlds::open(&self.source, self.game, read_only, 4 << 20).unwrap();
        Vfs::new(tree, None)
    }
    pub fn stored(&self) -> Vec<u8> {
        std::fs::read(&self.store).unwrap()
    }
    pub fn path(&self) -> Vec<String> {
        let mut p = self.dir.clone();
        p.push(self.file.clone());
        p
    }
}
