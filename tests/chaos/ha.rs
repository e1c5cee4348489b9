//! The HA chaos test: the topology of `deploy/ha/` ([`Topology`]: etcd, Patroni × 3
//! in strict synchronous mode, HAProxy), two `breakwater serve` nodes (API and workers) whose
//! DATABASE_URL is HAProxy's write listener, a receiver on loopback, and a [`Producer`] sending
//! 60 requests/s (single deliveries and messages, each with its own idempotency key, retried
//! with it on any error). One fault per scenario:
//!
//! - [`primary_killed`]: `kill -9` of the primary's postmaster;
//! - [`sync_standby_then_primary_killed`]: `kill -9` of the synchronous standby's node (Patroni and
//!   postmaster), then of the primary's 10 s later; both come back once a new primary is named
//!   (strict mode: no write is acknowledged until a standby is back);
//! - [`primary_patroni_frozen`]: `SIGSTOP` of the primary's Patroni for 30 s (its Postgres runs
//!   on: HAProxy must stop routing to it, the leader key must expire, the old primary must
//!   demote itself when it wakes);
//! - [`primary_killed_during_message_commits`]: `kill -9` of the primary's postmaster while
//!   message commits are under way, then every message key is sent again and must answer the
//!   same message and delivery.
//!
//! Measured and asserted per run ([`Figures`]): lost 0 (every acknowledged delivery is delivered
//! once the load is drained, the receiver got each, the database holds no delivery the API did
//! not acknowledge and no broken invariant), duplicates split by cause (in flight at the fault:
//! executing then, or sent while writes were out; others must be 0), the write outage (the
//! longest time without an acknowledgement from the first fault on) and the delivery stall (the
//! longest time without a 2xx at the receiver from the first fault until the load stops).
//!
//! The scenarios need the Debian packages `patroni`, `etcd-server` and `haproxy` (the script
//! installs them, as root or with sudo) and take 1–2 minutes each, so they are `#[ignore]`d in
//! the ordinary chaos run: `deploy/ha/chaos.sh [fault]` runs them, one at a time.

use crate::cluster::{Cluster, Role};
use crate::producer::{Kind, Produced, Producer, Target};
use crate::topology::Topology;
use crate::verdict::{answered_copies, check_store, wait_delivered};
use breakwater::receiver::Behavior;
use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};
use uuid::Uuid;

/// The node settings of these scenarios, over the chaos suite's: production liveness (heartbeat
/// every 5 s, rescue after 30 s of silence, checked every 10 s), so that a failover, which
/// Patroni's `ttl` keeps well under 30 s, rescues nothing; each channel up to 32 requests at once
/// so the backlog of an outage drains in seconds.
const HA_ENV: &[(&str, &str)] = &[
    ("BREAKWATER_WORKER__HEARTBEAT_INTERVAL_MS", "5000"),
    ("BREAKWATER_WORKER__RESCUE_AFTER_MS", "30000"),
    ("BREAKWATER_WORKER__RESCUE_INTERVAL_MS", "10000"),
    ("BREAKWATER_WORKER__CHANNEL_CONCURRENCY_INITIAL", "32"),
    ("BREAKWATER_WORKER__CHANNEL_CONCURRENCY_CEILING", "32"),
];

/// The endpoint of the single deliveries and the one of the messages.
const DIRECT: &str = "direct";
const MESSAGES: &str = "messages";
const ENDPOINTS: &[&str] = &[DIRECT, MESSAGES];

/// Requests per second (each one delivery: a message goes to one channel).
const RATE: u32 = 60;

/// How long the load goes on once writes are back after the last fault (or the fault's end).
const AFTER: Duration = Duration::from_secs(8);

/// Bounds of the waits: a new primary named, a write committed through HAProxy, every request
/// acknowledged once the load stops, every delivery delivered after that.
const FAILOVER_TIMEOUT: Duration = Duration::from_secs(40);
const WRITES_TIMEOUT: Duration = Duration::from_secs(60);
const GIVE_UP: Duration = Duration::from_secs(60);
const DRAIN_TIMEOUT: Duration = Duration::from_secs(60);

/// What a scenario measured.
struct Figures {
    /// Requests acknowledged (= deliveries accepted), of them messages.
    acked: usize,
    messages: usize,
    /// Acknowledged only after a retry.
    retried: usize,
    /// Delivered deliveries the receiver never got 2xx for (asserted 0).
    lost: usize,
    /// Deliveries answered 2xx more than once, in flight at the fault and not.
    duplicates_in_flight: usize,
    duplicates_other: usize,
    /// Deliveries in flight at the fault.
    in_flight: usize,
    /// The longest time without an acknowledgement from the first fault on.
    write_outage: Duration,
    /// From the last fault until a write committed through HAProxy.
    writes_back: Duration,
    /// The longest time without a 2xx at the receiver from the first fault until the load
    /// stopped.
    delivery_stall: Duration,
    /// From the end of the load until every delivery was delivered.
    drained: Duration,
}

