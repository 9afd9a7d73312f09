#!/bin/bash
# Rename kill sweeps under load on the other Luanti backends (issue 35, after 86's SQLite
# one): the radius-8 engine world of 86 with its map in LevelDB (moved by the engine), in
# Redis (a hash of a throwaway server) and in PostgreSQL (a database of a throwaway server,
# moved by the engine); the node in the most blocks is renamed onto the next one with
# `mv index/nodes/SRC index/nodes/DST` (a rewrite of most blocks), timed unkilled on a copy of
# the store, then killed (SIGKILL of the daemon) at N moments spread over that run
# (N = KILL_SWEEP_RENAME, 3 by default), and inside its transaction (as soon as the daemon's
# log, -v, tells the blocks to rename, and tells 1024 of them read, while the edited ones
# stream into the store's transaction), each on a fresh copy of the store (the folder, a copy
# of the hash, a database made from the first as template), both cores kept busy by other
# processes. After each kill `worldfs check` passes, and every block's stored bytes, read
# from the store itself and not through worldfs (LevelDB through Debian's libleveldb, the
# library the engine links, from Python; Redis by a script on the server; PostgreSQL with
# psql), are as before or as the unkilled rename wrote them, and all old or all new
# (docs/tree.md "index/": one transaction; docs/backends.md: a LevelDB commit is one synced
# write batch, a Redis one a MULTI/EXEC); through a new mount index/nodes/DST lists that state and
# three sample blocks read it; a second rename completes the work exactly (the stored bytes
# those of the unkilled rename). On Redis an unkilled rename is also watched with the server's
# MONITOR: one HSET per changed block, all run by one EXEC, nothing between them, no other
# transaction. The engine loads the last killed LevelDB and PostgreSQL worlds (it has no
# Redis) and sees in a sample block (one it generated, not loaded again as mapgen's shell)
# the original's nodes with SRC counted as DST.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/postgres.sh"

RD=$T/redis
trap stop_servers EXIT

M=$T/mnt
NR=${KILL_SWEEP_RENAME:-3}
ROUND=0

rename_node() { mv "$M/index/nodes/$SRC" "$M/index/nodes/$DST"; }

# --- The world, its rename and the engine's view of a sample block ---------------------------
W0=$(world ren 8)
mount_world "$W0" "$M"
for n in $(ls "$M/index/nodes"); do echo "$(ls "$M/index/nodes/$n" | wc -l) $n"; done | sort -rn >"$T/names"
# The node in the most blocks renamed onto the next one (as 86: the two merge where both are
# held); the engine's world is random, so the names are taken from it.
grep -vE ' (air|ignore)$' "$T/names" | head -2 >"$T/pair"
SRC=$(sed -n '1s/.* //p' "$T/pair"); DST=$(sed -n '2s/.* //p' "$T/pair")
[ -n "$DST" ] || fail "fewer than two node names: $(cat "$T/names")"
ls "$M/index/nodes/$SRC" | sort >"$T/src.old"
ls "$M/index/nodes/$DST" | sort >"$T/dst.old"
sort -u "$T/src.old" "$T/dst.old" >"$T/dst.new"
# Three blocks holding SRC, read before and after: their texts old and new.
SAMPLES=$(awk 'NR == 1 || NR == int(n / 2) || NR == n' n="$(wc -l <"$T/src.old")" "$T/src.old")
for b in $SAMPLES; do cp "$M/blocks/$b/nodes.cubeset" "$T/sample.$b.old"; done
NBLOCKS=$(ls "$M/blocks" | wc -l)
# The block the engine probes: the middle one of those holding SRC that the engine
# generated. A block of the shell mapgen writes around a map chunk is stored marked not
# generated (block.txt "generated = false"), and the engine generates it again from the seed
# when it is loaded, so it would show mapgen's nodes, not the stored ones.
while read -r b; do
  grep -q '^generated = true ' "$M/blocks/$b/block.txt" && echo "$b"
