# Helpers for the accounts mount tests (players/, auth.txt, mod_storage/); sourced after lib.sh.
export LC_ALL=C

# stores_sha WORLD: one hash over every file that stores players, auth or mod storage.
stores_sha() {
  (cd "$1" && { find players.sqlite auth.sqlite mod_storage.sqlite auth.txt players mod_storage \
      -type f 2>/dev/null || true; } | sort | xargs -r sha256sum) | sha256sum | cut -d' ' -f1
}

# log_mark: the current length of the daemon log; log_since MARK: what was logged after it.
log_mark() { wc -l <"$T/worldfs.log"; }
log_since() { tail -n +"$(($1 + 1))" "$T/worldfs.log"; }

# must_reject SRC DEST PATTERN: copying SRC over DEST through the mount fails at close, and the
# log names DEST with PATTERN (file, line and reason).
must_reject() {
  local src=$1 dst=$2 pattern=$3 mark
  mark=$(log_mark)
  if cp "$src" "$dst" 2>/dev/null; then fail "writing $dst was accepted (expected: $pattern)"; fi
  log_since "$mark" | grep -F "commit failed" | grep -F "${dst#"$M"/}: " | grep -qF -- "$pattern" \
    || { log_since "$mark" >&2; fail "log lacks [$pattern] for $dst"; }
}

# nano_edit FILE SEARCH NEWLINE: opens FILE in nano inside tmux, finds SEARCH, replaces that
# line with NEWLINE, saves and quits.
nano_edit() {
  local file=$1 search=$2 line=$3 session="worldfs-nano-$$"
  tmux new-session -d -s "$session" -x 160 -y 50 "nano --ignorercfiles '$file'"
  sleep 0.5
  tmux send-keys -t "$session" C-w "$search" Enter
  sleep 0.2
  tmux send-keys -t "$session" Home C-k
  tmux send-keys -t "$session" -l "$line"
  tmux send-keys -t "$session" Enter
  sleep 0.2
  tmux send-keys -t "$session" C-o Enter
  sleep 0.5
  tmux send-keys -t "$session" C-x
  for _ in $(seq 50); do tmux has-session -t "$session" 2>/dev/null || return 0; sleep 0.1; done
  tmux kill-session -t "$session"
  fail "nano did not exit after saving $file"
}

# engine ARGS...: the real server, under the machine-wide engine lock.
engine() {
  : >"$T/engine.log"
  flock "$ENGINE_LOCK" timeout 120 /usr/games/minetestserver --logfile "$T/engine.log" "$@" \
    >/dev/null 2>&1 || fail "minetestserver $* failed: $(tail -5 "$T/engine.log")"
}

# migrate WORLD players|auth|mod-storage BACKEND: the engine converts one store.
migrate() {
  engine --world "$1" --migrate-"$2" "$3"
  grep -q "Successfully migrated\|Migration finished" "$T/engine.log" \
    || fail "engine migration of $2 to $3 failed: $(tail -5 "$T/engine.log")"
}
