//! Rename: inside the tree it is the tree's; a held file (scratch or pending text) renamed
//! over a tree file commits its text to that file (rsync, `sed -i`, editors), renamed to
//! another scratch name it stays held; a tree file renamed to a scratch name (an editor's
//! backup) is moved aside: hidden, but kept in the store until new content replaces it.

use std::sync::Arc;

use crate::error::{lock, Error, Result};
use crate::vfs::buffer::Large;
use crate::vfs::core::Vfs;
use crate::vfs::naming::{check_name, child, display_path};
use crate::vfs::paths::{cut_error, Held, Home, Overlay};
use crate::vfs::tree::{Kind, NewFile, Stat};

/// The mode of a file committed by a rename when the core holds none for it.
const DEFAULT_PERM: u16 = 0o644;

/// What a refused rename inside the tree answers, so that `mv` does the least harm and says
/// the least misleading thing:
/// - a folder the tree cannot move there: `EPERM`, not `EXDEV`. On `EXDEV`, `mv` copies
///   the folder and removes the original, and removing a view's folder (`players/`,
///   `blocks/`, a block) deletes what it shows from the store, while the copy lands where
///   the game never reads it. A file keeps `EXDEV`: its copy is a checked write, and `mv`
///   removes the original only after the copy succeeded;
/// - a new name the tree refuses (`EINVAL`, an invalid node name under `index/`): `EPERM`,
///   since `mv` reads `EINVAL` as "cannot move to a subdirectory of itself".
fn refused_rename(e: Error, stat: &Stat) -> Error {
    match e.errno() {
        libc::EXDEV if stat.kind == Kind::Dir => Error::not_permitted(format!(
            "{}; a folder is never copied and removed instead (that would delete what it shows)",
            e.message()
        )),
        libc::EINVAL => Error::not_permitted(e.message()),
        _ => e,
    }
}

impl Vfs {
    /// The text held at `from` for a rename: the buffer of a file being written, else the
    /// held text. With `take`, the buffer counts as committed (the rename commits it).
    pub(super) fn text_of(&self, from: &[String], take: bool) -> Result<(Vec<u8>, Large<'_>)> {
        if let Some(f) = self.paths.open_file(from)? {
            let mut f = lock(&f)?;
            if f.cut {
                return Err(cut_error(from));
            }
            if f.dirty {
                let one = self.one_large.enter(f.data.len())?;
                f.dirty = !take;
                return Ok((Arc::unwrap_or_clone(f.data.bytes()?), one));
            }
        }
        // Entered with no lock held (a commit holding the guard takes the held text's).
        let len = self.paths.with_held(from, |o| o.text.len())?.unwrap_or(0);
        let one = self
            .one_large
            .enter(usize::try_from(len).unwrap_or(usize::MAX))?;
        match self.paths.with_held(from, |o| o.text.bytes())? {
            Some(bytes) => Ok((bytes?, one)),
            None => Err(Error::not_found(display_path(from))),
        }
    }

