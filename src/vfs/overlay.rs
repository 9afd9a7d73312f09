//! Text the core holds and the tree does not store (pending text): scratch files, new objects
//! not committed yet, and text a commit did not take, kept readable at its path and saved for
//! recovery at unmount.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::error::{Error, Result};
use crate::vfs::core::Vfs;
use crate::vfs::held::private_dir;
use crate::vfs::naming::display_path;
use crate::vfs::paths::{Held, Overlay};
use crate::vfs::tree::Owner;

/// Text no commit took, saved at unmount by [`Vfs::save_unsaved`].
pub struct Unsaved {
    /// Its path in the mount.
    pub path: String,
    /// Where its text was saved, or why it could not be.
    pub saved: Result<PathBuf>,
}

impl Vfs {
    /// Commits `data` as the content of tree path `path` (whose time was set to `dated`
    /// before, see [`Tree::write_dated`]): the one place a commit to the tree sets the file's
    /// mode, owner and time and notes the change for the kernel. On failure keeps the text
    /// readable as pending text (with the mode of what it replaces, else `perm`).
    ///
    /// [`Tree::write_dated`]: crate::vfs::Tree::write_dated
    pub(super) fn commit(
        &self,
        path: &[String],
        data: Vec<u8>,
        perm: u16,
        owner: Option<Owner>,
        dated: Option<SystemTime>,
    ) -> Result<()> {
        let written = match dated {
            Some(m) => self.tree.write_dated(path, &data, m),
            None => self.tree.write(path, &data),
        };
        match written {
            Ok(()) => {
                // The mode the file was created or chmodded with (a tree whose files have
                // fixed modes ignores it; a real folder's file gets it).
                self.tree
                    .set_perm(path, perm)
                    .map_err(|e| e.context(display_path(path)))?;
                self.took_file(path);
                self.report.cleared(&display_path(path));
                let done = self.paths.committed(path)?;
                self.removals.replaced_done(path)?;
                if let Some(owner) = owner.or_else(|| done.as_ref().and_then(|o| o.owner)) {
                    self.tree
                        .set_owner(path, owner)
                        .map_err(|e| e.context(display_path(path)))?;
                }
                // The time set on the text committed, else one set on the held text it
                // replaces: set once, here, after the write (see `Tree::write_dated`).
                if let Some(m) = dated.or_else(|| done.and_then(|o| o.set_mtime)) {
                    self.tree
                        .set_mtime(path, m)
                        .map_err(|e| e.context(display_path(path)))?;
                }
                // Noted once the time is set: a settle meanwhile would re-check the file
                // with its time still the commit's.
                self.note_change(path);
                Ok(())
            }
            Err(e) => {
                let e = e.context(display_path(path));
                log::error!("commit failed, nothing stored: {e}");
                self.report.failed(&display_path(path), e.message());
                // A removal this text was to replace is over: the object stays stored.
                self.removals.replaced_done(path)?;
                let stored = self.tree.stat(path).ok();
                let stored_perm = stored.as_ref().map(|s| s.perm);
                let text = self.spill.hold(path, data);
                self.paths.fail(path, |old| Overlay {
                    set_mtime: old.and_then(|o| o.set_mtime),
                    perm: old.map(|o| o.perm).or(stored_perm).unwrap_or(perm),
                    cookie: old.map_or_else(|| self.paths.cookie(), |o| o.cookie),
                    text,
                    mtime: SystemTime::now(),
                    held: Held::Failed,
                    owner: old
                        .and_then(|o| o.owner)
                        .or(owner)
                        .or(stored.and_then(|s| s.owner)),
                })?;
                Err(e.logged())
            }
        }
    }

    /// Paths holding text no commit took (kept readable in the mount), sorted.
    pub fn failed_paths(&self) -> Vec<String> {
        let mut paths: Vec<String> = self
            .paths
            .failed_paths()
            .unwrap_or_default()
            .iter()
            .map(|p| display_path(p))
            .collect();
        paths.sort();
        paths
    }

    /// Paths holding text no commit took, sorted, each with why its commit failed (when
    /// that was noted: see [`Vfs::report`]).
    pub fn failed_with_reasons(&self) -> Vec<(String, Option<String>)> {
        self.failed_paths()
            .into_iter()
            .map(|p| {
                let reason = self.report.reason(&p);
                (p, reason)
            })
            .collect()
    }

