//! The `worldfs` command.

use std::process::ExitCode;

use clap::Parser;

use worldfs::cli::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Mount(args) => worldfs::mount::mount(&args),
        Command::Unmount { mountpoint } => worldfs::mount::unmount(&mountpoint),
        Command::Check { source } => worldfs::inspect::check(&source),
        Command::Info { source } => worldfs::inspect::info(&source),
        Command::Compact { source } => {
            worldfs::tvda::compact::compact(&source, &mut std::io::stdout())
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
