#!/bin/bash
# mod_storage/MOD/KEY for both mod-storage backends: mkdir makes a mod folder, files create,
# edit, rename and remove entries; key names are escaped reversibly and nothing reaches outside
# its folder; bad names are refused.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/accounts.sh"

for ms in sqlite3 files; do
  W=$(world "mods-$ms" 1 sqlite3 sqlite3)
  if [ "$ms" = files ]; then migrate "$W" mod-storage files; fi
  if [ "$ms" = sqlite3 ]; then
    # Keys that are no file names, stored by some mod.
    sqlite3 "$W/mod_storage.sqlite" "INSERT INTO entries VALUES ('mkworld', CAST('a/b' AS BLOB), CAST('slash' AS BLOB)), ('mkworld', CAST('..' AS BLOB), CAST('dots' AS BLOB)), ('mkworld', CAST('50%' AS BLOB), CAST('pct' AS BLOB))"
  fi
  M=$T/m-$ms
  D=$M/mod_storage
  mount_world "$W" "$M"
  assert_eq "$(ls "$D" | tr '\n' ' ')" "mkworld " "mods"
  assert_eq "$(cat "$D/mkworld/greeting")" "hello storage" "greeting"
  if [ "$ms" = sqlite3 ]; then
    assert_eq "$(ls "$D/mkworld" | tr '\n' ' ')" "%2E%2E 50%25 a%2Fb greeting " "escaped keys"
    assert_eq "$(cat "$D/mkworld/a%2Fb") $(cat "$D/mkworld/%2E%2E") $(cat "$D/mkworld/50%25")" "slash dots pct" "escaped values"
    [ ! -e "$D/mkworld/a%2fb" ] || fail "a non-canonical escape names an entry"
    [ ! -e "$D/mkworld/%61%2Fb" ] || fail "a non-canonical escape names an entry"
  fi

  before=$(stores_sha "$W")
  mkdir "$D/Bad-Name" 2>/dev/null && fail "mkdir of a bad mod name succeeded"
  mkdir "$D/newmod" || fail "mkdir newmod failed"
  assert_eq "$(ls -a "$D/newmod" | tr '\n' ' ')" ". .. " "new mod folder"
  rmdir "$D/newmod" || fail "rmdir of an empty mod folder failed"
  [ ! -e "$D/newmod" ] || fail "newmod still exists"
  echo x >"$D/mkworld/100%" 2>/dev/null && fail "a key file name with a bare % was accepted"
  mkdir "$D/%2E%2E" 2>/dev/null && fail "mkdir of a mod named .. succeeded"
  assert_eq "$(stores_sha "$W")" "$before" "stores changed by refused operations"

  mkdir "$D/newmod" || fail "mkdir newmod failed"
  echo "value one" >"$D/newmod/k1" || fail "creating k1 failed"
  printf 'no newline' >"$D/newmod/k2" || fail "creating k2 failed"
  printf 'line1\nline2\n\n' >"$D/newmod/multi" || fail "creating multi failed"
  sed -i 's/one/two/' "$D/newmod/k1" || fail "sed -i on k1 failed"
  mv "$D/newmod/k2" "$D/newmod/k3" || fail "mv k2 k3 failed"
  echo "set by path" >"$D/newmod/50%25" || fail "creating an escaped key failed"
  rm "$D/mkworld/greeting" || fail "rm greeting failed"
  echo inside >"$D/newmod/a%2F..%2F..%2Fescape" || fail "creating the key a/../../escape failed"
  assert_eq "$(cat "$D/newmod/a%2F..%2F..%2Fescape")" inside "the key a/../../escape"
  rm "$D/newmod/a%2F..%2F..%2Fescape" || fail "removing the key a/../../escape failed"
  [ -z "$(find "$W" "$T" -maxdepth 2 -name escape)" ] || fail "a file named escape appeared"
  mkdir "$D/gone" && echo v >"$D/gone/k" || fail "making mod gone failed"
  rm "$D/gone/k" || fail "rm gone/k failed"
  [ -d "$D/gone" ] || fail "the folder of a mod whose last key was removed vanished before rmdir"
  rmdir "$D/gone" || fail "rmdir gone failed"
  [ ! -e "$D/gone" ] || fail "gone still exists after rmdir"
  assert_eq "$(ls "$D/newmod" | tr '\n' ' ')" "50%25 k1 k3 multi " "newmod keys"
  assert_eq "$(cat "$D/newmod/k1")" "value two" "k1"
  assert_eq "$(stat -c %s "$D/newmod/k3")" 11 "k3 size (value plus newline)"
  unmount_world "$M"

  # What is stored: values without the one newline the file adds.
  if [ "$ms" = sqlite3 ]; then
    q() { sqlite3 "$W/mod_storage.sqlite" "$1"; }
    assert_eq "$(q "SELECT CAST(key AS TEXT) || '=' || hex(value) FROM entries WHERE modname='newmod' ORDER BY key" | tr '\n' ' ')" \
      "50%=$(printf 'set by path' | xxd -p | tr a-f A-F) k1=$(printf 'value two' | xxd -p | tr a-f A-F) k3=$(printf 'no newline' | xxd -p | tr a-f A-F) multi=$(printf 'line1\nline2\n' | xxd -p | tr a-f A-F) " "newmod rows"
    assert_eq "$(q "SELECT count(*) FROM entries WHERE modname='mkworld' AND key=CAST('greeting' AS BLOB)")" 0 "greeting removed"
  else
    python3 - "$W/mod_storage" <<'PY' || fail "stored mod files differ"
import json, sys
d = sys.argv[1]
new = json.load(open(f"{d}/newmod"))
assert new == {"k1": "value two", "k3": "no newline", "multi": "line1\nline2\n", "50%": "set by path"}, new
assert "greeting" not in json.load(open(f"{d}/mkworld"))
import os
assert not os.path.exists(f"{d}/gone"), "the emptied mod's file was left behind"
PY
  fi

  # The engine reads the entries back (migrating to the other backend keeps every one).
  E=$T/engine-$ms
  cp -a "$W" "$E"
  other=$([ "$ms" = sqlite3 ] && echo files || echo sqlite3)
  migrate "$E" mod-storage "$other"
  mount_world "$E" "$T/m-engine" --read-only
  assert_eq "$(cat "$T/m-engine/mod_storage/newmod/k1")" "value two" "k1 after the engine's migration"
  assert_eq "$(cat "$T/m-engine/mod_storage/newmod/multi" | od -c | head -1)" "$(printf 'line1\nline2\n\n' | od -c | head -1)" "multi after the engine's migration"
  assert_eq "$(ls "$T/m-engine/mod_storage/newmod" | tr '\n' ' ')" "50%25 k1 k3 multi " "keys after the engine's migration"
  unmount_world "$T/m-engine"
done
echo "mod storage ok"