done <"$T/src.old" >"$T/src.generated"
[ -s "$T/src.generated" ] || fail "no block holding $SRC is marked generated"
unmount_world "$M"
# The engine's view of that block (its 16^3 nodes) in the SQLite original.
PB=$(sed -n "$(( ($(wc -l <"$T/src.generated") + 1) / 2 ))p" "$T/src.generated")
IFS=, read -r bx by bz <<<"$PB"
P1=$((bx * 16)),$((by * 16)),$((bz * 16)); P2=$((bx * 16 + 15)),$((by * 16 + 15)),$((bz * 16 + 15))
probe_area "$W0" "$P1" "$P2" >"$T/probe.orig" || { cat "$T/probe.orig"; fail "probe of the original world failed"; }
grep -q "^count $SRC " "$T/probe.orig" || { cat "$T/probe.orig"; fail "the engine sees no $SRC in block $PB"; }
echo "rename of $SRC ($(wc -l <"$T/src.old") blocks) onto $DST ($(wc -l <"$T/dst.old") blocks) of $NBLOCKS; samples $(echo $SAMPLES); the engine probes block $PB"

# --- The three stores (set up before the load) -----------------------------------------------
WL=$(world ldb 8)
to_leveldb "$WL"
SOCK=$("$ROOT/scripts/redis-server" start "$RD") || fail "redis-server did not start"
WR=$(world red 8)
to_redis "$WR" "$SOCK"
WP=$(world pg 8)
to_postgresql "$WP"

busy_cpu 3

# fresh BACKEND FROM TO: TO a world of BACKEND whose map holds FROM's blocks as they are now,
# in a store of its own: for LevelDB a copy of the folder, for Redis a copy of the hash (COPY
# on the server), for PostgreSQL a new database with FROM's as template (players too).
fresh() {
  local from=$2 to=$3 name conn old
  ROUND=$((ROUND + 1))
  rm -rf "$to"; cp -a "$from" "$to"
  case $1 in
    redis)
      name=ren$ROUND
      assert_eq "$(redis-cli -s "$SOCK" COPY "$(sed -n 's/^redis_hash = //p' "$from/world.mt")" "$name")" 1 "COPY of the hash"
      sed -i "s/^redis_hash = .*/redis_hash = $name/" "$to/world.mt"
      ;;
    postgresql)
      conn=$(conn_of "$from")
      old=$(sed -n 's/.*dbname=\([^ ]*\).*/\1/p' <<<"$conn")
      name=${old}_r$ROUND
      pg_sql "$WORLDFS_PG" "CREATE DATABASE $name TEMPLATE $old" >/dev/null || fail "copying database $old failed"
      conn=$(sed -E "s/(^| )dbname=[^ ]*//; s/\$/ dbname=$name/" <<<"$conn")
      sed -i -e "s|^pgsql_connection = .*|pgsql_connection = $conn|" \
        -e "s|^pgsql_player_connection = .*|pgsql_player_connection = $conn|" "$to/world.mt"
      ;;
  esac
}

# blobs BACKEND WORLD OUT: every block of WORLD's map as "position digest" lines, sorted, read
# from the store itself (not through worldfs).
blobs() {
  case $1 in
    leveldb)
      # Through the C API of Debian's libleveldb (the library the engine links), checksums
      # verified.
      python3 - "$2/map.db" >"$3" <<'PY' || fail "reading the LevelDB blocks of $2"
import ctypes, ctypes.util, hashlib, sys
lib = ctypes.CDLL(ctypes.util.find_library("leveldb") or "libleveldb.so.1d")
vp, ub, err_t, len_t = ctypes.c_void_p, ctypes.c_ubyte, ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_size_t)
for f, res, args in [
    ("leveldb_options_create", vp, []), ("leveldb_options_set_paranoid_checks", None, [vp, ub]),
    ("leveldb_open", vp, [vp, ctypes.c_char_p, err_t]), ("leveldb_readoptions_create", vp, []),
    ("leveldb_readoptions_set_verify_checksums", None, [vp, ub]), ("leveldb_create_iterator", vp, [vp, vp]),
    ("leveldb_iter_seek_to_first", None, [vp]), ("leveldb_iter_valid", ub, [vp]),
    ("leveldb_iter_key", vp, [vp, len_t]), ("leveldb_iter_value", vp, [vp, len_t]),
    ("leveldb_iter_next", None, [vp]), ("leveldb_iter_get_error", None, [vp, err_t]),
    ("leveldb_iter_destroy", None, [vp]), ("leveldb_close", None, [vp])]:
    fn = getattr(lib, f); fn.restype = res; fn.argtypes = args
