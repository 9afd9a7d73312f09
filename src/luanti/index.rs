//! Whole-world questions of a Luanti map, answered in-process (docs/tree.md "index/"): which
//! blocks hold a node, which inventory slots hold an item, which nodes have a metadata field
//! set to a value, which blocks hold static objects of an entity, which blocks do not decode.
//!
//! Walking the mount's files costs the kernel's price per file (minutes on a large world);
//! reading and decompressing every block in-process costs a fraction of a second per
//! hundred thousand blocks. So a question is answered by one scan of the whole store:
//! pages of blobs are read from [`BlockStore::list`] (the only access to the store, so any
//! backend serves), decoded by worker threads (two or more, one per core) and merged into an
//! [`Answer`]. A scan holds at most [`SCAN_BYTES`] of blobs at once (plus one page), so its
//! memory does not grow with the world. Nothing is scanned at mount; the first question of a kind (nodes, items,
//! fields) scans for that kind, and every scan also finds the blocks that do not decode.
//!
//! The answer is kept true without rescanning after our own commits: the store reports each
//! commit with the database's `data_version` before and after it ([`CommitWatch`]), and
//! when the answer was current before the commit it is updated for the committed blocks
//! only. A rename, streamed into its transaction without keeping the blobs, is followed
//! without decoding its blocks again ([`Index::edited`], [`Answer::node_renamed`],
//! [`Answer::item_renamed`]). Any other change of `data_version` (another writer's commit)
//! leaves the answer out of date: the next question scans again.
//!
//! Memory: an answer larger than the cache budget is used for the question that made it and
//! not kept, but for the node names, which make most of an answer on a large world (every
//! block holds a few): when their blocks would pass the budget, the scan keeps every name
//! and the blocks of the name the question is about only ([`Answer::nodes`]), and that is
//! kept, so a listing of that name's blocks (many calls) costs one scan.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::error::Result;
use crate::luanti::codec;
use crate::luanti::codec::block::{BlockPos, Inventory, MapBlock, ObjectData};
use crate::luanti::store::map::{too_large, Change};
use crate::luanti::store::write_back::{BlockStore, CommitWatch};
use crate::storekit::answers::{self, Answers, Start};
use crate::storekit::scan;

/// Blocks per page read from the store by a scan.
const SCAN_PAGE: usize = 256;

/// Bytes of blobs a scan holds at most at once (read and not yet decoded), beyond one page
/// (a page of [`BlockStore::list`] is itself bounded): memory stays bounded at any world
/// size, whatever the blobs weigh.
const SCAN_BYTES: usize = 16 << 20;

/// A block position packed into an integer ordered by x, then y, then z (never 0, at most
/// 2⁴⁸): the listing cookie of the block in every answer.
pub fn pack(pos: BlockPos) -> u64 {
    let u = |v: i16| u64::from((v as u16) ^ 0x8000);
    ((u(pos.x) << 32) | (u(pos.y) << 16) | u(pos.z)) + 1
}

/// The position [`pack`] made `packed` from.
pub fn unpack(packed: u64) -> BlockPos {
    let p = packed.wrapping_sub(1);
    let i = |shift: u32| ((p >> shift) as u16 ^ 0x8000) as i16;
    BlockPos {
        x: i(32),
        y: i(16),
        z: i(0),
    }
}

/// Whether `name` may name a node or an item in a rename: what the engine accepts in a
/// registration (`modname:name`, letters, digits and `_`, or a plain builtin name such as
/// `air`), at most 65,535 bytes (a name's length is stored in 16 bits).
pub fn valid_name(name: &[u8]) -> bool {
    !name.is_empty()
        && name.len() <= usize::from(u16::MAX)
        && name.iter().filter(|&&c| c == b':').count() <= 1
        && name.first() != Some(&b':')
        && name.last() != Some(&b':')
        && name
            .iter()
            .all(|&c| c.is_ascii_alphanumeric() || c == b'_' || c == b':')
}

