#!/bin/bash
# Kill sweeps under load (issue 35): with both cores kept busy by other processes, a restore
# and an editing loop of each game are killed (SIGKILL of the daemon) at moments spread over
# their whole run: the run is timed once, unkilled and under the same load, and the kills fall
# at k/(N+1) of it (N = KILL_SWEEP, 6 by default). After each kill the store passes `worldfs
# check` (SQLite's integrity check for Luanti), every object reads as it was or as written,
# never anything else, every write an fsync returned for is there, and a second pass completes
# the work exactly; for Luanti the engine loads the world at the end and sees the last write.
# The Luanti restore is swept in 17 and the renames under index/ in 82, both under load too.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/survivalcraft.sh"
. "$(dirname "$0")/tvda.sh"

M=$T/mnt
N=${KILL_SWEEP:-6}
busy_cpu 3

# exact BACKUP MOUNT WHAT: nothing (times, sizes, modes, contents) differs.
exact() {
  rsync -a -i --dry-run "$1/" "$2/" >"$T/dry" || fail "$3: dry run failed"
  rsync -a -i --dry-run -c "$1/" "$2/" >>"$T/dry" || fail "$3: checksum dry run failed"
  if [ -s "$T/dry" ]; then head -20 "$T/dry"; fail "$3: $(wc -l <"$T/dry") entries differ"; fi
}

# rendered FILE SED OLD NEW: FILE's text saved in OLD; the SED edit written to FILE and its
# text as the mount then renders it (definitions merged and sorted) saved in NEW; OLD written
# back, which must render as OLD again.
rendered() {
  cp "$1" "$3"
  sed "$2" "$3" >"$T/edited"
  cmp -s "$3" "$T/edited" && fail "the edit of $1 changes nothing"
  cp "$T/edited" "$1" || fail "writing the edit of $1"
  cp "$1" "$4"
  cp "$3" "$1" || fail "writing $1 back"
  cmp -s "$1" "$3" || fail "$1 renders otherwise after writing it back"
}

# sc_check_killed WORLD WHAT: `worldfs check` of a Survivalcraft world whose daemon was killed
# passes, or fails only on a commit the kill cut, naming its journal, which the next read-write
# mount finishes (the journal holds the whole commit); then the world is checked again.
sc_check_killed() {
  if "$WORLDFS" check "$1" >"$T/check.out" 2>&1; then return 0; fi
  grep -v -e "a commit cut by a crash is pending" -e "chunks checked, 1 broken objects" \
    -e " ok " -e "^Project" "$T/check.out" >"$T/other" || true
  grep -q "a commit cut by a crash is pending" "$T/check.out" && ! [ -s "$T/other" ] ||
    { cat "$T/check.out"; fail "$2: worldfs check fails"; }
  echo "$2: a cut commit is pending; a read-write mount finishes it"
  mount_world "$1" "$M"
  unmount_world "$M"
  sc_check "$1"
}

# --- Terrarum: a restore into a new disk made from the backup's header.txt -------------------
D0=$(fixture world)
BT=$T/backup-tvda
mount_world "$D0" "$M"
rsync -a "$M/" "$BT/" || fail "Terrarum backup"
unmount_world "$M"
new_disk() { rm -f "$1"; cp -p "$BT/header.txt" "$1"; }
restore_tvda() { rsync -a "$BT/" "$M/"; }
new_disk "$T/tvda-timed"
mount_world "$T/tvda-timed" "$M"
d=$(seconds restore_tvda)
unmount_world "$M"
echo "Terrarum restore: $d s unkilled; kills at $(moments "$d")"
for at in $(moments "$d"); do
  D=$T/tvda-$at
  new_disk "$D"
  mount_world "$D" "$M"
  killed_at "$at" restore_tvda
  "$WORLDFS" check "$D" >"$T/check.out" 2>&1 || { cat "$T/check.out"; fail "Terrarum restore killed $at s in: check fails"; }
  mount_world "$D" "$M"
  restore_tvda || fail "Terrarum restore killed $at s in: the second restore failed"
  exact "$BT" "$M" "Terrarum restore killed $at s in, run again"
  unmount_world "$M"
  check_ok "$D"
done

# --- Terrarum: an editing loop (a tile swapped back and forth, header renamed, fsynced) ------
D=$(fixture world)
TILE=chunks/wall/1,1.cubeset
mount_world "$D" "$M"
cp "$M/$TILE" "$T/tile.old"
rendered "$M/$TILE" 's/: 77: /: basegame:1: /' "$T/tile.old" "$T/tile.new"
unmount_world "$M"
edit_tvda() {
  local i
  for ((i = 1; i <= 12; i++)); do
    if ((i % 2)); then cp "$T/tile.new" "$M/$TILE"; else cp "$T/tile.old" "$M/$TILE"; fi || return 1
    sed -i "s/^name = .*/name = \"count $i\"/" "$M/header.txt" || return 1
    sync "$M/header.txt" || return 1
    echo "$i" >>"$T/counts"
  done
}
mount_world "$D" "$M"
d=$(seconds edit_tvda)
unmount_world "$M"
echo "Terrarum editing loop: $d s unkilled"
for at in $(moments "$d"); do
  rm -f "$T/counts"
  mount_world "$D" "$M"
  # Each round starts from the count the previous one (or the timed run) left.
  start=$(sed -n 's/^name = "count \([0-9]*\).*/\1/p' "$M/header.txt")
  killed_at "$at" edit_tvda
  "$WORLDFS" check "$D" >"$T/check.out" 2>&1 || { cat "$T/check.out"; fail "Terrarum edits killed $at s in: check fails"; }
  mount_world "$D" "$M"
  old_or_new "$M/$TILE" "$T/tile.old" "$T/tile.new" "Terrarum tile killed $at s in"
  grep '^name = ' "$M/header.txt" | sed 's/^name = "//' >"$T/name"
  fsynced_or_next "$T/name" "$T/counts" "Terrarum header killed $at s in" "$start"
  unmount_world "$M"
  check_ok "$D"
