#!/bin/bash
# Restore kill sweeps under load on the other Luanti backends (after 17, the SQLite one, and
# 86): a world whose map is in LevelDB (players too), in Redis, or in PostgreSQL (players
# too), each server a throwaway one of this test, the world a radius-2 engine world trimmed
# to 64 blocks, is backed up through a read-only mount with `rsync -a`; the backup is
# restored with `rsync -a` (then an fsync of blocks/) through a mount of an empty world of
# the same backend (a folder holding only world.mt: for LevelDB the backup's own, for Redis
# naming a new hash, for PostgreSQL a new empty database), timed unkilled, then killed
# (SIGKILL of the daemon) at N moments spread over that run (N = KILL_SWEEP, 3 by default),
# both cores kept busy by other processes. After each kill `worldfs check` passes, the
# SQLite files pass their integrity check, and through a new mount every file reads as in
# the backup, or (a block's own files, a node's inventory) as the `mkdir` that rsync starts
# a block or a node's metadata with left it (docs/semantics.md "Crashes": every block old or new, each
# close a commit; "Versions": `mkdir` makes a new block), never anything else; a file or a
# block may be missing. The same rsync run again completes the restore exactly (`rsync -a
# --dry-run -i`, with -c too, lists nothing), also after a remount. The engine loads the
# last restored LevelDB and PostgreSQL worlds (it has no Redis) and sees the original world
# (the probe of 17: node counts, checksum, the chest, the sign, the furnace).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/postgres.sh"

RD=$T/redis
trap stop_servers EXIT

M=$T/mnt
N=${KILL_SWEEP:-3}
ROUND=0

# small_world NAME: the radius-2 engine world (as 17) trimmed to its 64 blocks the probe reads
# (-2..1 on each axis: nodes -32..31), so that the sweeps stay short.
small_world() {
  local w
  w=$(world "$1" 2)
  trim_map "$w" -2,-2,-2 1,1,1
  echo "$w"
}

# What the mkdir of a block, and of a node's metadata, leaves (read through a scratch mount).
F=$T/fresh
mkdir "$F"
printf 'gameid = minetest\nbackend = sqlite3\n' >"$F/world.mt"
mount_world "$F" "$M"
mkdir "$M/blocks/0,0,0" || fail "mkdir of a block failed"
mkdir "$F/block"
for f in block.txt light.txt nodes.cubeset objects.txt timers.txt; do cp "$M/blocks/0,0,0/$f" "$F/block/" || fail "no $f in a new block"; done
mkdir "$M/blocks/0,0,0/meta/1,1,1" || fail "mkdir of a node's metadata failed"
cp "$M/blocks/0,0,0/meta/1,1,1/inventory" "$F/inventory" || fail "no inventory in new metadata"
unmount_world "$M"

# restore: the backup into the mount at $M, then an fsync of blocks/ (everything is in the
# store when it returns).
restore() { rsync -a "${EXCL[@]}" "$BK/" "$M/" && sync "$M/blocks"; }

# empty_world BACKEND FOLDER: a world of BACKEND with no blocks yet, as the README makes one.
empty_world() {
  local r=$2 db
  ROUND=$((ROUND + 1))
  rm -rf "$r"; mkdir "$r"
  case $1 in
    leveldb) cp "$BK/world.mt" "$r/" ;;
    redis) sed "s/^redis_hash = .*/redis_hash = restored$ROUND/" "$BK/world.mt" >"$r/world.mt" ;;
    postgresql)
      db=$(pg_db)
      sed -e "s|^pgsql_connection = .*|pgsql_connection = $db|" \
        -e "s|^pgsql_player_connection = .*|pgsql_player_connection = $db|" "$BK/world.mt" >"$r/world.mt"
      ;;
  esac
}

# compare WHAT: through the mount at $M, every folder shown is one the backup has, and every
# file reads as the backup's or as a new block's (its own files, a node's inventory), nothing
# else (world.mt aside: each empty world's own); a file may be missing. Prints how many blocks
# are restored, partly or not at all.
compare() {
  python3 - "$BK" "$M" "$F" "$nblocks" >"$T/compare" 2>&1 <<'PY' || { cat "$T/compare" >&2; fail "$1"; }
import os, sys
bk, mnt, fresh, nblocks = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
OWN = ("block.txt", "light.txt", "nodes.cubeset", "objects.txt", "timers.txt")
def read(p):
    with open(p, "rb") as f:
        return f.read()
new = {n: read(os.path.join(fresh, "block", n)) for n in OWN}
new_inventory = read(os.path.join(fresh, "inventory"))
bad, shown = [], {}
for d, dirs, files in os.walk(mnt):
    rel = os.path.relpath(d, mnt)
    for n in dirs:
        r = os.path.normpath(os.path.join(rel, n))
        if not os.path.isdir(os.path.join(bk, r)):
            bad.append(f"{r}/: a folder the backup lacks")
    for n in files:
        r = os.path.normpath(os.path.join(rel, n))
        if r == "world.mt":
            continue
        p = r.split("/")
        got = read(os.path.join(mnt, r))
        b = os.path.join(bk, r)
        if os.path.isfile(b) and read(b) == got:
            state = "backup"
        elif p[0] == "blocks" and len(p) == 3 and n in OWN and got == new[n]:
            state = "new"
        elif p[0] == "blocks" and len(p) == 5 and p[2] == "meta" and n == "inventory" and got == new_inventory:
            state = "new"
        else:
            bad.append(f"{r}: neither the backup's nor a new block's" + ("" if os.path.isfile(b) else " (not in the backup)"))
            continue
        if p[0] == "blocks":
            shown.setdefault(p[1], []).append((r, state))
if bad:
    print("\n".join(bad[:20]))
    sys.exit(f"{len(bad)} files or folders read otherwise")
done = partly = 0
for pos, fs in shown.items():
    want = {os.path.relpath(os.path.join(d, n), bk) for d, _, ns in os.walk(os.path.join(bk, "blocks", pos)) for n in ns}
    if all(s == "backup" for _, s in fs) and {r for r, _ in fs} == want:
        done += 1
    else:
        partly += 1
print(f"{done} blocks restored, {partly} partly, {nblocks - done - partly} not yet")
PY
  cat "$T/compare"
}

