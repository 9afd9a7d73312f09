#!/bin/bash
# Reading a generated world with real tools: ls -l, find, grep -r, cat, stat; exact sizes;
# block count; sizes and mtimes stable across a remount and across edits of other blocks;
# a change made by another writer of the database shows in the mount, and one made while
# nothing is mounted shows at the next mount (block summaries kept on disk).
. "$(dirname "$0")/lib.sh"

W=$(world w 2)
M=$T/mnt
mount_world "$W" "$M"

# ls -l: the world files and the blocks folder.
ls -l "$M" >"$T/ls"
for f in blocks world.mt env_meta.txt map_meta.txt; do
  grep -q " $f\$" "$T/ls" || fail "ls -l lacks $f"
done
assert_not_contains "$T/ls" "map.sqlite"
ls -l "$M/blocks/0,0,0" >"$T/lsb"
for f in block.txt light.txt meta nodes.cubeset objects.txt timers.txt; do
  grep -q " $f\$" "$T/lsb" || fail "ls -l blocks/0,0,0 lacks $f"
done

# find: every file of a block, the metadata of the chest and the sign.
(cd "$M" && find blocks/0,0,0 -type f | sort) >"$T/find"
for f in blocks/0,0,0/nodes.cubeset blocks/0,0,0/meta/1,10,1/inventory \
  blocks/0,0,0/meta/2,10,1/fields/text blocks/0,0,0/timers.txt; do
  grep -qxF -e "$f" "$T/find" || fail "find lacks $f"
done
[ "$(find "$M/blocks" -name nodes.cubeset | wc -l)" -eq "$(ls "$M/blocks" | wc -l)" ] \
  || fail "find does not see one nodes.cubeset per block"
# Block folders' inode numbers ascend in listing order (the database's key order): find
# visits a folder of more than 10,000 entries in inode order, and only a walk in key order is
# served by the reads ahead.
ls -i -U "$M/blocks" | awk '{print $1}' >"$T/inos"
[ "$(wc -l <"$T/inos")" -gt 1 ] || fail "ls -i -U blocks lists one block or none"
sort -n -c "$T/inos" 2>"$T/sort" || fail "block folders are not numbered in listing order: $(cat "$T/sort")"

# grep -rl finds the chest by its node name (dungeons may hold more chests).
(cd "$M" && grep -rl 'default:chest' blocks) >"$T/grep"
grep -qx "blocks/0,0,0/nodes.cubeset" "$T/grep" || fail "grep -rl default:chest misses block 0,0,0"
grep -v -q '/nodes.cubeset$' "$T/grep" && fail "grep -rl default:chest matched other files"
(cd "$M" && grep -rl 'default:diamond 42' blocks) >"$T/grep2"
assert_eq "$(cat "$T/grep2")" "blocks/0,0,0/meta/1,10,1/inventory" "grep -rl diamond"

# cat: the sign's text, the furnace timer.
assert_eq "$(cat "$M/blocks/0,0,0/meta/2,10,1/fields/text")" "$(printf 'hello from mkworld\nsecond line')" "sign text"
grep -q '^3,10,1 17.500 ' "$M/blocks/0,0,0/timers.txt" || fail "furnace timer not in timers.txt"

# stat: kinds and permissions.
assert_eq "$(stat -c '%F %a' "$M/blocks/0,0,0")" "directory 755" "stat of a block folder"
assert_eq "$(stat -c '%F %a' "$M/blocks/0,0,0/nodes.cubeset")" "regular file 644" "stat of a view"

# st_size is exact for every file of several blocks.
BLOCKS="0,0,0 -1,-1,-1 1,0,1 -2,1,-2 1,-2,0 0,1,-1"
n=0
for b in $BLOCKS; do
  [ -d "$M/blocks/$b" ] || fail "block $b missing"
  while IFS= read -r -d '' f; do
    s=$(stat -c %s "$f"); c=$(wc -c <"$f")
    [ "$s" -eq "$c" ] || fail "st_size $s != $c bytes read for $f"
    [ "$c" -gt 0 ] || fail "$f is empty"
    n=$((n + 1))
  done < <(find "$M/blocks/$b" -type f -print0)
done
[ "$n" -ge 30 ] || fail "only $n files checked"
echo "exact st_size for $n files"

# One folder per stored block.
assert_eq "$(ls "$M/blocks" | wc -l)" "$(sqlite3 "$W/map.sqlite" 'select count(*) from blocks')" "block count"

# Sizes and mtimes: identical across a remount.
snap() { (cd "$M/blocks" && for b in $BLOCKS; do find "./$b" -printf '%p %s %T@\n'; done | sort); }
snap >"$T/before"
unmount_world "$M"
mount_world "$W" "$M"
snap >"$T/after"
diff "$T/before" "$T/after" >/dev/null || { diff "$T/before" "$T/after" | head; fail "sizes/mtimes changed across a remount"; }

