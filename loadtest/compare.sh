#!/usr/bin/env bash
# Compares two revisions with the load-test harness, run by run, on this machine: every
# isolation mode (timeout, refuse, 503, slow) at each backlog, the dead host and fairness, each
# build in turn (new, then old) so both see the same hour of the same disk. The figures in
# BENCHMARKS.md name this script and their run's folder.
#
#   loadtest/compare.sh build NEW_REV OLD_REV     # release binaries into $BENCH/bin-{new,old}
#   loadtest/compare.sh run OUT_DIR [BACKLOGS…]   # default backlogs: 10000 100000
#   loadtest/compare.sh one OUT_DIR NAME ARGS…    # one more run of both builds (a repeat)
#
# BENCH (default /work/bench) holds the worktrees, the shared release target dir and the two
# binaries. Each run makes a fresh database on DATABASE_URL (default: the local server) and
# drops it. A run takes about 1 min (10 000) to 2 min (100 000); `run` takes about 45 min.
set -euo pipefail
cd "$(dirname "$0")/.."
bench="${BENCH:-/work/bench}"
export DATABASE_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}"

build() {
  local new="$1" old="$2"
  mkdir -p "$bench"
  # One target dir for both, built one after the other: cargo names a workspace crate's
  # artifacts by its path inside the workspace, so two worktrees in parallel would overwrite
  # each other's; in turn, the second build reuses every dependency and compiles only ours.
  for which in old new; do
    local rev="$old"
    [ "$which" = new ] && rev="$new"
    local tree="$bench/tree-$which"
    git worktree remove --force "$tree" 2>/dev/null || rm -rf "$tree"
    git worktree add --detach "$tree" "$rev" >/dev/null
    (cd "$tree" && CARGO_TARGET_DIR="$bench/target" cargo build --release -q -p breakwater-loadtest)
    cp "$bench/target/release/breakwater-loadtest" "$bench/bin-$which"
    git -C "$tree" rev-parse --short HEAD >"$bench/rev-$which"
    git worktree remove --force "$tree"
  done
  echo "built: new $(cat "$bench/rev-new"), old $(cat "$bench/rev-old")"
}

# Runs `breakwater-loadtest --out OUT/<build>-NAME ARGS…` for new, then old; prints the summary
# line of each (its result.json is in the folder).
both() {
  local out="$1" name="$2"
  shift 2
  for which in new old; do
    local dir="$out/$which-$name"
    rm -rf "$dir"
    echo "== $which-$name: load $(cut -d' ' -f1 /proc/loadavg), $(date -u +%H:%M:%S) UTC"
    "$bench/bin-$which" --out "$dir" "$@" >"$dir.log" 2>&1 || {
      echo "   FAILED (see $dir.log)"
      continue
    }
    tail -n 3 "$dir.log" | sed 's/^/   /'
  done
}

run() {
  local out="$1"
  shift
  local backlogs=("$@")
  [ ${#backlogs[@]} -gt 0 ] || backlogs=(10000 100000)
  mkdir -p "$out"
  psql -Atc "SHOW autovacuum" "$DATABASE_URL" | sed 's/^/autovacuum = /'
  for n in "${backlogs[@]}"; do
    for mode in timeout refuse 503 slow; do
      both "$out" "iso-$mode-$n" isolation --backlog "$n" --duration 30 --dead-mode "$mode"
    done
  done
  both "$out" host-timeout isolation --backlog 10000 --duration 30 --dead-mode timeout \
    --dead-channels 50 --dead-tenants 5
  both "$out" fair-5 fairness --count 1000 --channels 5
}

case "${1:-}" in
  build) build "$2" "$3" ;;
  run) shift; run "$@" ;;
  one) shift; out="$1" name="$2"; shift 2; both "$out" "$name" "$@" ;;
  *) sed -n '2,13p' "$0"; exit 2 ;;
esac