done

# --- Survivalcraft: a restore into a folder holding only the project file (region files) ----
W0=$(sc_copy "$REGIONS" sc)
BS=$T/backup-sc
mount_world "$W0" "$M"
rsync -a "$M/" "$BS/" || fail "Survivalcraft backup"
unmount_world "$M"
new_sc() { rm -rf "$1"; mkdir "$1"; cp -p "$BS"/Project.* "$1/"; }
restore_sc() { rsync -a "$BS/" "$M/"; }
new_sc "$T/sc-timed"
mount_world "$T/sc-timed" "$M"
d=$(seconds restore_sc)
unmount_world "$M"
echo "Survivalcraft restore: $d s unkilled"
for at in $(moments "$d"); do
  W=$T/sc-$at
  new_sc "$W"
  mount_world "$W" "$M"
  killed_at "$at" restore_sc
  sc_check_killed "$W" "Survivalcraft restore killed $at s in"
  mount_world "$W" "$M"
  restore_sc || fail "Survivalcraft restore killed $at s in: the second restore failed"
  exact "$BS" "$M" "Survivalcraft restore killed $at s in, run again"
  unmount_world "$M"
  sc_check "$W"
done

# --- Survivalcraft: an editing loop (a chunk's diamond ore swapped back and forth) -----------
W=$(sc_unpack "$SCWORLD" sc-edit)
C=chunks/223,418/blocks.cubeset
mount_world "$W" "$M"
cp "$M/$C" "$T/chunk.old"
rendered "$M/$C" 's/"\(.\): 112: 0"/"\1: 3: 0"/' "$T/chunk.old" "$T/chunk.new"
unmount_world "$M"
edit_sc() {
  local i
  for ((i = 1; i <= 8; i++)); do
    if ((i % 2)); then cp "$T/chunk.new" "$M/$C"; else cp "$T/chunk.old" "$M/$C"; fi || return 1
    sync "$M/$C" || return 1
  done
}
mount_world "$W" "$M"
d=$(seconds edit_sc)
unmount_world "$M"
echo "Survivalcraft editing loop: $d s unkilled"
for at in $(moments "$d"); do
  mount_world "$W" "$M"
  killed_at "$at" edit_sc
  sc_check_killed "$W" "Survivalcraft edits killed $at s in"
  mount_world "$W" "$M"
  old_or_new "$M/$C" "$T/chunk.old" "$T/chunk.new" "Survivalcraft chunk killed $at s in"
  unmount_world "$M"
done

# --- Luanti: an editing loop (a sign's text and a player's hp, each fsynced) -----------------
W=$(world lua-edit 2)
SIGN=blocks/0,0,0/meta/2,10,1/fields/text
P=players/celeron55
edit_luanti() {
  local i
  for ((i = 1; i <= 15; i++)); do
    printf 'count %d' "$i" >"$M/$SIGN" || return 1
    sed -i "s/^hp = .*/hp = $((i % 20 + 1))/" "$M/$P" || return 1
    sync "$M/$SIGN" || return 1
    echo "$i" >>"$T/counts"
  done
}
rm -f "$T/counts"
mount_world "$W" "$M"
d=$(seconds edit_luanti)
unmount_world "$M"
echo "Luanti editing loop: $d s unkilled"
for at in $(moments "$d"); do
  rm -f "$T/counts"
  mount_world "$W" "$M"
  start=$(sed -n 's/^count \([0-9]*\).*/\1/p' "$M/$SIGN")
  killed_at "$at" edit_luanti
  for db in "$W"/*.sqlite; do
    assert_eq "$(sqlite3 "$db" 'PRAGMA integrity_check')" "ok" "integrity of $db killed $at s in"
  done
  mount_world "$W" "$M"
  fsynced_or_next "$M/$SIGN" "$T/counts" "Luanti sign killed $at s in" "$start"
  hp=$(sed -n 's/^hp = //p' "$M/$P")
  [[ "$hp" =~ ^[0-9]+$ ]] && [ "$hp" -ge 1 ] && [ "$hp" -le 20 ] || fail "Luanti player killed $at s in: hp [$hp]"
  unmount_world "$M"
done
# The second pass: the loop run to its end; the engine loads the world and sees its last write.
rm -f "$T/counts"
mount_world "$W" "$M"
edit_luanti || fail "the Luanti editing loop after the kills failed"
unmount_world "$M"
probe "$W" >"$T/probe"
assert_not_contains "$T/probe" "PROBE FAILED"
assert_contains "$T/probe" "count 15"
echo "ok"
