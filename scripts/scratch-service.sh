# Sourced (from the clone's root) by the scripts that run something against a real `breakwater
# serve`: scripts/schemathesis.sh and clients/check.sh. It starts one node on a fresh database
# and removes both on exit.
#
#   source scripts/scratch-service.sh
#   scratch_service_start ROLE NAME   # ROLE: all | api | worker; NAME: the database's prefix
#
# scratch_service_start
#  1. starts the local Postgres cluster if DATABASE_URL is unset and it is not running (as
#     scripts/test.sh), else uses DATABASE_URL's server (for CREATE/DROP DATABASE);
#  2. builds `breakwater` (cargo, the caller's CARGO_TARGET_DIR) and creates a fresh database
#     `<NAME>_<random>`;
#  3. starts `breakwater serve --role ROLE` on a free loopback port with a random operator key,
#     private (loopback) targets allowed and the per-tenant ingress limit off, and waits for
#     /readyz;
#  4. sets BW_API (the service's root URL), BW_OPERATOR_KEY, BW_DB (the database's name),
#     BW_WORK (a scratch directory; the server's log is $BW_WORK/server.log) and traps EXIT,
#     INT and TERM: the server is stopped, the database dropped, and on a failure the log's last
#     lines printed (the scratch directory is then kept), else removed. A caller that needs its
#     own clean-up calls scratch_service_stop from its trap instead.
# Extra environment for the server (e.g. RUST_LOG, default warn) is passed through.

scratch_service_start() {
  local role="$1" name="$2" port
  if [ -z "${DATABASE_URL:-}" ]; then
    if ! pg_isready -h 127.0.0.1 -p 5432 -q; then
      echo "starting postgresql…"
      if [ "$(id -u)" = 0 ]; then
        pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -1)" main start
      else
        sudo pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -1)" main start
      fi
      for _ in $(seq 1 60); do pg_isready -h 127.0.0.1 -p 5432 -q && break; sleep 1; done
    fi
    export DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres
  fi
  BW_ADMIN_URL="$DATABASE_URL"

  cargo build --quiet -p breakwater
  local bin="${CARGO_TARGET_DIR:-$PWD/target}/debug/breakwater"
  BW_DB="${name}_$(python3 -c 'import secrets; print(secrets.token_hex(6))')"
  local db_url
  db_url="$(python3 - "$BW_ADMIN_URL" "$BW_DB" <<'EOF'
import sys, urllib.parse
u = urllib.parse.urlsplit(sys.argv[1])
print(urllib.parse.urlunsplit(u._replace(path="/" + sys.argv[2])))
EOF
)"
  BW_WORK="$(mktemp -d)"
  BW_SERVER_PID=""
  trap scratch_service_stop EXIT INT TERM
  psql -q "$BW_ADMIN_URL" -c "CREATE DATABASE $BW_DB" >/dev/null

  port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  BW_API="http://127.0.0.1:$port"
  BW_OPERATOR_KEY="$(python3 -c 'import secrets; print("op_" + secrets.token_hex(16))')"
  DATABASE_URL="$db_url" \
    BREAKWATER_LISTEN="127.0.0.1:$port" \
    BREAKWATER_OPERATOR_KEY="$BW_OPERATOR_KEY" \
    BREAKWATER_ALLOW_PRIVATE_TARGETS=true \
    BREAKWATER_API__INGRESS_PER_SECOND=0 \
    RUST_LOG="${RUST_LOG:-warn}" \
    "$bin" serve --role "$role" >"$BW_WORK/server.log" 2>&1 &
  BW_SERVER_PID=$!
  for _ in $(seq 1 120); do
    curl -fsS "$BW_API/readyz" >/dev/null 2>&1 && break
    kill -0 "$BW_SERVER_PID" 2>/dev/null || { echo "breakwater serve exited"; exit 1; }
    sleep 0.5
  done
  curl -fsS "$BW_API/readyz" >/dev/null
}

# Stops the server, drops the database and exits with the status the script had.
scratch_service_stop() {
  local status=$?
  if [ -n "${BW_SERVER_PID:-}" ]; then
    kill "$BW_SERVER_PID" 2>/dev/null || true
    wait "$BW_SERVER_PID" 2>/dev/null || true
  fi
  psql -q "$BW_ADMIN_URL" -c "DROP DATABASE IF EXISTS $BW_DB WITH (FORCE)" >/dev/null 2>&1 || true
  if [ "$status" != 0 ] && [ -f "$BW_WORK/server.log" ]; then
    echo "--- last lines of the server's log ($BW_WORK/server.log) ---"
    tail -n 40 "$BW_WORK/server.log"
  else
    rm -rf "$BW_WORK"
  fi
  exit "$status"
}
