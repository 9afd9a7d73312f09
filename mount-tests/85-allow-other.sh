#!/bin/bash
# --allow-other shows no more than the disk allows (issue 35): the root takes the world folder's
# owner and mode (the sticky bit too, which the kernel then enforces), each view the owner and
# at most the permission bits of the database it shows, world-folder files their own owners,
# and what another user makes through the mount is theirs on disk. Driven as other users
# (`nobody`, and uid 4242 that has no account) with ls, cat, sed -i, touch and rm.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/tvda.sh"
. "$(dirname "$0")/survivalcraft.sh"

chmod 755 "$T"
M=$T/mnt
# as USER CMD...: CMD run as USER (a name or a number), with no supplementary groups.
as() {
  local who=$1
  shift
  if [[ "$who" =~ ^[0-9]+$ ]]; then
    setpriv --reuid="$who" --regid="$who" --clear-groups "$@"
  else
    setpriv --reuid="$who" --regid="$(id -g "$who")" --clear-groups "$@"
  fi
}
# denied USER CMD...: CMD run as USER fails with "Permission denied" or "Operation not permitted".
denied() {
  local who=$1
  shift
  if as "$who" "$@" >"$T/out" 2>&1; then fail "$who may: $*"; fi
  grep -q -e "Permission denied" -e "Operation not permitted" "$T/out" || { cat "$T/out"; fail "$who: $*: not refused for want of permission"; }
}
owner_of() { stat -c %U:%a "$1"; }
SIGN=blocks/0,0,0/meta/2,10,1/fields/text

# A private world: folder 0700 and databases 0600, owned by root.
W=$(world private 1)
chmod 0700 "$W"
chmod 0600 "$W"/*.sqlite
mount_world "$W" "$M" --allow-other
assert_eq "$(owner_of "$M")" "root:700" "the root of a 0700 world folder"
denied nobody ls "$M"
denied nobody cat "$M/players/celeron55"
denied nobody cat "$M/$SIGN"
unmount_world "$M"

# An open folder with some databases closed: each view as its database allows.
chmod 0755 "$W"
chmod 0644 "$W/players.sqlite"
mount_world "$W" "$M" --allow-other
assert_eq "$(owner_of "$M/blocks")" "root:700" "blocks/ of a 0600 map"
assert_eq "$(owner_of "$M/players")" "root:755" "players/ of a 0644 players.sqlite"
assert_eq "$(owner_of "$M/players/celeron55")" "root:644" "a player of a 0644 players.sqlite"
assert_eq "$(owner_of "$M/auth.txt")" "root:600" "auth.txt"
as nobody cat "$M/players/celeron55" >"$T/player" || fail "nobody cannot read a player of a 0644 database"
assert_contains "$T/player" "name = celeron55"
as nobody cat "$M/world.mt" >/dev/null || fail "nobody cannot read world.mt (0644)"
denied nobody ls "$M/blocks"
denied nobody cat "$M/auth.txt"
denied nobody cat "$M/mod_storage/mkworld/counter"
before=$(sha "$W/players.sqlite")
unmount_world "$M"
# index/ answers from the players too: closed when players.sqlite is.
chmod 0644 "$W/map.sqlite"
chmod 0600 "$W/players.sqlite"
mount_world "$W" "$M" --allow-other
as nobody ls "$M/blocks" >/dev/null || fail "nobody cannot list the blocks of a 0644 map"
assert_eq "$(owner_of "$M/index")" "root:700" "index/ of a 0644 map and a 0600 players.sqlite"
denied nobody ls "$M/index/items"
denied nobody cat "$M/players/celeron55"
unmount_world "$M"
chmod 0600 "$W/map.sqlite"
chmod 0644 "$W/players.sqlite"
mount_world "$W" "$M" --allow-other
denied nobody sed -i 's/^hp = .*/hp = 3/' "$M/players/celeron55"
denied nobody touch "$M/players/newcomer"
unmount_world "$M"
assert_eq "$(sha "$W/players.sqlite")" "$before" "players.sqlite after refused edits"
echo "a private world and its databases: as the disk allows"

