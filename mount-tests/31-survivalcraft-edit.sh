#!/bin/bash
# Survivalcraft edits round-trip through a remount and `worldfs check` still passes: cells
# (sed -i on blocks.cubeset, with the column's top height following), surface.txt, light.txt
# (Chunks.dat), player and chest inventories (Project.xml changes only the lines it must),
# Project.xml itself, and a new chunk made with mkdir + cp. Untouched chunks keep their text,
# and in Chunks.dat their bytes.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/survivalcraft.sh"

M=$T/mnt
views_sha() { (cd "$M/chunks" && find . -type f ! -path "./$1/*" -print0 | sort -z | xargs -0 sha256sum); }

# --- A region world (2.3+).
W=$(sc_copy "$REGIONS" w)
cp "$W/Project.xml" "$T/Project.orig"
mount_world "$W" "$M"
C=$M/chunks/11,-6
views_sha 11,-6 >"$T/others.before"
assert_eq "$(sed -n 's/^0 0 \([0-9]*\) .*/\1/p' "$C/surface.txt")" "72" "top of column 0,0"
# One cell: x=0, z=0, y=100 (air) becomes Granite; the column's top follows.
AIR=$(char_of "$C/blocks.cubeset" "0: 0")
GRANITE=$(char_of "$C/blocks.cubeset" "3: 0")
L=$(( $(line_of "$C/blocks.cubeset" "-- Level 100") + 1 ))
[[ "$(sed -n "${L}p" "$C/blocks.cubeset")" == *"\"$AIR"* ]] || fail "cell 0,100,0 is not air"
sed -i "${L}s/\"$AIR/\"$GRANITE/" "$C/blocks.cubeset"
assert_eq "$(sed -n 's/^0 0 \([0-9]*\) .*/\1/p' "$C/surface.txt")" "100" "top after the edit"
# Block data of a definition, and temperature/humidity of a column.
sed -i 's/"\(.\): 204: 10"/"\1: 204: 11"/' "$C/blocks.cubeset"
sed -i 's/^1 0 72 11 13$/1 0 72 3 4/' "$C/surface.txt"
# The player's inventory: one count.
assert_contains "$M/players/Geoffrey/inventory" "1 162 1 "
sed -i 's/^1 162 1 /1 162 5 /' "$M/players/Geoffrey/inventory"
# A new chunk copied from another one.
mkdir "$M/chunks/20,-6"
cp "$M/chunks/12,-4/blocks.cubeset" "$M/chunks/20,-6/blocks.cubeset"
cp "$M/chunks/12,-4/surface.txt" "$M/chunks/20,-6/surface.txt"
unmount_world "$M"
sc_check "$W"
# Project.xml: exactly the Count line changed.
diff "$T/Project.orig" "$W/Project.xml" >"$T/project.diff" || true
assert_eq "$(grep -c '^[<>]' "$T/project.diff")" "2" "changed lines of Project.xml"
grep -q '>.*Name="Count".*Value="5"' "$T/project.diff" || fail "Count not written"
mount_world "$W" "$M"
[[ "$(sed -n "${L}p" "$C/blocks.cubeset")" == *"\"$(char_of "$C/blocks.cubeset" "3: 0")"* ]] \
  || fail "cell lost at remount"
grep -qE '"[^"]: 204: 11"' "$C/blocks.cubeset" || fail "block data of a definition lost at remount"
assert_contains "$C/surface.txt" "0 0 100 11 13"
assert_contains "$C/surface.txt" "1 0 72 3 4"
assert_contains "$M/players/Geoffrey/inventory" "1 162 5 "
cmp -s "$M/chunks/12,-4/blocks.cubeset" "$M/chunks/20,-6/blocks.cubeset" || fail "new chunk's cells"
cmp -s "$M/chunks/12,-4/surface.txt" "$M/chunks/20,-6/surface.txt" || fail "new chunk's surface"
views_sha 11,-6 | grep -v '^[0-9a-f]*  ./20,-6/' | diff "$T/others.before" - || fail "other chunks changed"
# Project.xml written whole (sed -i): the inventory shows it.
sed -i 's/Name="Count" Type="int" Value="5"/Name="Count" Type="int" Value="7"/' "$M/Project.xml"
assert_contains "$M/players/Geoffrey/inventory" "1 162 7 "
unmount_world "$M"
sc_check "$W"
grep -q 'Value="7"' "$W/Project.xml" || fail "Project.xml edit lost"

# --- A Chunks.dat world (1.27), unpacked from the .scworld.
W=$(sc_unpack "$SCWORLD" old)
cp "$W/Chunks.dat" "$T/Chunks.orig"
mount_world "$W" "$M"
C=$M/chunks/223,418
views_sha 223,418 >"$T/others.before"
# light.txt: the first digit of level 100.
L=$(( $(line_of "$C/light.txt" "# y 100") + 1 ))
first=$(sed -n "${L}p" "$C/light.txt" | cut -c1)
new=$([ "$first" = 3 ] && echo 4 || echo 3)
sed -i "${L}s/^./$new/" "$C/light.txt"
# The chest: one count.
assert_contains "$M/containers/3967,65,6695/inventory" "0 9 15 "
sed -i 's/^0 9 15 /0 9 16 /' "$M/containers/3967,65,6695/inventory"
unmount_world "$M"
sc_check "$W"
assert_eq "$(stat -c %s "$W/Chunks.dat")" "$(stat -c %s "$T/Chunks.orig")" "Chunks.dat length"
span=$({ cmp -l "$T/Chunks.orig" "$W/Chunks.dat" || true; } | awk 'NR==1{lo=$1} {hi=$1} END{print (NR ? hi-lo : -1)}')
[ "$span" -ge 0 ] && [ "$span" -lt 66576 ] || fail "Chunks.dat changed outside one record (span $span)"
mount_world "$W" "$M"
assert_eq "$(sed -n "${L}p" "$C/light.txt" | cut -c1)" "$new" "light digit after remount"
assert_contains "$M/containers/3967,65,6695/inventory" "0 9 16 "
views_sha 223,418 | diff "$T/others.before" - || fail "other chunks changed"
unmount_world "$M"
echo "ok"