/// Replaces node `from` by `to` in `block` (param2 and everything else kept; where the
/// block already holds `to`, both ids become one when encoded, since names are written
/// unique). Whether anything changed.
pub fn rename_node(block: &mut MapBlock, from: &str, to: &str) -> bool {
    let mut changed = false;
    for n in block.names.iter_mut().filter(|n| *n == from) {
        *n = to.to_string();
        changed = true;
    }
    changed
}

/// Replaces item `from` by `to` in every slot of `inventory` (count, wear and item
/// metadata kept). How many slots changed.
pub fn rename_item(inventory: &mut Inventory, from: &[u8], to: &[u8]) -> usize {
    let mut changed = 0;
    for s in inventory
        .lists
        .iter_mut()
        .flat_map(|l| l.slots.iter_mut())
        .filter(|s| s.name == from)
    {
        s.name = to.to_vec();
        changed += 1;
    }
    changed
}

/// The entity name of a static object: a Lua entity's (`__builtin:item` for a dropped
/// item, a mob's name); other objects, and entity data that does not parse, have none.
pub fn entity_name(data: &ObjectData) -> Option<&str> {
    match data {
        ObjectData::LuaEntity(e) => Some(&e.name),
        ObjectData::Raw(_) => None,
    }
}

/// Removes the static objects of entity `name` from `block`, every other object kept as it
/// is. Whether any was removed.
pub fn remove_objects(block: &mut MapBlock, name: &str) -> bool {
    let before = block.objects.len();
    block.objects.retain(|o| entity_name(&o.data) != Some(name));
    block.objects.len() != before
}

/// The kinds of question a scan answers (blocks that do not decode are always found).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Nodes,
    Items,
    Fields,
    Objects,
}

/// One inventory slot holding an item, in a node's metadata.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Slot {
    pub block: u64,
    pub node: u16,
    pub list: String,
    /// 1-based, as Lua's `inv:get_stack(list, i)` counts.
    pub slot: u32,
    pub count: u16,
}

/// What a block contributes to the answers of one kind.
enum Facts {
    Nodes(Vec<String>),
    Items(Vec<(Vec<u8>, Slot)>),
    Fields(Vec<(Vec<u8>, Vec<u8>, u16)>),
    Objects(Vec<String>),
}

/// The node names a block holds: those its nodes use (an id the mapping names but no node
/// uses is not held).
pub fn used_names(block: &MapBlock) -> Vec<String> {
    let mut used = vec![false; block.names.len()];
    for &id in &block.content {
        if let Some(u) = used.get_mut(usize::from(id)) {
            *u = true;
        }
    }
    let mut names: Vec<String> = block
        .names
        .iter()
        .zip(used)
        .filter(|(_, u)| *u)
        .map(|(n, _)| n.clone())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// What the decoded `block` contributes to the answer of `kind`. Decoding keeps exactly the
/// names the block's nodes use ([`MapBlock::names`] is canonical), so its node names need
/// no pass over the nodes ([`used_names`]).
fn facts(kind: Kind, packed: u64, block: &MapBlock) -> Facts {
    match kind {
        Kind::Nodes => {
            let mut names = block.names.clone();
            names.sort();
            Facts::Nodes(names)
        }
        Kind::Items => Facts::Items(
            block
                .metadata
                .iter()
                .flat_map(|m| {
                    m.inventory.lists.iter().flat_map(move |l| {
                        l.slots
                            .iter()
                            .enumerate()
                            .filter(|(_, s)| !s.name.is_empty())
                            .map(move |(i, s)| {
                                (
                                    s.name.clone(),
                                    Slot {
                                        block: packed,
                                        node: m.pos.index(),
                                        list: l.name.clone(),
                                        slot: i as u32 + 1,
                                        count: s.count,
                                    },
                                )
                            })
                    })
                })
                .collect(),
        ),
        Kind::Fields => Facts::Fields(
            block
                .metadata
                .iter()
                .flat_map(|m| {
                    m.vars
                        .iter()
                        .filter(|v| !v.private)
                        .map(move |v| (v.key.clone(), v.value.clone(), m.pos.index()))
                })
                .collect(),
        ),
        Kind::Objects => Facts::Objects(
            block
                .objects
                .iter()
                .filter_map(|o| entity_name(&o.data).map(str::to_string))
                .collect(),
        ),
    }
}

/// The values of one metadata field key → the nodes holding each: (packed block, node index).
pub type FieldValues = BTreeMap<Vec<u8>, BTreeSet<(u64, u16)>>;

/// Which node name a question is about (see [`Answer::nodes`]): a test of the stored name.
pub type Focus<'a> = Option<&'a dyn Fn(&str) -> bool>;

/// Bytes one entry of an answer is taken to weigh (see [`Answer::weight`]).
const ENTRY: usize = 48;

/// How a scan keeps the blocks of the node names within the budget (see [`Answer::nodes`]).
struct Keeping<'a> {
    budget: usize,
    focus: Focus<'a>,
    /// About how many bytes the answer holds so far.
    weight: usize,
    /// Whether only the blocks of the focused name are kept from now on.
    partial: bool,
}

