//! After an attempt: the one call ([`after_attempt`]) that records it and moves what it moves —
//! the delivery's status, its channel's circuits (its host's and its own), a `Retry-After`
//! hold — in one transaction of the worker's, and returns every effect of it ([`AfterAttempt`]:
//! with the channel's concurrency feedback, [`feedback`]), so what an answer (a 429, say) leads
//! to is read in one place; the worker only turns it into the job's outcome.

use super::{
    probe_failed, probe_inconclusive, probe_succeeded, record_failure, record_success,
    set_retry_after, CircuitConfig, State,
};
use crate::alerts;
use crate::audit;
use crate::deliveries::{self, AttemptRecord, Dispatch, Endpoint, Recorded, Status};
use crate::hosts::{self, HostsConfig};
use crate::outcome::{
    honours_retry_after, host_class, is_configuration_problem, parse_retry_after, Class, Observed,
};
use crate::Result;
use breakwater_queue::Feedback;
use sqlx::PgConnection;
use std::time::Duration;
use std::time::SystemTime;
use uuid::Uuid;

/// What one attempt of a delivery gave. Built by the worker after the request, from the
/// delivery it loaded ([`deliveries::begin_attempt`]), the [`Admission::Send`] that let it go
/// and what the request observed.
#[derive(Debug, Clone, Copy)]
pub struct AttemptResult<'a> {
    /// The delivery as loaded for the attempt: its id, channel, the URL and host key the request
    /// went to, whether the channel was in a rejection streak, and the attempt's start (database
    /// clock).
    pub dispatch: &'a Dispatch,
    /// What the request observed (status, or the kind of failure).
    pub observed: Observed,
    /// Its class: [`crate::outcome::classify`] of `observed`, computed once by the worker when
    /// the answer came (its telemetry and stall judgement use the same value).
    pub class: Class,
    /// How long the request took (the worker's monotonic clock).
    pub duration: Duration,
    /// The channel probe's generation, when this delivery was the half-open probe (or trial).
    pub probe_generation: Option<i64>,
    /// The host probe's generation, when this delivery was the host probe.
    pub host_probe: Option<i64>,
    /// The channel's consecutive failures read by the gate before the attempt (a success
    /// resets the counts only when this is above 0: no write in the common case).
    pub failures_before: i32,
    /// The attempt's error text, URL-free: logged with a failed attempt, written on the channel
    /// as its failure reason and audited. Ignored for a success.
    pub error: &'a str,
    /// The first bytes of the response body, if any.
    pub response_excerpt: Option<&'a str>,
    /// The raw `Retry-After` header of the answer, if any.
    pub retry_after: Option<&'a str>,
    /// The node that made the attempt.
    pub node_id: &'a str,
    /// Whether this was the delivery's last attempt (its job's `attempt >= max_attempts`).
    pub last_attempt: bool,
    /// Whether the attempt failed at the channel's OAuth2 token endpoint, before any request to
    /// the channel's URL (a token endpoint that fails is the channel's failure, not its
    /// host's). It counts for the channel's circuit like any transient failure (its `error`
    /// names the token endpoint), but says nothing about the host of the channel's URL, whose
    /// circuit ([`hosts`]) it does not touch: as the host probe, it hands the role on
    /// ([`hosts::hand_on_inconclusive_probe`]).
    pub token_failure: bool,
}

impl AttemptResult<'_> {
    /// Whether the attempt was a channel probe (or trial) or a host probe.
    fn probe(&self) -> bool {
        self.probe_generation.is_some() || self.host_probe.is_some()
    }
}

