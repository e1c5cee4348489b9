//! Ordered channels: `ordering: "fifo"` sends a channel's deliveries one at a
//! time in the order accepted, a failing one blocking those behind it, on every node; a blocked
//! fifo channel holds up no other channel.

use breakwater::receiver::Behavior;
use breakwater::Role;
use breakwater_e2e::{
    count_status, enqueue_batches, spawn_workers, stop_all, test_settings, wait_until, TestApp,
};
use serde_json::{json, Value};
use sqlx::PgPool;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use uuid::Uuid;

/// What [`OrderReceiver`] saw.
#[derive(Default)]
struct Seen {
    /// `webhook-id` of every request, in arrival order, with the status answered.
    arrivals: Vec<(Uuid, u16)>,
    /// Requests answered 500 so far, per delivery id.
    failed: HashMap<Uuid, usize>,
}

/// A receiver on loopback that records the order requests arrive in and how many it holds at
/// once, and answers 500 to the first `fail_times` requests of one delivery (set once its id is
/// known), 200 to every other.
#[derive(Clone)]
struct OrderReceiver {
    url: String,
    seen: Arc<Mutex<Seen>>,
    failing: Arc<Mutex<Option<(Uuid, usize)>>>,
    in_flight: Arc<AtomicUsize>,
    most_in_flight: Arc<AtomicUsize>,
}

impl OrderReceiver {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let me = OrderReceiver {
            url: format!("http://{}/hook", listener.local_addr().unwrap()),
            seen: Arc::default(),
            failing: Arc::default(),
            in_flight: Arc::default(),
            most_in_flight: Arc::default(),
        };
        let r = me.clone();
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post(move |headers: axum::http::HeaderMap| {
                let r = r.clone();
                async move { r.answer(&headers).await }
            }),
        );
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        me
    }

    async fn answer(&self, headers: &axum::http::HeaderMap) -> axum::http::StatusCode {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_in_flight.fetch_max(now, Ordering::SeqCst);
        let id: Uuid = headers
            .get("webhook-id")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
            .unwrap_or_default();
        // A moment inside the request, so that overlapping sends would be seen overlapping.
        tokio::time::sleep(Duration::from_millis(2)).await;
        let status = {
            let mut seen = self.seen.lock().unwrap();
            let fail = match *self.failing.lock().unwrap() {
                Some((f, times)) if f == id => {
                    let n = seen.failed.entry(id).or_default();
                    *n += 1;
                    *n <= times
                }
                _ => false,
            };
            let status = if fail { 500 } else { 200 };
            seen.arrivals.push((id, status));
            status
        };
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        axum::http::StatusCode::from_u16(status).unwrap()
    }

    /// Distinct deliveries answered 200 so far.
    fn delivered(&self) -> usize {
        let seen = self.seen.lock().unwrap();
        let mut ids: Vec<Uuid> = seen
            .arrivals
            .iter()
            .filter(|a| a.1 == 200)
            .map(|a| a.0)
            .collect();
        ids.sort();
        ids.dedup();
        ids.len()
    }

    /// The deliveries in the order they arrived, repeats of the one just before collapsed (its
    /// retries, or a re-send after a lost result): for a fifo channel, exactly the order they
    /// were accepted in.
    fn arrival_order(&self) -> Vec<Uuid> {
        let mut order: Vec<Uuid> = self
            .seen
            .lock()
            .unwrap()
            .arrivals
            .iter()
            .map(|a| a.0)
            .collect();
        order.dedup();
        order
    }

    fn requests_of(&self, id: Uuid) -> usize {
        let seen = self.seen.lock().unwrap();
        seen.arrivals.iter().filter(|a| a.0 == id).count()
    }
}

