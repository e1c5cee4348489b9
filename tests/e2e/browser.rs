//! The admin page in a real browser: headless Chromium (Debian's `chromium`) driven over
//! WebDriver (`chromium-driver`) against a running node. `.ci/run` installs both; run locally
//! without them, this test fails and says how to install them.
//!
//! The screenshot goes to `$BREAKWATER_TEST_ARTIFACTS` if set, else
//! `$CARGO_TARGET_DIR/test-artifacts`, else `target/test-artifacts` in the workspace:
//! `admin.png` (a dead channel open on the live page) and `admin-closed.png` (after the operator
//! closed it).
//!
//! The tenant portal's browser test (`portal_browser`) reuses this module's WebDriver set-up.

use breakwater_e2e::browser::admin_key_prompt;
pub(crate) use breakwater_e2e::browser::{click, js, start_driver};
use breakwater_e2e::{eventually, host_of, wait_until, Behavior, TestApp, OPERATOR_KEY};
use fantoccini::elements::Element;
use fantoccini::{Client, Locator};
use serde_json::json;
use sqlx::PgPool;
use std::path::{Path, PathBuf};
use std::time::Duration;
use uuid::Uuid;

/// Where test artifacts go (created if missing).
pub(crate) fn artifacts_dir() -> PathBuf {
    let dir = std::env::var_os("BREAKWATER_TEST_ARTIFACTS")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("CARGO_TARGET_DIR").map(|d| PathBuf::from(d).join("test-artifacts"))
        })
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../target/test-artifacts")
                .to_path_buf()
        });
    std::fs::create_dir_all(&dir).expect("create the test artifacts directory");
    dir
}

/// The state the page shows for `channel` (`None` if the row is not there).
async fn shown_state(c: &Client, channel: Uuid) -> Option<String> {
    js(
        c,
        &format!(
            "const r = document.querySelector('#channels tr[data-channel-id=\"{channel}\"]'); \
             return r ? r.querySelector('.state').dataset.state : null;"
        ),
    )
    .await
    .as_str()
    .map(str::to_string)
}

async fn wait_shown(c: &Client, channel: Uuid, state: &str, within: Duration) {
    wait_until(
        within,
        &format!("the page shows channel {channel} as {state}"),
        || async { shown_state(c, channel).await.as_deref() == Some(state) },
    )
    .await;
}

/// Waits (up to 5 s) for the confirmation dialog to open; returns it.
async fn confirmation(c: &Client) -> Element {
    c.wait()
        .at_most(Duration::from_secs(5))
        .for_element(Locator::Css("dialog#confirm[open]"))
        .await
        .expect("a confirmation dialog opens")
}