impl std::fmt::Display for Figures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} acknowledged ({} messages, {} after a retry); lost {}; duplicates {} in flight at \
             the fault (of {}) + {} other; write outage {:.1} s (a write through HAProxy {:.1} s \
             after the last fault); delivery stall {:.1} s; drained {:.1} s after the load",
            self.acked,
            self.messages,
            self.retried,
            self.lost,
            self.duplicates_in_flight,
            self.in_flight,
            self.duplicates_other,
            self.write_outage.as_secs_f64(),
            self.writes_back.as_secs_f64(),
            self.delivery_stall.as_secs_f64(),
            self.drained.as_secs_f64()
        )
    }
}

/// A scenario under way: the topology, the nodes, the producer, what was executing at each
/// fault, when each fault struck and when writes were back after it.
struct Run {
    producer: Option<Producer>,
    /// Dropped before the topology (fields drop in order): the nodes stop first.
    c: Cluster,
    ha: Topology,
    target: Target,
    executing: BTreeSet<Uuid>,
    faults: Vec<Instant>,
    /// When writes were back after each fault (for the last one, the argument of
    /// [`Run::finish`]).
    backs: Vec<Instant>,
}

impl Run {
    /// Starts the topology, two nodes on it, a tenant with a channel for single deliveries and
    /// one with a channel for messages (endpoints answering 200 in 50 ms), and the producer
    /// (`message_every`: every n-th request a message); returns once the load flows (200
    /// acknowledgements, 100 requests received).
    async fn start(name: &'static str, message_every: u64) -> Self {
        let artifacts = crate::cluster::artifact_dir(name);
        let ha = Topology::up(name, &artifacts).await;
        let mut c = Cluster::start_on(name, &ha.url, HA_ENV).await;
        let mut apis = Vec::new();
        for _ in 0..2 {
            let i = c.spawn(Role::All).await;
            apis.push(c.node(i).api.clone().expect("an API node"));
        }
        let ok = Behavior::Delay(Duration::from_millis(50), 200);
        let delivery_key = c.tenant().await;
        let channel = c.channel(&delivery_key, DIRECT, ok.clone()).await;
        let message_key = c.tenant().await;
        c.channel(&message_key, MESSAGES, ok).await;
        let target = Target {
            apis,
            delivery_key,
            channel,
            message_key,
            message_every,
            rate: RATE,
        };
        let producer = Producer::start(c.http.clone(), target.clone());
        let flowing = breakwater_e2e::eventually_every(
            Duration::from_secs(30),
            Duration::from_millis(20),
            || {
                let acked = producer.acked();
                let received = ENDPOINTS.iter().map(|e| c.receiver.count(e)).sum::<usize>();
                async move { acked >= 200 && received >= 100 }
            },
        )
        .await;
        assert!(flowing, "the load did not flow within 30 s");
        Self {
            producer: Some(producer),
            c,
            ha,
            target,
            executing: BTreeSet::new(),
            faults: Vec::new(),
            backs: Vec::new(),
        }
    }

    fn producer(&self) -> &Producer {
        self.producer.as_ref().expect("the producer runs")
    }

    /// The node Patroni names primary now; panics when there is none.
    async fn primary(&self) -> String {
        self.ha.primary().await.expect("a primary")
    }

    /// `cluster.sh <fault> <node>`, noting what is executing just before and when it struck.
    async fn strike(&mut self, fault: &str, node: &str) {
        self.executing.extend(self.c.executing(None).await);
        self.faults.push(Instant::now());
        self.ha.fault(fault, node).await;
        eprintln!(
            "ha[{}]: {fault} {node} at {:.1} s",
            self.c.name,
            self.c.started.elapsed().as_secs_f64()
        );
    }

    /// Waits until a primary other than `old` is named and a write commits through HAProxy;
    /// returns when that write committed.
    async fn failover(&self, old: &str) -> Instant {
        let new = self.ha.new_primary(old, FAILOVER_TIMEOUT).await;
        let back = self.ha.wait_writes(WRITES_TIMEOUT).await;
        eprintln!(
            "ha[{}]: {new} is primary, writes back at {:.1} s",
            self.c.name,
            back.duration_since(self.c.started).as_secs_f64()
        );
        back
    }

