#!/bin/bash
# The hostile Luanti store corpus (examples/luanti_hostile.rs): bombs, 65,535 objects,
# slot bombs, huge name-id mappings, data of the wrong SQL type, out-of-range positions,
# truncated blobs, wrong versions, a 17 MiB row, symlinks in the world folder. Mounted with
# a small --cache-size and read whole with find and cat: the daemon lives, only the bad
# blocks fail (EIO, EOPNOTSUPP), the databases stay byte-identical, and the daemon's peak
# RSS stays under the cache size + 64 MiB. Then a 50 MB bad token written to light.txt is
# refused, and logged once, quoted short.
. "$(dirname "$0")/lib.sh"

HOSTILE=${WORLDFS_LUANTI_HOSTILE:-$ROOT/target/release/examples/luanti_hostile}
if [ ! -x "$HOSTILE" ]; then
  (cd "$ROOT" && cargo build --release --quiet --example luanti_hostile) || fail "cannot build luanti_hostile"
fi
"$HOSTILE" "$T/c" >"$T/cases" || fail "luanti_hostile failed"
ln -s /dev/zero "$T/c/world/zero.txt"
ln -s /etc/hostname "$T/c/world/hostname.txt"
ln -s . "$T/c/world/loop"
CACHE=8
LIMIT_KIB=$(( (CACHE + 64) * 1024 ))
before_world=$(sha "$T/c/world/map.sqlite")
before_xyz=$(sha "$T/c/xyz.sqlite")

# read_corpus SOURCE MOUNTPOINT NAME: the checks above for one store ("world" or "xyz").
read_corpus() {
  local src=$1 mnt=$2 name=$3 pid hwm b
  mount_world "$src" "$mnt" --cache-size "$CACHE"
  pid=$(pgrep -n -f -- "worldfs mount .* $mnt\$") || fail "no daemon for $mnt"
  ls "$mnt/blocks" | sort >"$T/$name.listed" || fail "$name: ls blocks failed"
  awk -v s="$name" '$1 == s && ($2 == "reads" || $2 == "fails") { print $3 }' "$T/cases" | sort >"$T/$name.want"
  diff "$T/$name.want" "$T/$name.listed" >&2 || fail "$name: the listing differs from the rows that can be blocks"
  # Everything, whole: errors are expected for the bad blocks only.
  (cd "$mnt" && timeout 600 find . -type f -print0 | xargs -0 -n 50 cat >/dev/null 2>"$T/$name.errors") || true
  kill -0 "$pid" || fail "$name: the daemon died"
  for b in $(awk -v s="$name" '$1 == s && $2 == "reads" { print $3 }' "$T/cases"); do
    (cd "$mnt/blocks/$b" && find . -type f -print0 | xargs -0 cat >/dev/null) || fail "$name: block $b does not read"
  done
  for b in $(awk -v s="$name" '$1 == s && $2 == "fails" { print $3 }' "$T/cases"); do
    if cat "$mnt/blocks/$b/nodes.cubeset" >/dev/null 2>"$T/err"; then fail "$name: bad block $b reads"; fi
    grep -q -e "Input/output error" -e "Operation not supported" "$T/err" || fail "$name: block $b: $(cat "$T/err")"
    grep -q "block $b: " "$T/worldfs.log" || fail "$name: block $b's error is not in the log"
  done
  kill -0 "$pid" || fail "$name: the daemon died"
  hwm=$(awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status")
  echo "$name: daemon peak RSS $((hwm / 1024)) MiB (limit $((LIMIT_KIB / 1024)) MiB)"
  [ "$hwm" -le "$LIMIT_KIB" ] || fail "$name: peak RSS $hwm KiB over $LIMIT_KIB KiB"
  unmount_world "$mnt"
}

read_corpus "$T/c/world" "$T/m" world
read_corpus "$T/c/xyz.sqlite" "$T/x" xyz
assert_eq "$(sha "$T/c/world/map.sqlite")" "$before_world" "the world's map.sqlite changed"
assert_eq "$(sha "$T/c/xyz.sqlite")" "$before_xyz" "xyz.sqlite changed"
grep -q "rows of table blocks have a position no block can have" "$T/worldfs.log" \
  || fail "the rows left out were not reported"

# Symlinks of the world folder are listed as links, with their targets, and are no files.
mount_world "$T/c/world" "$T/s"
assert_eq "$(find "$T/s" -maxdepth 1 -type l -printf '%f>%l\n' | sort | tr '\n' ' ')" \
  "hostname.txt>/etc/hostname loop>. zero.txt>/dev/zero " "the links of the world folder"
if find "$T/s" -maxdepth 1 -type f | grep -e zero.txt -e loop; then fail "a link is listed as a file"; fi

# A 50 MB bad token: refused, logged once with a short quote.
{ echo "# y = 0"; head -c 50000000 /dev/zero | tr '\0' 'z'; echo; } >"$T/token"
log_before=$(wc -c <"$T/worldfs.log")
if cp "$T/token" "$T/s/blocks/0,0,0/light.txt" 2>"$T/cp.err"; then fail "the bad light.txt was accepted"; fi
unmount_unsaved "$T/s" blocks/0,0,0/light.txt
grown=$(( $(wc -c <"$T/worldfs.log") - log_before ))
[ "$grown" -lt 10000 ] || fail "the log grew by $grown bytes"
assert_eq "$(grep -c "is not a light value" "$T/worldfs.log")" 1 "the bad token is logged once"
echo "ok: hostile corpus read whole; bad blocks failed alone; stores unchanged"
