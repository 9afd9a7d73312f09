#!/bin/bash
# The real engine reads what the mount wrote: node, sign text, chest inventory, node timer,
# a deleted block and a copied block show up in the engine exactly, and nothing else changes;
# minetestmapper still renders the world.
. "$(dirname "$0")/lib.sh"

W=$(world w 2)
cp -a "$W" "$T/orig"
M=$T/mnt
B=$M/blocks/0,0,0

mount_world "$W" "$M"
# A node: add a definition and set node 5,10,5 (air) to it, with python3.
python3 - "$B/nodes.cubeset" "$T/old-node" <<'PY'
import re, sys
path = sys.argv[1]
text = open(path).read()
# The terrain of a generated world is random: find the characters from the definitions.
defs = {m[1]: m[2] for m in re.finditer(r'"(.): (.*): \d+",', text)}
assert "default:furnace_active" in defs.values() or "default:furnace" in defs.values(), defs
new = next(c for c in "zZyYxXwWvV" if c not in defs)
last = list(re.finditer(r'\n(\s*)"(.): (.*): (\d+)",', text))[-1]
text = text[:last.end()] + f'\n{last.group(1)}"{new}: default:mese: 0",' + text[last.end():]
lines = text.split("\n")
i = next(n for n, l in enumerate(lines) if l.strip() == "-- Level 10")
row = lines[i + 1 + 5]
q = row.index('"')
old = row[q + 1 + 5]
lines[i + 1 + 5] = row[:q + 1 + 5] + new + row[q + 1 + 6:]
with open(path, "w") as f:
    f.write("\n".join(lines))
open(sys.argv[2], "w").write(defs[old])
PY
# The sign's text.
printf 'changed by worldfs\nline two\n' >"$B/meta/2,10,1/fields/text"
# Items into the chest (slot 2 and slot 32).
python3 - "$B/meta/1,10,1/inventory" <<'PY'
import sys
path = sys.argv[1]
lines = open(path).read().split("\n")
slots = [i for i, l in enumerate(lines) if l == "Empty" or l.startswith("Item ")]
assert len(slots) == 32, len(slots)
lines[slots[1]] = "Item default:gold_ingot 7"
lines[slots[31]] = "Item default:torch 99"
open(path, "w").write("\n".join(lines))
PY
# A node timer for the new mese node.
echo "5,10,5 1000.000 2.500" >>"$B/timers.txt"
# Delete a block, copy block 0,0,0 over its place.
rm -r "$M/blocks/1,0,1"
[ ! -e "$M/blocks/1,0,1" ] || fail "rm -r left blocks/1,0,1"
cp -r "$B" "$M/blocks/1,0,1"
diff -r "$B/meta" "$M/blocks/1,0,1/meta" || fail "copied meta differs"
cmp "$B/nodes.cubeset" "$M/blocks/1,0,1/nodes.cubeset" || fail "copied nodes differ"
cmp "$B/timers.txt" "$M/blocks/1,0,1/timers.txt" || fail "copied timers differ"
cmp "$B/objects.txt" "$M/blocks/1,0,1/objects.txt" || fail "copied objects differ"
unmount_world "$M"
sqlite3 "$W/map.sqlite" 'PRAGMA integrity_check' | grep -qx ok || fail "integrity_check"

PTS0="1,10,1;2,10,1;3,10,1;5,10,5"
PTS1="17,10,17;18,10,17;19,10,17;21,10,21"
probe_area "$T/orig" 0,0,0 15,15,15 "$PTS0" >"$T/orig0"
probe_area "$W" 0,0,0 15,15,15 "$PTS0" >"$T/new0"
probe_area "$W" 16,0,16 31,15,31 "$PTS1" >"$T/new1"
for f in orig0 new0 new1; do
  grep -q '^checksum ' "$T/$f" || { cat "$T/$f"; fail "probe $f failed"; }
done

