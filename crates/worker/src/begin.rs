//! Batched begins: a node admits and begins the deliveries its pools claimed together in one
//! statement.
//!
//! Every delivery of a plainly closed channel starts with [`circuit::admit_and_begin`]: one
//! short statement, one commit. When many jobs start at once (a fetch that claimed dozens, or a
//! slow endpoint whose whole window of requests ended together and was refilled), each of them
//! took a pooled connection and a round trip of its own, and a job of another tenant claimed in
//! the same moment waited for all of them. So the delivery handler asks this node's
//! [`Beginner`] instead: the requests that arrive while a statement runs go together in the
//! next one ([`circuit::admit_and_begin_many`]), as results do in the recorder
//! ([`crate::batch`]). A lone request is sent at once (no window): no latency is added at low
//! load. Each queue (tier) has its own batcher ([`Beginners`]): a high-tier delivery never waits
//! in line behind a bulk backlog's begins (measured: sharing one, the e2e test
//! `limits::a_bulk_backlog_does_not_delay_the_high_tier` saw a bulk backlog overtake high-tier
//! deliveries twice as often).
//!
//! Nothing about the meaning changes: each delivery is decided and written as it would be
//! alone, and a delivery that is not a plain send ([`Begun::Other`]) takes the full path as
//! before. A failed statement fails each of its requests; their jobs are retried as for any
//! handler error (no attempt was recorded, the claim fences a late write).

use crate::batch::{collect, BatchConfig, Flush};
use breakwater_core::circuit::{self, Begun};
use breakwater_core::{Error, Result};
use sqlx::PgPool;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

/// Most deliveries begun in one statement.
const MAX: usize = 128;

/// Statements in flight at once: a big batch does not hold up the next request.
const FLUSHERS: usize = 2;

/// One begin waiting for its statement.
struct Request {
    channel_id: Uuid,
    delivery_id: Uuid,
    reply: oneshot::Sender<Result<Begun>>,
}

/// This node's begin batcher: a handle to its task. Cloning shares the task.
#[derive(Clone)]
pub(crate) struct Beginner {
    queue: mpsc::Sender<Request>,
}

impl Beginner {
    /// Starts the batcher's task on `pool`. The task ends when every handle is dropped.
    pub(crate) fn start(pool: PgPool) -> Self {
        let (queue, rx) = mpsc::channel(MAX);
        let cfg = BatchConfig {
            max: MAX,
            window: Duration::ZERO,
            flushers: FLUSHERS,
        };
        tokio::spawn(collect(rx, Arc::new(Statement { pool }), cfg));
        Self { queue }
    }

    /// [`circuit::admit_and_begin`] of delivery `delivery_id` of channel `channel_id`, in the
    /// next statement of this node's batcher.
    pub(crate) async fn begin(&self, channel_id: Uuid, delivery_id: Uuid) -> Result<Begun> {
        let (reply, answer) = oneshot::channel();
        let stopped = || Error::Unrecorded("this node's begin batcher has stopped".into());
        self.queue
            .send(Request {
                channel_id,
                delivery_id,
                reply,
            })
            .await
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

/// This node's begin batchers, one per queue, each started on first use.
#[derive(Clone)]
pub(crate) struct Beginners {
    pool: PgPool,
    by_queue: Arc<std::sync::Mutex<std::collections::HashMap<String, Beginner>>>,
}

impl Beginners {
    /// No batcher yet; each queue's starts on `pool` at its first [`Beginners::begin`].
    pub(crate) fn new(pool: PgPool) -> Self {
        Self {
            pool,
            by_queue: Arc::default(),
        }
    }

    /// [`Beginner::begin`] in `queue`'s batcher.
    pub(crate) async fn begin(
        &self,
        queue: &str,
        channel_id: Uuid,
        delivery_id: Uuid,
    ) -> Result<Begun> {
        let beginner = {
            let mut map = self.by_queue.lock().expect("beginners lock poisoned");
            // No key allocated on the hot path: only a queue's first begin inserts.
            match map.get(queue) {
                Some(b) => b.clone(),
                None => map
                    .entry(queue.to_string())
                    .or_insert_with(|| Beginner::start(self.pool.clone()))
                    .clone(),
            }
        };
        beginner.begin(channel_id, delivery_id).await
    }
}

/// What a batch of begins runs on.
struct Statement {
    pool: PgPool,
}

impl Flush<Request> for Statement {
    async fn flush(&self, batch: Vec<Request>) {
        let pairs: Vec<(Uuid, Uuid)> = batch
            .iter()
            .map(|r| (r.channel_id, r.delivery_id))
            .collect();
        let begun = async {
            let mut conn = self.pool.acquire().await?;
            circuit::admit_and_begin_many(&mut conn, &pairs).await
        }
        .await;
        match begun {
            Ok(begun) => {
                for (r, b) in batch.into_iter().zip(begun) {
                    let _ = r.reply.send(Ok(b));
                }
            }
            Err(e) => {
                tracing::warn!(deliveries = batch.len(), error = %e, "beginning a batch of deliveries failed");
                let text = e.to_string();
                for r in batch {
                    let _ = r.reply.send(Err(Error::Unrecorded(text.clone())));
                }
            }
        }
    }
}
