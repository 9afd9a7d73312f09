#!/bin/bash
# Nothing written is lost, and nothing stored is lost by mistake (issue "Nothing lost"):
# removing a file whose commit failed discards only its text; the size of a file open for
# writing is its buffer's; a lone truncating close reports its error; huge truncations fail
# with EFBIG, and a file written past the limit is never stored cut; text no commit took is
# saved at unmount and reported by `worldfs unmount`; held files show real modes; a second
# writer and odd mount points are refused clearly.
source "$(dirname "$0")/lib.sh"

W=$(world lost 2)
M=$T/m
P=$M/players/celeron55
INV=$M/blocks/0,0,0/meta/1,10,1/inventory
FIELD=$M/blocks/0,0,0/meta/2,10,1/fields/text
players_row() { sqlite3 "$W/players.sqlite" "SELECT name, hp FROM player WHERE name='celeron55'"; }
mount_world "$W" "$M"

# rm after a failed sed -i discards the pending text only; a second rm deletes the player.
hp=$(sed -n 's/^hp = //p' "$P")
cp "$P" "$T/player"
if sed -i 's/^hp = .*/hp = twenty/' "$P" 2>/dev/null; then fail "sed -i of a bad hp succeeded"; fi
assert_contains "$P" "hp = twenty"
rm "$P" || fail "rm of the pending text failed"
assert_eq "$(players_row)" "celeron55|$hp" "the player after rm of its failed edit"
assert_contains "$P" "hp = $hp"
rm "$P" || fail "second rm failed"
[ ! -e "$P" ] || fail "the removed player still shows"
# The removal reaches the store within about a second (a re-creation in between replaces it).
for _ in $(seq 30); do [ -z "$(players_row)" ] && break; sleep 0.1; done
assert_eq "$(players_row)" "" "the player after the second rm"
cp "$T/player" "$P" || fail "re-creating the player failed"
assert_eq "$(players_row)" "celeron55|$hp" "the player made again"

# The same for a node inventory: the stored inventory shows again.
cp "$INV" "$T/inv"
if sed -i 's/^List main .*/List main x/' "$INV" 2>/dev/null; then fail "bad inventory accepted"; fi
rm "$INV" || fail "rm of the pending inventory failed"
cmp "$INV" "$T/inv" || fail "the stored inventory does not show again"

# The size of a file open for writing is its buffer's; reads through the fd see it.
python3 - "$FIELD" <<'PY' || fail "size of a file open for writing"
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_TRUNC)
assert os.write(fd, b"x" * 100) == 100
assert os.lseek(fd, 0, os.SEEK_END) == 100, "lseek END"
assert os.fstat(fd).st_size == 100, "fstat"
assert os.stat(sys.argv[1]).st_size == 100, "stat by path"
os.ftruncate(fd, 150)
assert os.fstat(fd).st_size == 150, "ftruncate up"
assert os.pread(fd, 200, 0) == b"x" * 100 + b"\0" * 50, "pread"
os.write(fd, b"end")
os.close(fd)
PY
assert_eq "$(head -c 3 "$FIELD")" "xxx" "the committed field"

# A lone open(O_TRUNC); close() whose commit fails fails the close; shell redirections work.
python3 - "$P" <<'PY' || fail "open(O_TRUNC); close()"
import errno, os, sys
p = sys.argv[1]
try:
    os.close(os.open(p, os.O_WRONLY | os.O_TRUNC))
except OSError as e:
    assert e.errno == errno.EINVAL, e
else:
    raise SystemExit("close() returned 0 for a commit that fails")
PY
rm -f "$P"  # discard the pending empty text
assert_contains "$P" "name = celeron55"
echo "set by echo" >"$FIELD" || fail "echo > field"
assert_eq "$(cat "$FIELD")" "set by echo" "field after echo >"
printf 'set by printf\n' >"$FIELD" || fail "printf > field"
assert_eq "$(cat "$FIELD")" "set by printf" "field after printf >"
: >"$FIELD" || fail ": > field"
assert_eq "$(stat -c %s "$FIELD")" "1" "field after : > (an empty value reads as a newline)"
/bin/echo "external" >"$FIELD" || fail "/bin/echo > field"
assert_eq "$(cat "$FIELD")" "external" "field after /bin/echo >"

# A truncation past the limit fails with EFBIG and the mount lives on.
if truncate -s 1T "$FIELD" 2>"$T/err"; then fail "truncate -s 1T succeeded"; fi
assert_contains "$T/err" "File too large"
assert_eq "$(cat "$FIELD")" "external" "field after the refused truncation"

# A world-folder file copied past the limit is never stored cut: its close fails with EFBIG
# and what was written is dropped, so the file shows and keeps what it held (a new file
# stays as the shell's `>` made it, empty); nothing cut is held to be saved at unmount. A
# cut temporary renamed over the file while still open is refused too, and once closed it
# is gone.
mkdir -p "$M/worldmods/big"
echo "small mod file" >"$M/worldmods/big/data"
if head -c 300M /dev/zero >"$M/worldmods/big/data" 2>"$T/err"; then fail "a 300 MiB file was taken"; fi
assert_contains "$T/err" "File too large"
if head -c 300M /dev/zero >"$M/worldmods/big/new" 2>"$T/err"; then fail "a 300 MiB new file was taken"; fi
assert_eq "$(cat "$W/worldmods/big/data")" "small mod file" "the stored file after a cut copy"
assert_eq "$(cat "$M/worldmods/big/data")" "small mod file" "the file in the mount after a cut copy"
assert_eq "$(stat -c %s "$W/worldmods/big/new")" "0" "a cut new file in the world folder"
assert_eq "$(stat -c %s "$M/worldmods/big/new")" "0" "a cut new file in the mount"
assert_contains "$T/worldfs.log" "worldmods/big/data: a write past 256 MiB failed"
python3 - "$M/worldmods/big" <<'PY' || fail "a cut temporary renamed over a file"
import errno, os, sys
d = sys.argv[1]
fd = os.open(f"{d}/.data.tmp", os.O_CREAT | os.O_WRONLY, 0o644)
os.write(fd, b"cut")
try:
    os.pwrite(fd, b"x", 300 << 20)
    raise SystemExit("a write past the limit was taken")
