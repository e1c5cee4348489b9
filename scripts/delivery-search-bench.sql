-- Delivery search at 1 M rows (issue 33, part 1). Run by scripts/delivery-search-bench.sh on a
-- scratch database with every migration applied; see BENCHMARKS.md for the figures.
--
-- The data: 10 tenants with 20 channels each; 1 000 000 deliveries over 30 days (created_at
-- grows with the row number), 60 % of them the "big" tenant's (the one every query asks
-- about), the rest spread over the other nine. Event types: 50 common ones (`type.0` …
-- `type.49`, 2 % each) and `rare.event` (0.1 %). Status: delivered 92 %, dead 3 %, pending 2 %,
-- cancelled 1 %, failed 1 %, paused 1 %. One in five of the big tenant's deliveries belongs to a
-- message fanned out to two channels (100 000 messages). random() is seeded: the same data on
-- every run.
\set ON_ERROR_STOP on
SET client_min_messages = warning;
SELECT setseed(0.33);

CREATE TEMP TABLE t_map AS
    SELECT n, gen_random_uuid() AS id FROM generate_series(1, 10) n;
INSERT INTO tenants (id, name, alert_secret)
    SELECT id, 'bench-' || n, 'whsec_bench' FROM t_map;
CREATE TEMP TABLE c_map AS
    SELECT t.n AS tenant_n, c AS n, t.id AS tenant_id, gen_random_uuid() AS id
    FROM t_map t, generate_series(0, 19) c;
INSERT INTO channels (id, tenant_id, url, signing_secret)
    SELECT id, tenant_id, 'https://example.com/' || tenant_n || '/' || n, 'whsec_bench'
    FROM c_map;
CREATE TEMP TABLE m_map AS
    SELECT n, gen_random_uuid() AS id FROM generate_series(0, 100000) n;
INSERT INTO messages (id, tenant_id, event_type, payload)
    SELECT m.id, t.id, 'type.1', '{}' FROM m_map m, t_map t WHERE t.n = 1;

\timing on
\echo 'inserting 1 000 000 deliveries (all indexes in place)'
INSERT INTO deliveries (id, tenant_id, channel_id, event_type, payload, message_id, status,
                        attempts, created_at, updated_at, delivered_at)
SELECT gen_random_uuid(), c.tenant_id, c.id, g.event_type,
       CASE WHEN g.msg IS NULL THEN '{"n":' || g.i || '}' END, m.id, g.status,
       1, g.at, g.at, CASE WHEN g.status = 'delivered' THEN g.at END
FROM (
    SELECT i,
           CASE WHEN i % 10 < 6 THEN 1 ELSE 2 + i % 9 END AS tenant_n,
           (i / 7) % 20 AS channel_n,
           CASE WHEN r1 < 0.001 THEN 'rare.event' ELSE 'type.' || floor(r1 * 50)::int END
               AS event_type,
           CASE WHEN r2 < 0.92 THEN 'delivered' WHEN r2 < 0.95 THEN 'dead'
                WHEN r2 < 0.97 THEN 'pending' WHEN r2 < 0.98 THEN 'cancelled'
                WHEN r2 < 0.99 THEN 'failed' ELSE 'paused' END AS status,
           CASE WHEN i % 5 = 0 THEN i / 10 END AS msg,
           timestamptz '2026-11-05 00:00:00Z' + i * interval '2592 milliseconds' AS at
    FROM (SELECT i, random() AS r1, random() AS r2 FROM generate_series(1, 1000000) i) s
) g
JOIN c_map c ON c.tenant_n = g.tenant_n AND c.n = g.channel_n
LEFT JOIN m_map m ON m.n = g.msg;
\echo 'ANALYZE (autovacuum is off on this server)'
VACUUM ANALYZE deliveries;
\echo 'building the two search indexes again, alone, to time them'
DROP INDEX deliveries_tenant_list_idx, deliveries_tenant_failed_idx;
CREATE INDEX deliveries_tenant_list_idx ON deliveries (tenant_id, created_at, id);
CREATE INDEX deliveries_tenant_failed_idx ON deliveries (tenant_id, created_at, id)
    WHERE status IN ('dead', 'cancelled');
