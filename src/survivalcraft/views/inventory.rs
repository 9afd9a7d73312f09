//! `players/NAME/inventory`: a player's inventory slots from Project.xml.
//!
//! Format: a section header `[COMPONENT]` per inventory of the entity (`Inventory`,
//! `CreativeInventory`, `CraftingTable`, ...), then one line per filled slot:
//! `SLOT CONTENTS COUNT`, decimal, separated by spaces or tabs, optionally followed by a
//! `#` comment (the writer puts the block name and data there). CONTENTS is the block
//! value the game stores (2.x: id + data × 16384; 1.x: id + data × 4096). A slot that is
//! not listed, or has COUNT 0, is empty. A section left out is left unchanged; a section
//! the entity does not have is an error when written. Lines starting with `#` and blank
//! lines are ignored.

use crate::error::Result;
use crate::survivalcraft::codec::block_names::block_name;
use crate::survivalcraft::codec::project::{Inventory, Slot, MAX_SLOT};
use crate::survivalcraft::views::data_lines;
use crate::text::Line;

/// How block values are packed (16-bit cells in 1.x, 32-bit in 1.29+).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueLayout {
    /// `id | light << 8 | data << 12`.
    Bits16,
    /// `id | light << 10 | data << 14`.
    Bits32,
}

fn describe(contents: i32, layout: ValueLayout) -> String {
    let v = contents as u32;
    let (id, data) = match layout {
        ValueLayout::Bits16 => ((v & 0xFF) as u16, (v >> 12) & 0xF),
        ValueLayout::Bits32 => ((v & 0x3FF) as u16, v >> 14),
    };
    let name = block_name(id).map_or_else(|| format!("id {id}"), str::to_string);
    if data == 0 {
        name
    } else {
        format!("{name}, data {data}")
    }
}

/// Renders the inventory file for an entity's inventories.
pub fn render(inventories: &[Inventory], layout: ValueLayout) -> Vec<u8> {
    let mut out =
        String::from("# SLOT CONTENTS COUNT (CONTENTS = block value); unlisted slots are empty\n");
    for inv in inventories {
        out.push_str(&format!("[{}]\n", inv.component));
        for s in &inv.slots {
            out.push_str(&format!(
                "{} {} {}  # {}\n",
                s.index,
                s.contents,
                s.count,
                describe(s.contents, layout)
            ));
        }
    }
    out.into_bytes()
}

fn number<T: std::str::FromStr>(line: &Line<'_>, word: &str, what: &str) -> Result<T> {
    if let Some((i, ch)) = word
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_digit() || (i == 0 && c == '-')))
    {
        let at = word.get(i..).unwrap_or(word);
        return Err(line.error_at(at, format!("unknown character {ch:?}")));
    }
    word.parse()
        .map_err(|_| line.error_at(word, format!("{what} {word} is out of range")))
}

/// Parses an edited inventory file into the inventories it lists.
pub fn parse(text: &[u8]) -> Result<Vec<Inventory>> {
    let mut out: Vec<Inventory> = Vec::new();
    for line in data_lines(text)?.0 {
        let line = line.before_hash();
        let t = line.text.trim_start();
        if let Some(rest) = t.strip_prefix('[') {
            let inv = section(&line, t, rest, &out)?;
            out.push(inv);
            continue;
        }
        let Some(inv) = out.last_mut() else {
            return Err(line.error_at(t, "a slot line before any [COMPONENT] header"));
        };
        if let Some(slot) = slot(&line, inv)? {
            inv.slots.push(slot);
        }
    }
    for inv in &mut out {
        inv.slots.sort_by_key(|s| s.index);
    }
    Ok(out)
}