/// What [`after_attempt`] did, for the worker to finish the job and count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AfterAttempt {
    /// The delivery's status now ([`deliveries::status_after`]): delivered (complete the job),
    /// dead (discard it), or failed or paused (retry it).
    pub status: Status,
    /// The attempt's endpoint against the channel's now: an answer of a URL the channel has left
    /// speaks for nothing of the channel's (nor for its adaptive concurrency limit).
    pub endpoint: Endpoint,
    /// The `Retry-After` wait the answer imposed on the channel (measured on the database
    /// clock, capped at `retry_after_cap_ms`), if the answer's class honours one: a retry of
    /// this delivery waits at least this long.
    pub retry_after: Option<Duration>,
    /// The transitions this attempt's result won (host circuit first, then the channel's), to
    /// count in the metrics once the caller's transaction commits.
    pub transitions: Vec<audit::Transitioned>,
    /// What the answer says of the channel's capacity, for its job group's adaptive concurrency
    /// limit ([`breakwater_queue::adapt_limit`], applied by the worker in this transaction):
    /// [`feedback`].
    pub feedback: Feedback,
}

/// The concurrency feedback of an attempt's answer (the adaptive limit learns from the
/// channel's current endpoint only): neutral for an answer of a URL the channel has left
/// (`url_changed`) or a failure at the channel's OAuth2 token endpoint (`token_failure`: the
/// endpoint was not asked); else a success reports its `latency` as one run, a transient failure
/// (timeout, refused connection, 429, 5xx) overload, a permanent one (a 4xx) nothing.
pub(crate) fn feedback(
    class: Class,
    url_changed: bool,
    token_failure: bool,
    latency: Duration,
) -> Feedback {
    match class {
        _ if url_changed || token_failure => Feedback::Neutral,
        Class::Success => Feedback::Ok { latency, runs: 1 },
        Class::Transient => Feedback::Overloaded,
        Class::Permanent => Feedback::Neutral,
    }
}

/// Records an attempt and everything it moves, in the caller's transaction (before the job is
/// finished): locks the channel row when the result may write it ([`lock_for_result`]), logs the
/// attempt and gives the delivery its status ([`deliveries::record_attempt`]), then moves the
/// circuits ([`move_circuits`]), then, for a failure, decides its delivery-level alert events
/// ([`alerts::events::after_failed_attempt`]: a death's `delivery.dead`, a failing streak). `None` when the delivery was cancelled while the attempt was in
/// flight (by its tenant, or its channel was deleted): the attempt is logged and nothing else
/// changes (no circuit, no retry).
pub async fn after_attempt(
    tx: &mut PgConnection,
    a: &AttemptResult<'_>,
    cfg: &CircuitConfig,
    hosts_cfg: &HostsConfig,
    max_attempts: i32,
) -> Result<Option<AfterAttempt>> {
    let d = a.dispatch;
    let class = a.class;
    let locked = lock_for_result(
        tx,
        d.channel_id,
        class,
        a.probe(),
        a.failures_before,
        d.rejected,
    )
    .await?;
    let record = AttemptRecord {
        delivery_id: d.id,
        channel_id: d.channel_id,
        probe: a.probe(),
        started_at: d.started_at,
        duration_ms: i32::try_from(a.duration.as_millis()).unwrap_or(i32::MAX),
        class,
        last_attempt: a.last_attempt,
        channel_parked: locked.is_some_and(State::parks_new_deliveries),
        status_code: a.observed.status_code().map(i32::from),
        error_kind: a.observed.error_kind(),
        error: (class != Class::Success).then_some(a.error),
        response_excerpt: a.response_excerpt,
        node_id: a.node_id,
        url: &d.url,
        host_key: d.host_key.as_deref(),
    };
    let (endpoint, status) = match deliveries::record_attempt(tx, &record).await? {
        Recorded::Applied { endpoint, status } => (endpoint, status),
        Recorded::Cancelled => return Ok(None),
    };
    let (retry_after, transitions) =
        move_circuits(tx, a, endpoint, cfg, hosts_cfg, max_attempts).await?;
    // Delivery-level alert events: a death's `delivery.dead`, a failing
    // streak's start. In this transaction, so a result rolled back alerts nothing.
    if class != Class::Success {
        let failed = alerts::events::FailedAttempt {
            delivery_id: d.id,
            channel_id: d.channel_id,
            status,
            error: a.error,
            url_changed: endpoint.url_changed,
        };
        alerts::events::after_failed_attempt(tx, &failed).await?;
    }
    Ok(Some(AfterAttempt {
        status,
        endpoint,
        retry_after,
        transitions,
        feedback: feedback(class, endpoint.url_changed, a.token_failure, a.duration),
    }))
}