# The edited block: exactly the expected differences.
python3 - "$T/orig0" "$T/expect0" "$(cat "$T/old-node")" <<'PY'
import sys
lines = open(sys.argv[1]).read().splitlines()
out = []
counts = {}
for l in lines:
    if l.startswith("count "):
        _, name, n = l.split(" ")
        counts[name] = int(n)
counts[sys.argv[3]] -= 1
if counts[sys.argv[3]] == 0:
    del counts[sys.argv[3]]
counts["default:mese"] = counts.get("default:mese", 0) + 1
for name in sorted(counts):
    out.append(f"count {name} {counts[name]}")
out.append("checksum *")
rest = [l for l in lines if not l.startswith(("count ", "checksum "))]
i = 0
while i < len(rest):
    l = rest[i]
    if l.startswith("node 1,10,1 "):
        out.append(l)
        i += 1
        while i < len(rest) and rest[i].startswith("  "):
            out.append(rest[i])
            if rest[i].startswith("  inv main[1]="):
                out.append("  inv main[2]=default:gold_ingot 7")
            i += 1
        out.append("  inv main[32]=default:torch 99")
        continue
    if l.startswith("  field text="):
        out.append('  field text="changed by worldfs\\')
        out.append('line two"')
        i += 2
        continue
    if l.startswith("node 5,10,5 "):
        out.append("node 5,10,5 default:mese L 0")
        out.append("  timer 1000.000 2.500")
        i += 1
        continue
    out.append(l)
    i += 1
open(sys.argv[2], "w").write("\n".join(out) + "\n")
PY
# (The engine relights the edited node: its param1 is not compared.)
sed -e 's/^checksum .*/checksum */' -E -e 's/^node 5,10,5 (\S+) [0-9]+ /node 5,10,5 \1 L /' "$T/new0" >"$T/new0c"
diff "$T/expect0" "$T/new0c" || fail "the engine sees other changes than made in block 0,0,0"
[ "$(grep '^checksum' "$T/orig0")" != "$(grep '^checksum' "$T/new0")" ] || fail "checksum of the edited block unchanged"

# The copied block: what the engine sees equals the source block (positions shifted).
sed -E 's/^node ([0-9]+),([0-9]+),([0-9]+) (\S+) [0-9]+ /node \1,\2,\3 \4 L /' "$T/new0" >"$T/a"
python3 - "$T/new1" <<'PY' | sed -E 's/^node ([0-9]+),([0-9]+),([0-9]+) (\S+) [0-9]+ /node \1,\2,\3 \4 L /' >"$T/b"
import re, sys
for l in open(sys.argv[1]).read().splitlines():
    m = re.match(r"node (\d+),(\d+),(\d+) (.*)", l)
    print(f"node {int(m[1])-16},{m[2]},{int(m[3])-16} {m[4]}" if m else l)
PY
diff "$T/a" "$T/b" || fail "the copied block differs from its source in the engine"

# Every other block is unchanged for the engine.
areas=("-32,-32,-32 31,-17,31" "-32,-16,-32 31,-1,31" "-32,16,-32 31,31,31"
  "-32,0,-32 -1,15,31" "0,0,-32 31,15,-1" "16,0,0 31,15,15" "0,0,16 15,15,31")
for a in "${areas[@]}"; do
  set -- $a
  o=$(probe_area "$T/orig" "$1" "$2"); n=$(probe_area "$W" "$1" "$2")
  grep -q '^checksum ' <<<"$o" || fail "probe of $a failed"
  [ "$o" == "$n" ] || { diff <(echo "$o") <(echo "$n"); fail "area $a changed"; }
done

# An independent renderer still reads the world.
/usr/games/minetestmapper -i "$W" -o "$T/map.png" --colors /usr/share/minetest/colors.txt >"$T/mapper.log" 2>&1 \
  || { cat "$T/mapper.log"; fail "minetestmapper failed"; }
[ -s "$T/map.png" ] || fail "minetestmapper made no png"
echo "ok"
