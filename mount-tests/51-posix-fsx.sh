#!/bin/bash
# fsx (the File System eXerciser, from crates.io) on writable files of every game: random
# reads, writes, truncations, mmap, fsync, sendfile and copy_file_range, every read checked
# against fsx's own model of the file. Luanti: a world-folder file, a sign's metadata field
# and a mod-storage key (committed on every fsync and close); Survivalcraft: a world-folder
# file; Terrarum: a TVDA entry and a file on a TEVD disk. The stores stay valid afterwards.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/tvda.sh"

"$ROOT/scripts/install-tools" >/dev/null
FSX=$ROOT/target/tools/bin/fsx
POSIX=$ROOT/mount-tests/posix
# run_fsx FILE CONFIG OPS SEED: fsx on FILE, failing the test with fsx's last lines.
run_fsx() {
  local log=$T/fsx.$4.log
  (cd "$T" && "$FSX" -N "$3" -S "$4" -f "$2" -P "$T" "$1") >"$log" 2>&1 \
    || { tail -20 "$log" >&2; fail "fsx -S $4 on $1"; }
  grep -q "All operations completed A-OK" "$log" || { tail -5 "$log" >&2; fail "fsx on $1 did not finish"; }
  pgrep -f -- "--log-file $T/worldfs.log" >/dev/null || fail "the daemon died under fsx on $1"
}

M=$T/mnt
W=$(world fsx 2)
mount_world "$W" "$M"
run_fsx "$M/fsx.test" "$POSIX/fsx.toml" 3000 1
run_fsx "$M/blocks/0,0,0/meta/2,10,1/fields/text" "$POSIX/fsx-field.toml" 2000 2
run_fsx "$M/mod_storage/mkworld/fsx" "$POSIX/fsx-field.toml" 2000 3
unmount_world "$M"
[ "$(sqlite3 "$W/map.sqlite" 'PRAGMA integrity_check')" = ok ] || fail "map.sqlite integrity"
probe "$W" > "$T/probe" || fail "the engine cannot load the world after fsx"
assert_not_contains "$T/probe" "PROBE FAILED"

SC=$T/sc; cp -r "$SHARED/samples/survivalcraft/scnet-WorldBeforeTerritoryBlockRefactor" "$SC"
mount_world "$SC" "$M"
run_fsx "$M/fsx.txt" "$POSIX/fsx.toml" 3000 4
unmount_world "$M"

d=$(fixture world)
mount_world "$d" "$M"
run_fsx "$M/entries/777" "$POSIX/fsx.toml" 1000 5
unmount_world "$M"
check_ok "$d"

d=$(fixture tevd)
mount_world "$d" "$M"
run_fsx "$M/FSX.TXT" "$POSIX/fsx.toml" 2000 6
unmount_world "$M"
check_ok "$d"
