#!/bin/bash
# Names in mod storage that used to be lost or unreadable: a key longer than a file name can
# be lists under a long form that opens (so rsync -a of the whole mount exits 0), and a key
# with a temporary-looking name (settings.tmp) is stored like any other.
source "$(dirname "$0")/lib.sh"

W=$(world long-names 1 sqlite3 sqlite3)
long=$(printf 'waypoint/%.0s' $(seq 40))
sqlite3 "$W/mod_storage.sqlite" "INSERT INTO entries VALUES ('mkworld', CAST('$long' AS BLOB), CAST('far away' AS BLOB))"
M=$T/m
mount_world "$W" "$M"
D=$M/mod_storage/mkworld
name=$(ls "$D" | grep '^waypoint%2F') || fail "the long key is not listed"
[ "${#name}" -le 255 ] || fail "a listed name has ${#name} bytes"
assert_eq "$(cat "$D/$name")" "far away" "the long key's value"
rsync -a "$M/" "$T/backup/" || fail "rsync -a of the mount exited $?"
assert_eq "$(cat "$T/backup/mod_storage/mkworld/$name")" "far away" "the backup of the long key"
echo "nearer" >"$D/$name" || fail "writing the long key failed"
echo "kept" >"$D/settings.tmp" || fail "creating settings.tmp failed"
sed -i 's/kept/kept too/' "$D/settings.tmp" || fail "sed -i on settings.tmp failed"
assert_eq "$(ls "$D" | grep -c '^sed')" 0 "sed's temporary is not a key"
unmount_world "$M"
q() { sqlite3 "$W/mod_storage.sqlite" "$1"; }
assert_eq "$(q "SELECT CAST(value AS TEXT) FROM entries WHERE key = CAST('$long' AS BLOB)")" "nearer" "the long key's stored value"
assert_eq "$(q "SELECT CAST(value AS TEXT) FROM entries WHERE key = CAST('settings.tmp' AS BLOB)")" "kept too" "settings.tmp is stored"
assert_eq "$(q "SELECT count(*) FROM entries WHERE CAST(key AS TEXT) LIKE 'sed%'")" 0 "no sed temporary stored"
echo "long and temporary-looking key names ok"
