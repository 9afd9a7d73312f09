#!/bin/bash
# Symbolic links in a Luanti world folder show as links through the mount and worldfs never
# follows one: `ls -l` and `readlink` show their targets, a link planted at a temporary name
# is never written through when a world file is saved, `rm`, `mv`, `touch -h` and `ln -s`
# act on the link itself, `rsync -a` and `cp -a` copy links as links (both ways), and the
# file a link points to is never touched by worldfs.
. "$(dirname "$0")/lib.sh"

W=$(world w 2)
M=$T/mnt
BK=$T/backup
echo secret >"$T/victim"
victim_sha=$(sha "$T/victim")
victim_mtime=$(stat -c %Y "$T/victim")
ln -s "$T/victim" "$W/outside.txt"
ln -s world.mt "$W/inside.txt"
mount_world "$W" "$M"

# Listed as links with their targets; lstat sizes are the targets' lengths, modes 0777.
ls -l "$M" >"$T/ls" || fail "ls -l failed"
grep -q "^l.* outside.txt -> $T/victim\$" "$T/ls" || { cat "$T/ls"; fail "outside.txt is not listed as a link"; }
grep -q "^l.* inside.txt -> world.mt\$" "$T/ls" || { cat "$T/ls"; fail "inside.txt is not listed as a link"; }
grep -q "^-.* world.mt\$" "$T/ls" || fail "world.mt is not listed as a file"
assert_eq "$(readlink "$M/outside.txt")" "$T/victim" "readlink of a link out of the world"
assert_eq "$(stat -c '%F %s %a' "$M/inside.txt")" "symbolic link 8 777" "lstat of a link"
assert_eq "$(find "$M" -maxdepth 1 -type l | sort | tr '\n' ' ')" "$M/inside.txt $M/outside.txt " "find -type l"
# The kernel follows a link inside the mount to the world file it names.
assert_eq "$(cat "$M/inside.txt")" "$(cat "$W/world.mt")" "reading through a link inside the mount"

# A link planted at the old fixed temporary name while mounted: saving env_meta.txt through
# the mount replaces the file and leaves the link and its target alone.
ln -s "$T/victim" "$W/.worldfs-env_meta.txt.tmp"
cat "$M/env_meta.txt" >"$T/env"
sed -i 's/^time_of_day = .*/time_of_day = 7000/' "$T/env"
grep -q '^time_of_day = 7000$' "$T/env" || fail "env_meta.txt has no time_of_day"
cp "$T/env" "$M/env_meta.txt" || fail "saving env_meta.txt failed"
assert_eq "$(sha "$W/env_meta.txt")" "$(sha "$T/env")" "env_meta.txt on disk"
[ -L "$W/.worldfs-env_meta.txt.tmp" ] || fail "the planted link is gone"
assert_eq "$(sha "$T/victim")" "$victim_sha" "the planted link was written through"

# rsync -a and cp -a copy links as links.
rsync -a "$M/" "$BK/" || fail "rsync -a of the mount failed"
[ -L "$BK/outside.txt" ] && [ -L "$BK/inside.txt" ] || fail "rsync did not copy the links as links"
assert_eq "$(readlink "$BK/outside.txt")" "$T/victim" "the backed-up link's target"
assert_eq "$(readlink "$BK/inside.txt")" "world.mt" "the backed-up link's target"
rsync -ai "$M/" "$BK/" >"$T/again" || fail "second rsync failed"
if grep -e 'inside.txt' -e 'outside.txt' "$T/again"; then fail "unchanged links are sent again"; fi
cp -a "$M/inside.txt" "$T/copied" || fail "cp -a of a link out of the mount failed"
assert_eq "$(readlink "$T/copied")" "world.mt" "cp -a of a link"
cp -a "$BK/outside.txt" "$M/copy.txt" || fail "cp -a of a link into the mount failed"
[ -L "$W/copy.txt" ] || fail "cp -a into the mount made no link in the world folder"
assert_eq "$(readlink "$W/copy.txt")" "$T/victim" "the copied link's target on disk"

# ln -s, mv, touch -h and rm act on the link itself.
ln -s world.mt "$M/made" || fail "ln -s in the mount failed"
[ -L "$W/made" ] || fail "ln -s made no link in the world folder"
assert_eq "$(readlink "$M/made")" "world.mt" "readlink of a new link"
mv "$M/made" "$M/moved" || fail "mv of a link failed"
[ -L "$W/moved" ] && [ ! -e "$W/made" ] && [ ! -L "$W/made" ] || fail "mv did not move the link"
world_mt_mtime=$(stat -c %Y "$W/world.mt")
touch -h -d '2001-02-03 04:05:06' "$M/moved" || fail "touch -h of a link failed"
assert_eq "$(stat -c %Y "$W/moved")" "$(date -d '2001-02-03 04:05:06' +%s)" "the link's own mtime"
assert_eq "$(stat -c %Y "$W/world.mt")" "$world_mt_mtime" "touch -h changed the link's target"
rm "$M/outside.txt" "$M/moved" || fail "rm of links failed"
[ ! -L "$W/outside.txt" ] && [ ! -L "$W/moved" ] || fail "rm did not remove the links"
assert_eq "$(sha "$T/victim")" "$victim_sha" "rm of a link touched its target"
[ -f "$W/world.mt" ] || fail "rm of a link removed its target"

# Links are made among the world folder's files only, never under a store's name.
if ln -s x "$M/blocks/0,0,0/x" 2>/dev/null; then fail "a link was made in a block folder"; fi
if ln -s x "$M/map.sqlite-journal" 2>/dev/null; then fail "a link was made under the store's name"; fi
[ ! -L "$W/map.sqlite-journal" ] || fail "a link named like the store is in the world folder"

# Restoring the backup puts the removed link back and a changed target right.
ln -sfn env_meta.txt "$W/inside.txt"
rsync -a "$BK/" "$M/" || fail "rsync -a into the mount failed"
assert_eq "$(readlink "$W/outside.txt")" "$T/victim" "the restored link"
assert_eq "$(readlink "$W/inside.txt")" "world.mt" "the link whose target was put right"
unmount_world "$M"

assert_eq "$(sha "$T/victim")" "$victim_sha" "the link's target changed"
assert_eq "$(stat -c %Y "$T/victim")" "$victim_mtime" "the link's target was touched"
if find "$W" -name '.*' ! -name '.worldfs-env_meta.txt.tmp' | grep .; then
  fail "temporaries leaked into the world folder"
fi
echo "ok: links shown as links and never followed"
