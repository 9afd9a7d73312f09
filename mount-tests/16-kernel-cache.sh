#!/bin/bash
# Kernel caching kept true (issue 11, "Cached attributes, kept true"): the kernel keeps names,
# attributes and pages of block files, and the mount tells it of every change: its own (the
# other views of an edited block change at once) and another writer's (plain sqlite3, then
# the real engine running on the world folder beside the mount), shown within 1 s.
. "$(dirname "$0")/lib.sh"

W=$(world w 2)
M=$T/mnt
mount_world "$W" "$M"

# A walk: the kernel now keeps what it was given of these files.
find "$M/blocks" -type f | sed -n 1,300p >"$T/files"
xargs stat -c '%n %s %Y' <"$T/files" >/dev/null
fresh_mount_view() { # fresh_mount_view BLOCK FILE: the file as a new daemon shows it
  local m2=$T/m2
  mount_world "$W" "$m2" --read-only
  cat "$m2/blocks/$1/$2"
  unmount_world "$m2"
}

# 1. Our own changes, with every view of the block cached by the kernel first.
B=$(head -1 "$T/files" | sed "s|$M/blocks/||; s|/.*||")
VIEWS="block.txt nodes.cubeset light.txt"
for f in $VIEWS; do cat "$M/blocks/$B/$f" >"$T/cached.$f"; done
# a. The file written: what it shows after the close is the canonical text, not the bytes
# the kernel cached while they were written.
sed -e 's/ *#.*//' -e 's/^timestamp = .*/timestamp   =   77/' "$T/cached.block.txt" >"$T/written"
cp "$T/written" "$M/blocks/$B/block.txt"
grep -q '^timestamp = 77 ' "$M/blocks/$B/block.txt" || fail "block.txt shows the written bytes, not the canonical text"
# b. Another view of the same block: a node edit in nodes.cubeset clears lighting_complete
# in block.txt (the derived-data rule), which must show at once.
mese_variant "$M/blocks/$B/nodes.cubeset" "$T/nodes.new"
cp "$T/nodes.new" "$M/blocks/$B/nodes.cubeset"
for f in $VIEWS; do
  cat "$M/blocks/$B/$f" >"$T/mine.$f"
  [ "$(stat -c %s "$M/blocks/$B/$f")" = "$(stat -c %s "$T/mine.$f")" ] || fail "$f: stat size differs from its content after our edit"
done
cmp -s "$T/cached.block.txt" "$T/mine.block.txt" && fail "block.txt did not change (test cannot tell)"
# fsync commits what write-back holds, so a fresh daemon reads it from the database.
python3 -c 'import os, sys; os.fsync(os.open(sys.argv[1], os.O_RDONLY))' "$M/blocks/$B/block.txt"
for f in $VIEWS; do
  fresh_mount_view "$B" "$f" >"$T/fresh.$f"
  cmp -s "$T/mine.$f" "$T/fresh.$f" || fail "$f of $B: the mount shows a stale copy after its own edit"
done

# 2. Another writer (sqlite3): block C gets the stored bytes of block D. The mount, whose
# kernel cached C's attributes and pages, shows D's content within 1 s.
C=$(sed -n 10p "$T/files" | sed "s|$M/blocks/||; s|/.*||")
D=0,0,0 # the block mkworld.sh built in: unlike any other
[ "$C" != "$D" ] || fail "pick two blocks"
cat "$M/blocks/$C/nodes.cubeset" >/dev/null
cat "$M/blocks/$D/nodes.cubeset" >"$T/d.nodes"
cmp -s "$M/blocks/$C/nodes.cubeset" "$T/d.nodes" && fail "blocks $C and $D already equal"
key() { IFS=, read -r x y z <<<"$1"; echo $(( z * 16777216 + y * 4096 + x )); }
sqlite3 -cmd ".timeout 5000" "$W/map.sqlite" "UPDATE blocks SET data = (SELECT data FROM blocks WHERE pos = $(key "$D")) WHERE pos = $(key "$C");"
sleep 1
cmp -s "$M/blocks/$C/nodes.cubeset" "$T/d.nodes" || fail "another writer's change of $C not shown within 1 s"
[ "$(stat -c %s "$M/blocks/$C/nodes.cubeset")" = "$(stat -c %s "$T/d.nodes")" ] || fail "stale size of $C after another writer's change"
# ... and a block another writer deleted is gone within 1 s.
E=$(sed -n 100p "$T/files" | sed "s|$M/blocks/||; s|/.*||")
stat "$M/blocks/$E/block.txt" >/dev/null
sqlite3 -cmd ".timeout 5000" "$W/map.sqlite" "DELETE FROM blocks WHERE pos = $(key "$E");"
sleep 1
[ -e "$M/blocks/$E/block.txt" ] && fail "block $E deleted by another writer still shown after 1 s"
ls "$M/blocks" | grep -xF -e "$E" >/dev/null && fail "block $E still listed"

