//! `worldfs info` and `worldfs check` for TVDA and TEVD disks.
//!
//! `info` reads only headers: kind, version, entry count, dead bytes and the CRC status.
//! `check` reads every live entry: its CRC, and for the entries the mount decodes, that
//! they decode (JSON parses, images gunzip, chunks decode and re-encode to the same tiles).
//! A stale disk CRC or root listing is normal after a game quicksave and is reported
//! without failing; a broken entry, damage (bytes that are not entries, a root listing
//! naming entries the disk does not hold) and a torn last append fail the check.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use indicatif::{ProgressBar, ProgressStyle};

use crate::error::{Error, Result};
use crate::tvda::cache::IMAGE_LIMIT;
use crate::tvda::codec::chunk::{decode_chunk, encode_chunk, parse_chunk_entry_id, Layer};
use crate::tvda::codec::compress::gunzip;
use crate::tvda::codec::tevd::{Layout, TevdKind};
use crate::tvda::codec::tvda::{DiskKind, EntryKind, ROOT_ID};
use crate::tvda::store::format::{sniff, DiskFormat};
use crate::tvda::store::tevd::TevdDisk;
use crate::tvda::store::tvda::{CheckReport, Disk};
use crate::tvda::views::chunk::World;
use crate::tvda::views::inventory::{has_inventory, render_inventory};
use crate::tvda::views::json::parse_stored;
use crate::tvda::views::names::{self, Presentation, ACTOR_IDS};

fn out_err(e: std::io::Error) -> Error {
    Error::from(e).context("writing the report")
}

fn kind_name(kind: DiskKind) -> String {
    match kind {
        DiskKind::Undefined => "undefined (very old save)".into(),
        DiskKind::Player => "player".into(),
        DiskKind::World => "world".into(),
        DiskKind::Other(n) => format!("unknown ({n})"),
    }
}

fn layout_name(layout: Layout) -> &'static str {
    match layout {
        Layout::V2 => "TEVD version 2 (47-byte header, footer)",
        Layout::V3Footer => "TEVD version 3, 2017-2018 layout (47-byte header, footer)",
        Layout::V3 => "TEVD version 3 (64-byte header)",
    }
}

fn format_of(source: &Path) -> Result<DiskFormat> {
    sniff(source)?
        .ok_or_else(|| Error::unsupported(format!("{}: not a TEVd disk", source.display())))
}

