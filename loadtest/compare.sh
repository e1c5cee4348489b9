#!/usr/bin/env bash
# Compares two revisions with the load-test harness, run by run, on this machine: every
# isolation mode (timeout, refuse, 503, slow) at each backlog, the dead host, fairness, and
# throughput (the 50 000 burst and the open loop at 250/s), each build in turn (new, then old)
# so both see the same hour of the same disk. The figures in BENCHMARKS.md name this script and
# their run's folder.
#
# `build` builds OLD's service with NEW's harness (a worktree at OLD with NEW's loadtest/
# checked out into it), so that both builds take the same flags and report the same fields;
# if NEW's harness does not compile against OLD's crates, OLD's own harness is built instead
# and said so ($BENCH/harness-old). A run whose flags a build's harness lacks is skipped for
# that build, with a line saying so.
#
#   loadtest/compare.sh build NEW_REV OLD_REV     # release binaries into $BENCH/bin-{new,old}
#   loadtest/compare.sh run OUT_DIR [BACKLOGS…]   # default backlogs: 10000 100000
#   loadtest/compare.sh one OUT_DIR NAME ARGS…    # one more run of both builds (a repeat)
#   loadtest/compare.sh abba OUT_DIR NAME PAIRS ARGS…  # PAIRS pairs, alternating which goes first,
#                                                 # with the Postgres CPU ratio of the means
#
# BENCH (default /work/bench) holds the worktrees, the shared release target dir and the two
# binaries. Each run makes a fresh database on DATABASE_URL (default: the local server) and
# drops it. A run takes about 1 min (10 000) to 2 min (100 000); `run` takes about 55 min.
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
  local new_sha
  new_sha=$(git rev-parse --verify "$new^{commit}")
  for which in old new; do
    local rev="$old"
    [ "$which" = new ] && rev="$new"
    local tree="$bench/tree-$which"
    git worktree remove --force "$tree" 2>/dev/null || rm -rf "$tree"
    git worktree add --detach "$tree" "$rev" >/dev/null
    local harness="its own loadtest/"
    if [ "$which" = old ]; then
      # OLD's crates with NEW's harness: the same flags and fields in both builds.
      git -C "$tree" checkout "$new_sha" -- loadtest/
      harness="new's loadtest/ ($(git rev-parse --short "$new_sha")) on old's crates"
    fi
    if ! (cd "$tree" && CARGO_TARGET_DIR="$bench/target" cargo build --release -q -p breakwater-loadtest); then
      [ "$which" = old ] || exit 1
      echo "new's loadtest/ does not compile against old's crates: building old's own harness"
      # A fresh worktree at OLD, untouched by NEW's files.
      git worktree remove --force "$tree"
      git worktree add --detach "$tree" "$rev" >/dev/null
      harness="old's own loadtest/ (new's did not compile against old's crates)"
      (cd "$tree" && CARGO_TARGET_DIR="$bench/target" cargo build --release -q -p breakwater-loadtest)
    fi
    cp "$bench/target/release/breakwater-loadtest" "$bench/bin-$which"
    git -C "$tree" rev-parse --short HEAD >"$bench/rev-$which"
    echo "$harness" >"$bench/harness-$which"
    git worktree remove --force "$tree"
  done
  echo "built: new $(cat "$bench/rev-new") ($(cat "$bench/harness-new")), old $(cat "$bench/rev-old") ($(cat "$bench/harness-old"))"
}

# Whether the harness BIN takes every --flag of SCENARIO ARGS… (the scenario's --help lists it).
takes_flags() {
  local bin="$1"
  shift
  local help
  help=$("$bin" "$1" --help 2>/dev/null) || return 1
  local a
  for a in "$@"; do
    case "$a" in
      --*) grep -qE -- "${a%%=*}([^a-z0-9-]|\$)" <<<"$help" || return 1 ;;
    esac
  done
}

