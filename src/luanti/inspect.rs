//! `worldfs info` and `worldfs check` for Luanti worlds.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use indicatif::{ProgressBar, ProgressStyle};

use crate::error::{Error, Result};
use crate::luanti::codec;
use crate::luanti::store::map::{too_large, MapStore};
use crate::luanti::store::world_mt::WorldMt;
use crate::luanti::tree::accounts::Accounts;
use crate::luanti::tree::{block_name, world_folder};

fn out_err(e: std::io::Error) -> Error {
    Error::from(e).context("writing the report")
}

/// The `key = value` settings of `world.mt` that name backends.
fn backends(world: &Path) -> Vec<(String, String)> {
    let Ok(mt) = WorldMt::read(world) else {
        return Vec::new();
    };
    mt.settings()
        .filter(|(k, _)| *k == "gameid" || k.ends_with("backend"))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Prints format, schema, block counts per version and the world's backends.
pub fn info(source: &Path, out: &mut dyn Write) -> Result<ExitCode> {
    let world = world_folder(source)?;
    let store = MapStore::open(source, true)?;
    let mut versions: BTreeMap<u8, u64> = BTreeMap::new();
    let mut total = 0u64;
    let mut after = 0;
    loop {
        let page = store.list(after, 4096, true)?;
        let Some(last) = page.last() else { break };
        after = last.key;
        for l in &page {
            let v = l
                .data
                .as_ref()
                .and_then(|d| d.first().copied())
                .unwrap_or(0);
            *versions.entry(v).or_default() += 1;
            total += 1;
        }
    }
    let w = |out: &mut dyn Write, s: String| writeln!(out, "{s}").map_err(out_err);
    for (k, v) in store.describe() {
        w(out, format!("{k}: {v}"))?;
    }
    w(out, format!("blocks: {total}"))?;
    for (v, n) in &versions {
        w(out, format!("  serialization version {v}: {n}"))?;
    }
    if let Some(world) = world {
        for (k, v) in backends(&world) {
            w(out, format!("{k}: {v}"))?;
        }
        for line in Accounts::open(&world, &WorldMt::read(&world)?, true)?.summary() {
            w(out, line)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Decodes, re-encodes and decodes again every block; prints each broken one.
pub fn check(source: &Path, out: &mut dyn Write) -> Result<ExitCode> {
    world_folder(source)?;
    let store = MapStore::open(source, true)?;
    let total = store.count()?;
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} blocks {per_sec} eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut broken = 0u64;
    let mut checked = 0u64;
    let mut after = 0;
    loop {
        let page = store.list(after, 1024, true)?;
        let Some(last) = page.last() else { break };
        after = last.key;
        for l in page {
            // Listed without its data: too large to read (the reason the mount shows).
            let result = match &l.data {
                None => Err(too_large(l.pos, None)),
                Some(data) => codec::decode_block(data).and_then(|b| {
                    let again = codec::decode_block(&codec::encode_block(&b)?)?;
                    if again == b {
                        Ok(())
                    } else {
                        Err(Error::corrupt(
                            "re-encoding does not decode to the same block",
                        ))
                    }
                }),
            };
            if let Err(e) = result {
                broken += 1;
                bar.suspend(|| writeln!(out, "broken block {}: {e}", block_name(l.pos)))
                    .map_err(out_err)?;
            }
            checked += 1;
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    writeln!(out, "{checked} blocks checked, {broken} broken").map_err(out_err)?;
    Ok(if broken == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