\timing off
ANALYZE deliveries;

\echo 'index sizes'
SELECT indexrelid::regclass AS index, pg_size_pretty(pg_relation_size(indexrelid)) AS size
FROM pg_index WHERE indrelid = 'deliveries'::regclass ORDER BY 1::text;
SELECT pg_size_pretty(pg_relation_size('deliveries')) AS heap,
       (SELECT count(*) FROM deliveries) AS rows;

-- The parameters: the big tenant, one of its channels, one of its messages, a cursor in the
-- middle of its list, a day in the middle of the month.
SELECT t.id AS tenant FROM t_map t WHERE n = 1 \gset
SELECT t.id AS small_tenant FROM t_map t WHERE n = 2 \gset
SELECT c.id AS channel FROM c_map c WHERE tenant_n = 1 AND n = 3 \gset
SELECT m.id AS message FROM m_map m WHERE n = 50000 \gset
SELECT created_at AS cursor_at, id AS cursor_id FROM deliveries
    WHERE tenant_id = :'tenant' ORDER BY created_at, id OFFSET 300000 LIMIT 1 \gset

-- Each query is the statement `deliveries::search` builds (crates/core/src/deliveries/read.rs)
-- for a page of 100 (LIMIT 101: one more, to know whether there is a next page), with the
-- values inlined.
CREATE TEMP TABLE bench (n int, name text, q text);
INSERT INTO bench VALUES
 (1, 'no filter (first page)', ''),
 (2, 'status=dead (3 %)', $$ AND status = 'dead'$$),
 (3, 'status=paused (1 %)', $$ AND status = 'paused'$$),
 (4, 'event_type=type.3 (2 %)', $$ AND event_type = 'type.3'$$),
 (5, 'event_type=rare.event (0.1 %)', $$ AND event_type = 'rare.event'$$),
 (6, 'channel_id', format(' AND channel_id = %L', :'channel')),
 (7, 'message_id', format(' AND message_id = %L', :'message')),
 (8, 'since+until (one day)', $$ AND created_at >= '2026-11-20' AND created_at < '2026-11-21'$$),
 (9, 'status=dead + event_type=type.3', $$ AND status = 'dead' AND event_type = 'type.3'$$),
 (10, 'status=dead + event_type=rare.event', $$ AND status = 'dead' AND event_type = 'rare.event'$$),
 (11, 'channel_id + status=dead', format($$ AND status = 'dead' AND channel_id = %L$$, :'channel')),
 (12, 'channel_id + event_type=type.3', format($$ AND event_type = 'type.3' AND channel_id = %L$$, :'channel')),
 (13, 'status=dead + one day', $$ AND status = 'dead' AND created_at >= '2026-11-20' AND created_at < '2026-11-21'$$),
 (14, 'event_type=type.3 + one day', $$ AND event_type = 'type.3' AND created_at >= '2026-11-20' AND created_at < '2026-11-21'$$),
 (15, 'no filter, cursor mid-list (page 3 000)', format(' AND (created_at, id) < (%L, %L)', :'cursor_at', :'cursor_id')),
 (16, 'status=dead, cursor mid-list', format($$ AND status = 'dead' AND (created_at, id) < (%L, %L)$$, :'cursor_at', :'cursor_id'));