    /// Saves the text no commit took into `dir` (made, mode 0700), one file per path at the
    /// same relative path, and drops every held text; the paths the tree holds back
    /// uncommitted ([`Tree::uncommitted`](crate::vfs::tree::Tree::uncommitted)) come with
    /// an error. Called once, at unmount.
    pub fn save_unsaved(&self, dir: &Path) -> Vec<Unsaved> {
        let held = self.paths.drain().unwrap_or_default();
        let mut unsaved: Vec<Unsaved> = held
            .into_iter()
            .filter(|(_, o)| o.held.is_unsaved())
            .map(|(path, o)| {
                let dest = path.iter().fold(dir.to_path_buf(), |d, n| d.join(n));
                let saved = dest
                    .parent()
                    .map_or(Ok(()), private_dir)
                    .and_then(|()| o.text.save(&dest))
                    .map(|()| dest);
                Unsaved {
                    path: display_path(&path),
                    saved,
                }
            })
            .collect();
        self.spill.remove();
        // Changes the tree took but could not commit (its last sync failed) end with the
        // daemon: they have no text to save, but are reported all the same.
        // Removals given up: the files stay stored.
        unsaved.extend(
            self.removals
                .given_up()
                .unwrap_or_default()
                .into_iter()
                .map(|(path, reason)| Unsaved {
                    path: display_path(&path),
                    saved: Err(Error::new(
                        libc::EIO,
                        format!("its removal failed ({reason}); it stays stored"),
                    )),
                }),
        );
        unsaved.extend(self.tree.uncommitted().into_iter().map(|path| Unsaved {
            path,
            saved: Err(Error::new(
                libc::EIO,
                "the change was taken but its commit failed; it is lost",
            )),
        }));
        unsaved.sort_by(|a, b| a.path.cmp(&b.path));
        unsaved
    }

    /// After a commit at `path`: a real folder's file the kernel knows stands for the new
    /// file on disk the commit put there (see [`Stat::file`]).
    pub(super) fn took_file(&self, path: &[String]) {
        let known = self.inodes.read().map(|t| t.file_at(path).is_some());
        if known.unwrap_or(false) {
            let file = self.tree.stat(path).ok().and_then(|s| s.file);
            if let Ok(mut t) = self.inodes.write() {
                t.set_file(path, file);
            }
        }
    }

    /// At unmount, stores every scratch file still there under its own name, where the tree
    /// can hold a file of that name. Scratch names are those tools use for temporaries
    /// (`f~`, `4913`, `sedXXXXXX`, `.f.swp`, dot files); a tool removes or renames its
    /// temporaries when it ends well, and a file still there was put there to stay (a
    /// restore's `.gitignore` in `worldmods/`, a mod-storage key or a player named `4913`)
    /// or left by a tool that did not end well, as on any filesystem. Not stored: a copy
    /// moved aside (`mv f f~`), whose source keeps its content; what the tree refuses (an
    /// unknown name in a block folder, a store's own file); and a name another program made
    /// meanwhile, whose held text is then saved for recovery like text no commit took.
    pub fn store_scratch(&self) -> Vec<Leftover> {
        let _settled = self.settling();
        let Ok(paths) = self.paths.scratch_paths() else {
            return Vec::new();
        };
        let mut left: Vec<Leftover> = paths
            .into_iter()
            .map(|path| {
                let stored = self.writable().and_then(|()| self.store_one_scratch(&path));
                let folder = &path[..path.len().saturating_sub(1)];
                let lost = stored.as_ref().is_err_and(|e| {
                    matches!(
                        e.errno(),
                        libc::EIO | libc::ENOSPC | libc::EDQUOT | libc::EROFS
                    ) || self.tree.stat(folder).is_err()
                });
                if lost {
                    // Not a name the tree refuses but a store that could not take it (its
                    // folder renamed away on disk, a full disk): saved for recovery and
                    // reported like text no commit took.
                    let _ = self
                        .paths
                        .with_held(&path, |o| o.held = Held::FailedScratch);
                }
                Leftover {
                    path: display_path(&path),
                    stored,
                }
            })
            .collect();
        left.sort_by(|a, b| a.path.cmp(&b.path));
        left
    }

