#!/bin/bash
# Bad input never reaches the store: the writing command fails, the log names file, line and
# reason, map.sqlite stays byte-identical, and the pending text stays readable until fixed.
. "$(dirname "$0")/lib.sh"

W=$(world w 2)
M=$T/mnt
before=$(sha "$W/map.sqlite")
mount_world "$W" "$M"
B=$M/blocks/0,0,0
N=blocks/0,0,0/nodes.cubeset
I=blocks/0,0,0/meta/1,10,1/inventory
TM=blocks/0,0,0/timers.txt
cp "$M/$N" "$T/nodes.good"; cp "$M/$I" "$T/inv.good"; cp "$M/$TM" "$T/timers.good"

line_of() { grep -n -m1 -F -- "$2" "$1" | cut -d: -f1; }

# bad FILE BADTEXT LINE REASON: writing BADTEXT into FILE fails as described.
bad() {
  local file=$1 text=$2 line=$3 reason=$4
  [ -n "$line" ] || fail "no line number for $file"
  if cat "$text" >"$M/$file" 2>"$T/err"; then fail "writing bad $file succeeded"; fi
  grep -q "write error\|Invalid argument" "$T/err" || fail "unexpected error text: $(cat "$T/err")"
  grep -F -- "$file: line $line, column" "$T/worldfs.log" | grep -qF -- "$reason" \
    || { tail -5 "$T/worldfs.log"; fail "log lacks [$file: line $line ... $reason]"; }
  cmp -s "$text" "$M/$file" || fail "pending text of $file not readable in the mount"
  assert_eq "$(stat -c %s "$M/$file")" "$(wc -c <"$text")" "st_size of pending $file"
  echo "rejected $file at line $line: $reason"
}

# fix FILE GOOD: writing the good text back succeeds and shows it.
fix() {
  cat "$2" >"$M/$1" || fail "writing good $1 failed"
  cmp -s "$2" "$M/$1" || fail "$1 does not show the fixed text"
}

# 1. A Cubeset syntax error.
sed 's/BlockDefinitions =/BlockDefinitions = =/' "$T/nodes.good" >"$T/bad1"
bad "$N" "$T/bad1" "$(line_of "$T/bad1" "BlockDefinitions = =")" "expected a value"
fix "$N" "$T/nodes.good"

# 2. An unknown character in BlockData.
# (The world's terrain is random: take the first row after "-- Level 10" and put a
# character there that no writer ever uses.)
awk 'done == 0 && prev ~ /-- Level 10$/ { sub(/"/, "\"\xe2\x98\xba"); done = 1 } { print; prev = $0 }' \
  "$T/nodes.good" >"$T/bad2"
cmp -s "$T/bad2" "$T/nodes.good" && fail "awk did not change a row"
bad "$N" "$T/bad2" "$(line_of "$T/bad2" '"☺')" "unknown character '☺'"
fix "$N" "$T/nodes.good"

# 3. An invalid inventory line.
sed 's/^Item default:diamond 42/Itm default:diamond 42/' "$T/inv.good" >"$T/bad3"
bad "$I" "$T/bad3" "$(line_of "$T/bad3" "Itm default")" 'unknown keyword "Itm"'
fix "$I" "$T/inv.good"

# 4. A timer out of the block.
{ cat "$T/timers.good"; echo "1,16,1 5.000 0.000"; } >"$T/bad4"
bad "$TM" "$T/bad4" "$(line_of "$T/bad4" "1,16,1")" "y 16 is out of range"
fix "$TM" "$T/timers.good"

# 5. A truncated file, left pending through the unmount.
head -c 300 "$T/nodes.good" >"$T/bad5"
bad "$N" "$T/bad5" "$(wc -l <"$T/bad5" | awk '{print $1 + 1}')" "end of the file"
cmp -s "$T/bad5" "$M/$N" || fail "truncated text not pending"

# Nothing reached the store, even at unmount; the unmount says where the text was saved.
unmount_unsaved "$M" "$N"
assert_eq "$(sha "$W/map.sqlite")" "$before" "map.sqlite changed"
assert_contains "$T/worldfs.log" "not committed: $N (saved in"
saved=$(sed -n "s|.*not committed: $N (saved in \(.*\))\$|\1|p" "$T/unmount.err")
cmp "$saved" "$T/bad5" || fail "the saved text differs from the pending text"
sqlite3 "$W/map.sqlite" 'PRAGMA integrity_check' | grep -qx ok || fail "integrity_check"
echo "ok"
