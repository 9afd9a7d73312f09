#!/bin/bash
# Hostile Survivalcraft worlds (a Chunks32h.dat with bad records, out-of-range coordinates
# and slots past its end; a Regions/ world with a deflate bomb, impossible slots, a file that
# is no region and region names past the coordinates; links in the world folder), mounted
# read-only and read-write with --cache-size 4 and read whole with find and cat: the daemon
# survives under cache size + 64 MiB of peak RSS, only the bad chunks fail, no link is
# followed (links show as links), and every file stays byte-identical.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/survivalcraft.sh"
. "$(dirname "$0")/hostile.sh"

for kind in chunks32h regions; do
  w=$T/$kind/world
  mkdir -p "$w"
  hostile "$kind" "$w"
  read_all "$w" "$T/ro-$kind" --read-only
  read_all "$w" "$T/rw-$kind"
  mount_world "$w" "$T/m-$kind"
  while read -r pos; do
    cat "$T/m-$kind/chunks/$pos/blocks.cubeset" > /dev/null || fail "good chunk $pos of $kind does not read"
  done < "$T/good-$kind"
  [ -L "$T/m-$kind/notes.txt" ] || fail "a link in the world folder is not shown as a link"
  assert_eq "$(readlink "$T/m-$kind/notes.txt")" "$(readlink "$w/notes.txt")" "the link's target"
  cat "$T/m-$kind/readme.txt" > /dev/null || fail "a plain world file does not read"
  unmount_world "$T/m-$kind"
  assert_eq "$(cat "$T/$kind/victim")" "secret" "the link's target changed"
done

# A world file of mode 0600 shows 0600 (0400 read-only) and keeps it when saved through the
# mount; a link planted at a temporary name is never written through.
w=$T/chunks32h/world
chmod 600 "$w/readme.txt"
mount_world "$w" "$T/modes"
ln -s "$T/chunks32h/victim" "$w/.worldfs-readme.txt.tmp"
assert_eq "$(stat -c %a "$T/modes/readme.txt")" 600 "mode of a 0600 world file"
echo "edited" > "$T/new.txt"
cp "$T/new.txt" "$T/modes/readme.txt" || fail "saving a world file failed"
assert_eq "$(cat "$T/modes/readme.txt")" "edited" "the saved world file"
unmount_world "$T/modes"
assert_eq "$(stat -c %a "$w/readme.txt")" 600 "the replaced file lost its mode"
assert_eq "$(cat "$w/readme.txt")" "edited" "the world file on disk"
assert_eq "$(cat "$T/chunks32h/victim")" "secret" "a planted link was written through"
mount_world "$w" "$T/modes-ro" --read-only
assert_eq "$(stat -c %a "$T/modes-ro/readme.txt")" 600 "mode on a read-only mount (the world's own; the kernel refuses writes)"
unmount_world "$T/modes-ro"