impl Keeping<'_> {
    fn focused(&self, name: &str) -> bool {
        self.focus.is_some_and(|f| f(name))
    }
}

/// The answers of the kinds scanned so far, as of one `data_version` of the store.
#[derive(Default, Clone)]
pub struct Answer {
    /// Node name → packed positions of the blocks holding it. Every name some block holds
    /// is here; its blocks are `None` when keeping the blocks of every name would pass the
    /// budget (a large world): then only the blocks of the name the question was about are
    /// kept, and a question about another name scans again.
    pub nodes: Option<BTreeMap<String, Option<BTreeSet<u64>>>>,
    /// Item name → the node inventory slots holding it.
    pub items: Option<BTreeMap<Vec<u8>, BTreeSet<Slot>>>,
    /// Field key → value → (packed block, node index).
    pub fields: Option<BTreeMap<Vec<u8>, FieldValues>>,
    /// Entity name → packed positions of the blocks holding static objects of it.
    pub objects: Option<BTreeMap<String, BTreeSet<u64>>>,
    /// Packed positions of the blocks that do not decode → why.
    pub broken: BTreeMap<u64, String>,
    /// The store's `data_version` the answer is true for (`None`: none yet).
    pub version: Option<i64>,
}

impl Answer {
    fn has(&self, kind: Kind) -> bool {
        match kind {
            Kind::Nodes => self.nodes.is_some(),
            Kind::Items => self.items.is_some(),
            Kind::Fields => self.fields.is_some(),
            Kind::Objects => self.objects.is_some(),
        }
    }

    /// Whether the answer holds the blocks of the node name `focus` picks (when it holds
    /// nodes; a name no block holds needs none).
    pub fn knows(&self, focus: Focus<'_>) -> bool {
        let (Some(nodes), Some(f)) = (&self.nodes, focus) else {
            return true;
        };
        nodes.iter().all(|(n, held)| held.is_some() || !f(n))
    }

    /// Whether some node name's blocks are not kept (see [`Answer::nodes`]).
    fn partial(&self) -> bool {
        self.nodes.iter().flatten().any(|(_, held)| held.is_none())
    }

    fn start(&mut self, kind: Kind) {
        match kind {
            Kind::Nodes => self.nodes = Some(BTreeMap::new()),
            Kind::Items => self.items = Some(BTreeMap::new()),
            Kind::Fields => self.fields = Some(BTreeMap::new()),
            Kind::Objects => self.objects = Some(BTreeMap::new()),
        }
    }

    /// Adds the node names a block holds, within what `keeping` allows: once the answer
    /// weighs more than its budget, the blocks of every name but the focused one are dropped.
    fn add_nodes(&mut self, names: Vec<String>, packed: u64, keeping: &mut Keeping<'_>) {
        let Some(nodes) = &mut self.nodes else { return };
        for n in names {
            if !nodes.contains_key(&n) {
                keeping.weight += n.len() + ENTRY;
                let kept = !keeping.partial || keeping.focused(&n);
                nodes.insert(n.clone(), kept.then(BTreeSet::new));
            }
            if let Some(Some(set)) = nodes.get_mut(&n) {
                if set.insert(packed) {
                    keeping.weight += ENTRY;
                }
            }
        }
        if !keeping.partial && keeping.weight > keeping.budget {
            keeping.partial = true;
            for (n, held) in nodes.iter_mut() {
                if !keeping.focused(n) {
                    *held = None;
                }
            }
            keeping.weight = self.weight();
        }
    }

