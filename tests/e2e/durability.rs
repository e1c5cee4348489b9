//! Acknowledgements that survive a failover:
//!
//! - every 2xx that accepts work — a single enqueue, a batch, a message, a replay, a recover, a
//!   resend, and the idempotent repeats of the first three — is answered only after a commit
//!   that waited for the synchronous standby. Shown on a throwaway server whose commits must
//!   wait for a standby that never comes (`synchronous_standby_names` naming nobody): each
//!   call's `COMMIT` is seen waiting (`SyncRep`) while the call is still unanswered, and it is
//!   answered once the wait is lifted. A commit that wrote no WAL waits for nobody, so a call
//!   that acknowledged without one is answered during the hold and the test fails;
//! - a result a worker already has (the endpoint answered) while the database is unreachable
//!   is kept and written once it is back: the delivery is not sent again (a plain success,
//!   written in a batch, and a permanent failure, written in its own transaction);
//! - a connection lost during `COMMIT` is 503 with `Retry-After`, never 500 or 2xx, and the
//!   client's retry with its idempotency key settles it: shown with a loopback proxy between
//!   the API and Postgres that closes the connection at that `COMMIT`, once after forwarding
//!   it (the commit happened) and once before (it did not).

use breakwater::throwaway::TempPostgres;
use breakwater::Role;
use breakwater_e2e::proxy::Proxy;
use breakwater_e2e::{wait_until, Behavior, TestApp};
use serde_json::{json, Value};
use sqlx::postgres::PgPoolOptions;
use sqlx::{Connection, PgConnection, PgPool};
use std::future::Future;
use std::time::Duration;
use uuid::Uuid;

/// A standby name no server has: while it is the synchronous standby, every commit that wrote
/// WAL waits.
const ABSENT_STANDBY: &str = "breakwater_absent_standby";

/// `POST {url}` with `key`, `body` and, when given, an `Idempotency-Key`: status and JSON body.
async fn call(
    url: String,
    key: String,
    body: Value,
    idempotency_key: Option<&str>,
) -> (u16, Value) {
    let mut req = reqwest::Client::new()
        .post(url)
        .bearer_auth(key)
        .json(&body);
    if let Some(k) = idempotency_key {
        req = req.header("Idempotency-Key", k);
    }
    let r = req.send().await.expect("an API request");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// Sessions waiting for a synchronous standby at a `COMMIT` (a transaction's, not an
/// autocommit statement's, such as a key's `last_used_at`).
async fn sync_waiters(admin: &PgPool) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep' AND query = 'COMMIT'",
    )
    .fetch_one(admin)
    .await
    .expect("reading pg_stat_activity")
}

async fn set_standby(admin: &PgPool, name: Option<&str>) {
    let stmt = match name {
        Some(n) => format!("ALTER SYSTEM SET synchronous_standby_names = '{n}'"),
        None => "ALTER SYSTEM RESET synchronous_standby_names".into(),
    };
    sqlx::query(&stmt)
        .execute(admin)
        .await
        .expect("ALTER SYSTEM");
    sqlx::query("SELECT pg_reload_conf()")
        .execute(admin)
        .await
        .expect("reload");
}

/// Makes every commit that writes WAL wait for [`ABSENT_STANDBY`], and returns once that is in
/// force: a probe transaction (it creates a table, so its commit writes WAL) is seen
/// waiting. The probe stays waiting until [`release`].
async fn hold_commits(admin: &PgPool, url: &str) -> tokio::task::JoinHandle<()> {
    set_standby(admin, Some(ABSENT_STANDBY)).await;
    for _ in 0..50 {
        let url = url.to_string();
        let probe = tokio::spawn(async move {
            let mut c = PgConnection::connect(&url).await.expect("a probe session");
            let mut tx = c.begin().await.expect("BEGIN");
            sqlx::query("CREATE TEMPORARY TABLE probe (n int)")
                .execute(&mut *tx)
                .await
                .expect("a write");
            tx.commit().await.expect("the probe's COMMIT");
        });
        wait_until(
            Duration::from_secs(10),
            "the probe commits or waits for the standby",
            || async { probe.is_finished() || sync_waiters(admin).await >= 1 },
        )
        .await;
        if !probe.is_finished() {
            return probe;
        }
        // The reload had not reached the server's processes yet: probe again.
    }
    panic!("commits never waited for the absent standby");
}