/// A `[COMPONENT]` section header (`t` the line from `[`, `rest` after it), new in `out`.
fn section(line: &Line<'_>, t: &str, rest: &str, out: &[Inventory]) -> Result<Inventory> {
    let name = rest
        .strip_suffix(']')
        .filter(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .ok_or_else(|| line.error_at(t, "a section header is [COMPONENT]"))?;
    if out.iter().any(|i| i.component == name) {
        return Err(line.error_at(t, format!("section [{name}] appears twice")));
    }
    Ok(Inventory {
        component: name.to_string(),
        slots: Vec::new(),
    })
}

/// A `SLOT CONTENTS COUNT` line of `inv`: the slot it fills, `None` for COUNT 0.
fn slot(line: &Line<'_>, inv: &Inventory) -> Result<Option<Slot>> {
    let words: Vec<&str> = line.words().collect();
    let [slot, contents, count] = words[..] else {
        return Err(match words.get(3) {
            Some(extra) => line.error_at(extra, "a slot line is SLOT CONTENTS COUNT"),
            None => line.error_at_end("a slot line is SLOT CONTENTS COUNT"),
        });
    };
    let index: u32 = number(line, slot, "SLOT")?;
    let contents_value: i32 = number(line, contents, "CONTENTS")?;
    let count_value: i32 = number(line, count, "COUNT")?;
    if index > MAX_SLOT {
        return Err(line.error_at(slot, format!("SLOT {index} is over {MAX_SLOT}")));
    }
    if count_value < 0 {
        return Err(line.error_at(count, "COUNT is negative"));
    }
    if inv.slots.iter().any(|s| s.index == index) {
        return Err(line.error_at(slot, format!("slot {index} is listed twice")));
    }
    Ok((count_value > 0).then_some(Slot {
        index,
        contents: contents_value,
        count: count_value,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn invs() -> Vec<Inventory> {
        vec![
            Inventory {
                component: "Inventory".into(),
                slots: vec![
                    Slot {
                        index: 1,
                        contents: 162,
                        count: 1,
                    },
                    Slot {
                        index: 3,
                        contents: 20653,
                        count: 64,
                    },
                ],
            },
            Inventory {
                component: "CraftingTable".into(),
                slots: vec![],
            },
        ]
    }

    #[test]
    fn inventories_round_trip() {
        let text = render(&invs(), ValueLayout::Bits16);
        assert!(String::from_utf8(text.clone())
            .unwrap()
            .contains("3 20653 64  # Seeds, data 5"));
        assert_eq!(parse(&text).unwrap(), invs());
    }

    #[test]
    fn count_zero_empties_a_slot() {
        let p = parse(b"[Inventory]\n1 162 0\n2 5 3 # x\n").unwrap();
        assert_eq!(
            p[0].slots,
            vec![Slot {
                index: 2,
                contents: 5,
                count: 3
            }]
        );
    }

    #[test]
    fn errors_have_positions() {
        let msg = |t: &str| parse(t.as_bytes()).unwrap_err().message().to_string();
        assert_eq!(
            msg("1 2 3\n"),
            "line 1, column 1: a slot line before any [COMPONENT] header"
        );
        assert_eq!(
            msg("[Inventory]\n1 2x 3\n"),
            "line 2, column 4: unknown character 'x'"
        );
        assert_eq!(
            msg("[Inventory]\n1 2\n"),
            "line 2, column 4: a slot line is SLOT CONTENTS COUNT"
        );
        assert_eq!(
            msg("[Inventory]\n1 2 3 4\n"),
            "line 2, column 7: a slot line is SLOT CONTENTS COUNT"
        );
        assert_eq!(
            msg("[Inventory]\n1 2 -3\n"),
            "line 2, column 5: COUNT is negative"
        );
        assert_eq!(
            msg("[Inventory]\n1 2 3\n1 2 3\n"),
            "line 3, column 1: slot 1 is listed twice"
        );
        assert_eq!(
            msg("[Inventory]\n1 99999999999 3\n"),
            "line 2, column 3: CONTENTS 99999999999 is out of range"
        );
        assert!(msg("[Inv entory]\n").starts_with("line 1, column 1"));
        assert!(msg("[Inventory]\n[Inventory]\n").contains("twice"));
    }
}
