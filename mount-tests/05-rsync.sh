#!/bin/bash
# rsync -a backups of a mount are incremental (an edit of one block re-sends only that block's
# files), and restoring a backup into a mount of the original world gives the edited world.
. "$(dirname "$0")/lib.sh"

W=$(world w 2)
M=$T/mnt
BK=$T/backup
mount_world "$W" "$M"
rsync -a "$M/" "$BK/" || fail "first rsync failed"
diff -r "$M/blocks/0,0,0" "$BK/blocks/0,0,0" >/dev/null || fail "backup differs from the mount"
assert_eq "$(ls "$BK/blocks" | wc -l)" "$(ls "$M/blocks" | wc -l)" "blocks in the backup"

stats() { sed -n 's/^Number of regular files transferred: //p' "$1" | tr -d ,; }

# Nothing changed: nothing is sent.
rsync -a --stats "$M/" "$BK/" >"$T/stats0" || fail "second rsync failed"
assert_eq "$(stats "$T/stats0")" 0 "files re-sent without a change"

# Edit one block (same size: only the mtime can tell); the next backup sends only files of that
# block, the edited one among them.
TEXT=$(printf 'HELLO from mkworld\nsecond line')
[ "${#TEXT}" -eq "$(($(stat -c %s "$M/blocks/0,0,0/meta/2,10,1/fields/text") - 1))" ] || fail "not a same-size edit"
echo "$TEXT" >"$M/blocks/0,0,0/meta/2,10,1/fields/text"
rsync -a --stats --out-format='XFER %n' "$M/" "$BK/" >"$T/stats1" || fail "incremental rsync failed"
n=$(stats "$T/stats1")
grep '^XFER ' "$T/stats1" | grep -v '/$' | sed 's/^XFER //' >"$T/sent"
echo "incremental backup: $n regular files transferred: $(tr '\n' ' ' <"$T/sent")"
grep -qx "blocks/0,0,0/meta/2,10,1/fields/text" "$T/sent" || fail "the edited file was not sent"
if grep -v '^blocks/0,0,0/' "$T/sent"; then fail "files of other blocks were sent"; fi
[ "$n" -ge 1 ] && [ "$n" -le "$(find "$M/blocks/0,0,0" -type f | wc -l)" ] || fail "$n files transferred"
assert_eq "$(cat "$BK/blocks/0,0,0/meta/2,10,1/fields/text")" "$TEXT" "backed-up text"
unmount_world "$M"

# Restore into a mount of a fresh copy of the original world.
W2=$(world w2 2)
M2=$T/mnt2
mount_world "$W2" "$M2"
rsync -a --stats "$BK/" "$M2/" >"$T/stats2" || fail "restore rsync failed"
echo "restore: $(stats "$T/stats2") regular files transferred"
assert_eq "$(cat "$M2/blocks/0,0,0/meta/2,10,1/fields/text")" "$TEXT" "restored text"
# The restored mount now equals the backup for rsync too.
rsync -a --stats "$BK/" "$M2/" >"$T/stats3" || fail "rsync after restore failed"
assert_eq "$(stats "$T/stats3")" 0 "files re-sent after the restore"
unmount_world "$M2"
if find "$W2" -name '.*' | grep .; then fail "rsync temporaries leaked into the world folder"; fi

dump() { sqlite3 "$1/map.sqlite" 'select pos, hex(data) from blocks order by pos' | sha256sum; }
assert_eq "$(dump "$W2")" "$(dump "$W")" "restored blocks differ from the edited world's"
probe "$W" >"$T/probe.edited"
probe "$W2" >"$T/probe.restored"
grep -q '^checksum ' "$T/probe.edited" || fail "probe of the edited world failed"
grep -qF 'HELLO from mkworld' "$T/probe.edited" || fail "the engine does not see the edit"
diff "$T/probe.edited" "$T/probe.restored" || fail "the engine tells the restored world from the edited one"
echo "ok"
