#!/bin/bash
# Blocks of serialization version 25 (real ones, from the cornernote sample map) and 27 in an
# engine world, edited through the mount with the tools people use: sed on nodes.cubeset,
# cp -r to a new place, an rsync backup restored into another world. Each close succeeds,
# block.txt shows lighting_expired (no lighting_complete) for version 25, the blocks keep
# their versions, and the real engine loads every one of them and sees the edits.
. "$(dirname "$0")/lib.sh"

SAMPLE=$SHARED/samples/luanti/cornernote-mesecons-circuits/map.sqlite
[ -f "$SAMPLE" ] || fail "sample missing: $SAMPLE"
W=$(world w 2)
W2=$(world w2 2)
# A version-25 and a version-27 block of the sample, with the most distinct names, stored at
# free places of the engine world (block 20,0,20 and 21,0,20: nodes 320..351, 0..15, 320..335).
python3 - "$SAMPLE" "$W/map.sqlite" <<'PY'
import sqlite3, sys, zlib
src = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro&immutable=1", uri=True)
dst = sqlite3.connect(sys.argv[2])
def pos(x, y, z): return z * 0x1000000 + y * 0x1000 + x
for version, x in [(25, 20), (27, 21)]:
    best = None
    for (data,) in src.execute("SELECT data FROM blocks WHERE substr(data, 1, 1) = ?", (bytes([version]),)):
        if data[1] & 0x08 or len(data) < 60:
            continue  # not generated, or all air
        if best is None or len(data) > len(best):
            best = data
    dst.execute("INSERT INTO blocks (pos, data) VALUES (?, ?)", (pos(x, 0, 20), best))
dst.commit()
PY

M=$T/mnt
mount_world "$W" "$M"
for b in 20,0,20 21,0,20; do
  [ -d "$M/blocks/$b" ] || fail "block $b missing"
done
assert_contains "$M/blocks/20,0,20/block.txt" "version = 25"
assert_contains "$M/blocks/20,0,20/block.txt" "lighting_expired = false"
assert_not_contains "$M/blocks/20,0,20/block.txt" "lighting_complete"
assert_contains "$M/blocks/21,0,20/block.txt" "version = 27"
assert_contains "$M/blocks/21,0,20/block.txt" "lighting_complete"

# sed -i renames the first definition's node in both blocks.
for b in 20,0,20 21,0,20; do
  sed -i '0,/^\(\s*"[^"]\): [^:]*: \([0-9]*\)",$/s//\1: worldfs:edited: \2",/' "$M/blocks/$b/nodes.cubeset" \
    || fail "sed -i on block $b failed"
  assert_contains "$M/blocks/$b/nodes.cubeset" "worldfs:edited"
done
assert_contains "$M/blocks/20,0,20/block.txt" "lighting_expired = true"
assert_contains "$M/blocks/20,0,20/block.txt" "version = 25"
assert_contains "$M/blocks/21,0,20/block.txt" "lighting_complete = 0x0000"

# cp -r of the version-25 block to a new place.
cp -r "$M/blocks/20,0,20" "$M/blocks/22,0,20" || fail "cp -r of a version-25 block failed"
cmp "$M/blocks/20,0,20/nodes.cubeset" "$M/blocks/22,0,20/nodes.cubeset" || fail "the copy differs"
assert_contains "$M/blocks/22,0,20/block.txt" "version = 25"

# A backup with rsync, restored into another world.
rsync -a "$M/blocks/20,0,20/" "$T/backup/" || fail "rsync backup failed"
unmount_world "$M"
mount_world "$W2" "$T/mnt2"
mkdir "$T/mnt2/blocks/20,0,20"
rsync -a "$T/backup/" "$T/mnt2/blocks/20,0,20/" || fail "rsync restore into a new world failed"
cmp "$T/backup/nodes.cubeset" "$T/mnt2/blocks/20,0,20/nodes.cubeset" || fail "the restored block differs"
assert_contains "$T/mnt2/blocks/20,0,20/block.txt" "version = 25"
unmount_world "$T/mnt2"

for w in "$W" "$W2"; do
  sqlite3 "$w/map.sqlite" 'PRAGMA integrity_check' | grep -qx ok || fail "integrity_check $w"
done
[ "$(sqlite3 "$W/map.sqlite" "SELECT hex(substr(data,1,1)) FROM blocks WHERE pos IN (335544340, 335544341, 335544342) ORDER BY pos" | tr '\n' ' ')" = "19 1B 19 " ] \
  || fail "the blocks did not keep their versions"

# The engine loads all of them and sees the edited node name.
probe_area "$W" 320,0,320 367,15,335 >"$T/seen" || { cat "$T/seen"; fail "the engine could not load the edited blocks"; }
assert_not_contains "$T/seen" "PROBE FAILED"
n=$(awk '$1 == "count" && $2 == "worldfs:edited" { print $3 }' "$T/seen")
[ "${n:-0}" -gt 0 ] || { cat "$T/seen"; fail "the engine does not see the edit"; }
probe_area "$W2" 320,0,320 335,15,335 >"$T/seen2" || { cat "$T/seen2"; fail "the engine could not load the restored block"; }
assert_contains "$T/seen2" "count worldfs:edited"
echo "ok: version-25 and 27 blocks edited with sed, cp -r and rsync; the engine loads them ($n edited nodes)"