/// Everything an attempt does to the circuits, in the caller's transaction (the one that
/// recorded the attempt, before the job is finished), for the winners of each conditional
/// UPDATE only:
/// 1. the host circuit ([`hosts::record_result`], with the answer's [`host_class`]: a 429 is
///    not a host failure) first, after the channel row's lock (**Locks**, below); a failure at
///    the channel's OAuth2 token endpoint ([`AttemptResult::token_failure`]) is none of the
///    host's (a host probe's role passes on);
/// 2. a `Retry-After` hold on the channel ([`set_retry_after`]): an HTTP-date is turned into a
///    wait against the database's clock (this transaction's `now()`), never the node's;
/// 3. the channel circuit: a probe's success ([`probe_succeeded`], which may replay dead letters
///    as jobs of `max_attempts` attempts) or failure ([`probe_failed`]) or permanent failure
///    ([`probe_inconclusive`]); a non-probe's transient failure ([`record_failure`]) or success
///    after failures ([`record_success`]); a permanent failure of a non-probe moves nothing;
/// 4. the endpoint-rejection streak (401/403, [`crate::alerts::endpoint_rejected`]), ended by
///    the next success ([`crate::alerts::rejection_cleared`]).
///
/// An answer from an endpoint the channel no longer has (its URL changed while the request was
/// in flight, [`Endpoint`]) moves nothing of the channel's: no hold, no failure or success
/// counted, no rejection streak; a channel probe's answer is inconclusive (the role passes on:
/// to a waiting delivery at once, or to the probe's own retry after its backoff). The host's
/// circuit takes it only if the channel's host key is unchanged; a host probe's answer from
/// the host its channel left hands that host's probe role on to another of its waiting
/// deliveries at once ([`hosts::hand_on_stale_probe`]), rather than waiting for the probe's
/// lease (`hosts.probe_lease_ms`, 60 s by default).
///
/// **Locks.** [`after_attempt`] took [`lock_for_result`] first, before recording the attempt, so
/// for every result that writes here `endpoint` is exact (a `PATCH` of the URL committed before it,
/// or waits for this transaction), and the locks come in the order of a `PATCH` or a pause:
/// channel row, delivery row (the attempt's record), then the channel's job group row
/// ([`hosts::record_result`], or before a stale host probe's hand-on), host row, gate row. A
/// success that writes nothing here (a non-probe's, with no failures before and no rejection
/// streak) takes no channel lock: only the worker's adaptive-limit feedback goes by its
/// unlocked comparison (a `PATCH` committing in those milliseconds lets the new URL's limit
/// learn from one old answer).
///
/// No gate is read here: the admission's read ([`admit`]) is what the attempt ran under, and
/// every statement is conditional on the state it moves from.
async fn move_circuits(
    tx: &mut PgConnection,
    a: &AttemptResult<'_>,
    endpoint: Endpoint,
    cfg: &CircuitConfig,
    hosts_cfg: &HostsConfig,
    max_attempts: i32,
) -> Result<(Option<Duration>, Vec<audit::Transitioned>)> {
    let d = a.dispatch;
    let class = a.class;
    let mut transitions = Vec::new();
    if a.token_failure {
        // The host of the channel's URL was never reached: nothing counted against it.
        if let (Some(generation), Some(key)) = (a.host_probe, d.host_key.as_deref()) {
            hosts::hand_on_inconclusive_probe(tx, d.channel_id, key, d.id, generation).await?;
        }
    } else if !endpoint.host_changed {
        let host = hosts::record_result(
            tx,
            d.channel_id,
            a.host_probe,
            host_class(a.observed),
            a.failures_before,
            a.error,
            hosts_cfg,
        )
        .await?;
        transitions.extend(host.map(|t| t.counted()));
    } else if let (Some(generation), Some(old)) = (a.host_probe, d.host_key.as_deref()) {
        hosts::hand_on_stale_probe(tx, d.channel_id, old, d.id, generation).await?;
    }
    if endpoint.url_changed {
        if let Some(generation) = a.probe_generation {
            probe_inconclusive(tx, d.channel_id, generation, cfg).await?;
        }
        return Ok((None, transitions));
    }
    let retry_after = retry_after_wait(tx, a, cfg).await?;
    if let Some(wait) = retry_after {
        set_retry_after(&mut *tx, d.channel_id, wait).await?;
    }
    let channel = match (class, a.probe_generation) {
        (Class::Success, Some(generation)) => {
            probe_succeeded(tx, d.channel_id, generation, max_attempts, cfg)
                .await?
                .map(|s| s.counted())
        }
        (Class::Success, None) if a.failures_before > 0 => {
            record_success(&mut *tx, d.channel_id).await?;
            None
        }
        (Class::Transient, Some(generation)) => {
            probe_failed(tx, d.channel_id, generation, a.error, cfg)
                .await?
                .map(|t| t.counted())
        }
        (Class::Transient, None) => record_failure(tx, d.channel_id, a.error, cfg)
            .await?
            .map(|t| t.counted()),
        // Permanent failures never move the circuit; a probe's passes the role on at once.
        (Class::Permanent, Some(generation)) => {
            probe_inconclusive(tx, d.channel_id, generation, cfg).await?;
            None
        }
        (Class::Success, None) | (Class::Permanent, None) => None,
    };
    transitions.extend(channel);
    // An endpoint that rejects us (401/403): recorded on the channel; the first of a streak is
    // audited and alerted once (alerts.rs); the next success ends the streak.
    match (class, a.observed) {
        (Class::Permanent, Observed::Status(status)) if is_configuration_problem(a.observed) => {
            alerts::endpoint_rejected(tx, d.channel_id, status, a.error).await?;
        }
        (Class::Success, _) if d.rejected => {
            alerts::rejection_cleared(&mut *tx, d.channel_id).await?;
        }
        _ => {}
    }
    Ok((retry_after, transitions))
}