    fn add(&mut self, facts: Facts, packed: u64) {
        match facts {
            Facts::Nodes(names) => {
                if let Some(nodes) = &mut self.nodes {
                    for n in names {
                        if let Some(set) = nodes.entry(n).or_insert_with(|| Some(BTreeSet::new())) {
                            set.insert(packed);
                        }
                    }
                }
            }
            Facts::Items(slots) => {
                if let Some(items) = &mut self.items {
                    for (name, slot) in slots {
                        items.entry(name).or_default().insert(slot);
                    }
                }
            }
            Facts::Fields(vars) => {
                if let Some(fields) = &mut self.fields {
                    for (key, value, node) in vars {
                        fields
                            .entry(key)
                            .or_default()
                            .entry(value)
                            .or_default()
                            .insert((packed, node));
                    }
                }
            }
            Facts::Objects(names) => {
                if let Some(objects) = &mut self.objects {
                    for name in names {
                        objects.entry(name).or_default().insert(packed);
                    }
                }
            }
        }
    }

    /// Forgets what the block `packed` contributed (the nodes answer, when it does not
    /// keep every name's blocks, cannot tell whether a name is left: it is dropped).
    fn remove(&mut self, packed: u64) {
        self.broken.remove(&packed);
        if self.partial() {
            self.nodes = None;
        }
        if let Some(nodes) = &mut self.nodes {
            nodes.retain(|_, held| {
                held.as_mut().is_some_and(|set| {
                    set.remove(&packed);
                    !set.is_empty()
                })
            });
        }
        if let Some(items) = &mut self.items {
            items.retain(|_, slots| {
                slots.retain(|s| s.block != packed);
                !slots.is_empty()
            });
        }
        if let Some(fields) = &mut self.fields {
            fields.retain(|_, values| {
                values.retain(|_, nodes| {
                    nodes.retain(|(b, _)| *b != packed);
                    !nodes.is_empty()
                });
                !values.is_empty()
            });
        }
        if let Some(objects) = &mut self.objects {
            objects.retain(|_, blocks| {
                blocks.remove(&packed);
                !blocks.is_empty()
            });
        }
    }

    /// Takes the block `pos` as now stored as `blob` (`None`: deleted).
    fn update(&mut self, pos: BlockPos, blob: Option<&[u8]>) {
        let packed = pack(pos);
        self.remove(packed);
        let Some(blob) = blob else { return };
        match codec::decode_block(blob) {
            Ok(block) => {
                for kind in [Kind::Nodes, Kind::Items, Kind::Fields, Kind::Objects] {
                    if self.has(kind) {
                        self.add(facts(kind, packed, &block), packed);
                    }
                }
            }
            Err(e) => {
                self.broken.insert(packed, e.to_string());
            }
        }
    }

    /// Node `from` became `to` in the blocks `changed` (packed): every block that held
    /// `from` (a rename takes them all), and nothing else of them changed. The answer
    /// follows without decoding them again.
    pub fn node_renamed(&mut self, from: &str, to: &str, changed: &[u64]) {
        let Some(nodes) = &mut self.nodes else { return };
        if changed.is_empty() {
            return;
        }
        nodes.remove(from);
        let now = nodes
            .entry(to.to_string())
            .or_insert_with(|| Some(BTreeSet::new()));
        if let Some(set) = now {
            set.extend(changed);
        }
    }