except OSError as e:
    assert e.errno == errno.EFBIG, e
try:
    os.rename(f"{d}/.data.tmp", f"{d}/data")
    raise SystemExit("a cut temporary was renamed over data")
except OSError as e:
    assert e.errno == errno.EFBIG, e
try:
    os.close(fd)
except OSError as e:
    assert e.errno == errno.EFBIG, e
# Closed, the cut temporary goes with what was written (once the kernel's release, which
# close() does not wait for, is done): a later `mv` of it replaces nothing.
import time
try:
    os.rename(f"{d}/.data.tmp", f"{d}/data")
    raise SystemExit("a closed cut temporary was renamed over data")
except OSError as e:
    assert e.errno in (errno.EFBIG, errno.ENOENT), e
for _ in range(100):
    if not os.path.exists(f"{d}/.data.tmp"):
        break
    time.sleep(0.05)
else:
    raise SystemExit("a closed cut temporary is still there after 5 s")
PY
assert_eq "$(cat "$W/worldmods/big/data")" "small mod file" "the stored file after a cut rename"
rm -r "$M/worldmods"

# Held files show real modes: a moved-aside auth.txt keeps 0600, create honours its mode.
assert_eq "$(stat -c %a "$M/auth.txt")" "600" "auth.txt mode"
mv "$M/auth.txt" "$M/auth.txt~"
assert_eq "$(stat -c %a "$M/auth.txt~")" "600" "moved-aside auth.txt~ mode"
mv "$M/auth.txt~" "$M/auth.txt"
python3 -c 'import os,sys; os.close(os.open(sys.argv[1], os.O_CREAT|os.O_WRONLY, 0o600))' "$M/.secret.swp"
assert_eq "$(stat -c %a "$M/.secret.swp")" "600" "mode of a created scratch file"
chmod 640 "$M/.secret.swp"
assert_eq "$(stat -c %a "$M/.secret.swp")" "640" "chmod of a scratch file"
if sed -i 's/^celeron55:.*/celeron55:x/' "$M/auth.txt" 2>/dev/null; then fail "bad auth.txt accepted"; fi
assert_eq "$(stat -c %a "$M/auth.txt")" "600" "mode of auth.txt's pending text"
rm "$M/auth.txt"

# A second read-write mount of the world is refused, naming the daemon; odd mount points too.
mkdir "$T/m2"
if "$WORLDFS" mount "$W" "$T/m2" 2>"$T/err"; then MOUNTS+=("$T/m2"); fail "second read-write mount accepted"; fi
assert_contains "$T/err" "is already mounted read-write by worldfs (pid"
touch "$T/file"
if "$WORLDFS" mount "$W" "$T/file" --read-only 2>"$T/err"; then fail "a file mount point accepted"; fi
assert_contains "$T/err" "is a file, not a folder"
touch "$T/m2/x"
if "$WORLDFS" mount "$W" "$T/m2" --read-only 2>"$T/err"; then MOUNTS+=("$T/m2"); fail "non-empty mount point accepted"; fi
assert_contains "$T/err" "is not empty"
mount_world "$W" "$T/m2" --read-only -o nonempty
if "$WORLDFS" mount "$W" "$T/m2" --read-only -o nonempty 2>"$T/err"; then fail "a mount over a mount accepted"; fi
assert_contains "$T/err" "already holds a mount: unmount it first"
unmount_world "$T/m2"

# Text no commit took is saved at unmount; `worldfs unmount` names it and exits non-zero.
if sed -i 's/^hp = .*/hp = lost/' "$P" 2>/dev/null; then fail "bad hp accepted"; fi
cp "$P" "$T/pending"
if "$WORLDFS" unmount "$M" 2>"$T/err"; then fail "unmount exited 0 with text not committed"; fi
cat "$T/err"
assert_contains "$T/err" "not committed: players/celeron55 (saved in $WORLDFS_STATE_DIR/unsaved/"
saved=$(sed -n 's/.*not committed: players\/celeron55 (saved in \(.*\))$/\1/p' "$T/err")
cmp "$saved" "$T/pending" || fail "the saved text differs"
assert_eq "$(stat -c %a "$saved")" "600" "mode of the saved text"
assert_contains "$T/worldfs.log" "not committed: players/celeron55"
mountpoint -q "$M" && fail "still mounted"
# SIGTERM saves the same way (the log names the saved file); the lock goes with the daemon,
# so the world mounts read-write again.
mount_world "$W" "$M"
PID=$(pgrep -f -- "--log-file $T/worldfs.log $W $M" || true)
[ -n "$PID" ] || fail "daemon not found"
if sed -i 's/^hp = .*/hp = term/' "$P" 2>/dev/null; then fail "bad hp accepted"; fi
kill -TERM "$PID"
for _ in $(seq 1 200); do [ -e "/proc/$PID" ] || break; sleep 0.05; done
mountpoint -q "$M" && fail "still mounted after SIGTERM"
saved=$(sed -n 's/.*not committed: players\/celeron55 (saved in \(.*\))$/\1/p' "$T/worldfs.log" | tail -1)
grep -q "^hp = term$" "$saved" || fail "SIGTERM did not save the pending text"
mount_world "$W" "$M"
unmount_world "$M"
echo "nothing lost: ok"