    /// Renames `name` in `parent` to `new_name` in `new_parent`.
    pub fn rename(&self, parent: u64, name: &str, new_parent: u64, new_name: &str) -> Result<()> {
        let _settled = self.settling();
        check_name(new_name)?;
        let from = child(&self.path_of(parent)?, name)?;
        let to = child(&self.path_of(new_parent)?, new_name)?;
        let to_dir = &to[..to.len() - 1];
        let (held, new) = match self.paths.held_kind(&from)? {
            Some(h) => (true, h == Held::New),
            None => (false, false),
        };
        let to_class = self
            .tree
            .classify(to_dir, new_name)
            .map_err(|e| e.context(display_path(&to)))?;
        let to_in_tree = self.tree.stat(&to).ok();
        // Held text renamed to a name the tree does not store stays the core's: allowed
        // after the tree turned read-only while mounted (see `unlink`).
        if !(held && to_in_tree.is_none() && to_class == NewFile::Scratch) {
            self.writable()?;
        }
        // The source must be there before anything held back is committed for the move.
        if !held {
            self.stat_path(&from)?;
        }
        // What was removed a moment ago below either name is removed before the folder moves
        // or the file lands there; held text renamed over a removed file replaces it instead
        // (a failed commit then leaves it stored).
        self.remove_below(&from)?;
        if held {
            self.takes_files_at(&to)?;
        }
        if !(held && self.removals.cancel(&to)?) {
            self.remove_below(&to)?;
        }
        if held {
            self.rename_held(&from, &to, to_class, to_in_tree.as_ref())?;
        } else {
            let stat = self.stat_path(&from)?;
            if to_in_tree.is_none() && to_class == NewFile::Scratch && stat.kind == Kind::File {
                self.writable_at(&from)?;
                self.move_aside(&from, &to, &stat)?;
            } else {
                if stat.kind == Kind::Dir
                    && to_in_tree.as_ref().is_some_and(|s| s.kind == Kind::Dir)
                {
                    self.holds_nothing_below(&to)?;
                }
                self.rename_in_tree(&from, &to)
                    .map_err(|e| refused_rename(e, &stat))?;
            }
        }
        // A new file that took the place of a removal, moved away before it committed: the
        // removal goes on (on any file system, the old file would be gone).
        if new && self.removals.replaced_done(&from)? {
            self.removals.add(&from, 0)?;
        }
        self.removals.replaced_done(&to)?;
        self.note_change(&from);
        self.note_change(&to);
        self.fresh.removed(&from);
        self.fresh.show(to_dir, new_name);
        if let Ok(mut t) = self.inodes.write() {
            t.rename(parent, name, new_parent, new_name);
        }
        Ok(())
    }

    /// Renames a file the core holds: over a tree file (or to a name that makes an object)
    /// its text is committed there; under another name it stays held, as a scratch file.
    fn rename_held(
        &self,
        from: &[String],
        to: &[String],
        to_class: NewFile,
        to_in_tree: Option<&Stat>,
    ) -> Result<()> {
        match to_in_tree.map(|s| s.kind) {
            Some(Kind::Dir) => {
                return Err(Error::is_dir(format!(
                    "{} is a directory",
                    display_path(to)
                )))
            }
            Some(Kind::Symlink) => {
                // A file renamed over a link replaces the link, as anywhere: the link goes,
                // and what it points to is never written. The text is checked first, so a
                // rename the tree would refuse leaves the link where it was.
                self.tree
                    .check(to, &self.text_of(from, false)?.0)
                    .map_err(|e| e.context(display_path(to)))?;
                self.tree
                    .remove(to)
                    .map_err(|e| e.context(display_path(to)))?;
            }
            Some(Kind::File) | None => {}
        }
        let (data, one) = self.text_of(from, true)?;
        if to_in_tree.is_some() || to_class == NewFile::Object {
            self.commit_held_over(from, to, data, one)
        } else {
            self.hold_renamed(from, to, data, one)
        }
    }

    /// Replaces a tree file's content with the held text renamed over it (rsync, sed -i,
    /// editors): commits it, with the mtime set on the held file.
    /// `one` (a large text's turn) goes before any open file is locked.
    fn commit_held_over(
        &self,
        from: &[String],
        to: &[String],
        data: Vec<u8>,
        one: Large<'_>,
    ) -> Result<()> {
        let (set_mtime, perm, owner) = self
            .paths
            .with_held(from, |o| (o.set_mtime, o.perm, o.owner))?
            .unwrap_or((None, DEFAULT_PERM, None));
        self.commit(to, data, perm, owner, set_mtime)?;
        drop(one);
        self.paths.take_held(from)?;
        self.paths.detach(to)?;
        self.paths.move_open(from, to, Some(Home::Tree))
    }

    /// A held file under another name the tree does not store: held there, as a scratch
    /// file (text no commit took stays marked for recovery).
    /// `one` (a large text's turn) goes before any open file is locked.
    fn hold_renamed(
        &self,
        from: &[String],
        to: &[String],
        data: Vec<u8>,
        one: Large<'_>,
    ) -> Result<()> {
        self.paths
            .rename_held(from, to, self.spill.hold(to, data))?;
        drop(one);
        self.paths.detach(to)?;
        self.paths.move_open(from, to, Some(Home::Core))
    }