opts = lib.leveldb_options_create()
lib.leveldb_options_set_paranoid_checks(opts, 1)
err = ctypes.c_char_p()
db = lib.leveldb_open(opts, sys.argv[1].encode(), ctypes.byref(err))
if err.value:
    sys.exit(f"leveldb_open: {err.value.decode()}")
ro = lib.leveldb_readoptions_create()
lib.leveldb_readoptions_set_verify_checksums(ro, 1)
it = lib.leveldb_create_iterator(db, ro)
lib.leveldb_iter_seek_to_first(it)
out, n = [], ctypes.c_size_t()
while lib.leveldb_iter_valid(it):
    key = ctypes.string_at(lib.leveldb_iter_key(it, ctypes.byref(n)), n.value)
    value = ctypes.string_at(lib.leveldb_iter_value(it, ctypes.byref(n)), n.value)
    out.append(f"{key.decode()} {hashlib.md5(value).hexdigest()}")
    lib.leveldb_iter_next(it)
lib.leveldb_iter_get_error(it, ctypes.byref(err))
if err.value:
    sys.exit(f"iterating: {err.value.decode()}")
lib.leveldb_iter_destroy(it)
lib.leveldb_close(db)
print("\n".join(sorted(out)))
PY
      ;;
    redis)
      # A script on the server: each field of the hash with the SHA-1 of its value.
      redis-cli -s "$SOCK" --raw EVAL "local r = {} local a = redis.call('HGETALL', KEYS[1])
        for i = 1, #a, 2 do r[#r + 1] = a[i] .. ' ' .. redis.sha1hex(a[i + 1]) end return r" \
        1 "$(sed -n 's/^redis_hash = //p' "$2/world.mt")" | sort >"$3" || fail "reading the Redis blocks of $2"
      ;;
    postgresql) pg_blocks "$(conn_of "$2")" >"$3" || fail "reading the PostgreSQL blocks of $2" ;;
  esac
  assert_eq "$(wc -l <"$3")" "$NBLOCKS" "blocks read from the store of $2"
  grep -vqE '^[-0-9,]+ [0-9a-f]{32,40}$' "$3" && { grep -vE '^[-0-9,]+ [0-9a-f]{32,40}$' "$3" | head -3; fail "unexpected lines reading the blocks of $2"; }
  return 0
}

