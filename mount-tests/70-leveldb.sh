#!/bin/bash
# A LevelDB world (map, players and auth migrated by the engine itself): a running server's
# world is refused naming map.db/LOCK; the mount reads as the SQLite original; vim and sed -i
# edits and bad input that changes nothing; SIGKILL of the daemon mid-edits leaves each block
# old or new; an rsync backup restored into a folder holding only world.mt mounts the same;
# the engine reads what the mount wrote.
. "$(dirname "$0")/lib.sh"

ENGINE=/usr/games/minetestserver
W=$(world w 1 files files)
cp -a "$W" "$T/orig"
for what in "" -players -auth; do
  engine_run "$ENGINE" --world "$W" --migrate$what leveldb --logfile "$T/migrate.log" >/dev/null
done
grep -q "backend = leveldb" "$W/world.mt" || fail "the engine did not migrate the map"
rm "$W/map.sqlite"
M=$T/mnt; O=$T/omnt

# A running server holds the LOCK: the mount fails naming it.
(
  flock 9
  "$ENGINE" --world "$W" --port 30996 --logfile "$T/server.log" >/dev/null 2>&1 &
  spid=$!
  # Wait until it listens (its map is open then); opening it earlier would take the lock
  # from the server.
  for _ in $(seq 150); do
    grep -q "listening on" "$T/server.log" 2>/dev/null && break
    sleep 0.2
  done
  if "$WORLDFS" info "$W" >/dev/null 2>"$T/info.err"; then fail "worldfs info read a held map"; fi
  assert_contains "$T/info.err" "map.db/LOCK"
  mkdir -p "$M"
  if "$WORLDFS" mount "$W" "$M" 2>"$T/mount.err"; then
    kill "$spid"; wait "$spid" || true
    fail "a mount of a world whose server runs succeeded"
  fi
  kill "$spid"; wait "$spid" || true
  assert_contains "$T/mount.err" "map.db/LOCK"
) 9>"$ENGINE_LOCK"

mount_world "$W" "$M"
mount_world "$T/orig" "$O" --read-only
diff <(ls "$M/blocks") <(ls "$O/blocks" ) || fail "blocks/ differs from the SQLite original"
diff -r "$M/blocks/0,0,0" "$O/blocks/0,0,0" || fail "block 0,0,0 differs"
diff "$M/players/celeron55" "$O/players/celeron55" || fail "players/celeron55 differs"
diff <(sort "$M/auth.txt") <(grep -v '^bar:' "$O/auth.txt" | sort) || fail "auth.txt differs"
unmount_world "$O"

B=$M/blocks/0,0,0
F=$B/meta/2,10,1/fields
sed -i 's/^.*$/set by sed on LevelDB/' "$F/infotext" || fail "sed -i failed"
vim -es -u NONE -c '%s/$/ and vim/' -c 'wq' "$F/infotext" </dev/null || fail "vim failed"
assert_eq "$(cat "$F/infotext")" "set by sed on LevelDB and vim" "infotext"
sed -i 's/^hp = .*/hp = 5/' "$M/players/celeron55" || fail "sed -i on a player failed"
# Bad input changes nothing.
cp "$B/block.txt" "$T/block.before"
printf 'garbage\n' >"$T/garbage"
if cat "$T/garbage" >"$B/block.txt" 2>/dev/null; then fail "garbage block.txt accepted"; fi
# The rejected text stays readable until fixed; nothing was stored.
cmp "$T/garbage" "$B/block.txt" || fail "the rejected text is not shown"
cat "$T/block.before" >"$B/block.txt" || fail "writing block.txt back failed"
diff "$T/block.before" "$B/block.txt" || fail "block.txt changed after bad input"
cp "$M/auth.txt" "$T/auth.before"
printf 'celeron55:x:interact:notanumber\n' >"$T/badauth"
if cat "$T/badauth" >"$M/auth.txt" 2>/dev/null; then fail "bad auth.txt accepted"; fi
cat "$T/auth.before" >"$M/auth.txt" || fail "writing auth.txt back failed"
diff "$T/auth.before" "$M/auth.txt" || fail "auth.txt changed after bad input"
unmount_world "$M"

# SIGKILL during edits: every block stays old or new.
mount_world "$W" "$M"
PID=$(pgrep -f -- "--log-file $T/worldfs.log") || fail "daemon not found"
[ "$(wc -w <<<"$PID")" -eq 1 ] || fail "several daemons: $PID"
K=$M/blocks/0,0,0/meta/1,10,1/fields/k
(for i in $(seq 1 100000); do printf 'kill test %s\n' "$i" >"$K" 2>/dev/null || break; done) &
loop=$!
sleep 2
kill -9 "$PID"
wait "$loop" || true
fusermount3 -u -z "$M" 2>/dev/null || true
"$WORLDFS" check "$W" >"$T/check.out" 2>&1 || { cat "$T/check.out"; fail "a block broke after SIGKILL"; }
mount_world "$W" "$M" --read-only
grep -qE '^kill test [0-9]+$' "$K" || fail "field k after SIGKILL: $(cat "$K" 2>&1)"
assert_eq "$(cat "$M/blocks/0,0,0/meta/2,10,1/fields/infotext")" "set by sed on LevelDB and vim" "infotext after SIGKILL"
unmount_world "$M"

# rsync backup, restore into a folder holding only world.mt, the same tree.
mount_world "$W" "$M" --read-only
rsync -a "$M/" "$T/backup/" || fail "rsync backup failed"
mkdir "$T/restored"; cp "$W/world.mt" "$T/restored/"
mount_world "$T/restored" "$T/rmnt"
rsync -a "$T/backup/" "$T/rmnt/" || fail "rsync restore failed"
unmount_world "$T/rmnt"
mount_world "$T/restored" "$T/rmnt" --read-only
diff -r "$M/blocks" "$T/rmnt/blocks" >/dev/null || fail "the restored blocks differ"
unmount_world "$T/rmnt"; unmount_world "$M"
[ -d "$T/restored/map.db" ] || fail "the restore made no map.db"

# The engine reads the edit.
out=$(probe_area "$W" "-16,0,-16" "15,15,15" "2,10,1")
grep -qF 'set by sed on LevelDB and vim' <<<"$out" || fail "the engine does not see the edit: $out"
echo "ok"
