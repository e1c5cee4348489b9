#!/usr/bin/env bash
# Regenerates both typed clients from the committed OpenAPI document (docs/openapi.json):
#
#   clients/typescript/src/schema.ts     openapi-typescript (npm, pinned in package-lock.json)
#   clients/python/breakwater-client/    openapi-python-client (PyPI, pinned in
#                                        clients/python/requirements-generate.txt), formatted by
#                                        the pinned ruff
#
#   clients/generate.sh
#
# Installs the generators first when they are missing or their pins changed: `npm ci` into
# clients/typescript/node_modules (git-ignored), and a virtualenv under $BW_CLIENTS_CACHE
# (default $CARGO_TARGET_DIR/clients, else target/clients in the clone). Once installed, nothing
# here reaches the network. The output depends only on the document and the pins: the same
# document gives the same files byte for byte (clients/check.sh relies on it).
#
# Environment: BW_CLIENTS_PYTHON (the interpreter for the virtualenvs; default python3, 3.11 or
# newer), BW_CLIENTS_CACHE (see above).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=clients/tools.sh
source clients/tools.sh

SPEC="$PWD/docs/openapi.json"

# TypeScript: the types; src/index.ts (hand-written) wraps them with openapi-fetch.
clients_npm_ci
(cd clients/typescript && node_modules/.bin/openapi-typescript "$SPEC" --output src/schema.ts >/dev/null)

# Python: the whole package, in its own directory (the generator replaces it).
GEN_VENV="$(clients_venv generate clients/python/requirements-generate.txt)"
OUT="clients/python/breakwater-client"
rm -rf "$OUT"
(
  cd clients/python
  # The post hooks call `ruff` by name: the pinned one from the virtualenv.
  RUFF_NO_CACHE=true PATH="$GEN_VENV/bin:$PATH" "$GEN_VENV/bin/openapi-python-client" generate \
    --path "$SPEC" --output-path breakwater-client --meta pdm --config generator.yml >/dev/null
)
echo "clients regenerated from docs/openapi.json"
