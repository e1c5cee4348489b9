//! The tenant portal in a real browser (headless Chromium over WebDriver, the set-up of
//! [`crate::browser`]): opened with a portal session's link, it creates a channel, sends a test
//! event and shows it delivered, pauses and resumes the channel, replays a dead delivery, and a
//! read session is refused a write.
//!
//! Screenshots go to the test artifacts directory ([`crate::browser::artifacts_dir`]):
//! `portal-channels.png` (the channel list), `portal-channel.png` (one channel and its settings),
//! `portal-deliveries.png` (the test send's result, the deliveries and a delivery's attempts),
//! `portal-circuit-open.png` (an open circuit in plain words) and `portal-read-only.png` (a read
//! session). Copies are committed under `docs/portal/`.

use crate::browser::{artifacts_dir, click, js, start_driver};
use breakwater_e2e::{wait_until, Behavior, TestApp};
use fantoccini::{Client, Locator};
use serde_json::{json, Value};
use sqlx::PgPool;
use std::time::Duration;
use uuid::Uuid;

/// Replaces the text of input `css` with `text`.
async fn type_into(c: &Client, css: &str, text: &str) {
    let e = c.find(Locator::Css(css)).await.unwrap();
    e.clear().await.unwrap();
    e.send_keys(text).await.unwrap();
}

/// `document.querySelector(css)?.dataset[key]` in the page.
async fn data(c: &Client, css: &str, key: &str) -> Value {
    js(
        c,
        &format!(
            "const e = document.querySelector({}); return e ? (e.dataset[{}] ?? null) : null;",
            json!(css),
            json!(key)
        ),
    )
    .await
}

async fn wait_data(c: &Client, css: &str, key: &str, want: &str, within: Duration) {
    wait_until(within, &format!("{css} has data-{key}={want}"), || async {
        data(c, css, key).await == json!(want)
    })
    .await;
}