/// An attempt whose failure this node's own stall explains
/// ([`crate::outcome::stall_excuses`]): it is not recorded and moves nothing
/// — no attempt row, no failure of the channel or of its host, no hold, no concurrency
/// feedback — except that a probe's role passes on, as for an inconclusive answer: a host
/// probe's to another waiting delivery of the host ([`hosts::hand_on_inconclusive_probe`]),
/// then a channel probe's ([`probe_inconclusive`]), each conditional on its generation (a
/// stale one changes nothing). In the caller's transaction, before it snoozes the job (which
/// puts the delivery back to `pending` without using an attempt). Locks in the order of
/// [`after_attempt`]: the channel row first (a probe's only), then the group, host and gate
/// rows.
pub async fn attempt_inconclusive(
    tx: &mut PgConnection,
    a: &AttemptResult<'_>,
    cfg: &CircuitConfig,
) -> Result<()> {
    if !a.probe() {
        return Ok(());
    }
    let d = a.dispatch;
    sqlx::query("SELECT 1 FROM channels WHERE id = $1 FOR NO KEY UPDATE")
        .bind(d.channel_id)
        .execute(&mut *tx)
        .await?;
    if let (Some(generation), Some(key)) = (a.host_probe, d.host_key.as_deref()) {
        hosts::hand_on_inconclusive_probe(tx, d.channel_id, key, d.id, generation).await?;
    }
    if let Some(generation) = a.probe_generation {
        probe_inconclusive(tx, d.channel_id, generation, cfg).await?;
    }
    Ok(())
}

