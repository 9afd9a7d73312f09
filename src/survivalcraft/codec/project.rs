//! Inventories in Project.xml: reading them, and writing changed slots back with targeted
//! byte-range edits.
//!
//! An inventory is a component `<Values Name="Inventory|CraftingTable|Chest|Furnace|...">`
//! of an `<Entity>` that has a `<Values Name="Slots">` child; each slot is
//! `<Values Name="SlotN">` with `Contents` (a block value) and `Count`, and only slots with
//! a count are written (spec §10.2). Players are the entities with a `Player` component;
//! their name comes from `Subsystems/Players/Players/<PlayerIndex>/Name` (2.x) or is the
//! entity's template name (1.x: `Player`).
//!
//! [`write_inventories`] leaves every byte it does not have to change as it was: a changed
//! number replaces just that attribute value, a removed slot removes its element and the
//! whitespace before it, and a new slot is inserted with the indentation and line ending
//! of its neighbours.

use std::collections::BTreeMap;
use std::ops::Range;

use crate::error::{Error, Result};
use crate::survivalcraft::codec::xml::{self, Element};

/// Highest slot index accepted on write (the game's inventories have at most a few dozen).
pub const MAX_SLOT: u32 = 9999;

/// One inventory slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// Slot index (`SlotN`).
    pub index: u32,
    /// Block value: 1.x the 16-bit form, 2.x the 32-bit form without light (spec §8).
    pub contents: i32,
    /// Number of items (at least 1).
    pub count: i32,
}

/// One inventory component of an entity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inventory {
    /// Component name: `Inventory`, `CreativeInventory`, `CraftingTable`, `Chest`, ...
    pub component: String,
    /// Slots in index order.
    pub slots: Vec<Slot>,
}

/// An entity that holds inventories.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// The entity's `Id` attribute.
    pub entity_id: String,
    /// The entity's template name (`Player`, `MalePlayer`, `Chest`, `Furnace`, ...).
    pub template: String,
    /// The player's name, for player entities.
    pub player_name: Option<String>,
    /// `BlockEntity/Coordinates` (`x,y,z`) for chests, furnaces and other block entities.
    pub coordinates: Option<String>,
    /// Inventories in document order.
    pub inventories: Vec<Inventory>,
}

/// What worldfs reads from Project.xml.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectInfo {
    /// The `Version` attribute of `<Project>`.
    pub version: String,
    /// Entities with inventories, in document order.
    pub holders: Vec<Holder>,
}

impl ProjectInfo {
    /// Players with unique names: a name used by more than one entity becomes `NAME#ID`.
    pub fn players(&self) -> Vec<(String, &Holder)> {
        let players: Vec<&Holder> = self
            .holders
            .iter()
            .filter(|h| h.player_name.is_some())
            .collect();
        players
            .iter()
            .map(|h| {
                let name = h.player_name.clone().unwrap_or_default();
                let shared = players
                    .iter()
                    .filter(|o| o.player_name.as_ref() == Some(&name))
                    .count()
                    > 1;
                if shared {
                    (format!("{name}#{}", h.entity_id), *h)
                } else {
                    (name, *h)
                }
            })
            .collect()
    }
}

fn entities(root: &Element) -> impl Iterator<Item = &Element> {
    root.children
        .iter()
        .filter(|c| c.name == "Entities")
        .flat_map(|e| e.children.iter().filter(|c| c.name == "Entity"))
}

fn player_names(root: &Element) -> BTreeMap<String, String> {
    let mut names = BTreeMap::new();
    let list = root
        .children
        .iter()
        .filter(|c| c.name == "Subsystems")
        .find_map(|s| s.values("Players"))
        .and_then(|p| p.values("Players"));
    if let Some(list) = list {
        for p in list.children.iter().filter(|c| c.name == "Values") {
            if let (Some(idx), Some(name)) = (p.attr("Name"), p.value("Name")) {
                names.insert(idx.value.clone(), name.value.clone());
            }
        }
    }
    names
}

fn int(attr: Option<&xml::Attr>, what: &str) -> Result<i32> {
    let a = attr.ok_or_else(|| Error::corrupt(format!("{what} is missing")))?;
    a.value
        .trim()
        .parse()
        .map_err(|_| Error::corrupt(format!("{what} {:?} is not an int", a.value)))
}

fn slot_index(el: &Element) -> Option<u32> {
    let name = &el.attr("Name")?.value;
    let n = name.strip_prefix("Slot")?;
    let i: u32 = n.parse().ok()?;
    (i.to_string() == n).then_some(i)
}