    /// Stores scratch file `path` with its mode and time; it is then held no more. Its
    /// folder keeps the time the mount showed (a restore set it; storing a file changes it).
    fn store_one_scratch(&self, path: &[String]) -> Result<()> {
        if let Some(source) = self.aside_source(path)? {
            return Err(Error::invalid(format!(
                "a copy of {} moved aside, which keeps its content",
                display_path(&source)
            )));
        }
        if self.tree.stat(path).is_ok() {
            self.paths
                .with_held(path, |o| o.held = Held::FailedScratch)?;
            return Err(Error::new(
                libc::EEXIST,
                "another program made this name meanwhile: it keeps its content, and the \
                 mount's is saved for recovery",
            ));
        }
        let (text, perm, dated, mtime, owner) = self
            .paths
            .with_held(path, |o| {
                Ok::<_, Error>((o.text.bytes()?, o.perm, o.set_mtime, o.mtime, o.owner))
            })?
            .ok_or_else(|| Error::not_found("no longer held"))??;
        let folder = &path[..path.len().saturating_sub(1)];
        let folder_time = self.tree.stat(folder).ok().map(|s| s.mtime);
        match dated {
            Some(m) => self.tree.write_dated(path, &text, m)?,
            None => self.tree.write(path, &text)?,
        }
        self.paths.take_held(path)?;
        self.tree.set_perm(path, perm)?;
        if let Some(owner) = owner {
            self.tree.set_owner(path, owner)?;
        }
        self.tree.set_mtime(path, dated.unwrap_or(mtime))?;
        match folder_time {
            Some(t) => self.tree.set_mtime(folder, t),
            None => Ok(()),
        }
    }
}

/// A scratch file left at unmount, and whether [`Vfs::store_scratch`] stored it.
pub struct Leftover {
    /// Its path in the mount.
    pub path: String,
    /// Stored under its name, or why not (then it is dropped).
    pub stored: Result<()>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::lock;
    use crate::vfs::held::Text;
    use crate::vfs::test_tree::*;
    use std::sync::Arc;

    #[test]
    fn removing_pending_text_discards_only_the_text_and_a_second_rm_deletes() {
        let (tree, vfs, f) = setup();
        let d = dir_ino(&vfs);
        fail_a_save(&vfs, f);
        assert_eq!(read_all(&vfs, f), b"bad");
        vfs.unlink(d, "f").unwrap();
        assert_eq!(
            stored(&tree, "d/f").unwrap(),
            b"ok old",
            "the object is kept"
        );
        assert!(vfs.failed_paths().is_empty());
        let (f, stat) = vfs.lookup(d, "f", 1).unwrap();
        assert_eq!(stat.size, 6, "the stored object shows again");
        assert_eq!(read_all(&vfs, f), b"ok old");
        vfs.unlink(d, "f").unwrap();
        assert_eq!(vfs.lookup(d, "f", 1).unwrap_err().errno(), libc::ENOENT);
        assert_eq!(vfs.remove_held_back(std::time::Duration::ZERO), (1, 0));
        assert_eq!(stored(&tree, "d/f"), None, "a second rm deletes it");
    }

    /// Files left under temporaries' names at unmount are stored where the tree can hold
    /// them, with their mode and time; what it refuses is dropped with the reason.
    #[test]
    fn scratch_files_left_at_unmount_are_stored_under_their_names() {
        let (tree, vfs, _) = setup();
        let d = dir_ino(&vfs);
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        for (name, text) in [
            ("x~", &b"ok kept"[..]),
            ("4913", b"ok key"),
            (".junk.swp", b"swap"),
        ] {
            let (ino, _, fh) = vfs.create(d, name, 0o600).unwrap();
            vfs.write(fh, 0, text, false).unwrap();
            vfs.release(fh).unwrap();
            vfs.setattr(ino, None, None, Some(t), None).unwrap();
        }
        assert_eq!(stored(&tree, "d/x~"), None, "held while mounted");
        let left = vfs.store_scratch();
        let outcome: Vec<(&str, bool)> = left
            .iter()
            .map(|l| (l.path.as_str(), l.stored.is_ok()))
            .collect();
        assert_eq!(
            outcome,
            [("d/.junk.swp", false), ("d/4913", true), ("d/x~", true)]
        );
        let refused = left[0].stored.as_ref().unwrap_err().to_string();
        assert!(refused.contains("expected `ok`"), "{refused}");
        assert_eq!(stored(&tree, "d/x~").unwrap(), b"ok kept");
        assert_eq!(stored(&tree, "d/4913").unwrap(), b"ok key");
        assert_eq!(lock(&tree.mtimes).unwrap().get("d/x~"), Some(&t));
        assert_eq!(
            lock(&tree.mtimes).unwrap().get("d"),
            Some(&std::time::UNIX_EPOCH),
            "the folder keeps the time the mount showed"
        );
        assert!(vfs.store_scratch().iter().all(|l| l.path == "d/.junk.swp"));
    }

