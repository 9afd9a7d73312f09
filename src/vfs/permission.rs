//! Who may do what, by owner and mode, for the requests the kernel leaves to the filesystem.
//!
//! A mount without `--allow-other` is used by one user only (the kernel refuses every other
//! user's process), so worldfs does not ask the kernel to check modes (`default_permissions`):
//! with it, every `create` or `rename` in a folder makes the kernel ask for the folder's
//! attributes again before its next permission check, four requests a file more in a restore
//! (docs/bench.md, twenty-second session). The stores refuse what cannot be written (a
//! read-only tree, a world folder's file the daemon's user may not change); what is left to
//! this module is what the kernel then asks the filesystem itself: `access(2)` (`test -w`),
//! and `chown`, whose rules the kernel no longer applies. With `--allow-other` the kernel
//! checks modes itself as before, and these rules agree with it.

use crate::vfs::tree::Owner;

/// What `access(2)` asks for: read, write, search or execute (`R_OK`, `W_OK`, `X_OK`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Want {
    pub read: bool,
    pub write: bool,
    pub execute: bool,
}

/// Whether `caller`, a member of `groups` besides its own group, may have `want` of a file
/// or folder owned by `owner` with permission bits `perm`, as the kernel's own check
/// decides: root may read and write anything and execute what has any execute bit (or is
/// a folder); anyone else gets the owner's, the group's or the others' bits, the first
/// class that names them.
pub fn permits(
    perm: u16,
    owner: Owner,
    dir: bool,
    caller: Owner,
    groups: &[u32],
    want: Want,
) -> bool {
    let perm = u32::from(perm);
    if caller.uid == 0 {
        return !want.execute || dir || perm & 0o111 != 0;
    }
    let bits = if caller.uid == owner.uid {
        perm >> 6
    } else if in_group(owner, caller, groups) {
        perm >> 3
    } else {
        perm
    } & 0o7;
    (!want.read || bits & 0o4 != 0)
        && (!want.write || bits & 0o2 != 0)
        && (!want.execute || bits & 0o1 != 0)
}

/// Whether the group class of a file owned by `owner` names `caller`, a member of `groups`
/// besides its own group; also what says whether [`permits`] needs `groups` at all.
pub fn in_group(owner: Owner, caller: Owner, groups: &[u32]) -> bool {
    caller.gid == owner.gid || groups.contains(&owner.gid)
}

/// Whether `caller`, a member of `groups` besides its own group, may change the owner of a
/// file owned by `now` to `to`, as `chown(2)` decides: root may give anything to anyone;
/// the owner may keep its user id and give the file to a group it belongs to.
pub fn may_chown(now: Owner, to: Owner, caller: Owner, groups: &[u32]) -> bool {
    if caller.uid == 0 {
        return true;
    }
    let same = now == to;
    let ours = caller.uid == now.uid && to.uid == now.uid;
    let group_ok = to.gid == now.gid || to.gid == caller.gid || groups.contains(&to.gid);
    same || (ours && group_ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: Owner = Owner {
        uid: 1000,
        gid: 1000,
    };
    const OTHER: Owner = Owner { uid: 2000, gid: 50 };
    const ROOT: Owner = Owner { uid: 0, gid: 0 };
    const R: Want = Want {
        read: true,
        write: false,
        execute: false,
    };
    const W: Want = Want {
        read: false,
        write: true,
        execute: false,
    };
    const X: Want = Want {
        read: false,
        write: false,
        execute: true,
    };

    #[test]
    fn the_owner_gets_the_owners_bits() {
        assert!(permits(0o644, ME, false, ME, &[], R));
        assert!(permits(0o644, ME, false, ME, &[], W));
        assert!(!permits(0o444, ME, false, ME, &[], W), "a read-only file");
        assert!(!permits(0o644, ME, false, ME, &[], X));
        assert!(permits(0o755, ME, true, ME, &[], X));
        assert!(!permits(0o555, ME, true, ME, &[], W), "a read-only folder");
        assert!(permits(0o644, ME, false, ME, &[], Want::default()), "F_OK");
        // The owner's class decides, even where others get more.
        assert!(!permits(0o066, ME, false, ME, &[], R));
    }

    #[test]
    fn the_group_and_others_get_their_bits() {
        let in_group = Owner {
            uid: 3000,
            gid: OTHER.gid,
        };
        assert!(permits(0o640, OTHER, false, in_group, &[], R));
        assert!(!permits(0o640, OTHER, false, in_group, &[], W));
        assert!(!permits(0o640, OTHER, false, ME, &[], R));
        assert!(permits(0o604, OTHER, false, ME, &[], R));
        assert!(!permits(0o700, OTHER, true, ME, &[], X));
        // A supplementary group counts as the caller's own.
        assert!(permits(0o640, OTHER, false, ME, &[27, OTHER.gid], R));
        assert!(
            !permits(0o604, OTHER, false, ME, &[OTHER.gid], R),
            "the group's bits"
        );
    }

    #[test]
    fn root_reads_and_writes_anything_and_executes_what_has_an_execute_bit() {
        assert!(permits(0o000, ME, false, ROOT, &[], R));
        assert!(permits(0o444, ME, false, ROOT, &[], W));
        assert!(!permits(0o644, ME, false, ROOT, &[], X));
        assert!(permits(0o744, ME, false, ROOT, &[], X));
        assert!(
            permits(0o000, ME, true, ROOT, &[], X),
            "root searches any folder"
        );
    }

    #[test]
    fn chown_follows_the_rules_of_chown() {
        let mine_to = |uid, gid| Owner { uid, gid };
        assert!(may_chown(ME, ME, ME, &[]), "no change");
        assert!(
            !may_chown(ME, mine_to(2000, 1000), ME, &[]),
            "to another user"
        );
        assert!(
            may_chown(ME, mine_to(1000, 27), ME, &[27]),
            "to a group of mine"
        );
        assert!(
            !may_chown(ME, mine_to(1000, 50), ME, &[27]),
            "to a group not mine"
        );
        assert!(
            !may_chown(OTHER, mine_to(2000, 1000), ME, &[]),
            "not my file"
        );
        assert!(may_chown(ME, OTHER, ROOT, &[]), "root");
    }
}