# Runs `breakwater-loadtest --out OUT/WHICH-NAME ARGS…` with build WHICH (new or old); prints the
# summary lines (its result.json is in the folder).
one_run() {
  local out="$1" which="$2" name="$3"
  shift 3
  mkdir -p "$out"
  local dir="$out/$which-$name"
  rm -rf "$dir"
  echo "== $which-$name: load $(cut -d' ' -f1 /proc/loadavg), $(date -u +%H:%M:%S) UTC"
  if ! takes_flags "$bench/bin-$which" "$@"; then
    echo "   skipped: this build's harness ($(cat "$bench/harness-$which" 2>/dev/null || echo '?')) lacks a flag of: $*"
    return 0
  fi
  "$bench/bin-$which" --out "$dir" "$@" >"$dir.log" 2>&1 || {
    echo "   FAILED (see $dir.log)"
    return 0
  }
  # The summary: from its first line (the scenario's name) to the end, without progress
  # lines; the last 3 lines if there is no such line.
  local summary
  summary=$(sed -n '/^\(isolation\|throughput\|fairness\|fetch micro-benchmark\)[:,]/,$p' "$dir.log" | grep -v '^\[')
  [ -n "$summary" ] || summary=$(tail -n 3 "$dir.log")
  sed 's/^/   /' <<<"$summary"
}

# One run of each build, new then old.
both() {
  local out="$1" name="$2"
  shift 2
  one_run "$out" new "$name" "$@"
  one_run "$out" old "$name" "$@"
}

# PAIRS pairs in ABBA order (old new, new old, old new, …), so that neither build always runs
# first: a run's figures move by about 10 % with its place in the series (BENCHMARKS.md), more
# than a small change. Names NAME-1 … NAME-PAIRS; prints each run's Postgres CPU-s per 1 000
# deliveries and the ratio of the means, new ÷ old.
abba() {
  local out="$1" name="$2" pairs="$3"
  shift 3
  local i
  for ((i = 1; i <= pairs; i++)); do
    if ((i % 2)); then
      one_run "$out" old "$name-$i" "$@"
      one_run "$out" new "$name-$i" "$@"
    else
      one_run "$out" new "$name-$i" "$@"
      one_run "$out" old "$name-$i" "$@"
    fi
  done
  python3 - "$out" "$name" "$pairs" <<'PY'
import json, sys
out, name, pairs = sys.argv[1], sys.argv[2], int(sys.argv[3])
cpu = {"new": [], "old": []}
for which in cpu:
    for i in range(1, pairs + 1):
        try:
            r = json.load(open(f"{out}/{which}-{name}-{i}/result.json"))
            cpu[which].append(r["cpu"]["phases"]["run"]["postgres_cpu_s_per_1000_deliveries"])
        except (OSError, KeyError, ValueError):
            pass
for which, xs in cpu.items():
    print(f"   {which}: Postgres CPU-s per 1 000: {' / '.join(f'{x:.3f}' for x in xs)}")
if cpu["new"] and cpu["old"]:
    mean = {w: sum(xs) / len(xs) for w, xs in cpu.items()}
    print(f"   new ÷ old (means): {mean['new'] / mean['old']:.2f}")
PY
}

run() {
  local out="$1"
  shift
  local backlogs=("$@")
  [ ${#backlogs[@]} -gt 0 ] || backlogs=(10000 100000)
  mkdir -p "$out"
  psql -Atc "SHOW autovacuum" "$DATABASE_URL" | sed 's/^/autovacuum = /'
  # Which builds and when, for scripts/bench-table.py (result.json does not know its commit:
  # the binaries are built from worktrees that are gone by now).
  printf '{\n  "new": "%s",\n  "old": "%s",\n  "date": "%s"\n}\n' "$(cat "$bench/rev-new")" \
    "$(cat "$bench/rev-old")" "$(date -u '+%Y-%m-%d, from %H:%M UTC')" >"$out/run.json"
  for n in "${backlogs[@]}"; do
    for mode in timeout refuse 503 slow; do
      both "$out" "iso-$mode-$n" isolation --backlog "$n" --duration 30 --dead-mode "$mode"
    done
  done
  both "$out" host-timeout isolation --backlog 10000 --duration 30 --dead-mode timeout \
    --dead-channels 50 --dead-tenants 5
  both "$out" fair-5 fairness --count 1000 --channels 5
  both "$out" throughput-50k throughput --count 50000
  both "$out" throughput-rate-250 throughput --rate 250 --count 10000
}

case "${1:-}" in
  build) build "$2" "$3" ;;
  run) shift; run "$@" ;;
  one) shift; out="$1" name="$2"; shift 2; both "$out" "$name" "$@" ;;
  abba) shift; out="$1" name="$2" pairs="$3"; shift 3; abba "$out" "$name" "$pairs" "$@" ;;
  *) sed -n '2,22p' "$0"; exit 2 ;;
esac
