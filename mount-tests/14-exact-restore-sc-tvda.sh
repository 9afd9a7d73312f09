#!/bin/bash
# Survivalcraft and Terrarum: an edit of one object makes the next incremental backup send
# exactly the files whose content changed (a Survivalcraft cell edit no longer re-sends the
# chunk's light.txt and surface.txt), and restoring the backup with `rsync -a` gives the world
# back so exactly that another `rsync -a --dry-run -i` lists nothing, also after a remount.
# A Survivalcraft world is also backed up, deleted and restored into a folder holding only
# the backup's project file (docs/survivalcraft.md), for each terrain store: Chunks.dat, and
# Regions/ with Project.xml (a fork's version worldfs does not know) or Project.json (2.4);
# Chunks.dat's chunks come back byte for byte.
# A Terrarum disk is restored over the same disk after changing it (a restore into a new
# disk made from the backup's header.txt is mount test 18).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/survivalcraft.sh"
. "$(dirname "$0")/tvda.sh"

# sent SRC DST: the regular files another `rsync -a` would send.
sent() { rsync -a -i --dry-run "$1" "$2" | grep -v '^\.d' | awk '{print $2}' | sort | tr '\n' ' '; }

# exact BACKUP MOUNT WHAT: nothing (times, sizes, modes, contents) differs.
exact() {
  rsync -a -i --dry-run "$1/" "$2/" >"$T/dry" || fail "$3: dry run failed"
  rsync -a -i --dry-run -c "$1/" "$2/" >>"$T/dry" || fail "$3: checksum dry run failed"
  if [ -s "$T/dry" ]; then head -20 "$T/dry"; fail "$3: $(wc -l <"$T/dry") entries differ"; fi
  diff -r "$1" "$2" >/dev/null || fail "$3: diff -r differs"
}

# --- Survivalcraft: a world with stored light (light.txt) ---
W=$(sc_unpack "$SCWORLD" sc)
M=$T/mnt
B=$T/backup-sc
mount_world "$W" "$M"
rsync -a "$M/" "$B/" || fail "Survivalcraft backup"
C=$M/chunks/223,418
grep -qE '"[^"]: 112: 0"' "$C/blocks.cubeset" || fail "no diamond ore definition in chunk 223,418"
sleep 1
sed -i 's/"\(.\): 112: 0"/"\1: 3: 0"/' "$C/blocks.cubeset" || fail "cell edit"
out=$(sent "$M/" "$B/")
echo "after a cell edit the backup sends: $out"
assert_eq "$out" "chunks/223,418/blocks.cubeset " "files a cell edit sends"
# A change of every view of a chunk and of an inventory, then the restore over it.
sed -i '0,/^0 0 /s/^0 0 \([0-9]*\) [0-9]* /0 0 \1 0 /' "$C/surface.txt" || fail "surface edit"
unmount_world "$M"
mount_world "$W" "$M"
rsync -a "$B/" "$M/" || fail "Survivalcraft restore"
exact "$B" "$M" "Survivalcraft restore"
unmount_world "$M"
mount_world "$W" "$M"
exact "$B" "$M" "Survivalcraft after a remount"
unmount_world "$M"
sc_check "$W"
echo "Survivalcraft: restore exact"

# --- Survivalcraft: each terrain store, restored into a folder holding only the project file ---
restore_empty() { # restore_empty WORLD NAME STORE: back up, delete, restore, compare, check
  local W=$1 B=$T/backup-$2 E=$T/empty-$2 before
  before=$(cd "$W" && ls -d $3)
  [ "$2" = chunks ] && chunk_records "$W/Chunks.dat" >"$T/records-before"
  mount_world "$W" "$M"
  rsync -a "$M/" "$B/" || fail "$2: backup"
  unmount_world "$M"
  rm -rf "$W"
  mkdir "$E"
  cp -p "$B"/Project.* "$E/" || fail "$2: no project file in the backup"
  mount_world "$E" "$M"
  rsync -a "$B/" "$M/" || fail "$2: restore into a folder holding only the project file"
  exact "$B" "$M" "$2 restore into an empty folder"
  unmount_world "$M"
  [ "$(cd "$E" && ls -d $3)" = "$before" ] || fail "$2: the restore made $(cd "$E" && ls -d $3), not $before"
  if [ "$2" = chunks ]; then
    # Every chunk's stored bytes come back, shaft bytes included (not only what views show).
    chunk_records "$E/Chunks.dat" | diff "$T/records-before" - >"$T/records.diff" ||
      fail "$2: $(grep -c '^>' "$T/records.diff") of $(wc -l <"$T/records-before") restored chunks differ in their stored bytes"
  fi
  mount_world "$E" "$M"
  exact "$B" "$M" "$2 restored, after a remount"
  unmount_world "$M"
  sc_check "$E"
  echo "$2: restored into an empty folder ($(sed -n 's/^\([0-9]*\) chunks checked.*/\1 chunks/p' "$T/check.out"))"
}
restore_empty "$(sc_unpack "$SCWORLD" sc-chunks)" chunks 'Chunks*.dat'
restore_empty "$(sc_copy "$REGIONS" sc-regions)" regions 'Regions/*'
restore_empty "$(sc_copy "$JSONWORLD" sc-json)" json 'Regions/*'

# --- Terrarum ---
D=$(fixture world)
B=$T/backup-tvda
mount_world "$D" "$M"
rsync -a "$M/" "$B/" || fail "Terrarum backup"
sleep 1
sed -i 's/: 77: /: basegame:1: /' "$M/chunks/wall/1,1.cubeset" || fail "Terrarum edit"
out=$(sent "$M/" "$B/")
echo "after a chunk edit the backup sends: $out"
assert_eq "$out" "chunks/wall/1,1.cubeset entries/4311744516 " "files a chunk edit sends"
unmount_world "$M"
mount_world "$D" "$M"
rsync -a "$B/" "$M/" || fail "Terrarum restore"
exact "$B" "$M" "Terrarum restore"
unmount_world "$M"
mount_world "$D" "$M"
exact "$B" "$M" "Terrarum after a remount"
unmount_world "$M"
check_ok "$D"
echo "ok"
