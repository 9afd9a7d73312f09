#!/bin/bash
# Issue 35's holes, through a real mount of an engine world: moving a view's folder is refused
# and deletes nothing (mv falls back to copy-then-delete on EXDEV); install and cp
# --remove-destination (unlink, then create) replace a player or world.mt only with a text that
# commits; index/ takes no file (create, open for writing, truncation) and a bad new name
# there is EPERM, not EINVAL; a reader of a world-folder file that is replaced on disk reads
# the old file whole; a file larger than the memory a buffer takes reads back exactly; a
# world folder nested past the 256 levels the mount shows is refused below them
# (ENAMETOOLONG) and left as it is; a FIFO at map.sqlite is refused at once by mount, info
# and check instead of hanging them.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/accounts.sh"

W=$(world nothing-lost-next 1)
M=$T/m
players() { sqlite3 "$W/players.sqlite" "SELECT name FROM player ORDER BY name" | tr '\n' ' '; }
blocks() { sqlite3 "$W/map.sqlite" "SELECT count(*) FROM blocks"; }
PLAYERS=$(players)
BLOCKS=$(blocks)
[ -n "$PLAYERS" ] || fail "the engine world holds no player"
mount_world "$W" "$M"

# 1. A view's folder is never copied and removed: mv stops at once with the reason.
for d in players blocks; do
  if mv "$M/$d" "$M/$d.bak" 2>"$T/mv.err"; then fail "mv of $d/ exited 0"; fi
  assert_contains "$T/mv.err" "Operation not permitted" "mv of $d/: $(cat "$T/mv.err")"
  [ ! -e "$W/$d.bak" ] || fail "mv of $d/ left a copy in the world folder"
  [ ! -e "$M/$d.bak" ] || fail "mv of $d/ left $d.bak in the mount"
done
if mv "$M/blocks/0,0,0" "$M/worldmods/" 2>"$T/mv.err"; then fail "mv of a block into worldmods/ exited 0"; fi
assert_contains "$T/mv.err" "Operation not permitted"
[ -d "$M/blocks/0,0,0" ] || fail "the block moved out is gone"

# 2. install / cp --remove-destination: unlink, then create. A text that fails its commit
# leaves the stored player (and world.mt) as they were; a good one replaces them.
P=$(ls "$M/players" | head -1)
cp "$M/players/$P" "$T/good"
sed -i 's/^hp = .*/hp = 7/' "$T/good"
sed 's/^hp = .*/hp = many/' "$T/good" >"$T/bad"
if install -m 644 "$T/bad" "$M/players/$P" 2>/dev/null; then fail "install of a bad player text exited 0"; fi
if cp --remove-destination "$T/bad" "$M/players/$P" 2>/dev/null; then fail "cp --remove-destination of a bad player exited 0"; fi
assert_eq "$(players)" "$PLAYERS" "players after failed replacements"
rm -f "$M/players/$P"  # discards the failed text; the stored player shows again
grep -q "^hp = " "$M/players/$P" || fail "the stored player does not show again"
install -m 644 "$T/good" "$M/players/$P" || fail "install of a good player text failed"
assert_contains "$M/players/$P" "hp = 7"
cp "$M/world.mt" "$T/world.mt"
sed 's/^backend = .*/backend = leveldb/' "$T/world.mt" >"$T/world.mt.bad"
grep -q "^backend = leveldb" "$T/world.mt.bad" || echo "backend = leveldb" >>"$T/world.mt.bad"
if install -m 644 "$T/world.mt.bad" "$M/world.mt" 2>/dev/null; then fail "install of a world.mt naming another map exited 0"; fi
cmp -s "$W/world.mt" "$T/world.mt" || fail "world.mt on disk changed by a refused replacement"
rm -f "$M/world.mt"
cmp -s "$M/world.mt" "$T/world.mt" || fail "world.mt does not show again after discarding the text"

