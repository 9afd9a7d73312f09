# Shared helpers for the mount tests: real mounts driven with ordinary tools.
# Each test script sources this file, uses $T (its own temp folder) and calls the helpers.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SHARED=${WORLDFS_SHARED:-$ROOT/../shared}
WORLDFS=${WORLDFS:-$ROOT/target/release/worldfs}
TOOLS=$SHARED/tools/luanti
WORLD_CACHE=${WORLDFS_WORLD_CACHE:-$ROOT/target/mount-tests/worlds}
T=$(mktemp -d "${TMPDIR:-/tmp}/worldfs-test.XXXXXX")
export WORLDFS_STATE_DIR=$T/state
MOUNTS=()
BUSY=()

# A failing test keeps its evidence (worlds, disks, the daemon's log, check output) in a
# folder it names, under target/mount-test-failures/, instead of deleting it.
FAILURES=${WORLDFS_TEST_FAILURES:-$ROOT/target/mount-test-failures}
cleanup() {
  local rc=$?
  for p in "${BUSY[@]}"; do kill "$p" 2>/dev/null || true; done
  # Unmounted whether or not `mountpoint` still tells a mount (it does not tell a dead one:
  # "Transport endpoint is not connected").
  for m in "${MOUNTS[@]}"; do fusermount3 -u -z "$m" 2>/dev/null || true; done
  if [ "$rc" != 0 ] && mkdir -p "$FAILURES" 2>/dev/null; then
    local kept
    kept=$FAILURES/$(basename "$0" .sh).$(date +%Y%m%d-%H%M%S).$$
    # Links and special files are kept as they are; nothing is followed out of the folder.
    if mv "$T" "$kept" 2>/dev/null; then
      echo "evidence kept in $kept" >&2
      return
    fi
  fi
  rm -rf "$T"
}
trap cleanup EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }

# busy_cpu N: N processes that keep a core busy each until the test ends (a loaded machine,
# as a user's or CI's is: crash tests must hold under it).
busy_cpu() {
  local i
  for ((i = 0; i < $1; i++)); do
    # Each ends with the test, even one killed without its cleanup.
    bash -c "while kill -0 $$ 2>/dev/null; do :; done" &
    BUSY+=($!)
    disown $!  # a bare `wait` of the test waits for its own jobs, not for these
  done
}

# engine_run CMD...: runs an engine script holding the machine-wide engine lock (mkworld.sh and
# probe.sh use fixed UDP ports, so two runs at once collide); retries once on a port clash.
# The engine uses fixed ports and locks: every engine run on this machine takes this lock.
ENGINE_LOCK=${WORLDFS_ENGINE_LOCK:-/tmp/worldfs-engine.lock}
engine_run() {
  local out rc attempt err=$T/engine.err
  for attempt in 1 2; do
    rc=0
    out=$(flock "$ENGINE_LOCK" "$@" 2>"$err") || rc=$?
    if [ "$attempt" = 1 ] && grep -q -e "Failed to bind" -e "PROBE FAILED" <<<"$out$(cat "$err")"; then
      echo "engine run failed (port clash?), retrying: $*" >&2
      sleep 2; continue
    fi
    break
  done
  printf '%s\n' "$out"
  cat "$err" >&2
  return "$rc"
}

# world NAME RADIUS [player_backend] [auth_backend]: path of a generated world (made once,
# cached) copied into $T/NAME.
world() {
  local name=$1 radius=$2 pb=${3:-sqlite3} ab=${4:-sqlite3}
  local cached=$WORLD_CACHE/r$radius-$pb-$ab
  if [ ! -f "$cached/map.sqlite" ]; then
    mkdir -p "$WORLD_CACHE"
    local lock=$WORLD_CACHE/.lock
    (
      flock 9
      if [ ! -f "$cached/map.sqlite" ]; then
        engine_run "$TOOLS/mkworld.sh" "$cached.tmp" "$radius" "$pb" "$ab" >/dev/null
        [ -f "$cached.tmp/map.sqlite" ] || { echo "mkworld.sh made no map.sqlite" >&2; exit 1; }
        rm -rf "$cached"; mv "$cached.tmp" "$cached"
      fi
    ) 9>"$lock"
  fi
  rm -rf "${T:?}/$name"; cp -a "$cached" "$T/$name"
  echo "$T/$name"
}