# monitored (Redis): the rename run unkilled once more on a fresh copy of the hash, the
# server's MONITOR watching: it writes what the first did, in one MULTI/EXEC: every HSET of
# the hash (one per changed block, no HDEL) among the commands EXEC ran at once, nothing
# between them, and no other transaction.
monitored() {
  local R=$T/ren-redis-monitored mon i
  fresh redis "$WR" "$R"
  mount_world "$R" "$M"
  redis-cli -s "$SOCK" MONITOR >"$T/monitor" &
  mon=$!
  for ((i = 0; i < 500; i++)); do [ "$(head -c2 "$T/monitor" 2>/dev/null)" = OK ] && break; sleep 0.01; done
  rename_node || fail "Redis: the monitored rename failed"
  redis-cli -s "$SOCK" ECHO monitor-end >/dev/null
  for ((i = 0; i < 500; i++)); do grep -q '"ECHO" "monitor-end"' "$T/monitor" && break; sleep 0.01; done
  kill "$mon"; wait "$mon" || true
  unmount_world "$M"
  grep -q '"ECHO" "monitor-end"' "$T/monitor" || fail "Redis: MONITOR did not see the end of the rename"
  blobs redis "$R" "$T/blobs.again"
  cmp -s "$T/blobs.again" "$T/redis.blobs.new" || fail "Redis: a second unkilled rename wrote otherwise than the first"
  python3 - "$T/monitor" "ren$ROUND" "$(wc -l <"$T/src.old")" <<'PY' || fail "Redis: the rename is not one MULTI/EXEC"
import re, sys
hash_, want = sys.argv[2], int(sys.argv[3])
cmds = []
for l in open(sys.argv[1], errors="replace"):
    m = re.match(r'\S+ \[\d+ [^\]]*\] "(\w+)"(?: "([^"\\]*)")?', l)
    if m:
        cmds.append((m[1].upper(), m[2]))
writes = [i for i, (c, a) in enumerate(cmds) if a == hash_ and c in ("HSET", "HDEL", "HSETNX", "HMSET", "DEL", "UNLINK")]
if not writes:
    sys.exit("no write of the hash")
i0, i1 = writes[0], writes[-1]
if {cmds[i][0] for i in writes} != {"HSET"}:
    sys.exit(f"writes other than HSET: {sorted({cmds[i][0] for i in writes})}")
if len(writes) != want:
    sys.exit(f"{len(writes)} HSETs of the hash, {want} blocks changed")
if i1 - i0 + 1 != len(writes):
    sys.exit(f"other commands among the HSETs: {sorted({cmds[i][0] for i in range(i0, i1) if i not in writes})}")
if i1 + 1 >= len(cmds) or cmds[i1 + 1][0] != "EXEC":
    sys.exit("the HSETs are not followed by EXEC")
n = {c: sum(1 for x, _ in cmds if x == c) for c in ("MULTI", "EXEC")}
if n != {"MULTI": 1, "EXEC": 1}:
    sys.exit(f"transactions: {n}")
print(f"Redis: a monitored rename: {len(writes)} HSETs in one MULTI/EXEC, nothing between them")
PY
}

# killed_round WHAT BACKEND WORLD KILL...: the rename on a fresh copy of WORLD's store (in
# $K), mounted with -v, killed by KILL...; the killed store checked; each block, read from the
# store, as before or as the unkilled rename wrote it, all old or all new; through a new mount
# the index and the sample blocks agree with that state; the rename run again where it was
# undone writes what the unkilled one wrote. The state in $STATE.
killed_round() {
  local what=$1 be=$2 w=$3 b
  shift 3
  fresh "$be" "$w" "$K"
  LOGAT=$(stat -c %s "$T/worldfs.log" 2>/dev/null || echo 0)
  mount_world "$K" "$M" -v
  "$@"
  checked "$K" "$what"
  blobs "$be" "$K" "$T/blobs.killed"
  STATE=$(one_transaction "$T/$be.blobs.old" "$T/$be.blobs.new" "$T/blobs.killed") || fail "$what: $STATE"
  mount_world "$K" "$M"
  ls "$M/index/nodes/$DST" | sort | cmp -s - "$T/dst.$STATE" || fail "$what: index/nodes/$DST is not the $STATE list"
  for b in $SAMPLES; do
    cmp -s "$M/blocks/$b/nodes.cubeset" "$T/sample.$b.$STATE" || fail "$what: block $b does not read $STATE"
  done
  if [ "$STATE" = old ]; then
    ls "$M/index/nodes/$SRC" | sort | cmp -s - "$T/src.old" || fail "$what: index/nodes/$SRC is not the old list"
    rename_node || fail "$what: the second rename failed"
  else
    [ -e "$M/index/nodes/$SRC" ] && fail "$what: $SRC still listed after the rename"
  fi
  unmount_world "$M"
  blobs "$be" "$K" "$T/blobs.again"
  cmp -s "$T/blobs.again" "$T/$be.blobs.new" || { diff "$T/$be.blobs.new" "$T/blobs.again" | head; fail "$what: the second pass differs from the unkilled rename"; }
  checked "$K" "$what, renamed again"
}

