#!/usr/bin/env bash
# The Breakwater HA topology on loopback (issue 34): etcd (one member), three Postgres 15 nodes
# run by Patroni in strict synchronous mode, and HAProxy routing writes to the primary.
#
#   deploy/ha/cluster.sh up              install what is missing, start everything, wait until a
#                                        primary and a synchronous standby serve writes
#   deploy/ha/cluster.sh down            stop everything this script started, delete the data
#   deploy/ha/cluster.sh status          one line per node: name, role, state, lag
#   deploy/ha/cluster.sh url             the DATABASE_URL of the primary (through HAProxy)
#   deploy/ha/cluster.sh primary|sync    the name of the primary / of the synchronous standby
#   deploy/ha/cluster.sh wait-healthy [s]  wait (default 60 s) for a primary + sync standby
#   deploy/ha/cluster.sh kill-postgres N kill -9 of node N's postmaster (Patroni stays)
#   deploy/ha/cluster.sh kill-node N     kill -9 of node N's Patroni, then of its postmaster
#   deploy/ha/cluster.sh start-node N    start node N's Patroni again (it rejoins as a replica)
#   deploy/ha/cluster.sh freeze N|thaw N SIGSTOP / SIGCONT of node N's Patroni
#   deploy/ha/cluster.sh kill-primary    kill-postgres of the current primary
#   deploy/ha/cluster.sh install         only install the Debian packages
#
# Environment: HA_PORT_BASE (default 15400; every port is HA_PORT_BASE + a fixed offset, away from
# 5432, 3306, 6379, 5672, 1883 and 4222), HA_DIR (default /tmp/breakwater-ha-$HA_PORT_BASE: data,
# configs, logs, pid files), PG_BIN (default /usr/lib/postgresql/15/bin).
#
# Ports: HAProxy writes +0, HAProxy replicas +1, Postgres pgN +30+N, Patroni REST pgN +80+N,
# etcd client +79, etcd peer +78.
#
# Patroni runs Postgres as the `postgres` user: run this script as root (it drops to postgres
# with setpriv) or as postgres; installing the packages needs root or sudo.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
base="${HA_PORT_BASE:-15400}"
dir="${HA_DIR:-/tmp/breakwater-ha-$base}"
pg_bin="${PG_BIN:-/usr/lib/postgresql/15/bin}"
nodes=(pg1 pg2 pg3)

write_port=$((base + 0))
read_port=$((base + 1))
etcd_peer=$((base + 78))
etcd_port=$((base + 79))

# The number of node `pgN`.
num() {
  case "$1" in
  pg1 | pg2 | pg3) echo "${1#pg}" ;;
  *)
    echo "no node $1 (pg1, pg2, pg3)" >&2
    exit 2
    ;;
  esac
}
pg_port() { echo $((base + 30 + $(num "$1"))); }
rest_port() { echo $((base + 80 + $(num "$1"))); }

log() { echo "ha: $*" >&2; }

# The prefix that runs a command as the postgres user by exec (no process in between, so `$!` of
# a command started in the background is the command's own pid): setpriv as root, nothing as
# postgres, sudo otherwise (then `$!` is sudo's, which forwards TERM but not STOP: freeze needs
# root or postgres).
as_postgres=()
if [ "$(id -u)" = 0 ]; then
  as_postgres=(setpriv --reuid postgres --regid postgres --init-groups --)
elif [ "$(id -un)" != postgres ]; then
  as_postgres=(sudo -u postgres --)
fi

install() {
  local missing=()
  command -v patroni >/dev/null || missing+=(patroni)
  command -v etcd >/dev/null || missing+=(etcd-server)
  command -v haproxy >/dev/null || missing+=(haproxy)
  command -v curl >/dev/null || missing+=(curl)
  [ -x "$pg_bin/postgres" ] || missing+=(postgresql-15)
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing ${missing[*]}"
  local sudo=()
  [ "$(id -u)" = 0 ] || sudo=(sudo)
  "${sudo[@]}" apt-get update -qq
  # The packages' services are not started (policy-rc.d in containers; this script runs its own).
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" python3-psycopg2 python3-etcd >/dev/null
}