    /// A tree file moved aside (an editor's backup copy): its text becomes a scratch file and
    /// the file is hidden, but the object stays stored until new content replaces it, so a
    /// failed save never loses it. The copy keeps the file's mode.
    fn move_aside(&self, from: &[String], to: &[String], stat: &Stat) -> Result<()> {
        let data = self
            .tree
            .read(from)
            .map_err(|e| e.context(display_path(from)))?
            .to_vec();
        let o = Overlay {
            text: self.spill.hold(to, data),
            mtime: stat.mtime,
            set_mtime: None,
            perm: stat.perm,
            held: Held::Scratch,
            cookie: self.paths.cookie(),
            owner: stat.owner,
        };
        self.paths.detach(to)?;
        self.paths.move_aside(from, to, o)?;
        self.paths.move_open(from, to, Some(Home::Core))
    }

    /// A rename inside the tree; what replaced `to` replaces the text held for it too.
    fn rename_in_tree(&self, from: &[String], to: &[String]) -> Result<()> {
        if let Err(e) = self.tree.rename(from, to) {
            // A rename of the whole tree may fail after a part of it was committed (a Luanti
            // item rename: the blocks, then the players): the kernel is told of what the
            // tree names as changed all the same.
            if self.tree.change_scope(from) == 0 {
                self.note_change(from);
            }
            return Err(e.context(format!("{} -> {}", display_path(from), display_path(to))));
        }
        // A file moved aside from `to` (`mv -b new f` moves `f` to `f~` first) is replaced,
        // as by a commit: `to` shows again, with what was renamed there.
        self.paths.replaced(to)?;
        self.paths.detach(to)?;
        self.paths.move_open(from, to, None)?;
        self.paths.move_below(from, to)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::paths::OpenMode;
    use crate::vfs::test_tree::*;
    use std::time::UNIX_EPOCH;

    /// The reference model's finding (`vfs::reftest`): a folder renamed over a folder that
    /// holds text a close did not take is refused with `ENOTEMPTY`, as `rmdir` of it is,
    /// and the held text stays where it was; once it is removed, the rename goes through.
    #[test]
    fn a_folder_renamed_over_one_holding_failed_text_is_refused() {
        let (tree, vfs, _) = setup();
        let d = dir_ino(&vfs);
        let (s, _) = vfs.mkdir(d, "s", 7).unwrap();
        vfs.mkdir(d, "t", 7).unwrap();
        let (_, _, fh) = vfs.create(s, "x", 0o644).unwrap();
        vfs.write(fh, 0, b"bad text", false).unwrap();
        assert!(vfs.release(fh).is_err(), "the close fails");
        assert_eq!(
            vfs.rename(d, "t", d, "s").unwrap_err().errno(),
            libc::ENOTEMPTY
        );
        assert_eq!(
            read_all(&vfs, vfs.lookup(s, "x", 8).unwrap().0),
            b"bad text"
        );
        assert!(lock(&tree.dirs).unwrap().contains(&"d/t".to_string()));
        vfs.unlink(s, "x").unwrap();
        vfs.rename(d, "t", d, "s").unwrap();
        assert!(!lock(&tree.dirs).unwrap().contains(&"d/t".to_string()));
    }

    #[test]
    fn a_file_moved_aside_stays_stored_until_replaced_or_its_copy_is_deleted() {
        let (tree, vfs, _) = setup();
        let d = vfs.lookup(ROOT, "d", 1).unwrap().0;
        let stored = |name: &str| lock(&tree.files).unwrap().get(name).cloned();
        // An editor's backup: `f` moves aside, then a new `f` fails to save.
        vfs.rename(d, "f", d, "f~").unwrap();
        assert_eq!(vfs.lookup(d, "f", 1).unwrap_err().errno(), libc::ENOENT);
        assert_eq!(
            stored("d/f").unwrap(),
            b"ok old",
            "still stored while aside"
        );
        let (_, _, fh) = vfs.create(d, "f", 0o644).unwrap();
        vfs.write(fh, 0, b"bad", false).unwrap();
        assert!(vfs.release(fh).is_err());
        assert_eq!(
            stored("d/f").unwrap(),
            b"ok old",
            "a failed save loses nothing"
        );
        // Fixing the text commits it; deleting the backup then keeps the new content.
        let (f, _) = vfs.lookup(d, "f", 1).unwrap();
        let fh = vfs
            .open(
                f,
                OpenMode {
                    write: true,
                    truncate: true,
                    append: false,
                },
            )
            .unwrap();
        vfs.write(fh, 0, b"ok new", false).unwrap();
        vfs.release(fh).unwrap();
        vfs.unlink(d, "f~").unwrap();
        assert_eq!(stored("d/f").unwrap(), b"ok new");
        // `mv f f~ && rm f~` deletes f.
        vfs.rename(d, "f", d, "f~").unwrap();
        vfs.unlink(d, "f~").unwrap();
        assert_eq!(stored("d/f"), None);
    }

    #[test]
    fn renaming_pending_text_to_a_scratch_name_moves_only_the_text() {
        let (tree, vfs, f) = setup();
        let d = dir_ino(&vfs);
        fail_a_save(&vfs, f);
        vfs.rename(d, "f", d, "f.tmp").unwrap();
        assert_eq!(stored(&tree, "d/f").unwrap(), b"ok old");
        let (f, _) = vfs.lookup(d, "f", 1).unwrap();
        assert_eq!(
            read_all(&vfs, f),
            b"ok old",
            "the stored object shows again"
        );
        let (tmp, _) = vfs.lookup(d, "f.tmp", 1).unwrap();
        assert_eq!(read_all(&vfs, tmp), b"bad");
        assert_eq!(
            vfs.failed_paths(),
            vec!["d/f.tmp".to_string()],
            "still text no commit took: kept for recovery"
        );
        vfs.unlink(d, "f.tmp").unwrap();
        assert!(vfs.failed_paths().is_empty());
        assert_eq!(stored(&tree, "d/f").unwrap(), b"ok old");
    }

    #[test]
    fn renaming_a_file_over_pending_text_replaces_the_text() {
        let (tree, vfs, f) = setup();
        let d = dir_ino(&vfs);
        lock(&tree.files)
            .unwrap()
            .insert("d/g".into(), b"ok g".to_vec());
        fail_a_save(&vfs, f);
        vfs.rename(d, "g", d, "f").unwrap();
        assert_eq!(stored(&tree, "d/f").unwrap(), b"ok g");
        let (f, _) = vfs.lookup(d, "f", 1).unwrap();
        assert_eq!(
            read_all(&vfs, f),
            b"ok g",
            "the renamed file, not the old text"
        );
        assert!(vfs.failed_paths().is_empty());
    }

    #[test]
    fn vim_save_by_rename_commits_and_a_failed_one_restores_the_backup() {
        let (tree, vfs, _) = setup();
        let d = dir_ino(&vfs);
        let save = |text: &[u8]| -> Result<()> {
            // vim with 'writebackup' and 'backupcopy' auto: rename f to f~, create f, write,
            // fsync, close, restore the mode, remove the backup (or restore it on failure).
            vfs.rename(d, "f", d, "f~")?;
            let (f, _, fh) = vfs.create(d, "f", 0o644)?;
            vfs.write(fh, 0, text, false)?;
            let synced = vfs.fsync(fh);
            vfs.flush(fh)?;
            vfs.release(fh)?;
            if let Err(e) = synced {
                vfs.rename(d, "f~", d, "f")?;
                return Err(e);
            }
            vfs.setattr(f, None, None, None, Some(0o644))?;
            vfs.unlink(d, "f~")
        };
        save(b"ok new").unwrap();
        assert_eq!(stored(&tree, "d/f").unwrap(), b"ok new");
        assert_eq!(vfs.lookup(d, "f~", 1).unwrap_err().errno(), libc::ENOENT);
        assert_eq!(save(b"bad").unwrap_err().errno(), libc::EINVAL);
        assert_eq!(
            stored(&tree, "d/f").unwrap(),
            b"ok new",
            "a failed save keeps it"
        );
        let (f, _) = vfs.lookup(d, "f", 1).unwrap();
        assert_eq!(read_all(&vfs, f), b"ok new");
        assert!(vfs.failed_paths().is_empty());
        assert_eq!(vfs.lookup(d, "f~", 1).unwrap_err().errno(), libc::ENOENT);
    }

    #[test]
    fn sed_in_place_commits_by_rename_and_a_failure_keeps_the_object() {
        let (tree, vfs, _) = setup();
        let d = dir_ino(&vfs);
        let sed = |text: &[u8]| -> Result<()> {
            // GNU sed -i: create sedXXXXXX (0600), write, fchmod to the file's mode, close,
            // rename over the file.
            let (tmp, _, fh) = vfs.create(d, "sedAb12Cd", 0o600)?;
            vfs.write(fh, 0, text, false)?;
            vfs.setattr(tmp, Some(fh), None, None, Some(0o644))?;
            vfs.flush(fh)?;
            vfs.release(fh)?;
            vfs.rename(d, "sedAb12Cd", d, "f")
        };
        sed(b"ok edited").unwrap();
        assert_eq!(stored(&tree, "d/f").unwrap(), b"ok edited");
        assert_eq!(
            vfs.lookup(d, "sedAb12Cd", 1).unwrap_err().errno(),
            libc::ENOENT
        );
        assert_eq!(sed(b"bad").unwrap_err().errno(), libc::EINVAL);
        assert_eq!(stored(&tree, "d/f").unwrap(), b"ok edited");
        // The text shows at the file; removing it discards only the text.
        let (f, _) = vfs.lookup(d, "f", 1).unwrap();
        assert_eq!(read_all(&vfs, f), b"bad");
        vfs.unlink(d, "sedAb12Cd").unwrap();
        vfs.unlink(d, "f").unwrap();
        assert_eq!(stored(&tree, "d/f").unwrap(), b"ok edited");
        assert!(vfs.failed_paths().is_empty());
    }

    #[test]
    fn rsync_temporary_renamed_over_commits_with_its_mtime() {
        let (tree, vfs, _) = setup();
        let d = dir_ino(&vfs);
        let when = UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        let rsync = |text: &[u8]| -> Result<()> {
            // rsync: create .f.XXXXXX, write, close, set mode and mtime, rename over f.
            let (tmp, _, fh) = vfs.create(d, ".f.Xa3k2P", 0o600)?;
            vfs.write(fh, 0, text, false)?;
            vfs.flush(fh)?;
            vfs.release(fh)?;
            vfs.setattr(tmp, None, None, Some(when), Some(0o644))?;
            assert_eq!(vfs.getattr(tmp, None)?.mtime, when);
            vfs.rename(d, ".f.Xa3k2P", d, "f")
        };
        rsync(b"ok synced").unwrap();
        assert_eq!(stored(&tree, "d/f").unwrap(), b"ok synced");
        assert_eq!(lock(&tree.mtimes).unwrap()["d/f"], when);
        assert_eq!(rsync(b"bad").unwrap_err().errno(), libc::EINVAL);
        assert_eq!(stored(&tree, "d/f").unwrap(), b"ok synced");
    }

    /// A time set on a held file before text is written into it no longer is its time (a
    /// write moves the time), so renaming it over a file does not date the commit with it.
    #[test]
    fn a_time_set_before_a_write_does_not_date_the_commit() {
        let (tree, vfs, _) = setup();
        let d = dir_ino(&vfs);
        let touched = UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        // touch .x; cat other > .x; mv .x f
        let (tmp, _, fh) = vfs.create(d, ".x", 0o644).unwrap();
        vfs.release(fh).unwrap();
        vfs.setattr(tmp, None, None, Some(touched), None).unwrap();
        let fh = vfs.open(tmp, OpenMode::default()).unwrap();
        vfs.setattr(tmp, Some(fh), Some(0), None, None).unwrap();
        vfs.write(fh, 0, b"ok written later", false).unwrap();
        vfs.flush(fh).unwrap();
        vfs.release(fh).unwrap();
        assert_ne!(vfs.getattr(tmp, None).unwrap().mtime, touched);
        vfs.rename(d, ".x", d, "f").unwrap();
        assert_eq!(stored(&tree, "d/f").unwrap(), b"ok written later");
        assert_ne!(
            lock(&tree.mtimes).unwrap().get("d/f").copied(),
            Some(touched),
            "the commit took the time set before the write"
        );
        // A time set after the write (rsync, cp -a) still dates it.
        let (tmp, _, fh) = vfs.create(d, ".y", 0o644).unwrap();
        vfs.write(fh, 0, b"ok copied", false).unwrap();
        vfs.setattr(tmp, Some(fh), None, Some(touched), None)
            .unwrap();
        vfs.flush(fh).unwrap();
        vfs.release(fh).unwrap();
        vfs.rename(d, ".y", d, "f").unwrap();
        assert_eq!(lock(&tree.mtimes).unwrap()["d/f"], touched);
    }
}
