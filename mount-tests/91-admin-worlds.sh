#!/bin/bash
# Issue 38 ("What server admins ask for"), through real mounts and the engine:
# - `mv index/nodes/A index/nodes/B` dates only the files whose content changed: the next
#   `rsync -a` sends exactly those (compared with `diff` against the backup), and the
#   renamed blocks are marked for relighting (block.txt, and the engine loads them);
# - a field value holding a newline is the name `…%0A…` under index/fields/KEY/;
# - a `--read-only` mount shows the world's modes: a backup taken from it equals one taken
#   read-write (`rsync -a -n -i` lists nothing);
# - an empty folder is refused with a reason naming --create; `--create` makes an empty or
#   missing folder a new world, a backup is restored into it and the engine loads it;
# - a folder holding only players.sqlite, or only auth.sqlite, mounts;
# - `worldfs info` says a world without auth data holds none.
. "$(dirname "$0")/lib.sh"

W=$(world w 1)
M=$T/mnt
mount_world "$W" "$M"

# A rename dates only what it changed. The invariant incremental backups rely on: against
# a backup, a file whose content differs shows another time, and a file whose content is
# the same shows the same time (rsync -a then sends exactly the changed files). Checked after
# a node rename, and again after an item rename in the same block, which leaves the
# renamed nodes as they are (their new time must stay).
mkdir "$T/backup"
rsync -a "$M/blocks/" "$T/backup/" || fail "backup"
# dated_as_backed_up: fails unless, for every file below blocks/, "content differs" and
# "time differs" from the backup agree; prints the files that differ.
dated_as_backed_up() {
  (cd "$T/backup" && find . -type f -printf '%P\n') | sort >"$T/files"
  python3 - "$M/blocks" "$T/backup" "$T/files" <<'PY'
import os, sys
mnt, backup, files = sys.argv[1:4]
bad = []
for f in open(files).read().split():
    a, b = os.path.join(mnt, f), os.path.join(backup, f)
    differs = open(a, "rb").read() != open(b, "rb").read()
    redated = os.stat(a).st_mtime_ns != os.stat(b).st_mtime_ns
    if differs != redated:
        bad.append(f"{f} (content {'changed' if differs else 'same'}, time {'changed' if redated else 'same'})")
    elif differs:
        print(f)
sys.exit("; ".join(bad[:8]) if bad else 0)
PY
}
sleep 1.1
CHESTS=$(ls "$M/index/nodes/default:chest")
[ -n "$CHESTS" ] || fail "no chest"
mv "$M/index/nodes/default:chest" "$M/index/nodes/default:meselamp" || fail "mv of the chest"
dated_as_backed_up >"$T/differ" || fail "times after the node rename"
rsync -a -n -i "$M/blocks/" "$T/backup/" | awk '/^>f/ {print $2}' | sort >"$T/sent"
cmp -s "$T/sent" "$T/differ" || fail "rsync would send [$(tr '\n' ' ' <"$T/sent")], the files that changed are [$(tr '\n' ' ' <"$T/differ")]"
echo "sent: $(tr "\n" " " <"$T/sent")" >&2
for b in $CHESTS; do
  grep -qxF -e "$b/nodes.cubeset" "$T/sent" || fail "$b/nodes.cubeset not sent"
  grep -qE '^lighting_complete = 0x0*0 ' "$M/blocks/$b/block.txt" \
    || fail "block $b not marked for relighting: $(grep lighting "$M/blocks/$b/block.txt")"
done
sleep 1.1
mv "$M/index/items/default:diamond" "$M/index/items/default:mese" || fail "mv of the diamonds"
dated_as_backed_up >"$T/differ2" || fail "times after the item rename"
grep -q '/inventory$' "$T/differ2" || fail "no inventory changed: $(tr '\n' ' ' <"$T/differ2")"
# The same from a new mount (nothing kept by the kernel: the times as recorded).
unmount_world "$M"
mount_world "$W" "$M"
dated_as_backed_up >"$T/differ3" || fail "times after a remount"
cmp -s "$T/differ2" "$T/differ3" || fail "other files differ after a remount"

# A value with a newline: its name under index/fields/text/ escapes it, and the folder's
# link leads to the sign.
printf 'first line\nsecond line\n' >"$M/blocks/0,0,0/meta/2,10,1/fields/text"
ls "$M/index/fields/text" >"$T/values"
grep -qxF 'first line%0Asecond line' "$T/values" || fail "no escaped value: $(cat "$T/values")"
assert_eq "$(ls "$M/index/fields/text" | wc -l)" \
  "$(find "$M/index/fields/text" -mindepth 1 -maxdepth 1 -printf x | wc -c)" "one line per value name"