    /// Lets the load run [`AFTER`] past `writes_back` (the scenario's script: a time of normal
    /// service after the fault, not a wait for a state), stops it, drains, checks and measures.
    async fn finish(&mut self, writes_back: Instant) -> (Figures, Produced) {
        tokio::time::sleep(AFTER).await;
        let load_end = Instant::now();
        let produced = self
            .producer
            .take()
            .expect("the producer runs")
            .stop(GIVE_UP)
            .await;
        assert!(
            produced.unacked.is_empty(),
            "{} requests never acknowledged within {GIVE_UP:?} of the end of the load, e.g. {:?}",
            produced.unacked.len(),
            &produced.unacked[..produced.unacked.len().min(5)]
        );
        let c = &self.c;
        let accepted: Vec<Uuid> = produced.acks.iter().map(|a| a.delivery).collect();
        let distinct: BTreeSet<Uuid> = accepted.iter().copied().collect();
        assert_eq!(
            distinct.len(),
            accepted.len(),
            "two idempotency keys were acknowledged with the same delivery"
        );
        let aliases: HashMap<Uuid, Uuid> = produced
            .acks
            .iter()
            .filter_map(|a| Some((a.message?, a.delivery)))
            .collect();
        let drained = wait_delivered(c, ENDPOINTS, &accepted, Instant::now(), DRAIN_TIMEOUT).await;
        check_store(c, accepted.len()).await;
        // Panics unless every accepted delivery was answered 2xx at least once: lost 0.
        let copies = answered_copies(c, ENDPOINTS, &accepted, &aliases).await;
        let lost = accepted.iter().filter(|d| !copies.contains_key(d)).count();

        let first_fault = *self.faults.first().expect("a fault struck");
        let last_fault = *self.faults.last().expect("a fault struck");
        let received = c.received(ENDPOINTS);
        let delivery_of = |r: &breakwater::receiver::Received| -> Option<Uuid> {
            let id: Uuid = r.webhook_id.as_deref()?.parse().ok()?;
            Some(aliases.get(&id).copied().unwrap_or(id))
        };
        // In flight at a fault: executing just before it, or sent from then until writes were
        // back (claimed before it: no claim commits while writes are out).
        self.backs.push(writes_back);
        let windows: Vec<(Instant, Instant)> = self
            .faults
            .iter()
            .copied()
            .zip(self.backs.iter().copied())
            .collect();
        let mut in_flight = self.executing.clone();
        in_flight.extend(
            received
                .iter()
                .filter(|r| windows.iter().any(|(f, b)| r.at >= *f && r.at <= *b))
                .filter_map(delivery_of),
        );
        let duplicated: Vec<Uuid> = copies
            .iter()
            .filter(|(_, n)| **n > 1)
            .map(|(d, _)| *d)
            .collect();
        let other: Vec<Uuid> = duplicated
            .iter()
            .filter(|d| !in_flight.contains(d))
            .copied()
            .collect();
        let acked_at: Vec<Instant> = produced.acks.iter().map(|a| a.acked).collect();
        let ok_at: Vec<Instant> = received
            .iter()
            .filter(|r| r.answered.is_some_and(|s| (200..300).contains(&s)))
            .map(|r| r.at)
            .collect();
        let figures = Figures {
            acked: accepted.len(),
            messages: produced
                .acks
                .iter()
                .filter(|a| a.kind == Kind::Message)
                .count(),
            retried: produced.acks.iter().filter(|a| a.tries > 1).count(),
            lost,
            duplicates_in_flight: duplicated.len() - other.len(),
            duplicates_other: other.len(),
            in_flight: in_flight.len(),
            write_outage: longest_gap(&acked_at, first_fault, load_end),
            writes_back: writes_back.duration_since(last_fault),
            delivery_stall: longest_gap(&ok_at, first_fault, load_end),
            drained,
        };
        println!("chaos[{}]: {figures}", c.name);
        assert!(
            other.is_empty(),
            "{} duplicated deliveries were not in flight at the fault ({figures}):\n{}",
            other.len(),
            crate::verdict::describe(c, ENDPOINTS, &other[..other.len().min(10)]).await
        );
        (figures, produced)
    }
}

