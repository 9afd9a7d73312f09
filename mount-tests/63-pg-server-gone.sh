#!/bin/bash
# PostgreSQL: a server that is down at mount fails the mount naming host and database (never
# the password); one that goes away during a mount fails the calls that need it with EIO and a
# log line, and once it is back the same mount reads and writes again, nothing half-written.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/postgres.sh"

# Down at mount.
D=$T/down; mkdir "$D"
printf 'gameid = minetest\nbackend = postgresql\npgsql_connection = host=%s/none port=5432 user=u password=hunter2 dbname=gone\n' "$T" >"$D/world.mt"
mkdir -p "$T/m0"
if "$WORLDFS" mount "$D" "$T/m0" 2>"$T/err0"; then fail "mounted a world whose server is down"; fi
cat "$T/err0"
assert_contains "$T/err0" "dbname=gone"
assert_not_contains "$T/err0" "hunter2" "the error shows the password"

# Gone during a mount: a server of this test's own, stopped and started again.
[ -n "$PG_OWN" ] || pg_own
W=$(pg_world w "$PG_OWN_CONN")
C=$(conn_of "$W")
M=$T/mnt
mount_world "$W" "$M"
cat "$M/blocks/0,0,0/block.txt" >/dev/null || fail "reading before the outage"
"$ROOT/scripts/pg-server" pause "$PG_OWN"
if cat "$M/blocks/1,0,0/nodes.cubeset" >/dev/null 2>"$T/err1"; then fail "read a block never read while the server is away"; fi
assert_contains "$T/err1" "Input/output error"
if ls "$M/blocks" >/dev/null 2>"$T/err2"; then fail "listed blocks/ while the server is away"; fi
assert_contains "$T/err2" "Input/output error"
if printf 'x\n' >"$M/blocks/0,1,0/meta/0,0,0/fields/note" 2>/dev/null; then
  echo "the write was accepted (pending until the server is back)"
fi
assert_contains "$T/worldfs.log" "cannot connect to PostgreSQL"
PASSWORD=$(grep -o 'password=[^ ]*' <<<"$C" | cut -d= -f2)
assert_not_contains "$T/worldfs.log" "$PASSWORD" "the log shows the password"

"$ROOT/scripts/pg-server" resume "$PG_OWN"
cmp -s <(cat "$M/blocks/1,0,0/nodes.cubeset") /dev/null && fail "empty read after the server is back"
ls "$M/blocks" >/dev/null || fail "listing after the server is back"
sed -i 's/mkworld/after the outage/' "$M/blocks/0,0,0/meta/2,10,1/fields/text" || fail "sed -i after the outage"
assert_contains "$T/worldfs.log" "connected again"
unmount_world "$M"
mount_world "$W" "$M" --read-only
grep -q "hello from after the outage" "$M/blocks/0,0,0/meta/2,10,1/fields/text" || fail "the edit after the outage is not stored"
"$WORLDFS" check "$W" >"$T/check" 2>&1 || { cat "$T/check"; fail "worldfs check failed"; }
echo "ok"
