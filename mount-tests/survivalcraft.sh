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
