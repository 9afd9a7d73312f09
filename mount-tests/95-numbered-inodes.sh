#!/bin/bash
# Block folders and their views have inode numbers computed from the block's position
# (issue 37: the daemon keeps nothing per inode for them), so the kernel may keep a whole
# world's names, attributes and pages within the default --max-inodes: on a world of 3,388
# blocks (about 23,700 block files and folders, more than the 20,000 inodes the budget
# allows nodes for), a second grep -r reads (almost) no file through worldfs, and looks up
# no block folder and no meta/ (the kernel keeps their names and attributes too), only the
# folders a chest's or sign's meta/ holds (whose names it keeps briefly). A block folder's
# time set through the mount, or changed by another writer, shows as its files' does.
# The numbers are the same in every mount; a block folder moved keeps its number and its
# files follow it; another writer's change of a kept block still shows within 1 s.
. "$(dirname "$0")/lib.sh"

W=$(world w 8)
M=$T/mnt
key() { IFS=, read -r x y z <<<"$1"; echo $(( z * 16777216 + y * 4096 + x )); }
RUST_LOG=fuser=debug mount_world "$W" "$M"
LOG=$T/worldfs.log
count() { grep -aoE '\) ino 0x[0-9a-f]+ [A-Z_]+' "$LOG" | awk '{print $4}' | grep -cx "$1" || true; }

files=$(find "$M/blocks" -type f | wc -l)
entries=$(find "$M/blocks" | wc -l)
[ "$entries" -gt 20000 ] || fail "the world has $entries block files and folders: too few to pass the budget"
grep -rl default:chest "$M/blocks" >/dev/null || true
: >"$LOG"
grep -rl default:chest "$M/blocks" >"$T/second" || true
reads=$(count READ); opens=$(count OPEN); lookups=$(count LOOKUP)
dirs=$(find "$M/blocks" -type d | wc -l)
blocks=$(ls "$M/blocks" | wc -l)
others=$((dirs - 1 - 2 * blocks))
[ "$opens" -ge "$files" ] || fail "the second grep opened $opens files of $files (the log misses requests)"
# The kernel may drop a few pages under memory pressure; without numbering, past the
# budget, it reads them all again.
[ "$reads" -le $((files / 100)) ] || fail "the second grep read $reads of $files files through worldfs: the kernel forgot pages"
# Only the folders a chest's or sign's meta/ holds (their names live 1 s), no block folder,
# no meta/, no file.
[ "$lookups" -le $((others + 10)) ] || fail "the second grep looked up $lookups names ($blocks block folders, $others folders below meta/)"
grep -q "asking the kernel to forget" "$LOG" && fail "the budget was passed"

# The same numbers in another mount, walked in another order.
stat -c '%n %i' "$M"/blocks/*/nodes.cubeset | sed "s|$M/||" | sort >"$T/inos1"
[ "$(awk '{print $2}' "$T/inos1" | sort -u | wc -l)" = "$(wc -l <"$T/inos1")" ] || fail "two views share a number"
M2=$T/mnt2
mount_world "$W" "$M2" --read-only
stat -c '%n %i' $(ls -r "$M2/blocks" | sed "s|^|$M2/blocks/|; s|$|/nodes.cubeset|") | sed "s|$M2/||" | sort >"$T/inos2"
diff "$T/inos1" "$T/inos2" >/dev/null || fail "the numbers differ between two mounts"
unmount_world "$M2"

# A block folder moved: its files follow it, the name it left is free, a new block made
# there is another inode.
A=$(ls "$M/blocks" | grep -vxF -e 0,0,0 | sed -n 3p)
B=20,20,20
[ -e "$M/blocks/$B" ] && fail "block $B exists"
cat "$M/blocks/$A/nodes.cubeset" >"$T/a.nodes"
ino_a=$(stat -c %i "$M/blocks/$A/nodes.cubeset")
mv "$M/blocks/$A" "$M/blocks/$B"
cmp -s "$M/blocks/$B/nodes.cubeset" "$T/a.nodes" || fail "the moved block's nodes.cubeset differs"
[ "$(stat -c %i "$M/blocks/$B/nodes.cubeset")" = "$ino_a" ] || fail "the moved file changed its number"
[ -e "$M/blocks/$A" ] && fail "block $A still there after the move"
mkdir "$M/blocks/$A"
cp "$M/blocks/0,0,0/nodes.cubeset" "$M/blocks/$A/nodes.cubeset"
[ "$(stat -c %i "$M/blocks/$A/nodes.cubeset")" = "$ino_a" ] && fail "a new block at $A has the moved block's number"
cmp -s "$M/blocks/$A/nodes.cubeset" "$M/blocks/0,0,0/nodes.cubeset" || fail "the new block at $A differs"
cmp -s "$M/blocks/$B/nodes.cubeset" "$T/a.nodes" || fail "the moved block changed with the new one"

# Another writer's change of a block whose files the kernel keeps shows within 1 s.
C=$(ls "$M/blocks" | grep -vxF -e 0,0,0 -e "$A" -e "$B" | sed -n 7p)
cat "$M/blocks/$C/nodes.cubeset" "$M/blocks/$C/block.txt" >/dev/null
python3 -c 'import os, sys; os.fsync(os.open(sys.argv[1], os.O_RDONLY))' "$M/blocks/$A/nodes.cubeset"
sqlite3 -cmd ".timeout 5000" "$W/map.sqlite" "UPDATE blocks SET data = (SELECT data FROM blocks WHERE pos = $(key 0,0,0)) WHERE pos = $(key "$C");"
sleep 1
cmp -s "$M/blocks/$C/nodes.cubeset" "$M/blocks/0,0,0/nodes.cubeset" || fail "another writer's change of $C not shown within 1 s"

# A block folder's time: set through the mount, it shows at once; another writer's change
# of the block moves it within 1 s.
D=$(ls "$M/blocks" | grep -vxF -e 0,0,0 -e "$A" -e "$B" -e "$C" | sed -n 9p)
stat -c %Y "$M/blocks/$D" "$M/blocks/$D/meta" >/dev/null
ls -l "$M/blocks" >/dev/null
touch -d @1500000000 "$M/blocks/$D"
# Listed again (as rsync lists a folder before it sets times below it), then asked.
ls -l "$M/blocks" >/dev/null
[ "$(stat -c %Y "$M/blocks/$D")" = 1500000000 ] || fail "the time set on $D shows $(stat -c %Y "$M/blocks/$D") after a listing"
before=$(stat -c %Y "$M/blocks/$D/meta")
sqlite3 -cmd ".timeout 5000" "$W/map.sqlite" "UPDATE blocks SET data = (SELECT data FROM blocks WHERE pos = $(key 0,0,0)) WHERE pos = $(key "$D");"
sleep 1
[ "$(stat -c %Y "$M/blocks/$D")" = "$(stat -c %Y "$M/blocks/0,0,0")" ] || fail "another writer's change of $D: its folder still shows $(stat -c %Y "$M/blocks/$D")"
[ "$(stat -c %Y "$M/blocks/$D/meta")" != "$before" ] || fail "another writer's change of $D: its meta/ still shows $before"
unmount_world "$M"
echo "ok: $files block files, a second grep read $reads through worldfs, looked up $lookups names"