    /// Item `from` became `to` in every node inventory of the blocks `changed` (packed),
    /// nothing else of them changed: the answer follows without decoding them again.
    pub fn item_renamed(&mut self, from: &[u8], to: &[u8], changed: &[u64]) {
        let Some(items) = &mut self.items else { return };
        let Some(slots) = items.remove(from) else {
            return;
        };
        let changed: BTreeSet<u64> = changed.iter().copied().collect();
        let (moved, left): (BTreeSet<Slot>, BTreeSet<Slot>) =
            slots.into_iter().partition(|s| changed.contains(&s.block));
        if !left.is_empty() {
            items.insert(from.to_vec(), left);
        }
        if !moved.is_empty() {
            items.entry(to.to_vec()).or_default().extend(moved);
        }
    }

    /// The objects of entity `name` were removed from the blocks `changed` (packed): every
    /// block that held one (a removal takes them all), nothing else of them changed.
    pub fn objects_removed(&mut self, name: &str, changed: &[u64]) {
        if let (Some(objects), false) = (&mut self.objects, changed.is_empty()) {
            objects.remove(name);
        }
    }

    /// About how many bytes the answer holds.
    pub fn weight(&self) -> usize {
        self.weight_beyond(None)
    }

    /// About how many bytes the answer holds beyond the blocks of the node name `focus`
    /// picks, when those are the only ones kept.
    fn weight_beyond(&self, focus: Focus<'_>) -> usize {
        let partial = self.partial();
        let nodes: usize = self
            .nodes
            .iter()
            .flatten()
            .map(|(n, held)| {
                let blocks = match held {
                    Some(_) if partial && focus.is_some_and(|f| f(n)) => 0,
                    Some(s) => s.len(),
                    None => 0,
                };
                n.len() + ENTRY * (1 + blocks)
            })
            .sum();
        let items: usize = self
            .items
            .iter()
            .flatten()
            .map(|(n, s)| n.len() + s.iter().map(|s| ENTRY + s.list.len()).sum::<usize>())
            .sum();
        let fields: usize = self
            .fields
            .iter()
            .flatten()
            .flat_map(|(k, values)| {
                values
                    .iter()
                    .map(move |(v, nodes)| k.len() + v.len() + ENTRY * (1 + nodes.len()))
            })
            .sum();
        let objects: usize = self
            .objects
            .iter()
            .flatten()
            .map(|(n, blocks)| n.len() + ENTRY * (1 + blocks.len()))
            .sum();
        let broken: usize = self.broken.values().map(|r| r.len() + ENTRY).sum();
        nodes + items + fields + objects + broken
    }
}

/// Scans every block of `store` for `kind` into `answer` (which holds what other scans of
/// the same store version found): pages are read here and decoded by `workers` threads,
/// with at most `max_bytes` of blobs in flight ([`scan::run`]). Returns the most bytes
/// held at once.
fn scan(
    store: &BlockStore,
    kind: Kind,
    answer: &mut Answer,
    workers: usize,
    max_bytes: usize,
    budget: usize,
    focus: Focus<'_>,
) -> Result<usize> {
    answer.start(kind);
    answer.broken.clear();
    let mut keeping = Keeping {
        budget,
        focus,
        weight: answer.weight(),
        partial: false,
    };
    let mut after = 0;
    // A row listed without its data is too large to read (broken too): its key says so.
    let pages = move || -> Result<Option<scan::Page<(BlockPos, bool)>>> {
        let listed = store.list(after, SCAN_PAGE, true)?;
        let Some(last) = listed.last() else {
            return Ok(None);
        };
        after = last.key;
        Ok(Some(
            listed
                .into_iter()
                .map(|l| ((l.pos, l.data.is_none()), l.data.unwrap_or_default()))
                .collect(),
        ))
    };
    let decode = |(pos, unread): (BlockPos, bool), blob: Vec<u8>| {
        let facts = if unread {
            Err(too_large(pos, None).to_string())
        } else {
            codec::decode_block(&blob)
                .map(|b| facts(kind, pack(pos), &b))
                .map_err(|e| e.to_string())
        };
        (pack(pos), facts)
    };
    scan::run(
        workers,
        max_bytes,
        pages,
        decode,
        |(packed, facts)| match facts {
            Ok(Facts::Nodes(names)) => answer.add_nodes(names, packed, &mut keeping),
            Ok(f) => answer.add(f, packed),
            Err(reason) => {
                answer.broken.insert(packed, reason);
            }
        },
    )
}

