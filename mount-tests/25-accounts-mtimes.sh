#!/bin/bash
# Sizes and mtimes of players/, auth.txt and mod_storage/ stay put across remounts while
# unchanged and move forward with an edit, so rsync -a backups of them are incremental.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/accounts.sh"

W=$(world mtimes 1 sqlite3 sqlite3)
M=$T/m
mount_world "$W" "$M"
cp "$M/players/celeron55" "$T/p"
sed 's/^name = .*/name = other/' "$T/p" >"$M/players/other" || fail "adding a player failed"
echo v >"$M/mod_storage/mkworld/second" || fail "adding an entry failed"
unmount_world "$M"

stats() { (cd "$M" && stat -c '%n %s %Y' auth.txt players/* mod_storage/*/*); }
mount_world "$W" "$M" --read-only
stats >"$T/first"
rsync -a "$M/players" "$M/auth.txt" "$M/mod_storage" "$T/backup/" || fail "rsync backup failed"
unmount_world "$M"
mount_world "$W" "$M"
stats >"$T/second"
cmp "$T/first" "$T/second" || fail "mtimes or sizes moved across a remount: $(diff "$T/first" "$T/second")"

start=$(date +%s)
sed -i 's/^hp = .*/hp = 4/' "$M/players/celeron55" || fail "sed -i failed"
stats >"$T/third"
diff "$T/second" "$T/third" | grep '^>' >"$T/changed" || true
assert_eq "$(wc -l <"$T/changed")" 1 "exactly one file changed"
assert_contains "$T/changed" "players/celeron55"
t=$(awk '{print $4}' "$T/changed")
[ "$t" -ge "$start" ] || fail "the edited player's mtime $t is older than the edit ($start)"

rsync -a --stats "$M/players" "$M/auth.txt" "$M/mod_storage" "$T/backup/" >"$T/rsync" || fail "rsync re-backup failed"
assert_contains "$T/rsync" "Number of regular files transferred: 1"
cmp "$T/backup/players/celeron55" "$M/players/celeron55" || fail "backup differs"

# Restoring the old mtime (rsync, touch -d) sticks across a remount.
touch -d @1600000000 "$M/players/other" || fail "touch -d failed"
unmount_world "$M"
mount_world "$W" "$M" --read-only
assert_eq "$(stat -c %Y "$M/players/other")" 1600000000 "mtime set with touch -d"
unmount_world "$M"
echo "accounts mtimes ok"
