#!/bin/bash
# `worldfs status MNT` tells what an edit left: a text whose commit failed (its path and the
# reason with line and column, exit 1) until a corrected text commits it (exit 0), the
# latest errors with their paths, a read-only mount, a database the mount follows after it
# was replaced; and exit 2 with the reason for a folder no daemon answers for.
. "$(dirname "$0")/lib.sh"

W=$(world w 2)
M=$T/mnt
mount_world "$W" "$M"
N=blocks/0,0,0/nodes.cubeset

# status MOUNT EXPECTED_EXIT: runs `worldfs status`, its output in $T/status.
status() {
  local rc=0
  "$WORLDFS" status "$1" >"$T/status" 2>"$T/status.err" || rc=$?
  [ "$rc" = "$2" ] || { cat "$T/status" "$T/status.err"; fail "status of $1 exited $rc, not $2"; }
}

status "$M" 0
assert_contains "$T/status" "mount: read-write"
assert_contains "$T/status" "texts held because their commit failed: none"
assert_contains "$T/status" "world: $W"

# A bad edit: the editor sees only "Invalid argument"; status names the file and the reason.
cp "$M/$N" "$T/good"
sed 's/BlockDefinitions =/BlockDefinitions = =/' "$T/good" >"$T/bad"
line=$(grep -n -m1 -F "BlockDefinitions = =" "$T/bad" | cut -d: -f1)
if cp "$T/bad" "$M/$N" 2>/dev/null; then fail "a bad nodes.cubeset was taken"; fi
status "$M" 1
assert_contains "$T/status" "texts held because their commit failed: 1"
assert_contains "$T/status" "  $N"
assert_contains "$T/status" "$N: line $line, column"
assert_contains "$T/status" "latest errors (oldest first):"
grep -F "$N: line $line" "$T/status" | grep -q "s ago" || fail "the error is not among the latest: $(cat "$T/status")"

# Writing the corrected text commits it: nothing is held any more.
cp "$T/good" "$M/$N" || fail "the good text was refused"
status "$M" 0
assert_contains "$T/status" "texts held because their commit failed: none"

# A refused change under index/ is among the latest errors, with its path.
if touch "$M/index/items/new" 2>/dev/null; then fail "a file was made under index/"; fi
status "$M" 0
assert_contains "$T/status" "index/ holds answers"

# The database replaced under the mount: status says the mount follows the new file.
cp "$W/map.sqlite" "$T/map.copy"
mv "$T/map.copy" "$W/map.sqlite"
sleep 1.5 # the watcher looks at least once a second
cat "$M/$N" >/dev/null
status "$M" 0
assert_contains "$T/status" "replaced or removed under the mount (1 time(s)); following the file now there"
unmount_world "$M"

# No daemon answers for a folder that is not mounted (any more).
status "$M" 2
assert_contains "$T/status.err" "not a worldfs mount of this user"

# A read-only mount says so.
mount_world "$W" "$M" --read-only
status "$M" 0
assert_contains "$T/status" "mount: read-only"
unmount_world "$M"
echo "status: held text with its reason, errors, read-only, replaced database, no daemon"