/// The answer's `Retry-After` as a wait, if its class honours one: seconds as given, an
/// HTTP-date against the database's clock (this transaction's `now()`, which
/// [`set_retry_after`] adds the wait to); capped at `cfg.retry_after_cap_ms`.
async fn retry_after_wait(
    tx: &mut PgConnection,
    a: &AttemptResult<'_>,
    cfg: &CircuitConfig,
) -> Result<Option<Duration>> {
    let Some(value) = a.retry_after.filter(|_| honours_retry_after(a.observed)) else {
        return Ok(None);
    };
    Ok(parse_retry_after(
        value,
        SystemTime::from(crate::clock::db_now(&mut *tx).await?),
        Duration::from_millis(cfg.retry_after_cap_ms as u64),
    ))
}

impl AttemptResult<'_> {
    /// Whether this result moves nothing but its own delivery and job: a success that is no
    /// probe, of a channel with no failures before it ([`AttemptResult::failures_before`]) and
    /// in no rejection streak (a success honours no `Retry-After`). Such a result takes no
    /// channel lock ([`locks_channel`]), writes no circuit, host or hold ([`after_attempt`] with
    /// it changes the delivery and logs the attempt, nothing else), so the worker may record it
    /// in a batch with others ([`crate::deliveries::record_successes`]). Every other result goes
    /// through [`after_attempt`] in a transaction of its own.
    pub fn moves_nothing(&self) -> bool {
        self.class == Class::Success
            && !self.probe()
            && self.failures_before == 0
            && !self.dispatch.rejected
    }
}

/// Whether recording an attempt's result takes its channel row's lock first
/// ([`lock_for_result`]): every failure (a transient one may move a circuit; a permanent one
/// makes the delivery dead only if the channel still has the URL it was sent to), every channel
/// probe's or host probe's answer (`probe`), and a success that writes the channel: one after
/// failures (`failures_before > 0`: the counts and the host's failure row are cleared) or in an
/// endpoint-rejection streak (`rejected`). Any other success takes none, so a healthy channel's
/// results do not queue behind one another. (A success after failures that took the host's
/// failure row before the channel row would deadlock with a failure of the same channel
/// holding the channel row and inserting that failure row.)
pub fn locks_channel(class: Class, probe: bool, failures_before: i32, rejected: bool) -> bool {
    class != Class::Success || probe || failures_before > 0 || rejected
}

/// The first step of [`after_attempt`], before [`crate::deliveries::record_attempt`]: locks
/// channel `channel_id`'s row
/// (`FOR NO KEY UPDATE`, the lock its circuit's updates take anyway) if [`locks_channel`], so
/// that statement's comparison of the endpoint ([`Endpoint`]) is exact for every result that
/// writes the channel or its circuits: a `PATCH` of the URL either committed before (seen) or
/// waits for this transaction. (Compared unlocked and again under a later lock, a `PATCH` that
/// committed between the two would leave a late `4xx` of the old URL's delivery dead.)
/// Channel row before the delivery's
/// row: the order of a pause, a deletion, a probe's replay and a tenant's replay. Returns the
/// channel's circuit state read under the lock (exact until the transaction ends: a pause waits
/// for it), or `None` when it took no lock (channels are deleted softly, so a locked row is
/// always found).
async fn lock_for_result(
    tx: &mut PgConnection,
    channel_id: Uuid,
    class: Class,
    probe: bool,
    failures_before: i32,
    rejected: bool,
) -> Result<Option<State>> {
    if !locks_channel(class, probe, failures_before, rejected) {
        return Ok(None);
    }
    Ok(
        sqlx::query_scalar("SELECT circuit_state FROM channels WHERE id = $1 FOR NO KEY UPDATE")
            .bind(channel_id)
            .fetch_optional(&mut *tx)
            .await?,
    )
}
