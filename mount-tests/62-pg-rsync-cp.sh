#!/bin/bash
# PostgreSQL: an rsync backup of a mount, a restore into a mount of an empty database (the
# engine's table is created by the first block), and `cp -r` of blocks from a mount of an
# SQLite world into a mount of a PostgreSQL world; the engine loads what arrived.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/postgres.sh"

W=$(pg_world w)
C=$(conn_of "$W")
M=$T/mnt
mount_world "$W" "$M"
rsync -a "$M/" "$T/backup/" || fail "rsync backup failed"
rsync -a "$M/" "$T/backup/" --itemize-changes >"$T/again" || fail "second rsync failed"
[ ! -s "$T/again" ] || { head "$T/again"; fail "a second backup transferred something"; }
unmount_world "$M"

# Restore into a new, empty database.
R=$T/restored; mkdir "$R"
C2=$(pg_db)
sed "s|^pgsql_connection = .*|pgsql_connection = $C2|" "$W/world.mt" >"$R/world.mt"
mount_world "$R" "$T/mnt2"
[ -z "$(ls "$T/mnt2/blocks")" ] || fail "a new database shows blocks"
# The backup's world.mt names the original database: keep the new one's.
rsync -a --exclude /world.mt "$T/backup/" "$T/mnt2/" || fail "rsync restore failed"
diff -r "$T/backup/blocks" "$T/mnt2/blocks" >/dev/null || fail "restored blocks read otherwise than the backup"
unmount_world "$T/mnt2"
assert_eq "$(pg_sql "$C2" 'SELECT count(*) FROM blocks')" "$(pg_sql "$C" 'SELECT count(*) FROM blocks')" "restored block count"
assert_eq "$(pg_sql "$C2" "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'blocks'::regclass AND attname = 'posx'")" \
  "smallint" "the created table is the newest engine's"

# cp -r from an SQLite mount: a region of another world into the PostgreSQL world.
S=$(world s 2)
MS=$T/mnt-sqlite
mount_world "$S" "$MS" --read-only
mount_world "$R" "$T/mnt2"
i=3
for b in 0,0,0 1,0,0 0,1,0; do
  cp -r "$MS/blocks/$b" "$T/mnt2/blocks/10,$i,10" || fail "cp -r $b failed"
  i=$((i + 1))
done
sync -f "$T/mnt2/blocks"
i=3
for b in 0,0,0 1,0,0 0,1,0; do
  diff -r "$MS/blocks/$b" "$T/mnt2/blocks/10,$i,10" >/dev/null || fail "copied block $b differs"
  i=$((i + 1))
done
unmount_world "$T/mnt2"
unmount_world "$MS"
assert_eq "$(pg_sql "$C2" "SELECT count(*) FROM blocks WHERE posx = 10 AND posz = 10")" "3" "copied blocks stored"
probe_area "$R" 160,48,160 175,63,175 "161,58,161" >"$T/probe"
grep -q '^checksum ' "$T/probe" || { cat "$T/probe"; fail "the engine cannot load the copied blocks"; }
echo "ok"
