#!/bin/bash
# A Redis world (an engine world's blocks put in a hash with redis-cli, on a throwaway
# redis-server of this test): reads as the SQLite original, vim and sed -i edits, bad input
# that changes nothing, SIGKILL of the daemon mid-edits (each block old or new), an rsync
# backup restored into another hash, and a server that goes away: EIO, then back.
. "$(dirname "$0")/lib.sh"

RD=$T/redis
SOCK=$("$ROOT/scripts/redis-server" start "$RD") || fail "redis-server did not start"
trap stop_servers EXIT
W=$(world w 1)
cp -a "$W" "$T/orig"
# The blocks into the hash, as the engine writes them (decimal position, the blob).
to_redis "$W" "$SOCK"
M=$T/mnt; O=$T/omnt

mount_world "$W" "$M"
mount_world "$T/orig" "$O" --read-only
diff <(ls "$M/blocks") <(ls "$O/blocks") || fail "blocks/ differs from the SQLite original"
diff -r "$M/blocks/0,0,0" "$O/blocks/0,0,0" || fail "block 0,0,0 differs"
unmount_world "$O"
"$WORLDFS" info "$W" >"$T/info" || fail "worldfs info failed"
assert_contains "$T/info" "hash world"

B=$M/blocks/0,0,0
F=$B/meta/2,10,1/fields
sed -i 's/^.*$/set by sed on Redis/' "$F/infotext" || fail "sed -i failed"
vim -es -u NONE -c '%s/$/ and vim/' -c 'wq' "$F/infotext" </dev/null || fail "vim failed"
assert_eq "$(cat "$F/infotext")" "set by sed on Redis and vim" "infotext"
cp "$B/block.txt" "$T/block.before"
printf 'garbage\n' >"$T/garbage"
if cat "$T/garbage" >"$B/block.txt" 2>/dev/null; then fail "garbage block.txt accepted"; fi
# The rejected text stays readable until fixed; nothing was stored.
cmp "$T/garbage" "$B/block.txt" || fail "the rejected text is not shown"
cat "$T/block.before" >"$B/block.txt" || fail "writing block.txt back failed"
diff "$T/block.before" "$B/block.txt" || fail "block.txt changed after bad input"

# The server goes away: EIO, then back (nothing persisted: the hash is filled again).
"$ROOT/scripts/redis-server" stop "$RD"
if cat "$M/blocks/1,0,0/block.txt" >/dev/null 2>"$T/eio.err"; then fail "a read with the server gone succeeded"; fi
assert_contains "$T/eio.err" "Input/output error"
SOCK2=$("$ROOT/scripts/redis-server" start "$RD") || fail "redis-server did not start again"
[ "$SOCK2" = "$SOCK" ] || fail "socket moved"
redis-cli -s "$SOCK" --pipe <"$T/blocks.resp" >/dev/null || fail "refilling the hash failed"
cat "$M/blocks/1,0,0/block.txt" >/dev/null || fail "no reconnection"
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

# rsync backup, restored into another hash: the same tree.
rsync -a "$M/" "$T/backup/" || fail "rsync backup failed"
mkdir "$T/restored"; sed 's/^redis_hash = .*/redis_hash = restored/' "$W/world.mt" >"$T/restored/world.mt"
mount_world "$T/restored" "$T/rmnt"
# The backup's world.mt names the other hash: it is refused, and nothing else is.
if rsync -a "$T/backup/" "$T/rmnt/" 2>"$T/rsync.err"; then fail "a world.mt naming another hash was written"; fi
grep -q 'world.mt.*Operation not permitted' "$T/rsync.err" || { cat "$T/rsync.err"; fail "rsync did not report world.mt"; }
[ "$(grep -c 'rsync: \[' "$T/rsync.err")" = 1 ] || { cat "$T/rsync.err"; fail "rsync reported more than world.mt"; }
grep -q '^redis_hash = restored$' "$T/restored/world.mt" || fail "world.mt changed: $(cat "$T/restored/world.mt")"
# The refused text stays at world.mt until removed (docs/use-cases.md, on world.mt;
# docs/semantics.md "Bad input").
rm "$T/rmnt/world.mt"
cmp -s "$T/rmnt/world.mt" "$T/restored/world.mt" || fail "the mount shows another world.mt"
rsync -a --exclude /world.mt "$T/backup/" "$T/rmnt/" || fail "rsync restore failed"
unmount_world "$T/rmnt"
mount_world "$T/restored" "$T/rmnt" --read-only
diff -r "$M/blocks" "$T/rmnt/blocks" >/dev/null || fail "the restored blocks differ"
unmount_world "$T/rmnt"; unmount_world "$M"
assert_eq "$(redis-cli -s "$SOCK" hlen restored)" "$(redis-cli -s "$SOCK" hlen world)" "blocks in the restored hash"
echo "ok"
