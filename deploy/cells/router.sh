#!/usr/bin/env bash
# The router in front of Breakwater's cells (issue 34, docs/cells.md): HAProxy on loopback,
# configured from a cells file, sending each request to the cell of its tenant.
#
#   deploy/cells/router.sh up             install HAProxy if missing, render the config from
#                                         $CELLS_CONF, start it, wait until it answers
#   deploy/cells/router.sh reload         render again (a cell or node added) and reload HAProxy
#                                         without dropping connections
#   deploy/cells/router.sh down           stop it, delete its directory
#   deploy/cells/router.sh url            the router's base URL
#   deploy/cells/router.sh move CELL DIGEST...
#                                         route the credentials whose SHA-256 digests (hex, as
#                                         `encode(key_hash, 'hex')` / `encode(token_hash, 'hex')`)
#                                         are given to CELL from now on (a moved tenant's keys and
#                                         portal tokens): at once, through HAProxy's runtime API,
#                                         and for good, in moved.map
#   deploy/cells/router.sh hold DIGEST... answer the credentials with these digests 503
#                                         `tenant_moving` with Retry-After: 1 (a tenant's intake
#                                         paused for the cut-over of its move) until a `move`
#   deploy/cells/router.sh install        only install HAProxy (Debian package haproxy 2.6)
#
# The cells file ($CELLS_CONF, default deploy/cells/cells.conf), one statement per line, `#`
# comments:
#   cell <id> <host:port> [<host:port>...]   a cell and the API addresses of its nodes
#   home <id>                                the cell of credentials minted before cells (the
#                                            deployment's original cell); optional
#
# Environment: CELLS_CONF (above), CELLS_PORT (the router's port, default 15500), CELLS_DIR
# (default /tmp/breakwater-cells-$CELLS_PORT: rendered config, cells.json, moved.map, problem
# bodies, log, pid, runtime socket). Installing needs root or sudo.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
conf="${CELLS_CONF:-$here/cells.conf}"
port="${CELLS_PORT:-15500}"
dir="${CELLS_DIR:-/tmp/breakwater-cells-$port}"

log() { echo "cells: $*" >&2; }

install() {
  command -v haproxy >/dev/null && return 0
  log "installing haproxy"
  local sudo=()
  [ "$(id -u)" = 0 ] || sudo=(sudo)
  "${sudo[@]}" apt-get update -qq
  # The package's service is not started (policy-rc.d in containers; this script runs its own).
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
    haproxy >/dev/null
}

# The problem+json body of a refusal (RFC 9457, the shape of the API's own:
# crates/api/src/error.rs).
problem() { # file status title code detail
  python3 -c '
import json, sys
f, status, title, code, detail = sys.argv[1:]
json.dump({"type": "urn:breakwater:problem:" + code, "title": title, "status": int(status),
           "detail": detail, "code": code}, open(f, "w"))
' "$@"
}

# Renders $dir/haproxy.cfg, cells.json and the problem bodies from $conf; keeps moved.map.
render() {
  [ -f "$conf" ] || {
    log "no cells file $conf"
    exit 2
  }
  mkdir -p "$dir"
  touch "$dir/moved.map"
  python3 - "$conf" "$here/haproxy.cfg.in" "$dir" "$port" <<'PY'
import json, re, sys
conf, template, out, port = sys.argv[1:]
cells, home = {}, None
for n, line in enumerate(open(conf), 1):
    words = line.split("#", 1)[0].split()
    if not words:
        continue
    if words[0] == "cell" and len(words) >= 3:
        cell = words[1]
        if not re.fullmatch(r"[a-z0-9]{1,8}", cell):
            sys.exit(f"{conf}:{n}: a cell id is 1 to 8 characters a-z and 0-9, not {cell!r}")
        for addr in words[2:]:
            if not re.fullmatch(r"[A-Za-z0-9.\-\[\]:]+:[0-9]+", addr):
                sys.exit(f"{conf}:{n}: {addr!r} is not host:port")
        cells.setdefault(cell, []).extend(words[2:])
    elif words[0] == "home" and len(words) == 2:
        home = words[1]
    else:
        sys.exit(f"{conf}:{n}: expected `cell <id> <host:port>...` or `home <id>`")
if not cells:
    sys.exit(f"{conf}: no cell")
if home is not None and home not in cells:
    sys.exit(f"{conf}: home {home!r} is not a cell")
ids = sorted(cells)
home_rule = (f"    http-request set-var(txn.cell) str({home}) if cred_plain" if home else
             "    # No home cell: a credential minted before cells is refused (401 unknown_cell).")
use = "\n".join(f"    use_backend cell_{c} if {{ var(txn.cell) -m str {c} }}" for c in ids)
def servers(cell, addrs):
    return "\n".join(f"    server {cell}{i} {a} check" for i, a in enumerate(addrs, 1))
backends = []
for c in ids:
    backends.append(f"""backend cell_{c}
    balance leastconn
    option httpchk GET /healthz
    default-server inter 1s fall 2 rise 1
{servers(c, cells[c])}
""")
backends.append("""backend any
    balance roundrobin
    option httpchk GET /healthz
    default-server inter 1s fall 2 rise 1
""" + "\n".join(servers(c, cells[c]) for c in ids) + "\n")
text = open(template).read()
for k, v in {"@DIR@": out, "@PORT@": port, "@CELLS@": " ".join(ids), "@HOME_RULE@": home_rule,
             "@USE_BACKENDS@": use, "@BACKENDS@": "\n".join(backends)}.items():
    text = text.replace(k, v)
open(f"{out}/haproxy.cfg", "w").write(text)
# Names only (the router answers it without a key): no node address or count.
json.dump({"cells": [{"id": c, "home": c == home} for c in ids]},
          open(f"{out}/cells.json", "w"))
PY
  local ids
  ids="$(python3 -c 'import json,sys; print(", ".join(c["id"] for c in json.load(open(sys.argv[1]))["cells"]))' "$dir/cells.json")"
  problem "$dir/problem-unknown-cell.json" 401 Unauthorized unknown_cell \
    "this credential names no cell of this deployment (cells: $ids): unknown or revoked API key"
  problem "$dir/problem-two-credentials.json" 401 Unauthorized unauthorized \
    "send one Authorization header, not several"
  problem "$dir/problem-unknown-cell-header.json" 400 "Bad Request" unknown_cell \
    "the Breakwater-Cell header names no cell of this deployment (cells: $ids; GET /api/v1/cells)"
  problem "$dir/problem-cell-required.json" 400 "Bad Request" cell_required \
    "this deployment has cells ($ids): a tenant key names its own; with the operator key, name one in the Breakwater-Cell header (GET /api/v1/cells lists them)"
  problem "$dir/problem-moving.json" 503 "Service Unavailable" tenant_moving \
    "this tenant is being moved to another cell: retry in a second with the same Idempotency-Key"
  problem "$dir/problem-503.json" 503 "Service Unavailable" cell_unavailable \
    "no node of this cell is up; retry later"
  {
    printf 'HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/problem+json\r\n'
    printf 'Retry-After: 1\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n'
    cat "$dir/problem-503.json"
  } >"$dir/problem-503.http"
  haproxy -c -q -f "$dir/haproxy.cfg"
}