fn slots_of(slots: &Element) -> Result<Vec<Slot>> {
    let mut out = Vec::new();
    for el in slots.children.iter().filter(|c| c.name == "Values") {
        let index = slot_index(el).ok_or_else(|| {
            Error::corrupt(format!(
                "slot element {:?} is not SlotN",
                el.attr("Name").map(|a| &a.value)
            ))
        })?;
        out.push(Slot {
            index,
            contents: int(el.value("Contents"), &format!("Slot{index} Contents"))?,
            count: int(el.value("Count"), &format!("Slot{index} Count"))?,
        });
    }
    out.sort_by_key(|s| s.index);
    Ok(out)
}

fn inventories_of(entity: &Element) -> Result<Vec<Inventory>> {
    let mut out = Vec::new();
    for comp in entity.children.iter().filter(|c| c.name == "Values") {
        if let (Some(name), Some(slots)) = (comp.attr("Name"), comp.values("Slots")) {
            out.push(Inventory {
                component: name.value.clone(),
                slots: slots_of(slots).map_err(|e| e.context(&name.value))?,
            });
        }
    }
    Ok(out)
}

/// Reads the version and every entity's inventories.
pub fn read(src: &[u8]) -> Result<ProjectInfo> {
    let root = xml::parse(src)?;
    if root.name != "Project" {
        return Err(Error::corrupt(format!(
            "root element is <{}>, not <Project>",
            root.name
        )));
    }
    let names = player_names(&root);
    let mut holders = Vec::new();
    for e in entities(&root) {
        let inventories = inventories_of(e)?;
        let player = e.values("Player");
        if inventories.is_empty() && player.is_none() {
            continue;
        }
        let entity_id = e.attr("Id").map(|a| a.value.clone()).unwrap_or_default();
        let template = e.attr("Name").map(|a| a.value.clone()).unwrap_or_default();
        let player_name = player.map(|p| {
            p.value("PlayerIndex")
                .and_then(|i| names.get(&i.value))
                .cloned()
                .unwrap_or_else(|| template.clone())
        });
        holders.push(Holder {
            entity_id,
            template,
            player_name,
            coordinates: e
                .values("BlockEntity")
                .and_then(|b| b.value("Coordinates"))
                .map(|a| a.value.clone()),
            inventories,
        });
    }
    Ok(ProjectInfo {
        version: root
            .attr("Version")
            .map(|a| a.value.clone())
            .unwrap_or_default(),
        holders,
    })
}

/// Checks slots a user wants to store: unique indices up to [`MAX_SLOT`], counts ≥ 1.
pub fn check_slots(slots: &[Slot]) -> Result<()> {
    for (i, s) in slots.iter().enumerate() {
        if s.index > MAX_SLOT {
            return Err(Error::invalid(format!(
                "slot {} is over {MAX_SLOT}",
                s.index
            )));
        }
        if s.count < 1 {
            return Err(Error::invalid(format!(
                "slot {} has count {}",
                s.index, s.count
            )));
        }
        if slots[..i].iter().any(|o| o.index == s.index) {
            return Err(Error::invalid(format!("slot {} is listed twice", s.index)));
        }
    }
    Ok(())
}

/// Line ending, and the indentation of the line `at` starts on.
fn layout(src: &[u8], at: usize) -> (&'static str, String) {
    let nl = if src.windows(2).any(|w| w == b"\r\n") {
        "\r\n"
    } else {
        "\n"
    };
    let line_start = src[..at]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |p| p + 1);
    let indent: String = src[line_start..at]
        .iter()
        .take_while(|b| **b == b' ' || **b == b'\t')
        .map(|&b| b as char)
        .collect();
    (nl, indent)
}

fn slot_xml(s: &Slot, nl: &str, indent: &str) -> String {
    format!(
        "<Values Name=\"Slot{i}\">{nl}{indent}  <Value Name=\"Contents\" Type=\"int\" Value=\"{c}\" />{nl}{indent}  <Value Name=\"Count\" Type=\"int\" Value=\"{n}\" />{nl}{indent}</Values>",
        i = s.index,
        c = s.contents,
        n = s.count
    )
}

fn value_span(slot: &Element, name: &str) -> Result<Range<usize>> {
    slot.value(name)
        .map(|a| a.span.clone())
        .ok_or_else(|| Error::corrupt(format!("slot has no {name}")))
}

/// The start tag of `el` without its closing `>` or `/>` and the blanks before it.
fn open_tag(src: &[u8], el: &Element) -> Vec<u8> {
    let tag = &src[el.start_tag.clone()];
    let body = tag
        .strip_suffix(b"/>")
        .or_else(|| tag.strip_suffix(b">"))
        .unwrap_or(tag);
    let trimmed = body
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(body, |p| &body[..=p]);
    trimmed.to_vec()
}

