//! Listing and retention: cursor pagination of a channel's deliveries and of tenants (one
//! helper for every list), the status filter, tenant isolation of the list, bad paging input
//! refused with 422, and the retention pruner deleting old finished rows while leaving new and
//! live ones.

use breakwater_e2e::{count_status, eventually, Behavior, TestApp, OPERATOR_KEY};
use serde_json::{json, Value};
use sqlx::PgPool;
use std::collections::HashSet;
use std::time::Duration;
use uuid::Uuid;

/// The ids of a page's rows, in order.
fn ids(page: &Value) -> Vec<Uuid> {
    page["data"]
        .as_array()
        .unwrap_or_else(|| panic!("a page: {page}"))
        .iter()
        .map(|r| r["id"].as_str().unwrap().parse().unwrap())
        .collect()
}

/// `GET` that must answer 200; returns the body.
async fn ok(app: &TestApp, path: &str, key: &str) -> Value {
    let (s, v) = app.get(path, key).await;
    assert_eq!(s, 200, "GET {path}: {v}");
    v
}

/// `GET` that must answer 422 naming `field`, as problem+json.
async fn invalid(app: &TestApp, path: &str, key: &str, field: &str) {
    let (s, v) = app.get(path, key).await;
    assert_eq!(s, 422, "GET {path}: {v}");
    assert_eq!(v["field"], json!(field), "GET {path}: {v}");
}

