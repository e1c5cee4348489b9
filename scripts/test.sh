#!/usr/bin/env bash
# The test command: installs what is missing, starts Postgres, then runs every test, or the
# tests of the areas named.
#
#   scripts/test.sh                          every test
#   scripts/test.sh AREA [AREA…] [ARGS…]     one area's tests (several: any of them), e.g.
#                                            `scripts/test.sh circuit`; docs/testing.md lists them
#   scripts/test.sh [ARGS…]                  extra cargo-nextest arguments, e.g. -E 'test(/retry/)'
#
# An AREA is a test module of tests/e2e or tests/chaos (`circuit` runs `circuit::…` there and
# in the crates' unit tests), a test file of crates/*/tests (`fifo`), a crate (`queue`, `core`,
# `worker`, `api`, `telemetry`, `server`, `loadtest`), or a test binary (`e2e`, `chaos`): the
# union of what the name matches. `scripts/test.sh --areas` lists every name.
#
# On a fresh Debian/Ubuntu machine (as root, or with sudo) it installs cargo-nextest (from
# crates.io), chromium and chromium-driver (Debian packages, for the admin page's and the tenant portal's
# browser tests)
# and starts the local PostgreSQL cluster if it is not running. DATABASE_URL defaults to the local
# server (trust auth, user postgres); each test creates its own database there.
set -euo pipefail
cd "$(dirname "$0")/.."

# Every area name, one a line (see above).
areas() {
  {
    printf '%s\n' e2e chaos core queue worker api telemetry server loadtest
    # Files and module folders that hold tests (not the harness's helper modules).
    for f in tests/e2e/*.rs tests/e2e/*/mod.rs tests/chaos/*.rs crates/*/tests/*.rs; do
      [ -e "$f" ] || continue
      local d="$f"
      case "$f" in */mod.rs) d=$(dirname "$f") ;; esac
      grep -rqE '#\[((tokio|sqlx)::)?test' "$d" || continue
      basename "$d" .rs
    done
  } | sort -u
}

# The nextest filter of one area: every kind of thing its name matches, joined by `|`.
area_filter() {
  local a="$1" parts=()
  case "$a" in
    e2e | chaos) parts+=("binary(=$a)") ;;
    server) parts+=("package(=breakwater)") ;;
    loadtest | core | queue | worker | api | telemetry) parts+=("package(=breakwater-$a)") ;;
  esac
  if compgen -G "crates/*/tests/$a.rs" >/dev/null; then parts+=("binary(=$a)"); fi
  if [ -e "tests/e2e/$a.rs" ] || [ -d "tests/e2e/$a" ] || [ -e "tests/chaos/$a.rs" ]; then
    parts+=("test(/^$a::/)")
  fi
  local IFS='|'
  echo "${parts[*]}"
}

if [ "${1:-}" = --areas ]; then
  areas
  exit 0
fi
filter=""
while [ $# -gt 0 ] && [[ "$1" != -* ]]; do
  if ! areas | grep -qx -- "$1"; then
    echo "scripts/test.sh: no test area '$1'; the areas are:" >&2
    areas | paste -sd' ' >&2
    exit 2
  fi
  filter="${filter:+$filter | }$(area_filter "$1")"
  shift
done
if [ -n "$filter" ]; then
  set -- -E "$filter" "$@"
  echo "tests of: $filter"
fi

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  as_root apt-get install -y -qq "$@" >/dev/null 2>&1 || {
    as_root apt-get update -qq >/dev/null
    as_root apt-get install -y -qq "$@" >/dev/null
  }
}

# PostgreSQL: install the server if there is none, start the cluster if it is not running.
if [ -z "${DATABASE_URL:-}" ]; then
  if ! command -v pg_ctlcluster >/dev/null && ! command -v pg_isready >/dev/null; then
    echo "installing postgresql…"
    apt_install postgresql
  fi
  if ! pg_isready -h 127.0.0.1 -p 5432 -q; then
    echo "starting postgresql…"
    as_root pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -1)" main start
  fi
  for _ in $(seq 1 60); do
    pg_isready -h 127.0.0.1 -p 5432 -q && break
    sleep 1
  done
  pg_isready -h 127.0.0.1 -p 5432
  export DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres
fi

# Headless Chromium and its WebDriver for the admin page's and the portal's browser tests.
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  echo "installing chromium and chromium-driver for the browser test…"
  apt_install chromium chromium-driver
fi

command -v cargo-nextest >/dev/null || cargo install cargo-nextest --locked

# The browser tests save their screenshots (admin.png, admin-closed.png, portal-*.png) here:
echo "test artifacts: ${CARGO_TARGET_DIR:-target}/test-artifacts/"
exec cargo nextest run --workspace "$@"