/// The whole-world questions of one map store.
pub struct Index {
    store: Arc<BlockStore>,
    /// The kept answer; its generation (each scan, each commit of ours makes one) and the
    /// store's `data_version` make the folders' mtime ([`Index::stamp`]), since the kernel
    /// keeps a folder's listing until its mtime changes.
    answers: Answers<Answer>,
    budget: usize,
    workers: usize,
}

impl answers::Answer for Answer {
    fn stamp(&mut self, version: u64, _generation: u64) {
        self.version = Some(version as i64);
    }
}

impl Index {
    /// The index of `store`, keeping answers up to `budget` bytes. Nothing is scanned yet.
    pub fn new(store: Arc<BlockStore>, budget: usize) -> Arc<Index> {
        let workers = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2)
            .max(2);
        let index = Arc::new(Index {
            store: store.clone(),
            answers: Answers::default(),
            budget,
            workers,
        });
        store.watch(Arc::downgrade(&index) as std::sync::Weak<dyn CommitWatch>);
        index
    }

    /// A number that changes whenever an answer may (the store's `data_version`, pending
    /// changes committed first, and the generation of the answers), known without a scan.
    pub fn stamp(&self) -> Result<u64> {
        self.store.flush()?;
        let version = self.store.map().data_version()?;
        let generation = self.answers.generation();
        let mut bytes = version.to_le_bytes().to_vec();
        bytes.extend_from_slice(&generation.to_le_bytes());
        Ok(crate::storekit::mtimes::content_hash(&bytes))
    }

    /// How many scans ran so far.
    pub fn scans(&self) -> u64 {
        self.answers.scans()
    }

    /// The answer holding `kind`, true for the store as committed now (pending changes are
    /// committed first). A scan it needs keeps the blocks of the node name `hint` picks
    /// (when it cannot keep those of every name), as the next question is likely about it.
    pub fn answer(&self, kind: Kind, hint: Focus<'_>) -> Result<Arc<Answer>> {
        self.answer_with(kind, hint, false)
    }

    /// The nodes answer holding the blocks of the node name `focus` picks (see
    /// [`Index::answer`]).
    pub fn answer_about(&self, focus: &dyn Fn(&str) -> bool) -> Result<Arc<Answer>> {
        self.answer_with(Kind::Nodes, Some(focus), true)
    }

    fn answer_with(&self, kind: Kind, focus: Focus<'_>, must_know: bool) -> Result<Arc<Answer>> {
        self.store.flush()?;
        let version = || Ok(self.store.map().data_version()? as u64);
        self.answers.answer(
            "the map",
            || Ok((version()?, ())),
            |kept| match kept {
                Some(kept) if kept.has(kind) && (!must_know || kept.knows(focus)) => {
                    Start::Answered(kept.clone())
                }
                Some(kept) => Start::From(Answer::clone(kept)),
                None => Start::From(Answer::default()),
            },
            |answer, ()| {
                scan(
                    &self.store,
                    kind,
                    answer,
                    self.workers,
                    SCAN_BYTES,
                    self.budget,
                    focus,
                )?;
                crate::luanti::cache::return_freed_memory();
                if answer.partial() {
                    log::info!(
                        "index: the blocks of every node name would pass the cache budget; \
                         only the names and the blocks of the name asked about are kept"
                    );
                }
                Ok(())
            },
            version,
            // The blocks of the name asked about are kept beyond the budget: they are what
            // is being answered (a listing of them is read in many calls).
            |answer| answers::fits(answer.weight_beyond(focus), self.budget),
        )
    }
}

impl Index {
    /// Our streamed commit took the store from `before` to `after` (`data_version`s):
    /// `follow` brings the kept answer up to date when it was true before (else it is
    /// dropped, unless a question already made it for `after`).
    pub fn edited(&self, before: i64, after: i64, follow: impl FnOnce(&mut Answer)) {
        self.answers.committed(before as u64, after as u64, follow);
    }
}

