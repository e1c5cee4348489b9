#!/usr/bin/env bash
# The HA chaos test (issue 34): the scenarios of tests/chaos/ha.rs, one at a time, each on a
# topology of its own started and torn down by deploy/ha/cluster.sh (Patroni × 3 in strict
# synchronous mode, etcd, HAProxy; the Debian packages are installed if missing, as root or with
# sudo), with two `breakwater serve` nodes on HAProxy's address and a producer at 60 requests/s.
#
#   deploy/ha/chaos.sh            all four faults (about 6 minutes)
#   deploy/ha/chaos.sh a|b|c|d    one of them:
#     a  kill -9 of the primary's postmaster                     (ha::primary_killed)
#     b  the sync standby's node, then the primary's 10 s later   (ha::sync_standby_then_primary_killed)
#     c  SIGSTOP of the primary's Patroni for 30 s                (ha::primary_patroni_frozen)
#     d  kill -9 during message commits, then replays of the keys (ha::primary_killed_during_message_commits)
#
# Each run prints a line `chaos[ha_…]: N acknowledged …; lost 0; duplicates …; write outage …;
# delivery stall …` (the figures of BENCHMARKS.md) and fails unless nothing was lost. Logs of the
# nodes and of every component: $CARGO_TARGET_DIR/test-artifacts/chaos/ha_*/.
set -euo pipefail
cd "$(dirname "$0")/../.."

case "${1:-all}" in
a) filter='test(=ha::primary_killed)' ;;
b) filter='test(=ha::sync_standby_then_primary_killed)' ;;
c) filter='test(=ha::primary_patroni_frozen)' ;;
d) filter='test(=ha::primary_killed_during_message_commits)' ;;
all) filter='test(/^ha::/)' ;;
*)
  sed -n '2,17p' "$0" >&2
  exit 2
  ;;
esac

deploy/ha/cluster.sh install
# The `breakwater` binary the nodes run, then the test binary. The chaos harness rebuilds the
# former when it is older than the latter, from inside the test, where the environment differs
# enough that cargo rebuilds some dependencies (about a minute per scenario): it was just built
# from the same sources, so it is marked newer.
cargo build -p breakwater --bin breakwater
cargo nextest run -p breakwater-e2e --test chaos --no-run
touch "${CARGO_TARGET_DIR:-target}/debug/breakwater"
# --no-capture: the figures are printed as each run ends.
exec cargo nextest run -p breakwater-e2e --test chaos --run-ignored only --no-capture \
  --test-threads 1 -E "$filter"
