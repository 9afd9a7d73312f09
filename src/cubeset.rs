//! The Cubeset file format (version 1) for node grids, shared by every game's tree.
//!
//! A Cubeset (the prefab format of Cuberite) is a Lua table:
//!
//! ```text
//! Cubeset =
//! {
//!     Metadata = { CubesetFormatVersion = 1, IntendedUse = "worldfs", },
//!     Pieces =
//!     {
//!         {
//!             Size = { x = 16, y = 16, z = 16 },
//!             Hitbox = { MinX = 0, MinY = 0, MinZ = 0, MaxX = 15, MaxY = 15, MaxZ = 15 },
//!             Connectors = {},
//!             Metadata = {},
//!             BlockDefinitions = { "a: default:stone: 0", "b: air: 0", },
//!             BlockData = { -- Level 0
//!                 "aaaabbbbaaaabbbb",  --  0
//!                 ...
//!             },
//!         },
//!     },
//! }
//! ```
//!
//! Each character of `BlockData` is one cell: levels bottom-up (Y), each level a list of rows
//! (Z), X varying fastest inside a row. A definition `"C: TYPE: META"` gives the cell
//! character C its TYPE and META; TYPE may itself contain `:` (Luanti node names), so META is
//! what follows the *last* `:`, a decimal number. Surrounding spaces are not part of TYPE.
//!
//! **Writing** is canonical, so equal grids give identical bytes: definitions are sorted by
//! TYPE (numbers by value, before names) then META, unused palette entries are left out and
//! duplicate ones merged, so an edit that keeps the set of definitions a grid uses keeps
//! every character (an order of first use would re-letter a block when one cell changes);
//! the n-th definition gets the n-th character of the alphabet in
//! [`glyphs`]: the 91 printable ASCII characters other than `"`, `\`, `:` and space (letters
//! first), then Unicode letters (Latin-1, Latin Extended-A/B, Greek, Cyrillic), then CJK
//! ideographs and Hangul syllables — 75,486 characters in all. A cell whose palette index is
//! out of range (or past the alphabet) is written as U+FFFD, which has no definition, so the
//! file is rejected when read back rather than silently changed.
//!
//! **Reading** accepts what a person would type: any whitespace, `--` comments, `,` or `;`
//! separators and trailing ones, single or double quotes with Lua escapes, definitions in any
//! order with any characters (other than whitespace, control characters and `:`), keys written
//! as `Name =` or `["Name"] =`. Two characters may define the same (TYPE, META): they are the
//! same cell value. `Hitbox`, `Connectors` and the `Metadata` tables (other than
//! `CubesetFormatVersion`, which must be 1) are accepted and not used. Everything else is
//! rejected with line and column: unknown keys, a second piece, a character without
//! definition, a row of the wrong length, the wrong number of rows. The grid read is
//! canonical in the same way as the writer's output, so `render(parse(render(g)))` is
//! byte-identical to `render(g)`.

mod glyphs;
mod lua;

use std::collections::HashMap;

use crate::error::{excerpt, Result};
use lua::{Field, Kind, Source, Value};

/// One block definition line `"C: TYPE: META"`, with an optional comment shown after it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Definition {
    /// TYPE: a node name (Luanti), a numeric block id (Survivalcraft), a tile name (Terrarum).
    pub kind: String,
    /// META: param2 (Luanti), block data (Survivalcraft), placement/amount (Terrarum).
    pub meta: u32,
}

/// A grid of cells, each an index into `palette`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grid {
    /// Size in x, y, z.
    pub size: [usize; 3],
    /// Distinct definitions; the writer assigns the characters.
    pub palette: Vec<Definition>,
    /// Cell `(x, y, z)` is at `(y * size_z + z) * size_x + x`.
    pub cells: Vec<u32>,
}

/// The largest size along one axis that `parse` accepts.
const MAX_EDGE: usize = 1 << 16;

