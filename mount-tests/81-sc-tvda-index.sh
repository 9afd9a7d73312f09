#!/bin/bash
# Issue 13, the index/ tree of Survivalcraft and Terrarum through a real mount: `ls`, `cat`,
# `awk` and `grep -l` through the links see what a walk of chunks/ and of the inventory files
# finds; `mv` of a block, tile or item renames it everywhere (all changed chunks, regions or
# entries in one commit), a bad name changes nothing, and the world still checks.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/survivalcraft.sh"
. "$(dirname "$0")/tvda.sh"

M=$T/mnt

# ---- Survivalcraft: a 2.3 region world (two region files) ----
W=$(sc_copy "$REGIONS" sc)
mount_world "$W" "$M" -v
ls "$M" | grep -qx index && fail "index/ listed at the top of the mount"
assert_eq "$(ls "$M/index" | tr '\n' ' ')" "blocks items " "index/ folders"

# blocks/ID: the links are exactly the chunks whose blocks.cubeset defines block ID.
walk_blocks() {  # ID: the chunk folders whose blocks.cubeset defines block ID
  grep -lE "^[[:space:]]*\".*: $1: [0-9]+\"," "$M"/chunks/*/blocks.cubeset | awk -F/ '{print $(NF-1)}' | sort
}
A=$(for id in $(ls "$M/index/blocks"); do echo "$(ls "$M/index/blocks/$id" | wc -l) $id"; done | sort -n | tail -1 | cut -d' ' -f2)
ls "$M/index/blocks/$A" | sort >"$T/a"
[ "$(wc -l <"$T/a")" -gt 1 ] || fail "block $A is in one chunk only"
walk_blocks "$A" | cmp -s - "$T/a" || fail "chunks holding block $A differ from the walk"
[ -L "$M/index/blocks/$A/$(head -1 "$T/a")" ] || fail "not a link"
# grep -l through the links reads the chunks' own files.
assert_eq "$(grep -l . "$M"/index/blocks/"$A"/*/surface.txt | wc -l)" "$(wc -l <"$T/a")" "surface files through the links"
# The chunks holding it lie in both region files: the rename below commits both at once.
assert_eq "$(ls "$M/index/blocks/$A/" | awk -F, 'function r(v) { return (v - ((v % 16) + 16) % 16) / 16 }
  { print r($1) "," r($2) }' | sort -u | wc -l)" "2" "region files holding block $A"

# items/ID: one line per slot; awk sums what the inventory files say.
ITEM=$(ls "$M/index/items" | head -1)
[ -n "$ITEM" ] || fail "no item"
SUM=$(awk '{s+=$4} END {print s}' "$M/index/items/$ITEM")
WALK=$({ cat "$M"/players/*/inventory "$M"/containers/*/inventory 2>/dev/null || true; } \
  | awk -v id="$ITEM" '$1 ~ /^[0-9]+$/ && $2 % 1024 == id {s+=$3} END {print s+0}')
assert_eq "$SUM" "$WALK" "count of item $ITEM"
while read -r path comp slot count; do
  grep -q "^$slot [0-9-]* $count " "$M/$path" || fail "$path has no slot $slot of $count"
done <"$M/index/items/$ITEM"

# Renames: a block over every chunk (both region files at once), then an item.
B=1000
[ -e "$M/index/blocks/$B" ] && fail "block $B already used"
mv "$M/index/blocks/$A" "$M/index/blocks/Chest" 2>/dev/null && fail "a block name was taken as an id"
mv "$M/index/blocks/$A" "$M/index/blocks/1024" 2>/dev/null && fail "an id over the format's was taken"
mv "$M/index/blocks/$A" "$M/index/blocks/$B" || fail "mv of a block"
[ -e "$M/index/blocks/$A" ] && fail "block $A still listed"
ls "$M/index/blocks/$B" | sort | cmp -s - "$T/a" || fail "block $B is not where $A was"
[ -z "$(walk_blocks "$A")" ] || fail "a chunk still holds block $A"
walk_blocks "$B" | cmp -s - "$T/a" || fail "the walk does not find block $B where $A was"
grep -q "index: renamed block $A to $B" "$T/worldfs.log" || fail "no progress in the log"
[ -e "$W/Regions.worldfs-journal" ] && fail "the journal was left behind"

