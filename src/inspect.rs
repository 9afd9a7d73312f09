//! `worldfs info` and `worldfs check`.

use std::path::Path;
use std::process::ExitCode;

use crate::error::Result;
use crate::luanti;
use crate::survivalcraft;
use crate::tvda;
use crate::worlds::{self, Game};

/// `worldfs info SOURCE`.
pub fn info(source: &Path) -> Result<ExitCode> {
    match worlds::detect(source)? {
        Game::Luanti => luanti::inspect::info(source, &mut std::io::stdout()),
        Game::Survivalcraft => survivalcraft::inspect::info(source, &mut std::io::stdout()),
        Game::Tvda | Game::Tevd => tvda::inspect::info(source, &mut std::io::stdout()),
    }
}

/// `worldfs check SOURCE`.
pub fn check(source: &Path) -> Result<ExitCode> {
    match worlds::detect(source)? {
        Game::Luanti => luanti::inspect::check(source, &mut std::io::stdout()),
        Game::Survivalcraft => survivalcraft::inspect::check(source, &mut std::io::stdout()),
        Game::Tvda | Game::Tevd => tvda::inspect::check(source, &mut std::io::stdout()),
    }
}
