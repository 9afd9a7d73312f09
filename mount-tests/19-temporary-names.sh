#!/bin/bash
# Files under the names tools use for temporaries (`f~`, `4913`, `sedXXXXXX`, `.f.swp`, dot
# files, `*.tmp`, `#f#`) are held by the daemon while mounted: an editor renames or removes
# its temporaries. One still there at unmount was put there to stay, and is stored under its
# own name: in the world folder (a mod's `.gitignore`), as a mod-storage key, a player, a
# metadata field. A copy moved aside (`mv f f~`) is not: `f` keeps its content. A backup
# holding such files restores whole. What cannot be stored there (an unknown name in a block folder, a store's own file
# name) is dropped with a log line, and the stores are untouched.
. "$(dirname "$0")/lib.sh"

LU=$SHARED/samples/luanti
W=$T/w
mkdir -p "$W"
cp "$LU/rust-minetestworld-TestWorld/"{world.mt,map.sqlite} "$W/"
cp "$LU/mtdb-testdata/"{players.sqlite,mod_storage.sqlite,auth.sqlite} "$W/"
chmod -R u+w "$W"
NAMES=(notes~ 4913 sedabcdef .hidden .f.swp draft.tmp '#auto#')
M=$T/mnt
mount_world "$W" "$M"
BLOCKS=("$M"/blocks/*)
B=${BLOCKS[0]##*/}
NODE=$(find "$M/blocks" -mindepth 3 -maxdepth 3 -path '*/meta/*' -type d -print -quit)
[ -n "$NODE" ] || fail "no node with metadata in the sample"
NODE=${NODE#"$M/"}

mkdir -p "$M/worldmods/mymod" "$M/mod_storage/mymod"
for n in "${NAMES[@]}"; do
  echo "world $n" >"$M/worldmods/mymod/$n"
  echo "key $n" >"$M/mod_storage/mymod/$n"
done
: >"$M/worldmods/mymod/.keep"
for n in 4913 sedgwick1; do
  sed "s/^name = singleplayer\$/name = $n/" "$M/players/singleplayer" >"$M/players/$n"
done
for n in 4913 owner~ sedentary; do echo "field $n" >"$M/$NODE/fields/$n"; done
echo kept >"$M/notes.txt"
mv "$M/notes.txt" "$M/notes.txt~"
# Names that cannot be stored where they are.
echo stray >"$M/blocks/$B/notes.txt"
cp "$W/world.mt" "$M/map.sqlite-journal"
ls -a "$M/worldmods/mymod" | grep -qxF '#auto#' || fail "a held file is not listed while mounted"
unmount_world "$M"

for n in "${NAMES[@]}"; do
  assert_eq "$(cat "$W/worldmods/mymod/$n")" "world $n" "worldmods/mymod/$n on disk after unmount"
done
[ -f "$W/worldmods/mymod/.keep" ] && [ ! -s "$W/worldmods/mymod/.keep" ] || fail "the empty .keep was not stored"
assert_eq "$(cat "$W/notes.txt" 2>/dev/null)" kept "notes.txt, moved aside to notes.txt~ and kept"
[ ! -e "$W/notes.txt~" ] || fail "the copy moved aside was stored beside its source"
[ ! -e "$W/map.sqlite-journal" ] || fail "a file named like the store's journal reached the world folder"
assert_eq "$(sqlite3 "$W/map.sqlite" 'select count(*) > 1000 from blocks')" 1 "the map after unmount"
for p in "blocks/$B/notes.txt" map.sqlite-journal; do
  assert_contains "$T/worldfs.log" "temporary file not stored at unmount: $p"
done
assert_eq "$(sqlite3 "$W/mod_storage.sqlite" "select count(*) from entries where modname = 'mymod'")" "${#NAMES[@]}" "mod-storage keys stored"
assert_eq "$(sqlite3 "$W/players.sqlite" "select count(*) from player where name in ('4913', 'sedgwick1')")" 2 "players stored"
"$WORLDFS" check "$W" >"$T/check.out" 2>&1 || { cat "$T/check.out"; fail "worldfs check after unmount"; }

# What the mount shows again: every key, player and field, with its content.
mount_world "$W" "$M" --read-only
for n in "${NAMES[@]}"; do
  assert_eq "$(cat "$M/mod_storage/mymod/$n")" "key $n" "mod_storage/mymod/$n"
done
diff <(sed 's/^name = .*//' "$M/players/4913") <(sed 's/^name = .*//' "$M/players/singleplayer") ||
  fail "players/4913 differs from what was written"
for n in 4913 owner~ sedentary; do
  assert_eq "$(cat "$M/$NODE/fields/$n")" "field $n" "$NODE/fields/$n"
done

unmount_world "$M"

# A backup holding them, restored into a folder with only world.mt, gives them all back.
BK=$T/backup
mount_world "$W" "$M"
rsync -a "$M/" "$BK/" || fail "backup rsync failed"
unmount_world "$M"
W2=$T/w2
mkdir "$W2"
cp "$BK/world.mt" "$W2/"
mount_world "$W2" "$M"
rsync -a "$BK/" "$M/" || fail "restore rsync failed"
unmount_world "$M"
diff -r "$W/worldmods" "$W2/worldmods" || fail "the restored worldmods/ differs"
assert_eq "$(cat "$W2/notes.txt")" kept "notes.txt restored"
mount_world "$W2" "$M"
rsync -a -n -i -c "$BK/" "$M/" >"$T/dry-run" || fail "dry-run rsync failed"
if [ -s "$T/dry-run" ]; then
  head -5 "$T/dry-run"
  fail "after the restore and a remount, rsync -n -i -c lists $(wc -l <"$T/dry-run") entries"
fi
unmount_world "$M"

# A stored file moved aside, then a new one written at its name that fails to save: the
# stored file is not replaced, not even by the empty file the shell's first close leaves.
accounts() { sqlite3 "$W2/auth.sqlite" 'select count(*) from auth'; }
n=$(accounts)
[ "$n" -gt 0 ] || fail "the restored world has no accounts"
mount_world "$W2" "$M"
mv "$M/auth.txt" "$M/auth.txt~"
bash -c "echo 'not valid' >'$M/auth.txt'" 2>/dev/null || true
assert_eq "$(accounts)" "$n" "accounts after a failed save over auth.txt moved aside"
unmount_unsaved "$M" auth.txt
assert_eq "$(accounts)" "$n" "accounts after the unmount"
echo "ok"
