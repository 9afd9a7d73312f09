#!/bin/bash
# Survivalcraft bad input never reaches the store: an unknown character, an id over 1023, a
# truncated file, out-of-range numbers, a broken inventory or Project.xml each make the
# writing command fail, the log names file, line and reason, the pending text stays readable,
# and every file of the world stays byte-identical, also after the unmount.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/survivalcraft.sh"

M=$T/mnt

# bad FILE BADTEXT LINE REASON: writing BADTEXT into FILE fails as described (LINE - : any).
bad() {
  local file=$1 text=$2 line=$3 reason=$4
  [ -n "$line" ] || fail "no line number for $file"
  if cat "$text" >"$M/$file" 2>"$T/err"; then fail "writing bad $file succeeded"; fi
  if cp "$text" "$M/$file" 2>"$T/err"; then fail "cp of bad $file succeeded"; fi
  local at="$file: line $line, column"
  [ "$line" = - ] && at="$file: line "
  grep -F -- "$at" "$T/worldfs.log" | grep -qF -- "$reason" \
    || { tail -5 "$T/worldfs.log"; fail "log lacks [$file: line $line ... $reason]"; }
  cmp -s "$text" "$M/$file" || fail "pending text of $file not readable in the mount"
  echo "rejected $file at line $line: $reason"
}

# fix FILE GOOD: writing the good text back succeeds and shows it.
fix() {
  cat "$2" >"$M/$1" || fail "writing good $1 failed"
  cmp -s "$2" "$M/$1" || fail "$1 does not show the fixed text"
}

for sample in regions chunks16; do
  if [ $sample = regions ]; then
    W=$(sc_copy "$REGIONS" w); CH=11,-6; MAXID=1023
  else
    W=$(sc_unpack "$SCWORLD" w); CH=223,418; MAXID=255
  fi
  tree_sha "$W" >"$T/before"
  mount_world "$W" "$M"
  N=chunks/$CH/blocks.cubeset
  S=chunks/$CH/surface.txt
  cp "$M/$N" "$T/blocks.good"; cp "$M/$S" "$T/surface.good"

  # An unknown character in BlockData.
  L=$(( $(line_of "$T/blocks.good" "-- Level 10") + 1 ))
  sed "${L}s/\"./\"~/" "$T/blocks.good" >"$T/bad"
  bad "$N" "$T/bad" "$L" "unknown character '~'"
  fix "$N" "$T/blocks.good"

  # An id over the format's largest.
  sed "s/\"\\(.\\): 1: 0\"/\"\\1: $((MAXID + 1)): 0\"/" "$T/blocks.good" >"$T/bad"
  bad "$N" "$T/bad" "$(line_of "$T/bad" ": $((MAXID + 1)): 0\"")" "$((MAXID + 1))"
  fix "$N" "$T/blocks.good"

  # A truncated file.
  head -c 3000 "$T/blocks.good" >"$T/bad"
  bad "$N" "$T/bad" - "unfinished"
  fix "$N" "$T/blocks.good"

  # A temperature over 15, and a column listed twice.
  sed 's/^0 0 \([0-9]*\) [0-9]* /0 0 \1 16 /' "$T/surface.good" >"$T/bad"
  bad "$S" "$T/bad" "$(line_of "$T/bad" " 16 ")" "out of range"
  { cat "$T/surface.good"; grep -m1 '^0 0 ' "$T/surface.good"; } >"$T/bad"
  bad "$S" "$T/bad" "$(wc -l <"$T/bad")" "twice"
  fix "$S" "$T/surface.good"

  if [ $sample = chunks16 ]; then
    G=chunks/$CH/light.txt
    cp "$M/$G" "$T/light.good"
    L=$(( $(line_of "$T/light.good" "# y 3") + 1 ))
    sed "${L}s/^./g/" "$T/light.good" >"$T/bad"
    bad "$G" "$T/bad" "$L" "'g'"
    fix "$G" "$T/light.good"
    I=containers/3967,65,6695/inventory
  else
    I=players/Geoffrey/inventory
  fi
  # An inventory line with a letter in a number, and a slot count of -1.
  cp "$M/$I" "$T/inv.good"
  L=$(grep -n -m1 '^[0-9]' "$T/inv.good" | cut -d: -f1)
  sed "${L}s/^\([0-9]*\) /\1x /" "$T/inv.good" >"$T/bad"
  bad "$I" "$T/bad" "$L" "unknown character 'x'"
  fix "$I" "$T/inv.good"

  # A broken Project.xml (cut in the middle) is refused as a whole.
  head -c 2000 "$M/Project.xml" >"$T/bad"
  cp "$M/Project.xml" "$T/project.good"
  if cat "$T/bad" >"$M/Project.xml" 2>/dev/null; then fail "a truncated Project.xml was stored"; fi
  grep -F "commit failed" "$T/worldfs.log" | grep -q "Project.xml: line [0-9]*, column [0-9]*: XML" || fail "log lacks the Project.xml failure with its line"
  fix Project.xml "$T/project.good"

  # Leave one bad text pending through the unmount: nothing reaches the store.
  cp "$T/bad" "$M/$N" 2>/dev/null || true
  head -c 3000 "$T/blocks.good" >"$T/bad"
  cat "$T/bad" >"$M/$N" 2>/dev/null && fail "truncated text accepted"
  unmount_unsaved "$M" "$N"
  tree_sha "$W" | diff "$T/before" - || fail "bad input changed the $sample world"
  sc_check "$W"
  : >"$T/worldfs.log"
done
echo "ok"
