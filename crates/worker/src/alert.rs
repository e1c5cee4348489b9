//! Alert webhooks: a tenant's on-call hears when a channel's circuit opens, closes, is paused
//! or resumed, flaps, or its endpoint rejects our requests, and when deliveries die or a
//! channel fails often (`breakwater_core::alerts::events`) — under the alert policy of
//! `breakwater_core::alerts` (which decides, in the transaction that made the event, whether an
//! alert job exists at all). Signed per Standard Webhooks with the tenant's alert secret,
//! delivered from the `alerts` queue with its own retries, so an alert endpoint that is down
//! never blocks deliveries. The same queue runs the flapping timers ([`run_flapping_watch`]) and
//! the delivery-event timers ([`run_events_watch`]: storm summaries, the end of a failing streak).

use crate::executor::{self, Outcome, Retries};
use crate::request::{self, Sent, Signed};
use crate::worker::Worker;
use breakwater_core::alerts::events::{self, WatchStep};
use breakwater_core::alerts::{self, FlappingStep};
use breakwater_core::jobs::{AlertArgs, AlertEventsWatchArgs, FlappingWatchArgs};
use breakwater_core::outcome::{classify, stall_excuses, Class, Observed};
use breakwater_core::{tenants, Result};
use breakwater_queue::Job;
use std::time::{Duration, Instant};

/// The alert body: `{"type": <event>, "timestamp": <database time of the event, RFC 3339>,
/// "data": {tenant_id, channel_id, from_state, to_state, reason, failure_count, generation,
/// transition_count, flapping_window_ms, host, suppressed?, status?}}`.
///
/// `host` is the channel's host circuit, `{"host_key", "state"}` (null for a channel without a
/// host key), so an on-call sees at once whether the whole host is down.
/// `transition_count` is the circuit's alerting transitions within `flapping_window_ms` (the
/// alerted one included); `suppressed` (only on `channel.flapping` and
/// `channel.flapping_ended`) the transitions not alerted one by one; `status` (only on
/// `channel.endpoint_rejected`) the HTTP status the endpoint answered. `from_state` is null on
/// `channel.flapping_ended`, whose `to_state` is the circuit's state when it ended.
///
/// A host circuit's alert (`host.circuit_opened` / `host.circuit_closed`) has `channel_id` null
/// and adds `host_key` and `channels` (the tenant's channels on that host).
///
/// Delivery-level events ([`breakwater_core::alerts::events`]; `from_state` null, `to_state` the
/// channel's circuit state): `delivery.dead` adds `delivery_id`, `event_type`, `message_id`
/// (null for a delivery enqueued on its own), `attempts` and `last_error`; `deliveries.dead` adds
/// `count` (deaths not alerted one by one), `delivery_ids` (the first 10 of them),
/// `window_start` and `window_ms`; `channel.failing` and `channel.recovered` add `failed`,
/// `attempts_in_window`, `threshold_percent` and `window_ms` (and `failing_since` on
/// `channel.recovered`).
pub(crate) fn body(a: &AlertArgs) -> serde_json::Value {
    let mut data = serde_json::json!({
        "tenant_id": a.tenant_id,
        "channel_id": a.channel_id,
        "from_state": a.from_state,
        "to_state": a.to_state,
        "reason": a.reason,
        "failure_count": a.failure_count,
        "generation": a.generation,
        "transition_count": a.transition_count,
        "flapping_window_ms": a.flapping_window_ms,
    });
    // The optional fields, in this order, only when the alert has them (`host` may be null).
    let optional = [
        ("suppressed", a.suppressed.map(serde_json::Value::from)),
        ("status", a.status.map(serde_json::Value::from)),
        (
            "flapping_since",
            a.flapping_since.map(|t| serde_json::json!(t)),
        ),
        ("host", a.host.as_ref().map(|h| serde_json::json!(h))),
        (
            "host_key",
            a.host_key.as_ref().map(|k| serde_json::json!(k)),
        ),
        ("channels", a.channels.map(serde_json::Value::from)),
        ("delivery_id", a.delivery_id.map(|id| serde_json::json!(id))),
        (
            "event_type",
            a.event_type.as_ref().map(|t| serde_json::json!(t)),
        ),
        // A dead delivery's message: `null` when it was enqueued on its own.
        (
            "message_id",
            a.delivery_id.map(|_| serde_json::json!(a.message_id)),
        ),
        ("attempts", a.attempts.map(serde_json::Value::from)),
        (
            "last_error",
            a.last_error.as_ref().map(|e| serde_json::json!(e)),
        ),
        ("count", a.count.map(serde_json::Value::from)),
        (
            "delivery_ids",
            a.delivery_ids.as_ref().map(|ids| serde_json::json!(ids)),
        ),
        ("window_start", a.window_start.map(|t| serde_json::json!(t))),
        ("window_ms", a.window_ms.map(serde_json::Value::from)),
        ("failed", a.failed.map(serde_json::Value::from)),
        (
            "attempts_in_window",
            a.attempts_in_window.map(serde_json::Value::from),
        ),
        (
            "threshold_percent",
            a.threshold_percent.map(serde_json::Value::from),
        ),
        (
            "failing_since",
            a.failing_since.map(|t| serde_json::json!(t)),
        ),
    ];
    for (key, value) in optional {
        if let Some(v) = value {
            data[key] = v;
        }
    }
    serde_json::json!({
        "type": a.event,
        "timestamp": a.at,
        "data": data,
    })
}

