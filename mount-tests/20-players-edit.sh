#!/bin/bash
# players/NAME edited with sed -i, vim -es and nano, for both player backends; bad input (unknown
# key, non-number position, wrong slot count, malformed item strings) fails the close with file,
# line and reason and leaves the stored bytes unchanged.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/accounts.sh"

for pb in sqlite3 files; do
  W=$(world "players-$pb" 1 "$pb" "$pb")
  M=$T/m-$pb
  P=$M/players/celeron55

  # Bad input first: nothing may reach the store.
  before=$(stores_sha "$W")
  mount_world "$W" "$M"
  cp "$P" "$T/orig"
  assert_contains "$T/orig" "name = celeron55"
  bad() { sed "$1" "$T/orig" >"$T/bad"; must_reject "$T/bad" "$P" "$2"; }
  bad 's/^hp = .*/hpx = 3/' 'line 3, column 1: unknown key "hpx"'
  bad 's/^position = .*/position = (1,abc,3)/' 'line 6, column 1: position: "abc" is not a finite number'
  bad '0,/^Empty$/{/^Empty$/d}' 'line 10, column 1: list "main" has size 32 but 31 slot lines'
  bad 's/^Item default:torch 13$/Item default:torch 13 x/' 'line 12, column 23: wear must be a number'
  bad 's/^Item default:torch 13$/Item "default:torch/' 'line 12, column 6: quoted string has no closing quote'
  bad 's/^Item default:torch 13$/Item default:torch 70000/' 'line 12, column 20: count must be a number'
  bad 's/^PlayerArgsEnd$/PlayerArgs/' 'PlayerArgsEnd'
  # The rejected text stays readable until it is fixed; the original text is accepted again.
  assert_contains "$P" "PlayerArgs"
  cp "$T/orig" "$P" || fail "writing the original text back failed"
  cmp -s "$T/orig" "$P" || fail "the view changed after writing it back unchanged"
  unmount_world "$M"
  assert_eq "$(stores_sha "$W")" "$before" "stores changed by rejected edits"

  # Good edits with three editors.
  mount_world "$W" "$M"
  sed -i 's/^hp = .*/hp = 7/' "$P" || fail "sed -i failed"
  assert_contains "$P" "hp = 7"
  vim -es -c '%s/^position = .*/position = (123.5,45,-67.25)/' -c 'wq' "$P" || fail "vim failed"
  assert_contains "$P" "position = (123.5,45,-67.25)"
  nano_edit "$P" "Item default:cobble 99" "Item default:diamond 5"
  assert_contains "$P" "Item default:diamond 5"
  assert_not_contains "$P" "default:cobble"
  ls -a "$M/players" >"$T/ls"
  assert_eq "$(cat "$T/ls" | tr '\n' ' ')" ". .. celeron55 " "players/ after editing"
  cp "$P" "$T/edited"
  unmount_world "$M"
  [ "$(stores_sha "$W")" != "$before" ] || fail "edits did not reach the store"

  # Remount: the edits are stored.
  mount_world "$W" "$M" --read-only
  cmp "$P" "$T/edited" || fail "players/celeron55 differs after remount"
  unmount_world "$M"
  if [ "$pb" = sqlite3 ]; then
    assert_eq "$(sqlite3 "$W/players.sqlite" "SELECT hp, posX, posY, posZ FROM player WHERE name='celeron55'")" \
      "7|123.5|45|-67.25" "players.sqlite row"
    assert_eq "$(sqlite3 "$W/players.sqlite" "SELECT item FROM player_inventory_items WHERE player='celeron55' AND inv_id=0 AND slot_id=2")" \
      "default:diamond 5" "players.sqlite slot"
  else
    assert_contains "$W/players/celeron55" "hp = 7"
    assert_contains "$W/players/celeron55" "Item default:diamond 5"
  fi
done
echo "players edit ok"
