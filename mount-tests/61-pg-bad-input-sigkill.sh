#!/bin/bash
# PostgreSQL: SIGKILL of the daemon in the middle of a stream of writes leaves every block old
# or new; bad input is refused at close and changes nothing in the database; the engine loads
# the world.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/postgres.sh"

W=$(pg_world w)
C=$(conn_of "$W")
M=$T/mnt
mount_world "$W" "$M"

PID=$(pgrep -f -- "--log-file $T/worldfs.log") || fail "daemon not found"
[ "$(wc -w <<<"$PID")" -eq 1 ] || fail "several daemons: $PID"
BLOCKS="0,0,0 1,0,0 0,1,0 -1,0,-1 1,1,1 -2,-1,0"
mkdir "$T/states"
for b in $BLOCKS; do
  cp "$M/blocks/$b/nodes.cubeset" "$T/states/$b.old"
  mese_variant "$T/states/$b.old" "$M/blocks/$b/nodes.cubeset"
  cp "$M/blocks/$b/nodes.cubeset" "$T/states/$b.new"
  cmp -s "$T/states/$b.old" "$T/states/$b.new" && fail "no variant for block $b"
done
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
except OSError as e:
    open(log, "w").write(f"{n} {e}\n")
PY
WRITER=$!
# The kill comes with both cores kept busy by other processes.
busy_cpu 3
sleep 3
kill -9 "$PID"
wait "$WRITER" || true
echo "writer: $(cat "$T/writes")"
[ "$(cut -d' ' -f1 "$T/writes")" -gt 10 ] || fail "too few writes before the kill"
fusermount3 -u -z "$M" || fail "lazy unmount failed"

"$WORLDFS" check "$W" >"$T/check" 2>&1 || { cat "$T/check"; fail "worldfs check failed"; }
mount_world "$W" "$M"
for b in $BLOCKS; do
  if cmp -s "$T/states/$b.old" "$M/blocks/$b/nodes.cubeset"; then echo "block $b: old"
  elif cmp -s "$T/states/$b.new" "$M/blocks/$b/nodes.cubeset"; then echo "block $b: new"
  else fail "block $b is neither old nor new"; fi
done

pg_blocks "$C" >"$T/before"
# Bad input: a malformed nodes.cubeset, an unknown key in block.txt, garbage in an inventory.
B=$M/blocks/0,0,0
printf 'not a cubeset\n' >"$T/bad1"
printf 'version = 29\nnonsense = 1\n' >"$T/bad2"
printf 'List main 32\nItem\n' >"$T/bad3"
if cp "$T/bad1" "$B/nodes.cubeset" 2>/dev/null; then fail "a malformed nodes.cubeset was accepted"; fi
if cp "$T/bad2" "$B/block.txt" 2>/dev/null; then fail "a bad block.txt was accepted"; fi
if cp "$T/bad3" "$B/meta/1,10,1/inventory" 2>/dev/null; then fail "a bad inventory was accepted"; fi
sync -f "$M/blocks" 2>/dev/null || true
pg_blocks "$C" >"$T/after"
cmp -s "$T/before" "$T/after" || { diff "$T/before" "$T/after" | head; fail "bad input changed the database"; }
unmount_unsaved "$M" blocks/0,0,0/nodes.cubeset blocks/0,0,0/block.txt blocks/0,0,0/meta/1,10,1/inventory
pg_blocks "$C" >"$T/after"
cmp -s "$T/before" "$T/after" || fail "the unmount stored bad input"
probe "$W" >"$T/probe"
grep -q '^checksum ' "$T/probe" || { cat "$T/probe"; fail "the engine cannot load the world"; }
echo "ok"