/// Prints what a disk is, from its headers.
pub fn info(source: &Path, out: &mut dyn Write) -> Result<ExitCode> {
    let mut w = |s: String| writeln!(out, "{s}").map_err(out_err);
    match format_of(source)? {
        DiskFormat::Tvda => {
            let disk = Disk::open(source, false)?;
            let h = disk.header();
            let report = disk.check()?;
            let files: Vec<i64> = disk
                .entries()
                .filter(|e| e.kind == EntryKind::File)
                .map(|e| e.id)
                .collect();
            let chunks = files
                .iter()
                .filter(|&&id| parse_chunk_entry_id(id).is_some())
                .count();
            let actors = files.iter().filter(|id| ACTOR_IDS.contains(id)).count();
            w("format: Terrarum TVDA disk (spec version 254)".into())?;
            w(format!("name: {}", h.name()))?;
            w(format!("kind: {}", kind_name(h.kind())))?;
            w(format!(
                "save mode: {} ({})",
                h.save_mode(),
                if h.save_mode() & 1 == 1 {
                    "appended since the last full save"
                } else {
                    "clean"
                }
            ))?;
            w(format!("entries: {} (root included)", disk.len()))?;
            w(format!("actors: {actors}"))?;
            if h.kind() == DiskKind::World {
                w(format!("chunks: {chunks}"))?;
            }
            w(format!("dead bytes: {}", disk.dead_bytes()))?;
            if !disk.damage().is_empty() {
                w(format!(
                    "damage: {} (mounted read-only; see `worldfs check`)",
                    disk.damage().join("; ")
                ))?;
            }
            if let Some((offset, len)) = disk.torn_tail() {
                w(format!("torn append: {len} bytes at offset {offset}"))?;
            }
            w(entry_crcs_line(report.bad_entry_crcs.len()))?;
            w(format!(
                "disk CRC: {}",
                if report.disk_crc_ok { "valid" } else { "stale" }
            ))?;
            w(format!(
                "root listing: {}",
                if report.root_listing_stale {
                    "stale"
                } else {
                    "current"
                }
            ))?;
        }
        DiskFormat::Tevd => {
            let disk = TevdDisk::open(source, false)?;
            let h = disk.header();
            let report = disk.check()?;
            w(format!("format: {}", layout_name(disk.layout())))?;
            w(format!("name: {}", h.name()))?;
            w(format!("capacity: {}", h.capacity()))?;
            w(format!("write-protected: {}", h.read_only()))?;
            w(format!("entries: {}", disk.ids().len()))?;
            w(entry_crcs_line(report.bad_entry_crcs.len()))?;
            w(format!(
                "disk CRC: {}",
                if report.disk_crc_ok {
                    "valid"
                } else {
                    "invalid"
                }
            ))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Why a TVDA entry the mount decodes does not decode, if it does not.
fn entry_problem(kind: DiskKind, world: Option<&World>, id: i64, stored: &[u8]) -> Result<()> {
    if id == -1 {
        parse_stored(stored)?;
        if kind == DiskKind::World {
            World::from_json(stored)?;
        }
        if kind == DiskKind::Player && has_inventory(stored) {
            render_inventory(stored)?;
        }
        return Ok(());
    }
    if ACTOR_IDS.contains(&id) {
        parse_stored(stored)?;
        return Ok(());
    }
    if let Some(w) = names::by_id(kind, id) {
        if w.presentation == Presentation::Gzip {
            gunzip(stored, IMAGE_LIMIT)?;
        }
        return Ok(());
    }
    if let (DiskKind::World, Some((li, no))) = (kind, parse_chunk_entry_id(id)) {
        let Some(layer) = Layer::from_index(li) else {
            return Ok(());
        };
        let (codec, tiles) = decode_chunk(layer, stored)?;
        let again = decode_chunk(layer, &encode_chunk(layer, codec, &tiles)?)?.1;
        if again != tiles {
            return Err(Error::corrupt("re-encoding gives other tiles"));
        }
        if let Some(world) = world {
            if world.geometry.coords(no).is_none() {
                return Err(Error::corrupt(format!(
                    "chunk number {no} lies outside the world's chunk grid"
                )));
            }
        }
    }
    Ok(())
}

fn bar(total: u64) -> ProgressBar {
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} entries {per_sec} eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}

/// Reads and decodes every entry; prints each broken one with its ID and why.
pub fn check(source: &Path, out: &mut dyn Write) -> Result<ExitCode> {
    match format_of(source)? {
        DiskFormat::Tvda => check_tvda(source, out),
        DiskFormat::Tevd => check_tevd(source, out),
    }
}

fn check_tvda(source: &Path, out: &mut dyn Write) -> Result<ExitCode> {
    let disk = Disk::open(source, false)?;
    let kind = disk.header().kind();
    let report = disk.check()?;
    let world = match kind {
        DiskKind::World => disk.read(-1).and_then(|j| World::from_json(&j)).ok(),
        _ => None,
    };
    let entries: Vec<_> = disk.entries().collect();
    let bar = bar(entries.len() as u64);
    let mut broken = 0u64;
    for e in &entries {
        let problem = if report.bad_entry_crcs.contains(&e.id) {
            Err(Error::corrupt("entry CRC does not match its content"))
        } else if e.kind != EntryKind::File {
            if e.id != ROOT_ID {
                bar.suspend(|| writeln!(out, "note: entry {} is a {:?}, not a file", e.id, e.kind))
                    .map_err(out_err)?;
            }
            Ok(())
        } else {
            disk.read(e.id)
                .and_then(|stored| entry_problem(kind, world.as_ref(), e.id, &stored))
        };
        if let Err(err) = problem {
            broken += 1;
            bar.suspend(|| writeln!(out, "broken entry {}: {}", e.id, err.message()))
                .map_err(out_err)?;
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    broken += write_disk_report(&report, out)?;
    let w = |out: &mut dyn Write, s: String| writeln!(out, "{s}").map_err(out_err);
    w(
        out,
        format!(
            "{} entries checked, {broken} broken; entry CRCs {}; disk CRC {}",
            entries.len(),
            if report.bad_entry_crcs.is_empty() {
                "valid"
            } else {
                "INVALID"
            },
            if report.disk_crc_ok { "valid" } else { "stale" }
        ),
    )?;
    Ok(if broken == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Writes what `Disk::check` found beyond the entries; the number of broken findings.
fn write_disk_report(report: &CheckReport, out: &mut dyn Write) -> Result<u64> {
    let w = |out: &mut dyn Write, s: String| writeln!(out, "{s}").map_err(out_err);
    let mut broken = 0;
    for d in &report.damage {
        broken += 1;
        w(out, format!("damage: {d}"))?;
    }
    if !report.damage.is_empty() {
        w(
            out,
            "note: a mount of this disk is read-only and commits are refused until it is repaired"
                .into(),
        )?;
    }
    if let Some((offset, len)) = report.torn_tail {
        broken += 1;
        w(
            out,
            format!(
                "broken: a torn append of {len} bytes at offset {offset} (an interrupted save; the disk reads as before it, and the next save cuts it off)"
            ),
        )?;
    }
    if !report.disk_crc_ok {
        w(
            out,
            "note: the disk CRC is stale (normal after a game quicksave; `worldfs compact` rewrites it)"
                .into(),
        )?;
    }
    if report.root_listing_stale {
        w(
            out,
            "note: the root listing is stale (normal after a game quicksave)".into(),
        )?;
    }
    Ok(broken)
}

fn check_tevd(source: &Path, out: &mut dyn Write) -> Result<ExitCode> {
    let disk = TevdDisk::open(source, false)?;
    let report = disk.check()?;
    let ids = disk.ids();
    let bar = bar(ids.len() as u64);
    let mut broken = 0u64;
    for &id in &ids {
        let problem = if report.bad_entry_crcs.contains(&id) {
            Err(Error::corrupt("entry CRC does not match its content"))
        } else {
            match disk.info(id) {
                Ok(n) if n.kind == TevdKind::File => disk.read(id).map(|_| ()),
                Ok(n) if n.kind == TevdKind::Symlink => disk.symlink_target(id).map(|_| ()),
                Ok(n) if n.kind == TevdKind::Compressed => {
                    bar.suspend(|| {
                        writeln!(out, "note: entry {id} is a compressed file (not decoded)")
                    })
                    .map_err(out_err)?;
                    Ok(())
                }
                Ok(_) => Ok(()),
                Err(e) => Err(e),
            }
        };
        if let Err(err) = problem {
            broken += 1;
            bar.suspend(|| writeln!(out, "broken entry {id}: {}", err.message()))
                .map_err(out_err)?;
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    for d in &report.dangling {
        broken += 1;
        writeln!(out, "damage: {d}").map_err(out_err)?;
    }
    if !report.disk_crc_ok {
        broken += 1;
        writeln!(out, "broken: the disk CRC does not match the entries").map_err(out_err)?;
    }
    writeln!(
        out,
        "{} entries checked, {broken} broken; entry CRCs {}; disk CRC {}",
        ids.len(),
        if report.bad_entry_crcs.is_empty() {
            "valid"
        } else {
            "INVALID"
        },
        if report.disk_crc_ok {
            "valid"
        } else {
            "INVALID"
        }
    )
    .map_err(out_err)?;
    Ok(if broken == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The `entry CRCs:` line of `worldfs info` for a disk with `bad` invalid entry CRCs.
fn entry_crcs_line(bad: usize) -> String {
    if bad == 0 {
        "entry CRCs: all valid".to_string()
    } else {
        format!("entry CRCs: {bad} invalid")
    }
}
