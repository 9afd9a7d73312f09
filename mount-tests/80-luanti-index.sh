#!/bin/bash
# Issue 13, the index/ tree through a real mount: `ls`, `cat`, `awk` and `grep -l` over
# index/nodes/NAME/*/meta/*/inventory see what a walk of blocks/ finds; a block that does
# not decode is in index/broken/, shows error.txt, and `rm -r` deletes it; `mv` of a node or
# an item folder renames it everywhere (the engine sees the new node).
. "$(dirname "$0")/lib.sh"

W=$(world w 1)
M=$T/mnt
mount_world "$W" "$M" -v

ls "$M/index" >"$T/top"
assert_eq "$(tr '\n' ' ' <"$T/top")" "broken fields items nodes objects " "index/ folders"

# Chests: the links of index/nodes/default:chest are exactly the blocks whose nodes.cubeset
# names a chest (a walk of blocks/).
ls "$M/index/nodes/default:chest" >"$T/chests"
[ -s "$T/chests" ] || fail "no chest block"
grep -l 'default:chest' "$M"/blocks/*/nodes.cubeset | awk -F/ '{print $(NF-1)}' | sort >"$T/walk"
sort "$T/chests" | cmp -s - "$T/walk" || fail "chest blocks differ: $(cat "$T/chests") vs $(cat "$T/walk")"
[ -L "$M/index/nodes/default:chest/$(head -1 "$T/chests")" ] || fail "not a link"

# grep -l through the links reads the chest inventories.
grep -l . "$M"/index/nodes/default:chest/*/meta/*/inventory >"$T/invs" || true
[ -s "$T/invs" ] || fail "no chest inventory through the links"

# items: one line per slot; awk sums the counts; the lines name real inventories.
ITEM=$(ls "$M/index/items" | head -1)
[ -n "$ITEM" ] || fail "no item"
SUM=$(awk '{s+=$4} END {print s}' "$M/index/items/$ITEM")
[ "$SUM" -gt 0 ] || fail "no count for $ITEM"
while read -r path list slot count; do
  [ -e "$M/$path" ] || fail "$path of $ITEM does not exist"
done <"$M/index/items/$ITEM"

# Renames: mv of a node onto a name a block already holds (mv asks for B/A, the same
# rename), then of an item over an existing item file; the walks see the new names. The
# engine's world is random: stone when it holds any (a world made in the sea may hold none),
# else another node it holds.
TARGET=default:stone
[ -d "$M/index/nodes/$TARGET" ] || TARGET=$(ls "$M/index/nodes" | grep -vxE 'air|ignore|default:chest' | head -1)
[ -n "$TARGET" ] || fail "no node besides the chest: $(ls "$M/index/nodes" | tr '\n' ' ')"
TARGET_BEFORE=$(ls "$M/index/nodes/$TARGET" | wc -l)
# The kernel keeps the attributes of the files the grep above read: after the rename, a
# stat of a changed block's file shows its new time at once (an incremental rsync compares
# nothing else).
CHEST=$M/blocks/$(head -1 "$T/walk")/nodes.cubeset
BEFORE=$(stat -c '%y %s' "$CHEST")
# A view the rename leaves as it was (light.txt), read before it: the kernel keeps it
# (the rename tells it of the changed views only), and what it keeps is what a fresh
# mount shows (checked after the remount below).
LIGHT=$(dirname "$CHEST")/light.txt
LIGHT_BEFORE=$(stat -c '%y %s' "$LIGHT"; md5sum <"$LIGHT")
mv "$M/index/nodes/default:chest" "$M/index/nodes/$TARGET" || fail "mv of a node"
[ "$(stat -c '%y %s' "$CHEST")" != "$BEFORE" ] || fail "$CHEST: the kernel kept its time from before the rename ($BEFORE)"
assert_eq "$(stat -c '%y %s' "$LIGHT"; md5sum <"$LIGHT")" "$LIGHT_BEFORE" "$LIGHT after a node rename"
[ -e "$M/index/nodes/default:chest" ] && fail "default:chest still listed"
if grep -l 'default:chest' "$M"/blocks/*/nodes.cubeset; then fail "a block still holds a chest"; fi
ls "$M/index/nodes/$TARGET" >"$T/target"
while read -r b; do grep -qxF -e "$b" "$T/target" || fail "block $b of a chest holds no $TARGET"; done <"$T/walk"
[ "$(wc -l <"$T/target")" -ge "$TARGET_BEFORE" ] || fail "$TARGET blocks lost"
mv "$M/index/nodes/$TARGET" "$M/index/nodes/bad name" 2>/dev/null && fail "a bad node name was taken"
grep -q "index: renamed node default:chest to $TARGET" "$T/worldfs.log" || fail "no progress in the log"

