# Helpers of the Terrarum mount tests (40-49): sample paths and generated fixtures.
# Sourced after lib.sh.

TVDA_SAMPLES=$SHARED/samples/tvda
[ -d "$TVDA_SAMPLES" ] || fail "samples folder $TVDA_SAMPLES is missing"
FIXTURE=${WORLDFS_TVDA_FIXTURE:-$ROOT/target/release/examples/tvda_fixture}

# sample NAME: copy of a sample disk in $T (mounted read-write, never the original).
sample() {
  [ -f "$TVDA_SAMPLES/$1" ] || fail "sample $1 missing"
  cp "$TVDA_SAMPLES/$1" "$T/$1"
  echo "$T/$1"
}

# fixture world|player: a disk made by worldfs's own encoders (examples/tvda_fixture.rs).
fixture() {
  if [ ! -x "$FIXTURE" ]; then
    (cd "$ROOT" && cargo build --release --quiet --example tvda_fixture) || fail "cannot build tvda_fixture"
  fi
  "$FIXTURE" "$1" "$T/fixture-$1.tvda" || fail "tvda_fixture $1 failed"
  echo "$T/fixture-$1.tvda"
}

# check_ok DISK: `worldfs check` passes and says every CRC is valid.
check_ok() {
  "$WORLDFS" check "$1" > "$T/check.out" 2>&1 || { cat "$T/check.out" >&2; fail "check $1 failed"; }
  assert_contains "$T/check.out" "0 broken; entry CRCs valid; disk CRC valid"
}
