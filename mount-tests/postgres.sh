# Helpers for the PostgreSQL mount tests (60-69); sourced after lib.sh.
# The server is the run's ($WORLDFS_PG, started by scripts/test) or, when a test runs alone,
# one of its own (scripts/pg-server, stopped when the test ends). Never a system-wide one.
PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -n "$PG_BIN" ] || fail "PostgreSQL is not installed (scripts/install-deps)"
PG_OWN=""
pg_cleanup() {
  local rc=$?
  set +e
  if [ -n "$PG_OWN" ]; then "$ROOT/scripts/pg-server" stop "$PG_OWN"; fi
  # cleanup keeps a failed test's evidence by the test's status, not the stop's (set +e:
  # else the status would end the trap here).
  (exit "$rc")
  cleanup
}
trap pg_cleanup EXIT

# pg_own: starts a server of this test's own; its connection string in $PG_OWN_CONN.
pg_own() {
  PG_OWN=$(mktemp -d /tmp/worldfs-pg.XXXXXX)
  PG_OWN_CONN=$("$ROOT/scripts/pg-server" start "$PG_OWN" $$) || fail "scripts/pg-server start failed"
}

if [ -z "${WORLDFS_PG:-}" ]; then pg_own; WORLDFS_PG=$PG_OWN_CONN; fi

# pg_db [CONNECTION]: a new empty database on the run's server (or CONNECTION's); prints its
# connection string.
pg_db() {
  local conn=${1:-$WORLDFS_PG} name
  name=t$$_$RANDOM$RANDOM
  "$PG_BIN/psql" -qAt "$conn" -c "CREATE DATABASE $name" >/dev/null || fail "CREATE DATABASE failed"
  sed -E "s/(^| )dbname=[^ ]*//; s/\$/ dbname=$name/" <<<"$conn"
}

# pg_sql CONNECTION SQL: runs SQL, prints the rows.
pg_sql() { "$PG_BIN/psql" -qAt "$1" -c "$2"; }

# pg_world NAME [CONNECTION]: a world the engine made (radius 2) whose map the engine moved into
# a new database; prints its folder. Its map.sqlite is kept as NAME.sqlite beside it.
pg_world() {
  local w db
  w=$(world "$1" 2)
  db=$(pg_db "${2:-$WORLDFS_PG}")
  echo "pgsql_connection = $db" >>"$w/world.mt"
  (cd "$w" && flock "$ENGINE_LOCK" /usr/games/minetestserver --world "$w" --migrate postgresql \
    --logfile "$T/migrate.log" >/dev/null 2>&1) || fail "engine --migrate postgresql failed"
  grep -q "Successfully migrated" "$T/migrate.log" || fail "the engine migrated nothing"
  mv "$w/map.sqlite" "$T/$1.sqlite"
  echo "$w"
}

# pg_blocks CONNECTION: every block as "x,y,z md5" lines, sorted (what the database holds).
pg_blocks() { pg_sql "$1" "SELECT posx||','||posy||','||posz||' '||md5(data) FROM blocks ORDER BY 1"; }

# conn_of WORLD: the world's pgsql_connection.
conn_of() { sed -n 's/^pgsql_connection = //p' "$1/world.mt"; }
