#!/bin/bash
# A --read-only mount beside another writer of the database: the writer (busy timeout 250 ms)
# never gets SQLITE_BUSY while the mount is walked with grep -r and cat; writes through the
# mount fail with EROFS; the writer's changes show in the mount.
. "$(dirname "$0")/lib.sh"

W=$(world w 2)
M=$T/mnt
mount_world "$W" "$M" --read-only

# Writes through the mount fail with EROFS.
erofs() { grep -q "Read-only file system" "$T/err" || fail "$1: expected EROFS, got: $(cat "$T/err")"; }
if (echo x >"$M/blocks/0,0,0/meta/2,10,1/fields/text") 2>"$T/err"; then fail "write succeeded"; fi; erofs "write"
if mkdir "$M/blocks/9,9,9" 2>"$T/err"; then fail "mkdir succeeded"; fi; erofs "mkdir"
if rm -r "$M/blocks/0,0,0" 2>"$T/err"; then fail "rm -r succeeded"; fi; erofs "rm"
if touch "$M/blocks/0,0,0/nodes.cubeset" 2>"$T/err"; then fail "touch succeeded"; fi; erofs "touch"
if (echo x >"$M/world.mt") 2>"$T/err"; then fail "writing world.mt succeeded"; fi; erofs "world.mt"

# Walk the mount in a loop while another process commits to the database.
(
  walks=0 files=0
  while [ ! -e "$T/stop" ]; do
    # A file listed may be gone when grep opens it (the writer replaced its block): grep
    # says so and goes on.
    n=$( (grep -rc 'default:chest' "$M/blocks" 2>/dev/null || true) | wc -l)
    cat "$M"/blocks/*/nodes.cubeset "$M"/blocks/*/meta/*/inventory >/dev/null 2>&1 || true
    walks=$((walks + 1)) files=$((files + n))
  done
  echo "$walks walks, $files files read by grep -r" >"$T/walks"
) &
WALKER=$!
python3 - "$W/map.sqlite" <<'PY' || { touch "$T/stop"; wait; fail "the writer failed"; }
import sqlite3, sys, time, random
c = sqlite3.connect(sys.argv[1], timeout=0.25, isolation_level=None)
rows = c.execute("select pos, data from blocks").fetchall()
blobs = {p: d for p, d in rows}
random.seed(7)
targets = [1 * 2**24 + 1, 2 * 2**24 + 2, -1, 4096, 2**24 + 4096 + 1]
worst = 0.0
for i in range(200):
    start = time.monotonic()
    c.execute("BEGIN IMMEDIATE")
    for t in targets:
        c.execute("REPLACE INTO blocks (pos, data) VALUES (?, ?)", (t, random.choice(rows)[1]))
    c.execute("COMMIT")
    worst = max(worst, time.monotonic() - start)
    time.sleep(0.02)
# Last commit: block 0,0,0 copied onto 1,0,1.
c.execute("BEGIN IMMEDIATE")
c.execute("REPLACE INTO blocks (pos, data) VALUES (?, ?)", (1 * 2**24 + 1, blobs[0]))
c.execute("COMMIT")
print(f"writer: 201 commits, no SQLITE_BUSY, max commit wait {worst * 1000:.1f} ms")
PY
touch "$T/stop"
wait "$WALKER"
echo "reader: $(cat "$T/walks") during the writes"
[ "$(cut -d' ' -f1 "$T/walks")" -ge 1 ] || fail "the mount was not walked"

# The writer's last change shows in the mount.
seen=""
for _ in $(seq 1 30); do
  if cmp -s "$M/blocks/0,0,0/nodes.cubeset" "$M/blocks/1,0,1/nodes.cubeset"; then seen=1; break; fi
  sleep 0.1
done
[ -n "$seen" ] || fail "the writer's change is not visible in the read-only mount"
assert_eq "$(cat "$M/blocks/1,0,1/meta/2,10,1/fields/text")" "$(cat "$M/blocks/0,0,0/meta/2,10,1/fields/text")" "copied sign"
unmount_world "$M"
if grep -q ERROR "$T/worldfs.log"; then grep ERROR "$T/worldfs.log" | head -5; fail "the read-only mount logged errors"; fi
echo "ok"
