#!/usr/bin/env bash
# CI for the typed clients (run by .ci/run after scripts/schemathesis.sh):
#
#   clients/check.sh
#
#  1. regenerates both clients from docs/openapi.json (clients/generate.sh, which installs the
#     pinned generators when they are missing) and fails when the committed copy under clients/
#     differs from what the document gives: run clients/generate.sh and commit the result;
#  2. starts `breakwater serve` (API and workers) on a fresh database (scripts/scratch-service.sh);
#  3. runs each client's own test against it: the README's API tour with a receiver on loopback
#     and the Standard Webhooks check of what it received (TypeScript: `npm test` under Node's
#     test runner; Python: pytest, with the generated package on PYTHONPATH and its pinned
#     dependencies in a virtualenv under $BW_CLIENTS_CACHE).
#
# Needs Node 20 with npm and Python 3.11 or newer (BW_CLIENTS_PYTHON); everything else comes
# from npm and PyPI at the pinned versions, once per machine.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
# shellcheck source=clients/tools.sh
source clients/tools.sh

# 1. The committed clients are what the committed document gives.
clients/generate.sh
if ! git diff --exit-code --stat -- clients/ || [ -n "$(git status --porcelain --untracked-files=all -- clients/)" ]; then
  git status --short -- clients/
  echo "clients/ differs from what docs/openapi.json gives: run clients/generate.sh and commit the result" >&2
  exit 1
fi
TEST_VENV="$(clients_venv test clients/python/requirements-test.txt)"

# 2. A real service.
# shellcheck source=scripts/scratch-service.sh
source scripts/scratch-service.sh
scratch_service_start all breakwater_clients
export BREAKWATER_URL="$BW_API" BREAKWATER_OPERATOR_KEY="$BW_OPERATOR_KEY"
echo "client tests against $BW_API (database $BW_DB)"

# 3. Each client's own test.
(cd clients/typescript && timeout 120 npm test --silent)
(
  cd clients/python
  PYTHONPATH="$PWD/breakwater-client" PYTHONDONTWRITEBYTECODE=1 \
    timeout 120 "$TEST_VENV/bin/python" -m pytest -p no:cacheprovider -q tests
)