# mount_world SOURCE MOUNTPOINT [options...]
mount_world() {
  local src=$1 mnt=$2; shift 2
  mkdir -p "$mnt"
  "$WORLDFS" mount --log-file "$T/worldfs.log" "$@" "$src" "$mnt" || fail "mount $src failed"
  MOUNTS+=("$mnt")
}

unmount_world() { "$WORLDFS" unmount "$1" || fail "unmount $1 failed"; }

# unmount_unsaved MOUNTPOINT PATH...: unmounts a mount holding text no commit took at each
# PATH: `worldfs unmount` must exit non-zero and name each one with where it was saved.
unmount_unsaved() {
  local m=$1 p; shift
  if "$WORLDFS" unmount "$m" 2>"$T/unmount.err"; then fail "unmount $m exited 0 with text not committed"; fi
  mountpoint -q "$m" && fail "$m still mounted"
  for p in "$@"; do
    assert_contains "$T/unmount.err" "not committed: $p (saved in $WORLDFS_STATE_DIR/unsaved/"
  done
}

# probe WORLD: the engine's view of the area mkworld builds in, plus the special nodes.
probe() {
  probe_area "$1" -32,-32,-32 31,31,31 "1,10,1;2,10,1;3,10,1;0,0,0;17,10,1"
}

# probe_area WORLD X1,Y1,Z1 X2,Y2,Z2 [POINTS]: the engine's view of one area (probe.sh).
probe_area() {
  engine_run "$TOOLS/probe.sh" "$@" 2>/dev/null
}

assert_eq() { [ "$1" == "$2" ] || fail "${3:-values differ}: expected [$2], got [$1]"; }
assert_contains() { grep -qF -- "$2" "$1" || fail "${3:-$1 lacks [$2]}"; }
assert_not_contains() { if grep -qF -- "$2" "$1"; then fail "${3:-$1 contains [$2]}"; fi; }
sha() { sha256sum "$1" | cut -d' ' -f1; }

# mese_variant SRC DST: writes to DST the nodes.cubeset SRC with its first node of level 0
# set to default:mese (a new palette entry `~`): a different, valid text of the same block.
mese_variant() {
  python3 - "$1" "$2" <<'PY'
import sys
lines = open(sys.argv[1]).read().split("\n")
d = next(i for i, l in enumerate(lines) if l.strip() == "BlockDefinitions =")
lines.insert(d + 2, '\t\t\t\t"~: default:mese: 0",')
r = next(i for i, l in enumerate(lines) if l.strip() == "-- Level 0") + 1
q = lines[r].index('"')
lines[r] = lines[r][:q + 1] + "~" + lines[r][q + 2:]
open(sys.argv[2], "w").write("\n".join(lines))
PY
}

# --- Kill sweeps (84, 86): a run timed unkilled, then killed at moments spread over it ---

# seconds CMD...: how long CMD takes (it must succeed).
seconds() {
  local start end
  start=$(date +%s.%N)
  "$@" || fail "unkilled: $* failed"
  end=$(date +%s.%N)
  awk -v s="$start" -v e="$end" 'BEGIN { printf "%.3f", e - s }'
}

# moments SECONDS [N]: N (by default $N) kill moments spread evenly over SECONDS.
moments() { awk -v d="$1" -v n="${2:-$N}" 'BEGIN { for (k = 1; k <= n; k++) printf "%.3f ", d * k / (n + 1) }'; }

# killed_at SECONDS CMD...: CMD runs against the mount at $M; the daemon is killed SECONDS in;
# CMD's failures are expected; the dead mount is cleared with `worldfs unmount`. Once killed,
# the daemon ends, and CMD with it (its calls fail): if either still runs 30 s later, the
# test fails with what the kernel says of them (see stuck_after_kill).
killed_at() {
  local at=$1 pid job
  shift
  pid=$(pgrep -f -- "--log-file $T/worldfs.log") || fail "daemon not found"
  [ "$(wc -w <<<"$pid")" -eq 1 ] || fail "several daemons: $pid"
  "$@" >/dev/null 2>&1 &
  job=$!
  sleep "$at"
  kill -9 "$pid"
  ended_after_kill "$pid" "$job" "$*"
  wait "$job" || true
  if listed "$M"; then
    "$WORLDFS" unmount "$M" 2>"$T/unmount.err" || { cat "$T/unmount.err"; fail "worldfs unmount of the dead mount failed"; }
  fi
  ! listed "$M" || fail "$M still mounted after the kill"
}

