#!/bin/bash
# Issue 13, crash safety of index/ renames: SIGKILL of the daemon in the middle of a
# `mv index/blocks/A index/blocks/B` over a region world (one commit over several region
# files, through Regions.worldfs-journal) and over a Chunks.dat world (one redo journal), and
# of a Terrarum tile rename (the disk rewritten and renamed over): after the next read-write
# mount every file of the world is all old or all new (never a mix of regions), `worldfs
# check` passes, and the index shows the block where it was or where it went, never both.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/survivalcraft.sh"
. "$(dirname "$0")/tvda.sh"

M=$T/mnt
# Both cores kept busy by other processes the whole time: the kills land as they do on a
# loaded machine.
busy_cpu 3
DELAYS="0 0.001 0.005 0.03 0.08 0.11 0.13"
APPLY_DELAYS="0 0 0 0.0002 0.0005 0.001 0.002 0.004"

# kill_when PID PATTERN DELAY [changed]: kills PID with SIGKILL DELAY seconds after a file
# matching the glob PATTERN appears (polled without sleeping), or with `changed`, after the
# file PATTERN names changes (size or time: the commit has begun writing into it); or when
# nothing happens within 10 s. It returns once the watcher runs (the watcher goes on in the
# background).
kill_when() {
  rm -f "$T/watching"
  python3 - "$1" "$2" "$3" "${4:-}" "$T/watching" <<'PY' &
import glob, os, signal, sys, time
pid, pattern, delay, mode, ready = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), sys.argv[4], sys.argv[5]
def state():
    st = os.stat(pattern)
    return (st.st_size, st.st_mtime_ns)
first = state() if mode == "changed" else None
open(ready, "w").close()
end = time.time() + 10
if mode == "changed":
    while state() == first and time.time() < end:
        pass
else:
    while not glob.glob(pattern) and time.time() < end:
        pass
time.sleep(delay)
os.kill(pid, signal.SIGKILL)
PY
  while [ ! -e "$T/watching" ]; do sleep 0.01; done
}

daemon() { pgrep -f -- "--log-file $T/worldfs.log" || fail "daemon not found"; }

# world_files WORLD: a hash of every world file (the journal and worldfs leftovers apart).
world_files() { tree_sha "$1" | grep -v worldfs | sha256sum | cut -d' ' -f1; }

# crash_renames SAMPLE JOURNAL [IN_PLACE]: the rename of the block held by the most chunks,
# killed at several moments of its commit: after the journal appears, and where the commit
# writes into the chunk file IN_PLACE (Chunks.dat), after that file starts changing (the
# journal's apply, which a kill may cut in the middle of a record).
crash_renames() {
  local sample=$1 journal=$2 in_place=${3:-} round=0 old new a delay moment
  W=$(sc_copy "$sample" ref)
  old=$(world_files "$W")
  mount_world "$W" "$M"
  a=$(for id in $(ls "$M/index/blocks"); do echo "$(ls "$M/index/blocks/$id" | wc -l) $id"; done | sort -n | tail -1 | cut -d' ' -f2)
  ls "$M/index/blocks/$a" >"$T/holders"
  mv "$M/index/blocks/$a" "$M/index/blocks/200" || fail "mv without a crash"
  unmount_world "$M"
  new=$(world_files "$W")
  [ "$old" != "$new" ] || fail "the rename changed nothing"
  moments=$(for d in $DELAYS; do echo "journal:$d"; done)
  [ -n "$in_place" ] && moments="$moments $(for d in $APPLY_DELAYS; do echo "apply:$d"; done)"
  for moment in $moments; do
    round=$((round + 1))
    delay=${moment#*:}
    W=$(sc_copy "$sample" crash)
    mount_world "$W" "$M"
    ls "$M/index/blocks/$a" >/dev/null
    case $moment in
      journal:*) kill_when "$(daemon)" "$W/$journal" "$delay" ;;
      apply:*) kill_when "$(daemon)" "$W/$in_place" "$delay" changed ;;
    esac
    mv "$M/index/blocks/$a" "$M/index/blocks/200" 2>/dev/null || true
    wait
    fusermount3 -u -z "$M" 2>/dev/null || true
    # The next read-write mount finishes or drops what the crash left.
    seen=$(grep -c "interrupted commit" "$T/worldfs.log" || true)
    mount_world "$W" "$M"
    ls "$M" >/dev/null
    replayed=no
    [ "$(grep -c "interrupted commit" "$T/worldfs.log" || true)" != "$seen" ] && replayed=yes
    if [ -n "$(ls "$M/index/blocks/200" 2>/dev/null)" ]; then state=new; else state=old; fi
    if [ $state = new ]; then
      [ -e "$M/index/blocks/$a" ] && fail "round $round: block $a and 200 both held"
      ls "$M/index/blocks/200" | cmp -s - "$T/holders" || fail "round $round: 200 is not where $a was"
    else
      ls "$M/index/blocks/$a" | cmp -s - "$T/holders" || fail "round $round: $a is not where it was"
    fi
    unmount_world "$M"
    [ -e "$W/$journal" ] && fail "round $round: the journal was left behind"
    case $(world_files "$W") in
      "$old") [ $state = old ] || fail "round $round: files old, index new" ;;
      "$new") [ $state = new ] || fail "round $round: files new, index old" ;;
      *) tree_sha "$W"; fail "round $round: the world is neither all old nor all new" ;;
    esac
    sc_check "$W"
    echo "round $round (kill $delay s after the ${moment%%:*} began): $state, journal replayed: $replayed"
  done
}

# ---- a 2.3 region world: the commit spans both region files ----
crash_renames "$REGIONS" Regions.worldfs-journal
# ---- a 1.27 Chunks.dat world ----
U=$(sc_unpack "$SCWORLD" unpacked)
crash_renames "$(find "$U" -name Chunks.dat -printf '%h\n' | head -1)" Chunks.dat.worldfs-journal Chunks.dat

# ---- Terrarum: a tile rename killed while the new disk is written ----
D0=$(fixture world)
round=0
for delay in $DELAYS; do
  round=$((round + 1))
  D=$T/crash.tvda
  cp "$D0" "$D"
  mount_world "$D" "$M"
  ls "$M/index/tiles/basegame:2" | sort >"$T/t2"
  ls "$M/index/tiles/basegame:1" | sort >"$T/t1"
  # The new disk is written to a temporary file beside it, then renamed over it.
  kill_when "$(daemon)" "$T/.worldfs-crash.tvda.*.tmp" "$delay"
  mv "$M/index/tiles/basegame:2" "$M/index/tiles/basegame:1" 2>/dev/null || true
  wait
  fusermount3 -u -z "$M" 2>/dev/null || true
  check_ok "$D"
  mount_world "$D" "$M"
  if [ -e "$M/index/tiles/basegame:2" ]; then
    ls "$M/index/tiles/basegame:2" | sort | cmp -s - "$T/t2" || fail "tvda round $round: basegame:2 moved in part"
    ls "$M/index/tiles/basegame:1" | sort | cmp -s - "$T/t1" || fail "tvda round $round: basegame:1 changed in part"
  else
    sort -u "$T/t1" "$T/t2" | cmp -s - <(ls "$M/index/tiles/basegame:1" | sort) || fail "tvda round $round: basegame:1 is not where both were"
  fi
  unmount_world "$M"
  ls -A "$T" | grep -q 'worldfs-crash.tvda.*tmp' && fail "tvda round $round: a temporary disk was left behind"
done
echo ok
