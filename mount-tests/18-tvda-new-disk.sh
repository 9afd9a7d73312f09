#!/bin/bash
# A Terrarum disk restored from its backup alone (docs/terrarum.md): each TVDA
# sample and both fixtures are backed up with `rsync -a`, deleted, and restored into a new
# disk made from the backup's header.txt (copied to where the disk was, then mounted): the
# restore is exact (another rsync lists nothing, a second backup equals the first, so every
# entry's stored bytes and the header came back), `worldfs check` passes, and every entry
# carries its backed-up time in the disk itself (seen without the state folder). A missing path,
# an empty file, a read-only mount of a header text and a bad header text make no disk. A
# daemon killed in the middle of such a restore leaves a disk that mounts, and a second rsync
# completes it.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/tvda.sh"

M=$T/mnt

# exact BACKUP MOUNT WHAT: nothing (times, sizes, modes, contents) differs.
exact() {
  rsync -a -i --dry-run "$1/" "$2/" >"$T/dry" || fail "$3: dry run failed"
  rsync -a -i --dry-run -c "$1/" "$2/" >>"$T/dry" || fail "$3: checksum dry run failed"
  if [ -s "$T/dry" ]; then head -20 "$T/dry"; fail "$3: $(wc -l <"$T/dry") entries differ"; fi
}

# backup DISK DIR: a backup of DISK through the mount.
backup() {
  mount_world "$1" "$M"
  rsync -a "$M/" "$2/" || fail "backup of $1"
  [ -f "$2/header.txt" ] || fail "the backup of $1 has no header.txt"
  unmount_world "$M"
}

# restore BACKUP DISK NAME: DISK made anew from BACKUP's header.txt and filled by rsync.
restore() {
  local B=$1 D=$2 name=$3
  cp -p "$B/header.txt" "$D"
  mount_world "$D" "$M"
  rsync -a "$B/" "$M/" || fail "$name: restore into a new disk"
  exact "$B" "$M" "$name: restore"
  rsync -a "$M/" "$T/again-$name/" || fail "$name: second backup"
  diff -r "$B" "$T/again-$name" || fail "$name: the second backup differs from the first"
  unmount_world "$M"
  check_ok "$D"
  mount_world "$D" "$M"
  exact "$B" "$M" "$name: restored, after a remount"
  unmount_world "$M"
  # The entries' own times are the backup's: mounted with another state folder (another
  # user or machine), no file but header.txt (the disk's creation time) has another time.
  WORLDFS_STATE_DIR=$T/state-$name mount_world "$D" "$M"
  rsync -a -i --dry-run "$B/" "$M/" | { grep -v -e '^\.d' -e ' header\.txt$' || true; } >"$T/dry"
  if [ -s "$T/dry" ]; then head -5 "$T/dry"; fail "$name: $(wc -l <"$T/dry") files differ with another state folder"; fi
  unmount_world "$M"
}

n=0
for s in "$TVDA_SAMPLES"/*.tvda "$(fixture world)" "$(fixture player)"; do
  name=$(basename "$s" .tvda)
  D=$T/disk-$name
  cp "$s" "$D"
  B=$T/backup-$name
  backup "$D" "$B"
  rm "$D"
  restore "$B" "$D" "$name"
  echo "$name: restored into a new disk ($(find "$B" -type f | wc -l) files; $(grep -o '^kind = [a-z0-9]*' "$B/header.txt"))"
  n=$((n + 1))
done
[ "$n" -ge 5 ] || fail "only $n disks restored"

# What makes no disk: a path that does not exist, an empty file, a header text mounted
# read-only, a header text that does not parse (the mount names its line).
B=$T/backup-fixture-world
if "$WORLDFS" mount "$T/missing" "$M" 2>"$T/err"; then fail "a missing path mounted"; fi
[ -e "$T/missing" ] && fail "mounting a missing path made a file"
: >"$T/empty"
if "$WORLDFS" mount "$T/empty" "$M" 2>"$T/err"; then fail "an empty file mounted"; fi
[ -s "$T/empty" ] && fail "mounting an empty file wrote to it"
cp "$B/header.txt" "$T/ro"
if "$WORLDFS" mount --read-only "$T/ro" "$M" 2>"$T/err"; then fail "a header text mounted read-only"; fi
assert_contains "$T/err" "mount it read-write"
cmp -s "$B/header.txt" "$T/ro" || fail "a read-only mount changed the header text"
sed 's/^origin = .*/origin = 300/' "$B/header.txt" >"$T/bad"
if "$WORLDFS" mount "$T/bad" "$M" 2>"$T/err"; then fail "a bad header text mounted"; fi
assert_contains "$T/err" "line 5, column 10: origin 300 is out of range"
sed 's/^origin = .*/origin = 300/' "$B/header.txt" | cmp -s - "$T/bad" || fail "a bad header text was changed"