# ended_after_kill DAEMON JOB WHAT: waits for the killed daemon and the command WHAT (JOB)
# running against its mount to end. A daemon killed while a thread of it waited in the
# kernel on a page that the command's write holds cannot end, nor can the command: after
# 30 s `worldfs unmount` aborts the connection of such a daemon; if that does not end them
# either, the test fails (stuck_after_kill).
ended_after_kill() {
  local pid=$1 job=$2 what=$3 i
  for ((i = 0; i < 300; i++)); do
    task_alive "/proc/$job" || threads_alive "$pid" || break
    sleep 0.1
  done
  if task_alive "/proc/$job" || threads_alive "$pid"; then
    echo "30 s after the kill, the daemon or the command still runs: worldfs unmount" >&2
    "$WORLDFS" unmount "$M" 2>&1 | sed 's/^/  /' >&2 || true
    for ((i = 0; i < 100; i++)); do
      task_alive "/proc/$job" || threads_alive "$pid" || break
      sleep 0.1
    done
    if task_alive "/proc/$job" || threads_alive "$pid"; then stuck_after_kill "$pid" "$job" "$what"; fi
  fi
}

# one_transaction OLD NEW GOT: GOT, OLD and NEW "pos hash" lists of every block, say whether
# every block of GOT is as in OLD or as in NEW, all old or all new (one transaction), no
# block added or lost and none changed that NEW does not change. Prints "old" or "new";
# else the reason, and fails.
one_transaction() {
  python3 - "$1" "$2" "$3" 2>&1 <<'PY'
import sys
old, new, got = (dict(l.split() for l in open(f)) for f in sys.argv[1:4])
if set(got) != set(old):
    sys.exit(f"blocks added or lost: {sorted(set(got) ^ set(old))[:10]}")
states = {"old": 0, "new": 0}
for pos, h in got.items():
    if old[pos] == new[pos]:
        if h != old[pos]:
            sys.exit(f"block {pos}, which the rename does not change, changed")
    elif h == old[pos]:
        states["old"] += 1
    elif h == new[pos]:
        states["new"] += 1
    else:
        sys.exit(f"block {pos} is neither old nor new")
if states["old"] and states["new"]:
    sys.exit(f"{states['old']} blocks old and {states['new']} new: not one transaction")
print("new" if states["new"] else "old")
PY
}

# listed DIR: a mount (alive or dead: `mountpoint` does not tell a dead FUSE mount) is at DIR.
listed() { awk -v m="$1" '$5 == m { found = 1 } END { exit !found }' /proc/self/mountinfo; }

