#!/bin/bash
# A hostile TVDA disk (decompression bombs, a JSON of a million tiny values, JSON nested
# 100 000 deep, chunks outside the world or of no codec, a torn entry claiming a huge size),
# mounted read-only and read-write with --cache-size 4 and read whole with find and cat: the
# daemon survives under cache size + 64 MiB of peak RSS, only the bad files fail, and the
# disk stays byte-identical. A disk damaged inside mounts read-only and says why.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/tvda.sh"
. "$(dirname "$0")/hostile.sh"

d=$T/hostile.tvda
hostile tvda "$d"
read_all "$d" "$T/ro" --read-only
read_all "$d" "$T/rw"
for bad in thumbnail.tga actors/268435459.json; do
  mount_world "$d" "$T/m"
  cat "$T/m/$bad" > /dev/null 2>&1 && fail "$bad read"
  unmount_world "$T/m"
done
grep -q "decompresses to more than" "$T/worldfs.log" || fail "the log does not say why the bomb failed"

# One corrupt byte inside the disk (the root's child count): damage, not a torn append.
w=$(sample synthetic_tvda-v254_world-min_zstd-chunks.tvda)
printf '\x01' | dd of="$w" bs=1 seek=336 conv=notrunc status=none
before=$(sha "$w")
"$WORLDFS" check "$w" > "$T/check.out" 2>&1 && fail "check passed on a damaged disk"
assert_contains "$T/check.out" "damage:"
mount_world "$w" "$T/dmg"
[ "$(ls "$T/dmg/entries" | wc -l)" -eq 7 ] || fail "the entries after the damage are not shown"
cat "$T/dmg/loadOrder.txt" > /dev/null || fail "an intact entry does not read"
echo "basegame 9" > "$T/dmg/loadOrder.txt" 2> /dev/null && fail "a write to a damaged disk succeeded"
grep -q "mounted read-only" "$T/worldfs.log" || fail "the log does not say why the mount is read-only"
unmount_world "$T/dmg"
assert_eq "$(sha "$w")" "$before" "the damaged disk changed"