/// Clicks `action` on `channel`'s row, checks the confirmation dialog names the channel, types
/// `reason` and confirms.
async fn act(c: &Client, channel: Uuid, action: &str, name: &str, reason: &str) {
    click(
        c,
        &format!("#channels tr[data-channel-id=\"{channel}\"] button[data-action=\"{action}\"]"),
    )
    .await;
    let text = confirmation(c).await.text().await.unwrap();
    assert!(text.contains(name), "the dialog names the channel: {text}");
    c.find(Locator::Css("#confirm-reason"))
        .await
        .unwrap()
        .send_keys(reason)
        .await
        .unwrap();
    click(c, "#confirm-ok").await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn admin_page_shows_a_dead_channel_open_live_and_its_buttons_work(pool: PgPool) {
    // A long cooldown keeps the dead channel open (not probing) while the page is looked at.
    let app = TestApp::spawn_with(pool.clone(), |s| {
        s.circuit.cooldown_ms = 120_000;
        s.circuit.max_cooldown_ms = 120_000;
    })
    .await;
    let (driver, c) = start_driver().await;

    let (_, acme) = app.tenant("acme", "default").await;
    let (_, globex) = app.tenant("globex", "high").await;
    let (_, initech) = app.tenant("initech", "bulk").await;
    let orders = app.named_channel(&acme, "acme-orders", json!({})).await;
    let legacy = app.named_channel(&globex, "globex-legacy", json!({})).await;
    let billing = app
        .named_channel(&globex, "globex-billing", json!({}))
        .await;
    let reports = app
        .named_channel(&initech, "initech-reports", json!({}))
        .await;
    app.receiver
        .set("globex-legacy", Behavior::Status(503, None));
    app.deliver_many(&acme, orders, 40).await;
    app.deliver_many(&globex, billing, 25).await;
    app.deliver_many(&initech, reports, 10).await;

    // The page loads without a key and asks for one.
    let input = admin_key_prompt(&c, &format!("{}/admin", app.api)).await;
    assert!(input.is_displayed().await.unwrap());
    assert_eq!(
        js(&c, "return document.getElementById('board').hidden").await,
        json!(true),
        "no data before the key is given"
    );
    input.send_keys(OPERATOR_KEY).await.unwrap();
    click(&c, "#key-submit").await;
    wait_shown(&c, legacy, "closed", Duration::from_secs(10)).await;
    // The key is in the tab's session storage, not in the URL.
    let url = c.current_url().await.unwrap();
    assert!(!url.as_str().contains(OPERATOR_KEY), "{url}");
    assert_eq!(
        js(
            &c,
            "return sessionStorage.getItem('breakwater.operatorKey')"
        )
        .await,
        json!(OPERATOR_KEY)
    );
    assert_eq!(
        js(
            &c,
            "return document.querySelectorAll('#queues tbody tr').length"
        )
        .await,
        json!(5),
        "every queue is listed"
    );

    // Mark this page load: a reload would lose the mark.
    js(&c, "window.__breakwaterPageLoad = 'first'; return null").await;

    // The endpoint is dead: the circuit opens, and the open page shows it without a reload.
    app.deliver_many(&globex, legacy, 30).await;
    wait_shown(&c, legacy, "open", Duration::from_secs(30)).await;
    assert_eq!(
        js(&c, "return window.__breakwaterPageLoad || null").await,
        json!("first"),
        "the page updated in place, without a reload"
    );
    assert_eq!(app.circuit_state(legacy).await, "open");
    assert!(
        eventually(Duration::from_secs(10), || async {
            js(
                &c,
                "return document.getElementById('transitions').textContent",
            )
            .await
            .as_str()
            .is_some_and(|t| t.contains("globex-legacy") && t.contains("circuit_breaker"))
        })
        .await,
        "the transition is listed from the audit log"
    );
    // Let the parked count and the summary catch up (the page shows what the queue summary
    // says, and the summary is stable while the circuit stays open), then keep the picture.
    wait_until(
        Duration::from_secs(10),
        "the page's parked count is the queue summary's",
        || async {
            let (_, q) = app.get("/api/v1/admin/queues", OPERATOR_KEY).await;
            let parked: i64 = q["data"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|q| {
                    q["queue"]
                        .as_str()
                        .is_some_and(|n| n.starts_with("deliveries"))
                })
                .map(|q| q["parked"].as_i64().unwrap_or(0))
                .sum();
            let shown = js(&c, "return document.getElementById('n-parked').textContent").await;
            parked > 0 && shown == json!(parked.to_string())
        },
    )
    .await;
    let shot = artifacts_dir().join("admin.png");
    std::fs::write(&shot, c.screenshot().await.unwrap()).unwrap();
    println!("admin page screenshot: {}", shot.display());

    // Cancelling changes nothing.
    click(
        &c,
        &format!("#channels tr[data-channel-id=\"{orders}\"] button[data-action=\"open\"]"),
    )
    .await;
    click(&c, "#confirm-cancel").await;
    // The dialog closed without sending anything: the action would have been sent on confirm.
    wait_until(
        Duration::from_secs(5),
        "the confirm dialog closed",
        || async { js(&c, "return document.getElementById('confirm').open").await == json!(false) },
    )
    .await;
    assert_eq!(app.circuit_state(orders).await, "closed");

    // The endpoint is fixed; the operator closes the circuit from the page.
    app.receiver
        .set("globex-legacy", Behavior::Status(200, None));
    act(&c, legacy, "close", "globex-legacy", "endpoint fixed").await;
    wait_shown(&c, legacy, "closed", Duration::from_secs(10)).await;
    assert_eq!(app.circuit_state(legacy).await, "closed");
    let audit: (String, Option<String>) = sqlx::query_as(
        "SELECT actor, reason FROM audit_log WHERE channel_id = $1 AND action = 'circuit.forced_closed'",
    )
    .bind(legacy)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(audit, ("operator".into(), Some("endpoint fixed".into())));
    // The released backlog is delivered.
    assert!(
        eventually(Duration::from_secs(30), || async {
            let (live, delivered): (i64, i64) = sqlx::query_as(
                "SELECT count(*) FILTER (WHERE status NOT IN ('delivered', 'dead')),
                        count(*) FILTER (WHERE status = 'delivered')
                 FROM deliveries WHERE channel_id = $1",
            )
            .bind(legacy)
            .fetch_one(&pool)
            .await
            .unwrap();
            live == 0 && delivered >= 25
        })
        .await,
        "the released backlog was delivered"
    );

    // Pause and resume another channel from the page.
    act(&c, reports, "pause", "initech-reports", "maintenance").await;
    wait_shown(&c, reports, "paused", Duration::from_secs(10)).await;
    assert_eq!(app.circuit_state(reports).await, "paused");
    act(&c, reports, "resume", "initech-reports", "done").await;
    wait_shown(&c, reports, "closed", Duration::from_secs(10)).await;
    assert_eq!(app.circuit_state(reports).await, "closed");

    // The host circuits table: every channel here shares the receiver's host. Force it open
    // from the page, see it live, and close it again.
    let host = host_of(&pool, orders).await;
    let host_shown = |state: &'static str| {
        let c = &c;
        let host = host.clone();
        async move {
            js(
                c,
                &format!(
                    "const r = document.querySelector('#hosts tr[data-host-key=\"{host}\"]'); \
                     return r ? r.dataset.state : null;"
                ),
            )
            .await
                == json!(state)
        }
    };
    assert!(
        eventually(Duration::from_secs(10), || host_shown("closed")).await,
        "the host is listed"
    );
    click(
        &c,
        &format!("#hosts tr[data-host-key=\"{host}\"] button[data-action=\"open\"]"),
    )
    .await;
    assert!(confirmation(&c).await.text().await.unwrap().contains(&host));
    click(&c, "#confirm-ok").await;
    assert!(
        eventually(Duration::from_secs(10), || host_shown("open")).await,
        "the page shows the host open"
    );
    click(
        &c,
        &format!("#hosts tr[data-host-key=\"{host}\"] button[data-action=\"close\"]"),
    )
    .await;
    confirmation(&c).await;
    click(&c, "#confirm-ok").await;
    assert!(
        eventually(Duration::from_secs(10), || host_shown("closed")).await,
        "the page shows the host closed again"
    );
    let actions: Vec<String> = sqlx::query_scalar(
        "SELECT action FROM audit_log WHERE details->>'host_key' = $1 AND actor = 'operator' ORDER BY id",
    )
    .bind(&host)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(actions, ["host.forced_open", "host.forced_closed"]);

    let shot = artifacts_dir().join("admin-closed.png");
    std::fs::write(&shot, c.screenshot().await.unwrap()).unwrap();
    println!("admin page screenshot after closing: {}", shot.display());

    c.close().await.unwrap();
    drop(driver);
    app.stop().await;
}