fn slots_edits(
    src: &[u8],
    slots_el: &Element,
    new: &[Slot],
) -> Result<Vec<(Range<usize>, Vec<u8>)>> {
    let old = slots_of(slots_el)?;
    if old.as_slice() == new {
        return Ok(Vec::new());
    }
    let (nl, indent) = layout(src, slots_el.span.start);
    let inner = format!("{indent}  ");
    if new.is_empty() {
        if slots_el.self_closing {
            return Ok(Vec::new());
        }
        let mut text = open_tag(src, slots_el);
        text.extend_from_slice(b" />");
        return Ok(vec![(slots_el.span.clone(), text)]);
    }
    if slots_el.self_closing {
        let mut text = open_tag(src, slots_el);
        text.push(b'>');
        for s in new {
            text.extend_from_slice(format!("{nl}{inner}{}", slot_xml(s, nl, &inner)).as_bytes());
        }
        text.extend_from_slice(format!("{nl}{indent}</Values>").as_bytes());
        return Ok(vec![(slots_el.span.clone(), text)]);
    }
    let mut edits = Vec::new();
    // Children in document order with the end of whatever precedes each.
    let mut prev_end = slots_el.start_tag.end;
    let mut placed: Vec<(usize, Option<u32>)> = Vec::new();
    for child in &slots_el.children {
        let idx = slot_index(child);
        match idx.and_then(|i| new.iter().find(|s| s.index == i)) {
            Some(s) => {
                let before = old.iter().find(|o| Some(o.index) == idx);
                if before.map(|o| o.contents) != Some(s.contents) {
                    edits.push((
                        value_span(child, "Contents")?,
                        s.contents.to_string().into_bytes(),
                    ));
                }
                if before.map(|o| o.count) != Some(s.count) {
                    edits.push((
                        value_span(child, "Count")?,
                        s.count.to_string().into_bytes(),
                    ));
                }
            }
            None if idx.is_some() => edits.push((prev_end..child.span.end, Vec::new())),
            None => {}
        }
        placed.push((child.span.end, idx));
        prev_end = child.span.end;
    }
    for s in new
        .iter()
        .filter(|s| !old.iter().any(|o| o.index == s.index))
    {
        // After the last child whose slot index is lower (or that is not a slot), else first.
        let mut at = slots_el.start_tag.end;
        for &(end, idx) in &placed {
            if idx.map_or(true, |i| i < s.index) {
                at = end;
            }
        }
        let text = format!("{nl}{inner}{}", slot_xml(s, nl, &inner));
        edits.push((at..at, text.into_bytes()));
    }
    Ok(edits)
}

