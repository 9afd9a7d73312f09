#!/bin/bash
# Survivalcraft: a read-only mount shows what another writer commits to the world underneath
# (here a second, read-write mount of the same folder), and keeps showing untouched chunks.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/survivalcraft.sh"

W=$(sc_copy "$REGIONS" w)
R=$T/ro
M=$T/rw
mount_world "$W" "$R" --read-only
cp "$R/chunks/12,-4/blocks.cubeset" "$T/before"
cp "$R/chunks/11,-6/surface.txt" "$T/other"
assert_contains "$R/players/Geoffrey/inventory" "1 162 1 "
mount_world "$W" "$M"
sed -i 's/"\(.\): 1: 0"/"\1: 4: 0"/' "$M/chunks/12,-4/blocks.cubeset"
grep -qE '"[^"]: 4: 0"' "$M/chunks/12,-4/blocks.cubeset" || fail "the edit does not show"
grep -qE '"[^"]: 1: 0"' "$M/chunks/12,-4/blocks.cubeset" && fail "the edit left Bedrock"
sed -i 's/^1 162 1 /1 162 6 /' "$M/players/Geoffrey/inventory"
unmount_world "$M"
sleep 1
cmp -s "$T/before" "$R/chunks/12,-4/blocks.cubeset" && fail "the read-only mount shows the old chunk"
grep -qE '"[^"]: 4: 0"' "$R/chunks/12,-4/blocks.cubeset" || fail "the read-only mount misses the edit"
assert_contains "$R/players/Geoffrey/inventory" "1 162 6 "
cmp -s "$T/other" "$R/chunks/11,-6/surface.txt" || fail "an untouched chunk changed"
if echo x >"$R/chunks/12,-4/surface.txt" 2>/dev/null; then fail "wrote through --read-only"; fi
unmount_world "$R"
sc_check "$W"
echo "ok"