async fn shot(c: &Client, name: &str) {
    let path = artifacts_dir().join(name);
    std::fs::write(&path, c.screenshot().await.unwrap()).unwrap();
    println!("portal screenshot: {}", path.display());
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn the_portal_manages_a_tenants_channels_in_a_browser(pool: PgPool) {
    // A long cooldown keeps a failing channel open (not probing) while the page shows it.
    let app = TestApp::spawn_with(pool.clone(), |s| {
        s.circuit.cooldown_ms = 120_000;
        s.circuit.max_cooldown_ms = 120_000;
    })
    .await;
    let (driver, c) = start_driver().await;
    let (tenant, key) = app.tenant("acme", "default").await;
    let (_, other_key) = app.tenant("globex", "default").await;
    let foreign = app
        .named_channel(&other_key, "globex-secret", json!({}))
        .await;
    let (session, token) = app.portal_session(tenant, "manage").await;

    // The link opens the page; the token leaves the address bar at once.
    c.goto(&format!("{}/portal#token={token}", app.api))
        .await
        .unwrap();
    wait_until(
        Duration::from_secs(10),
        "the portal shows the tenant",
        || async {
            js(
                &c,
                "return document.getElementById('tenant-name').textContent",
            )
            .await
                == json!("acme")
        },
    )
    .await;
    let url = c.current_url().await.unwrap();
    assert!(!url.as_str().contains(&token), "{url}");
    assert!(!url.as_str().contains('#'), "{url}");
    assert_eq!(
        js(
            &c,
            "return sessionStorage.getItem('breakwater.portalToken')"
        )
        .await,
        json!(token)
    );
    assert_eq!(
        js(&c, "return document.getElementById('scope').textContent").await,
        json!("manage")
    );

    // Create a channel from the page.
    click(&c, "#new-channel").await;
    type_into(&c, "#create-url", &app.receiver.url("portal-orders")).await;
    type_into(&c, "#create-name", "orders").await;
    type_into(&c, "#create-rate-limit", "50/s").await;
    click(&c, "#create-submit").await;
    wait_until(Duration::from_secs(10), "the new channel is listed", || async {
        js(
            &c,
            "return [...document.querySelectorAll('#channels tbody tr')].some(r => r.textContent.includes('orders'))",
        )
        .await
            == json!(true)
    })
    .await;
    let secret = js(
        &c,
        "return document.getElementById('created-secret-value').textContent",
    )
    .await;
    let secret = secret.as_str().unwrap();
    assert!(secret.starts_with("whsec_"), "{secret}");
    app.receiver.set_secret("portal-orders", secret);
    let (channel, rate_limit): (Uuid, Option<String>) = sqlx::query_as(
        "SELECT id, rate_limit FROM channels WHERE tenant_id = $1 AND name = 'orders'",
    )
    .bind(tenant)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(rate_limit.as_deref(), Some("50/s"));
    // Another tenant's channel is not listed.
    let listed = js(&c, "return document.getElementById('channels').textContent").await;
    assert!(!listed.as_str().unwrap().contains("globex"), "{listed}");
    assert!(!listed.as_str().unwrap().contains(&foreign.to_string()));
    shot(&c, "portal-channels.png").await;

    // Open it and send a test event: the page shows it delivered.
    click(
        &c,
        &format!("button.open-channel[data-channel-id=\"{channel}\"]"),
    )
    .await;
    wait_data(&c, "#ch-state", "state", "closed", Duration::from_secs(10)).await;
    type_into(&c, "#test-event-type", "invoice.paid").await;
    type_into(&c, "#test-payload", r#"{"invoice": 42}"#).await;
    click(&c, "#test-send").await;
    wait_data(
        &c,
        "#test-result",
        "status",
        "delivered",
        Duration::from_secs(20),
    )
    .await;
    let got = app.receiver.received("portal-orders");
    assert_eq!(got.len(), 1);
    assert_eq!(
        serde_json::from_slice::<Value>(&got[0].body).unwrap()["data"],
        json!({ "invoice": 42 })
    );
    assert_eq!(
        got[0].signature_ok,
        Some(true),
        "the receiver verified the signature"
    );

    // Pause and resume from the page, audited as the session.
    click(&c, "#pause").await;
    wait_data(&c, "#ch-state", "state", "paused", Duration::from_secs(10)).await;
    assert_eq!(app.circuit_state(channel).await, "paused");
    click(&c, "#resume").await;
    wait_data(&c, "#ch-state", "state", "closed", Duration::from_secs(10)).await;
    assert_eq!(app.circuit_state(channel).await, "closed");
    let actors: Vec<(String, String)> = sqlx::query_as(
        "SELECT action, actor FROM audit_log WHERE channel_id = $1 AND action IN ('channel.created', 'channel.paused', 'channel.resumed') ORDER BY id",
    )
    .bind(channel)
    .fetch_all(&pool)
    .await
    .unwrap();
    let actor = format!("portal:{session}");
    assert_eq!(
        actors,
        [
            ("channel.created".to_string(), actor.clone()),
            ("channel.paused".to_string(), actor.clone()),
            ("channel.resumed".to_string(), actor.clone()),
        ]
    );

    // A delivery goes dead (the endpoint refuses it for good); fixed, it is replayed from the page.
    app.receiver
        .set("portal-orders", Behavior::Status(410, None));
    type_into(&c, "#test-event-type", "invoice.failed").await;
    click(&c, "#test-send").await;
    wait_data(
        &c,
        "#test-result",
        "status",
        "dead",
        Duration::from_secs(20),
    )
    .await;
    let dead: Uuid = data(&c, "#test-result", "deliveryId")
        .await
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    app.receiver
        .set("portal-orders", Behavior::Status(200, None));
    // Only dead deliveries: the filter narrows the list.
    c.find(Locator::Css("#f-status"))
        .await
        .unwrap()
        .select_by_value("dead")
        .await
        .unwrap();
    click(&c, "#f-apply").await;
    wait_until(Duration::from_secs(10), "only the dead delivery is listed", || async {
        js(&c, "return [...document.querySelectorAll('#deliveries tbody tr')].map(r => r.dataset.deliveryId)").await
            == json!([dead.to_string()])
    })
    .await;
    click(
        &c,
        &format!("button.show-attempts[data-delivery-id=\"{dead}\"]"),
    )
    .await;
    wait_until(
        Duration::from_secs(10),
        "the attempts are shown",
        || async {
            js(
                &c,
                "return document.querySelector('#attempts tbody').textContent",
            )
            .await
            .as_str()
            .is_some_and(|t| t.contains("HTTP 410") && t.contains("ms"))
        },
    )
    .await;
    click(&c, &format!("button.replay[data-delivery-id=\"{dead}\"]")).await;
    app.wait_delivery(dead, "delivered", Duration::from_secs(20))
        .await;
    let replayed: String = sqlx::query_scalar(
        "SELECT actor FROM audit_log WHERE action = 'delivery.replayed' AND details->>'delivery_id' = $1",
    )
    .bind(dead.to_string())
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(replayed, actor);
    // Back to every delivery, with the attempts of the first test send open.
    c.find(Locator::Css("#f-status"))
        .await
        .unwrap()
        .select_by_value("")
        .await
        .unwrap();
    click(&c, "#f-apply").await;
    wait_until(Duration::from_secs(10), "both deliveries are listed, delivered", || async {
        js(&c, "return [...document.querySelectorAll('#deliveries tbody tr')].map(r => r.dataset.status)").await
            == json!(["delivered", "delivered"])
    })
    .await;
    js(&c, "window.scrollTo(0, 0); return null").await;
    shot(&c, "portal-channel.png").await;
    js(
        &c,
        "document.getElementById('deliveries').scrollIntoView(); return null",
    )
    .await;
    shot(&c, "portal-deliveries.png").await;

    // A channel whose endpoint keeps failing: the page says in plain words why it stopped, the
    // last failure, and when the next test delivery is due.
    let failing = app.named_channel(&key, "portal-broken", json!({})).await;
    app.receiver
        .set("portal-broken", Behavior::Status(503, None));
    app.deliver_many(&key, failing, 8).await;
    app.wait_circuit(failing, "open", Duration::from_secs(30))
        .await;
    click(&c, "#back").await;
    click(
        &c,
        &format!("button.open-channel[data-channel-id=\"{failing}\"]"),
    )
    .await;
    wait_data(&c, "#ch-state", "state", "open", Duration::from_secs(10)).await;
    let words = js(
        &c,
        "return document.getElementById('ch-state-text').textContent",
    )
    .await;
    let words = words.as_str().unwrap();
    for part in [
        "Sending stopped",
        "failed",
        "503",
        "next test delivery is due",
        "waiting",
    ] {
        assert!(words.contains(part), "{part:?} in {words:?}");
    }
    js(&c, "window.scrollTo(0, 0); return null").await;
    shot(&c, "portal-circuit-open.png").await;

    // Edit it from the page (name, event types, max in flight), then delete it.
    type_into(&c, "#edit-name", "broken-renamed").await;
    type_into(&c, "#edit-event-types", "invoice.paid, invoice.failed").await;
    type_into(&c, "#edit-max-in-flight", "3").await;
    click(&c, "#edit-submit").await;
    wait_until(Duration::from_secs(10), "the edit is saved", || async {
        let row: (Option<String>, Option<Vec<String>>, Option<i32>) =
            sqlx::query_as("SELECT name, event_types, max_in_flight FROM channels WHERE id = $1")
                .bind(failing)
                .fetch_one(&pool)
                .await
                .unwrap();
        row == (
            Some("broken-renamed".into()),
            Some(vec!["invoice.failed".into(), "invoice.paid".into()]),
            Some(3),
        )
    })
    .await;
    click(&c, "#delete-channel").await;
    c.accept_alert()
        .await
        .expect("the page asks before deleting");
    wait_until(
        Duration::from_secs(10),
        "the channel is deleted",
        || async {
            let deleted: bool =
                sqlx::query_scalar("SELECT deleted_at IS NOT NULL FROM channels WHERE id = $1")
                    .bind(failing)
                    .fetch_one(&pool)
                    .await
                    .unwrap();
            deleted
        },
    )
    .await;
    wait_until(Duration::from_secs(10), "the list no longer shows it", || async {
        !js(&c, "return document.getElementById('channels-view').hidden").await.as_bool().unwrap_or(true)
            && js(&c, &format!("return !!document.querySelector('#channels tr[data-channel-id=\"{failing}\"]')")).await
                == json!(false)
    })
    .await;

    // A read session: the page says so, its write buttons are off, and the API refuses a write
    // made from the page.
    let (_, read) = app.portal_session(tenant, "read").await;
    c.goto(&format!("{}/portal#token={read}", app.api))
        .await
        .unwrap();
    wait_until(Duration::from_secs(10), "the read-only banner", || async {
        js(&c, "return !document.getElementById('readonly').hidden && document.getElementById('scope').textContent").await
            == json!("read-only")
    })
    .await;
    assert_eq!(
        js(&c, "return document.getElementById('new-channel').disabled").await,
        json!(true)
    );
    let refused = c
        .execute_async(
            &format!(
                "const done = arguments[arguments.length - 1];
                 window.__portal.api('POST', '/api/v1/channels/{channel}/pause')
                   .then(() => done('accepted'), (e) => {{ window.__portal.fail(e); done(e.status + ' ' + e.message); }});"
            ),
            vec![],
        )
        .await
        .unwrap();
    let refused = refused.as_str().unwrap();
    assert!(
        refused.starts_with("403 ") && refused.contains("read scope"),
        "{refused}"
    );
    wait_until(Duration::from_secs(5), "the refusal is shown", || async {
        js(&c, "return document.getElementById('toast').textContent")
            .await
            .as_str()
            .is_some_and(|t| t.contains("Refused (403)"))
    })
    .await;
    assert_eq!(app.circuit_state(channel).await, "closed");
    click(
        &c,
        &format!("button.open-channel[data-channel-id=\"{channel}\"]"),
    )
    .await;
    wait_data(&c, "#ch-state", "state", "closed", Duration::from_secs(10)).await;
    assert_eq!(
        js(&c, "return [...document.querySelectorAll('#channel-view button.write')].every(b => b.disabled)").await,
        json!(true),
        "every write button of a read session is off"
    );
    shot(&c, "portal-read-only.png").await;

    // Nothing of the token reached the audit log.
    let everything: String =
        sqlx::query_scalar("SELECT string_agg(to_jsonb(a)::text, ' ') FROM audit_log a")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(!everything.contains(&token) && !everything.contains(&read));
    let _ = key;

    c.close().await.unwrap();
    drop(driver);
    app.stop().await;
}