# logged_killed PATTERN: the rename runs against the mount at $M (mounted with -v); the daemon
# is killed as soon as its log (from $LOGAT on) holds PATTERN, seen by a watcher polling
# without sleeping; the dead mount is cleared with `worldfs unmount`. $T/watched says "seen",
# or "missed" when the rename returned before the watcher saw PATTERN (the daemon is killed
# then, after the rename); $T/when says whether the daemon had logged the rename's commit.
logged_killed() {
  local pid watcher job
  pid=$(pgrep -f -- "--log-file $T/worldfs.log") || fail "daemon not found"
  [ "$(wc -w <<<"$pid")" -eq 1 ] || fail "several daemons: $pid"
  rm -f "$T/watching" "$T/watched" "$T/renamed"
  python3 - "$pid" "$T/worldfs.log" "$LOGAT" "$1" "$T/watching" "$T/watched" "$T/renamed" <<'PY' &
import os, signal, sys, time
pid, log, at, pattern, ready, result, renamed = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4].encode(), sys.argv[5], sys.argv[6], sys.argv[7]
seen, text, end = False, b"", time.time() + 60
with open(log, "rb") as f:
    f.seek(at)
    open(ready, "w").close()
    while time.time() < end:
        text += f.read()
        if pattern in text:
            seen = True
            break
        if os.path.exists(renamed):
            break
os.kill(pid, signal.SIGKILL)
open(result, "w").write("seen" if seen else "missed")
PY
  watcher=$!
  while [ ! -e "$T/watching" ]; do sleep 0.01; done
  rename_node >/dev/null 2>&1 &
  job=$!
  # The rename ends when it is done or the daemon died: the watcher learns which.
  while task_alive "/proc/$job" && task_alive "/proc/$watcher"; do sleep 0.01; done
  : >"$T/renamed"
  wait "$watcher" || fail "the watcher failed"
  ended_after_kill "$pid" "$job" rename_node
  wait "$job" || true
  if listed "$M"; then
    "$WORLDFS" unmount "$M" 2>"$T/unmount.err" || { cat "$T/unmount.err"; fail "worldfs unmount of the dead mount failed"; }
  fi
  ! listed "$M" || fail "$M still mounted after the kill"
  if tail -c +$((LOGAT + 1)) "$T/worldfs.log" | grep -qF "index: renamed node $SRC to $DST in"; then
    echo "after the commit was logged" >"$T/when"
  else
    echo "before the commit was logged" >"$T/when"
  fi
}

