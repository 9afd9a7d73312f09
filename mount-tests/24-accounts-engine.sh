#!/bin/bash
# The real engine agrees: a player's inventory, position, hp and metadata and an auth line's
# privileges edited through the mount, then the engine migrates the stores to files (and, for
# worlds that already use files, through sqlite3 and back): the player file and auth.txt the
# engine writes say exactly what the mount showed.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/accounts.sh"

# after_args FILE: the inventory part of a player file (everything after PlayerArgsEnd).
after_args() { sed -n '/^PlayerArgsEnd$/,$p' "$1"; }

for b in sqlite3 files; do
  W=$(world "engine-$b" 1 "$b" "$b")
  M=$T/m-$b
  P=$M/players/celeron55
  mount_world "$W" "$M"
  sed -i 's/^hp = .*/hp = 7/; s/^position = .*/position = (123.5,45,-67.25)/' "$P" || fail "sed -i failed"
  sed -i 's/^Item default:cobble 99$/Item default:diamond 5/; s/^Item default:torch 13$/Item default:torch 42/' "$P" || fail "sed -i failed"
  sed -i '0,/^List craft 9$/!b; n; n; s/^Empty$/Item default:stick 3/' "$P" || fail "sed -i failed"
  sed -i 's/^extended_attributes = .*/extended_attributes = {"worldfs:note": "hi there"}/' "$P" || fail "sed -i failed"
  sed -i 's/^celeron55::interact,shout:/celeron55::fly,interact,shout:/' "$M/auth.txt" || fail "sed -i on auth.txt failed"
  cp "$P" "$T/shown-$b"
  cp "$M/auth.txt" "$T/auth-$b"
  for want in "hp = 7" "position = (123.5,45,-67.25)" "Item default:diamond 5" "Item default:torch 42" "Item default:stick 3" '"worldfs:note": "hi there"'; do
    assert_contains "$T/shown-$b" "$want"
  done
  assert_contains "$T/auth-$b" "celeron55::fly,interact,shout:0"
  unmount_world "$M"

  E=$T/copy-$b
  cp -a "$W" "$E"
  if [ "$b" = files ]; then
    # Let the engine itself write the files: through sqlite3 and back.
    migrate "$E" players sqlite3
    migrate "$E" auth sqlite3
    rm -rf "$E/players" "$E/auth.txt"
  fi
  migrate "$E" players files
  migrate "$E" auth files
  F=$E/players/celeron55
  [ -f "$F" ] || fail "the engine wrote no players/celeron55"
  for want in "hp = 7" "position = (123.5,45,-67.25)" "name = celeron55"; do
    grep -qxF -e "$want" "$F" || fail "the engine's player file lacks [$want]: $(head -12 "$F")"
  done
  grep -qF '"worldfs:note" : "hi there"' "$F" || grep -qF '"worldfs:note":"hi there"' "$F" \
    || fail "the engine's player file lacks the metadata: $(grep -A3 extended "$F")"
  diff <(after_args "$F") <(after_args "$T/shown-$b") >"$T/diff" || fail "the engine's inventory differs from the mount's: $(cat "$T/diff")"
  cmp "$E/auth.txt" "$T/auth-$b" || fail "the engine's auth.txt differs: $(cat "$E/auth.txt")"

  # Mounted, the engine's files show exactly the text the mount showed.
  mount_world "$E" "$T/m-copy-$b" --read-only
  cmp "$T/m-copy-$b/players/celeron55" "$T/shown-$b" || fail "the engine's player file shows otherwise: $(diff "$T/m-copy-$b/players/celeron55" "$T/shown-$b")"
  unmount_world "$T/m-copy-$b"
done
echo "engine agrees"
