#!/bin/bash
# Bad input through a mounted TVDA disk (invalid JSON, a tile name missing from the map, a
# truncated chunk, an inventory quantity that is no number) fails the writing command's
# close, leaves the disk byte-identical, and keeps the rejected text readable to fix.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/tvda.sh"

M=$T/mnt
d=$(sample synthetic_tvda-v254_world-min_zstd-chunks.tvda)
before=$(sha "$d")
mount_world "$d" "$M"
f=$M/chunks/terrain/0,0.cubeset
cp "$f" "$T/chunk"

# Invalid JSON written by cp (which reports a failed close).
printf '{\n  "genver": 1,\n  oops\n}\n' > "$T/bad.json"
cp "$T/bad.json" "$M/savegameinfo.json" 2> "$T/err" && fail "cp of invalid JSON succeeded"
cmp -s "$M/savegameinfo.json" "$T/bad.json" || fail "rejected text is not kept readable"
grep -q "line 3" "$T/worldfs.log" || fail "the log does not give the line"
assert_eq "$(sha "$d")" "$before" "invalid JSON changed the disk"

# A tile name missing from the map, via sed -i (rename fails, sed exits non-zero).
sed -i 's/"\(.\): basegame:0: 0"/"\1: basegame:nosuchtile: 0"/' "$f" 2> "$T/err" && fail "sed -i with an unknown tile succeeded"
assert_eq "$(sha "$d")" "$before" "unknown tile changed the disk"
grep -q "nosuchtile" "$T/worldfs.log" || fail "the log does not name the tile"

# A truncated chunk, via python (close raises).
python3 - "$T/chunk" "$f" <<'PY' && fail "python write of a truncated chunk succeeded"
import sys
data = open(sys.argv[1], 'rb').read()
with open(sys.argv[2], 'wb') as out:
    out.write(data[: len(data) // 2])
PY
assert_eq "$(sha "$d")" "$before" "truncated chunk changed the disk"

# dd with fsync reports the failure at fsync.
head -c 100 "$T/chunk" | dd of="$M/chunks/wall/0,0.cubeset" conv=fsync status=none 2> /dev/null && fail "dd conv=fsync of a truncated chunk succeeded"
assert_eq "$(sha "$d")" "$before" "dd changed the disk"

# The pending texts stay readable until fixed; restoring the good text clears them.
cmp -s "$f" "$T/chunk" && fail "the rejected chunk text is not shown"
cp "$T/chunk" "$f" || fail "restoring the original chunk text failed"
cmp "$f" "$T/chunk" || fail "restored chunk differs"
# Removing a pending text discards only the text: the stored chunk shows again.
w=$M/chunks/wall/0,0.cubeset
[ "$(stat -c %s "$w")" = 100 ] || fail "the rejected wall text is not shown"
rm "$w" || fail "rm of the pending wall text failed"
[ "$(stat -c %s "$w")" != 100 ] || fail "the stored wall chunk does not show again"
rm "$M/savegameinfo.json" || fail "rm of the pending savegameinfo.json failed"
grep -q genver "$M/savegameinfo.json" || fail "the stored savegameinfo.json does not show again"
unmount_world "$M"
assert_eq "$(sha "$d")" "$before" "bad input left a trace on the disk"
check_ok "$d"

# A player's inventory with a quantity that is no number.
p=$(fixture player)
before=$(sha "$p")
mount_world "$p" "$M"
printf 'basegame:1 lots\n' > "$T/inv"
cp "$T/inv" "$M/inventory" && fail "cp of a bad inventory succeeded"
rm "$M/inventory" || fail "rm of the pending inventory failed"
unmount_world "$M"
assert_eq "$(sha "$p")" "$before" "bad inventory changed the disk"
