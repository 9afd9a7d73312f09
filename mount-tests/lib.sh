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
  for m in "${MOUNTS[@]}"; do
    if mountpoint -q "$m" 2>/dev/null; then fusermount3 -u -z "$m" 2>/dev/null || true; fi
  done
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
# CMD's failures are expected; the dead mount is cleared with `worldfs unmount`.
killed_at() {
  local at=$1 pid job
  shift
  pid=$(pgrep -f -- "--log-file $T/worldfs.log") || fail "daemon not found"
  [ "$(wc -w <<<"$pid")" -eq 1 ] || fail "several daemons: $pid"
  "$@" >/dev/null 2>&1 &
  job=$!
  sleep "$at"
  kill -9 "$pid"
  wait "$job" || true
  "$WORLDFS" unmount "$M" 2>"$T/unmount.err" || { cat "$T/unmount.err"; fail "worldfs unmount of the dead mount failed"; }
  mountpoint -q "$M" && fail "$M still mounted after the kill"
  return 0
}

# old_or_new FILE OLD NEW WHAT: FILE reads as OLD or as NEW.
old_or_new() {
  cmp -s "$1" "$2" || cmp -s "$1" "$3" || { diff "$2" "$1" | head -10; fail "$4: neither old nor new"; }
}

# fsynced_or_next FILE COUNTS WHAT: FILE holds "count K" where K is the last count in COUNTS
# (whose write an fsync returned for) or the one after it; "" stands for no count yet.
fsynced_or_next() {
  local last shown
  last=$(tail -n1 "$2" 2>/dev/null || true)
  shown=$(sed -n 's/^count \([0-9]*\).*/\1/p' "$1" | head -1)
  [ -n "$shown" ] || shown=""
  case "$shown" in
    "${last}") ;;
    "$((${last:-0} + 1))") ;;
    *) fail "$3: shows count [$shown], the last fsynced count was [$last]" ;;
  esac
  echo "$3: count ${shown:-none} (fsynced: ${last:-none})"
}