/// The flapping timer of a channel (unique key `flapping:<channel>`): ends the flapping with one
/// `channel.flapping_ended` alert once the circuit was quiet for the window, else snoozes until
/// the last transition + window (database clock). Each suppressed transition also pushes it
/// there.
pub(crate) async fn run_flapping_watch(w: &Worker, job: Job) -> Result<()> {
    let Some(FlappingWatchArgs { channel_id }) =
        w.args_or_discard(&job, "args lack a channel_id").await?
    else {
        return Ok(());
    };
    tracing::Span::current().record("channel_id", tracing::field::display(channel_id));
    let mut tx = w.pool.begin().await?;
    let step = alerts::flapping_step(&mut tx, channel_id).await?;
    let fenced = match step {
        FlappingStep::Done | FlappingStep::Ended { .. } => {
            executor::finish(&mut tx, &job, Outcome::Complete).await?
        }
        FlappingStep::Wait(wait) => {
            // A little past the moment, so "quiet for the window" holds when it looks again.
            let wait = wait + Duration::from_millis(20);
            executor::finish(&mut tx, &job, Outcome::Snooze { wait }).await?
        }
    };
    if fenced {
        tx.commit().await?;
        if let FlappingStep::Ended { suppressed } = step {
            tracing::info!(%channel_id, suppressed, "circuit stopped flapping");
        }
    } else {
        tracing::warn!(%channel_id, "flapping timer lost its claim; step rolled back");
        tx.rollback().await?;
    }
    Ok(())
}

/// A channel's delivery-event timer (unique key `alert-events:<channel>`): sends a storm
/// window's `deliveries.dead` summary once the window ended, and ends a failing streak
/// (`channel.recovered`) once the failed share is back under the threshold
/// ([`events::watch_step`]); snoozes until the next thing to look at, or is done.
pub(crate) async fn run_events_watch(w: &Worker, job: Job) -> Result<()> {
    let Some(AlertEventsWatchArgs { channel_id }) =
        w.args_or_discard(&job, "args lack a channel_id").await?
    else {
        return Ok(());
    };
    tracing::Span::current().record("channel_id", tracing::field::display(channel_id));
    let mut tx = w.pool.begin().await?;
    let step = events::watch_step(&mut tx, channel_id).await?;
    let fenced = match step {
        WatchStep::Done => executor::finish(&mut tx, &job, Outcome::Complete).await?,
        WatchStep::Wait(wait) => {
            // A little past the moment, so "the window ended" holds when it looks again.
            let wait = wait + Duration::from_millis(20);
            executor::finish(&mut tx, &job, Outcome::Snooze { wait }).await?
        }
    };
    if fenced {
        tx.commit().await?;
    } else {
        tracing::warn!(%channel_id, "alert-events timer lost its claim; step rolled back");
        tx.rollback().await?;
    }
    Ok(())
}

