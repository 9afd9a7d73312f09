#!/bin/bash
# worldfs mount --snapshot beside a running server: the whole world as of one moment.
# The engine's server (minetestserver 5.6.1) runs the mod snapshot/snapcounter, which writes
# one counter, every server step, into node metadata in two distant blocks (-2,0,-2 and
# 5,0,5), both force-loaded; the engine saves every modified block in one transaction
# (ServerMap::save, between beginSave and endSave) every 0.3 s (server_map_save_interval).
# - A world in SQLite's WAL mode: a --read-only mount reads block A, then 2 s later block B
#   ahead of it (so the check below can fail); a --snapshot mount reads both equal, 2 s
#   apart, refuses writes, and rsync of it makes a backup holding that one moment, while
#   the server goes on saving (a --read-only mount beside it shows newer counters; the
#   server logs no "database is locked"). The backup, restored into a new world with
#   --create and rsync, loads in the engine with both counters.
# - A world in rollback-journal mode (SQLite's default) is refused, naming WAL; the world
#   is left in its mode.
# - The same as the first with the map and players in PostgreSQL (auth and mod storage
#   stay in SQLite, in WAL mode), the server running on it; its backup is restored into a
#   new SQLite world (but for world.mt, which names PostgreSQL).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/postgres.sh"
HERE=$(cd "$(dirname "$0")" && pwd)

# The servers this test started are stopped whatever happens, before its mounts and its
# PostgreSQL server; then the usual cleanup (a failure keeps its evidence).
SERVERS=()
snapshot_cleanup() {
  local rc=$? p m i
  set +e
  for p in "${SERVERS[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${SERVERS[@]}"; do
    for ((i = 0; i < 100; i++)); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null
  done
  for m in "${MOUNTS[@]}"; do fusermount3 -u -z "$m" 2>/dev/null; done
  if [ -n "$PG_OWN" ]; then "$ROOT/scripts/pg-server" stop "$PG_OWN"; fi
  (exit "$rc")
  cleanup
}
trap snapshot_cleanup EXIT

A=-2,0,-2/meta/5,5,5   # node -27,5,-27
B=5,0,5/meta/5,5,5     # node 85,5,85
counter() { cat "$1/blocks/$2/fields/counter"; }

