#!/bin/bash
# A map.sqlite replaced under a running mount, as restoring the world folder's own backup
# with `rsync` or `mv` does (a new file renamed over the old): the mount shows the new file's
# blocks within 2 s, and an edit made through the mount afterwards lands in the new file,
# which the engine loads. Before, the mount kept reading the old, unlinked file, and edits
# went into it and were lost with it. The same for players.sqlite.
. "$(dirname "$0")/lib.sh"

W=$(world w 2)
M=$T/mnt
B=0,0,0
mount_world "$W" "$M"
cat "$M/blocks/$B/nodes.cubeset" >"$T/original"
cp "$W/map.sqlite" "$T/backup.sqlite"

# An edit through the mount, committed.
mese_variant "$T/original" "$T/mese"
cp "$T/mese" "$M/blocks/$B/nodes.cubeset"
python3 -c 'import os, sys; os.fsync(os.open(sys.argv[1], os.O_RDONLY))' "$M/blocks/$B/nodes.cubeset"
cat "$M/blocks/$B/nodes.cubeset" >"$T/mese.shown"
cmp -s "$T/original" "$T/mese.shown" && fail "the edit does not show (test cannot tell)"

# The backup put back by rename, beside the running mount.
cp "$T/backup.sqlite" "$W/map.sqlite.new"
mv "$W/map.sqlite.new" "$W/map.sqlite"
seen=""
for _ in $(seq 1 20); do
  if cmp -s "$T/original" "$M/blocks/$B/nodes.cubeset"; then seen=1; break; fi
  sleep 0.1
done
[ -n "$seen" ] || fail "the mount still shows the replaced file's block 2 s after the rename"
grep -q "map.sqlite: replaced under the mount" "$T/worldfs.log" || fail "the replacement was not logged"

# An edit after the replacement lands in the new file.
cp "$T/mese" "$M/blocks/$B/nodes.cubeset"
python3 -c 'import os, sys; os.fsync(os.open(sys.argv[1], os.O_RDONLY))' "$M/blocks/$B/nodes.cubeset"
cmp -s "$T/mese.shown" "$M/blocks/$B/nodes.cubeset" || fail "the edit after the replacement does not show"
cmp -s "$T/backup.sqlite" "$W/map.sqlite" && fail "the new map.sqlite did not change"
unmount_world "$M"
[ -e "$W/map.sqlite-journal" ] && fail "a rollback journal was left"

# A fresh mount and the engine read the edit from the new file.
mount_world "$W" "$M" --read-only
cmp -s "$T/mese.shown" "$M/blocks/$B/nodes.cubeset" || fail "a fresh mount does not show the edit"
unmount_world "$M"
# The engine sees one more default:mese node in block 0,0,0 than in the backup.
mkdir "$T/backup-world"; cp "$W/world.mt" "$T/backup-world/"; cp "$T/backup.sqlite" "$T/backup-world/map.sqlite"
mese() { # mese WORLD: default:mese nodes the engine sees in block 0,0,0
  probe_area "$1" 0,0,0 15,15,15 >"$T/probe"
  grep -q '^checksum ' "$T/probe" || { cat "$T/probe"; fail "the engine cannot load $1"; }
  awk '$1 == "count" && $2 == "default:mese" { n = $3 } END { print n + 0 }' "$T/probe"
}
before=$(mese "$T/backup-world")
assert_eq "$(mese "$W")" "$((before + 1))" "default:mese nodes the engine sees in block $B"

# players.sqlite replaced the same way.
PW=$(world p 1 sqlite3 sqlite3)
mount_world "$PW" "$M"
P=$M/players/celeron55
cp "$P" "$T/player.orig"
cp "$PW/players.sqlite" "$T/players.backup"
sed -i 's/^hp = .*/hp = 7/' "$P"
grep -q '^hp = 7$' "$P" || fail "the player edit does not show (test cannot tell)"
cp "$T/players.backup" "$PW/players.sqlite.new"
mv "$PW/players.sqlite.new" "$PW/players.sqlite"
cmp -s "$T/player.orig" "$P" || fail "players/celeron55 still shows the replaced file's player"
sed -i 's/^hp = .*/hp = 9/' "$P"
unmount_world "$M"
hp=$(python3 -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute("SELECT hp FROM player WHERE name = ?", ("celeron55",)).fetchone()[0])' "$PW/players.sqlite")
assert_eq "$hp" 9 "hp stored in the new players.sqlite"
if grep -q ERROR "$T/worldfs.log"; then grep ERROR "$T/worldfs.log" | head -5; fail "the mounts logged errors"; fi
echo "ok"
