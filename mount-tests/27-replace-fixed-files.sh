#!/bin/bash
# A block's fixed files (nodes.cubeset, block.txt, light.txt, timers.txt) replaced the ways
# that remove the destination first, then create it with O_EXCL: `mv` from another file
# system, `cp --remove-destination`, `install`; and a new folder's, hidden from its maker
# and the maker's forks. The tree keeps showing a removed fixed file,
# so it is hidden from the process that removed it until that process writes it
# (docs/limits.md, "Views of a block cannot be absent"); every other process still sees it.
# The edits survive a remount.
. "$(dirname "$0")/lib.sh"

W=$(world w 2)
M=$T/mnt
mount_world "$W" "$M"
B=$M/blocks/0,0,0

# mv from another file system: rename fails with EXDEV, mv removes, then copies.
sed 's/"\(.\): default:chest: 0"/"\1: default:chest: 2"/' "$B/nodes.cubeset" >"$T/nodes.cubeset"
grep -qE '"[^"]: default:chest: 2"' "$T/nodes.cubeset" || fail "the test's edit of nodes.cubeset"
mv "$T/nodes.cubeset" "$B/nodes.cubeset" 2>"$T/err" || { cat "$T/err"; fail "mv onto nodes.cubeset"; }
grep -qE '"[^"]: default:chest: 2"' "$B/nodes.cubeset" || fail "mv's nodes.cubeset not stored"

# cp --remove-destination and install.
sed 's/^timestamp = .*/timestamp = 123456/' "$B/block.txt" >"$T/block.txt"
cp --remove-destination "$T/block.txt" "$B/block.txt" 2>"$T/err" || { cat "$T/err"; fail "cp --remove-destination onto block.txt"; }
grep -qx 'timestamp = 123456' <(sed 's/ *#.*//' "$B/block.txt") || fail "cp --remove-destination's block.txt not stored"
cp "$B/light.txt" "$T/light.txt"
install -m 644 "$T/light.txt" "$B/light.txt" 2>"$T/err" || { cat "$T/err"; fail "install onto light.txt"; }
cmp "$T/light.txt" "$B/light.txt" || fail "install's light.txt differs"
cp "$B/timers.txt" "$T/timers.txt"
mv "$T/timers.txt" "$B/timers.txt" 2>"$T/err" || { cat "$T/err"; fail "mv onto timers.txt"; }

# rm of a fixed file hides it from rm only: another process lists and reads it.
rm "$B/light.txt" || fail "rm light.txt"
ls "$B" | grep -qx light.txt || fail "another process no longer sees light.txt after rm"
cmp -s "$T/light.txt" "$B/light.txt" || fail "light.txt changed by rm"

# A new block folder hides the fixed files not written yet from the process that made it
# and from its forks that run the same program (rsync's receiver is a fork of the generator,
# which makes the folders), not from a child that runs another program, nor from any other
# process (docs/semantics.md, "New folders").
python3 - "$M/blocks/5,5,5" <<'PY' || fail "a new folder's fixed files, as its maker, its fork and its child see them"
import os, subprocess, sys
d = sys.argv[1]
os.mkdir(d)
f = os.path.join(d, "nodes.cubeset")
assert not os.path.exists(f), "the maker sees nodes.cubeset"
pid = os.fork()
if pid == 0:
    os._exit(0 if not os.path.exists(f) and os.listdir(d) == [] else 1)
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, "the maker's fork sees the fixed files"
assert subprocess.run(["test", "-e", f]).returncode == 0, "a child running another program does not see nodes.cubeset"
PY
# This shell started the maker: it is neither the maker nor its fork.
[ -e "$M/blocks/5,5,5/nodes.cubeset" ] || fail "the maker's parent does not see the new folder's nodes.cubeset"
ls "$M/blocks/5,5,5" | grep -qx block.txt || fail "the maker's parent does not list block.txt"

unmount_world "$M"
mount_world "$W" "$M"
grep -qE '"[^"]: default:chest: 2"' "$B/nodes.cubeset" || fail "nodes.cubeset lost at remount"
grep -qx 'timestamp = 123456' <(sed 's/ *#.*//' "$B/block.txt") || fail "block.txt lost at remount"
unmount_world "$M"
sqlite3 "$W/map.sqlite" 'PRAGMA integrity_check' | grep -qx ok || fail "integrity_check"
echo "ok"