# A reader holding a block file open across another writer's change (grep, less, an editor)
# reads its old text; once it closes, the next reader sees the new text, not pages the old
# handle filled (block H gets the bytes of block C, which are shorter or equal).
H=$(sed -n 20p "$T/files" | sed "s|$M/blocks/||; s|/.*||")
[ "$H" != "$C" ] && [ "$H" != "$D" ] && [ "$H" != "$E" ] || fail "pick another block"
python3 - "$M/blocks/$H/nodes.cubeset" "$W/map.sqlite" "$(key "$H")" "$(key "$C")" <<'PY'
import os, sqlite3, sys, time
path, db, h, c = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
fd = os.open(path, os.O_RDONLY)
old = os.pread(fd, 1 << 20, 0)
con = sqlite3.connect(db, timeout=5)
con.execute("UPDATE blocks SET data = (SELECT data FROM blocks WHERE pos = ?) WHERE pos = ?", (c, h))
con.commit(); con.close()
time.sleep(1)
os.pread(fd, 1 << 20, 0)
os.close(fd)
PY
cmp -s "$M/blocks/$H/nodes.cubeset" "$M/blocks/$C/nodes.cubeset" || fail "block $H: a reader open across another writer's change left its old text in the kernel's cache"

# Listings follow another writer too (the kernel caches them; the mount drops them): a block inserted
# after `ls blocks` shows in the next `ls`, one deleted before anything looked it up is gone;
# a file put in the world folder on disk and a player inserted into players.sqlite show.
ls "$M/blocks" >"$T/ls1"; ls "$M" >/dev/null; ls "$M/players" >"$T/players1"
NEW=6,6,6
grep -xF -e "$NEW" "$T/ls1" >/dev/null && fail "block $NEW exists already"
G=$(sed -n 5p "$T/ls1"); [ "$G" != "$B" ] && [ "$G" != "$C" ] && [ "$G" != "$E" ] || G=$(sed -n 6p "$T/ls1")
sqlite3 -cmd ".timeout 5000" "$W/map.sqlite" "INSERT INTO blocks SELECT $(key "$NEW"), data FROM blocks WHERE pos = $(key "$D"); DELETE FROM blocks WHERE pos = $(key "$G");"
echo "a note" >"$W/notes.txt"
P=$(head -1 "$T/players1")
sqlite3 -cmd ".timeout 5000" "$W/players.sqlite" "INSERT INTO player SELECT 'zzbob', pitch, yaw, posX, posY, posZ, hp, breath, creation_date, modification_date FROM player WHERE name = '$P';"
sleep 1
ls "$M/blocks" >"$T/ls2"
grep -xF -e "$NEW" "$T/ls2" >/dev/null || fail "block $NEW inserted by another writer not listed after 1 s"
grep -xF -e "$G" "$T/ls2" >/dev/null && fail "block $G deleted by another writer still listed after 1 s"
ls "$M" | grep -x notes.txt >/dev/null || fail "a file added to the world folder on disk not listed"
ls "$M/players" | grep -x zzbob >/dev/null || fail "a player inserted into players.sqlite not listed"

