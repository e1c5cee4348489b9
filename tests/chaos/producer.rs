//! An open-loop producer for the HA scenarios: at a fixed rate, single deliveries
//! (`POST /api/v1/channels/{id}/deliveries`) and messages (`POST /api/v1/messages`), each with an
//! `Idempotency-Key` of its own, spread over the API nodes. A request that fails in any way
//! (connection error, timeout, any status but 202) is sent again, with the same key and body, to
//! the next node, after a backoff (100 ms doubling to 1 s), until it is acknowledged or the give-up
//! time passes. The ticks do not wait for the requests: during an outage the requests pile up
//! and retry, as real clients would.

use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// Where and what the producer sends.
#[derive(Clone)]
pub struct Target {
    /// The API nodes' base URLs; request `n` goes first to node `n % len`, its retries to the
    /// next ones in turn.
    pub apis: Vec<String>,
    /// The key of the tenant whose channel takes the single deliveries.
    pub delivery_key: String,
    /// That channel.
    pub channel: Uuid,
    /// The key of the tenant whose messages are sent (one channel: a message is one delivery).
    pub message_key: String,
    /// Every `message_every`-th request is a message (1: all of them), the others deliveries.
    pub message_every: u64,
    /// Requests per second.
    pub rate: u32,
}

/// What a request was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `POST /api/v1/channels/{id}/deliveries`.
    Delivery,
    /// `POST /api/v1/messages`.
    Message,
}

/// One acknowledged request.
#[derive(Debug, Clone)]
pub struct Ack {
    /// Its `Idempotency-Key`.
    pub key: String,
    /// What it was.
    pub kind: Kind,
    /// Its body (the same on every try).
    pub body: Value,
    /// The delivery it created.
    pub delivery: Uuid,
    /// The message it created (the `webhook-id` of its delivery), for a message.
    pub message: Option<Uuid>,
    /// When it was first sent.
    pub sent: Instant,
    /// When the 202 arrived.
    pub acked: Instant,
    /// How many tries it took (1: no retry).
    pub tries: u32,
}

impl Ack {
    /// Sends the request again, once, to API node `node` (index into `target.apis`), with the
    /// same key and body: an idempotent replay. The 202's body, or what went wrong.
    pub async fn replay(
        &self,
        http: &reqwest::Client,
        target: &Target,
        node: usize,
    ) -> Result<Value, String> {
        let request = Request {
            key: self.key.clone(),
            kind: self.kind,
            body: self.body.clone(),
            first_node: node,
        };
        let (url, bearer) = request.route(target, 1);
        request.try_once(http, &url, bearer).await
    }
}

/// What the producer sent, once stopped.
pub struct Produced {
    /// The acknowledged requests, in the order of their acknowledgement.
    pub acks: Vec<Ack>,
    /// Requests still not acknowledged at the give-up time: their key and last error.
    pub unacked: Vec<(String, String)>,
}

/// A running producer ([`Producer::start`], [`Producer::stop`]).
pub struct Producer {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<Vec<Result<Ack, (String, String)>>>,
    /// Message requests sent and not yet acknowledged, now.
    pending_messages: Arc<AtomicUsize>,
    /// Requests acknowledged so far.
    acked: Arc<AtomicUsize>,
    give_up: Arc<Mutex<Option<Instant>>>,
}

impl Producer {
    /// Starts sending to `target` with `http`.
    pub fn start(http: reqwest::Client, target: Target) -> Self {
        let stop = CancellationToken::new();
        let pending_messages = Arc::new(AtomicUsize::new(0));
        let acked = Arc::new(AtomicUsize::new(0));
        let give_up = Arc::new(Mutex::new(None));
        let (token, pending, count, until) = (
            stop.clone(),
            pending_messages.clone(),
            acked.clone(),
            give_up.clone(),
        );
        let task = tokio::spawn(async move {
            let mut requests = JoinSet::new();
            let mut tick = tokio::time::interval(Duration::from_secs(1) / target.rate.max(1));
            let run = format!("{:08x}", rand_u32());
            let mut n = 0u64;
            loop {
                tokio::select! {
                    _ = token.cancelled() => break,
                    _ = tick.tick() => {}
                }
                let kind = if n.is_multiple_of(target.message_every.max(1)) {
                    Kind::Message
                } else {
                    Kind::Delivery
                };
                let request = Request {
                    key: format!("ha-{run}-{n}"),
                    kind,
                    body: json!({ "event_type": "ha.load", "payload": { "n": n } }),
                    first_node: n as usize,
                };
                if kind == Kind::Message {
                    pending.fetch_add(1, Ordering::SeqCst);
                }
                let (http, target, pending, count, until) = (
                    http.clone(),
                    target.clone(),
                    pending.clone(),
                    count.clone(),
                    until.clone(),
                );
                requests.spawn(async move {
                    let done = request.send(&http, &target, &until).await;
                    if kind == Kind::Message {
                        pending.fetch_sub(1, Ordering::SeqCst);
                    }
                    if done.is_ok() {
                        count.fetch_add(1, Ordering::SeqCst);
                    }
                    done
                });
                n += 1;
            }
            let mut done = Vec::new();
            while let Some(r) = requests.join_next().await {
                done.push(r.expect("a producer request task"));
            }
            done
        });
        Self {
            stop,
            task,
            pending_messages,
            acked,
            give_up,
        }
    }

