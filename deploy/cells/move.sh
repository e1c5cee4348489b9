#!/usr/bin/env bash
# Moves one tenant from one cell to another (issue 34, docs/cells.md "Moving a tenant"): Postgres
# logical replication with row filters (PG 15) copies the tenant's rows while it keeps working,
# then a cut-over of a few seconds moves its traffic.
#
#   deploy/cells/move.sh TENANT_ID FROM_CELL TO_CELL
#
# Steps (each printed as it runs):
#   1. Checks: the source runs wal_level=logical; the tenant is live in the source and absent
#      from the target.
#   2. Publications on the source, filtered to the tenant: its rows of tenants, api_keys,
#      channels, messages, deliveries, event_types, portal_sessions, tenant_delivery_usage,
#      tenant_alert_events, and of its channels in channel_event_state and circuit_alert_state
#      (inserts, updates, deletes); audit_log and delivery_attempts as inserts only (both are
#      append-only). Those tables get REPLICA IDENTITY FULL for the move (a row filter on
#      updates must read columns of the replica identity). Not copied: the queue (jobs,
#      job_groups, job_gates, queue_nodes: rebuilt in step 8), host circuits and failures and the
#      ingress limit state (per cell), per-cell settings (circuit_defaults, alert_policy).
#   3. A subscription on the target; waits until the initial copy of every table is done.
#   4. Cut-over: the router answers the tenant's credentials 503 `tenant_moving` (Retry-After:
#      1; clients retry with their Idempotency-Key).
#   5. The tenant's live channels are paused on the source (operator API, audited "moving to
#      cell TO"): nothing new starts; waits until none of its jobs is executing.
#   6. Waits until the target holds exactly the source's rows of the tenant (deliveries by id,
#      status and update time, messages, attempts, channels), twice a second apart (a request
#      let through just before the hold may still be committing), then drops the subscription.
#   7. The channel list is checked unchanged since step 2 (a channel created meanwhile would
#      lack its attempts and alert state: the move stops, the tenant stays on the source).
#   8. `breakwater doctor --repair` on the target: every waiting delivery of the tenant gets a
#      fresh job (the queue is not copied).
#   9. The router sends the tenant's credentials to the target (router.sh move), and the
#      channels paused in step 5 are resumed there.
#  10. The tenant is deleted on the source (operator API: its parked jobs are cancelled there),
#      the publications are dropped and the replica identities restored.
# A failure before step 9 leaves the tenant working on the source (steps 4 and 5 undone by
# hand: `router.sh move FROM_CELL <digests>`, resume the channels; drop the subscription and
# publications). From step 9 on, the tenant works on the target.
#
# Environment: FROM_DATABASE_URL, TO_DATABASE_URL (postgres:// URLs of the two cells' primaries;
# the target's server must reach the source at FROM_DATABASE_URL, or at FROM_CONNINFO if set),
# BREAKWATER_OPERATOR_KEY, MOVE_BIN (default `breakwater`), and the router's CELLS_CONF,
# CELLS_PORT, CELLS_DIR (deploy/cells/router.sh). Needs psql and curl.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
tenant="${1:?usage: move.sh TENANT_ID FROM_CELL TO_CELL}"
from="${2:?from cell}"
to="${3:?to cell}"
src="${FROM_DATABASE_URL:?FROM_DATABASE_URL}"
dst="${TO_DATABASE_URL:?TO_DATABASE_URL}"
conninfo="${FROM_CONNINFO:-$src}"
key="${BREAKWATER_OPERATOR_KEY:?BREAKWATER_OPERATOR_KEY}"
bin="${MOVE_BIN:-breakwater}"
router="$("$here/router.sh" url)"
[[ "$tenant" =~ ^[0-9a-f-]{36}$ ]] || {
  echo "move: $tenant is not a tenant id" >&2
  exit 2
}
name="bw_move_${tenant//-/_}"
started=$(date +%s%3N)