# A plain rm hides the player at once and removes it from the store.
Q=$(ls "$M/players" | grep -vxF "$P" | head -1 || true)
if [ -n "$Q" ]; then
  rm "$M/players/$Q" || fail "rm of a player"
  [ ! -e "$M/players/$Q" ] || fail "a removed player still shows"
  ls "$M/players" | grep -qxF -e "$Q" && fail "a removed player is still listed"
fi

# 3. index/ takes no file: create, open for writing and truncation are refused at once.
ITEM=$(ls "$M/index/items" | head -1)
cp "$M/index/items/$ITEM" "$T/answer"
if (echo x >"$M/index/items/foo") 2>"$T/w.err"; then fail "a new file under index/ was taken"; fi
assert_contains "$T/w.err" "Operation not permitted"
if touch "$M/index/items/bar" 2>/dev/null; then fail "touch under index/ succeeded"; fi
if (echo x >"$M/index/items/$ITEM") 2>/dev/null; then fail "an answer file was opened for writing"; fi
if truncate -s 0 "$M/index/items/$ITEM" 2>/dev/null; then fail "an answer file was truncated"; fi
[ ! -e "$M/index/items/foo" ] && [ ! -e "$M/index/items/bar" ] || fail "index/ lists a refused file"
cmp -s "$M/index/items/$ITEM" "$T/answer" || fail "the answer file changed"
if rm "$M/index/items/$ITEM" 2>"$T/rm.err"; then fail "rm of an answer file succeeded"; fi
assert_not_contains "$T/rm.err" "Is a directory"
# A new name the tree refuses reads as what it is, not "subdirectory of itself" (EINVAL).
NODE=$(ls "$M/index/nodes" | head -1)
if mv "$M/index/nodes/$NODE" "$M/index/nodes/bad name" 2>"$T/mv.err"; then fail "a bad node name was taken"; fi
assert_contains "$T/mv.err" "Operation not permitted"
assert_not_contains "$T/mv.err" "subdirectory of itself"

# 5. A reader of a world-folder file that another program replaces (a shorter file renamed
# over it) reads the old file whole, as on disk; a new open reads the new one.
head -c 150000 /dev/urandom | base64 >"$W/notes.txt"
cp "$W/notes.txt" "$T/notes.old"
exec 4<"$M/notes.txt"
dd bs=1000 count=1 <&4 >"$T/notes.read" 2>/dev/null
echo "short" >"$W/notes.new" && mv "$W/notes.new" "$W/notes.txt"
sleep 2  # past the time the kernel keeps a world-folder file's attributes
# Read on without any lookup of the name first: the handle itself finds the file replaced.
cat <&4 >>"$T/notes.read"
assert_eq "$(stat -c %s "$M/notes.txt")" 6 "size of the replaced file"
exec 4<&-
cmp "$T/notes.read" "$T/notes.old" || fail "the reader got $(wc -c <"$T/notes.read") bytes, not the old file's $(wc -c <"$T/notes.old")"
assert_eq "$(cat "$M/notes.txt")" "short" "a new open of the replaced file"
# The mount's own saves in place of a world-folder file keep its inode number, as on disk
# (tail -F and log handlers see the same file), though each commit puts a new file there.
# A reader holding the file open meanwhile (tail -f) does not change that.
ino=$(stat -c %i "$M/notes.txt")
exec 6<"$M/notes.txt"
echo "longer text" >"$M/notes.txt"
sleep 2
cat <&6 >/dev/null
echo "more" >>"$M/notes.txt"
sleep 2
cat <&6 >/dev/null
assert_eq "$(stat -c %i "$M/notes.txt")" "$ino" "inode number after the mount's own saves"
exec 6<&-
assert_eq "$(cat "$M/notes.txt")" "longer text
more" "the saved text"

