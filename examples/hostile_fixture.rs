//! Writes the hostile stores of the hostile-corpus tests for the mount tests (35, 45).
//!
//! `hostile_fixture tvda OUT`: the hostile TVDA world disk.
//! `hostile_fixture chunks32h DIR` and `hostile_fixture regions DIR`: hostile Survivalcraft
//! world folders (DIR must exist and be empty), with links planted to `DIR/../victim`.
//! The good chunks are printed, one `CX,CZ` a line.

#[path = "../tests/common/mod.rs"]
#[allow(dead_code)]
mod common;

use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [what, out] = args.as_slice() else {
        eprintln!("usage: hostile_fixture tvda|chunks32h|regions OUT");
        return ExitCode::FAILURE;
    };
    let out = Path::new(out);
    let good = match what.as_str() {
        "tvda" => {
            common::hostile::tvda_disk(out);
            Vec::new()
        }
        "chunks32h" | "regions" => {
            let good = if what == "chunks32h" {
                common::hostile::chunks32h_world(out)
            } else {
                common::hostile::region_world(out)
            };
            let victim = out.parent().unwrap_or(out).join("victim");
            std::fs::write(&victim, b"secret\n").unwrap_or_default();
            common::hostile::plant_links(out, &victim);
            good
        }
        _ => {
            eprintln!("unknown store {what}");
            return ExitCode::FAILURE;
        }
    };
    for pos in good {
        println!("{pos}");
    }
    ExitCode::SUCCESS
}