say() { printf 'move: %6d ms  %s\n' "$(($(date +%s%3N) - started))" "$*" >&2; }
q() { psql -X -q -v ON_ERROR_STOP=1 -t -A -d "$1" -c "$2"; }

# An operator call through the router on `cell`: `op cell METHOD path`; fails on a non-2xx.
op() {
  curl -sS -f -o /dev/null -X "$2" -H "Authorization: Bearer $key" -H "Breakwater-Cell: $1" \
    "$router$3"
}

# The digests (hex) of the tenant's unrevoked keys and live portal sessions on the source.
digests() {
  q "$src" "SELECT encode(key_hash, 'hex') FROM api_keys WHERE tenant_id = '$tenant' AND revoked_at IS NULL
            UNION ALL
            SELECT encode(token_hash, 'hex') FROM portal_sessions
            WHERE tenant_id = '$tenant' AND revoked_at IS NULL AND expires_at > now()"
}

# 1.
[ "$(q "$src" "SHOW wal_level")" = logical ] || {
  echo "move: the source runs wal_level=$(q "$src" "SHOW wal_level"); logical replication needs wal_level=logical (a restart)" >&2
  exit 1
}
[ "$(q "$src" "SELECT count(*) FROM tenants WHERE id = '$tenant' AND deleted_at IS NULL")" = 1 ] || {
  echo "move: no live tenant $tenant on the source" >&2
  exit 1
}
[ "$(q "$dst" "SELECT count(*) FROM tenants WHERE id = '$tenant'")" = 0 ] || {
  echo "move: tenant $tenant already exists on the target" >&2
  exit 1
}
say "moving tenant $tenant from cell $from to cell $to"

# 2.
channels="$(q "$src" "SELECT coalesce(string_agg(quote_literal(id), ',' ORDER BY id), 'NULL') FROM channels WHERE tenant_id = '$tenant'")"
by_tenant=(api_keys channels messages deliveries event_types portal_sessions tenant_delivery_usage tenant_alert_events)
by_channel=(channel_event_state circuit_alert_state)
tables=""
for t in "${by_tenant[@]}"; do tables+=", $t WHERE (tenant_id = '$tenant')"; done
for t in "${by_channel[@]}"; do tables+=", $t WHERE (channel_id IN ($channels))"; done
identity=""
for t in "${by_tenant[@]}" "${by_channel[@]}"; do identity+="ALTER TABLE $t REPLICA IDENTITY FULL; "; done
q "$src" "$identity
  CREATE PUBLICATION $name FOR TABLE tenants WHERE (id = '$tenant')$tables;
  CREATE PUBLICATION ${name}_log FOR TABLE audit_log WHERE (tenant_id = '$tenant'),
    delivery_attempts WHERE (channel_id IN ($channels)) WITH (publish = 'insert')"
