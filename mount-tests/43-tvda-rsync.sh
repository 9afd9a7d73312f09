#!/bin/bash
# rsync backups of a mounted TVDA disk are incremental (unchanged files keep size and mtime
# across remounts and across edits of other files), and restoring an older backup through
# the mount brings the old content back.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/tvda.sh"

M=$T/mnt
B=$T/backup
w=$(fixture world)
mount_world "$w" "$M"
rsync -a "$M/" "$B/" || fail "first backup"
[ "$(find "$B" -type f | wc -l)" -eq 33 ] || fail "backup holds $(find "$B" -type f | wc -l) files, want 33"
diff -r "$M" "$B" > /dev/null || fail "backup differs from the mount"
unmount_world "$M"

# Nothing changed: a re-backup after a remount transfers nothing.
mount_world "$w" "$M"
out=$(rsync -ai "$M/" "$B/") || fail "second backup"
[ -z "$(echo "$out" | grep '^>f')" ] || fail "unchanged files re-sent: $out"

# One chunk changes: only it (and its raw entry) are sent.
sed -i 's/: 77: /: basegame:1: /' "$M/chunks/wall/1,1.cubeset" || fail "edit"
out=$(rsync -ai "$M/" "$B/" | grep '^>f' | awk '{print $2}' | sort | tr '\n' ' ')
assert_eq "$out" "chunks/wall/1,1.cubeset entries/4311744516 " "incremental backup"
unmount_world "$M"
mount_world "$w" "$M"
out=$(rsync -ai "$M/" "$B/" | grep '^>f' || true)
[ -z "$out" ] || fail "after remount, files re-sent: $out"

# Restore: take an older backup of two files and rsync it back over the mount.
cp -a "$B" "$T/old"
sed -i 's/"spawnX": 10/"spawnX": 99/' "$M/savegameinfo.json" || fail "edit JSON"
echo "basegame 9.9.9" > "$M/loadOrder.txt"
rsync -a --exclude entries "$T/old/" "$M/" || fail "restore"
unmount_world "$M"
check_ok "$w"
mount_world "$w" "$M"
assert_contains "$M/savegameinfo.json" '"spawnX": 10'
assert_eq "$(cat "$M/loadOrder.txt")" "basegame 0.5.2" "restored"
out=$(rsync -ai --exclude entries "$T/old/" "$M/" | grep '^>f' || true)
[ -z "$out" ] || fail "restored files differ in size or mtime: $out"
find "$M" -name '*.cubeset' | wc -l | grep -qx 12 || fail "find"
grep -rl 'ores@basegame:1' "$M/chunks/ores" | wc -l | grep -qx 3 || fail "grep -r"
unmount_world "$M"