# After editing one file of one block, the other blocks and the block's other files keep their
# sizes and mtimes; the edited file and its block folder are newer.
TXT=$M/blocks/0,0,0/meta/2,10,1/fields/text
old=$(stat -c %Y "$TXT")
sleep 1
echo "edited sign" >"$TXT"
snap >"$T/edited"
grep -v '/meta/2,10,1/fields/text \|^./0,0,0 ' "$T/before" >"$T/b1"
grep -v '/meta/2,10,1/fields/text \|^./0,0,0 ' "$T/edited" >"$T/e1"
diff "$T/b1" "$T/e1" >/dev/null || { diff "$T/b1" "$T/e1" | head; fail "an edit changed other files' sizes/mtimes"; }
new=$(stat -c %Y "$TXT")
[ "$new" -gt "$old" ] || fail "edited file's mtime $new not newer than $old"
sleep 1.1 # folder attributes are cached by the kernel for 1 s
[ "$(stat -c %Y "$M/blocks/0,0,0")" -ge "$new" ] || fail "edited block folder's mtime not updated"
assert_eq "$(cat "$TXT")" "edited sign" "edited text"
# ... and the edit survives a remount with the same mtimes.
snap >"$T/edited"
unmount_world "$M"
mount_world "$W" "$M"
snap >"$T/edited2"
diff "$T/edited" "$T/edited2" >/dev/null || { diff "$T/edited" "$T/edited2" | head; fail "mtimes changed across a remount after an edit"; }

# Another writer copies block 0,0,0's blob onto 1,0,1 (pos = 1*2^24 + 1) while mounted.
src_nodes=$(cat "$M/blocks/0,0,0/nodes.cubeset")
dst_before=$(cat "$M/blocks/1,0,1/nodes.cubeset")
[ "$src_nodes" != "$dst_before" ] || fail "blocks 0,0,0 and 1,0,1 are already equal"
python3 - "$W/map.sqlite" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
blob = c.execute("select data from blocks where pos = 0").fetchone()[0]
with c:
    c.execute("replace into blocks (pos, data) values (?, ?)", (1 * 2**24 + 1, blob))
PY
seen=""
for _ in $(seq 1 30); do
  if [ "$(cat "$M/blocks/1,0,1/nodes.cubeset")" == "$src_nodes" ]; then seen=1; break; fi
  sleep 0.1
done
[ -n "$seen" ] || fail "another writer's change is not visible in the mount"
[ -d "$M/blocks/1,0,1/meta/1,10,1" ] || fail "copied block's metadata not visible"
assert_eq "$(cat "$M/blocks/1,0,1/meta/2,10,1/fields/text")" "edited sign" "copied sign text"
[ "$(stat -c %s "$M/blocks/1,0,1/nodes.cubeset")" -eq "$(wc -c <"$M/blocks/1,0,1/nodes.cubeset")" ] \
  || fail "stale st_size after an outside change"
snap >"$T/kept"
unmount_world "$M"

# Block summaries kept on disk (docs/semantics.md "Reading") serve the next mount, and only for the
# bytes they were made from: a block another writer changes while nothing is mounted shows
# its new files, with exact sizes, and the other blocks show what they showed.
# Unmount folds the sidecars' logs into them (docs/semantics.md "Reading"): no log is left beside.
for wal in "$WORLDFS_STATE_DIR"/*.sqlite-wal; do
  [ ! -s "$wal" ] || fail "$(stat -c %s "$wal") bytes of log left in $(basename "$wal") after unmount"
done
rows=$(sqlite3 "$WORLDFS_STATE_DIR"/*.summaries.sqlite 'select count(*) from summaries')
[ "$rows" -ge "$(echo $BLOCKS | wc -w)" ] || fail "only $rows block summaries kept on disk"
python3 - "$W/map.sqlite" <<'PY'
import sqlite3, sys
key = lambda x, y, z: z * 2**24 + y * 2**12 + x
c = sqlite3.connect(sys.argv[1])
blob = c.execute("select data from blocks where pos = ?", (key(0, 0, 0),)).fetchone()[0]
with c:
    c.execute("replace into blocks (pos, data) values (?, ?)", (key(-2, 1, -2), blob))
PY
mount_world "$W" "$M"
snap >"$T/kept2"
diff <(grep -v '^./-2,1,-2' "$T/kept") <(grep -v '^./-2,1,-2' "$T/kept2") >/dev/null \
  || { diff "$T/kept" "$T/kept2" | head; fail "unchanged blocks changed across a remount"; }
assert_eq "$(cat "$M/blocks/-2,1,-2/nodes.cubeset")" "$(cat "$M/blocks/0,0,0/nodes.cubeset")" \
  "a block changed while unmounted"
while IFS= read -r -d '' f; do
  [ "$(stat -c %s "$f")" -eq "$(wc -c <"$f")" ] || fail "stale st_size of $f after a change while unmounted"
done < <(find "$M/blocks/-2,1,-2" -type f -print0)
[ -d "$M/blocks/-2,1,-2/meta/1,10,1" ] || fail "the changed block's metadata is not listed"
unmount_world "$M"
echo "ok"