# The process id in file $1, if that process runs.
alive() {
  local pid
  pid="$(head -1 "$1" 2>/dev/null)" || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

render() { # template output node
  local n="${3:-pg1}"
  sed -e "s|@NAME@|$n|g" -e "s|@DIR@|$dir|g" -e "s|@BIN_DIR@|$pg_bin|g" \
    -e "s|@PG_PORT@|$(pg_port "$n")|g" -e "s|@REST_PORT@|$(rest_port "$n")|g" \
    -e "s|@ETCD_PORT@|$etcd_port|g" -e "s|@WRITE_PORT@|$write_port|g" \
    -e "s|@READ_PORT@|$read_port|g" \
    -e "s|@PG1_PORT@|$(pg_port pg1)|g" -e "s|@PG2_PORT@|$(pg_port pg2)|g" \
    -e "s|@PG3_PORT@|$(pg_port pg3)|g" -e "s|@REST1_PORT@|$(rest_port pg1)|g" \
    -e "s|@REST2_PORT@|$(rest_port pg2)|g" -e "s|@REST3_PORT@|$(rest_port pg3)|g" \
    "$1" >"$2"
}

start_etcd() {
  alive "$dir/etcd.pid" >/dev/null && return 0
  mkdir -p "$dir/etcd"
  # Plain HTTP on loopback; peers and clients need TLS on a network. The v2 API is what Patroni
  # uses (patroni.yml.in says why).
  etcd --name etcd1 --data-dir "$dir/etcd/data" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" \
    --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$etcd_peer" \
    --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
    --initial-cluster "etcd1=http://127.0.0.1:$etcd_peer" \
    --initial-cluster-state new \
    --enable-v2=true \
    >"$dir/etcd/etcd.log" 2>&1 </dev/null &
  echo $! >"$dir/etcd.pid"
  for _ in $(seq 1 100); do
    curl -sf "http://127.0.0.1:$etcd_port/health" >/dev/null && return 0
    sleep 0.1
  done
  log "etcd did not start; see $dir/etcd/etcd.log"
  exit 1
}

start_node() {
  local n="$1"
  num "$n" >/dev/null
  alive "$dir/$n/patroni.pid" >/dev/null && return 0
  mkdir -p "$dir/$n"
  render "$here/patroni.yml.in" "$dir/$n/patroni.yml" "$n"
  chown -R postgres: "$dir/$n" 2>/dev/null || true
  chmod 700 "$dir/$n"
  # From the node's own directory: the caller's working directory may be one the postgres
  # user cannot enter (a clone under a 0700 `mktemp -d`), and Postgres then fails to start.
  (cd "$dir/$n" && exec "${as_postgres[@]}" patroni "$dir/$n/patroni.yml") \
    >>"$dir/$n/patroni.log" 2>&1 </dev/null &
  echo $! >"$dir/$n/patroni.pid"
}

start_haproxy() {
  alive "$dir/haproxy.pid" >/dev/null && return 0
  render "$here/haproxy.cfg.in" "$dir/haproxy.cfg"
  haproxy -c -q -f "$dir/haproxy.cfg"
  haproxy -f "$dir/haproxy.cfg" >"$dir/haproxy.log" 2>&1 </dev/null &
  echo $! >"$dir/haproxy.pid"
}

# Patroni's view of the cluster (GET /cluster) from the first node whose REST API answers.
cluster_json() {
  local n
  for n in "${nodes[@]}"; do
    curl -sf --max-time 1 "http://127.0.0.1:$(rest_port "$n")/cluster" && return 0
  done
  return 1
}

# The name of the member with role $1 (leader, sync_standby) in state running.
member() {
  local json
  json="$(cluster_json 2>/dev/null)" || return 0
  python3 -c '
import json, sys
role = sys.argv[1]
for m in json.load(sys.stdin).get("members", []):
    if m.get("role") == role and m.get("state") in ("running", "streaming"):
        print(m["name"]); break
' "$1" <<<"$json"
}

status() {
  cluster_json | python3 -c '
import json, sys
for m in json.load(sys.stdin).get("members", []):
    print(m["name"], m.get("role"), m.get("state"), "timeline", m.get("timeline"), "lag", m.get("lag", 0))
'
}

url() { echo "postgres://postgres@127.0.0.1:$write_port/postgres"; }

# A primary with a running synchronous standby, and a write through HAProxy lands on a primary.
healthy() {
  [ -n "$(member leader)" ] && [ -n "$(member sync_standby)" ] &&
    [ "$(psql -X -q -t -A -h 127.0.0.1 -p "$write_port" -U postgres -d postgres \
      -c 'SELECT pg_is_in_recovery()' 2>/dev/null)" = f ]
}

wait_healthy() {
  local timeout="${1:-60}" i
  for i in $(seq 1 $((timeout * 5))); do
    healthy && return 0
    sleep 0.2
  done
  log "no primary with a synchronous standby within ${timeout}s:"
  status >&2 || true
  return 1
}

postmaster_pid() { head -1 "$dir/$1/data/postmaster.pid" 2>/dev/null; }

kill_postgres() {
  local pid
  pid="$(postmaster_pid "$1")"
  [ -n "$pid" ] || {
    log "$1: no postmaster running"
    return 1
  }
  kill -9 "$pid"
  log "$1: postmaster $pid killed"
}

kill_node() {
  local pid
  if pid="$(alive "$dir/$1/patroni.pid")"; then
    kill -9 "$pid"
    log "$1: patroni $pid killed"
  fi
  kill_postgres "$1" || true
}

signal_patroni() {
  local pid
  pid="$(alive "$dir/$1/patroni.pid")" || {
    log "$1: patroni not running"
    return 1
  }
  kill "-$2" "$pid"
  log "$1: SIG$2 to patroni $pid"
}

stop_pid_file() { # file [timeout in tenths of a second]
  local pid i
  pid="$(alive "$1")" || {
    rm -f "$1"
    return 0
  }
  kill -CONT "$pid" 2>/dev/null || true
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 "${2:-100}"); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$1"
}

