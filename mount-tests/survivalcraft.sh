# Helpers of the Survivalcraft mount tests (sourced after lib.sh). The sample worlds are used
# by path and copied into $T before a read-write mount.
SC=$SHARED/samples/survivalcraft
[ -d "$SC" ] || fail "Survivalcraft samples missing: $SC"
SCWORLD=$SC/padillah-ScWorldEditor/Ardoitia.scworld
REGIONS=$SC/scnet-WorldBeforeTerritoryBlockRefactor
JSONWORLD=$SC/scnet-WorldUseJson

# sc_copy SAMPLE_FOLDER NAME: a writable copy in $T/NAME.
sc_copy() {
  rm -rf "${T:?}/$2"; cp -r "$1" "$T/$2"; chmod -R u+w "$T/$2"
  echo "$T/$2"
}

# sc_unpack SCWORLD NAME: the .scworld unpacked into $T/NAME (how a user makes it writable).
sc_unpack() {
  rm -rf "${T:?}/$2"; mkdir -p "$T/$2"
  unzip -q "$1" -d "$T/$2" || fail "unzip $1"
  echo "$T/$2"
}

# tree_sha DIR: one line per regular file (path and sha256), sorted.
tree_sha() { (cd "$1" && find . -type f -print0 | sort -z | xargs -0 sha256sum); }

# sc_check WORLD: `worldfs check` passes.
sc_check() {
  "$WORLDFS" check "$1" >"$T/check.out" 2>&1 || { cat "$T/check.out"; fail "worldfs check $1"; }
  grep -q " 0 broken objects" "$T/check.out" || { cat "$T/check.out"; fail "check output"; }
}

# line_of FILE TEXT: the number of the first line holding TEXT.
line_of() { grep -n -m1 -F -- "$2" "$1" | cut -d: -f1; }

# char_of CUBESET "TYPE: META": the character a definition gives (characters follow the
# sorted definitions, so they are looked up rather than assumed).
char_of() {
  local c
  c=$(grep -m1 -E -- "^[[:space:]]*\".: $2\"" "$1" | sed 's/^[[:space:]]*"\(.\): .*/\1/')
  [ -n "$c" ] || fail "no definition $2 in $1"
  printf '%s' "$c"
}

# chunk_records CHUNKS_DAT: one line per chunk of a fixed-size Chunks.dat (1.4-1.28): its
# coordinates and the sha256 of its 66,576 stored bytes, sorted; the directory's order and
# the chunks' places in the file are left out (a restore writes chunks in its own order).
chunk_records() {
  python3 - "$1" <<'PY'
import hashlib, struct, sys
data = open(sys.argv[1], "rb").read()
out = []
for i in range(65536):
    cx, cz, off = struct.unpack_from("<iii", data, i * 12)
    if off == 0:
        break
    out.append(f"{cx},{cz} {hashlib.sha256(data[off:off + 66576]).hexdigest()}")
print("\n".join(sorted(out)))
PY
}