# wal WORLD: every *.sqlite of WORLD switched to WAL mode (the server is not running).
wal() {
  local db
  for db in "$1"/*.sqlite; do
    assert_eq "$(sqlite3 "$db" 'PRAGMA journal_mode=WAL')" "wal" "WAL mode of $(basename "$db")"
  done
}

# serve WORLD PORT LOG: the engine's server on WORLD with the mod, in the background, holding
# the engine lock for its life; its pid in $SERVER. Returns once it counts.
serve() {
  local w=$1 port=$2 log=$3 i
  mkdir -p "$w/worldmods"
  cp -r "$HERE/snapshot/snapcounter" "$w/worldmods/"
  printf 'snapcounter = true\nserver_map_save_interval = 0.3\n' >"$T/server.conf"
  # The subshell execs the server (/usr/games/minetestserver execs the binary), which keeps
  # the locked descriptor 9: $! is the server's pid.
  ( flock 9; cd "$w"; exec /usr/games/minetestserver --world "$w" --config "$T/server.conf" \
      --port "$port" --logfile "$log" ) 9>"$ENGINE_LOCK" >/dev/null 2>&1 &
  SERVER=$!
  SERVERS+=("$SERVER")
  # The lock may be held by another test's engine run for a while.
  for ((i = 0; i < 3000; i++)); do
    grep -qa "snapcounter: counting from" "$log" 2>/dev/null && return
    kill -0 "$SERVER" 2>/dev/null || { tail -20 "$log" 2>/dev/null; fail "the server ended"; }
    sleep 0.2
  done
  fail "the server did not start counting in 10 minutes"
}

# stop_server: SIGTERM to $SERVER; waits for it (it saves and exits 0).
stop_server() {
  local rc=0
  kill -TERM "$SERVER"
  wait "$SERVER" || rc=$?
  assert_eq "$rc" 0 "the server's exit status"
}

# peek WORLD: "A B", the counters a fresh --read-only mount of WORLD shows (empty before the
# first save of them).
peek() {
  mount_world "$1" "$T/peek" --read-only
  echo "$(counter "$T/peek" "$A" 2>/dev/null) $(counter "$T/peek" "$B" 2>/dev/null)"
  unmount_world "$T/peek"
}

# snapshot_run NAME WORLD PORT [RSYNC_OPTION...]: the checks with a server running on WORLD;
# the options go to the rsync that restores the backup into a new (SQLite) world.
snapshot_run() {
  local name=$1 w=$2 port=$3 log=$T/$1-server.log
  local ro=$T/$1-ro snap=$T/$1-snap bk=$T/$1-backup new=$T/$1-restored mnt=$T/$1-mnt2
  local a b a2 first later i
  shift 3
  serve "$w" "$port" "$log"
  # The counters are saved (the first save may not have come yet) and advance.
  first=""
  for ((i = 0; i < 100; i++)); do
    later=$(peek "$w")
    if [[ "$later" =~ ^[0-9]+\ [0-9]+$ ]]; then
      [ -z "$first" ] && first=$later
      [ "${later% *}" -gt "${first% *}" ] && break
    fi
    sleep 0.3
  done
  [ -n "$first" ] && [ "${later% *}" -gt "${first% *}" ] \
    || fail "$name: the saved counters do not advance ($first, then $later)"
  echo "$name: saved counters advance: $first, then $later"

  # Without --snapshot, block B read 2 s after block A is ahead of it.
  mount_world "$w" "$ro" --read-only
  a=$(counter "$ro" "$A"); sleep 2; b=$(counter "$ro" "$B")
  unmount_world "$ro"
  [ "$b" -gt "$a" ] || fail "$name: --read-only read A=$a, then B=$b 2 s later: the test cannot tell a snapshot"
  echo "$name: --read-only: A=$a, 2 s later B=$b"

  # With --snapshot, both as of one moment; the mount refuses writes; rsync backs it up.
  mount_world "$w" "$snap" --snapshot
  a=$(counter "$snap" "$A"); sleep 2; b=$(counter "$snap" "$B")
  assert_eq "$b" "$a" "$name: --snapshot: B read 2 s after A"
  a2=$(counter "$snap" "$A")
  assert_eq "$a2" "$a" "$name: --snapshot: A read again"
  if echo 1 2>/dev/null >"$snap/blocks/$A/fields/counter"; then fail "$name: a write to the snapshot succeeded"; fi
  if mkdir "$snap/blocks/9,9,9" 2>/dev/null; then fail "$name: mkdir in the snapshot succeeded"; fi
  rsync -a --exclude=/index "$snap/" "$bk/" || fail "$name: rsync of the snapshot failed"
  assert_eq "$(counter "$bk" "$A")" "$a" "$name: backup's A"
  assert_eq "$(counter "$bk" "$B")" "$a" "$name: backup's B"
  # The server saved on while the snapshot was held: a mount beside it shows newer counters.
  later=$(peek "$w")
  [ "${later% *}" -gt "$a" ] && [ "${later#* }" -gt "$a" ] \
    || fail "$name: the server's saves stopped while the snapshot was held ($a, then $later)"
  kill -0 "$SERVER" || fail "$name: the server ended while the snapshot was held"
  echo "$name: --snapshot: A=$a, 2 s later B=$b, backup $a/$a; beside it, a later mount: $later"
  unmount_world "$snap"
  later=$(peek "$w")
  [ "${later% *}" -gt "$a" ] || fail "$name: no newer counters after the snapshot ($later)"

  stop_server
  if grep -ai "locked" "$log"; then fail "$name: the server logged a locked database"; fi

  # The backup restored into a new world; the engine loads both counters.
  mount_world "$new" "$mnt" --create
  rsync -a "$@" "$bk/" "$mnt/" || fail "$name: restoring the backup failed"
  unmount_world "$mnt"
  probe_area "$new" -27,5,-27 -27,5,-27 "-27,5,-27" >"$T/$name-probe-a"
  probe_area "$new" 85,5,85 85,5,85 "85,5,85" >"$T/$name-probe-b"
  for f in "$T/$name-probe-a" "$T/$name-probe-b"; do
    grep -q '^node [-0-9,]* default:mese ' "$f" || { cat "$f"; fail "$name: the engine does not see the restored node"; }
    assert_contains "$f" "  field counter=\"$a\"" "$name: the engine does not see the counter $a"
  done
  echo "$name: restored; the engine sees counter $a at both nodes"
}

# A world in rollback-journal mode (the default) is refused, naming WAL, and left as it was.
J=$(world journal 1)
assert_eq "$(sqlite3 "$J/map.sqlite" 'PRAGMA journal_mode')" "delete" "journal mode of a new world"
mkdir -p "$T/jmnt"
if "$WORLDFS" mount --log-file "$T/worldfs.log" --snapshot "$J" "$T/jmnt" 2>"$T/refused"; then
  MOUNTS+=("$T/jmnt")
  fail "--snapshot of a world in rollback-journal mode was mounted"
fi
cat "$T/refused"
assert_contains "$T/refused" "WAL"
if listed "$T/jmnt"; then fail "the refused mount is listed"; fi
for db in "$J"/*.sqlite; do
  assert_eq "$(sqlite3 "$db" 'PRAGMA journal_mode')" "delete" "journal mode of $(basename "$db") after the refusal"
done

# SQLite in WAL mode.
S=$(world sqlite 1)
wal "$S"
snapshot_run sqlite "$S" 30993

# PostgreSQL: the engine moves map and players there (before the server takes the lock).
P=$(world pg 1)
to_postgresql "$P"
wal "$P"
# The backup's world.mt names PostgreSQL: the new world keeps the one --create wrote.
snapshot_run pg "$P" 30994 --exclude=/world.mt
echo "ok"
