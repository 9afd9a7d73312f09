//! The listings of a TVDA disk's folders: the root's fixed and well-known names, and the
//! entries of `actors/`, `chunks/LAYER/` and `entries/` in cookie order, each file's stat
//! rendered only when it is sent.

use crate::error::Result;
use crate::tvda::cache::View;
use crate::tvda::codec::chunk::{parse_chunk_entry_id, Layer};
use crate::tvda::codec::tvda::{DiskKind, EntryKind, ROOT_ID};
use crate::tvda::store::tvda::EntryInfo;
use crate::tvda::tree::{Place, TvdaTree};
use crate::tvda::views::header::HEADER_FILE;
use crate::tvda::views::names::{self, ACTOR_IDS};
use crate::vfs::tree::Entry;

/// Cookies of the root folder's fixed names (well-known entries use 1..).
const COOKIE_INVENTORY: u64 = 100;
const COOKIE_ACTORS: u64 = 101;
const COOKIE_CHUNKS: u64 = 102;
const COOKIE_ENTRIES: u64 = 103;
const COOKIE_HEADER: u64 = 104;

/// A stable cookie for an entry ID: order-preserving and distinct for IDs within ±2^61
/// (every ID Terrarum uses); IDs outside that window share cookies with others.
pub(super) fn id_cookie(id: i64) -> u64 {
    (i128::from(id) + (1 << 61)).rem_euclid(1 << 62) as u64 + 1
}

impl TvdaTree {
    /// Live file entries for which `keep` gives a cookie and a name, in cookie order.
    pub(super) fn entries_where(
        &self,
        keep: impl Fn(&EntryInfo) -> Option<(u64, String)>,
    ) -> Result<Vec<(u64, String, EntryInfo)>> {
        let s = self.state()?;
        let mut out: Vec<(u64, String, EntryInfo)> = s
            .disk
            .entries()
            .filter(|e| e.kind == EntryKind::File && e.id != ROOT_ID)
            .filter_map(|e| keep(&e).map(|(c, n)| (c, n, e)))
            .collect();
        out.sort_by_key(|(c, _, e)| (*c, e.id));
        Ok(out)
    }

    /// Streams listed entries, rendering each only when it is sent.
    pub(super) fn stream_entries(
        &self,
        entries: Vec<(u64, String, EntryInfo)>,
        view: View,
        after: u64,
        sink: &mut dyn FnMut(Entry) -> bool,
    ) {
        for (cookie, name, info) in entries {
            if cookie <= after {
                continue;
            }
            match self.file_entry_stat(&info, view) {
                Ok(stat) => {
                    if !sink(Entry { name, cookie, stat }) {
                        return;
                    }
                }
                Err(e) => log::warn!("entry {} cannot be shown as {name}: {e}", info.id),
            }
        }
    }

    pub(super) fn chunk_entries(&self, layer: Layer) -> Result<Vec<(u64, String, EntryInfo)>> {
        let world = {
            let mut s = self.state()?;
            self.world(&mut s)?
        };
        self.entries_where(|e| {
            let (li, no) = parse_chunk_entry_id(e.id)?;
            let (cx, cy) = world.geometry.coords(no)?;
            (li == layer.index()).then(|| (u64::from(no) + 1, names::chunk_file_name(cx, cy)))
        })
    }

    pub(super) fn actor_entries(&self) -> Result<Vec<(u64, String, EntryInfo)>> {
        self.entries_where(|e| {
            let name = names::actor_file_name(e.id)?;
            Some(((e.id - ACTOR_IDS.start() + 1) as u64, name))
        })
    }

    pub(super) fn root_entries(&self) -> Result<Vec<Entry>> {
        let mut entries = Vec::new();
        for (i, w) in names::well_known(self.kind).iter().enumerate() {
            let Ok((id, view)) = self.target(Place::WellKnown(*w), &[]) else {
                continue;
            };
            let Some(info) = self.state()?.disk.entry(id) else {
                continue;
            };
            match self.file_entry_stat(&info, view) {
                Ok(stat) => entries.push(Entry {
                    name: w.name.to_string(),
                    cookie: i as u64 + 1,
                    stat,
                }),
                Err(e) => log::warn!("entry {id} cannot be shown as {}: {e}", w.name),
            }
        }
        let info_json = self.state()?.disk.entry(-1);
        if self.kind == DiskKind::Player {
            if let Some(info) = info_json {
                if let Ok(stat) = self.file_entry_stat(&info, View::Inventory) {
                    entries.push(Entry {
                        name: "inventory".into(),
                        cookie: COOKIE_INVENTORY,
                        stat,
                    });
                }
            }
        }
        entries.push(Entry {
            name: "actors".into(),
            cookie: COOKIE_ACTORS,
            stat: self.dir_stat(self.folder_mtime(Place::Actors)?),
        });
        if self.has_chunks()? {
            entries.push(Entry {
                name: "chunks".into(),
                cookie: COOKIE_CHUNKS,
                stat: self.dir_stat(self.folder_mtime(Place::Chunks)?),
            });
        }
        entries.push(Entry {
            name: "entries".into(),
            cookie: COOKIE_ENTRIES,
            stat: self.dir_stat(self.folder_mtime(Place::Entries)?),
        });
        let (text, mtime) = self.header_file()?;
        entries.push(Entry {
            name: HEADER_FILE.into(),
            cookie: COOKIE_HEADER,
            stat: self.file_stat(text.len() as u64, mtime),
        });
        Ok(entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::tree::MAX_TREE_COOKIE;
    #[test]
    fn id_cookies_keep_order_and_stay_in_range() {
        let ids = [
            i64::MIN / 4,
            -2_147_483_648,
            -1025,
            -4,
            -1,
            1,
            0x1_0300_0003,
            1 << 60,
        ];
        let cookies: Vec<u64> = ids.iter().map(|&i| id_cookie(i)).collect();
        assert!(cookies.windows(2).all(|w| w[0] < w[1]), "{cookies:?}");
        assert!(cookies.iter().all(|&c| (1..=MAX_TREE_COOKIE).contains(&c)));
        assert!(id_cookie(i64::MAX) <= MAX_TREE_COOKIE);
        assert!(id_cookie(i64::MIN) >= 1);
    }
}