/// Sends one alert ([`AlertArgs`]) to its tenant's alert URL, signed with the tenant's alert
/// secret: done on a 2xx, retried with the delivery backoff on a transient failure, discarded on
/// a permanent one ([`Outcome::of_alert`]); done at once when the tenant removed its alert URL
/// since.
pub(crate) async fn run(w: &Worker, job: Job) -> Result<()> {
    let Some(alert) = w
        .args_or_discard::<AlertArgs>(&job, "alert args lack tenant_id or id")
        .await?
    else {
        return Ok(());
    };
    let tenant_id = alert.tenant_id;
    let Some((url, secret)) = tenants::alert_target(&w.pool, tenant_id).await? else {
        // The tenant removed its alert URL since: nothing to send.
        executor::finish_on(&w.pool, &job, Outcome::Complete).await?;
        return Ok(());
    };
    let body = serde_json::to_vec(&body(&alert)).expect("JSON values serialize");
    let t0 = Instant::now();
    let sent = send(w, &url, &secret, &alert.id.to_string(), body).await;
    let wall = t0.elapsed();
    let class = classify(sent.observed);
    let error = sent
        .error
        .clone()
        .unwrap_or_else(|| format!("{:?}", sent.observed));
    // A failure this node's own stall explains says nothing about the alert endpoint: sent again
    // at once, no attempt used.
    let stalled = w.stall.stalled_since(t0);
    if class != Class::Success && stall_excuses(sent.observed, wall, stalled, sent.limit) {
        tracing::warn!(%tenant_id, %error, "alert attempt inconclusive: this node stood still during it; sent again");
        let wait = Duration::ZERO;
        executor::finish_on(&w.pool, &job, Outcome::Snooze { wait }).await?;
        return Ok(());
    }
    match class {
        Class::Transient => {
            tracing::warn!(%tenant_id, %error, attempt = job.attempt, "alert delivery failed; will retry")
        }
        Class::Permanent => {
            tracing::warn!(%tenant_id, %error, "alert endpoint refused the alert; giving up")
        }
        Class::Success => {}
    }
    // The endpoint answered: the result is kept until written, not sent again. An alert has no
    // retry policy of its own: the configuration's backoff.
    let retries = Retries {
        backoff: &w.backoff,
        policy: None,
    };
    let outcome = Outcome::of_alert(class, retries, job.attempt, &error);
    crate::keep::until_recorded("the alert's result", || async {
        executor::finish_on(&w.pool, &job, outcome).await?;
        Ok::<(), breakwater_core::Error>(())
    })
    .await
}

/// Sends one alert: the same signed request as a delivery ([`request::post`]), signed with the
/// tenant's alert secret alone, within `worker.request_timeout_ms` of this node's running time.
/// Only the status is read (no body, no `Retry-After`, no redirect note): an alert's error is
/// its observation.
async fn send(w: &Worker, url: &str, secret: &str, msg_id: &str, body: Vec<u8>) -> Sent {
    let req = Signed {
        url,
        webhook_id: msg_id,
        secrets: &[secret],
        body,
        // An alert never carries a channel's headers or auth.
        headers: None,
        authorization: None,
    };
    let posted = w.stall.run_for(w.request_timeout, request::post(w, req));
    match posted.await {
        Ok(Ok(r)) => Sent {
            observed: Observed::Status(r.status().as_u16()),
            excerpt: None,
            error: None,
            retry_after: None,
            limit: None,
            token_failure: false,
        },
        Ok(Err(failed)) => failed,
        Err(waited) => Sent::timed_out(url, w.request_timeout, waited),
    }
}
