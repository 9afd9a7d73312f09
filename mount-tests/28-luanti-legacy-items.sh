#!/bin/bash
# Itemstrings of before 2012 (`CraftItem "NAME" COUNT`, `ToolItem "NAME" WEAR`), which the
# engine still converts as it loads a block, planted in the chest of an engine world: the
# engine loads them, the mount shows the block (not error.txt) with today's itemstrings,
# reading changes nothing stored, a backup holds the block, an edit of another file of it
# is committed in today's form, and the engine reads the edit and the same items.
. "$(dirname "$0")/lib.sh"

W=$(world w 2)
plant() {
  python3 - "$W/map.sqlite" <<'PY'
import sqlite3, subprocess, sys
db = sqlite3.connect(sys.argv[1])
(blob,) = db.execute("SELECT data FROM blocks WHERE pos = 0").fetchone()
assert blob[0] == 29, blob[0]
raw = subprocess.run(["zstd", "-d", "-q", "-c"], input=blob[1:], capture_output=True, check=True).stdout
new = raw.replace(b"Item default:diamond 42\n", b'Item CraftItem "default:diamond" 42\n', 1)
new = new.replace(b"Item default:pick_mese 1 12000\n", b'Item ToolItem "default:pick_mese" 12000\n', 1)
assert new.count(b"CraftItem") == 1 and new.count(b"ToolItem") == 1, "the chest's items were not found"
packed = subprocess.run(["zstd", "-q", "-c", "-3"], input=new, capture_output=True, check=True).stdout
db.execute("UPDATE blocks SET data = ? WHERE pos = 0", (bytes([29]) + packed,))
db.commit()
PY
}
plant || fail "planting the legacy itemstrings failed"
stored_items() {
  python3 - "$W/map.sqlite" <<'PY'
import sqlite3, subprocess, sys
(blob,) = sqlite3.connect(sys.argv[1]).execute("SELECT data FROM blocks WHERE pos = 0").fetchone()
raw = subprocess.run(["zstd", "-d", "-q", "-c"], input=blob[1:], capture_output=True, check=True).stdout
# Only the chest's two items: mapgen may put other inventories (a dungeon's chest) in the block.
ours = (b'default:diamond" 42', b"default:diamond 42", b"default:pick_mese")
lines = [l for l in raw.split(b"\n") if l.startswith(b"Item ") and any(o in l for o in ours)]
print(" ".join(l.decode() for l in lines))
PY
}
assert_eq "$(stored_items)" 'Item CraftItem "default:diamond" 42 Item ToolItem "default:pick_mese" 12000' "planted items"

# The engine reads them as the items they stand for.
probe "$W" >"$T/probe.before"
assert_contains "$T/probe.before" "inv main[1]=default:diamond 42"
assert_contains "$T/probe.before" "inv main[5]=default:pick_mese 1 12000"
plant || fail "planting again failed"
before=$(sha "$W/map.sqlite")

M=$T/mnt
mount_world "$W" "$M"
[ ! -e "$M/blocks/0,0,0/error.txt" ] || fail "the block shows error.txt: $(cat "$M/blocks/0,0,0/error.txt")"
I=$M/blocks/0,0,0/meta/1,10,1/inventory
assert_eq "$(grep '^Item' "$I" | tr '\n' ' ')" "Item default:diamond 42 Item default:pick_mese 1 12000 " "the inventory view"
assert_eq "$(cat "$M/index/items/default:diamond")" "blocks/0,0,0/meta/1,10,1/inventory main 1 42" "index/items"
rsync -a "$M/" "$T/backup/" || fail "backup failed"
cmp -s "$T/backup/blocks/0,0,0/meta/1,10,1/inventory" "$I" || fail "the backup's inventory differs"
assert_eq "$(sha "$W/map.sqlite")" "$before" "reading changed map.sqlite"

# An edit of another file of the block writes the items in today's form.
sed -i 's/^default:chest: /default:chest: /' "$M/blocks/0,0,0/nodes.cubeset"
echo "legacy chest" >"$M/blocks/0,0,0/meta/1,10,1/fields/infotext"
unmount_world "$M"
assert_eq "$(stored_items)" "Item default:diamond 42 Item default:pick_mese 1 12000" "items stored after the edit"
"$WORLDFS" check "$W" >"$T/check" 2>&1 || { cat "$T/check"; fail "worldfs check failed"; }
probe "$W" >"$T/probe.after"
assert_contains "$T/probe.after" "inv main[1]=default:diamond 42"
assert_contains "$T/probe.after" "inv main[5]=default:pick_mese 1 12000"
assert_contains "$T/probe.after" 'field infotext="legacy chest"'
echo "ok"