# header.txt on a mounted disk: the same text is a no-op, a bad one fails the close with
# its line and changes nothing, a new name is committed (and shows after a remount).
D=$T/disk-fixture-world
before=$(sha "$D")
mount_world "$D" "$M"
cp "$M/header.txt" "$T/h"
cat "$T/h" >"$M/header.txt" || fail "writing back the same header"
[ "$(sha "$D")" = "$before" ] || fail "the same header text changed the disk"
sed 's/^kind = world/kind = player/' "$T/h" >"$T/kind"
if cp "$T/kind" "$M/header.txt" 2>"$T/err"; then fail "a kind change was taken"; fi
assert_contains "$T/worldfs.log" "line 3, column 1: kind: the disk is a world disk"
echo 'name = "x' >"$T/badh"
if cp "$T/badh" "$M/header.txt" 2>"$T/err"; then fail "a bad header text was taken"; fi
grep 'header.txt' "$T/worldfs.log" | grep -q 'line 1, column 8: name: missing closing quote' || fail "the log does not give file, line and reason"
[ "$(sha "$D")" = "$before" ] || fail "a refused header text changed the disk"
unmount_unsaved "$M" header.txt
mount_world "$D" "$M"
sed 's/^name = .*/name = "Renamed world"/' "$T/h" >"$M/header.txt" || fail "renaming the disk"
grep -q '^name = "Renamed world"' "$M/header.txt" || fail "the new name is not shown"
unmount_world "$M"
check_ok "$D"
mount_world "$D" "$M"
grep -q '^name = "Renamed world"' "$M/header.txt" || fail "the new name did not last"
unmount_world "$M"

# A daemon killed during a restore into a new disk, both cores kept busy by other processes:
# the disk mounts, a second rsync completes the restore exactly, and the disk checks clean
# (the commit the kill cut between an entry and the header is finished by that mount).
busy_cpu 3
for at in 0.02 0.06 0.1; do
  D=$T/killed-$at
  cp -p "$B/header.txt" "$D"
  mount_world "$D" "$M"
  PID=$(pgrep -f -- "--log-file $T/worldfs.log") || fail "daemon not found"
  [ "$(wc -w <<<"$PID")" -eq 1 ] || fail "several daemons: $PID"
  rsync -a "$B/" "$M/" 2>/dev/null &
  RSYNC=$!
  sleep "$at"
  kill -9 "$PID"
  wait "$RSYNC" || true
  fusermount3 -u -z "$M" || fail "lazy unmount failed"
  head -c 4 "$D" | grep -q TEVd || fail "killed $at s in: $D is not a disk"
  "$WORLDFS" info "$D" >"$T/info" 2>&1 || { cat "$T/info"; fail "killed $at s in: worldfs info fails"; }
  echo "killed $at s into the restore: $(grep "^entries" "$T/info")"
  mount_world "$D" "$M"
  rsync -a "$B/" "$M/" || fail "killed $at s in: the second restore failed"
  exact "$B" "$M" "killed $at s in, restored again"
  unmount_world "$M"
  check_ok "$D"
done
echo "ok"
