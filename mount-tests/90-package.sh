#!/bin/bash
# The Debian package, installed as a user installs it, mounts like sshfs: built by
# scripts/package, it holds the binary, the man page and mount(8)'s and umount(8)'s helpers
# and declares fuse3 and Debian's LevelDB; `apt-get install ./worldfs_*.deb` installs it on
# this machine (removed at the end, whatever happens); `mount -t fuse.worldfs WORLD MNT -o ro`
# mounts read-only; an fstab line (`mount -T FILE MNT`) mounts read-write, and `umount MNT`
# returns only once the daemon committed an edit and ended, as `worldfs unmount` does.
. "$(dirname "$0")/lib.sh"

# A package left by a run killed before its end (no trap runs on SIGKILL) is removed first:
# this test installs and removes its own.
if dpkg -s worldfs >/dev/null 2>&1; then
  echo "removing the worldfs package already installed ($(dpkg-query -W -f='${Version}' worldfs))" >&2
  dpkg -r worldfs >/dev/null || fail "could not remove the worldfs package already installed"
fi
"$ROOT/scripts/package" >"$T/package.log" 2>&1 || { tail -20 "$T/package.log"; fail "scripts/package failed"; }
DEB=$(ls -t "$ROOT"/target/debian/worldfs_*.deb | head -1)
[ "$DEB" -nt "$WORLDFS" ] || fail "the package $DEB is older than the binary it should hold"

dpkg-deb -c "$DEB" >"$T/contents"
for f in ./usr/bin/worldfs ./usr/share/man/man1/worldfs.1.gz ./usr/sbin/mount.fuse.worldfs \
  ./usr/sbin/umount.fuse.worldfs ./usr/share/doc/worldfs/README.md; do
  assert_contains "$T/contents" " $f"
done
dpkg-deb -f "$DEB" Depends >"$T/depends"
assert_contains "$T/depends" "fuse3"
assert_contains "$T/depends" "libleveldb1d"

# Installed as a user would, removed whatever happens.
# set +e: the status put back for cleanup (which keeps a failed run's evidence) must not end the trap.
trap 'rc=$?; dpkg -r worldfs >/dev/null || echo "could not remove the worldfs package" >&2; set +e; (exit $rc); cleanup' EXIT
DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$DEB" >"$T/install.log" 2>&1 || { tail "$T/install.log"; fail "apt-get install of the package failed"; }
assert_eq "$(command -v worldfs)" /usr/bin/worldfs "the installed binary"
cmp -s <(/usr/bin/worldfs --version) <("$WORLDFS" --version) || fail "the installed worldfs is not the one built"

W=$(world w 2)
M=$T/mnt
mkdir -p "$M"
SIGN=blocks/0,0,0/meta/2,10,1/fields/text

# mount -t, read-only.
mount -t fuse.worldfs "$W" "$M" -o ro || fail "mount -t fuse.worldfs failed"
MOUNTS+=("$M")
listed "$M" || fail "not mounted"
awk -v m="$M" '$5 == m { for (i = 7; i < NF; i++) if ($i == "-") { print $(i + 1); exit } }' \
  /proc/self/mountinfo >"$T/type"
assert_eq "$(cat "$T/type")" fuse.worldfs "the mount's type"
grep -q "hello from mkworld" "$M/$SIGN" || fail "the sign does not read as the world holds it"
if (echo x >"$M/$SIGN") 2>"$T/ro.err"; then fail "a write to a read-only mount succeeded"; fi
assert_contains "$T/ro.err" "Read-only file system"
/usr/bin/worldfs status "$M" >"$T/status" || fail "worldfs status of the -t mount failed"
assert_contains "$T/status" "mount: read-only"
umount "$M" || fail "umount of the -t mount failed"
listed "$M" && fail "still mounted after umount"

# An fstab line, read-write: umount waits for the edit's commit and the daemon's end.
echo "$W $M fuse.worldfs rw,nofail 0 0" >"$T/fstab"
mount -T "$T/fstab" "$M" || fail "mount -T fstab failed"
pid=$(/usr/bin/worldfs status "$M" | sed -n 's/.*daemon pid \([0-9]*\).*/\1/p')
[ -n "$pid" ] || fail "no daemon pid in worldfs status"
echo "written through fstab" >"$M/$SIGN" || fail "the edit failed"
umount "$M" || fail "umount of the fstab mount failed"
if task_alive "/proc/$pid"; then fail "umount returned while the daemon $pid still ran"; fi
listed "$M" && fail "still mounted after umount"
# What the daemon committed is in the world: a fresh read-only mount of the built binary.
mount_world "$W" "$M" --read-only
assert_eq "$(cat "$M/$SIGN")" "written through fstab" "the sign after umount"
unmount_world "$M"
echo "package: contents, dependencies, install, mount -t, fstab, umount waiting for the commit"
