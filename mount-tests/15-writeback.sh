#!/bin/bash
# Write-back (issue 11, "Fast"): closes of block files are grouped into one transaction, and
# SIGKILL of the daemon while closes wait for their commit leaves a sound database: every
# fsync'd write present, every block old or new, integrity_check ok, `worldfs check` clean,
# the engine loads it. SIGTERM commits every close that returned. `-o sync` commits each
# close before it returns.
. "$(dirname "$0")/lib.sh"

W=$(world w 2)
M=$T/mnt
mount_world "$W" "$M" -vv
PID=$(pgrep -f -- "--log-file $T/worldfs.log") || fail "daemon not found"
[ "$(wc -w <<<"$PID")" -eq 1 ] || fail "several daemons: $PID"

# 60 blocks toggled by `sed -i` between their stored nodes (old) and one node set to mese
# (new), and one more block written once with fsync.
ls "$M/blocks" | head -61 >"$T/blocks"
[ "$(wc -l <"$T/blocks")" -eq 61 ] || fail "too few blocks"
SYNCED=$(tail -1 "$T/blocks")
head -60 "$T/blocks" >"$T/toggled"
mkdir "$T/states"
while read -r b; do
  cp "$M/blocks/$b/nodes.cubeset" "$T/states/$b.old"
  mese_variant "$T/states/$b.old" "$T/states/$b.new"
  # The new state as the mount shows it (written once, read back), then the old one again.
  cp "$T/states/$b.new" "$M/blocks/$b/nodes.cubeset"
  cp "$M/blocks/$b/nodes.cubeset" "$T/states/$b.new"
  cp "$T/states/$b.old" "$M/blocks/$b/nodes.cubeset"
  cmp -s "$T/states/$b.old" "$M/blocks/$b/nodes.cubeset" || fail "block $b not restored"
  cmp -s "$T/states/$b.old" "$T/states/$b.new" && fail "no variant for block $b"
done <"$T/blocks"

# The edits: sed -i swaps the whole text of each block between old and new, until the mount
# dies.
(
  n=0
  while true; do
    while read -r b; do
      if [ $((n % 2)) -eq 0 ]; then from=old; else from=new; fi
      # Replaces the first line with itself and appends nothing: sed -i's temporary and
      # rename, with the content of the other state.
      sed -i -e "1r $T/states/$b.$([ $from = old ] && echo new || echo old)" -e '1,$d' \
        "$M/blocks/$b/nodes.cubeset" 2>/dev/null || { echo "$n" >"$T/edits"; exit 0; }
    done <"$T/toggled"
    n=$((n + 1))
  done
) &
EDITOR=$!
sleep 2

# The fsync'd edit, then SIGKILL while the other edits wait for their commit.
python3 - "$T/states/$SYNCED.new" "$M/blocks/$SYNCED/nodes.cubeset" <<'PY'
import os, sys
data = open(sys.argv[1], "rb").read()
f = os.open(sys.argv[2], os.O_WRONLY | os.O_TRUNC)
os.write(f, data)
os.fsync(f)
os.close(f)
PY
kill -9 "$PID"
wait "$EDITOR" || true
echo "sed -i passes over the 60 blocks before the kill: $(cat "$T/edits" 2>/dev/null)"
fusermount3 -u -z "$M" || fail "lazy unmount failed"

# Grouping happened through the real mount: some transaction held more than one close.
grep -oE 'committed [0-9]+ of [0-9]+ pending block changes' "$T/worldfs.log" >"$T/groups" \
  || fail "no grouped commit in the log"
awk '$2 > 1 { found = 1 } END { exit !found }' "$T/groups" \
  || fail "every transaction held one block: $(sort | uniq -c <"$T/groups" | head)"
echo "largest group: $(awk '{ print $2 }' "$T/groups" | sort -n | tail -1) blocks"

assert_eq "$(sqlite3 "$W/map.sqlite" 'PRAGMA integrity_check')" "ok" "integrity_check"
"$WORLDFS" check "$W" >"$T/check" 2>&1 || { cat "$T/check"; fail "worldfs check failed"; }
mount_world "$W" "$M" --read-only
cmp -s "$T/states/$SYNCED.new" "$M/blocks/$SYNCED/nodes.cubeset" \
  || fail "the fsync'd edit of block $SYNCED is lost"
old=0; new=0
while read -r b; do
  if cmp -s "$T/states/$b.old" "$M/blocks/$b/nodes.cubeset"; then old=$((old + 1))
  elif cmp -s "$T/states/$b.new" "$M/blocks/$b/nodes.cubeset"; then new=$((new + 1))
  else fail "block $b is neither old nor new"; fi
done <"$T/toggled"
echo "blocks old: $old, new: $new"
unmount_world "$M"
probe "$W" >"$T/probe"
if grep -q "PROBE FAILED" "$T/probe" || ! grep -q '^checksum ' "$T/probe"; then cat "$T/probe"; fail "the engine cannot load the world"; fi

# SIGTERM while closes wait for their commit: every close that returned is in the database.
mount_world "$W" "$M"
PID=$(pgrep -f -- "--log-file $T/worldfs.log") || fail "daemon not found"
python3 - "$M" "$T/states" "$T/closed" $(cat "$T/toggled") <<'PY' &
import sys
mnt, states, log, blocks = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
texts = {b: [open(f"{states}/{b}.old").read(), open(f"{states}/{b}.new").read()] for b in blocks}
last = {}
n = 0
try:
    while True:
        for b in blocks:
            with open(f"{mnt}/blocks/{b}/nodes.cubeset", "w") as f:
                f.write(texts[b][n % 2])
            last[b] = ["old", "new"][n % 2]
        n += 1
except OSError:
    pass
open(log, "w").write("".join(f"{b} {s}\n" for b, s in last.items()))
PY
WRITER=$!
sleep 1.5
kill -TERM "$PID"
wait "$WRITER" || true
while [ -e "/proc/$PID" ] && ! grep -q ') Z ' "/proc/$PID/stat" 2>/dev/null; do sleep 0.1; done
mountpoint -q "$M" && fail "still mounted after SIGTERM"
[ -s "$T/closed" ] || fail "no close returned before SIGTERM"
mount_world "$W" "$M" --read-only
while read -r b state; do
  cmp -s "$T/states/$b.$state" "$M/blocks/$b/nodes.cubeset" \
    || fail "block $b: its last close ($state) returned before SIGTERM but is not stored"
done <"$T/closed"
echo "SIGTERM: the last close of $(wc -l <"$T/closed") blocks stored"
unmount_world "$M"

# -o sync: each close is in the database when it returns.
mount_world "$W" "$M" -o sync
b=$(head -1 "$T/toggled")
cp "$T/states/$b.old" "$M/blocks/$b/nodes.cubeset"
before=$(sqlite3 "$W/map.sqlite" "SELECT hex(data) FROM blocks WHERE pos = $(python3 -c "
x, y, z = map(int, '$b'.split(','))
print(z * 16777216 + y * 4096 + x)")")
cp "$T/states/$b.new" "$M/blocks/$b/nodes.cubeset"
after=$(sqlite3 "$W/map.sqlite" "SELECT hex(data) FROM blocks WHERE pos = $(python3 -c "
x, y, z = map(int, '$b'.split(','))
print(z * 16777216 + y * 4096 + x)")")
[ "$before" != "$after" ] || fail "-o sync: the close of block $b was not committed when it returned"
unmount_world "$M"
echo "ok"
