#!/bin/bash
# Every TVDA sample mounts and reads as tvda.md says; a mount that only reads leaves each disk
# byte-identical; info and check describe them.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/tvda.sh"

M=$T/mnt

# Clean player disk.
d=$(sample synthetic_tvda-v254_player-min_clean.tvda); before=$(sha "$d")
mount_world "$d" "$M"
ls -l "$M" > "$T/ls"
for n in savegameinfo.json loadOrder.txt actors entries; do assert_contains "$T/ls" "$n"; done
assert_not_contains "$T/ls" chunks
assert_eq "$(head -c 16 "$M/savegameinfo.json")" $'{\n  "genver": 1' "genver first"
assert_eq "$(cat "$M/loadOrder.txt")" "basegame 0.5.2"
assert_eq "$(ls "$M/entries" | sort | tr '\n' ' ')" "-1 -4 " "entries"
assert_eq "$(cat "$M/entries/-1")" '{"genver":1}' "raw entry"
assert_eq "$(stat -c %s "$M/entries/-4")" 14 "exact size"
assert_eq "$(stat -c %Y "$M/loadOrder.txt")" 1700000000 "entry mtime"
find "$M" -type f -exec cat {} + > /dev/null
unmount_world "$M"
assert_eq "$(sha "$d")" "$before" "clean disk unchanged"

# Dirty player disk: the discarded -4 is absent, the appended -1 wins.
d=$(sample synthetic_tvda-v254_player-min_dirty-after-skimmer.tvda); before=$(sha "$d")
mount_world "$d" "$M"
[ ! -e "$M/loadOrder.txt" ] || fail "discarded entry -4 is shown"
[ ! -e "$M/entries/-4" ] || fail "discarded entry -4 is in entries/"
grep -q '"genver": 2' "$M/savegameinfo.json" || fail "the last -1 does not win"
assert_eq "$(ls "$M/entries")" "-1"
unmount_world "$M"
assert_eq "$(sha "$d")" "$before" "dirty disk unchanged"
"$WORLDFS" check "$d" > "$T/check" || fail "check of the dirty sample failed"
assert_contains "$T/check" "disk CRC is stale"
assert_contains "$T/check" "0 broken; entry CRCs valid"
"$WORLDFS" info "$d" > "$T/info"
assert_contains "$T/info" "kind: player"
assert_contains "$T/info" "dead bytes: 110"

# World disk with zstd chunks: 2 x 2 chunks, layers 0-3 of chunk 0 and terrain of chunk 3.
d=$(sample synthetic_tvda-v254_world-min_zstd-chunks.tvda); before=$(sha "$d")
mount_world "$d" "$M"
assert_eq "$(ls "$M/chunks" | tr "\n" " ")" "fluid ores terrain wall " "layers"
assert_eq "$(ls "$M/chunks/terrain" | tr '\n' ' ')" "0,0.cubeset 1,1.cubeset " "terrain chunks"
for l in wall ores fluid; do assert_eq "$(ls "$M/chunks/$l")" "0,0.cubeset" "$l chunks"; done
f=$M/chunks/terrain/0,0.cubeset
assert_contains "$f" "CubesetFormatVersion = 1"
assert_contains "$f" "Size = { x = 90, y = 1, z = 90 }"
assert_eq "$(stat -c %s "$f")" "$(cat "$f" | wc -c)" "exact chunk size"
grep -q 'tileNumberToNameMap' "$M/savegameinfo.json" || fail "world JSON"
grep -rl 'basegame' "$M/chunks" > "$T/grep"
assert_eq "$(wc -l < "$T/grep")" 5 "grep -r finds every chunk"
assert_eq "$(head -c 4 "$M/entries/4294967296" | od -An -tx1 | tr -d ' ')" 28b52ffd "zstd payload"
unmount_world "$M"
assert_eq "$(sha "$d")" "$before" "world disk unchanged"
check_ok "$d"
"$WORLDFS" info "$d" > "$T/info"
assert_contains "$T/info" "kind: world"
assert_contains "$T/info" "chunks: 5"

# Read-only mount straight from the samples folder.
src=$TVDA_SAMPLES/synthetic_tvda-v254_world-min_zstd-chunks.tvda; before=$(sha "$src")
mount_world "$src" "$M" --read-only
cat "$M/chunks/fluid/0,0.cubeset" > /dev/null
if echo x 2>/dev/null > "$M/entries/-4"; then fail "read-only mount accepted a write"; fi
unmount_world "$M"
assert_eq "$(sha "$src")" "$before" "sample unchanged"