assert_eq "$(ls "$M/index/fields/text/first line%0Asecond line")" "0,0,0,2,10,1" "the value's node"
assert_eq "$(cat "$M/index/fields/text/first line%0Asecond line/0,0,0,2,10,1/fields/text")" \
  "$(printf 'first line\nsecond line')" "the value through the link"

# Read-only: the same modes as read-write, so a backup restores with them.
mkdir "$T/rw-copy"
rsync -a --exclude=/index "$M/" "$T/rw-copy/" || fail "read-write backup"
unmount_world "$M"
probe_area "$W" -16,-16,-16 15,15,15 "1,10,1" >"$T/probe-renamed" || fail "the engine does not load the renamed world"
grep -q "^count default:meselamp " "$T/probe-renamed" || fail "the engine sees no lamp"
mount_world "$W" "$M" --read-only
rsync -a -n -i --exclude=/index "$M/" "$T/rw-copy/" >"$T/ro-diff"
[ -s "$T/ro-diff" ] && fail "a read-only backup differs from a read-write one: $(head -5 "$T/ro-diff")"
assert_eq "$(stat -c %a "$M/blocks/0,0,0/nodes.cubeset")" "644" "mode on a read-only mount"
if touch "$M/blocks/0,0,0/nodes.cubeset" 2>"$T/ro.err"; then fail "a write on a read-only mount"; fi
assert_contains "$T/ro.err" "Read-only file system"
unmount_world "$M"

# An empty folder is refused, naming --create; the mount point stays empty.
mkdir "$T/empty" "$T/m2"
if "$WORLDFS" mount "$T/empty" "$T/m2" 2>"$T/empty.err"; then MOUNTS+=("$T/m2"); fail "an empty folder mounted"; fi
assert_contains "$T/empty.err" "--create"
# --create: a missing folder becomes a world; the backup is restored into it.
N=$T/new/world
mount_world "$N" "$T/m2" --create
assert_eq "$(cat "$N/world.mt")" "$(printf 'gameid = minetest\nbackend = sqlite3\nplayer_backend = sqlite3\nauth_backend = sqlite3\nmod_storage_backend = sqlite3')" "world.mt of a new world"
[ -e "$N/map.sqlite" ] && fail "a database made before any write"
rsync -a --exclude=/index "$T/rw-copy/" "$T/m2/" || fail "restore into the new world"
unmount_world "$T/m2"
probe_area "$N" -16,-16,-16 15,15,15 "1,10,1" >"$T/probe-restored" || fail "the engine does not load the restored world"
cmp -s "$T/probe-renamed" "$T/probe-restored" || fail "the restored world differs: $(diff "$T/probe-renamed" "$T/probe-restored" | head -5)"
# --create on an empty existing folder; on a folder of other files it refuses.
mount_world "$T/empty" "$T/m2" --create
[ -f "$T/empty/world.mt" ] || fail "no world.mt in the empty folder"
unmount_world "$T/m2"
mkdir "$T/other"; echo x >"$T/other/notes.txt"
if "$WORLDFS" mount --create "$T/other" "$T/m2" 2>"$T/other.err"; then MOUNTS+=("$T/m2"); fail "--create took a folder of other files"; fi
assert_contains "$T/other.err" "empty or missing folder"
[ -e "$T/other/world.mt" ] && fail "--create wrote into a folder it refused"

# Only players.sqlite, or only auth.sqlite: mounted, and shown.
mkdir "$T/p" "$T/a"
cp "$W/players.sqlite" "$T/p/"; cp "$W/auth.sqlite" "$T/a/"
mount_world "$T/p" "$T/m2" --read-only
[ -n "$(ls "$T/m2/players")" ] || fail "no players in a players-only folder"
assert_eq "$(ls "$T/m2/players")" "$(ls "$T/rw-copy/players")" "players of a players-only folder"
unmount_world "$T/m2"
mount_world "$T/a" "$T/m2" --read-only
cmp -s "$T/m2/auth.txt" "$T/rw-copy/auth.txt" || fail "auth.txt of an auth-only folder"
unmount_world "$T/m2"

# info: a world without auth data holds none (and says what the first write makes).
rm "$T/a/auth.sqlite"; cp "$W/world.mt" "$T/a/"
"$WORLDFS" info "$T/a" >"$T/info" || fail "info"
assert_contains "$T/info" "auth entries: none (auth.sqlite is made by the first write)"
"$WORLDFS" info "$W" >"$T/info-w" || fail "info of the world"
grep -qE '^ *auth entries: [1-9]' "$T/info-w" || fail "auth entries of the world: $(grep auth "$T/info-w")"
echo "ok"
