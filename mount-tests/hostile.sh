# Helpers of the hostile-store mount tests (35, 45), sourced after lib.sh: hostile stores
# made by examples/hostile_fixture.rs, and a whole read of a mount that checks the daemon
# survives within its memory bound.
HOSTILE=${WORLDFS_HOSTILE_FIXTURE:-$ROOT/target/release/examples/hostile_fixture}
CACHE_MIB=4

# hostile KIND OUT: a hostile store (tvda: a disk file; chunks32h, regions: a world folder).
hostile() {
  if [ ! -x "$HOSTILE" ]; then
    (cd "$ROOT" && cargo build --release --quiet --example hostile_fixture) || fail "cannot build hostile_fixture"
  fi
  "$HOSTILE" "$1" "$2" > "$T/good-$1" || fail "hostile_fixture $1 failed"
}

# store_sha STORE: sha256 of every file (a folder: every file but worldfs's temporaries).
store_sha() {
  if [ -d "$1" ]; then
    (cd "$1" && find . \( -type f -o -type l \) ! -name '.worldfs-*' -print0 | sort -z | xargs -0 sha256sum)
  else
    sha256sum "$1"
  fi
}

# read_all STORE MOUNTPOINT [mount options...]: mounts with a small cache, reads every file
# (cat errors are expected for the bad objects and counted), then checks the daemon is alive
# and answering, its peak RSS is under the cache size + 64 MiB, and after the unmount the
# store is byte-identical.
read_all() {
  local src=$1 mnt=$2; shift 2
  local before; before=$(store_sha "$src")
  mount_world "$src" "$mnt" --cache-size "$CACHE_MIB" "$@"
  local pid; pid=$(pgrep -f -- "--log-file $T/worldfs.log.*$mnt") || fail "daemon not found"
  [ "$(wc -w <<<"$pid")" -eq 1 ] || fail "several daemons: $pid"
  local files=0 errors=0 f
  while IFS= read -r -d '' f; do
    files=$((files+1))
    cat "$f" > /dev/null 2>> "$T/cat.err" || errors=$((errors+1))
  done < <(find "$mnt" -type f -print0 2>> "$T/find.err")
  [ "$files" -gt 0 ] || fail "no file found under $mnt"
  echo "$mnt: $files files read, $errors failed" >&2
  kill -0 "$pid" 2>/dev/null || fail "the daemon died"
  ls "$mnt" > /dev/null || fail "the mount stopped answering"
  local hwm; hwm=$(awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status")
  local limit=$(( (CACHE_MIB + 64) * 1024 ))
  [ "$hwm" -lt "$limit" ] || fail "peak RSS ${hwm} KiB is over the cache size + 64 MiB (${limit} KiB)"
  echo "$mnt: peak RSS $hwm KiB (limit $limit KiB)" >&2
  unmount_world "$mnt"
  assert_eq "$(store_sha "$src")" "$before" "the store changed"
}
