#!/bin/bash
# auth.txt (mode 0600) for both auth backends: granting a privilege with sed -i, adding and
# removing players, hashes unchanged unless edited; duplicate players and malformed lines fail
# the close with line and reason and change nothing stored.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/accounts.sh"

for ab in sqlite3 files; do
  W=$(world "auth-$ab" 1 sqlite3 "$ab")
  M=$T/m-$ab
  A=$M/auth.txt
  mode=$(stat -c %a "$W/auth.txt" 2>/dev/null || true)
  mount_world "$W" "$M"
  assert_eq "$(stat -c %a "$A")" 600 "auth.txt mode"
  cp "$A" "$T/orig"
  assert_contains "$T/orig" "celeron55::interact,shout:0"
  assert_contains "$T/orig" "foo:iEPX+SQWIR3p67lj/0zigSWTKHg:shout:0"
  before=$(stores_sha "$W")
  { cat "$T/orig"; grep '^foo:' "$T/orig"; } >"$T/dup"
  must_reject "$T/dup" "$A" 'line 3, column 1: player "foo" appears twice (first on line 2)'
  { cat "$T/orig"; echo "eve:x"; } >"$T/short"
  must_reject "$T/short" "$A" 'line 3'
  sed 's/^foo:/f:o:/' "$T/orig" >"$T/colon"
  must_reject "$T/colon" "$A" 'line 2'
  cp "$T/orig" "$A" || fail "writing auth.txt back unchanged failed"
  unmount_world "$M"
  assert_eq "$(stores_sha "$W")" "$before" "stores changed by rejected auth edits"

  mount_world "$W" "$M"
  sed -i 's/^\(foo:[^:]*\):shout:/\1:fly,shout:/' "$A" || fail "sed -i on auth.txt failed"
  assert_contains "$A" "foo:iEPX+SQWIR3p67lj/0zigSWTKHg:fly,shout:0"
  echo 'newbie:#1#c2FsdA#dmVyaWZpZXI:interact:1700000000' >>"$A" || fail "appending a player failed"
  sed -i '/^celeron55:/d' "$A" || fail "removing a player failed"
  assert_eq "$(stat -c %a "$A")" 600 "auth.txt mode after editing"
  cp "$A" "$T/edited"
  assert_eq "$(cat "$T/edited")" "foo:iEPX+SQWIR3p67lj/0zigSWTKHg:fly,shout:0
newbie:#1#c2FsdA#dmVyaWZpZXI:interact:1700000000" "auth.txt after editing"
  unmount_world "$M"

  if [ "$ab" = sqlite3 ]; then
    q() { sqlite3 "$W/auth.sqlite" "$1"; }
    assert_eq "$(q "SELECT name || ':' || password || ':' || last_login FROM auth ORDER BY name" | tr '\n' ' ')" \
      "foo:iEPX+SQWIR3p67lj/0zigSWTKHg:0 newbie:#1#c2FsdA#dmVyaWZpZXI:1700000000 " "auth rows"
    assert_eq "$(q "SELECT a.name || '=' || p.privilege FROM user_privileges p JOIN auth a ON a.id = p.id ORDER BY 1" | tr '\n' ' ')" \
      "foo=fly foo=shout newbie=interact " "privilege rows"
    assert_eq "$(q "SELECT count(*) FROM user_privileges WHERE id NOT IN (SELECT id FROM auth)")" 0 "orphan privileges"
  else
    assert_eq "$(stat -c %a "$W/auth.txt")" "$mode" "stored auth.txt keeps its mode"
    cmp "$W/auth.txt" "$T/edited" || fail "stored auth.txt differs from the mount's"
  fi

  # The engine reads back what the mount showed.
  E=$T/engine-$ab
  cp -a "$W" "$E"
  if [ "$ab" = sqlite3 ]; then
    migrate "$E" auth files
    cmp "$E/auth.txt" "$T/edited" || fail "the engine's auth.txt differs: $(cat "$E/auth.txt")"
  else
    migrate "$E" auth sqlite3
    mount_world "$E" "$T/m-engine" --read-only
    cmp "$T/m-engine/auth.txt" "$T/edited" || fail "auth.sqlite written by the engine shows otherwise"
    unmount_world "$T/m-engine"
  fi
done
echo "auth ok"
