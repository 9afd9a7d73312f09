#!/bin/bash
# A daemon killed in the middle of a restore into an empty world folder (the README's restore:
# a folder holding only the backup's world.mt) leaves a folder that mounts again, with every
# database the kill left sound; running the same rsync again completes the restore exactly and
# the engine sees the original world. An empty map.sqlite (what a crash of a program that let
# SQLite create the file leaves) mounts as an empty map too, as the engine starts on one.
# The kills come with both cores kept busy by other processes, at five moments spread over the
# restore as timed unkilled under the same load; KILL_TIMES overrides them (seconds into the
# restore; a kill between a block's block.txt and its nodes.cubeset once left the block's
# lighting flags cleared on the re-run).
. "$(dirname "$0")/lib.sh"

W=$(world w 2)
probe "$W" >"$T/probe.original"
grep -q '^checksum ' "$T/probe.original" || fail "probe of the original world failed"
M=$T/mnt
BK=$T/backup
mount_world "$W" "$M"
rsync -a "$M/" "$BK/" || fail "backup rsync failed"
unmount_world "$M"

# restore_into FOLDER: the restore through a mount of FOLDER, then its checks.
restore_into() {
  local R=$1
  mount_world "$R" "$M"
  rsync -a "$BK/" "$M/" || fail "restore rsync into $R failed"
  rsync -a --dry-run -i "$BK/" "$M/" >"$T/dry-run" || fail "dry-run rsync failed"
  [ -s "$T/dry-run" ] && fail "the restore into $R is not exact: $(head -5 "$T/dry-run" | tr '\n' ' ')"
  unmount_world "$M"
  assert_eq "$(sqlite3 "$R/map.sqlite" 'PRAGMA integrity_check')" "ok" "integrity of the restored map"
  probe "$R" >"$T/probe.restored"
  diff "$T/probe.original" "$T/probe.restored" || fail "the engine tells the world restored into $R from the original"
}

busy_cpu 3
R=$T/restore-timed
mkdir "$R"
cp "$BK/world.mt" "$R/"
mount_world "$R" "$M"
start=$(date +%s.%N)
rsync -a "$BK/" "$M/" || fail "the timed restore failed"
took=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.3f", e - s }')
unmount_world "$M"
moments=$(awk -v d="$took" 'BEGIN { for (k = 1; k <= 5; k++) printf "%.3f ", d * k / 6 }')
echo "restore: $took s unkilled; kills at ${KILL_TIMES:-$moments}"
for at in ${KILL_TIMES:-$moments}; do
  R=$T/restore-$at
  mkdir "$R"
  cp "$BK/world.mt" "$R/"
  mount_world "$R" "$M"
  PID=$(pgrep -f -- "--log-file $T/worldfs.log") || fail "daemon not found"
  [ "$(wc -w <<<"$PID")" -eq 1 ] || fail "several daemons: $PID"
  rsync -a "$BK/" "$M/" 2>/dev/null &
  RSYNC=$!
  sleep "$at"
  kill -9 "$PID"
  wait "$RSYNC" || true
  # The user's next command: mounting again names the dead mount and what to run.
  if "$WORLDFS" mount --log-file "$T/worldfs.log" "$R" "$M" 2>"$T/mount.err"; then
    fail "a mount over the dead one succeeded"
  fi
  assert_contains "$T/mount.err" "still holds a mount whose daemon is gone"
  assert_contains "$T/mount.err" "run \`worldfs unmount $M\` first"
  "$WORLDFS" unmount "$M" || fail "worldfs unmount of the dead mount failed"
  mountpoint -q "$M" && fail "$M still mounted"
  echo "killed $at s into the restore: $(cd "$R" && ls -A | tr '\n' ' ')"
  for db in "$R"/*.sqlite; do
    [ -e "$db" ] || continue
    [ -s "$db" ] || fail "$db is empty after the kill"
    assert_eq "$(sqlite3 "$db" 'PRAGMA integrity_check')" "ok" "integrity of $db after the kill"
  done
  restore_into "$R"
done

R=$T/restore-empty-map
mkdir "$R"
cp "$BK/world.mt" "$R/"
: >"$R/map.sqlite"
restore_into "$R"
echo "ok"
