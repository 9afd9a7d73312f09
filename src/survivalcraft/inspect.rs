//! `worldfs info` and `worldfs check` for Survivalcraft worlds.
//!
//! `check` decodes every chunk, re-encodes it and decodes that again; a fixed-size record
//! must also re-encode to its stored bytes and carry the position its directory entry
//! gives. Project.xml must parse with every inventory readable. Each broken object is
//! printed with its coordinates; the exit status says whether any was. A journal a crash
//! left is named too: a sealed one (a commit pending, which the files may hold in part)
//! counts as broken until a read-write mount finishes it.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use indicatif::{ProgressBar, ProgressStyle};

use crate::error::{Error, Result};
use crate::survivalcraft::codec::chunk::{Chunk, ChunkPos};
use crate::survivalcraft::codec::format::TerrainFormat;
use crate::survivalcraft::codec::{self, project};
use crate::survivalcraft::store::World;

fn out_err(e: std::io::Error) -> Error {
    Error::from(e).context("writing the report")
}

/// What the terrain store is called, with the game versions that use it.
fn describe(format: TerrainFormat) -> &'static str {
    match format {
        TerrainFormat::Chunks16 => "Chunks.dat (Survivalcraft 1.4-1.28, 16-bit cells, 128 high)",
        TerrainFormat::Chunks32 => "Chunks32.dat (Survivalcraft 1.29-2.1, 32-bit cells, 128 high)",
        TerrainFormat::Chunks32h => "Chunks32h.dat (Survivalcraft 2.2, 32-bit cells, 256 high)",
        TerrainFormat::Regions => {
            "Regions/ (Survivalcraft 2.3+, region files, 256 high, no stored light)"
        }
    }
}

/// Prints the kind of source, terrain format, game version, chunk count and players.
pub fn info(source: &Path, out: &mut dyn Write) -> Result<ExitCode> {
    let world = World::open(source, true)?;
    let w = |out: &mut dyn Write, s: String| writeln!(out, "{s}").map_err(out_err);
    let kind = if world.folder().is_some() {
        "world folder"
    } else {
        "packed .scworld (read-only)"
    };
    w(out, format!("format: Survivalcraft {kind}"))?;
    w(out, format!("terrain: {}", describe(world.format())))?;
    w(out, format!("chunks: {}", world.chunks().len()))?;
    match world.project_xml()? {
        None => w(out, "project: no Project.xml".into())?,
        Some(xml) => {
            let info = project::read(&xml).map_err(|e| e.context("Project.xml"))?;
            w(out, format!("game version: {}", info.version))?;
            let players: Vec<String> = info.players().into_iter().map(|(n, _)| n).collect();
            w(out, format!("players: {}", players.join(", ")))?;
            let containers = info
                .holders
                .iter()
                .filter(|h| h.player_name.is_none() && h.coordinates.is_some())
                .count();
            w(out, format!("containers: {containers}"))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Decodes, re-encodes and decodes again one chunk's stored bytes.
fn check_chunk(format: TerrainFormat, pos: ChunkPos, raw: &[u8]) -> Result<()> {
    let chunk: Chunk = if format == TerrainFormat::Regions {
        codec::decode_chunk(format, raw)?
    } else {
        let (stored_pos, chunk) = codec::fixed::decode_record(format, raw)?;
        if stored_pos != pos {
            return Err(Error::corrupt(format!(
                "the record says it is chunk {stored_pos}, the directory says {pos}"
            )));
        }
        chunk
    };
    let again = codec::encode_chunk(&chunk, pos)?;
    if format != TerrainFormat::Regions && again != raw {
        return Err(Error::corrupt("re-encoding changes the stored bytes"));
    }
    if codec::decode_chunk(format, &again)? != chunk {
        return Err(Error::corrupt(
            "re-encoding does not decode to the same chunk",
        ));
    }
    Ok(())
}

/// Checks every chunk and Project.xml; prints each broken one.
pub fn check(source: &Path, out: &mut dyn Write) -> Result<ExitCode> {
    let world = World::open(source, true)?;
    let format = world.format();
    let mut chunks = world.chunks();
    chunks.sort();
    let bar = ProgressBar::new(chunks.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} chunks {per_sec} eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut broken = 0u64;
    for pos in &chunks {
        if let Err(e) = world
            .read_raw(*pos)
            .and_then(|raw| check_chunk(format, *pos, &raw))
        {
            broken += 1;
            bar.suspend(|| writeln!(out, "broken chunk {pos}: {e}"))
                .map_err(out_err)?;
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let project = match world.project_xml() {
        Ok(None) => "no Project.xml".to_string(),
        Ok(Some(xml)) => match project::read(&xml) {
            Ok(info) => format!(
                "Project.xml ok ({} entities with inventories)",
                info.holders.len()
            ),
            Err(e) => {
                broken += 1;
                format!("broken Project.xml: {e}")
            }
        },
        Err(e) => {
            broken += 1;
            format!("broken Project.xml: {e}")
        }
    };
    writeln!(out, "{project}").map_err(out_err)?;
    for (journal, sealed) in world.left_journals()? {
        let what = if sealed {
            broken += 1;
            "a commit cut by a crash is pending (the files may hold part of it): mount the world read-write once to finish it"
        } else {
            "a torn journal (its commit never happened; the next read-write mount removes it)"
        };
        writeln!(out, "{}: {what}", journal.display()).map_err(out_err)?;
    }
    writeln!(
        out,
        "{} chunks checked, {broken} broken objects",
        chunks.len()
    )
    .map_err(out_err)?;
    Ok(if broken == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
