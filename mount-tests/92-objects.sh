#!/bin/bash
# Issue 38, objects by name: index/objects/NAME/ links the blocks holding static objects of
# entity NAME (the same blocks a walk of blocks/*/objects.txt finds); `rm -r
# index/objects/NAME` removes those objects from every block in one transaction, every
# other object and everything else of those blocks kept, blocks without them keeping their
# stored bytes; the engine loads the world after.
. "$(dirname "$0")/lib.sh"

W=$(world w 1)
M=$T/mnt

# The engine's world has dropped items (__builtin:item) near 1..3,12,3: in block 0,0,0 or,
# where they fell, below it. Plant one more in a block without any, and an object of
# another entity beside them.
mount_world "$W" "$M"
grep -l '^name = __builtin:item' "$M"/blocks/*/objects.txt | awk -F/ '{print $(NF-1)}' | sort >"$T/walk"
[ -s "$T/walk" ] || fail "no dropped item in the world"
A=$(head -1 "$T/walk")
B=0,3,0
grep -qxF -e "$B" "$T/walk" && fail "block $B holds a dropped item already"
cat >>"$M/blocks/$A/objects.txt" <<'TEXT'

[lua_entity]
pos = 5.0000, 12.0000, 5.0000
name = test:other
hp = 3
velocity = 0.000, 0.000, 0.000
yaw = 0.000
state = "kept as it is"
TEXT
cat >>"$M/blocks/$B/objects.txt" <<'TEXT'

[lua_entity]
pos = 4.0000, 2.0000, 4.0000
name = __builtin:item
hp = 1
velocity = 0.000, 0.000, 0.000
yaw = 0.000
state = "return {itemstring=\"default:stick 5\",age=1}"
TEXT
echo "$B" >>"$T/walk"
sort -o "$T/walk" "$T/walk"
assert_eq "$(ls "$M/index/objects" | tr '\n' ' ')" "__builtin:item test:other " "entities"
assert_eq "$(ls "$M/index/objects/__builtin:item" | sort)" "$(cat "$T/walk")" "blocks of dropped items"
assert_eq "$(readlink "$M/index/objects/test:other/$A")" "../../../blocks/$A" "link target"
mkdir "$T/kept"
while read -r b; do cp -a "$M/blocks/$b" "$T/kept/$b"; done <"$T/walk"
unmount_world "$M"

# Every stored blob, before.
blobs() {
  python3 - "$1" <<'PY'
import hashlib, sqlite3, sys
c = sqlite3.connect(sys.argv[1])
for pos, data in c.execute("SELECT pos, data FROM blocks ORDER BY pos"):
    print(pos, hashlib.sha256(data).hexdigest())
PY
}
blobs "$W/map.sqlite" >"$T/before"

mount_world "$W" "$M" -v
rm -r "$M/index/objects/__builtin:item" || fail "rm -r of the dropped items"
[ -e "$M/index/objects/__builtin:item" ] && fail "__builtin:item still listed"
assert_eq "$(ls "$M/index/objects" | tr '\n' ' ')" "test:other " "entities after the removal"
N=$(wc -l <"$T/walk")
grep -q "index: removed objects __builtin:item in $N blocks, committed in one transaction" "$T/worldfs.log" \
  || fail "not one transaction of $N blocks: $(grep 'index:' "$T/worldfs.log" | tail -3)"
if grep -q '__builtin:item' "$M"/blocks/*/objects.txt; then fail "a dropped item is left"; fi
grep -A6 '^name = test:other' "$M/blocks/$A/objects.txt" >"$T/other"
assert_contains "$T/other" 'state = "kept as it is"'
# Everything else of those blocks is as it was (objects.txt aside).
while read -r b; do
  diff -r --exclude=objects.txt "$M/blocks/$b" "$T/kept/$b" >"$T/diff" \
    || fail "block $b changed beyond its objects: $(head -5 "$T/diff")"
done <"$T/walk"
unmount_world "$M"

# Only those blocks' blobs changed.
blobs "$W/map.sqlite" >"$T/after"
{ diff "$T/before" "$T/after" || true; } | awk '/^>/ {print $2}' >"$T/changed"
python3 - "$T/changed" "$T/walk" <<'PY'
import sys
def key(b):
    x, y, z = (int(v) for v in b.split(","))
    return x + y * 4096 + z * 4096 * 4096
want = sorted(key(l.strip()) for l in open(sys.argv[2]))
got = sorted(int(l) for l in open(sys.argv[1]))
sys.exit(0 if got == want else f"changed blobs {got}, expected {want}")
PY
probe_area "$W" -16,-16,-16 31,31,31 "1,10,1" >"$T/probe" || fail "the engine does not load the world"
assert_contains "$T/probe" "count default:chest "
echo "ok"
