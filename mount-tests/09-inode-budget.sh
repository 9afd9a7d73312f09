#!/bin/bash
# With a small inode budget the daemon keeps asking the kernel to forget old names while a
# walk goes on, both of inodes it holds nodes for and of block folders it numbers (20 nodes,
# 160 block folders: the world has 343 blocks); every file still reads exactly as without
# the budget, and edits still work.
. "$(dirname "$0")/lib.sh"

W=$(world w 2)
mount_world "$W" "$T/a" --read-only
(cd "$T/a" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >"$T/plain"
unmount_world "$T/a"

mount_world "$W" "$T/b" --max-inodes 20 -v
for _ in 1 2; do
  (cd "$T/b" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >"$T/budget"
  diff "$T/plain" "$T/budget" >/dev/null || fail "files read differently under the inode budget"
done
[ "$(wc -l <"$T/plain")" -gt 1500 ] || fail "the walk was too small to exceed the budget"
grep -q "asking the kernel to forget" "$T/worldfs.log" || fail "the budget was never enforced"
grep -q "over the budget of numbered folders" "$T/worldfs.log" || fail "the budget of block folders was never enforced"
echo "changed by worldfs" >"$T/b/blocks/0,0,0/meta/2,10,1/fields/text"
unmount_world "$T/b"
mount_world "$W" "$T/c" --read-only
assert_eq "$(cat "$T/c/blocks/0,0,0/meta/2,10,1/fields/text")" "changed by worldfs" "edit under the budget"
unmount_world "$T/c"
echo "ok: $(wc -l <"$T/plain") files read twice under a 20-inode budget"