ITEMS=$(ls "$M/index/items")
NEWITEM=$(seq 1 1023 | grep -vxF -f <(echo "$ITEMS") | head -1)
COUNT=$(awk '{s+=$4} END {print s}' "$M/index/items/$ITEM")
mv "$M/index/items/$ITEM" "$M/index/items/x" 2>/dev/null && fail "a bad item id was taken"
mv "$M/index/items/$ITEM" "$M/index/items/$NEWITEM" || fail "mv of an item"
[ -e "$M/index/items/$ITEM" ] && fail "item $ITEM still listed"
assert_eq "$(awk '{s+=$4} END {print s}' "$M/index/items/$NEWITEM")" "$COUNT" "count of item $NEWITEM"
# Answers are read-only files (the kernel refuses to open them for writing, but to root).
assert_eq "$(stat -c %a "$M/index/items/$NEWITEM")" "444" "mode of an answer file"
unmount_world "$M"
sc_check "$W"
mount_world "$W" "$M"
[ -e "$M/index/blocks/$A" ] && fail "block $A back after a remount"
ls "$M/index/blocks/$B" | sort | cmp -s - "$T/a" || fail "block $B lost after a remount"
unmount_world "$M"

# ---- Terrarum: a world disk (4 x 3 chunks in every layer) and a player disk ----
D=$(fixture world)
mount_world "$D" "$M" -v
ls "$M" | grep -qx index && fail "index/ listed at the top of the disk"
assert_eq "$(ls "$M/index" | tr '\n' ' ')" "items tiles " "index/ folders of a world disk"
walk_tiles() {  # NAME: LAYER,FILE of every chunk file defining tile NAME
  grep -lF ": $1: " "$M"/chunks/*/*.cubeset | awk -F/ '{print $(NF-1) "," $NF}' | sort
}
ls "$M/index/tiles/basegame:1" | sort >"$T/t1"
[ -s "$T/t1" ] || fail "no chunk holds basegame:1"
walk_tiles basegame:1 | cmp -s - "$T/t1" || fail "chunks holding basegame:1 differ from the walk"
assert_eq "$(cat "$M"/index/tiles/basegame:1/* | grep -c '^Cubeset =')" "$(wc -l <"$T/t1")" "cat through the links"
walk_tiles basegame:2 >"$T/t2"
mv "$M/index/tiles/basegame:2" "$M/index/tiles/nope:tile" 2>/dev/null && fail "a tile outside the map was taken"
mv "$M/index/tiles/basegame:2" "$M/index/tiles/basegame:1" || fail "mv of a tile onto an existing one"
[ -e "$M/index/tiles/basegame:2" ] && fail "basegame:2 still listed"
[ -z "$(walk_tiles basegame:2)" ] || fail "a chunk still holds basegame:2"
sort -u "$T/t1" "$T/t2" | cmp -s - <(ls "$M/index/tiles/basegame:1" | sort) || fail "basegame:1 is not where both were"
walk_tiles basegame:1 | cmp -s - <(ls "$M/index/tiles/basegame:1" | sort) || fail "walk after the rename"
grep -q "index: renamed tile basegame:2 to basegame:1" "$T/worldfs.log" || fail "no progress in the log"
unmount_world "$M"
check_ok "$D"

P=$(fixture player)
mount_world "$P" "$M"
assert_eq "$(ls "$M/index")" "items" "a player disk has no tiles"
assert_eq "$(cat "$M/index/items/basegame:1")" "inventory itemList 1 10" "the player's item"
assert_eq "$(awk '{s+=$4} END {print s}' "$M"/index/items/*)" "$(grep -v '^#' "$M/inventory" | awk '{s+=$2} END {print s}')" "all items"
mv "$M/index/items/basegame:1" "$M/index/items/bad name" 2>/dev/null && fail "an item id with a space was taken"
mv "$M/index/items/basegame:1" "$M/index/items/basegame:9" || fail "mv of an item"
assert_contains "$M/inventory" "basegame:9 10"
assert_not_contains "$M/inventory" "basegame:1 "
unmount_world "$M"
check_ok "$P"
echo ok