down() {
  local n pid
  stop_pid_file "$dir/haproxy.pid" 20
  for n in "${nodes[@]}"; do
    stop_pid_file "$dir/$n/patroni.pid" 150
  done
  # A postmaster left behind (its Patroni killed by a test) is stopped at once.
  for n in "${nodes[@]}"; do
    pid="$(postmaster_pid "$n")" || continue
    [ -n "$pid" ] && kill -QUIT "$pid" 2>/dev/null || true
  done
  for n in "${nodes[@]}"; do
    pid="$(postmaster_pid "$n")" || continue
    for _ in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null || true
  done
  stop_pid_file "$dir/etcd.pid" 50
  rm -rf "$dir"
}

up() {
  install
  if [ -e "$dir" ] && ! alive "$dir/etcd.pid" >/dev/null; then
    rm -rf "$dir" # what a previous run left behind
  fi
  mkdir -p "$dir"
  chmod 755 "$dir"
  start_etcd
  # The first node bootstraps the cluster (initdb) alone; the others then clone it.
  start_node pg1
  for _ in $(seq 1 300); do
    [ -n "$(member leader)" ] && break
    sleep 0.2
  done
  start_node pg2
  start_node pg3
  start_haproxy
  wait_healthy 90
  log "up: primary $(member leader), sync standby $(member sync_standby); DATABASE_URL=$(url)"
}

cmd="${1:-}"
shift || true
case "$cmd" in
install) install ;;
up) up ;;
down) down ;;
status) status ;;
url) url ;;
primary) member leader ;;
sync) member sync_standby ;;
wait-healthy) wait_healthy "${1:-60}" ;;
kill-postgres) kill_postgres "$1" ;;
kill-node) kill_node "$1" ;;
start-node) start_node "$1" ;;
freeze) signal_patroni "$1" STOP ;;
thaw) signal_patroni "$1" CONT ;;
kill-primary) kill_postgres "$(member leader)" ;;
*)
  sed -n '2,25p' "$0" >&2
  exit 2
  ;;
esac