alive() {
  local pid
  pid="$(head -1 "$dir/haproxy.pid" 2>/dev/null)" || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

up() {
  install
  if alive >/dev/null; then
    log "already running on port $port ($dir)"
    return 0
  fi
  render
  haproxy -f "$dir/haproxy.cfg" >"$dir/haproxy.log" 2>&1 </dev/null &
  echo $! >"$dir/haproxy.pid"
  for _ in $(seq 1 50); do
    curl -sf -o /dev/null "http://127.0.0.1:$port/api/v1/cells" && {
      log "up: $(url) ($(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])))' "$dir/cells.json"))"
      return 0
    }
    sleep 0.1
  done
  log "haproxy did not answer; see $dir/haproxy.log"
  exit 1
}

reload() {
  local pid
  pid="$(alive)" || {
    log "not running"
    exit 1
  }
  render
  # -sf: the new process takes the port, the old one finishes its connections and exits.
  haproxy -f "$dir/haproxy.cfg" -sf "$pid" >>"$dir/haproxy.log" 2>&1 </dev/null &
  echo $! >"$dir/haproxy.pid"
}

down() {
  local pid
  if pid="$(alive)"; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -rf "$dir"
}

url() { echo "http://127.0.0.1:$port"; }

# One command on HAProxy's runtime API (the stats socket); its answer.
runtime() {
  python3 - "$dir/admin.sock" "$1" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode() + b"\n")
out = b""
while chunk := s.recv(4096):
    out += chunk
print(out.decode().strip())
PY
}

# Maps each digest to $1 (a cell, or @moving) in moved.map and in the running HAProxy.
move() {
  local cell="$1" digest answer
  shift
  [ "$cell" = @moving ] ||
    grep -qx "$cell" <(python3 -c 'import json,sys; [print(c["id"]) for c in json.load(open(sys.argv[1]))["cells"]]' "$dir/cells.json") || {
    log "no cell $cell"
    exit 2
  }
  for digest in "$@"; do
    [[ "$digest" =~ ^[0-9a-f]{64}$ ]] || {
      log "$digest is not a SHA-256 digest in lower-case hex"
      exit 2
    }
    # The file first (a reload keeps the move), then the running process.
    grep -v "^$digest " "$dir/moved.map" >"$dir/moved.map.new" || true
    echo "$digest $cell" >>"$dir/moved.map.new"
    mv "$dir/moved.map.new" "$dir/moved.map"
    answer="$(runtime "set map $dir/moved.map $digest $cell")"
    if [ -n "$answer" ]; then # not there yet: `set` answers an error, `add` adds it
      answer="$(runtime "add map $dir/moved.map $digest $cell")"
    fi
    [ -z "$answer" ] || {
      log "haproxy: $answer"
      exit 1
    }
  done
  log "$# credentials now go to $cell"
}

cmd="${1:-}"
shift || true
case "$cmd" in
install) install ;;
up) up ;;
reload) reload ;;
down) down ;;
url) url ;;
move) move "$@" ;;
hold) move @moving "$@" ;;
*)
  sed -n '2,33p' "$0" >&2
  exit 2
  ;;
esac