# sweep WHAT BACKEND WORLD: the rename timed unkilled on a fresh copy of WORLD's store (the new
# state), then killed at NR moments spread over that run, and inside its transaction (when
# the daemon logs the blocks it will rename, and when it logs 1024 of them read), each on a
# fresh copy (killed_round). The last killed world in $LAST.
sweep() {
  local what=$1 be=$2 w=$3 d at R=$T/ren-$2-ref b i try patterns moment
  K=$T/ren-$2-killed
  # The store holds the blocks and the index the SQLite original showed.
  mount_world "$w" "$M"
  ls "$M/index/nodes/$SRC" | sort | cmp -s - "$T/src.old" || fail "$what: index/nodes/$SRC is not the original's"
  ls "$M/index/nodes/$DST" | sort | cmp -s - "$T/dst.old" || fail "$what: index/nodes/$DST is not the original's"
  unmount_world "$M"
  blobs "$be" "$w" "$T/$be.blobs.old"
  fresh "$be" "$w" "$R"
  mount_world "$R" "$M" -v
  d=$(seconds rename_node)
  for b in $SAMPLES; do
    if [ -e "$T/sample.$b.new" ]; then
      cmp -s "$M/blocks/$b/nodes.cubeset" "$T/sample.$b.new" || fail "$what: block $b reads otherwise after the rename than on LevelDB"
    else
      cp "$M/blocks/$b/nodes.cubeset" "$T/sample.$b.new"
    fi
  done
  ls "$M/index/nodes/$DST" | sort | cmp -s - "$T/dst.new" || fail "$what: index/nodes/$DST after the unkilled rename"
  [ -e "$M/index/nodes/$SRC" ] && fail "$what: $SRC still listed after the unkilled rename"
  unmount_world "$M"
  checked "$R" "$what: the unkilled rename"
  blobs "$be" "$R" "$T/$be.blobs.new"
  assert_eq "$(diff "$T/$be.blobs.old" "$T/$be.blobs.new" | grep -c '^>' || true)" "$(wc -l <"$T/src.old")" "$what: blocks the rename changed"
  for b in $SAMPLES; do
    cmp -s "$T/sample.$b.old" "$T/sample.$b.new" && fail "$what: block $b reads the same after the rename"
    grep -qF ": $SRC: " "$T/sample.$b.new" && fail "$what: block $b still holds $SRC after the rename"
  done
  echo "$what rename: $d s unkilled; kills at $(moments "$d" "$NR")"
  [ "$be" = redis ] && monitored
  for at in $(moments "$d" "$NR"); do
    killed_round "$what killed $at s in" "$be" "$w" killed_at "$at" rename_node
    echo "$what killed $at s in: $STATE; the second pass completed the rename exactly"
  done
  # Inside the transaction: the blocks to rename are known once it began (docs/tree.md "index/":
  # asked again inside it when another program committed since the question); when 1024
  # are read, the edited ones stream into it (the daemon logs every 1024 blocks read, so
  # only when more than 1024 are renamed). A round whose watcher
  # missed the line is run again, up to three times in all.
  patterns=("index: renaming node $SRC to $DST in ")
  moment=("when the transaction knew its blocks")
  if [ "$(wc -l <"$T/src.old")" -gt 1024 ]; then
    patterns+=("index: renaming node $SRC to $DST: 1024 of ")
    moment+=("when 1024 blocks were read")
  else
    echo "($SRC is in $(wc -l <"$T/src.old") blocks: no kill after 1024 of them)"
  fi
  for i in "${!patterns[@]}"; do
    for try in 1 2 3; do
      killed_round "$what killed ${moment[i]}" "$be" "$w" logged_killed "${patterns[i]}"
      [ "$(cat "$T/watched")" = seen ] && break
      echo "(the watcher missed [${patterns[i]}], try $try of 3)"
    done
    assert_eq "$(cat "$T/watched")" seen "$what: the watcher never saw [${patterns[i]}] before the rename returned, in 3 tries"
    echo "$what killed ${moment[i]} ($(cat "$T/when")): $STATE; the second pass completed the rename exactly"
  done
  LAST=$K
}

sweep LevelDB leveldb "$WL"
LVL=$LAST
sweep Redis redis "$WR"
sweep PostgreSQL postgresql "$WP"
PGL=$LAST

# --- The engine loads the last killed LevelDB and PostgreSQL worlds: block PB holds the
# original's nodes, SRC counted as DST ----------------------------------------------------------
python3 - "$T/probe.orig" "$SRC" "$DST" >"$T/probe.want" <<'PY'
import sys
counts = {}
for l in open(sys.argv[1]):
    if l.startswith("count "):
        _, name, n = l.split()
        counts[name] = int(n)
counts[sys.argv[3]] = counts.get(sys.argv[3], 0) + counts.pop(sys.argv[2])
for name in sorted(counts):
    print(f"count {name} {counts[name]}")
PY
for w in "$LVL" "$PGL"; do
  probe_area "$w" "$P1" "$P2" >"$T/probe.renamed" || { cat "$T/probe.renamed"; fail "the engine cannot load $w"; }
  grep '^count ' "$T/probe.renamed" | diff "$T/probe.want" - || fail "the engine sees in block $PB of $w other nodes than the original's with $SRC renamed"
  echo "the engine loads $(basename "$w"): block $PB holds $(grep "^count $DST " "$T/probe.renamed" | cut -d' ' -f3) $DST, no $SRC"
done
echo "ok"
