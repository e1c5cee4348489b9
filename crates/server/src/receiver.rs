//! A webhook receiver on loopback, for the demo and the tests: each endpoint (`/{name}`) answers
//! as told ([`Behavior`]), verifies Standard Webhooks signatures with the secret registered for
//! it, and records every request with its arrival time.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// How an endpoint answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Behavior {
    /// Answer with this status (and an optional `Retry-After` value).
    Status(u16, Option<String>),
    /// Accept the request and never answer (the sender's timeout fires).
    Hang,
    /// Wait this long, then answer with the status (a slow endpoint).
    Delay(Duration, u16),
    /// Answer with this status (a 3xx) and this `Location` header (an endpoint that moved).
    Redirect(u16, String),
    /// Answer the endpoint's n-th request (from 0) as the n-th behavior, and every later one as
    /// the last (e.g. a 301, then 200s). Nested sequences answer as their first behavior.
    Sequence(Vec<Behavior>),
    /// Wait this long, then answer as the inner behavior (e.g. a slow `429` with a
    /// `Retry-After`). The request is recorded on arrival.
    Delayed(Duration, Box<Behavior>),
}

/// One received request.
#[derive(Debug, Clone)]
pub struct Received {
    /// Endpoint name.
    pub endpoint: String,
    /// `webhook-id` header.
    pub webhook_id: Option<String>,
    /// `webhook-timestamp` header (Unix seconds).
    pub webhook_timestamp: Option<i64>,
    /// `webhook-signature` header, as sent (one or more space-separated `v1,…`), so a test can
    /// verify it with any secret.
    pub webhook_signature: Option<String>,
    /// Arrival time, Unix seconds (wall clock).
    pub received_unix: i64,
    /// Whether the signature verified (None when no secret is registered for the endpoint).
    pub signature_ok: Option<bool>,
    /// The body.
    pub body: Bytes,
    /// Arrival time (monotonic).
    pub at: Instant,
    /// The status answered.
    pub answered: Option<u16>,
    /// Every request header, as received (a test checks a channel's custom headers and auth).
    pub headers: HeaderMap,
}

#[derive(Default)]
struct Inner {
    behaviors: HashMap<String, Behavior>,
    secrets: HashMap<String, String>,
    received: Vec<Received>,
}

/// A running receiver. Dropping it does not stop it; call [`Receiver::stop`] or cancel the token.
#[derive(Clone)]
pub struct Receiver {
    /// Where it listens.
    pub addr: SocketAddr,
    inner: Arc<Mutex<Inner>>,
    stop: CancellationToken,
}

impl Receiver {
    /// Starts on 127.0.0.1 with an ephemeral port. Endpoints answer 200 until told otherwise.
    pub async fn start() -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let inner = Arc::new(Mutex::new(Inner::default()));
        let stop = CancellationToken::new();
        let app = Router::new()
            .route("/{name}", post(handle))
            .with_state(inner.clone());
        let token = stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move { token.cancelled().await })
                .await;
        });
        Ok(Self { addr, inner, stop })
    }

    /// The URL of endpoint `name`.
    pub fn url(&self, name: &str) -> String {
        format!("http://{}/{name}", self.addr)
    }

    /// Sets how `name` answers.
    pub fn set(&self, name: &str, behavior: Behavior) {
        self.inner
            .lock()
            .unwrap()
            .behaviors
            .insert(name.to_string(), behavior);
    }

    /// Registers the signing secret (`whsec_…`) of `name`, so its requests are verified.
    pub fn set_secret(&self, name: &str, secret: &str) {
        self.inner
            .lock()
            .unwrap()
            .secrets
            .insert(name.to_string(), secret.to_string());
    }

    /// Every request `name` received, in arrival order.
    pub fn received(&self, name: &str) -> Vec<Received> {
        self.inner
            .lock()
            .unwrap()
            .received
            .iter()
            .filter(|r| r.endpoint == name)
            .cloned()
            .collect()
    }

    /// How many requests `name` received.
    pub fn count(&self, name: &str) -> usize {
        self.received(name).len()
    }

    /// Waits until `name` has received at least `n` requests, or `timeout` passes; returns the
    /// count reached.
    pub async fn wait_for(&self, name: &str, n: usize, timeout: Duration) -> usize {
        let deadline = Instant::now() + timeout;
        loop {
            let c = self.count(name);
            if c >= n || Instant::now() >= deadline {
                return c;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stops listening.
    pub fn stop(&self) {
        self.stop.cancel();
    }
}

async fn handle(
    State(inner): State<Arc<Mutex<Inner>>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let at = Instant::now();
    let (behavior, secret) = {
        let g = inner.lock().unwrap();
        let behavior = match g.behaviors.get(&name) {
            Some(Behavior::Sequence(steps)) => {
                let n = g.received.iter().filter(|r| r.endpoint == name).count();
                let step = steps.get(n).or(steps.last()).cloned();
                match step {
                    Some(Behavior::Sequence(inner)) => inner.first().cloned(),
                    other => other,
                }
            }
            other => other.cloned(),
        };
        (
            behavior.unwrap_or(Behavior::Status(200, None)),
            g.secrets.get(&name).cloned(),
        )
    };
    let signature_ok = secret.map(|s| {
        standardwebhooks::Webhook::new(&s)
            .map(|wh| wh.verify(&body, &headers).is_ok())
            .unwrap_or(false)
    });
    let answered = answered_status(&behavior);
    inner.lock().unwrap().received.push(Received {
        endpoint: name,
        webhook_id: headers
            .get("webhook-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
        webhook_timestamp: headers
            .get("webhook-timestamp")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok()),
        webhook_signature: headers
            .get("webhook-signature")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
        received_unix: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0),
        signature_ok,
        body,
        at,
        answered,
        headers: headers.clone(),
    });
    let mut behavior = behavior;
    while let Behavior::Delayed(wait, then) = behavior {
        tokio::time::sleep(wait).await;
        behavior = *then;
    }
    match behavior {
        Behavior::Status(code, retry_after) => {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let mut resp = (status, format!("receiver answered {code}")).into_response();
            if let Some(v) = retry_after.and_then(|v| v.parse().ok()) {
                resp.headers_mut().insert("retry-after", v);
            }
            resp
        }
        Behavior::Redirect(code, location) => {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::MOVED_PERMANENTLY);
            let mut resp = (status, format!("receiver answered {code}")).into_response();
            if let Ok(v) = location.parse() {
                resp.headers_mut().insert("location", v);
            }
            resp
        }
        // (A nested sequence was resolved to its first step above, and a delay waited out.)
        Behavior::Hang | Behavior::Sequence(_) | Behavior::Delayed(..) => {
            std::future::pending::<()>().await;
            unreachable!()
        }
        Behavior::Delay(wait, code) => {
            tokio::time::sleep(wait).await;
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            (
                status,
                format!("receiver answered {code} after {} ms", wait.as_millis()),
            )
                .into_response()
        }
    }
}

/// The status `behavior` answers with, if it answers.
fn answered_status(behavior: &Behavior) -> Option<u16> {
    match behavior {
        Behavior::Status(code, _) | Behavior::Delay(_, code) | Behavior::Redirect(code, _) => {
            Some(*code)
        }
        Behavior::Delayed(_, then) => answered_status(then),
        Behavior::Hang | Behavior::Sequence(_) => None,
    }
}