/// The character written for a cell that has no definition.
const NO_GLYPH: char = '\u{FFFD}';

const HEADER: &str = "\
-- worldfs Cubeset. Each character of BlockData is one cell: levels bottom-up (Y), rows (Z)
-- inside a level, X left to right inside a row. A definition is \"C: TYPE: META\".
Cubeset =
{
\tMetadata =
\t{
\t\tCubesetFormatVersion = 1,
\t\tIntendedUse = \"worldfs\",
\t},
\tPieces =
\t{
\t\t{
";

const FOOTER: &str = "\t\t\t},\n\t\t},\n\t},\n}\n";

/// Renders a grid; `comment` gives the optional comment for a definition (e.g. a block name).
pub fn render(grid: &Grid, comment: &dyn Fn(&Definition) -> Option<String>) -> Vec<u8> {
    let unique = first_equal(&grid.palette);
    // First as if every distinct definition were used, as in every grid the games decode
    // and `parse` returns: one pass over the cells writes them and checks that.
    let distinct: Vec<bool> = unique.iter().enumerate().map(|(p, &u)| p == u).collect();
    let (used, number) = characters(grid, &unique, &distinct);
    let mut seen = vec![false; grid.palette.len()];
    let data = match ascii_table(&number) {
        Some(table) => ascii_block_data(grid, &table, &mut seen),
        None => unicode_block_data(grid, &glyphs_of(&number), Some(&mut seen)),
    };
    if let Some(data) = data {
        let mut used_seen = vec![false; grid.palette.len()];
        for (p, &u) in unique.iter().enumerate() {
            used_seen[u] |= seen[p];
        }
        if used.iter().all(|&u| used_seen[u]) {
            return assemble(grid, &used, &data, comment);
        }
    }
    // Definitions no cell uses, cells without a definition, missing cells, characters past
    // ASCII: the cells say which definitions are used.
    let (in_use, whole) = uses(grid, &unique);
    let (used, number) = characters(grid, &unique, &in_use);
    let mut seen = vec![false; grid.palette.len()];
    let data = match ascii_table(&number).filter(|_| whole) {
        Some(table) => ascii_block_data(grid, &table, &mut seen),
        None => None,
    };
    let data = data
        .or_else(|| unicode_block_data(grid, &glyphs_of(&number), None))
        .unwrap_or_default();
    assemble(grid, &used, &data, comment)
}

/// Each palette entry's character (U+FFFD for none).
fn glyphs_of(number: &[Option<usize>]) -> Vec<Glyph> {
    number
        .iter()
        .map(|n| Glyph::new(n.and_then(glyphs::glyph).unwrap_or(NO_GLYPH)))
        .collect()
}

/// The whole file around `BlockData` `data`, with the definitions `used` in character order.
fn assemble(
    grid: &Grid,
    used: &[usize],
    data: &[u8],
    comment: &dyn Fn(&Definition) -> Option<String>,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER.len() + 300 + used.len() * 40 + data.len());
    push_head(&mut out, grid.size);
    push_definitions(&mut out, grid, used, comment);
    out.extend_from_slice(b"\t\t\t},\n\t\t\tBlockData =\n\t\t\t{\n");
    out.extend_from_slice(data);
    out.extend_from_slice(FOOTER.as_bytes());
    out
}

/// Which (first equal) palette entries the cells use, and whether every cell is there and
/// names a palette entry.
fn uses(grid: &Grid, unique: &[usize]) -> (Vec<bool>, bool) {
    let mut in_use = vec![false; grid.palette.len()];
    let [sx, sy, sz] = grid.size;
    let mut whole = sx.checked_mul(sy).and_then(|n| n.checked_mul(sz)) == Some(grid.cells.len());
    for &cell in &grid.cells {
        match unique.get(cell as usize) {
            Some(&u) => in_use[u] = true,
            None => whole = false,
        }
    }
    (in_use, whole)
}

/// The characters of a grid: the (first equal) palette entries marked `in_use`, sorted (see
/// [`definition_order`]), so that an edit keeping the set of definitions keeps every
/// character. Returns those entries in character order, and each palette entry's character
/// number (`None`: unused).
fn characters(grid: &Grid, unique: &[usize], in_use: &[bool]) -> (Vec<usize>, Vec<Option<usize>>) {
    let used: Vec<usize> = (0..grid.palette.len()).filter(|&p| in_use[p]).collect();
    let numbers: Vec<Option<u64>> = used
        .iter()
        .map(|&p| grid.palette[p].kind.parse().ok())
        .collect();
    let mut order: Vec<usize> = (0..used.len()).collect();
    order.sort_by(|&a, &b| {
        definition_order(
            (&grid.palette[used[a]], numbers[a]),
            (&grid.palette[used[b]], numbers[b]),
        )
    });
    let used: Vec<usize> = order.into_iter().map(|i| used[i]).collect();
    let mut number = vec![None; grid.palette.len()];
    for (n, &u) in used.iter().enumerate() {
        number[u] = Some(n);
    }
    let number = unique.iter().map(|&u| number[u]).collect();
    (used, number)
}

/// Each palette entry's byte, when every entry has a character and all are ASCII.
fn ascii_table(number: &[Option<usize>]) -> Option<Vec<u8>> {
    number
        .iter()
        .map(|n| {
            n.and_then(glyphs::glyph)
                .filter(char::is_ascii)
                .map(|c| c as u8)
        })
        .collect()
}

/// The order of characters: by TYPE (numbers by value, before names; equal values such as
/// `1` and `01` by their text), then META. A total order on distinct definitions, so the
/// characters never depend on the cells. Each definition comes with its TYPE as a number,
/// if it is one.
fn definition_order(
    (a, number_a): (&Definition, Option<u64>),
    (b, number_b): (&Definition, Option<u64>),
) -> std::cmp::Ordering {
    match (number_a, number_b) {
        (Some(x), Some(y)) => x.cmp(&y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => std::cmp::Ordering::Equal,
    }
    .then_with(|| a.kind.cmp(&b.kind))
    .then(a.meta.cmp(&b.meta))
}

/// `BlockData` when every character is ASCII (`table` holds each palette entry's byte),
/// noting in `seen` the palette entries the cells name; `None` when a cell is missing or
/// names no palette entry.
fn ascii_block_data(grid: &Grid, table: &[u8], seen: &mut [bool]) -> Option<Vec<u8>> {
    let [sx, sy, sz] = grid.size;
    if sx.checked_mul(sy).and_then(|n| n.checked_mul(sz)) != Some(grid.cells.len()) {
        return None;
    }
    let mut whole = true;
    let mut glyph = |c: u32| match (table.get(c as usize), seen.get_mut(c as usize)) {
        (Some(&g), Some(s)) => {
            *s = true;
            g
        }
        _ => {
            whole = false;
            b'?'
        }
    };
    let data = block_data(grid, |row, out| {
        let Some(&first) = row.first() else {
            return;
        };
        if row.iter().fold(true, |same, &c| same & (c == first)) {
            // A row of one kind (common: air, stone): one lookup.
            let g = glyph(first);
            out.resize(out.len() + row.len(), g);
        } else {
            out.extend(row.iter().map(|&c| glyph(c)));
        }
    });
    whole.then_some(data)
}

/// `BlockData` in general: `glyphs` holds each palette entry's character; a missing cell or
/// one naming no palette entry is written U+FFFD, which has no definition. With `seen`, notes
/// there the palette entries the cells name, and gives `None` where it would write U+FFFD.
fn unicode_block_data(
    grid: &Grid,
    glyphs: &[Glyph],
    mut seen: Option<&mut [bool]>,
) -> Option<Vec<u8>> {
    let sx = grid.size[0];
    let no_glyph = Glyph::new(NO_GLYPH);
    let [_, sy, sz] = grid.size;
    let mut whole = sx.checked_mul(sy).and_then(|n| n.checked_mul(sz)) == Some(grid.cells.len());
    let data = block_data(grid, |row, out| {
        for &cell in row {
            let g = match (glyphs.get(cell as usize), seen.as_deref_mut()) {
                (Some(g), Some(seen)) => {
                    if let Some(s) = seen.get_mut(cell as usize) {
                        *s = true;
                    }
                    g
                }
                (Some(g), None) => g,
                (None, _) => {
                    whole = false;
                    &no_glyph
                }
            };
            out.extend_from_slice(g.bytes());
        }
        for _ in row.len()..sx {
            out.extend_from_slice(no_glyph.bytes());
        }
    });
    (whole || seen.is_none()).then_some(data)
}

/// The file up to `BlockDefinitions`: header, size, hitbox, connectors, metadata.
fn push_head(out: &mut Vec<u8>, [sx, sy, sz]: [usize; 3]) {
    out.extend_from_slice(HEADER.as_bytes());
    out.extend_from_slice(b"\t\t\tSize = { x = ");
    push_number(out, sx);
    out.extend_from_slice(b", y = ");
    push_number(out, sy);
    out.extend_from_slice(b", z = ");
    push_number(out, sz);
    out.extend_from_slice(b" },\n\t\t\tHitbox = { MinX = 0, MinY = 0, MinZ = 0, MaxX = ");
    push_number(out, sx.saturating_sub(1));
    out.extend_from_slice(b", MaxY = ");
    push_number(out, sy.saturating_sub(1));
    out.extend_from_slice(b", MaxZ = ");
    push_number(out, sz.saturating_sub(1));
    out.extend_from_slice(b" },\n\t\t\tConnectors = {},\n\t\t\tMetadata = {},\n");
}

/// `BlockDefinitions`: one line per used palette entry, in character order.
fn push_definitions(
    out: &mut Vec<u8>,
    grid: &Grid,
    used: &[usize],
    comment: &dyn Fn(&Definition) -> Option<String>,
) {
    out.extend_from_slice(b"\t\t\tBlockDefinitions =\n\t\t\t{\n");
    for (i, &u) in used.iter().enumerate() {
        let def = &grid.palette[u];
        out.extend_from_slice(b"\t\t\t\t\"");
        let glyph = glyphs::glyph(i).map_or(Glyph::new(NO_GLYPH), Glyph::new);
        out.extend_from_slice(glyph.bytes());
        out.extend_from_slice(b": ");
        push_lua_escaped(out, &def.kind);
        out.extend_from_slice(b": ");
        push_number(out, def.meta as usize);
        out.extend_from_slice(b"\",");
        if let Some(text) = comment(def) {
            out.extend_from_slice(b"  -- ");
            for c in text.chars() {
                let c = if c.is_control() { ' ' } else { c };
                let mut buf = [0; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
        out.push(b'\n');
    }
}

/// For each palette entry, the index of the first entry equal to it.
fn first_equal(palette: &[Definition]) -> Vec<usize> {
    if palette.len() <= 16 {
        return (0..palette.len())
            .map(|i| {
                palette[..i]
                    .iter()
                    .position(|d| *d == palette[i])
                    .unwrap_or(i)
            })
            .collect();
    }
    let mut first: HashMap<&Definition, usize> = HashMap::with_capacity(palette.len());
    palette
        .iter()
        .enumerate()
        .map(|(i, d)| *first.entry(d).or_insert(i))
        .collect()
}

/// The lines of `BlockData` (levels with their comments, rows with their numbers);
/// `write_row` writes the characters of one row's cells.
fn block_data(grid: &Grid, mut write_row: impl FnMut(&[u32], &mut Vec<u8>)) -> Vec<u8> {
    let [sx, sy, sz] = grid.size;
    let rows = sy.saturating_mul(sz);
    let mut out = Vec::with_capacity(rows.saturating_mul(sx + 16) + sy * 20);
    // Every row ends with `",  --` and its number right-aligned: all endings have one length.
    let width = decimal_digits(sz.saturating_sub(1));
    let ending_len = width + 8;
    let mut endings = Vec::with_capacity(sz.saturating_mul(ending_len));
    for z in 0..sz {
        endings.extend_from_slice(b"\",  --");
        endings.resize(endings.len() + width + 1 - decimal_digits(z), b' ');
        push_number(&mut endings, z);
        endings.push(b'\n');
    }
    let mut cells = grid.cells.chunks(sx.max(1));
    for y in 0..sy {
        if y > 0 {
            out.push(b'\n');
        }
        out.extend_from_slice(b"\t\t\t\t-- Level ");
        push_number(&mut out, y);
        out.push(b'\n');
        for ending in endings.chunks_exact(ending_len) {
            out.extend_from_slice(b"\t\t\t\t\"");
            let row = cells.next().unwrap_or(&[]);
            write_row(row.get(..sx).unwrap_or(row), &mut out);
            out.extend_from_slice(ending);
        }
    }
    out
}

fn decimal_digits(mut n: usize) -> usize {
    let mut digits = 1;
    while n >= 10 {
        n /= 10;
        digits += 1;
    }
    digits
}

fn push_number(out: &mut Vec<u8>, n: usize) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut n = n;
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

/// Parses a Cubeset file into a grid; errors carry line and column.
pub fn parse(text: &[u8]) -> Result<Grid> {
    parse_checked(text, None, &|_| Ok(()))
}

/// Parses a Cubeset file whose size must be `size` (when given) and whose definitions must
/// pass `check` (an `Err` message is reported at the definition's line and column).
pub fn parse_checked(
    text: &[u8],
    size: Option<[usize; 3]>,
    check: &dyn Fn(&Definition) -> std::result::Result<(), String>,
) -> Result<Grid> {
    let text = match std::str::from_utf8(text) {
        Ok(t) => t,
        Err(e) => {
            let valid = text.get(..e.valid_up_to()).unwrap_or(&[]);
            let prefix = String::from_utf8_lossy(valid);
            return Err(Source { text: &prefix }.error(prefix.len(), "the file is not UTF-8"));
        }
    };
    let src = Source { text };
    let (name, name_at, value) = src.parse_assignment()?;
    if name != "Cubeset" {
        return Err(src.error(
            name_at,
            format!("expected `Cubeset = {{`, found `{}`", excerpt(name)),
        ));
    }
    let top = Fields::of(&src, &value, "Cubeset")?;
    top.only(&["Metadata", "Pieces"])?;
    let metadata = top.required("Metadata")?;
    let version = Fields::of(&src, metadata, "Metadata")?.required("CubesetFormatVersion")?;
    if !matches!(version.kind, Kind::Num("1")) {
        return Err(src.error(version.at, "only CubesetFormatVersion = 1 is supported"));
    }
    let piece = Fields::of(&src, the_piece(&src, top.required("Pieces")?)?, "a piece")?;
    piece.only(&[
        "Size",
        "Hitbox",
        "Connectors",
        "Metadata",
        "BlockDefinitions",
        "BlockData",
    ])?;
    for name in ["Hitbox", "Connectors", "Metadata"] {
        if let Some(v) = piece.get(name) {
            Fields::of(&src, v, name)?;
        }
    }
    let dims = read_size(&src, piece.required("Size")?, size)?;
    let definitions = Definitions::parse(&src, piece.required("BlockDefinitions")?, check)?;
    let raw_cells = read_cells(&src, piece.required("BlockData")?, dims, &definitions)?;
    Ok(definitions.canonical(dims, raw_cells))
}

/// The one piece of `Pieces` (a worldfs Cubeset holds exactly one).
fn the_piece<'v, 'a>(src: &Source<'a>, pieces: &'v Value<'a>) -> Result<&'v Value<'a>> {
    match &pieces.kind {
        Kind::Table(fields) => match fields.as_slice() {
            [Field {
                key: None, value, ..
            }] => Ok(value),
            [] => Err(src.error(pieces.at, "Pieces must hold one piece")),
            [_, second, ..] => {
                Err(src.error(second.key_at, "a worldfs Cubeset holds exactly one piece"))
            }
            [other] => Err(src.error(other.key_at, "a piece must be a table without key")),
        },
        _ => Err(src.error(pieces.at, "Pieces must be a table")),
    }
}

/// The piece's `Size`, which must be `expected` when given.
fn read_size(
    src: &Source<'_>,
    size_value: &Value<'_>,
    expected: Option<[usize; 3]>,
) -> Result<[usize; 3]> {
    let size_fields = Fields::of(src, size_value, "Size")?;
    size_fields.only(&["x", "y", "z"])?;
    let mut dims = [0usize; 3];
    for (dim, axis) in dims.iter_mut().zip(["x", "y", "z"]) {
        let v = size_fields.required(axis)?;
        *dim = match v.kind {
            Kind::Num(n) => n
                .parse::<usize>()
                .ok()
                .filter(|&d| (1..=MAX_EDGE).contains(&d)),
            _ => None,
        }
        .ok_or_else(|| {
            src.error(
                v.at,
                format!("Size.{axis} must be a whole number from 1 to {MAX_EDGE}"),
            )
        })?;
    }
    if let Some(expected) = expected {
        if expected != dims {
            return Err(src.error(
                size_value.at,
                format!(
                    "the size must be x = {}, y = {}, z = {}",
                    expected[0], expected[1], expected[2]
                ),
            ));
        }
    }
    Ok(dims)
}

/// The UTF-8 bytes of one character.
#[derive(Clone, Copy)]
struct Glyph {
    buf: [u8; 4],
    len: u8,
}

impl Glyph {
    fn new(c: char) -> Glyph {
        let mut buf = [0; 4];
        let len = c.encode_utf8(&mut buf).len() as u8;
        Glyph { buf, len }
    }

    fn bytes(&self) -> &[u8] {
        &self.buf[..usize::from(self.len)]
    }
}

/// Appends `text` as the inside of a double-quoted Lua string.
fn push_lua_escaped(out: &mut Vec<u8>, text: &str) {
    for &b in text.as_bytes() {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0..=0x1f | 0x7f => out.extend_from_slice(format!("\\{b:03}").as_bytes()),
            _ => out.push(b),
        }
    }
}

/// The named fields of a table, for lookups with good error messages.
struct Fields<'s, 'v, 'a> {
    src: &'s Source<'a>,
    table: &'v Value<'a>,
    what: &'static str,
    fields: &'v [Field<'a>],
}

impl<'s, 'v, 'a> Fields<'s, 'v, 'a> {
    /// The fields of `value`, which must be a table; duplicate keys are rejected.
    fn of(src: &'s Source<'a>, value: &'v Value<'a>, what: &'static str) -> Result<Self> {
        let Kind::Table(fields) = &value.kind else {
            return Err(src.error(
                value.at,
                format!("{what} must be a table, found {}", value.describe()),
            ));
        };
        for (i, f) in fields.iter().enumerate() {
            if let Some(key) = &f.key {
                if fields[..i].iter().any(|g| g.key.as_ref() == Some(key)) {
                    return Err(src.error(f.key_at, format!("`{key}` is given twice")));
                }
            }
        }
        Ok(Fields {
            src,
            table: value,
            what,
            fields,
        })
    }

    /// Rejects fields other than the named ones, and positional fields.
    fn only(&self, allowed: &[&str]) -> Result<()> {
        for f in self.fields {
            match &f.key {
                Some(k) if allowed.contains(&k.as_ref()) => {}
                Some(k) => {
                    return Err(self.src.error(
                        f.key_at,
                        format!(
                            "unknown key `{k}` in {} (expected {})",
                            self.what,
                            allowed.join(", ")
                        ),
                    ))
                }
                None => {
                    return Err(self.src.error(
                        f.key_at,
                        format!("{} takes only `key = value` fields", self.what),
                    ))
                }
            }
        }
        Ok(())
    }

    fn get(&self, key: &str) -> Option<&'v Value<'a>> {
        self.fields
            .iter()
            .find(|f| f.key.as_deref() == Some(key))
            .map(|f| &f.value)
    }

    fn required(&self, key: &str) -> Result<&'v Value<'a>> {
        self.get(key).ok_or_else(|| {
            self.src
                .error(self.table.at, format!("{} has no `{key}`", self.what))
        })
    }
}

/// The definitions of a file, in file order, with the lookup from character to definition.
struct Definitions {
    /// Distinct (TYPE, META) in file order.
    defs: Vec<Definition>,
    /// Definition index for each ASCII character (`u32::MAX` = undefined).
    ascii: [u32; 128],
    /// Definition index for other characters.
    other: HashMap<char, u32>,
}

impl Definitions {
    fn parse(
        src: &Source<'_>,
        value: &Value<'_>,
        check: &dyn Fn(&Definition) -> std::result::Result<(), String>,
    ) -> Result<Self> {
        let Kind::Table(fields) = &value.kind else {
            return Err(src.error(value.at, "BlockDefinitions must be a table of strings"));
        };
        let mut index_of: HashMap<Definition, u32> = HashMap::with_capacity(fields.len());
        let mut table = Definitions {
            defs: Vec::with_capacity(fields.len()),
            ascii: [u32::MAX; 128],
            other: HashMap::new(),
        };
        for f in fields {
            let (None, Kind::Str(s)) = (&f.key, &f.value.kind) else {
                return Err(if f.key.is_some() {
                    src.error(
                        f.key_at,
                        "BlockDefinitions takes only strings, not `key = value`",
                    )
                } else {
                    src.error(
                        f.value.at,
                        format!(
                            "a definition must be a string like \"a: default:stone: 0\", found {}",
                            f.value.describe()
                        ),
                    )
                });
            };
            let (glyph, kind, meta) =
                split_definition(&s.text).map_err(|message| src.error(f.value.at, message))?;
            let def = Definition {
                kind: kind.to_string(),
                meta,
            };
            check(&def).map_err(|message| src.error(f.value.at, message))?;
            let next = table.defs.len() as u32;
            let index = match index_of.get(&def) {
                Some(&i) => i,
                None => {
                    index_of.insert(def.clone(), next);
                    table.defs.push(def);
                    next
                }
            };
            let slot = if glyph.is_ascii() {
                &mut table.ascii[glyph as usize]
            } else {
                table.other.entry(glyph).or_insert(u32::MAX)
            };
            if *slot != u32::MAX {
                return Err(src.error(f.value.at, format!("character {glyph:?} is defined twice")));
            }
            *slot = index;
        }
        Ok(table)
    }

    fn lookup(&self, c: char) -> Option<u32> {
        let index = if c.is_ascii() {
            self.ascii[c as usize]
        } else {
            *self.other.get(&c)?
        };
        (index != u32::MAX).then_some(index)
    }

    /// The grid with definitions renumbered in order of first use, unused ones dropped.
    fn canonical(mut self, size: [usize; 3], mut cells: Vec<u32>) -> Grid {
        let mut new_index = vec![u32::MAX; self.defs.len()];
        let mut palette = Vec::new();
        for c in cells.iter_mut() {
            let old = *c as usize;
            if new_index[old] == u32::MAX {
                new_index[old] = palette.len() as u32;
                palette.push(Definition {
                    kind: std::mem::take(&mut self.defs[old].kind),
                    meta: self.defs[old].meta,
                });
            }
            *c = new_index[old];
        }
        Grid {
            size,
            palette,
            cells,
        }
    }
}

/// Splits `"C: TYPE: META"` into its parts; META is after the last `:`.
fn split_definition(text: &str) -> std::result::Result<(char, &str, u32), String> {
    const SHAPE: &str =
        "a definition must look like \"C: TYPE: META\", e.g. \"a: default:stone: 0\"";
    let text = text.trim_start();
    let mut chars = text.chars();
    let glyph = chars
        .next()
        .ok_or_else(|| format!("empty definition; {SHAPE}"))?;
    if glyph == ':' || glyph.is_control() {
        return Err(format!("{glyph:?} cannot be a cell character; {SHAPE}"));
    }
    let rest = chars
        .as_str()
        .trim_start()
        .strip_prefix(':')
        .ok_or_else(|| format!("expected `:` after the character {glyph:?}; {SHAPE}"))?;
    let (kind, meta) = rest
        .rsplit_once(':')
        .ok_or_else(|| format!("no `: META` after the type; {SHAPE}"))?;
    let meta = meta.trim();
    let meta = if !meta.is_empty() && meta.bytes().all(|b| b.is_ascii_digit()) {
        meta.parse::<u32>().ok()
    } else {
        None
    }
    .ok_or_else(|| {
        format!(
            "META `{}` must be a whole number from 0 to 4294967295",
            excerpt(meta)
        )
    })?;
    Ok((glyph, kind.trim(), meta))
}

/// Reads `BlockData` into definition indices in cell order.
fn read_cells(
    src: &Source<'_>,
    value: &Value<'_>,
    [sx, sy, sz]: [usize; 3],
    defs: &Definitions,
) -> Result<Vec<u32>> {
    let Kind::Table(rows) = &value.kind else {
        return Err(src.error(value.at, "BlockData must be a table of strings"));
    };
    let row_count = sy * sz;
    if let Some(extra) = rows.get(row_count) {
        return Err(src.error(
            extra.key_at,
            format!("too many rows: BlockData has {sy} levels of {sz} rows ({row_count} strings)"),
        ));
    }
    if rows.len() < row_count {
        return Err(src.error(
            value.at,
            format!(
                "BlockData has {} rows, expected {sy} levels of {sz} rows ({row_count} strings)",
                rows.len()
            ),
        ));
    }
    // Every cell takes at least one byte of the file: that bounds the allocation.
    let mut cells = Vec::with_capacity(row_count.saturating_mul(sx).min(src.text.len()));
    for (r, row) in rows.iter().enumerate() {
        let (None, Kind::Str(s)) = (&row.key, &row.value.kind) else {
            return Err(src.error(
                row.key_at,
                format!(
                    "BlockData takes only strings, found {}",
                    row.value.describe()
                ),
            ));
        };
        let (level, z) = (r / sz, r % sz);
        // Column positions inside the string are exact when it has no escapes.
        let char_at = |byte: usize| {
            if s.raw {
                row.value.at + 1 + byte
            } else {
                row.value.at
            }
        };
        let mut n = 0;
        for (byte, c) in s.text.char_indices() {
            let Some(d) = defs.lookup(c) else {
                return Err(src.error(
                    char_at(byte),
                    format!("unknown character {c:?} (no definition in BlockDefinitions)"),
                ));
            };
            if n == sx {
                return Err(src.error(
                    char_at(byte),
                    format!("row too long: level {level} row {z} must have {sx} characters"),
                ));
            }
            cells.push(d);
            n += 1;
        }
        if n < sx {
            return Err(src.error(
                row.value.at,
                format!("row too short: level {level} row {z} has {n} characters, expected {sx}"),
            ));
        }
    }
    Ok(cells)
}

#[cfg(test)]
mod tests;
