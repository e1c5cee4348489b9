//! One delivery attempt: load, sign, send, classify, record.

use crate::http::is_blocked;
use breakwater_core::deliveries::{self, AttemptRecord, Dispatch};
use breakwater_core::outcome::{classify, is_configuration_problem, Class, Observed};
use breakwater_core::{signing, targets};
use breakwater_queue::{runner::Handler, Backoff, Job, RetryOutcome};
use chrono::Utc;
use sqlx::PgPool;
use std::time::{Duration, Instant};
use uuid::Uuid;

/// Handles `deliver` jobs.
#[derive(Clone)]
pub struct DeliveryHandler {
    /// Database pool.
    pub pool: PgPool,
    /// Outbound client (see [`crate::http::client`]).
    pub client: reqwest::Client,
    /// This node's id, recorded on attempts.
    pub node_id: String,
    /// Retry backoff.
    pub backoff: Backoff,
    /// Bytes of response body kept.
    pub excerpt_bytes: usize,
    /// Whether internal targets are allowed (development, tests).
    pub allow_private: bool,
}

/// What one HTTP request observed.
#[derive(Debug)]
pub struct Sent {
    /// The observation, for [`classify`].
    pub observed: Observed,
    /// The start of the response body, if any (lossy UTF-8, no NULs).
    pub excerpt: Option<String>,
    /// Error text when the request failed without a status.
    pub error: Option<String>,
    /// The raw `Retry-After` header, if any.
    pub retry_after: Option<String>,
}

/// The JSON body sent for a delivery: the Standard Webhooks envelope
/// `{"type": <event type>, "timestamp": <accepted at, RFC 3339>, "data": <payload>}`.
pub fn body(d: &Dispatch) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "type": d.event_type,
        "timestamp": d.created_at,
        "data": d.payload,
    }))
    .expect("JSON values serialize")
}

impl DeliveryHandler {
    /// Sends one signed request for `d` (signature and timestamp made now, at the attempt).
    pub async fn send(&self, d: &Dispatch) -> Sent {
        let body = body(d);
        let failed = |observed, error: String| Sent {
            observed,
            excerpt: None,
            error: Some(error),
            retry_after: None,
        };
        if !self.allow_private {
            // Literal IPs never reach the resolver: check them here.
            if let Err(e) = targets::parse_channel_url(&d.url, false) {
                return failed(Observed::Blocked, e);
            }
        }
        let headers = match signing::sign(
            &d.signing_secret,
            &d.id.to_string(),
            Utc::now().timestamp(),
            &body,
        ) {
            Ok(h) => h,
            Err(e) => return failed(Observed::Other, format!("signing failed: {e}")),
        };
        let req = self
            .client
            .post(&d.url)
            .header("content-type", "application/json")
            .header("webhook-id", &headers.id)
            .header("webhook-timestamp", headers.timestamp.to_string())
            .header("webhook-signature", &headers.signature)
            .body(body);
        let mut resp = match req.send().await {
            Ok(r) => r,
            Err(e) => return failed(observe_error(&e), error_chain(&e)),
        };
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        // Keep only the first bytes of the body; stop reading past the cap.
        let mut buf: Vec<u8> = Vec::new();
        let mut read_error = None;
        while buf.len() < self.excerpt_bytes {
            match resp.chunk().await {
                Ok(Some(chunk)) => buf.extend_from_slice(&chunk),
                Ok(None) => break,
                Err(e) => {
                    read_error = Some(e);
                    break;
                }
            }
        }
        buf.truncate(self.excerpt_bytes);
        let excerpt = (!buf.is_empty()).then(|| String::from_utf8_lossy(&buf).replace('\0', ""));
        match read_error {
            // A timeout while reading a 2xx body still fails the attempt: the total timeout
            // is the contract.
            Some(e) if e.is_timeout() => Sent {
                observed: Observed::Timeout,
                excerpt,
                error: Some(error_chain(&e)),
                retry_after,
            },
            _ => Sent {
                observed: Observed::Status(status),
                excerpt,
                error: None,
                retry_after,
            },
        }
    }

