#!/bin/bash
# TEVD v3 (current and 2017-2018 layouts) and v2 disks mount as their real directory tree:
# a reading mount leaves them byte-identical; files and folders are created, written,
# renamed and removed with ordinary tools, survive a remount, and every CRC stays valid; a
# file restored with `rsync -a` keeps its time in the disk.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/tvda.sh"

M=$T/mnt
for s in tevd-v3-2023_tsvm-DOSBOOT.tevd tevd-v2_tsvm-DOSBOOT-2022-12-23.tevd tevd-v3-2018-footer_tevd-test-suite-00.tevd; do
  d=$(sample "$s")
  before=$(sha "$d")
  check_ok "$d"
  "$WORLDFS" info "$d" > "$T/info"
  assert_contains "$T/info" "format: TEVD version"
  mount_world "$d" "$M"
  find "$M" > "$T/find.$s"
  [ "$(wc -l < "$T/find.$s")" -gt 3 ] || fail "$s lists almost nothing"
  find "$M" -type f -exec cat {} + > /dev/null || fail "$s: reading every file"
  ls -lR "$M" > /dev/null
  unmount_world "$M"
  assert_eq "$(sha "$d")" "$before" "$s changed by a reading mount"
done

# The 2023 boot disk: the tree as tsvm shows it (boot sector hidden).
d=$T/tevd-v3-2023_tsvm-DOSBOOT.tevd
mount_world "$d" "$M"
[ ! -e "$M/!BOOTSEC" ] || fail "the boot sector (its own parent) is shown"
first=$(find "$M" -type f | head -1)
[ -n "$first" ] || fail "no file"
cp "$first" "$T/first"
mkdir "$M/newdir" "$M/newdir/sub" || fail "mkdir"
echo "hello tevd" > "$M/newdir/sub/hello.txt"
python3 -c "open('$M/newdir/big.bin','wb').write(bytes(range(256))*300)" || fail "python write"
sed -i 's/hello/HELLO/' "$M/newdir/sub/hello.txt" || fail "sed -i"
vim -es -c 'normal Gox' -c wq "$M/newdir/sub/hello.txt" || fail "vim -es"
mv "$M/newdir/sub/hello.txt" "$M/newdir/hi.txt" || fail "mv"
rmdir "$M/newdir/sub" || fail "rmdir"
cp "$T/first" "$M/copy-of-first" || fail "cp"
rm "$first" || fail "rm"
unmount_world "$M"
check_ok "$d"
mount_world "$d" "$M"
assert_eq "$(cat "$M/newdir/hi.txt")" $'HELLO tevd\nx' "edited file"
assert_eq "$(stat -c %s "$M/newdir/big.bin")" 76800 "big file"
cmp "$M/copy-of-first" "$T/first" || fail "copied file"
[ ! -e "$first" ] || fail "removed file is back"
[ ! -e "$M/newdir/sub" ] || fail "removed folder is back"
rm -r "$M/newdir"
unmount_world "$M"
check_ok "$d"
mount_world "$d" "$M" --read-only
[ ! -e "$M/newdir" ] || fail "rm -r"
unmount_world "$M"

# A file restored with `rsync -a` (a temporary file, its time set, renamed over the name)
# keeps its time in the disk itself: mounted with another state folder it shows that time.
mkdir -p "$T/src/restored"
echo "restored text" > "$T/src/restored/file.txt"
touch -d '2021-03-04 05:06:07' "$T/src/restored/file.txt"
mount_world "$d" "$M"
rsync -a "$T/src/" "$M/" || fail "rsync into the TEVD disk"
unmount_world "$M"
WORLDFS_STATE_DIR=$T/state-other mount_world "$d" "$M" --read-only
assert_eq "$(stat -c %Y "$M/restored/file.txt")" "$(stat -c %Y "$T/src/restored/file.txt")" \
  "time of a file restored with rsync, in the disk itself"
unmount_world "$M"
check_ok "$d"
