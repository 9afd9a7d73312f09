#!/bin/bash
# PostgreSQL players and auth: the engine moves them into PostgreSQL, a player and an auth
# line are edited through the mount with sed -i, then the engine moves them out to files: the
# player file and auth.txt it writes say what the mount showed.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/accounts.sh"
source "$(dirname "$0")/postgres.sh"

after_args() { sed -n '/^PlayerArgsEnd$/,$p' "$1"; }

W=$(world accounts 1 sqlite3 sqlite3)
DB=$(pg_db)
printf 'pgsql_player_connection = %s\npgsql_auth_connection = %s\n' "$DB" "$DB" >>"$W/world.mt"
migrate "$W" players postgresql
migrate "$W" auth postgresql
rm "$W/players.sqlite" "$W/auth.sqlite"
grep -q '^player_backend = postgresql' "$W/world.mt" || fail "the engine did not switch player_backend"

M=$T/mnt
P=$M/players/celeron55
mount_world "$W" "$M"
sed -i 's/^hp = .*/hp = 7/; s/^position = .*/position = (123.5,45,-67.25)/' "$P" || fail "sed -i failed"
sed -i 's/^Item default:cobble 99$/Item default:diamond 5/' "$P" || fail "sed -i failed"
sed -i 's/^celeron55::interact,shout:/celeron55::fly,interact,shout:/' "$M/auth.txt" || fail "sed -i on auth.txt failed"
cp "$P" "$T/shown"; cp "$M/auth.txt" "$T/auth"
assert_contains "$T/shown" "Item default:diamond 5"
assert_contains "$T/auth" "celeron55::fly,interact,shout:"
printf 'hp = lots\n' >"$T/bad"
if cp "$T/bad" "$P" 2>/dev/null; then fail "a bad player file was accepted"; fi
unmount_unsaved "$M" players/celeron55
assert_eq "$(pg_sql "$DB" "SELECT hp FROM player WHERE name = 'celeron55'")" "7" "hp stored"

E=$T/copy
cp -a "$W" "$E"
migrate "$E" players files
migrate "$E" auth files
F=$E/players/celeron55
[ -f "$F" ] || fail "the engine wrote no players/celeron55"
for want in "hp = 7" "position = (123.5,45,-67.25)" "name = celeron55"; do
  grep -qxF -e "$want" "$F" || fail "the engine's player file lacks [$want]: $(head -12 "$F")"
done
diff <(after_args "$F") <(after_args "$T/shown") >"$T/diff" || fail "the engine's inventory differs: $(cat "$T/diff")"
cmp "$E/auth.txt" "$T/auth" || fail "the engine's auth.txt differs: $(cat "$E/auth.txt")"
echo "ok"