# task_state DIR: the state letter of the task at DIR (/proc/PID or /proc/PID/task/TID);
# nothing once it is gone.
task_state() { sed -n 's/^.*) \(.\).*/\1/p' "$1/stat" 2>/dev/null || true; }
# task_alive DIR: the task at DIR has not ended (a zombie has).
task_alive() { case $(task_state "$1") in "" | Z | X) return 1 ;; esac; }
# threads_alive PID: some thread of process PID has not ended.
threads_alive() {
  local t
  for t in /proc/"$1"/task/*; do task_alive "$t" && return 0; done
  return 1
}

# stuck_after_kill DAEMON JOB WHAT: the daemon killed 30 s ago, or the command WHAT (JOB and
# the processes it started), has not ended: their threads' states and kernel stacks go to
# $T/stuck.txt and stderr; the mount's FUSE connection is aborted (umount -f), which ends
# requests that nothing else ends, so that the test can end; then it fails.
stuck_after_kill() {
  local daemon=$1 job=$2 what=$3 i
  (
    set +e
    all=$job
    for ((i = 0; i < 5; i++)); do all="$job $(for p in $all; do pgrep -P "$p"; done)"; done
    date
    echo "the daemon ($daemon), killed 30 s ago:"
    for t in /proc/"$daemon"/task/*; do
      [ -e "$t" ] || continue
      echo "  thread $(basename "$t") $(cat "$t/comm") state $(task_state "$t")"
      sed 's/^/    /' "$t/stack"
    done
    echo "the command ($what):"
    for p in $(tr ' ' '\n' <<<"$all" | sort -un); do
      task_alive "/proc/$p" || continue
      echo "  $p $(tr '\0' ' ' <"/proc/$p/cmdline") state $(task_state "/proc/$p")"
      sed 's/^/    /' "/proc/$p/stack"
      ls -l "/proc/$p/fd" | grep -F -- "$M" | sed 's/^/    /'
    done
  ) >"$T/stuck.txt" 2>&1 || true
  cat "$T/stuck.txt" >&2
  umount -f "$M" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do task_alive "/proc/$job" || break; sleep 0.1; done
  fail "30 s after the daemon was killed, it or the command ($what) still runs: see stuck.txt"
}

# old_or_new FILE OLD NEW WHAT: FILE reads as OLD or as NEW.
old_or_new() {
  cmp -s "$1" "$2" || cmp -s "$1" "$3" || { diff "$2" "$1" | head -10; fail "$4: neither old nor new"; }
}

# fsynced_or_next FILE COUNTS WHAT [START]: FILE holds "count K" where K is the last count in
# COUNTS (whose write an fsync returned for) or the one after it; "" stands for no count.
# With nothing fsynced yet, the last count is START, the count FILE held before the run
# (a round that starts from the state the previous one left and is killed before its first
# fsync returned shows that state).
fsynced_or_next() {
  local last shown
  last=$(tail -n1 "$2" 2>/dev/null || true)
  shown=$(sed -n 's/^count \([0-9]*\).*/\1/p' "$1" | head -1)
  [ -n "$shown" ] || shown=""
  case "$shown" in
    "${last:-${4:-}}") ;;
    "$((${last:-0} + 1))") ;;
    *) fail "$3: shows count [$shown], the last fsynced count was [$last]" ;;
  esac
  echo "$3: count ${shown:-none} (fsynced: ${last:-none})"
}

# --- Helpers of the backend sweeps (86, 87) ---