/// Sends 1 000 deliveries to a channel with `ordering` through three worker nodes (and an API
/// node that runs none), the receiver failing the first two attempts of delivery 400; returns
/// the receiver once all 1 000 are delivered, and the accepted ids in order.
async fn thousand_through_three_nodes(pool: PgPool, ordering: &str) -> (OrderReceiver, Vec<Uuid>) {
    const N: usize = 1_000;
    const FAILING: usize = 400;
    let app = TestApp::spawn_role(pool.clone(), Role::Api, |_| {}).await;
    let receiver = OrderReceiver::start().await;
    let (_, key) = app.tenant("acme", "default").await;
    let channel = app
        .channel_to(&key, &receiver.url, json!({ "ordering": ordering }))
        .await;
    // Every delivery is accepted (in order, in batches) before any node sends, so the failing
    // one is known in time.
    let ids = enqueue_batches(&app.http, &app.api, &key, channel, N, "test.order").await;
    *receiver.failing.lock().unwrap() = Some((ids[FAILING], 2));
    let mut s = test_settings();
    s.worker.pool_default = 8;
    let nodes = spawn_workers(&pool, 3, &s);
    wait_until(
        Duration::from_secs(240),
        "all 1 000 deliveries are delivered",
        || async { receiver.delivered() == N },
    )
    .await;
    stop_all(nodes);
    app.stop().await;
    (receiver, ids)
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_fifo_channel_delivers_1000_in_order_on_three_nodes_through_a_failing_delivery(
    pool: PgPool,
) {
    let (receiver, ids) = thousand_through_three_nodes(pool, "fifo").await;
    // The failing delivery was tried three times (two 500s, then delivered) ...
    assert_eq!(receiver.requests_of(ids[400]), 3);
    // ... and nothing behind it arrived before it was delivered: every request came in the
    // order accepted, one at a time.
    let order = receiver.arrival_order();
    let first_wrong = order.iter().zip(&ids).position(|(got, want)| got != want);
    assert!(
        order.len() == ids.len() && first_wrong.is_none(),
        "out of order: {} arrivals for {} deliveries, first difference at {first_wrong:?}",
        order.len(),
        ids.len()
    );
    assert_eq!(receiver.most_in_flight.load(Ordering::SeqCst), 1);
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_blocked_fifo_channel_does_not_hold_up_another_tenants_channel(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    // Tenant A's fifo channel: its endpoint fails everything; the circuit never opens and the
    // head has 100 attempts, so the head keeps retrying and its 500 followers stay blocked.
    let (_, key_a) = app.tenant("a", "default").await;
    app.receiver.set("stuck", Behavior::Status(503, None));
    let stuck = app
        .channel_with(
            &key_a,
            "stuck",
            json!({
                "ordering": "fifo",
                "failure_threshold": 10000,
                "retry_policy": { "max_attempts": 100 }
            }),
        )
        .await;
    let ids_a = app.deliver_many(&key_a, stuck, 500).await;
    wait_until(
        Duration::from_secs(20),
        "the head of the fifo channel is retried",
        || async { app.receiver.count("stuck") >= 2 },
    )
    .await;

    // Tenant B, same tier: its deliveries all go while A stays blocked.
    let (_, key_b) = app.tenant("b", "default").await;
    let healthy = app.channel(&key_b, "healthy").await;
    app.deliver_many(&key_b, healthy, 100).await;
    app.wait_deliveries(healthy, "delivered", 100, Duration::from_secs(30))
        .await;

    // All the while, A's endpoint saw its head and nothing behind it, and nothing of A was
    // delivered.
    let a_ids: Vec<Option<String>> = app
        .receiver
        .received("stuck")
        .into_iter()
        .map(|r| r.webhook_id)
        .collect();
    assert!(a_ids.len() >= 2);
    assert!(
        a_ids
            .iter()
            .all(|id| id.as_deref() == Some(&ids_a[0].to_string())),
        "only the head of the fifo channel was sent: {a_ids:?}"
    );
    assert_eq!(count_status(&pool, stuck, "delivered").await, 0);
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn ordering_is_set_at_creation_shown_on_reads_and_changed_by_patch(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (_, key) = app.tenant("acme", "default").await;
    let plain = app
        .create_channel(&key, &app.receiver.url("a"), json!({}))
        .await;
    assert_eq!(plain["ordering"], "none");
    let fifo = app
        .create_channel(&key, &app.receiver.url("b"), json!({ "ordering": "fifo" }))
        .await;
    assert_eq!(fifo["ordering"], "fifo");
    let id: Uuid = fifo["id"].as_str().unwrap().parse().unwrap();
    let (s, v) = app.get(&format!("/api/v1/channels/{id}"), &key).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["ordering"], "fifo");
    assert_eq!(v["concurrency"]["ceiling"], 1);

    let (s, v) = app
        .patch_channel(&key, id, json!({ "ordering": "none" }))
        .await;
    assert_eq!((s, &v["ordering"]), (200, &Value::from("none")), "{v}");
    let fifo_flag = |id: Uuid| {
        let pool = app.pool.clone();
        async move {
            sqlx::query_scalar::<_, bool>("SELECT fifo FROM job_groups WHERE group_id = $1")
                .bind(id)
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };
    assert!(!fifo_flag(id).await, "the job group follows the channel");
    let (s, _) = app
        .patch_channel(&key, id, json!({ "ordering": "fifo" }))
        .await;
    assert_eq!(s, 200);
    assert!(fifo_flag(id).await);

    // Bad values are a 422 naming the field, at creation and in a patch.
    for bad in [json!("lifo"), json!(null), json!(1)] {
        let (s, v) = app
            .post(
                "/api/v1/channels",
                &key,
                &json!({ "url": app.receiver.url("c"), "ordering": bad }),
            )
            .await;
        assert_eq!(s, 422, "{bad}: {v}");
        assert!(v["detail"].as_str().unwrap().contains("ordering"), "{v}");
        let (s, v) = app
            .patch_channel(&key, id, json!({ "ordering": bad }))
            .await;
        assert_eq!(s, 422, "{bad}: {v}");
        assert!(v["detail"].as_str().unwrap().contains("ordering"), "{v}");
    }
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_delivery_resent_to_a_fifo_channel_goes_to_the_back(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (_, key) = app.tenant("acme", "default").await;
    let ch = app
        .channel_with(&key, "seq", json!({ "ordering": "fifo" }))
        .await;
    let first = app.deliver(&key, ch, json!({ "n": 0 })).await;
    app.wait_delivery(first, "delivered", Duration::from_secs(20))
        .await;
    // Paused, the channel takes two more, then the first again: the resend is accepted last.
    app.pause(&key, ch).await;
    let second = app.deliver(&key, ch, json!({ "n": 1 })).await;
    let third = app.deliver(&key, ch, json!({ "n": 2 })).await;
    let (s, v) = app
        .post(
            &format!("/api/v1/deliveries/{first}/resend"),
            &key,
            &json!({}),
        )
        .await;
    assert_eq!(s, 202, "{v}");
    app.resume(&key, ch).await;
    app.wait_received("seq", 4, Duration::from_secs(20)).await;
    let order: Vec<String> = app
        .receiver
        .received("seq")
        .into_iter()
        .filter_map(|r| r.webhook_id)
        .collect();
    let want: Vec<String> = [first, second, third, first]
        .iter()
        .map(|id| id.to_string())
        .collect();
    assert_eq!(order, want);
    app.stop().await;
}
