#!/bin/bash
# Ordinary tools edit the mount: cp -r, rm -r, mkdir (block, meta folder), > and >>, sed -i,
# vim -es, nano (through tmux), python3; the results survive a remount and no editor or tool
# temporary file leaks into the world.
. "$(dirname "$0")/lib.sh"

W=$(world w 2)
M=$T/mnt
ls -A "$W" >"$T/files.before"
nblocks=$(sqlite3 "$W/map.sqlite" 'select count(*) from blocks')
mount_world "$W" "$M"
B=$M/blocks/0,0,0
F=$B/meta/2,10,1/fields
cp "$B/nodes.cubeset" "$T/nodes.orig"
cp "$B/meta/1,10,1/inventory" "$T/inv.orig"
# The meta folders after the edits below: those of the generated block (the engine's mapgen
# may add a dungeon chest of its own) and the two made below.
meta_after=$( (ls "$B/meta"; echo 4,4,4; echo 7,7,7) | sort -u | tr '\n' ' ')

# cp -r: a block to a new place, a node's metadata to another node; rm -r of both kinds.
cp -r "$B" "$M/blocks/9,0,9"
cp -r "$B/meta/1,10,1" "$B/meta/4,4,4"
cp -r "$B/meta/2,10,1" "$B/meta/6,6,6"
[ -f "$B/meta/6,6,6/fields/text" ] || fail "cp -r of a meta folder made no text field"
rm -r "$B/meta/6,6,6"
rm -r "$M/blocks/-2,-2,-2"
[ ! -e "$M/blocks/-2,-2,-2" ] || fail "rm -r left the block"
# mkdir: a new block, a new meta folder with a field written by redirection.
mkdir "$M/blocks/5,5,5"
mkdir "$B/meta/7,7,7"
echo "singleplayer" >"$B/meta/7,7,7/fields/owner"
# Redirections.
echo "Chest of worldfs" >"$B/meta/1,10,1/fields/infotext"
echo "third line" >>"$F/text"
# sed -i on a field and on nodes.cubeset (the chest's param2).
sed -i 's/hello/HELLO/' "$F/text"
sed -i 's/"\(.\): default:chest: 0"/"\1: default:chest: 2"/' "$B/nodes.cubeset"
# vim -es on a field and on nodes.cubeset (the sign's param2).
vim -es -u NONE -c '%s/mkworld/vim/' -c 'wq' "$F/infotext" </dev/null || fail "vim on a field failed"
vim -es -u NONE -c '%s/"\(.\): default:sign_wall_wood: 3"/"\1: default:sign_wall_wood: 4"/' -c 'wq' "$B/nodes.cubeset" </dev/null \
  || fail "vim on nodes.cubeset failed"
# vim with the user's defaults (swap file, backup copy) as well.
vim -es -c '%s/field\[/FIELD[/' -c 'wq' "$F/formspec" </dev/null || fail "vim (defaults) failed"
# nano, driven through tmux: type at the start of the timers file's first line, save, quit.
S=worldfs-nano-$$
tmux new-session -d -s "$S" -x 120 -y 40 "nano '$B/meta/1,10,1/fields/infotext'"
sleep 1
tmux send-keys -t "$S" "Big "
tmux send-keys -t "$S" C-o
sleep 0.5
tmux send-keys -t "$S" Enter
sleep 0.5
tmux send-keys -t "$S" C-x
for _ in $(seq 1 50); do tmux has-session -t "$S" 2>/dev/null || break; sleep 0.1; done
tmux kill-session -t "$S" 2>/dev/null && fail "nano did not exit"
# python3 writes: an inventory slot and a new field.
python3 - "$B/meta/1,10,1/inventory" "$B/meta/1,10,1/fields/owner" <<'PY'
import sys
inv, owner = sys.argv[1], sys.argv[2]
text = open(inv).read().replace("Item default:diamond 42", "Item default:diamond 41", 1)
with open(inv, "w") as f:
    f.write(text)
with open(owner, "w") as f:
    f.write("python\n")
PY

check() {
  assert_eq "$(cat "$F/text")" "$(printf 'HELLO from mkworld\nsecond line\nthird line')" "sign text"
  assert_eq "$(cat "$F/infotext")" '"hello from vim"' "sign infotext"
  assert_eq "$(cat "$F/formspec")" 'FIELD[text;;${text}]' "sign formspec"
  assert_eq "$(cat "$B/meta/1,10,1/fields/infotext")" "Big Chest of worldfs" "chest infotext"
  assert_eq "$(cat "$B/meta/1,10,1/fields/owner")" "python" "chest owner"
  grep -qx "Item default:diamond 41" "$B/meta/1,10,1/inventory" || fail "chest inventory"
  assert_eq "$(cat "$B/meta/7,7,7/fields/owner")" "singleplayer" "new meta folder's field"
  grep -qE '"[^"]: default:chest: 2"' "$B/nodes.cubeset" || fail "chest param2 (sed -i)"
  grep -qE '"[^"]: default:sign_wall_wood: 4"' "$B/nodes.cubeset" || fail "sign param2 (vim)"
  cmp -s "$T/nodes.orig" "$M/blocks/9,0,9/nodes.cubeset" || fail "copied block's nodes"
  cmp -s "$T/inv.orig" "$B/meta/4,4,4/inventory" || fail "copied meta folder's inventory"
  [ ! -e "$B/meta/6,6,6" ] || fail "removed meta folder is back"
  [ ! -e "$M/blocks/-2,-2,-2" ] || fail "removed block is back"
  [ -d "$M/blocks/5,5,5" ] || fail "made block missing"
  grep -qF '"a: air: 0"' "$M/blocks/5,5,5/nodes.cubeset" || fail "made block is not air"
  assert_eq "$(grep -c '^\s*"[^"]*: [^"]*: [0-9]*",' "$M/blocks/5,5,5/nodes.cubeset")" 1 "definitions in the made block"
  assert_eq "$(ls "$B/meta" | sort | tr '\n' ' ')" "$meta_after" "meta folders"
  assert_eq "$(ls -A "$F" | tr '\n' ' ')" "formspec infotext text " "sign fields"
  assert_eq "$(ls -A "$B/meta/1,10,1/fields" | tr '\n' ' ')" "infotext owner " "chest fields"
  if find "$M" \( -name 'sed*' -o -name '*.swp' -o -name '*.swx' -o -name '*~' -o -name '4913' -o -name '.*' \) | grep .; then
    fail "scratch files visible"
  fi
}
check
unmount_world "$M"
if grep -E "ERROR|WARN  worldfs" "$T/worldfs.log"; then fail "the daemon logged errors"; fi
ls -A "$W" >"$T/files.after"
diff "$T/files.before" "$T/files.after" || fail "files appeared in the world folder"
assert_eq "$(sqlite3 "$W/map.sqlite" 'select count(*) from blocks')" "$((nblocks + 1))" "block count"
sqlite3 "$W/map.sqlite" 'PRAGMA integrity_check' | grep -qx ok || fail "integrity_check"
mount_world "$W" "$M"
check
unmount_world "$M"
echo "ok"