/// Every page of `path` (which has no query yet) at `limit` rows: each page's ids.
async fn all_pages(app: &TestApp, path: &str, key: &str, limit: u32) -> Vec<Vec<Uuid>> {
    let mut pages = Vec::new();
    let mut after: Option<String> = None;
    // Bounded: a list that never ends fails the test instead of hanging it.
    for _ in 0..100 {
        let sep = if path.contains('?') { '&' } else { '?' };
        let url = match &after {
            None => format!("{path}{sep}limit={limit}"),
            Some(c) => format!("{path}{sep}limit={limit}&after={c}"),
        };
        let page = ok(app, &url, key).await;
        pages.push(ids(&page));
        match page["next_cursor"].as_str() {
            Some(c) => after = Some(c.to_string()),
            None => return pages,
        }
    }
    panic!("{path} did not end within 100 pages");
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn fifteen_deliveries_of_one_batch_page_as_10_then_5_then_the_end(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (key, ch) = app.tenant_with_channel("orders").await;
    let batch = app.deliver_many(&key, ch, 15).await;

    // One transaction: all 15 share one created_at, so only the id orders them.
    let distinct: i64 = sqlx::query_scalar(
        "SELECT count(DISTINCT created_at) FROM deliveries WHERE channel_id = $1",
    )
    .bind(ch)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(distinct, 1, "the batch shares one created_at");

    let pages = all_pages(&app, &format!("/api/v1/channels/{ch}/deliveries"), &key, 10).await;
    let sizes: Vec<usize> = pages.iter().map(Vec::len).collect();
    assert_eq!(sizes, [10, 5], "10, then 5, then the end");
    let seen: Vec<Uuid> = pages.concat();
    let unique: HashSet<Uuid> = seen.iter().copied().collect();
    assert_eq!(unique.len(), 15, "no duplicates: {seen:?}");
    assert_eq!(
        unique,
        batch.iter().copied().collect::<HashSet<_>>(),
        "no gaps"
    );
    // Newest first: within the shared timestamp, by id descending.
    let mut expected = batch.clone();
    expected.sort();
    expected.reverse();
    assert_eq!(seen, expected);

    // A list row carries no payload (read the delivery for it).
    let page = ok(
        &app,
        &format!("/api/v1/channels/{ch}/deliveries?limit=1"),
        &key,
    )
    .await;
    assert!(page["data"][0].get("payload").is_none(), "{page}");
    assert_eq!(page["data"][0]["channel_id"], json!(ch));
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn status_filter_and_bad_paging_input_are_checked(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (key, ch) = app.tenant_with_channel("orders").await;
    let delivered = app.deliver_many(&key, ch, 3).await;
    assert!(
        eventually(Duration::from_secs(20), || async {
            app.receiver.count("orders") >= 3 && count_status(&app.pool, ch, "delivered").await == 3
        })
        .await,
        "the first three are delivered"
    );
    app.pause(&key, ch).await;
    let held = app.deliver_many(&key, ch, 2).await;

    let path = format!("/api/v1/channels/{ch}/deliveries");
    let all = ok(&app, &path, &key).await;
    assert_eq!(all["next_cursor"], Value::Null);
    let all = ids(&all);
    assert_eq!(all.len(), 5);
    // Newest first: the two held ones (a later transaction) come before the first three.
    assert_eq!(
        all[..2].iter().copied().collect::<HashSet<_>>(),
        held.iter().copied().collect()
    );
    let page = ok(&app, &format!("{path}?status=delivered"), &key).await;
    assert_eq!(
        ids(&page).into_iter().collect::<HashSet<_>>(),
        delivered.iter().copied().collect()
    );
    assert!(page["data"]
        .as_array()
        .unwrap()
        .iter()
        .all(|d| d["status"] == "delivered"));
    let page = ok(&app, &format!("{path}?status=paused"), &key).await;
    assert_eq!(
        ids(&page).into_iter().collect::<HashSet<_>>(),
        held.iter().copied().collect()
    );
    // The filter pages like the rest: one per page.
    let pages = all_pages(&app, &format!("{path}?status=delivered"), &key, 1).await;
    assert_eq!(pages.iter().map(Vec::len).collect::<Vec<_>>(), [1, 1, 1]);
    assert!(ok(&app, &format!("{path}?status=dead"), &key).await["data"]
        .as_array()
        .unwrap()
        .is_empty());

    // Bad input: 422 naming the field, never a 500.
    invalid(&app, &format!("{path}?status=melted"), &key, "status").await;
    invalid(&app, &format!("{path}?status="), &key, "status").await;
    invalid(&app, &format!("{path}?limit=0"), &key, "limit").await;
    invalid(&app, &format!("{path}?limit=1001"), &key, "limit").await;
    invalid(&app, &format!("{path}?limit=many"), &key, "limit").await;
    for bad in [
        "garbage",
        "AAAA",
        "dGhpcyBpcyBub3QgYSBjdXJzb3I",
        "%00",
        "____",
    ] {
        invalid(&app, &format!("{path}?after={bad}"), &key, "after").await;
    }
    // A cursor of another list (the channel list's, keyed by id) is not this list's.
    let (_, other) = app.tenant("other", "default").await;
    app.channel(&other, "a").await;
    app.channel(&other, "b").await;
    let channels = ok(&app, "/api/v1/channels?limit=1", &other).await;
    let foreign = channels["next_cursor"].as_str().unwrap();
    invalid(&app, &format!("{path}?after={foreign}"), &key, "after").await;
    // Every list route shares the rules.
    invalid(&app, "/api/v1/audit?limit=0", &key, "limit").await;
    invalid(&app, "/api/v1/admin/audit?after=x", OPERATOR_KEY, "after").await;
    invalid(
        &app,
        "/api/v1/admin/channels?limit=5000",
        OPERATOR_KEY,
        "limit",
    )
    .await;
    invalid(&app, "/api/v1/tenants?after=x", OPERATOR_KEY, "after").await;
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn another_tenants_channel_deliveries_are_404(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (_, a) = app.tenant("acme", "default").await;
    let (_, b) = app.tenant("globex", "default").await;
    let ch_a = app.channel(&a, "a").await;
    let ch_b = app.channel(&b, "b").await;
    app.deliver_many(&a, ch_a, 3).await;

    let (s, v) = app
        .get(&format!("/api/v1/channels/{ch_a}/deliveries"), &b)
        .await;
    assert_eq!(s, 404, "{v}");
    let (s2, v2) = app
        .get(
            &format!("/api/v1/channels/{}/deliveries", Uuid::now_v7()),
            &b,
        )
        .await;
    assert_eq!(s2, 404, "{v2}");
    assert_eq!(
        v["detail"], v2["detail"],
        "same answer as a missing channel"
    );
    // Filters and cursors do not get past it either.
    let (s, _) = app
        .get(
            &format!("/api/v1/channels/{ch_a}/deliveries?status=pending&limit=1"),
            &b,
        )
        .await;
    assert_eq!(s, 404);
    let own = ok(&app, &format!("/api/v1/channels/{ch_b}/deliveries"), &b).await;
    assert_eq!(own, json!({ "data": [], "next_cursor": null }));
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn operator_lists_tenants_in_creation_order_by_cursor(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let mut created = Vec::new();
    for i in 0..5 {
        created.push(app.tenant(&format!("t{i}"), "default").await.0);
    }
    let pages = all_pages(&app, "/api/v1/tenants", OPERATOR_KEY, 2).await;
    assert_eq!(pages.iter().map(Vec::len).collect::<Vec<_>>(), [2, 2, 1]);
    assert_eq!(pages.concat(), created, "creation order, each once");

    let page = ok(&app, "/api/v1/tenants?limit=1000", OPERATOR_KEY).await;
    let text = page.to_string();
    assert!(
        !text.contains("alert_secret") && !text.contains("api_key") && !text.contains("whsec_"),
        "no secret in the list: {page}"
    );
    assert_eq!(page["data"][0]["name"], "t0");
    assert_eq!(page["data"][0]["tier"], "default");

    // Operator only.
    let (_, key) = app.tenant("nosy", "default").await;
    let (s, _) = app.get("/api/v1/tenants", &key).await;
    assert_eq!(s, 403);
    app.stop().await;
}

/// Counts rows of `table` whose `col` is one of `ids`.
async fn count_in(pool: &PgPool, table: &str, col: &str, ids: &[Uuid]) -> i64 {
    sqlx::query_scalar(&format!(
        "SELECT count(*) FROM {table} WHERE {col} = ANY($1)"
    ))
    .bind(ids)
    .fetch_one(pool)
    .await
    .unwrap()
}

/// Counts jobs of the deliveries `ids`, live or finished.
async fn jobs_of(pool: &PgPool, ids: &[Uuid]) -> i64 {
    let keys: Vec<String> = ids.iter().map(|id| format!("delivery:{id}")).collect();
    sqlx::query_scalar("SELECT count(*) FROM jobs WHERE unique_key = ANY($1)")
        .bind(&keys)
        .fetch_one(pool)
        .await
        .unwrap()
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn retention_prunes_old_finished_rows_and_leaves_new_and_live_ones(pool: PgPool) {
    // The pruner runs every 200 ms in batches of 2 (so a run takes several batches); an attempt
    // may take up to 30 s, so the slow endpoint's delivery stays in flight throughout.
    let app = TestApp::spawn_with(pool, |s| {
        s.retention.deliveries_days = 30;
        s.retention.interval_ms = 200;
        s.retention.batch_size = 2;
        s.retention.batch_pause_ms = 0;
        s.worker.request_timeout_ms = 30_000;
    })
    .await;
    let (key, ok_ch) = app.tenant_with_channel("ok").await;
    let held_ch = app.channel(&key, "held").await;
    let slow_ch = app.channel(&key, "slow").await;
    app.receiver
        .set("slow", Behavior::Delay(Duration::from_secs(25), 200));

    // Six delivered, each with its attempt and its completed job.
    let done = app.deliver_many(&key, ok_ch, 6).await;
    assert!(
        eventually(Duration::from_secs(20), || async {
            sqlx::query_scalar::<_, i64>(
                "SELECT count(*) FROM jobs WHERE unique_key = ANY($1) AND state = 'completed'",
            )
            .bind(
                done.iter()
                    .map(|id| format!("delivery:{id}"))
                    .collect::<Vec<_>>(),
            )
            .fetch_one(&app.pool)
            .await
            .unwrap()
                == 6
        })
        .await,
        "six delivered and their jobs completed"
    );
    assert_eq!(
        count_in(&app.pool, "delivery_attempts", "delivery_id", &done).await,
        6
    );
    // Two parked behind a pause (live: pending work, however old).
    app.pause(&key, held_ch).await;
    let held = app.deliver_many(&key, held_ch, 2).await;
    // One in flight: its job executing while the endpoint takes its time.
    let slow = app.deliver(&key, slow_ch, json!({ "slow": true })).await;
    assert!(
        eventually(Duration::from_secs(20), || async {
            sqlx::query_scalar::<_, String>("SELECT state FROM jobs WHERE unique_key = $1")
                .bind(format!("delivery:{slow}"))
                .fetch_one(&app.pool)
                .await
                .unwrap()
                == "executing"
        })
        .await,
        "the slow delivery is in flight"
    );

    // Age everything but one delivered row past the 30 days, in one transaction: five of the
    // delivered rows with their jobs, the held ones, the one in flight.
    let (old_done, new_done) = done.split_at(5);
    let aged: Vec<Uuid> = old_done
        .iter()
        .chain(&held)
        .chain(std::iter::once(&slow))
        .copied()
        .collect();
    let mut tx = app.pool.begin().await.unwrap();
    sqlx::query(
        "UPDATE deliveries SET created_at = now() - interval '40 days',
                               updated_at = now() - interval '40 days'
         WHERE id = ANY($1)",
    )
    .bind(&aged)
    .execute(&mut *tx)
    .await
    .unwrap();
    let old_keys: Vec<String> = old_done.iter().map(|id| format!("delivery:{id}")).collect();
    sqlx::query(
        "UPDATE jobs SET finalized_at = now() - interval '40 days', created_at = now() - interval '40 days'
         WHERE unique_key = ANY($1)",
    )
    .bind(&old_keys)
    .execute(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();

    // The pruner deletes the five old delivered ones, their attempts and their jobs.
    assert!(
        eventually(Duration::from_secs(20), || async {
            count_in(&app.pool, "deliveries", "id", old_done).await == 0
        })
        .await,
        "old finished deliveries are pruned"
    );
    assert_eq!(
        count_in(&app.pool, "delivery_attempts", "delivery_id", old_done).await,
        0
    );
    assert!(
        eventually(Duration::from_secs(10), || async {
            jobs_of(&app.pool, old_done).await == 0
        })
        .await,
        "their finished jobs are pruned"
    );

    // The new delivered one stays, with its attempt and job.
    assert_eq!(count_in(&app.pool, "deliveries", "id", new_done).await, 1);
    assert_eq!(
        count_in(&app.pool, "delivery_attempts", "delivery_id", new_done).await,
        1
    );
    assert_eq!(jobs_of(&app.pool, new_done).await, 1);
    // The live ones stay, however old: parked with their waiting jobs, and the one in flight
    // (still executing now, after the pruner ran).
    assert_eq!(count_in(&app.pool, "deliveries", "id", &held).await, 2);
    assert_eq!(jobs_of(&app.pool, &held).await, 2);
    assert_eq!(app.delivery_status(held[0]).await, "paused");
    let slow_job: String = sqlx::query_scalar("SELECT state FROM jobs WHERE unique_key = $1")
        .bind(format!("delivery:{slow}"))
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(slow_job, "executing", "the slow attempt is still in flight");
    assert_eq!(app.delivery_status(slow).await, "delivering");
    // The audit log is kept (the pause's row).
    let audit: i64 =
        sqlx::query_scalar("SELECT count(*) FROM audit_log WHERE action = 'channel.paused'")
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(audit, 1);
    app.stop().await;
}