/// The longest time in `[from, to]` without an event of `times` (the time from `from` to the
/// first event counts, and from the last one to `to`).
fn longest_gap(times: &[Instant], from: Instant, to: Instant) -> Duration {
    let mut inside: Vec<Instant> = times
        .iter()
        .copied()
        .filter(|t| *t >= from && *t <= to)
        .collect();
    inside.sort();
    let mut last = from;
    let mut longest = Duration::ZERO;
    for t in inside.into_iter().chain([to]) {
        longest = longest.max(t.duration_since(last));
        last = t;
    }
    longest
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the HA topology (patroni, etcd, haproxy): deploy/ha/chaos.sh"]
async fn primary_killed() {
    let mut run = Run::start("ha_primary_killed", 4).await;
    let primary = run.primary().await;
    run.strike("kill-postgres", &primary).await;
    let back = run.failover(&primary).await;
    run.finish(back).await;
    run.c.stop_all(Duration::from_secs(15)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the HA topology (patroni, etcd, haproxy): deploy/ha/chaos.sh"]
async fn sync_standby_then_primary_killed() {
    let mut run = Run::start("ha_sync_standby_then_primary_killed", 4).await;
    let primary = run.primary().await;
    let standby = run.ha.sync_standby().await.expect("a synchronous standby");
    run.strike("kill-node", &standby).await;
    // Patroni names the third node synchronous standby; until then commits wait.
    let back = run.ha.wait_writes(WRITES_TIMEOUT).await;
    run.backs.push(back);
    // The fault's script: the primary goes 10 s after its standby.
    tokio::time::sleep(Duration::from_secs(10).saturating_sub(run.faults[0].elapsed())).await;
    run.strike("kill-node", &primary).await;
    // The third node, synchronous standby since the first kill, takes over; in strict mode it
    // acknowledges nothing until a standby is back, so both come back (as their service manager
    // would restart them) once it is named.
    run.ha.new_primary(&primary, FAILOVER_TIMEOUT).await;
    run.ha.fault("start-node", &standby).await;
    run.ha.fault("start-node", &primary).await;
    let back = run.failover(&primary).await;
    run.finish(back).await;
    run.c.stop_all(Duration::from_secs(15)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the HA topology (patroni, etcd, haproxy): deploy/ha/chaos.sh"]
async fn primary_patroni_frozen() {
    let mut run = Run::start("ha_primary_patroni_frozen", 4).await;
    let primary = run.primary().await;
    run.strike("freeze", &primary).await;
    let back = run.failover(&primary).await;
    // The fault's script: Patroni stays frozen for 30 s in all.
    let frozen_for = Duration::from_secs(30).saturating_sub(run.faults[0].elapsed());
    tokio::time::sleep(frozen_for).await;
    run.ha.fault("thaw", &primary).await;
    run.finish(back).await;
    run.c.stop_all(Duration::from_secs(15)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the HA topology (patroni, etcd, haproxy): deploy/ha/chaos.sh"]
async fn primary_killed_during_message_commits() {
    // Every other request a message.
    let mut run = Run::start("ha_primary_killed_during_message_commits", 2).await;
    let primary = run.primary().await;
    let producer = run.producer();
    let committing =
        breakwater_e2e::eventually_every(Duration::from_secs(10), Duration::from_millis(1), || {
            let pending = producer.pending_messages();
            async move { pending >= 1 }
        })
        .await;
    assert!(committing, "no message request was under way within 10 s");
    run.strike("kill-postgres", &primary).await;
    let back = run.failover(&primary).await;
    let (figures, produced) = run.finish(back).await;

    // Every message key again, alternately on each node: the same message and delivery, marked
    // a replay, and nothing new to send (the store check below counts the deliveries).
    let mut replayed = 0;
    for (i, ack) in produced
        .acks
        .iter()
        .filter(|a| a.kind == Kind::Message)
        .enumerate()
    {
        let v = ack
            .replay(&run.c.http, &run.target, i)
            .await
            .unwrap_or_else(|e| panic!("replay of {}: {e}", ack.key));
        assert_eq!(v["idempotent_replay"], true, "replay of {}: {v}", ack.key);
        assert_eq!(
            v["id"].as_str().and_then(|s| s.parse::<Uuid>().ok()),
            ack.message,
            "replay of {}: {v}",
            ack.key
        );
        assert_eq!(
            v["deliveries"][0]["delivery_id"]
                .as_str()
                .and_then(|s| s.parse::<Uuid>().ok()),
            Some(ack.delivery),
            "replay of {}: {v}",
            ack.key
        );
        replayed += 1;
    }
    check_store(&run.c, figures.acked).await;
    let kill = run.faults[0];
    let under_way = produced
        .acks
        .iter()
        .filter(|a| a.kind == Kind::Message && a.sent <= kill && a.acked >= kill)
        .count();
    println!(
        "chaos[{}]: {under_way} message requests under way at the kill (sent before it, \
         acknowledged after it); {replayed} message keys replayed, each the same message and \
         delivery",
        run.c.name
    );
    run.c.stop_all(Duration::from_secs(15)).await;
}
