#!/bin/bash
# A reader whose pages the kernel keeps renders nothing at its open (issue 37): the tree
# keeps the block as stored at the open, and the text is made at the first read, if the
# kernel asks for one. Shown with the kernel's pages of the file dropped between the open
# and the read (POSIX_FADV_DONTNEED), so the read reaches the daemon: after another
# writer's change of the block (sqlite3), and after the mount's own change of another view
# of the block, the open descriptor still reads the whole text of its open; a new open
# then reads the new text.
. "$(dirname "$0")/lib.sh"

W=$(world w 2)
M=$T/mnt
# A decoded-block cache of a few blocks, so that the blocks read below are not cached at
# the open: only then does an open keep stored bytes instead of reading the text at once.
mount_world "$W" "$M" --cache-size 1
key() { IFS=, read -r x y z <<<"$1"; echo $(( z * 16777216 + y * 4096 + x )); }
D=0,0,0 # the block mkworld.sh built in: unlike any other
C=$(ls "$M/blocks" | grep -vxF -e "$D" | sed -n 5p)
cmp -s "$M/blocks/$C/nodes.cubeset" "$M/blocks/$D/nodes.cubeset" && fail "blocks $C and $D already equal"

python3 - "$M/blocks" "$W/map.sqlite" "$C" "$D" "$(key "$C")" "$(key "$D")" <<'PY' || fail "pinned reads"
import os, sqlite3, subprocess, sys, time
blocks, db, c, d, kc, kd = sys.argv[1:7]

def whole(fd):
    os.lseek(fd, 0, os.SEEK_SET)
    out = b""
    while True:
        chunk = os.read(fd, 4096)
        if not chunk:
            return out
        out += chunk

def kept_open(path):
    """Opens `path` after two whole reads, so the kernel keeps its attributes and pages, and
    after every block's nodes.cubeset, so its block is no longer cached decoded; then drops
    the pages: the next read reaches the daemon."""
    for _ in range(2):
        with open(path, "rb") as f:
            f.read()
    for other in sorted(os.listdir(blocks)):
        with open(f"{blocks}/{other}/nodes.cubeset", "rb") as f:
            f.read()
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    return fd

# 1. Another writer replaces block C with block D's bytes between the open and the read.
f = f"{blocks}/{c}/nodes.cubeset"
before = open(f, "rb").read()
theirs = open(f"{blocks}/{d}/nodes.cubeset", "rb").read()
fd = kept_open(f)
con = sqlite3.connect(db, timeout=5)
con.execute("UPDATE blocks SET data = (SELECT data FROM blocks WHERE pos = ?) WHERE pos = ?", (int(kd), int(kc)))
con.commit()
con.close()
# Past the daemon's look at the database (every 50 ms), so a read of the stored block now
# would give block D's text.
time.sleep(0.4)
got = whole(fd)
os.close(fd)
# The kernel may have been told of the change meanwhile (the watcher looks every second)
# and then cuts the read to the new size: the text of the open, whole or cut to that size.
if got != before[:len(got)] or len(got) not in (len(before), len(theirs)):
    sys.exit(f"after another writer's change, the open descriptor read {got[:200]!r}…, not the text of its open")
time.sleep(1.5)
now = open(f, "rb").read()
if now != theirs:
    sys.exit("a new open does not read the other writer's text")

# 2. The mount's own change of another view of block D (a node edit clears
# lighting_complete in block.txt) between the open of block.txt and its read.
b = f"{blocks}/{d}/block.txt"
before = open(b, "rb").read()
fd = kept_open(b)
lines = open(f"{blocks}/{d}/nodes.cubeset").read().split("\n")
i = next(i for i, l in enumerate(lines) if l.strip() == "BlockDefinitions =")
lines.insert(i + 2, '\t\t\t\t"~: default:mese: 0",')
r = next(i for i, l in enumerate(lines) if l.strip() == "-- Level 0") + 1
q = lines[r].index('"')
lines[r] = lines[r][:q + 1] + "~" + lines[r][q + 2:]
with open(f"{blocks}/{d}/nodes.cubeset", "w") as out:
    out.write("\n".join(lines))
got = whole(fd)
os.close(fd)
after = open(b, "rb").read()
if after == before:
    sys.exit("block.txt did not change with the node edit (the test cannot tell)")
if got != before:
    sys.exit(f"after the mount's own change, the open descriptor read {got!r}, not the text of its open {before!r}")
PY
unmount_world "$M"
echo "pinned reads: the text of the open, after another writer's change and the mount's own"