# 6. A file written past the 8 MiB kept in memory (then in an unnamed file of the state
# folder) reads back exactly, while open and after its close, written in order or not.
head -c 20000000 /dev/urandom >"$T/big.bin"
exec 5<>"$M/big.bin"
dd if="$T/big.bin" of=/dev/fd/5 bs=1M skip=10 seek=10 conv=notrunc status=none
dd if="$T/big.bin" of=/dev/fd/5 bs=1M count=10 conv=notrunc status=none
cmp "$M/big.bin" "$T/big.bin" || fail "a 20 MB file read while open differs"
exec 5>&-
cmp "$W/big.bin" "$T/big.bin" || fail "the 20 MB file stored differs"
cmp "$M/big.bin" "$T/big.bin" || fail "the 20 MB file read back differs"
[ -z "$(find "$T/state/held" -type f 2>/dev/null)" ] || fail "the state folder holds a named buffer: $(find "$T/state/held" -type f)"

# 7. A world folder nested 300 levels deep (a hostile world): the mount shows 256 levels, so
# no request costs more than a path of 256 names; find and rsync name what they cannot reach
# (ENAMETOOLONG) and fail, and nothing on disk changes.
python3 - "$W" <<'PY'
import os, sys
os.chdir(sys.argv[1])
os.mkdir("deep")
os.chdir("deep")
for i in range(300):
    os.mkdir("d")
    os.chdir("d")
    open("f", "w").write(str(i))
PY
( cd "$W" && find deep | sort ) >"$T/deep.disk"
if find "$M/deep" >"$T/deep.found" 2>"$T/deep.err"; then fail "find below 256 levels exited 0"; fi
assert_contains "$T/deep.err" "File name too long" "find: $(head -3 "$T/deep.err")"
found=$(grep -c '/f$' "$T/deep.found" || true)
[ "$found" -ge 254 ] && [ "$found" -le 256 ] || fail "find reached $found of the files (about 255 expected)"
cmp -s "$M/deep/d/d/d/f" "$W/deep/d/d/d/f" || fail "a file 4 levels deep reads differently"
rc=0
rsync -a "$M/deep/" "$T/deep.copy/" 2>"$T/rsync.err" || rc=$?
assert_eq "$rc" 23 "rsync of the deep folder (partial transfer)"
assert_contains "$T/rsync.err" "File name too long"
( cd "$W" && find deep | sort ) | cmp -s - "$T/deep.disk" || fail "the deep folder changed on disk"
grep -q "deeper than the 256 levels the mount shows" "$T/worldfs.log" || fail "the log does not say why"
rm -r "$W/deep"
unmount_world "$M"

# The removal reached the store; the replaced player holds the new text.
[ -z "$Q" ] || assert_eq "$(players)" "$(tr ' ' '\n' <<<"$PLAYERS" | grep -vxF "$Q" | grep . | tr '\n' ' ')" "players after rm"
assert_eq "$(blocks)" "$BLOCKS" "blocks in map.sqlite"
mount_world "$W" "$M" --read-only
assert_contains "$M/players/$P" "hp = 7"
unmount_world "$M"
"$WORLDFS" check "$W" >/dev/null || fail "check after the edits"

# 4. A FIFO at map.sqlite is refused at once, naming it, by mount, info and check.
F=$T/fifo-world
mkdir "$F"
cp "$W/world.mt" "$F/"
mkfifo "$F/map.sqlite"
mkdir -p "$T/mf"
fifo_refused() {
  local rc=0
  timeout 30 "$WORLDFS" "$@" >"$T/fifo.out" 2>&1 || rc=$?
  [ "$rc" != 0 ] || { MOUNTS+=("$T/mf"); fail "worldfs $* took a FIFO map.sqlite"; }
  [ "$rc" != 124 ] || fail "worldfs $* hung on a FIFO map.sqlite"
  assert_contains "$T/fifo.out" "map.sqlite: not a regular file but a FIFO" "worldfs $*: $(cat "$T/fifo.out")"
}
fifo_refused info "$F"
fifo_refused check "$F"
fifo_refused mount --foreground "$F" "$T/mf"
fifo_refused mount "$F" "$T/mf"
echo "ok"
