# Sourced by clients/generate.sh and clients/check.sh (from the clone's root): installs the
# clients' pinned tools when they are missing or their pins changed, and only then.
#
#   clients_npm_ci                 `npm ci` in clients/typescript (node_modules, git-ignored)
#   clients_venv NAME REQUIREMENTS prints the path of a virtualenv with REQUIREMENTS installed
#                                  (pip install -r), under $BW_CLIENTS_CACHE
#
# Each install leaves a stamp: the SHA-256 of the file it installed from, so an unchanged pin
# costs nothing and a changed one reinstalls from scratch.

BW_CLIENTS_CACHE="${BW_CLIENTS_CACHE:-${CARGO_TARGET_DIR:-$PWD/target}/clients}"
BW_CLIENTS_PYTHON="${BW_CLIENTS_PYTHON:-python3}"

clients_npm_ci() {
  local dir=clients/typescript want
  want="$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)"
  if [ "$(cat "$dir/node_modules/.bw-lock-sha256" 2>/dev/null)" != "$want" ]; then
    echo "installing the TypeScript client's tools (npm ci)…" >&2
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >&2)
    echo "$want" >"$dir/node_modules/.bw-lock-sha256"
  fi
}

clients_venv() {
  local name="$1" requirements="$2" version venv want
  version="$("$BW_CLIENTS_PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" || return 1
  venv="$BW_CLIENTS_CACHE/venv-$name-py$version"
  want="$(sha256sum "$requirements" | cut -d' ' -f1)"
  if [ "$(cat "$venv/.bw-requirements-sha256" 2>/dev/null)" != "$want" ]; then
    echo "installing $requirements into $venv (Python $version)…" >&2
    # Called inside $(…), where `set -e` does not reach: each step returns on failure, so a
    # failed install leaves no stamp (and the caller's assignment fails).
    rm -rf "$venv" && mkdir -p "$BW_CLIENTS_CACHE" || return 1
    "$BW_CLIENTS_PYTHON" -m venv "$venv" || return 1
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements" >&2 || return 1
    echo "$want" >"$venv/.bw-requirements-sha256" || return 1
  fi
  echo "$venv"
}
