#!/bin/bash
# A world the engine moved into PostgreSQL, mounted: blocks/ lists what the database holds,
# files read as for the SQLite original; edits with sed -i and vim are committed and the engine
# (started on the world, reading PostgreSQL) sees them; worldfs info and check work and never
# show the password.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/postgres.sh"

W=$(pg_world w)
C=$(conn_of "$W")
PASSWORD=$(grep -o 'password=[^ ]*' <<<"$C" | cut -d= -f2)
[ -n "$PASSWORD" ] || fail "no password in the connection string"
S=$T/sqlite; mkdir "$S"; cp "$W/world.mt" "$S/"; sed -i '/^backend/d; /^pgsql/d' "$S/world.mt"
cp "$T/w.sqlite" "$S/map.sqlite"

M=$T/mnt; MS=$T/mnt-sqlite
mount_world "$W" "$M"
mount_world "$S" "$MS" --read-only
assert_eq "$(ls "$M/blocks" | wc -l)" "$(pg_sql "$C" 'SELECT count(*) FROM blocks')" "blocks listed"
assert_eq "$(ls "$M/blocks" | sort)" "$(ls "$MS/blocks" | sort)" "same blocks as the SQLite copy"
for b in 0,0,0 1,0,0 -1,-1,-1; do
  for f in nodes.cubeset light.txt block.txt objects.txt timers.txt; do
    cmp -s "$M/blocks/$b/$f" "$MS/blocks/$b/$f" || fail "$b/$f differs from the SQLite copy"
  done
done
diff <(cd "$M/blocks/0,0,0" && find . | sort) <(cd "$MS/blocks/0,0,0" && find . | sort) \
  || fail "block 0,0,0's tree differs"

# Edits: sed -i on a sign's text, vim on nodes.cubeset (the sign's param2).
F=$M/blocks/0,0,0/meta/2,10,1/fields
sed -i 's/mkworld/sed on postgresql/' "$F/text"
vim -es -u NONE -c '%s/"\(.\): default:sign_wall_wood: 3"/"\1: default:sign_wall_wood: 4"/' -c 'wq' \
  "$M/blocks/0,0,0/nodes.cubeset" </dev/null || fail "vim on nodes.cubeset failed"
grep -q 'default:sign_wall_wood: 4' "$M/blocks/0,0,0/nodes.cubeset" || fail "vim's edit not shown"
unmount_world "$M"
unmount_world "$MS"

"$WORLDFS" info "$W" >"$T/info" 2>&1 || { cat "$T/info"; fail "worldfs info failed"; }
cat "$T/info"
assert_contains "$T/info" "format: Luanti world (PostgreSQL)"
assert_contains "$T/info" "dbname="
assert_not_contains "$T/info" "$PASSWORD" "worldfs info shows the password"
"$WORLDFS" check "$W" >"$T/check" 2>&1 || { cat "$T/check"; fail "worldfs check failed"; }
assert_contains "$T/check" ", 0 broken"
assert_not_contains "$T/worldfs.log" "$PASSWORD" "the log shows the password"

probe "$W" >"$T/probe"
grep -q '^checksum ' "$T/probe" || { cat "$T/probe"; fail "the engine cannot load the world"; }
grep -qE '^node 2,10,1 default:sign_wall_wood [0-9]+ 4$' "$T/probe" || { grep '^node 2,10,1' "$T/probe"; fail "the engine does not see vim's param2"; }
grep -q 'field text="hello from sed on postgresql' "$T/probe" || { grep -A3 '^node 2,10,1' "$T/probe"; fail "the engine does not see sed's text"; }
echo "ok"
