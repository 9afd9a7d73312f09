//! The `worldfs` command.

// Data from disk and from users never panics the daemon: no unwrap, expect or panic outside
// tests (tests may unwrap).
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

use std::process::ExitCode;

use clap::Parser;

use worldfs::cli::{Cli, Command};

/// The subcommands' names: a first argument that is none of them (nor an option) is the
/// world of `mount`, as the mount helper (`mount -t fuse.worldfs WORLD MNT -o OPTIONS`, an
/// fstab line) runs `worldfs WORLD MNT -o OPTIONS`.
const SUBCOMMANDS: [&str; 7] = [
    "mount", "unmount", "status", "check", "info", "compact", "help",
];

fn main() -> ExitCode {
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(first) = args.get(1).and_then(|a| a.to_str()) {
        if !first.starts_with('-') && !SUBCOMMANDS.contains(&first) {
            args.insert(1, "mount".into());
        }
    }
    let cli = Cli::parse_from(args);
    let result = match cli.command {
        Command::Mount(args) => worldfs::mount::mount(&args),
        Command::Unmount { mountpoint } => worldfs::mount::unmount(&mountpoint),
        Command::Status { mountpoint } => worldfs::mount::status(&mountpoint),
        Command::Check { source } => worldfs::inspect::check(&source),
        Command::Info { source } => worldfs::inspect::info(&source),
        Command::Compact { source } => {
            worldfs::tvda::store::compact::compact(&source, &mut std::io::stdout())
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("worldfs: {e}");
            ExitCode::FAILURE
        }
    }
}