tables_n=$((1 + ${#by_tenant[@]} + ${#by_channel[@]} + 2))
say "published the tenant's rows ($tables_n tables; channels $channels)"

# 3.
q "$dst" "CREATE SUBSCRIPTION $name CONNECTION '$conninfo' PUBLICATION $name, ${name}_log"
for i in $(seq 1 600); do
  [ "$(q "$dst" "SELECT count(*) FILTER (WHERE r.srsubstate <> 'r') || '/' || count(*) FROM pg_subscription_rel r JOIN pg_subscription s ON s.oid = r.srsubid WHERE s.subname = '$name'")" = "0/$tables_n" ] && break
  [ "$i" = 600 ] && {
    echo "move: the initial copy did not finish in 5 minutes" >&2
    exit 1
  }
  sleep 0.5
done
say "initial copy done; streaming"

# 4.
mapfile -t held < <(digests)
"$here/router.sh" hold "${held[@]}"
say "cut-over: intake held (${#held[@]} credentials answer 503 tenant_moving)"

# 5.
mapfile -t paused < <(q "$src" "SELECT id FROM channels WHERE tenant_id = '$tenant' AND deleted_at IS NULL AND circuit_state <> 'paused' ORDER BY id")
for c in "${paused[@]}"; do
  op "$from" POST "/api/v1/admin/channels/$c/pause?reason=moving+to+cell+$to"
done
executing_sql="SELECT count(*) FROM jobs j JOIN deliveries d ON d.id = (j.args->>'delivery_id')::uuid
               WHERE j.state = 'executing' AND j.kind = 'deliver' AND d.tenant_id = '$tenant'"
for i in $(seq 1 600); do
  [ "$(q "$src" "$executing_sql")" = 0 ] && break
  [ "$i" = 600 ] && {
    echo "move: the tenant's deliveries still executing on the source after 60 s" >&2
    exit 1
  }
  sleep 0.1
done
say "paused ${#paused[@]} channels on the source; nothing of the tenant executing"

# 6.
state_sql="SELECT (SELECT md5(coalesce(string_agg(id::text || status || updated_at::text, ',' ORDER BY id), '')) FROM deliveries WHERE tenant_id = '$tenant')
           || (SELECT count(*) FROM messages WHERE tenant_id = '$tenant')
           || '/' || (SELECT count(*) FROM delivery_attempts WHERE channel_id IN ($channels))
           || '/' || (SELECT md5(coalesce(string_agg(id::text || circuit_state, ',' ORDER BY id), '')) FROM channels WHERE tenant_id = '$tenant')"
# Twice, a second apart: a request the router let through just before the hold may still be
# committing on the source (the API's requests take milliseconds; the grace is generous).
same=0
for i in $(seq 1 600); do
  if [ "$(q "$src" "$state_sql")" = "$(q "$dst" "$state_sql")" ]; then
    same=$((same + 1))
    [ "$same" = 2 ] && break
    sleep 1
    continue
  fi
  same=0
  [ "$i" = 600 ] && {
    echo "move: the target did not catch up within 60 s" >&2
    exit 1
  }
  sleep 0.1
done
q "$dst" "DROP SUBSCRIPTION $name"
say "the target holds the source's rows of the tenant: $(q "$dst" "SELECT count(*) || ' deliveries (' || count(*) FILTER (WHERE status = 'delivered') || ' delivered)' FROM deliveries WHERE tenant_id = '$tenant'"); subscription dropped"

# 7.
[ "$(q "$src" "SELECT coalesce(string_agg(quote_literal(id), ',' ORDER BY id), 'NULL') FROM channels WHERE tenant_id = '$tenant'")" = "$channels" ] || {
  echo "move: the tenant's channels changed during the move; it stays on the source (undo steps 4-5)" >&2
  exit 1
}

# 8.
DATABASE_URL="$dst" "$bin" doctor --repair >/dev/null || {
  echo "move: breakwater doctor --repair on the target left findings" >&2
  exit 1
}
say "jobs rebuilt on the target for $(q "$dst" "SELECT count(*) FROM deliveries WHERE tenant_id = '$tenant' AND status NOT IN ('delivered', 'dead', 'cancelled')") waiting deliveries"

# 9.
"$here/router.sh" move "$to" "${held[@]}"
for c in "${paused[@]}"; do
  op "$to" POST "/api/v1/admin/channels/$c/resume?reason=moved+from+cell+$from"
done
say "routed to cell $to; ${#paused[@]} channels resumed there"

# 10.
op "$from" DELETE "/api/v1/tenants/$tenant"
restore=""
for t in "${by_tenant[@]}" "${by_channel[@]}"; do restore+="ALTER TABLE $t REPLICA IDENTITY DEFAULT; "; done
q "$src" "DROP PUBLICATION $name; DROP PUBLICATION ${name}_log; $restore"
say "done: the tenant is deleted on cell $from and lives on cell $to"
