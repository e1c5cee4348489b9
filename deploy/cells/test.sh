#!/usr/bin/env bash
# The two-cell test (issue 34, docs/cells.md): the scenarios of tests/chaos/cells.rs, one at a
# time, each on two cells (a throwaway Postgres server and a `breakwater serve` node each,
# BREAKWATER_CELL=a and b) behind the router of deploy/cells/ (HAProxy; the Debian package is
# installed if missing, as root or with sudo, and so are Chromium and its driver for the admin
# page), all on loopback.
#
#   deploy/cells/test.sh            every scenario (about 2 minutes once built)
#   deploy/cells/test.sh isolation  a key reaches only its cell; the operator sees both
#   deploy/cells/test.sh flood      a flood in cell a, cell b's p95 idle and flooded
#   deploy/cells/test.sh move       a tenant moved from cell a to cell b under load
#   deploy/cells/test.sh hosts      a host gets its cap from each cell
#
# The flood scenario prints cell b's p95 with cell a idle and flooded and their ratio (the
# figures of docs/cells.md); the move prints what was lost (asserted 0) and duplicated. Logs:
# $CARGO_TARGET_DIR/test-artifacts/chaos/cells_*/.
set -euo pipefail
cd "$(dirname "$0")/../.."

case "${1:-all}" in
isolation) filter='test(=cells::a_key_reaches_only_its_cell_and_the_operator_sees_both)' ;;
flood) filter='test(=cells::a_flood_in_one_cell_leaves_the_other_cells_p95)' ;;
move) filter='test(/^cells::a_tenant_moves/)' ;;
hosts) filter='test(=cells::a_host_gets_its_cap_from_each_cell)' ;;
all) filter='test(/^cells::/)' ;;
*)
  sed -n '2,17p' "$0" >&2
  exit 2
  ;;
esac

deploy/cells/router.sh install
# The isolation scenario also looks at the admin page through the router in headless Chromium
# (as scripts/test.sh installs it for the other browser tests); move.sh needs psql and curl.
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  sudo=()
  [ "$(id -u)" = 0 ] || sudo=(sudo)
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
    chromium chromium-driver >/dev/null
fi
# The `breakwater` binary the nodes run, then the test binary; the binary is marked newer than
# the test so the harness does not rebuild it from inside the test (deploy/ha/chaos.sh says why).
cargo build -p breakwater --bin breakwater
cargo nextest run -p breakwater-e2e --test chaos --no-run
touch "${CARGO_TARGET_DIR:-target}/debug/breakwater"
# --no-capture: the figures are printed as each scenario ends.
exec cargo nextest run -p breakwater-e2e --test chaos --run-ignored only --no-capture \
  --test-threads 1 -E "$filter"
