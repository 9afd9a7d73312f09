#!/bin/bash
# SIGKILL of the daemon in the middle of a stream of writes leaves a sound database: it passes
# PRAGMA integrity_check and `worldfs check`, the engine loads it, and every edited block is
# either its old or its new version; text a failed save held in a file is kept with its path.
. "$(dirname "$0")/lib.sh"

W=$(world w 2)
M=$T/mnt
BLOCKS="0,0,0 1,0,0 0,1,0 -1,0,-1 1,1,1 -2,-1,0"
mount_world "$W" "$M"
PID=$(pgrep -f -- "--log-file $T/worldfs.log") || fail "daemon not found"
[ "$(wc -w <<<"$PID")" -eq 1 ] || fail "several daemons: $PID"

# For each block, its rendered nodes as stored (old) and with one node set to mese (new).
mkdir "$T/states"
for b in $BLOCKS; do
  cp "$M/blocks/$b/nodes.cubeset" "$T/states/$b.old"
  mese_variant "$T/states/$b.old" "$M/blocks/$b/nodes.cubeset"
  cp "$M/blocks/$b/nodes.cubeset" "$T/states/$b.new"
  cmp -s "$T/states/$b.old" "$T/states/$b.new" && fail "no variant for block $b"
done

# The stream: every block toggles between old and new, the sign counts; until the mount dies.
python3 - "$M" "$T/states" "$T/writes" $BLOCKS <<'PY' &
import sys
mnt, states, log, blocks = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
texts = {b: [open(f"{states}/{b}.old").read(), open(f"{states}/{b}.new").read()] for b in blocks}
n = 0
try:
    while True:
        for b in blocks:
            with open(f"{mnt}/blocks/{b}/nodes.cubeset", "w") as f:
                f.write(texts[b][n % 2])
            n += 1
        with open(f"{mnt}/blocks/0,0,0/meta/2,10,1/fields/text", "w") as f:
            f.write(f"iteration {n}\n")
except OSError as e:
    open(log, "w").write(f"{n} {e}\n")
PY
WRITER=$!
sleep 3
kill -9 "$PID"
wait "$WRITER" || true
echo "writer: $(cat "$T/writes")"
[ "$(cut -d' ' -f1 "$T/writes")" -gt 10 ] || fail "too few writes before the kill"
fusermount3 -u -z "$M" || fail "lazy unmount failed"

assert_eq "$(sqlite3 "$W/map.sqlite" 'PRAGMA integrity_check')" "ok" "integrity_check"
"$WORLDFS" check "$W" >"$T/check" 2>&1 || { cat "$T/check"; fail "worldfs check failed"; }
mount_world "$W" "$M"
for b in $BLOCKS; do
  if cmp -s "$T/states/$b.old" "$M/blocks/$b/nodes.cubeset"; then echo "block $b: old"
  elif cmp -s "$T/states/$b.new" "$M/blocks/$b/nodes.cubeset"; then echo "block $b: new"
  else fail "block $b is neither old nor new"; fi
done
grep -qE '^(iteration [0-9]+|hello from mkworld)$' "$M/blocks/0,0,0/meta/2,10,1/fields/text" \
  || fail "sign text is neither old nor new: $(cat "$M/blocks/0,0,0/meta/2,10,1/fields/text")"

# Text a failed save left held when the daemon is killed: larger than 64 KiB it waits in a
# file of the state folder named for its path, which the next mount moves to unsaved/ and
# names in its log. A held folder with nothing in it is removed without a word.
P=$M/players/celeron55
{ cat "$P"; for i in $(seq 1 4000); do echo "junk line $i of a failed save"; done; } >"$T/big-player"
if cp "$T/big-player" "$P" 2>/dev/null; then fail "a player file with junk lines was taken"; fi
cmp "$P" "$T/big-player" || fail "the failed save's text is not shown"
# A scratch file's spilled text follows its folder's rename.
mkdir -p "$M/worldmods/dir"
head -c 100000 /dev/urandom >"$T/swap"
cp "$T/swap" "$M/worldmods/dir/.notes.swp"
mv "$M/worldmods/dir" "$M/worldmods/dir2"
PID=$(pgrep -f -- "--log-file $T/worldfs.log") || fail "daemon not found"
kill -9 "$PID"
for _ in $(seq 1 100); do [ -e "/proc/$PID" ] || break; sleep 0.05; done
fusermount3 -u -z "$M" || fail "lazy unmount failed"
mkdir -p "$WORLDFS_STATE_DIR/held/999999999/7/players" "$T/victim/empty"
ln -s "$T/victim" "$WORLDFS_STATE_DIR/held/999999998"
mount_world "$W" "$M"
[ -d "$T/victim/empty" ] || fail "a link in the held folder was followed"
assert_contains "$T/worldfs.log" "holds text for the mount's players/celeron55"
kept=$(sed -n "s/.*  \(.*\) holds text for the mount's players\/celeron55$/\1/p" "$T/worldfs.log")
cmp "$kept" "$T/big-player" || fail "the kept text differs from the failed save"
swap=$(sed -n "s/.*  \(.*\) holds text for the mount's worldmods\/dir2\/.notes.swp$/\1/p" "$T/worldfs.log")
cmp "$swap" "$T/swap" || fail "the spilled scratch text is not kept under its folder's new name"
case $kept in "$WORLDFS_STATE_DIR/unsaved/"*-"$PID"-ended/*/players/celeron55) ;;
  *) fail "kept at an unexpected place: $kept" ;; esac
[ -e "$WORLDFS_STATE_DIR/held/999999999" ] && fail "an empty held folder was left"
grep -q "999999999" "$T/worldfs.log" && fail "an empty held folder was reported"
rm -r "$M/worldmods"
unmount_world "$M"
probe "$W" >"$T/probe"
if grep -q "PROBE FAILED" "$T/probe" || ! grep -q '^checksum ' "$T/probe"; then cat "$T/probe"; fail "the engine cannot load the world"; fi
echo "ok"