# sweep WHAT BACKEND WORLD: WORLD backed up; the backup restored into an empty world timed
# unkilled, then killed at N moments, each killed world checked, then restored again. The last
# restored world in $LAST.
sweep() {
  local what=$1 backend=$2 w=$3 d at R state
  BK=$T/backup-$backend
  EXCL=()
  # The backup's world.mt names the source's hash or database (docs/backends.md).
  [ "$backend" = leveldb ] || EXCL=(--exclude /world.mt)
  mount_world "$w" "$M" --read-only
  rsync -a "$M/" "$BK/" || fail "$what: the backup failed"
  unmount_world "$M"
  # A read-only mount shows no write permission; a writable one shows the database's (files
  # 0644, folders 0755): the backup's files made writable, a restore of it lists nothing.
  chmod -R u+w "$BK"
  nblocks=$(ls "$BK/blocks" | wc -l)
  assert_eq "$nblocks" 64 "$what: blocks backed up"
  [ -s "$BK/players/celeron55" ] || fail "$what: no player in the backup"

  R=$T/restore-$backend-unkilled
  empty_world "$backend" "$R"
  mount_world "$R" "$M"
  [ -z "$(ls "$M/blocks")" ] || fail "$what: the empty world shows blocks"
  d=$(seconds restore)
  exact "$BK" "$M" "$what: the unkilled restore" "${EXCL[@]}"
  unmount_world "$M"
  checked "$R" "$what: the unkilled restore"
  echo "$what restore of $nblocks blocks: $d s unkilled; kills at $(moments "$d")"
  for at in $(moments "$d"); do
    R=$T/restore-$backend-$at
    empty_world "$backend" "$R"
    mount_world "$R" "$M"
    killed_at "$at" restore
    checked "$R" "$what killed $at s in"
    mount_world "$R" "$M"
    state=$(compare "$what killed $at s in")
    restore || fail "$what killed $at s in: the second restore failed"
    exact "$BK" "$M" "$what killed $at s in, restored again" "${EXCL[@]}"
    unmount_world "$M"
    checked "$R" "$what killed $at s in, restored again"
    mount_world "$R" "$M"
    exact "$BK" "$M" "$what killed $at s in, restored again, after a remount" "${EXCL[@]}"
    unmount_world "$M"
    echo "$what killed $at s in: $state; the second pass restored exactly"
  done
  LAST=$R
}

busy_cpu 3

# --- LevelDB: map and players moved into LevelDB by the engine (as 86) ------------------------
WL=$(small_world lvl)
to_leveldb "$WL"
sweep LevelDB leveldb "$WL"
[ -d "$LAST/map.db" ] && [ -d "$LAST/players.db" ] || fail "the LevelDB restore made no map.db or players.db: $(ls "$LAST")"
LVL=$LAST

# --- Redis: the map's blocks put in a hash of a throwaway server (as 71, 86) -------------------
SOCK=$("$ROOT/scripts/redis-server" start "$RD") || fail "redis-server did not start"
WR=$(small_world red)
to_redis "$WR" "$SOCK"
sweep Redis redis "$WR"
assert_eq "$(redis-cli -s "$SOCK" hlen "restored$ROUND")" "$nblocks" "blocks in the last restored hash"

# --- PostgreSQL: map and players moved into a database of a throwaway server (as 60, 64, 86) ---
WP=$(small_world pg)
to_postgresql "$WP"
sweep PostgreSQL postgresql "$WP"
C=$(conn_of "$LAST")
assert_eq "$(pg_sql "$C" 'SELECT count(*) FROM blocks')" "$nblocks" "blocks in the last restored database"
assert_eq "$(pg_sql "$C" "SELECT count(*) FROM player WHERE name = 'celeron55'")" "1" "the player in the last restored database"

# --- The engine loads the restored LevelDB and PostgreSQL worlds and sees the original ---------
WO=$(small_world orig)
probe "$WO" >"$T/probe.original"
grep -q '^checksum ' "$T/probe.original" || { cat "$T/probe.original"; fail "probe of the original world failed"; }
for w in "$LVL" "$LAST"; do
  probe "$w" >"$T/probe.restored" || { cat "$T/probe.restored"; fail "the engine cannot load $w"; }
  diff "$T/probe.original" "$T/probe.restored" || fail "the engine tells the world restored into $w from the original"
  for n in "1,10,1 default:chest" "2,10,1 default:sign_wall_wood" "3,10,1 default:furnace_active"; do
    grep -q "^node $n " "$T/probe.restored" || fail "the engine does not see $n in $w"
  done
  grep -qF 'field text="' "$T/probe.restored" || fail "the engine sees no sign text in $w"
  echo "the engine loads $(basename "$w") as the original: $(grep '^checksum ' "$T/probe.restored")"
done
echo "ok"