    /// A scratch file the store could not take at unmount (here: the tree turned read-only;
    /// on disk, its folder renamed away) is saved and reported like text no commit took.
    #[test]
    fn a_scratch_file_the_store_cannot_take_is_saved_and_reported() {
        let (tree, vfs, _) = setup();
        let d = dir_ino(&vfs);
        for (name, text) in [("x~", &b"ok kept"[..]), (".junk.swp", b"swap")] {
            let (_, _, fh) = vfs.create(d, name, 0o600).unwrap();
            vfs.write(fh, 0, text, false).unwrap();
            vfs.release(fh).unwrap();
        }
        tree.read_only
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let left = vfs.store_scratch();
        assert!(left.iter().all(|l| l.stored.is_err()));
        let dir = tempfile::tempdir().unwrap();
        let unsaved: Vec<String> = vfs
            .save_unsaved(dir.path())
            .into_iter()
            .map(|u| u.path)
            .collect();
        assert_eq!(unsaved, ["d/.junk.swp", "d/x~"]);
        assert_eq!(std::fs::read(dir.path().join("d/x~")).unwrap(), b"ok kept");
    }

    /// A copy moved aside is not stored: its source keeps its content (`mv f f~` is undone),
    /// also after two files were moved onto one backup name. `mv -b new f` (f moved aside,
    /// then a file renamed over it) shows and keeps the new `f`.
    #[test]
    fn copies_moved_aside_are_not_stored_and_their_sources_stay() {
        let (tree, vfs, _) = setup();
        let d = dir_ino(&vfs);
        store(&tree, "d/g", b"ok g");
        vfs.rename(d, "f", d, "f~").unwrap();
        vfs.rename(d, "g", d, "f~").unwrap();
        let left = vfs.store_scratch();
        assert_eq!(left.len(), 1);
        assert!(left[0].stored.is_err());
        assert_eq!(stored(&tree, "d/f").unwrap(), b"ok old");
        assert_eq!(stored(&tree, "d/g").unwrap(), b"ok g");
        assert_eq!(stored(&tree, "d/f~"), None);

        let (tree, vfs, _) = setup();
        let d = dir_ino(&vfs);
        store(&tree, "d/f.new", b"ok new");
        vfs.rename(d, "f", d, "f~").unwrap();
        vfs.rename(d, "f.new", d, "f").unwrap();
        let (f, _) = vfs.lookup(d, "f", 1).expect("f shows again");
        assert_eq!(read_all(&vfs, f), b"ok new");
        vfs.store_scratch();
        assert_eq!(stored(&tree, "d/f").unwrap(), b"ok new");
    }

    /// A name another program made while the mount held a file there keeps its content; the
    /// held text is saved for recovery, not dropped.
    #[test]
    fn a_name_made_meanwhile_by_another_program_is_not_overwritten() {
        let (tree, vfs, _) = setup();
        let d = dir_ino(&vfs);
        let (_, _, fh) = vfs.create(d, "x~", 0o644).unwrap();
        vfs.write(fh, 0, b"ok mount", false).unwrap();
        vfs.release(fh).unwrap();
        store(&tree, "d/x~", b"ok disk");
        let left = vfs.store_scratch();
        assert_eq!(left[0].stored.as_ref().unwrap_err().errno(), libc::EEXIST);
        assert_eq!(stored(&tree, "d/x~").unwrap(), b"ok disk");
        assert_eq!(
            vfs.failed_paths(),
            ["d/x~"],
            "saved for recovery at unmount"
        );
    }