/// Rewrites the slots of some inventories of one entity, changing only the bytes that must
/// change. Each given inventory must exist in the entity; others are left alone.
pub fn write_inventories(
    src: &[u8],
    entity_id: &str,
    inventories: &[Inventory],
) -> Result<Vec<u8>> {
    let root = xml::parse(src)?;
    let entity = entities(&root)
        .find(|e| e.attr("Id").is_some_and(|a| a.value == entity_id))
        .ok_or_else(|| Error::not_found(format!("no entity with Id {entity_id}")))?;
    let mut edits = Vec::new();
    for inv in inventories {
        let mut slots = inv.slots.clone();
        check_slots(&slots).map_err(|e| e.context(&inv.component))?;
        slots.sort_by_key(|s| s.index);
        let slots_el = entity
            .values(&inv.component)
            .and_then(|c| c.values("Slots"))
            .ok_or_else(|| {
                Error::invalid(format!(
                    "entity {entity_id} has no inventory {}",
                    inv.component
                ))
            })?;
        edits.extend(slots_edits(src, slots_el, &slots)?);
    }
    xml::splice(src, edits)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "<Project Version=\"2.3\">\r\n  <Subsystems>\r\n    <Values Name=\"Players\">\r\n      <Values Name=\"Players\">\r\n        <Values Name=\"0\">\r\n          <Value Name=\"Name\" Type=\"string\" Value=\"Ann\" />\r\n        </Values>\r\n      </Values>\r\n    </Values>\r\n  </Subsystems>\r\n  <Entities>\r\n    <Entity Id=\"7\" Name=\"FemalePlayer\">\r\n      <Values Name=\"Player\">\r\n        <Value Name=\"PlayerIndex\" Type=\"int\" Value=\"0\" />\r\n      </Values>\r\n      <Values Name=\"Inventory\">\r\n        <Values Name=\"Slots\">\r\n          <Values Name=\"Slot1\">\r\n            <Value Name=\"Contents\" Type=\"int\" Value=\"162\" />\r\n            <Value Name=\"Count\" Type=\"int\" Value=\"1\" />\r\n          </Values>\r\n          <Values Name=\"Slot4\">\r\n            <Value Name=\"Contents\" Type=\"int\" Value=\"3\" />\r\n            <Value Name=\"Count\" Type=\"int\" Value=\"40\" />\r\n          </Values>\r\n        </Values>\r\n      </Values>\r\n      <Values Name=\"CraftingTable\">\r\n        <Values Name=\"Slots\" />\r\n      </Values>\r\n    </Entity>\r\n  </Entities>\r\n</Project>\r\n";

    fn slot(index: u32, contents: i32, count: i32) -> Slot {
        Slot {
            index,
            contents,
            count,
        }
    }

    #[test]
    fn reads_players_and_slots() {
        let info = read(DOC.as_bytes()).unwrap();
        assert_eq!(info.version, "2.3");
        let players = info.players();
        assert_eq!(players.len(), 1);
        assert_eq!(players[0].0, "Ann");
        let inv = &players[0].1.inventories;
        assert_eq!(inv[0].component, "Inventory");
        assert_eq!(inv[0].slots, vec![slot(1, 162, 1), slot(4, 3, 40)]);
        assert_eq!(inv[1].component, "CraftingTable");
        assert!(inv[1].slots.is_empty());
    }

    #[test]
    fn unchanged_slots_leave_the_bytes() {
        let info = read(DOC.as_bytes()).unwrap();
        let out = write_inventories(DOC.as_bytes(), "7", &info.holders[0].inventories).unwrap();
        assert_eq!(out, DOC.as_bytes());
    }

    #[test]
    fn edits_change_only_what_they_must() {
        let inv = Inventory {
            component: "Inventory".into(),
            slots: vec![slot(1, 162, 5), slot(4, 3, 40)],
        };
        let out = write_inventories(DOC.as_bytes(), "7", &[inv]).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            DOC.replace(
                "\"162\" />\r\n            <Value Name=\"Count\" Type=\"int\" Value=\"1\"",
                "\"162\" />\r\n            <Value Name=\"Count\" Type=\"int\" Value=\"5\""
            )
        );
    }

    #[test]
    fn slots_are_added_and_removed() {
        let inv = vec![
            Inventory {
                component: "Inventory".into(),
                slots: vec![slot(0, 9, 2), slot(4, 3, 40), slot(7, 1, 1)],
            },
            Inventory {
                component: "CraftingTable".into(),
                slots: vec![slot(2, 21, 4)],
            },
        ];
        let out = write_inventories(DOC.as_bytes(), "7", &inv).unwrap();
        let info = read(&out).unwrap();
        assert_eq!(info.holders[0].inventories, inv);
        let text = String::from_utf8(out).unwrap();
        assert!(!text.contains("\n\n") && !text.contains("\r\n\r\n"));
        assert!(text.contains("        <Values Name=\"Slots\">\r\n          <Values Name=\"Slot2\">\r\n            <Value Name=\"Contents\" Type=\"int\" Value=\"21\" />"));
        // Removing everything gives the self-closing form back.
        let empty = vec![Inventory {
            component: "Inventory".into(),
            slots: vec![],
        }];
        let out = write_inventories(text.as_bytes(), "7", &empty).unwrap();
        assert!(String::from_utf8(out)
            .unwrap()
            .contains("<Values Name=\"Inventory\">\r\n        <Values Name=\"Slots\" />"));
    }

    #[test]
    fn bad_requests_are_errors() {
        let inv = |slots| {
            vec![Inventory {
                component: "Inventory".into(),
                slots,
            }]
        };
        assert!(write_inventories(DOC.as_bytes(), "8", &inv(vec![])).is_err());
        assert!(write_inventories(DOC.as_bytes(), "7", &inv(vec![slot(1, 1, 0)])).is_err());
        assert!(write_inventories(
            DOC.as_bytes(),
            "7",
            &inv(vec![slot(1, 1, 1), slot(1, 2, 1)])
        )
        .is_err());
        let chest = vec![Inventory {
            component: "Chest".into(),
            slots: vec![],
        }];
        assert!(write_inventories(DOC.as_bytes(), "7", &chest).is_err());
        assert!(read(b"<NotProject/>").is_err());
        assert!(read(DOC.replace("\"162\"", "\"x\"").as_bytes()).is_err());
    }
}
