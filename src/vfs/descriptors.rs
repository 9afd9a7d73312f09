//! Open descriptors: what one `open` of a file is (the file it shares, where it is in the
//! close-time commit, see `Vfs::flush`). The table of them lives in the core; each handle
//! points at the [`OpenFile`] of its path.

use std::sync::{Arc, Mutex};

use crate::vfs::paths::OpenFile;

/// One open descriptor of a file.
pub(super) struct Handle {
    pub(super) file: Arc<Mutex<OpenFile>>,
    pub(super) state: HandleState,
}

/// Where a handle is in the close-time commit (see [`Vfs::flush`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum HandleState {
    /// Opened for reading only: its closes commit nothing.
    Reading,
    /// Opened for writing; nothing written or truncated through it and no close yet (an
    /// open with `O_TRUNC` alone makes the file dirty but writes nothing through it).
    Opened,
    /// Created its file (`open(O_CREAT)` of a new name); nothing written and no close yet.
    Created,
    /// One close with nothing written was let pass uncommitted.
    Deferred,
    /// Something was written or truncated through it: every close commits.
    Written,
}

impl HandleState {
    /// The state of a new handle opened with or without write access.
    pub(super) fn opened(write: bool) -> HandleState {
        if write {
            HandleState::Opened
        } else {
            HandleState::Reading
        }
    }

    /// Whether the handle was opened for writing.
    pub(super) fn writes(self) -> bool {
        self != HandleState::Reading
    }

    /// Something was written or truncated through the handle.
    pub(super) fn wrote(&mut self) {
        if self.writes() {
            *self = HandleState::Written;
        }
    }
}
