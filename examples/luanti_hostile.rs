//! Writes the hostile Luanti store corpus (tests/common/luanti_hostile.rs) for the mount tests:
//! `luanti_hostile OUT` makes `OUT/world` (a world folder, `map.sqlite` of the `pos` schema)
//! and `OUT/xyz.sqlite` (a bare map of the `x, y, z` schema), and prints one line per row:
//! `reads X,Y,Z`, `fails X,Y,Z` or `hidden`, with its label.

#[path = "../tests/common/mod.rs"]
#[allow(dead_code)]
mod common;

use std::path::PathBuf;
use std::process::ExitCode;

use common::luanti_hostile::{write_pos_world, write_xyz_map, Case, Expect};
use worldfs::luanti::tree::block_name;

fn print(source: &str, cases: &[Case]) {
    for c in cases {
        let what = match (&c.expect, c.pos) {
            (Expect::Reads, Some(p)) => format!("reads {}", block_name(p)),
            (Expect::Fails(_), Some(p)) => format!("fails {}", block_name(p)),
            _ => "hidden".to_string(),
        };
        println!("{source} {what} # {}", c.label);
    }
}

fn main() -> ExitCode {
    let Some(out) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: luanti_hostile OUT");
        return ExitCode::FAILURE;
    };
    let world = write_pos_world(&out.join("world"));
    print("world", &world);
    let xyz = write_xyz_map(&out.join("xyz.sqlite"));
    print("xyz", &xyz);
    ExitCode::SUCCESS
}