CREATE FUNCTION pg_temp.search_sql(tenant uuid, conds text) RETURNS text LANGUAGE sql AS $$
    SELECT format('SELECT id, channel_id, event_type, status, attempts, idempotency_key,
                          last_error, created_at, updated_at, delivered_at
                   FROM deliveries WHERE tenant_id = %L%s
                   ORDER BY created_at DESC, id DESC LIMIT 101', tenant, conds)
$$;

-- The text plan of the second of two runs (the first warms the cache).
CREATE FUNCTION pg_temp.plan(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE line text;
BEGIN
    EXECUTE 'EXPLAIN (ANALYZE, BUFFERS) ' || q;
    FOR line IN EXECUTE 'EXPLAIN (ANALYZE, BUFFERS) ' || q LOOP
        RETURN NEXT line;
    END LOOP;
END $$;

-- The summary of the second of two runs: execution ms, rows, buffers, and each plan node with
-- its index.
CREATE FUNCTION pg_temp.summary(q text, OUT ms numeric, OUT rows bigint, OUT buffers bigint,
                                OUT shape text) LANGUAGE plpgsql AS $$
DECLARE p json;
BEGIN
    EXECUTE 'EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ' || q INTO p;
    EXECUTE 'EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ' || q INTO p;
    ms := round((p->0->>'Execution Time')::numeric, 2);
    rows := (p->0->'Plan'->>'Actual Rows')::bigint;
    buffers := (p->0->'Plan'->>'Shared Hit Blocks')::bigint
             + (p->0->'Plan'->>'Shared Read Blocks')::bigint;
    WITH RECURSIVE nodes(node, depth) AS (
        SELECT p->0->'Plan', 0
        UNION ALL
        SELECT c, depth + 1 FROM nodes, json_array_elements(node->'Plans') c
    )
    SELECT string_agg(node->>'Node Type'
                      || coalesce(' ' || (node->>'Index Name'), ''), ' > ' ORDER BY depth)
    INTO shape FROM nodes;
END $$;

\echo 'plans (big tenant, 600 000 deliveries)'
SELECT b.n, b.name, pg_temp.plan(pg_temp.search_sql(:'tenant', b.q)) FROM bench b ORDER BY b.n;
\echo 'plan (small tenant, 44 444 deliveries, no filter)'
SELECT pg_temp.plan(pg_temp.search_sql(:'small_tenant', ''));

\echo 'summary (big tenant; ms = Execution Time of the second run)'
SELECT b.n, b.name, s.ms, s.rows, s.buffers, s.shape
FROM bench b, pg_temp.summary(pg_temp.search_sql(:'tenant', b.q)) s ORDER BY b.n;

-- What the two indexes cost a write: 100 000 more deliveries inserted, then 100 000 status
-- changes (a delivery's every attempt is one; not HOT, see the migration), with the indexes and
-- without them, each in a transaction rolled back so both runs see the same table.
\echo 'write cost: with the two search indexes'
\timing on
BEGIN;
INSERT INTO deliveries (id, tenant_id, channel_id, event_type, payload, status, created_at)
SELECT gen_random_uuid(), c.tenant_id, c.id, 'type.' || i % 50, '{}', 'pending',
       timestamptz '2026-12-06' + i * interval '1 millisecond'
FROM generate_series(1, 100000) i JOIN c_map c ON c.tenant_n = 1 AND c.n = i % 20;
UPDATE deliveries SET status = 'delivering', updated_at = now()
WHERE created_at >= '2026-12-06';
ROLLBACK;
\timing off
DROP INDEX deliveries_tenant_list_idx, deliveries_tenant_failed_idx;
\echo 'write cost: without them'
\timing on
BEGIN;
INSERT INTO deliveries (id, tenant_id, channel_id, event_type, payload, status, created_at)
SELECT gen_random_uuid(), c.tenant_id, c.id, 'type.' || i % 50, '{}', 'pending',
       timestamptz '2026-12-06' + i * interval '1 millisecond'
FROM generate_series(1, 100000) i JOIN c_map c ON c.tenant_n = 1 AND c.n = i % 20;
UPDATE deliveries SET status = 'delivering', updated_at = now()
WHERE created_at >= '2026-12-06';
ROLLBACK;
\timing off
