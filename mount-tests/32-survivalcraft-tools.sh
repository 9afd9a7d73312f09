#!/bin/bash
# Survivalcraft with ordinary tools: ls, grep, cat, sed -i, vim -es (bare and with the user's
# defaults: swap file, backup), and rsync: a backup, incremental runs (nothing to send when
# nothing changed, even after a remount; only the edited chunk's files after an edit), and a
# restore through the mount that brings back the backed-up text. No tool temporary leaks.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/survivalcraft.sh"

M=$T/mnt
B=$T/backup
W=$(sc_copy "$REGIONS" w)
ls -AR "$W" >"$T/files.before"
mount_world "$W" "$M"

# ls, grep, cat.
assert_eq "$(ls "$M")" "$(printf 'Project.xml\nchunks\ncontainers\nplayers')" "top level"
assert_eq "$(ls "$M/chunks/11,-6")" "$(printf 'blocks.cubeset\nsurface.txt')" "chunk folder"
grep -rl -- "-- Cotton" "$M/chunks" >"$T/cotton"
[ -s "$T/cotton" ] || fail "grep found no Cotton"
grep -q "^$M/chunks/11,-6/blocks.cubeset$" "$T/cotton" || fail "grep missed chunk 11,-6"
assert_eq "$(cat "$M/chunks/11,-6/surface.txt" | grep -cv '^#')" "256" "surface lines"
assert_eq "$(grep -c 'Name="Count"' "$M/Project.xml")" "$(grep -c 'Name="Count"' "$W/Project.xml")" "Project.xml"

# rsync backup; a second run has nothing to send.
rsync -a "$M/" "$B/" || fail "rsync backup"
diff -r "$M" "$B" >/dev/null || fail "backup differs from the mount"
sent() { rsync -a --stats "$M/" "$B/" | sed -n 's/^Number of regular files transferred: //p'; }
assert_eq "$(sent)" "0" "files sent by an rsync without changes"

# rsync's quick check compares whole seconds: edit in a later second than the backup.
sleep 1
# sed -i and vim -es (bare and with defaults) on three files of one chunk and the inventory.
C=$M/chunks/12,-5
sed -i 's/"\(.\): 67: 0"/"\1: 3: 0"/' "$C/blocks.cubeset"
grep -qE '"[^"]: 3: 0"' "$C/blocks.cubeset" || fail "sed -i on blocks.cubeset"
grep -qE '"[^"]: 67: 0"' "$C/blocks.cubeset" && fail "sed -i on blocks.cubeset left Basalt"
vim -es -u NONE -c '%s/^0 0 \([0-9]*\) [0-9]* /0 0 \1 9 /' -c 'wq' "$C/surface.txt" </dev/null || fail "vim -es"
grep -q '^0 0 [0-9]* 9 ' "$C/surface.txt" || fail "vim -es edit lost"
vim -es -c '%s/^1 162 1 /1 162 2 /' -c 'wq' "$M/players/Geoffrey/inventory" </dev/null || fail "vim (defaults)"
assert_contains "$M/players/Geoffrey/inventory" "1 162 2 "
# An incremental run sends the edited chunk's two files, the inventory and Project.xml.
assert_eq "$(sent)" "4" "files sent after editing one chunk and one inventory"

# Unmount, remount: still nothing to send (mtimes are stable).
unmount_world "$M"
sc_check "$W"
mount_world "$W" "$M"
assert_eq "$(sent)" "0" "files sent after a remount"

# Restore an older state: back up, change things, restore through the mount.
rm -rf "$B"; rsync -a "$M/" "$B/"
sleep 1
sed -i 's/"\(.\): 3: 0"/"\1: 4: 0"/' "$M/chunks/11,-6/blocks.cubeset"
sed -i 's/^1 162 2 /1 162 9 /' "$M/players/Geoffrey/inventory"
sed -i 's/^0 0 \([0-9]*\) [0-9]* /0 0 \1 1 /' "$M/chunks/14,-4/surface.txt"
diff -r "$M" "$B" >/dev/null && fail "the edits did not show"
rsync -a "$B/" "$M/" || fail "rsync restore"
diff -r "$B" "$M" || fail "the restore did not bring the backup back"
unmount_world "$M"
sc_check "$W"
mount_world "$W" "$M"
diff -r "$B" "$M" || fail "the restored state did not survive a remount"
unmount_world "$M"

# No temporary of sed, vim or rsync reached the world folder.
ls -AR "$W" | diff "$T/files.before" - || fail "files appeared in the world folder"
echo "ok"