    /// A tree can turn read-only while mounted (a TVDA disk found damaged at a commit, whose
    /// text is then held): removing held text or a scratch file changes nothing stored, so
    /// it is still allowed; removing a stored object is not.
    #[test]
    fn held_text_is_discarded_after_the_tree_turns_read_only() {
        let (tree, vfs, f) = setup();
        let d = dir_ino(&vfs);
        fail_a_save(&vfs, f);
        let (_, _, fh) = vfs.create(d, ".f.swp", 0o600).unwrap();
        vfs.write(fh, 0, b"swap", false).unwrap();
        vfs.release(fh).unwrap();
        tree.read_only
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let (swp, _) = vfs.lookup(d, ".f.swp", 1).unwrap();
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        assert_eq!(
            vfs.setattr(swp, None, None, Some(t), None).unwrap().mtime,
            t
        );
        assert_eq!(
            vfs.setattr(f, None, None, None, Some(0o600)).unwrap().perm,
            0o600
        );
        vfs.rename(d, ".f.swp", d, ".g.swp").unwrap();
        vfs.rename(d, ".g.swp", d, ".f.swp").unwrap();
        assert_eq!(vfs.setattr(f, None, Some(1), None, None).unwrap().size, 1);
        vfs.unlink(d, ".f.swp").unwrap();
        vfs.unlink(d, "f").unwrap();
        assert!(vfs.failed_paths().is_empty() && vfs.store_scratch().is_empty());
        let (f, _) = vfs.lookup(d, "f", 1).unwrap();
        assert_eq!(
            read_all(&vfs, f),
            b"ok old",
            "the stored object shows again"
        );
        assert_eq!(vfs.unlink(d, "f").unwrap_err().errno(), libc::EROFS);
        assert_eq!(stored(&tree, "d/f").unwrap(), b"ok old");
    }

    #[test]
    fn held_files_show_real_modes() {
        let (tree, vfs, _) = setup();
        let d = dir_ino(&vfs);
        lock(&tree.files)
            .unwrap()
            .insert("d/auth".into(), b"ok hash".to_vec());
        // `create` honours the mode asked for; chmod of a held file is real.
        let (tmp, stat, fh) = vfs.create(d, "sedAb12Cd", 0o600).unwrap();
        assert_eq!(stat.perm, 0o600);
        vfs.release(fh).unwrap();
        assert_eq!(vfs.getattr(tmp, None).unwrap().perm, 0o600);
        vfs.setattr(tmp, None, None, None, Some(0o640)).unwrap();
        assert_eq!(vfs.getattr(tmp, None).unwrap().perm, 0o640);
        // A copy moved aside keeps the mode of what it holds.
        vfs.rename(d, "auth", d, "auth~").unwrap();
        let (backup, _) = vfs.lookup(d, "auth~", 1).unwrap();
        assert_eq!(vfs.getattr(backup, None).unwrap().perm, 0o600);
        vfs.rename(d, "auth~", d, "auth").unwrap();
        // Text a commit did not take keeps the mode of the file it is for.
        let (auth, _) = vfs.lookup(d, "auth", 1).unwrap();
        let fh = vfs.open(auth, TRUNC).unwrap();
        vfs.write(fh, 0, b"bad", false).unwrap();
        vfs.release(fh).unwrap_err();
        assert_eq!(vfs.getattr(auth, None).unwrap().perm, 0o600);
        assert_eq!(vfs.getattr(auth, None).unwrap().size, 3);
    }

    #[test]
    fn large_unsaved_text_leaves_memory_and_is_saved_for_recovery() {
        let state = tempfile::tempdir().unwrap();
        let tree = Arc::new(Files::default());
        lock(&tree.files)
            .unwrap()
            .insert("d/f".into(), b"ok old".to_vec());
        let held = state.path().join("held");
        let vfs = Vfs::new(tree.clone(), Some(held.clone()));
        let d = dir_ino(&vfs);
        let (f, _) = vfs.lookup(d, "f", 1).unwrap();
        let big = vec![b'x'; 1 << 20];
        let fh = vfs.open(f, TRUNC).unwrap();
        vfs.write(fh, 0, &big, false).unwrap();
        vfs.release(fh).unwrap_err();
        assert_eq!(
            std::fs::read_dir(&held).unwrap().count(),
            1,
            "the text is in a file"
        );
        assert!(vfs
            .paths
            .with_held(&["d".to_string(), "f".to_string()], |o| matches!(
                o.text,
                Text::File { .. }
            ))
            .unwrap()
            .unwrap());
        assert_eq!(read_all(&vfs, f), big, "and still readable");
        // A scratch file is not saved; the unsaved text is, at the same path.
        let (_, _, fh) = vfs.create(d, "f.swp", 0o600).unwrap();
        vfs.write(fh, 0, b"swap", false).unwrap();
        vfs.release(fh).unwrap();
        let recovery = state.path().join("unsaved");
        let saved = vfs.save_unsaved(&recovery);
        assert_eq!(saved.len(), 1);
        assert_eq!(saved[0].path, "d/f");
        let file = saved[0].saved.as_ref().unwrap();
        assert_eq!(*file, recovery.join("d/f"));
        assert_eq!(std::fs::read(file).unwrap(), big);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(!held.exists(), "the spill folder is gone");
        assert_eq!(stored(&tree, "d/f").unwrap(), b"ok old");
    }
}
