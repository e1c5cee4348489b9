#!/usr/bin/env bash
# Delivery search at 1 M rows (issue 33, part 1): the cost of `GET /api/v1/deliveries` for each
# filter combination, measured with EXPLAIN (ANALYZE, BUFFERS) on a scratch database.
#
# Usage: scripts/delivery-search-bench.sh [postgres://user@host:port]   (default: $PG_BASE or
#        postgres://postgres@127.0.0.1:5432). Creates (and at the end drops) the database
#        bw_search_bench, applies every migration with psql, inserts 1 000 000 deliveries
#        (scripts/delivery-search-bench.sql says how they are spread), runs ANALYZE (the test
#        server runs with autovacuum = off, so nothing else would), then explains each query
#        twice and keeps the second run (warm cache). Prints each plan and a summary table.
#        KEEP=1 keeps the database.
set -euo pipefail
cd "$(dirname "$0")/.."
base="${1:-${PG_BASE:-postgres://postgres@127.0.0.1:5432}}"
db=bw_search_bench
psql -qX "$base/postgres" -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null
for f in migrations/*.sql; do
    psql -qX -v ON_ERROR_STOP=1 "$base/$db" -f "$f" >/dev/null
done
psql -X -v ON_ERROR_STOP=1 "$base/$db" -f scripts/delivery-search-bench.sql
if [ "${KEEP:-0}" != 1 ]; then
    psql -qX "$base/postgres" -c "DROP DATABASE $db" >/dev/null
fi