ITEMS=$(ls "$M/index/items")
# A: the first item a block's inventory holds; B: another.
A=$(cd "$M/index/items" && grep -l '^blocks/' $ITEMS | head -1)
[ -n "$A" ] || fail "no item in a block's inventory"
B=$(echo "$ITEMS" | grep -vxF -e "$A" | head -1)
[ -n "$B" ] || fail "fewer than two items"
SUM=$(cat "$M/index/items/$A" "$M/index/items/$B" | awk '{s+=$4} END {print s}')
# An inventory holding the item, read (and its attributes kept) before the rename, shows
# the renamed item and its new time at once after it.
INV=$M/$(awk '$1 ~ /^blocks\// {print $1; exit}' "$M/index/items/$A")
grep -q . "$INV" || fail "$INV: empty"
BEFORE=$(stat -c '%y %s' "$INV")
mv "$M/index/items/$A" "$M/index/items/$B" || fail "mv of an item"
[ "$(stat -c '%y %s' "$INV")" != "$BEFORE" ] || fail "$INV: the kernel kept its time from before the rename ($BEFORE)"
grep -qF "$B" "$INV" || fail "$INV: no $B after the rename: $(cat "$INV")"
[ -e "$M/index/items/$A" ] && fail "$A still listed"
assert_eq "$(awk '{s+=$4} END {print s}' "$M/index/items/$B")" "$SUM" "count of $B after the rename"
# What the kernel shows of the chest's block after both renames, which a fresh mount
# must show too.
shown() { (cd "$(dirname "$CHEST")" && stat -c '%n %y %s' block.txt light.txt nodes.cubeset . && md5sum block.txt light.txt nodes.cubeset); }
KEPT=$(shown)

# A corrupt block: listed in broken/, error.txt readable, rm -r deletes it.
unmount_world "$M"
mount_world "$W" "$M"
assert_eq "$(shown)" "$KEPT" "the chest's block after a remount"
unmount_world "$M"
probe_area "$W" -32,-32,-32 31,31,31 "0,0,0" >"$T/probe0" || fail "the engine does not load the renamed world"
grep -q "^count $TARGET " "$T/probe0" || fail "the engine sees no $TARGET"
if grep -q "^count default:chest " "$T/probe0"; then fail "the engine still sees chests"; fi
python3 - "$W/map.sqlite" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
c.execute("UPDATE blocks SET data = x'1d28b52ffd010203' WHERE pos = 0")
c.commit()
PY
mount_world "$W" "$M"
assert_eq "$(ls "$M/index/broken")" "0,0,0" "broken blocks"
assert_eq "$(ls "$M/blocks/0,0,0")" "error.txt" "files of a broken block"
grep -q zstd "$M/index/broken/0,0,0/error.txt" || fail "no reason: $(cat "$M/blocks/0,0,0/error.txt")"
rm -r "$M/blocks/0,0,0" || fail "rm -r of the broken block"
[ -e "$M/blocks/0,0,0" ] && fail "the broken block is still there"
assert_eq "$(ls "$M/index/broken" | wc -l)" "0" "broken after rm -r"
unmount_world "$M"
probe_area "$W" 0,0,0 15,15,15 "0,0,0" >"$T/probe" || fail "the engine does not load the world"
echo ok