    /// Message requests sent and not yet acknowledged, now (commits possibly in progress).
    pub fn pending_messages(&self) -> usize {
        self.pending_messages.load(Ordering::SeqCst)
    }

    /// Requests acknowledged so far.
    pub fn acked(&self) -> usize {
        self.acked.load(Ordering::SeqCst)
    }

    /// Stops sending new requests and waits for those under way: each is retried until
    /// acknowledged, for at most `give_up` from now.
    pub async fn stop(self, give_up: Duration) -> Produced {
        *self.give_up.lock().unwrap() = Some(Instant::now() + give_up);
        self.stop.cancel();
        let done = self.task.await.expect("the producer task");
        let mut acks = Vec::new();
        let mut unacked = Vec::new();
        for r in done {
            match r {
                Ok(ack) => acks.push(ack),
                Err(e) => unacked.push(e),
            }
        }
        acks.sort_by_key(|a| a.acked);
        Produced { acks, unacked }
    }
}

/// One request, as sent on every try.
struct Request {
    key: String,
    kind: Kind,
    body: Value,
    first_node: usize,
}

impl Request {
    /// Sends until a 202 (its [`Ack`]) or the give-up time (its key and last error).
    async fn send(
        self,
        http: &reqwest::Client,
        target: &Target,
        give_up: &Mutex<Option<Instant>>,
    ) -> Result<Ack, (String, String)> {
        let sent = Instant::now();
        let mut backoff = Duration::from_millis(100);
        for tries in 1u32.. {
            let (url, bearer) = self.route(target, tries);
            let error = match self.try_once(http, &url, bearer).await {
                Ok(v) => match self.created(&v) {
                    Some((delivery, message)) => {
                        return Ok(Ack {
                            key: self.key,
                            kind: self.kind,
                            body: self.body,
                            delivery,
                            message,
                            sent,
                            acked: Instant::now(),
                            tries,
                        })
                    }
                    None => format!("202 without the ids: {v}"),
                },
                Err(e) => e,
            };
            if give_up.lock().unwrap().is_some_and(|t| Instant::now() >= t) {
                return Err((self.key, error));
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(1));
        }
        unreachable!("the retry loop returns")
    }

    /// Where try number `tries` (from 1) goes: its URL and bearer key.
    fn route<'t>(&self, target: &'t Target, tries: u32) -> (String, &'t str) {
        let api = &target.apis[(self.first_node + tries as usize - 1) % target.apis.len()];
        match self.kind {
            Kind::Delivery => (
                format!("{api}/api/v1/channels/{}/deliveries", target.channel),
                &target.delivery_key,
            ),
            Kind::Message => (format!("{api}/api/v1/messages"), &target.message_key),
        }
    }

    /// One try: the 202's body, or what went wrong.
    async fn try_once(
        &self,
        http: &reqwest::Client,
        url: &str,
        bearer: &str,
    ) -> Result<Value, String> {
        let r = http
            .post(url)
            .bearer_auth(bearer)
            .header("idempotency-key", &self.key)
            .json(&self.body)
            .send()
            .await
            .map_err(|e| format!("request: {e}"))?;
        let status = r.status().as_u16();
        let body: Value = r.json().await.unwrap_or(Value::Null);
        if status == 202 {
            Ok(body)
        } else {
            Err(format!("{status}: {body}"))
        }
    }

    /// The delivery (and message) a 202 names.
    fn created(&self, v: &Value) -> Option<(Uuid, Option<Uuid>)> {
        let uuid = |v: &Value| v.as_str()?.parse::<Uuid>().ok();
        match self.kind {
            Kind::Delivery => Some((uuid(&v["id"])?, None)),
            Kind::Message => Some((
                uuid(&v["deliveries"][0]["delivery_id"])?,
                Some(uuid(&v["id"])?),
            )),
        }
    }
}

/// A random number for the run's keys (the keys of two runs never meet).
fn rand_u32() -> u32 {
    Uuid::new_v4().as_u128() as u32
}
