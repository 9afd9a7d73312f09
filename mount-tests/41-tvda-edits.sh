#!/bin/bash
# Edits through a mounted TVDA disk with ordinary tools (sed -i, vim -es, cp, shell
# redirection, python) round-trip through a remount, keep every CRC valid, and compaction
# is refused while mounted and drops the dead entries afterwards.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/tvda.sh"

M=$T/mnt
d=$(sample synthetic_tvda-v254_world-min_zstd-chunks.tvda)
mount_world "$d" "$M"

# JSON with sed -i (temporary file renamed over the original).
sed -i 's/"genver": \([0-9]*\)/"genver": 4242/' "$M/savegameinfo.json" || fail "sed -i on JSON"
# A chunk with vim -es: every tile of the first definition becomes basegame:1.
f=$M/chunks/terrain/0,0.cubeset
first=$(grep -m1 -o '"[^"]: [^"]*: 0",' "$f")
[ -n "$first" ] || fail "no definition in $f"
ch=${first:1:1}
vim -es -c "%s/\"$ch: [^\"]*: 0\"/\"$ch: basegame:1: 0\"/" -c wq "$f" || fail "vim -es on chunk"
# A raw entry with shell redirection, a new raw entry with python.
printf 'basegame 0.6.0\nextra 1.0' > "$M/entries/-4"
python3 -c "open('$M/entries/12345','wb').write(b'blob')" || fail "python write"
# The ores chunk's first placement value via sed on the raw-bytes-free view.
sed -i '0,/: 0"/s//: 7"/' "$M/chunks/wall/0,0.cubeset" 2>/dev/null && fail "meta on a wall tile was accepted"
rm "$M/chunks/wall/0,0.cubeset" || fail "rm of the rejected wall text failed"
unmount_world "$M"
check_ok "$d"

mount_world "$d" "$M"
assert_contains "$M/savegameinfo.json" '"genver": 4242'
assert_eq "$(head -c 14 "$M/entries/-1")" '{"genver":4242' "compact JSON stored with genver first"
assert_contains "$f" "\"$ch: basegame:1: 0\""
assert_eq "$(cat "$M/loadOrder.txt")" $'basegame 0.6.0\nextra 1.0' "raw entry"
assert_eq "$(cat "$M/entries/12345")" blob "new entry"
assert_eq "$(head -c 4 "$M/entries/4294967296" | od -An -tx1 | tr -d ' ')" 28b52ffd "chunk stays zstd"
"$WORLDFS" compact "$d" > "$T/compact.out" 2>&1 && fail "compact ran while mounted"
assert_contains "$T/compact.out" "mounted"
rm "$M/entries/12345"
[ ! -e "$M/entries/12345" ] || fail "removed entry still shown"
unmount_world "$M"
check_ok "$d"
"$WORLDFS" info "$d" > "$T/info"
grep -q "dead bytes: 0$" "$T/info" && fail "appends left no dead bytes?"
size=$(stat -c %s "$d")
"$WORLDFS" compact "$d" > "$T/compact.out" || fail "compact failed"
[ "$(stat -c %s "$d")" -lt "$size" ] || fail "compaction did not shrink the disk"
"$WORLDFS" info "$d" > "$T/info"
assert_contains "$T/info" "dead bytes: 0"
assert_contains "$T/info" "root listing: current"
check_ok "$d"
mount_world "$d" "$M" --read-only
assert_contains "$M/savegameinfo.json" '"genver": 4242'
assert_contains "$f" "\"$ch: basegame:1: 0\""
[ ! -e "$M/entries/12345" ] || fail "removed entry back after compaction"
unmount_world "$M"

# Generated fixtures: chunks of every layer in every codec, an actor, an image, a player.
w=$(fixture world)
check_ok "$w"
mount_world "$w" "$M"
li=0
for l in terrain wall ores fluid; do
  for c in 0 1 2; do
    no=$((li * 3 + c))
    cx=$((no / 3)); cy=$((no % 3))
    cf=$M/chunks/$l/$cx,$cy.cubeset
    [ -f "$cf" ] || fail "$cf missing"
    id=$(( (1 << 32) | (li << 24) | no ))
    magic=$(head -c 4 "$M/entries/$id" | od -An -tx1 | tr -d ' ')
    echo "$id $magic" >> "$T/magics"
    # Rename the unnamed tile number 77 to basegame:2 in every chunk.
    sed -i 's/: 77: /: basegame:2: /' "$cf" || fail "sed -i on $cf"
  done
  li=$((li + 1))
done
assert_eq "$(cut -d' ' -f2 "$T/magics" | cut -c1-4 | sort | uniq -c | awk '{print $1 $2}' | tr '\n' ' ')" "41f8b 428b5 4ff06 " "4 chunks per codec"
assert_contains "$M/chunks/fluid/3,2.cubeset" "amount 0.5"
sed -i 's/"spawnX":10/"spawnX":11/; s/"spawnX": 10/"spawnX": 11/' "$M/savegameinfo.json"
vim -es -c '%s/"x": 10.5/"x": 12.25/' -c wq "$M/actors/268435456.json" || fail "vim on actor"
cp "$M/thumbnail.tga" "$T/thumb.tga"
printf 'X' >> "$T/thumb.tga"
cp "$T/thumb.tga" "$M/thumbnail.tga" || fail "cp image"
unmount_world "$M"
check_ok "$w"
mount_world "$w" "$M"
while read -r id magic; do
  assert_eq "$(head -c 4 "$M/entries/$id" | od -An -tx1 | tr -d ' ')" "$magic" "codec of entry $id kept"
done < "$T/magics"
if grep -rl ': 77: ' "$M/chunks" > /dev/null; then fail "tile 77 still shown"; fi
[ "$(grep -rl 'basegame:2' "$M/chunks" | wc -l)" -eq 12 ] || fail "edits in all 12 chunks"
assert_contains "$M/savegameinfo.json" '"spawnX": 11'
assert_contains "$M/actors/268435456.json" '"x": 12.25'
cmp "$M/thumbnail.tga" "$T/thumb.tga" || fail "image round trip"
assert_eq "$(head -c 2 "$M/entries/-2" | od -An -tx1 | tr -d ' ')" 1f8b "image stored gzipped"
unmount_world "$M"

p=$(fixture player)
mount_world "$p" "$M"
assert_contains "$M/inventory" "basegame:1 10"
assert_contains "$M/inventory" "item@basegame:4 1"
assert_eq "$(cat "$M/screenshot.tga" | head -c 3 | od -An -tx1 | tr -d ' ')" 000002 "screenshot gunzipped"
sed -i 's/^basegame:1 10$/basegame:1 99/' "$M/inventory" || fail "sed -i on inventory"
echo "basegame:300 2" >> "$M/inventory"
unmount_world "$M"
check_ok "$p"
mount_world "$p" "$M"
assert_contains "$M/inventory" "basegame:1 99"
assert_contains "$M/inventory" "basegame:300 2"
assert_contains "$M/savegameinfo.json" '"extra": "kept"'
assert_contains "$M/savegameinfo.json" '"name": {'
unmount_world "$M"
