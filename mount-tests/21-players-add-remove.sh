#!/bin/bash
# Adding players (cp + sed, python3), renaming one (mv), removing one (rm) through players/, for
# both player backends; a name line that differs from the file name, an empty new file and a
# name that is not a file name are refused and change nothing stored.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/accounts.sh"

for pb in sqlite3 files; do
  W=$(world "add-$pb" 1 "$pb" sqlite3)
  M=$T/m-$pb
  mount_world "$W" "$M"
  sed 's/^name = .*/name = alice/; s/^hp = .*/hp = 3/' "$M/players/celeron55" >"$T/alice"
  before=$(stores_sha "$W")
  must_reject "$T/alice" "$M/players/bob" 'line 4, column 1: name "alice" differs from the file name "bob"'
  rm -f "$M/players/bob"
  # touch ignores the failed close (it closes a duplicate first); the log and the store tell.
  mark=$(log_mark)
  touch "$M/players/carol" 2>/dev/null || true
  log_since "$mark" | grep -qF 'players/carol: an empty file is no player' || fail "touch: no error logged"
  rm -f "$M/players/carol"
  if cp "$T/alice" "$M/players/a:b" 2>/dev/null; then fail "a player name with ':' was accepted"; fi
  assert_eq "$(stores_sha "$W")" "$before" "stores changed by refused additions"

  cp "$T/alice" "$M/players/alice" || fail "adding alice failed"
  python3 - "$M/players" <<'PY' || fail "python3 could not add a player"
import sys
d = sys.argv[1]
text = open(f"{d}/celeron55").read().replace("name = celeron55", "name = Dörte 2")
with open(f"{d}/Dörte 2", "w") as f:
    f.write(text)
PY
  mv "$M/players/alice" "$M/players/alice2" || fail "mv of a player failed"
  assert_contains "$M/players/alice2" "name = alice2"
  assert_contains "$M/players/alice2" "hp = 3"
  [ ! -e "$M/players/alice" ] || fail "alice still exists after mv"
  assert_eq "$(ls "$M/players" | tr '\n' ' ')" "Dörte 2 alice2 celeron55 " "players after adding"
  rm "$M/players/celeron55" || fail "rm of a player failed"
  assert_eq "$(ls "$M/players" | tr '\n' ' ')" "Dörte 2 alice2 " "players after removing"
  unmount_world "$M"

  if [ "$pb" = sqlite3 ]; then
    q() { sqlite3 "$W/players.sqlite" "$1"; }
    assert_eq "$(q "SELECT name FROM player ORDER BY name" | tr '\n' ' ')" "Dörte 2 alice2 " "player rows"
    for t in player_inventories player_inventory_items player_metadata; do
      assert_eq "$(q "SELECT count(*) FROM $t WHERE player='celeron55'")" 0 "$t rows of the removed player"
    done
    assert_eq "$(q "SELECT count(*) FROM player_inventory_items WHERE player='alice2'")" 43 "alice2's slots"
  else
    assert_eq "$(for f in "$W"/players/*; do basename "$f"; done | LC_ALL=C sort | tr '\n' ' ')" "Dörte 2 alice2 " "player files"
  fi

  # The engine loads what was added.
  cp -a "$W" "$T/engine-$pb"
  other=$([ "$pb" = sqlite3 ] && echo files || echo sqlite3)
  migrate "$T/engine-$pb" players "$other"
  assert_contains "$T/engine.log" "Successfully migrated 2 players"
done
echo "players add/remove ok"
