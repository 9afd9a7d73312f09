//! The decoded-object cache of a TVDA disk: every file of the tree rendered from its entry,
//! and the sizes of rendered files, both on [`ObjectCache`].
//!
//! Nothing is rendered before a file is touched. The sizes are kept longer than the files
//! (a smaller budget of small values) so `ls -l` of a big folder renders each file once. Both
//! caches take their tickets before the disk is read, so a render racing a commit cannot fill
//! them with what it rendered from the old bytes; the tree reports each commit through
//! [`Renders::committed`] while it still holds the disk.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::storekit::mtimes::content_hash;
use crate::storekit::objects::{Lookup, ObjectCache};
use crate::tvda::codec::chunk::Layer;
use crate::tvda::codec::compress::gunzip;
use crate::tvda::views::chunk::{render_stored_chunk, World};
use crate::tvda::views::inventory::render_inventory;
use crate::tvda::views::json::render_json;

/// Largest decoded image shown (Terrarum's thumbnails and screenshots are a few MiB).
pub const IMAGE_LIMIT: usize = 16 << 20;

/// How an entry's bytes are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum View {
    Json,
    Gunzip,
    Inventory,
    Chunk(Layer),
    Raw,
}

const ALL_VIEWS: [View; 8] = [
    View::Json,
    View::Gunzip,
    View::Inventory,
    View::Chunk(Layer::Terrain),
    View::Chunk(Layer::Wall),
    View::Chunk(Layer::Ores),
    View::Chunk(Layer::Fluid),
    View::Raw,
];

/// An entry as read for rendering: its stored bytes and, for a chunk, the world's facts.
pub(crate) struct Stored {
    pub bytes: Vec<u8>,
    pub world: Option<Arc<World>>,
}

/// Rendered files of a disk and their sizes.
pub(crate) struct Renders {
    files: ObjectCache<(i64, View), Vec<u8>>,
    sizes: ObjectCache<(i64, View), u64>,
}

impl Renders {
    /// Caches within `cache_bytes` (files) and an eighth of it (sizes).
    pub fn new(cache_bytes: usize) -> Self {
        Renders {
            files: ObjectCache::new(cache_bytes),
            sizes: ObjectCache::new(cache_bytes / 8),
        }
    }

    /// The file of entry `id` shown as `view`: cached, or `read` from the disk and rendered
    /// (`before_render` runs between the two: tests of the interleaving).
    pub fn render(
        &self,
        id: i64,
        view: View,
        read: impl FnOnce() -> Result<Stored>,
        before_render: impl FnOnce(),
    ) -> Result<Arc<Vec<u8>>> {
        let key = (id, view);
        let size_ticket = self.sizes.lookup(&key).0;
        let data = self.files.get_or_load(
            &key,
            read,
            // A chunk's rendering also depends on entry -1, whose commits clear the cache.
            |stored| content_hash(&stored.bytes),
            |stored| {
                before_render();
                render_view(view, stored)
            },
        )?;
        self.sizes
            .insert(key, Arc::new(data.len() as u64), 0, size_ticket);
        Ok(data)
    }

    /// The size of a rendered file, when known without rendering it.
    pub fn size(&self, id: i64, view: View) -> Option<u64> {
        match self.sizes.lookup(&(id, view)).1 {
            Lookup::Fresh(size) => Some(*size),
            _ => None,
        }
    }

    /// Drops every rendered file and size (the disk or the world JSON changed).
    pub fn clear(&self) {
        self.files.clear();
        self.sizes.clear();
    }

    /// Entries `ids` were committed: every view of them is stale.
    pub fn committed(&self, ids: &[i64]) {
        let keys: Vec<(i64, View)> = ids
            .iter()
            .flat_map(|&id| ALL_VIEWS.map(|view| (id, view)))
            .collect();
        self.files.committed(&keys);
        self.sizes.committed(&keys);
    }
}

/// Renders stored entry bytes as `view` shows them.
fn render_view(view: View, stored: Stored) -> Result<Vec<u8>> {
    Ok(match (view, stored.world) {
        (View::Json, _) => render_json(&stored.bytes)?,
        (View::Gunzip, _) => gunzip(&stored.bytes, IMAGE_LIMIT)?,
        (View::Inventory, _) => render_inventory(&stored.bytes)?,
        (View::Chunk(layer), Some(world)) => {
            render_stored_chunk(layer, &stored.bytes, &world.names)?
        }
        (View::Chunk(_), None) => return Err(Error::corrupt("no world for a chunk")),
        (View::Raw, _) => stored.bytes,
    })
}