impl CommitWatch for Index {
    fn committed(&self, before: i64, after: i64, changes: &[Change]) {
        self.answers
            .committed(before as u64, after as u64, |answer| {
                for (pos, blob) in changes {
                    answer.update(*pos, blob.as_deref());
                }
            });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::luanti::store::map::MapStore;
    use crate::luanti::store::map_memory::MemoryMap;

    /// A scan holds at most its byte limit of blobs at once (one page when the limit is
    /// smaller than a page), and answers the same whatever the limit.
    #[test]
    fn a_scan_keeps_its_blobs_in_flight_within_the_limit() {
        let changes: Vec<Change> = (0..SCAN_PAGE as i16 * 4)
            .map(|i| {
                let mut b = crate::luanti::cache::new_block();
                b.names[0] = format!("test:n{}", i % 7);
                let pos = BlockPos { x: i, y: 0, z: 0 };
                (pos, Some(codec::encode_block(&b).expect("encodes")))
            })
            .collect();
        let total: usize = changes
            .iter()
            .map(|(_, b)| b.as_ref().map_or(0, Vec::len))
            .sum();
        let page = total / 4;
        let map = MapStore::new(MemoryMap::default());
        map.commit(&changes).expect("commit");
        let store = BlockStore::new(map);
        let mut wide = Answer::default();
        scan(
            &store,
            Kind::Nodes,
            &mut wide,
            2,
            usize::MAX,
            usize::MAX,
            None,
        )
        .expect("scan");
        let mut narrow = Answer::default();
        let peak = scan(&store, Kind::Nodes, &mut narrow, 2, 1, usize::MAX, None).expect("scan");
        assert_eq!(wide.nodes, narrow.nodes);
        assert_eq!(wide.nodes.as_ref().map(BTreeMap::len), Some(7));
        assert!(
            peak > 0 && peak <= page + page / 8,
            "{peak} bytes in flight, a page is about {page}"
        );
    }

    /// The objects answer names each block holding a Lua entity by the entity's name (a
    /// block holding none, or only objects that are not Lua entities, is in no answer), and
    /// `remove_objects` takes exactly that entity's objects.
    #[test]
    fn objects_are_answered_by_entity_name_and_removed_by_it() {
        use crate::luanti::codec::block::{LuaEntity, StaticObject};
        let entity = |name: &str| StaticObject {
            kind: 7,
            pos: [0, 0, 0],
            data: ObjectData::LuaEntity(LuaEntity {
                name: name.to_string(),
                state: b"s".to_vec(),
                hp: 1,
                velocity: [0; 3],
                yaw: 0,
                extra: None,
            }),
        };
        let raw = StaticObject {
            kind: 3,
            pos: [1, 2, 3],
            data: ObjectData::Raw(b"raw".to_vec()),
        };
        let holding = [
            vec![entity("mobs:sheep"), entity("__builtin:item"), raw.clone()],
            vec![entity("__builtin:item"), entity("__builtin:item")],
            vec![raw.clone()],
            vec![],
        ];
        let changes: Vec<Change> = holding
            .iter()
            .enumerate()
            .map(|(i, objects)| {
                let mut b = crate::luanti::cache::new_block();
                b.objects = objects.clone();
                let pos = BlockPos {
                    x: i as i16,
                    y: 0,
                    z: 0,
                };
                (pos, Some(codec::encode_block(&b).expect("encodes")))
            })
            .collect();
        let map = MapStore::new(MemoryMap::default());
        map.commit(&changes).expect("commit");
        let store = BlockStore::new(map);
        let mut answer = Answer::default();
        scan(
            &store,
            Kind::Objects,
            &mut answer,
            2,
            usize::MAX,
            usize::MAX,
            None,
        )
        .expect("scan");
        let at = |x: i16| pack(BlockPos { x, y: 0, z: 0 });
        let objects = answer.objects.expect("objects answered");
        assert_eq!(objects.len(), 2);
        assert_eq!(objects["__builtin:item"], BTreeSet::from([at(0), at(1)]));
        assert_eq!(objects["mobs:sheep"], BTreeSet::from([at(0)]));
        let mut first =
            codec::decode_block(changes[0].1.as_deref().expect("blob")).expect("decodes");
        assert!(remove_objects(&mut first, "__builtin:item"));
        assert_eq!(first.objects, vec![entity("mobs:sheep"), raw.clone()]);
        assert!(
            !remove_objects(&mut first, "__builtin:item"),
            "nothing left to remove"
        );
    }

    /// A map of `count` blocks, block i all of `test:n{i % names}`; its path.
    fn map_of(dir: &std::path::Path, count: i16, names: i16) -> std::path::PathBuf {
        let path = dir.join("map.sqlite");
        rusqlite::Connection::open(&path)
            .and_then(|c| c.execute("CREATE TABLE blocks (pos INT PRIMARY KEY, data BLOB)", []))
            .expect("a map database");
        let changes: Vec<Change> = (0..count)
            .map(|i| {
                let mut b = crate::luanti::cache::new_block();
                b.names[0] = format!("test:n{}", i % names);
                let pos = BlockPos { x: i, y: 0, z: 0 };
                (pos, Some(codec::encode_block(&b).expect("encodes")))
            })
            .collect();
        MapStore::open(&path, false)
            .expect("writer")
            .commit(&changes)
            .expect("commit");
        path
    }

    /// When the blocks of every node name would pass the budget (a large world), the answer
    /// keeps every name and the blocks of the name asked about: a second question about it
    /// costs no scan (an answer over the budget used to be dropped, so every request of a
    /// listing scanned the whole map again), a question about another name scans again, and
    /// a commit of ours (which cannot tell whether a name is left) drops it.
    #[test]
    fn an_answer_over_the_budget_keeps_the_names_and_the_blocks_asked_about() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = map_of(dir.path(), 1000, 5);
        let store = BlockStore::new(MapStore::open(&path, false).expect("store"));
        let mut full = Answer::default();
        scan(
            &store,
            Kind::Nodes,
            &mut full,
            2,
            usize::MAX,
            usize::MAX,
            None,
        )
        .expect("scan");
        let full = full.nodes.expect("nodes");
        assert!(full.values().all(Option::is_some));
        let budget = 20 * ENTRY * 5;
        let index = Index::new(store.clone(), budget);
        let names = index.answer(Kind::Nodes, None).expect("names");
        let nodes = names.nodes.as_ref().expect("nodes");
        assert_eq!(
            nodes.keys().collect::<Vec<_>>(),
            full.keys().collect::<Vec<_>>()
        );
        assert!(
            nodes.values().all(Option::is_none),
            "no name was asked about"
        );
        assert_eq!(index.scans(), 1);
        drop(names);

        let n2 = |n: &str| n == "test:n2";
        let about = index.answer_about(&n2).expect("about test:n2");
        assert_eq!(index.scans(), 2);
        let nodes = about.nodes.as_ref().expect("nodes");
        assert_eq!(nodes["test:n2"], full["test:n2"]);
        assert!(nodes["test:n3"].is_none());
        drop(about);
        index.answer_about(&n2).expect("again");
        index.answer(Kind::Nodes, None).expect("names again");
        assert_eq!(index.scans(), 2, "the kept answer served both");
        index
            .answer_about(&|n: &str| n == "test:n3")
            .expect("another name");
        assert_eq!(index.scans(), 3);

        store
            .commit(vec![(BlockPos { x: 0, y: 0, z: 0 }, None)])
            .expect("our commit");
        index.answer(Kind::Nodes, None).expect("after our commit");
        assert_eq!(
            index.scans(),
            4,
            "a partial answer is dropped by our commits"
        );
    }

    #[test]
    fn packing_keeps_every_position_and_its_order() {
        let all = [-32768i16, -2048, -1, 0, 1, 2047, 32767];
        let mut last = 0;
        for x in all {
            for y in all {
                for z in all {
                    let p = BlockPos { x, y, z };
                    let k = pack(p);
                    assert!(k > last && k > 0 && k <= 1 << 48);
                    last = k;
                    assert_eq!(unpack(k), p);
                }
            }
        }
    }
}