# A world of its own user: that user reads and edits, another is refused; what it makes is
# its own on disk.
U=$(world users 1)
chown -R nobody:"$(id -gn nobody)" "$U"
chmod 0700 "$U"
chmod 0600 "$U"/*.sqlite
mount_world "$U" "$M" --allow-other
assert_eq "$(stat -c %U "$M/$SIGN")" "nobody" "the sign's owner"
as nobody sed -i 's/hello from mkworld/edited by nobody/' "$M/$SIGN" || fail "nobody cannot edit the sign of its world"
as nobody sh -c "echo 'notes' >'$M/notes.txt'" || fail "nobody cannot make a file in its world"
as nobody mkdir "$M/backups" || fail "nobody cannot make a folder in its world"
as nobody ln -s notes.txt "$M/notes.link" || fail "nobody cannot make a link in its world"
# A file a tool writes under a temporary name and renames (rsync) is its user's too, and a
# file of its own stays readable to it while open for writing.
mkdir -p "$T/src" && echo "from rsync" >"$T/src/synced.txt" && chown -R nobody "$T/src"
as nobody rsync "$T/src/synced.txt" "$M/synced.txt" || fail "nobody cannot rsync a file into its world"
as nobody sh -c "exec 3>>'$M/notes.txt'; cat '$M/notes.txt'" >"$T/notes" || fail "nobody cannot read its own file while it is open"
assert_contains "$T/notes" "notes"
denied 4242 ls "$M"
denied 4242 cat "$M/$SIGN"
unmount_world "$M"
for f in notes.txt backups notes.link synced.txt; do
  assert_eq "$(stat -c %U "$U/$f")" "nobody" "the owner on disk of $f made by nobody"
done
mount_world "$U" "$M"
assert_eq "$(head -1 "$M/$SIGN")" "edited by nobody" "the sign after a remount"
unmount_world "$M"
echo "a world of its own user: its user edits, another is refused, what it makes is its own"

# A sticky world folder (1777): every user makes files there, only a file's owner removes it.
S=$(world sticky 1)
chmod 1777 "$S"
echo a >"$S/a.txt" && chown 4242:4242 "$S/a.txt"
echo b >"$S/b.txt" && chown nobody "$S/b.txt"
mount_world "$S" "$M" --allow-other
assert_eq "$(owner_of "$M")" "root:1777" "the root of a 1777 world folder"
denied nobody rm -f "$M/a.txt"
as nobody rm "$M/b.txt" || fail "nobody cannot remove its own file in a sticky folder"
as nobody sh -c "echo c >'$M/c.txt'" || fail "nobody cannot make a file in a 1777 folder"
as nobody rm "$M/c.txt" || fail "nobody cannot remove the file it made in a sticky folder"
as 4242 sh -c "echo d >'$M/d.txt'" || fail "uid 4242 cannot make a file in a 1777 folder"
denied nobody rm -f "$M/d.txt"
# chmod through the mount keeps a sticky bit it is given.
mkdir "$M/shared" && chmod 1777 "$M/shared" || fail "chmod 1777 of a sub-folder"
assert_eq "$(stat -c %a "$S/shared")" "1777" "the sub-folder's mode on disk"
unmount_world "$M"
[ -e "$S/a.txt" ] || fail "a.txt of uid 4242 was removed"
[ -e "$S/b.txt" ] && fail "b.txt was not removed"
assert_eq "$(stat -c %u "$S/d.txt")" "4242" "the owner on disk of d.txt made by uid 4242"
echo "a sticky world folder: kept and enforced"

# A Survivalcraft world whose region files are closed: chunks/ as Regions/ allows.
R=$(sc_copy "$REGIONS" sc)
chmod 0755 "$R"
chmod 0700 "$R/Regions"
chmod 0644 "$R/Project.xml"
mount_world "$R" "$M" --allow-other
assert_eq "$(owner_of "$M/chunks")" "root:700" "chunks/ of a 0700 Regions folder"
denied nobody ls "$M/chunks"
as nobody cat "$M/Project.xml" >/dev/null || fail "nobody cannot read Project.xml (0644)"
unmount_world "$M"
chmod 0700 "$R"
mount_world "$R" "$M" --allow-other
denied nobody ls "$M"
unmount_world "$M"
echo "a Survivalcraft world: as its folder and region files allow"

# A Terrarum disk at 0600 and at 0644: the whole mount as the disk allows.
D=$(fixture world)
chmod 0600 "$D"
mount_world "$D" "$M" --allow-other
denied nobody ls "$M"
unmount_world "$M"
chmod 0644 "$D"
before=$(sha "$D")
mount_world "$D" "$M" --allow-other
assert_eq "$(owner_of "$M")" "root:755" "the root of a 0644 disk"
as nobody cat "$M/header.txt" >/dev/null || fail "nobody cannot read a 0644 disk"
denied nobody sed -i 's/^name = .*/name = "x"/' "$M/header.txt"
unmount_world "$M"
assert_eq "$(sha "$D")" "$before" "the disk after a refused edit"
echo "a Terrarum disk: as the disk allows"

# chown through the mount: a world-folder file gets its new owner on disk, and cp -a and
# rsync -a as root keep the owners of what they copy in (as on disk); a store's object keeps
# the store's owner, the chown succeeding without effect; another user may not give a file
# away (the kernel refuses).
C=$(world chown 1)
mount_world "$C" "$M" --allow-other
echo "note" >"$M/notes.txt"
chown 4242:4243 "$M/notes.txt" || fail "chown of a world-folder file failed"
assert_eq "$(stat -c %u:%g "$C/notes.txt")" "4242:4243" "owner on disk after chown"
assert_eq "$(stat -c %u:%g "$M/notes.txt")" "4242:4243" "owner shown after chown"
chgrp 4244 "$M/notes.txt"
assert_eq "$(stat -c %u:%g "$C/notes.txt")" "4242:4244" "owner on disk after chgrp"
mkdir "$T/own"
echo "from a backup" >"$T/own/kept.txt"
chown 4245:4245 "$T/own/kept.txt"
cp -a "$T/own/kept.txt" "$M/copied.txt"
rsync -a "$T/own/kept.txt" "$M/synced.txt"
for f in copied.txt synced.txt; do
  assert_eq "$(stat -c %u:%g "$C/$f")" "4245:4245" "owner on disk of $f"
done
before=$(sha "$C/players.sqlite")
chown 4242 "$M/players/celeron55" || fail "chown of a player failed"
assert_eq "$(stat -c %U "$M/players/celeron55")" "root" "owner of a player after chown"
chown nobody "$M/notes.txt"
denied nobody chown 4242 "$M/notes.txt"
assert_eq "$(stat -c %U "$C/notes.txt")" "nobody" "owner after a refused chown"
unmount_world "$M"
assert_eq "$(sha "$C/players.sqlite")" "$before" "players.sqlite after a chown"
echo "ok"