/// Lifts the hold: every waiting commit completes.
async fn release(admin: &PgPool, probe: tokio::task::JoinHandle<()>) {
    set_standby(admin, None).await;
    probe.await.expect("the probe commits once released");
}

/// Runs `request` while commits wait for the absent standby, and asserts that it is not
/// answered before its commit has waited for it; returns its answer once released.
async fn acknowledged_after_the_standby(
    admin: &PgPool,
    url: &str,
    what: &str,
    request: impl Future<Output = (u16, Value)> + Send + 'static,
) -> (u16, Value) {
    let probe = hold_commits(admin, url).await;
    let answer = tokio::spawn(request);
    wait_until(
        Duration::from_secs(10),
        &format!("{what}: answered or waiting for the standby"),
        || async { answer.is_finished() || sync_waiters(admin).await >= 2 },
    )
    .await;
    let early = answer.is_finished();
    release(admin, probe).await;
    let (status, body) = answer.await.expect("the request task");
    assert!(
        !early,
        "{what}: answered {status} before its commit reached a standby (no WAL?): {body}"
    );
    assert!(
        (200..300).contains(&status),
        "{what}: answered {status}: {body}"
    );
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acknowledgement_waits_for_the_synchronous_standby() {
    let pg = TempPostgres::start().await.expect("a throwaway postgres");
    let admin = PgPoolOptions::new()
        .max_connections(2)
        .connect(&pg.url)
        .await
        .expect("an admin pool");
    // The throwaway server runs with synchronous_commit off (on its command line); a replicated
    // primary runs it on. A database's own setting wins over the command line, for sessions
    // opened from now on: the nodes' and the probes'.
    sqlx::query("ALTER DATABASE postgres SET synchronous_commit = 'on'")
        .execute(&admin)
        .await
        .unwrap();
    breakwater::migrate(&admin).await.expect("migrations");
    let pool = PgPoolOptions::new()
        .max_connections(4)
        .connect(&pg.url)
        .await
        .unwrap();

    // Fixtures, with workers, before any hold: a dead delivery (410) and a delivered one.
    let app = TestApp::spawn(pool.clone()).await;
    app.receiver.set("gone", Behavior::Status(410, None));
    let (_, key) = app.tenant("durable", "default").await;
    let ok = app.channel(&key, "ok").await;
    let gone = app.channel(&key, "gone").await;
    let dead = app.deliver(&key, gone, json!({"n": 1})).await;
    let delivered = app.deliver(&key, ok, json!({"n": 2})).await;
    app.wait_delivery(dead, "dead", Duration::from_secs(10))
        .await;
    app.wait_delivery(delivered, "delivered", Duration::from_secs(10))
        .await;
    app.stop().await;
    // The same database behind an API-only node: nothing else commits during the holds.
    // No ingress limit: its budget is an autocommit write of every request.
    let app = TestApp::spawn_role(pool.clone(), Role::Api, |s| s.api.ingress_per_second = 0).await;
    let api = app.api.clone();
    let url = pg.url.clone();
    let since = (chrono::Utc::now() - chrono::Duration::hours(1)).to_rfc3339();

    let event = json!({"event_type": "durable.event", "payload": {"n": 3}});
    let batch = json!({"deliveries": [
        {"event_type": "durable.event", "payload": {"n": 4}, "idempotency_key": "batch-1"},
        {"event_type": "durable.event", "payload": {"n": 5}, "idempotency_key": "batch-2"},
    ]});
    let message = json!({"event_type": "durable.message", "payload": {"n": 6}});
    let one = format!("{api}/api/v1/channels/{ok}/deliveries");
    let many = format!("{api}/api/v1/channels/{ok}/deliveries/batch");
    let messages = format!("{api}/api/v1/messages");
    // Each path twice where it is idempotent: the first call writes rows, the repeat finds them.
    let cases: Vec<(&str, String, Value, Option<&str>)> = vec![
        ("single enqueue", one.clone(), event.clone(), Some("one-1")),
        ("single enqueue, repeated", one, event, Some("one-1")),
        ("batch", many.clone(), batch.clone(), None),
        ("batch, repeated", many, batch, None),
        ("message", messages.clone(), message.clone(), Some("msg-1")),
        ("message, repeated", messages, message, Some("msg-1")),
        (
            "replay",
            format!("{api}/api/v1/deliveries/{dead}/replay"),
            Value::Null,
            None,
        ),
        (
            "resend",
            format!("{api}/api/v1/deliveries/{delivered}/resend"),
            Value::Null,
            None,
        ),
        (
            "recover",
            format!("{api}/api/v1/channels/{ok}/recover"),
            json!({"since": since, "status": ["delivered"]}),
            None,
        ),
    ];
    let mut answers = Vec::new();
    for (what, path, body, idem) in cases {
        let request = call(path, key.clone(), body, idem);
        let (_, v) = acknowledged_after_the_standby(&admin, &url, what, request).await;
        answers.push((what, v));
    }
    // The repeats were repeats: the same objects, not new ones.
    assert_eq!(answers[1].1["idempotent_replay"], true, "{:?}", answers[1]);
    assert_eq!(answers[0].1["id"], answers[1].1["id"]);
    assert_eq!(answers[3].1["data"][0]["idempotent_replay"], true);
    assert_eq!(answers[2].1["data"], {
        let mut d = answers[3].1["data"].clone();
        for item in d.as_array_mut().unwrap() {
            item["idempotent_replay"] = json!(false);
        }
        d
    });
    assert_eq!(answers[5].1["idempotent_replay"], true, "{:?}", answers[5]);
    assert_eq!(answers[4].1["id"], answers[5].1["id"]);
    app.stop().await;
    admin.close().await;
    pool.close().await;
}

/// The deliveries of `channel` with idempotency key `key`.
async fn with_key(pool: &PgPool, channel: Uuid, key: &str) -> Vec<Uuid> {
    sqlx::query_scalar("SELECT id FROM deliveries WHERE channel_id = $1 AND idempotency_key = $2")
        .bind(channel)
        .bind(key)
        .fetch_all(pool)
        .await
        .expect("reading deliveries")
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_connection_lost_at_commit_answers_503_and_the_retry_with_its_key_settles_it(
    pool: PgPool,
) {
    let (proxy, via_proxy) = Proxy::in_front_of(&pool, 2).await;
    let app = TestApp::spawn_role(via_proxy, Role::Api, |_| {}).await;
    let (_, key) = app.tenant("ambiguous", "default").await;
    let channel = app.channel(&key, "ok").await;
    let url = format!("{}/api/v1/channels/{channel}/deliveries", app.api);
    let body = json!({"event_type": "ambiguous.event", "payload": {"n": 1}});

    for (idem, forward) in [("lost-after-commit", true), ("lost-before-commit", false)] {
        proxy.drop_commit_after(idem, forward);
        let r = reqwest::Client::new()
            .post(&url)
            .bearer_auth(&key)
            .header("Idempotency-Key", idem)
            .json(&body)
            .send()
            .await
            .expect("an API request");
        let status = r.status().as_u16();
        let headers = r.headers().clone();
        let problem: Value = r.json().await.unwrap_or(Value::Null);
        assert_eq!(status, 503, "{idem}: {problem}");
        assert_eq!(headers["retry-after"], "1", "{idem}");
        assert_eq!(
            headers["content-type"], "application/problem+json",
            "{idem}"
        );
        assert_eq!(problem["code"], "commit_outcome_unknown", "{problem}");
        // Whether it committed is what the proxy chose: the forwarded COMMIT lands (the
        // server reads it before the closed socket), the other never does.
        if forward {
            wait_until(
                Duration::from_secs(10),
                "the forwarded COMMIT lands",
                || async { with_key(&pool, channel, idem).await.len() == 1 },
            )
            .await;
        } else {
            assert!(with_key(&pool, channel, idem).await.is_empty(), "{idem}");
        }

        // The client retries with its key: one delivery either way, acknowledged.
        let (status, v) = call(url.clone(), key.clone(), body.clone(), Some(idem)).await;
        assert_eq!(status, 202, "{idem}: {v}");
        assert_eq!(v["idempotent_replay"], forward, "{idem}: {v}");
        let after = with_key(&pool, channel, idem).await;
        assert_eq!(after.len(), 1, "{idem}: {after:?}");
        assert_eq!(v["id"], json!(after[0]), "{idem}");
    }
    assert_eq!(proxy.commits_dropped(), 2);
    app.stop().await;
}

/// How long the database stays cut after the endpoints have answered: far longer than the
/// few quick tries of a result write that would give up (and run its job again).
const CUT_AFTER_ANSWERS: Duration = Duration::from_secs(2);

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_result_known_during_an_outage_is_written_after_it_and_not_sent_again(pool: PgPool) {
    let (proxy, via_proxy) = Proxy::in_front_of(&pool, 2).await;
    // The node (API and workers) reaches Postgres only through the proxy; the test reads it
    // directly.
    let app = TestApp::spawn_with(via_proxy, |_| {}).await;
    let slow = Duration::from_millis(1500);
    app.receiver.set("ok", Behavior::Delay(slow, 200));
    app.receiver.set("gone", Behavior::Delay(slow, 410));
    let (_, key) = app.tenant("kept", "default").await;
    let ok = app.channel(&key, "ok").await;
    let gone = app.channel(&key, "gone").await;
    let delivered = app.deliver(&key, ok, json!({"n": 1})).await;
    let dead = app.deliver(&key, gone, json!({"n": 2})).await;
    let arrived = |ep: &'static str| {
        let receiver = &app.receiver;
        async move { receiver.count(ep) == 1 }
    };
    wait_until(
        Duration::from_secs(10),
        "both requests are in flight",
        || async { arrived("ok").await && arrived("gone").await },
    )
    .await;

    // The database goes away while the endpoints think; they answer during the outage.
    proxy.cut();
    let answered = |ep: &'static str| {
        let receiver = &app.receiver;
        async move { receiver.received(ep).iter().all(|r| r.answered.is_some()) }
    };
    wait_until(
        Duration::from_secs(10),
        "both endpoints answered",
        || async { answered("ok").await && answered("gone").await },
    )
    .await;
    // The fault's script: the outage goes on for a while after the answers.
    tokio::time::sleep(CUT_AFTER_ANSWERS).await;
    proxy.restore();

    let status = |id: Uuid| {
        let pool = &pool;
        async move {
            sqlx::query_scalar::<_, String>("SELECT status FROM deliveries WHERE id = $1")
                .bind(id)
                .fetch_one(pool)
                .await
                .expect("a delivery")
        }
    };
    wait_until(
        Duration::from_secs(20),
        "both results are written",
        || async { status(delivered).await == "delivered" && status(dead).await == "dead" },
    )
    .await;
    assert_eq!(
        app.receiver.count("ok"),
        1,
        "the delivered one was sent again"
    );
    assert_eq!(app.receiver.count("gone"), 1, "the dead one was sent again");
    let attempts: i64 =
        sqlx::query_scalar("SELECT count(*) FROM delivery_attempts WHERE delivery_id = ANY($1)")
            .bind(vec![delivered, dead])
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(attempts, 2, "one attempt each");
    app.stop().await;
}