    async fn run(&self, job: Job) -> Result<(), String> {
        let Some(delivery_id) = job
            .args
            .get("delivery_id")
            .and_then(|v| v.as_str())
            .and_then(|s| s.parse::<Uuid>().ok())
        else {
            breakwater_queue::discard(
                &self.pool,
                job.id,
                job.claim_token,
                "args lack a delivery_id",
            )
            .await
            .map_err(|e| e.to_string())?;
            return Ok(());
        };
        tracing::Span::current().record("delivery_id", tracing::field::display(delivery_id));
        let Some(d) = deliveries::begin_attempt(&self.pool, delivery_id)
            .await
            .map_err(|e| e.to_string())?
        else {
            // Deleted, or already delivered/dead: nothing to send.
            breakwater_queue::complete(&self.pool, job.id, job.claim_token)
                .await
                .map_err(|e| e.to_string())?;
            return Ok(());
        };

        let started_at = Utc::now();
        let t0 = Instant::now();
        let sent = self.send(&d).await;
        let duration_ms = i32::try_from(t0.elapsed().as_millis()).unwrap_or(i32::MAX);
        let class = classify(sent.observed);
        if is_configuration_problem(sent.observed) {
            tracing::error!(
                channel_id = %d.channel_id, tenant_id = %d.tenant_id, delivery_id = %d.id,
                status = ?sent.observed,
                "channel endpoint rejects our requests (401/403): the channel is misconfigured"
            );
        }

        // Record the result. The job update goes first: if the claim was lost (this run was
        // rescued), the transaction is rolled back and nothing changes.
        let mut tx = self.pool.begin().await.map_err(|e| e.to_string())?;
        let error_text = describe(&sent);
        let new_status = match class {
            Class::Success => breakwater_queue::complete(&mut *tx, job.id, job.claim_token)
                .await
                .map_err(|e| e.to_string())?
                .then_some("delivered"),
            Class::Permanent => {
                breakwater_queue::discard(&mut *tx, job.id, job.claim_token, &error_text)
                    .await
                    .map_err(|e| e.to_string())?
                    .then_some("dead")
            }
            Class::Transient => {
                let delay: Duration = self.backoff.delay(job.attempt);
                match breakwater_queue::retry(&mut *tx, job.id, job.claim_token, delay, &error_text)
                    .await
                    .map_err(|e| e.to_string())?
                {
                    Some(RetryOutcome::Retried(_)) => Some("failed"),
                    Some(RetryOutcome::Discarded) => Some("dead"),
                    None => None,
                }
            }
        };
        let Some(new_status) = new_status else {
            tracing::warn!(delivery_id = %d.id, job_id = job.id, "claim lost (job was rescued); result discarded");
            tx.rollback().await.map_err(|e| e.to_string())?;
            return Ok(());
        };
        let (status_code, error_kind) = match sent.observed {
            Observed::Status(s) => (Some(i32::from(s)), None),
            Observed::Connect => (None, Some("connect")),
            Observed::Timeout => (None, Some("timeout")),
            Observed::Blocked => (None, Some("blocked")),
            Observed::Other => (None, Some("other")),
        };
        deliveries::record_attempt(
            &mut tx,
            &AttemptRecord {
                delivery_id: d.id,
                started_at,
                duration_ms,
                outcome: class.as_str(),
                status_code,
                error_kind,
                error: (class != Class::Success).then_some(error_text.as_str()),
                response_excerpt: sent.excerpt.as_deref(),
                node_id: &self.node_id,
                new_status,
            },
        )
        .await
        .map_err(|e| e.to_string())?;
        tx.commit().await.map_err(|e| e.to_string())?;
        tracing::debug!(delivery_id = %d.id, channel_id = %d.channel_id, outcome = class.as_str(), duration_ms, new_status, "attempt recorded");
        Ok(())
    }
}

impl Handler for DeliveryHandler {
    async fn handle(&self, job: Job) -> Result<(), String> {
        use tracing::Instrument;
        let span = tracing::info_span!("job", job_id = job.id, kind = %job.kind, attempt = job.attempt, queue = %job.queue, delivery_id = tracing::field::Empty);
        self.run(job).instrument(span).await
    }
}

fn observe_error(e: &reqwest::Error) -> Observed {
    if is_blocked(e) {
        Observed::Blocked
    } else if e.is_timeout() {
        Observed::Timeout
    } else if e.is_connect() {
        Observed::Connect
    } else {
        Observed::Other
    }
}

/// The error and its causes, joined (reqwest's top-level message alone hides the cause).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        s.push_str(": ");
        s.push_str(&c.to_string());
        src = c.source();
    }
    s
}

fn describe(s: &Sent) -> String {
    match (&s.observed, &s.error) {
        (_, Some(e)) => e.clone(),
        (Observed::Status(code), None) => format!("HTTP {code}"),
        (o, None) => format!("{o:?}"),
    }
}
