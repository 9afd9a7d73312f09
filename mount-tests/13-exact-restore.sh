#!/bin/bash
# A backup restored with `rsync -a` (and `cp -a`) into a mount of an empty world gives the world
# back exactly on the first pass: every file of every block decoded-equal (block.txt flags and
# lighting_complete, light.txt included), a fresh backup of the mount identical to the backup
# (`rsync -a --dry-run -i` lists nothing: sizes, mtimes, modes), and the engine sees the same
# world. Then an edit of one field makes the next backup send exactly that file.
. "$(dirname "$0")/lib.sh"

W=$(world w 2)
M=$T/mnt
BK=$T/backup
mount_world "$W" "$M"
rsync -a "$M/" "$BK/" || fail "backup rsync failed"
unmount_world "$M"
nblocks=$(ls "$BK/blocks" | wc -l)
[ "$nblocks" -gt 100 ] || fail "only $nblocks blocks backed up"

# itemize SRC DST: what another rsync -a (-c: contents too) would change in DST.
itemize() { rsync -a --dry-run -i "$@"; }
check_restored() {
  local m=$1 what=$2
  itemize "$BK/" "$m/" >"$T/dry.$what" || fail "$what: dry run failed"
  if [ -s "$T/dry.$what" ]; then
    head -20 "$T/dry.$what"
    fail "$what: $(wc -l <"$T/dry.$what") entries differ from the backup after the first pass"
  fi
  itemize -c "$BK/" "$m/" >"$T/dryc.$what" || fail "$what: checksum dry run failed"
  if [ -s "$T/dryc.$what" ]; then
    head -20 "$T/dryc.$what"
    fail "$what: $(wc -l <"$T/dryc.$what") files' contents differ from the backup"
  fi
}

# empty_world NAME: an engine world whose blocks table is empty.
empty_world() {
  local e
  e=$(world "$1" 2)
  sqlite3 "$e/map.sqlite" 'DELETE FROM blocks; VACUUM;'
  echo "$e"
}

E=$(empty_world empty)
ME=$T/mnt-empty
mount_world "$E" "$ME"
assert_eq "$(ls "$ME/blocks" | wc -l)" 0 "blocks in the empty world"
rsync -a "$BK/" "$ME/" || fail "restore rsync failed"
check_restored "$ME" rsync
echo "rsync restore: $nblocks blocks, nothing differs"
unmount_world "$ME"
mount_world "$E" "$ME"
check_restored "$ME" remount
unmount_world "$ME"
probe "$W" >"$T/probe.orig"
probe "$E" >"$T/probe.restored"
grep -q '^checksum ' "$T/probe.orig" || fail "probe of the original world failed"
diff "$T/probe.orig" "$T/probe.restored" || fail "the engine tells the restored world from the original"

# The same with cp -a (creates files in place, in its own order) into another empty world.
C=$(empty_world emptycp)
MC=$T/mnt-cp
mount_world "$C" "$MC"
cp -a "$BK/." "$MC/" || fail "cp -a restore failed"
check_restored "$MC" cp
echo "cp -a restore: nothing differs"

# One edited field: the next backup sends exactly that file.
TEXT=$(printf 'HELLO from mkworld\nsecond line')
echo "$TEXT" >"$MC/blocks/0,0,0/meta/2,10,1/fields/text"
rsync -a -i --dry-run "$MC/" "$BK/" >"$T/edit.items" || fail "incremental dry run failed"
cat "$T/edit.items"
# The block folder keeps the time the restore set on it (a write through the mount does not
# move it, as rewriting a file does not move its folder's time on a disk).
assert_eq "$(grep -v '^\.d' "$T/edit.items" | awk '{print $2}')" "blocks/0,0,0/meta/2,10,1/fields/text" "files an edit of one field sends"
assert_eq "$(grep '^\.d' "$T/edit.items" | awk '{print $2}')" "" "folders an edit of one field re-times"
unmount_world "$MC"
echo "ok"