# A folder's listing that depends on who asks is never served from the kernel's cache (it
# caches listings of blocks/): `mkdir` hides a new block's fixed files from its maker only,
# whichever process lists first.
python3 - "$M/blocks" <<'PY' || fail "a listing of a folder just made was shared between processes"
import os, subprocess, sys
blocks = sys.argv[1]
def other_ls(path):
    return sorted(subprocess.run(["ls", path], capture_output=True, text=True, check=True).stdout.split())
for pos, maker_first in (("11,11,11", True), ("12,11,11", False)):
    folder = f"{blocks}/{pos}"
    os.mkdir(folder)
    if maker_first:
        assert os.listdir(folder) == [], f"the maker sees {os.listdir(folder)}"
    others = other_ls(folder)
    assert "nodes.cubeset" in others and "block.txt" in others, f"another process lists {others} in {pos}"
    assert os.listdir(folder) == [], f"the maker sees {os.listdir(folder)} after another process listed {pos}"
    subprocess.run(["stat", f"{folder}/block.txt"], capture_output=True, check=True)
    assert not os.path.exists(f"{folder}/block.txt"), f"the maker finds block.txt in {pos} after another process looked it up"
    os.rmdir(folder)
# The hiding is per process, not per thread: a folder made in one thread is filled from
# another (a thread-pool copier), with O_EXCL creates that fail on an entry already there.
import shutil, threading
text = open(f"{blocks}/0,0,0/block.txt", "rb").read()
folder = f"{blocks}/13,11,11"
os.mkdir(folder)
seen = {}
def fill():
    seen["listed"] = os.listdir(folder)
    try:
        fd = os.open(f"{folder}/block.txt", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, text)
        os.close(fd)
        seen["created"] = True
    except OSError as e:
        seen["created"] = e
t = threading.Thread(target=fill)
t.start()
t.join()
assert seen["listed"] == [], f"another thread of the maker lists {seen['listed']}"
assert seen["created"] is True, f"another thread of the maker cannot create block.txt: {seen['created']}"
others = other_ls(folder)
assert "nodes.cubeset" in others, f"another process lists {others} in 13,11,11"
shutil.rmtree(folder)
PY

# 3. The real engine as the other writer: it runs on the world folder beside the mount, sets
# a node and saves. Every cached block file read before equals a fresh daemon's view 1 s
# after the engine exits (and at least one block did change).
find "$M/blocks" -name nodes.cubeset | sort >"$T/all"
xargs cat <"$T/all" | sha256sum >"$T/before.sum"
mkdir -p "$W/worldmods/changer"
echo "name = changer" >"$W/worldmods/changer/mod.conf"
cat >"$W/worldmods/changer/init.lua" <<'LUA'
minetest.after(1, function()
  minetest.emerge_area({x = 0, y = 0, z = 0}, {x = 15, y = 15, z = 15}, function(_, _, left)
    if left == 0 then
      minetest.set_node({x = 5, y = 10, z = 5}, {name = "default:mese"})
      minetest.after(1, function() minetest.request_shutdown() end)
    end
  end)
end)
LUA
engine_run timeout 120 /usr/games/minetestserver --world "$W" --port 30997 --logfile "$T/engine.log" >/dev/null || fail "the engine did not run on the world"
rm -rf "$W/worldmods"
sleep 1
xargs cat <"$T/all" | sha256sum >"$T/after.sum"
cmp -s "$T/before.sum" "$T/after.sum" && fail "the engine changed no block (test cannot tell)"
m2=$T/m3
mount_world "$W" "$m2" --read-only
while read -r f; do
  rel=${f#"$M/"}
  cmp -s "$f" "$m2/$rel" || fail "$rel: stale after the engine's change"
done <"$T/all"
grep -q "default:mese" "$M/blocks/0,0,0/nodes.cubeset" || fail "the engine's node not shown in block 0,0,0"
unmount_world "$m2"
unmount_world "$M"
echo "ok 16-kernel-cache"
