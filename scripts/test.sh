#!/usr/bin/env bash
# The test command: installs what is missing, starts Postgres, then runs every test.
#
#   scripts/test.sh [extra cargo-nextest arguments]
#
# On a fresh Debian/Ubuntu machine (as root, or with sudo) it installs cargo-nextest (from
# crates.io), chromium and chromium-driver (Debian packages, for the admin page's and the tenant portal's
# browser tests)
# and starts the local PostgreSQL cluster if it is not running. DATABASE_URL defaults to the local
# server (trust auth, user postgres); each test creates its own database there.
set -euo pipefail
cd "$(dirname "$0")/.."

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
