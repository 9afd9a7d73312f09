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

fn main() -> ExitCode {
    let cli = Cli::parse();
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