# checked WORLD WHAT: `worldfs check` passes; so does SQLite's integrity check of every
# *.sqlite of the world.
checked() {
  local db
  "$WORLDFS" check "$1" >"$T/check.out" 2>&1 || { cat "$T/check.out"; fail "$2: worldfs check fails"; }
  grep -q ', 0 broken' "$T/check.out" || { cat "$T/check.out"; fail "$2: worldfs check reports broken blocks"; }
  for db in "$1"/*.sqlite; do
    [ -e "$db" ] || continue
    assert_eq "$(sqlite3 "$db" 'PRAGMA integrity_check')" "ok" "$2: integrity of $(basename "$db")"
  done
}

# exact BACKUP MOUNT WHAT [RSYNC_OPTION...]: another `rsync -a` from BACKUP would change
# nothing in MOUNT (times, sizes, modes; with -c, contents too): both dry runs list nothing.
exact() {
  local b=$1 m=$2 what=$3
  shift 3
  rsync -a -i --dry-run "$@" "$b/" "$m/" >"$T/dry" || fail "$what: dry run failed"
  rsync -a -i --dry-run -c "$@" "$b/" "$m/" >>"$T/dry" || fail "$what: checksum dry run failed"
  if [ -s "$T/dry" ]; then head -20 "$T/dry"; fail "$what: $(wc -l <"$T/dry") entries differ"; fi
}

# trim_map WORLD X1,Y1,Z1 X2,Y2,Z2: every block of WORLD's map.sqlite outside the box of block
# positions removed (a smaller world, for runs that must stay short).
trim_map() {
  python3 - "$1/map.sqlite" "$2" "$3" <<'PY' || fail "trimming $1/map.sqlite failed"
import sqlite3, sys
lo, hi = ([int(v) for v in a.split(",")] for a in sys.argv[2:4])
def unsigned_to_signed(v):
    return v - 4096 if v >= 2048 else v
def split(pos):
    # The engine's getIntegerAsBlock (src/database/database.cpp).
    x = unsigned_to_signed(pos % 4096); pos = (pos - x) // 4096
    y = unsigned_to_signed(pos % 4096); pos = (pos - y) // 4096
    return x, y, unsigned_to_signed(pos % 4096)
db = sqlite3.connect(sys.argv[1])
drop = [(pos,) for (pos,) in db.execute("SELECT pos FROM blocks")
        if not all(l <= c <= h for c, l, h in zip(split(pos), lo, hi))]
db.executemany("DELETE FROM blocks WHERE pos = ?", drop)
db.commit()
db.execute("VACUUM")
PY
}

# to_leveldb WORLD: WORLD's map and players moved into LevelDB by the engine itself (--migrate,
# --migrate-players); their *.sqlite removed.
to_leveldb() {
  local what
  for what in "" -players; do
    engine_run /usr/games/minetestserver --world "$1" --migrate$what leveldb --logfile "$T/migrate.log" >/dev/null 2>"$T/migrate.err" \
      || { cat "$T/migrate.err"; fail "engine --migrate$what leveldb failed"; }
  done
  grep -q '^backend = leveldb' "$1/world.mt" || fail "the engine did not move the map into LevelDB"
  grep -q '^player_backend = leveldb' "$1/world.mt" || fail "the engine did not move the players into LevelDB"
  rm "$1/map.sqlite" "$1/players.sqlite"
}

# stop_servers: the test's exit trap where it starts servers: its Redis server (at $RD) and
# its own PostgreSQL server ($PG_OWN, if it started one) are stopped whatever happens, then
# the usual cleanup (a failure keeps its evidence).
stop_servers() {
  local rc=$?
  set +e
  "$ROOT/scripts/redis-server" stop "$RD"
  if [ -n "${PG_OWN:-}" ]; then "$ROOT/scripts/pg-server" stop "$PG_OWN"; fi
  (exit "$rc")
  cleanup
}

# to_redis WORLD SOCKET: WORLD's map blocks put in the hash `world` of the Redis server at
# SOCKET (as the engine writes them: decimal position, the blob); its map.sqlite removed and
# world.mt naming the hash.
to_redis() {
  python3 - "$1/map.sqlite" "$T/blocks.resp" <<'PY'
import sqlite3, sys
out = open(sys.argv[2], "wb")
for pos, data in sqlite3.connect(sys.argv[1]).execute("SELECT pos, data FROM blocks"):
    args = [b"HSET", b"world", str(pos).encode(), bytes(data)]
    out.write(b"*%d\r\n" % len(args))
    for a in args:
        out.write(b"$%d\r\n%s\r\n" % (len(a), a))
PY
  redis-cli -s "$2" --pipe <"$T/blocks.resp" >/dev/null || fail "filling the hash failed"
  assert_eq "$(redis-cli -s "$2" hlen world)" "$(sqlite3 "$1/map.sqlite" 'SELECT count(*) FROM blocks')" "blocks in the hash"
  rm "$1/map.sqlite"
  sed -i 's/^backend = .*/backend = redis/' "$1/world.mt"
  printf 'redis_address = %s\nredis_hash = world\n' "$2" >>"$1/world.mt"
}

# to_postgresql WORLD (postgres.sh sourced): WORLD's map and players moved by the engine into a
# new database of the run's server (--migrate, --migrate-players; as pg_world, 64); its
# map.sqlite and players.sqlite removed.
to_postgresql() {
  local db
  db=$(pg_db)
  printf 'pgsql_connection = %s\npgsql_player_connection = %s\n' "$db" "$db" >>"$1/world.mt"
  engine_run /usr/games/minetestserver --world "$1" --migrate postgresql --logfile "$T/migrate.log" >/dev/null 2>"$T/migrate.err" \
    || { cat "$T/migrate.err"; fail "engine --migrate postgresql failed"; }
  grep -q "Successfully migrated" "$T/migrate.log" || fail "the engine migrated nothing"
  engine_run /usr/games/minetestserver --world "$1" --migrate-players postgresql --logfile "$T/migrate.log" >/dev/null 2>"$T/migrate.err" \
    || { cat "$T/migrate.err"; fail "engine --migrate-players postgresql failed"; }
  grep -q '^backend = postgresql' "$1/world.mt" || fail "the engine did not move the map into PostgreSQL"
  grep -q '^player_backend = postgresql' "$1/world.mt" || fail "the engine did not move the players into PostgreSQL"
  rm "$1/map.sqlite" "$1/players.sqlite"
}
