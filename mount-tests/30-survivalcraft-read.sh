#!/bin/bash
# Survivalcraft: every sample world mounts (region folders read-write, the .scworld read-only,
# a packed world without --read-only refused with how to unpack it), every chunk is readable,
# listings match `worldfs info`, and a mount/unmount without edits leaves every byte as it was.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/survivalcraft.sh"

M=$T/mnt

# A .scworld: refused without --read-only, with the way to unpack it.
mkdir -p "$M"
if "$WORLDFS" mount "$SCWORLD" "$M" 2>"$T/err"; then fail "a .scworld mounted read-write"; fi
assert_contains "$T/err" "--read-only"
assert_contains "$T/err" "unzip"
mount_world "$SCWORLD" "$M" --read-only
n=$("$WORLDFS" info "$SCWORLD" | sed -n 's/^chunks: //p')
assert_eq "$(ls "$M/chunks" | wc -l)" "$n" "chunk folders of the .scworld"
assert_eq "$n" "132" "chunks in Ardoitia"
for c in "$M"/chunks/*; do
  cat "$c/blocks.cubeset" "$c/light.txt" "$c/surface.txt" >/dev/null || fail "reading $c"
  [ "$(stat -c %s "$c/blocks.cubeset")" = "$(cat "$c/blocks.cubeset" | wc -c)" ] || fail "st_size of $c/blocks.cubeset"
done
assert_contains "$M/players/Player/inventory" "[Inventory]"
assert_contains "$M/containers/3967,65,6695/inventory" "[Chest]"
cmp -s "$M/Project.xml" <(unzip -p "$SCWORLD" Project.xml) || fail "Project.xml differs from the archive's"
if echo x >"$M/Project.xml" 2>/dev/null; then fail "wrote into a .scworld"; fi
unmount_world "$M"

# Region worlds (a Project.xml one and a Project.json one): mount, read all, no-op unmount.
for sample in "$REGIONS" "$JSONWORLD"; do
  W=$(sc_copy "$sample" w)
  tree_sha "$W" >"$T/before"
  start=$(date +%s%N)
  mount_world "$W" "$M"
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  echo "$(basename "$sample"): mounted in ${ms} ms"
  n=$("$WORLDFS" info "$W" | sed -n 's/^chunks: //p')
  assert_eq "$(ls "$M/chunks" | wc -l)" "$n" "chunk folders of $(basename "$sample")"
  for c in "$M"/chunks/*; do
    [ -e "$c/light.txt" ] && fail "a region chunk shows light.txt"
    cat "$c/blocks.cubeset" "$c/surface.txt" >/dev/null || fail "reading $c"
  done
  assert_eq "$(cat "$M"/chunks/*/blocks.cubeset | grep -c "Level 255")" "$n" "chunks 256 high"
  ls -lR "$M" >/dev/null
  unmount_world "$M"
  tree_sha "$W" | diff "$T/before" - || fail "a no-op mount changed $(basename "$sample")"
  sc_check "$W"
done
[ -e "$M/Project.xml" ] && fail "left mounted"
echo "ok"
