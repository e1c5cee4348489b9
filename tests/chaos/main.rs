//! The chaos suite: real `breakwater serve` processes against a Postgres cluster the test starts
//! itself, real receivers on loopback, and one fault per scenario:
//!
//! - [`worker_killed`]: `kill -9` of a worker node mid-load;
//! - [`worker_frozen`]: `SIGSTOP` of a worker past the rescue time, then `SIGCONT` (with a
//!   second worker that rescues, and as the only worker, which must take back none of its own
//!   jobs);
//! - [`result_frozen`]: a worker frozen inside its result transaction (placed there by the test),
//!   while another worker serves another tenant;
//! - [`database_down`]: Postgres stopped for [`database_down::OUTAGE`] while results are being
//!   written;
//! - [`database_cut`]: both workers' path to Postgres cut for [`database_cut::OUTAGE`] (45 s)
//!   under load: every result they hold is written afterwards, no live claim is rescued, 0
//!   lost and 0 duplicates;
//! - [`worker_drained`]: `SIGTERM` of a worker with work in flight;
//! - [`worker_stalled`]: `SIGSTOP` of the only worker past its request timeout with requests in
//!   flight to a host that answers: no failure may be counted against it;
//! - [`listener_blackholed`]: the queue listener's path to Postgres silently drops packets (a
//!   proxy in the test): noticed, reconnected, logged, wake-ups prompt again.
//!
//! - [`cells`]: two tenant cells (each its own Postgres and node) behind the router of
//!   `deploy/cells/` (HAProxy): a key reaches only its cell, the operator sees both, a flood in
//!   one leaves the other's p95; `#[ignore]`d here, run by `deploy/cells/test.sh`.
//! - [`ha`]: the HA topology of `deploy/ha/` (Patroni × 3, etcd, HAProxy) under load, one
//!   failover fault per scenario; `#[ignore]`d here, run by `deploy/ha/chaos.sh`.
//!
//! Every scenario ends the same way ([`verdict::settle`]): every delivery the API accepted is
//! `delivered` within a bounded wait once the fault is over (0 lost), `breakwater doctor` finds
//! no broken invariant, and the only deliveries the receiver got more than once are among those
//! in flight at the fault, read from the database at the fault.
//!
//! A scenario takes 12–20 s, the database outage 35 s, the cut 60–70 s (the suite about two
//! minutes on 2 cores,
//! plus the binary's build when it is stale). Run it with
//! `cargo nextest run -p breakwater-e2e --test chaos`; it uses the `breakwater` binary of the
//! same target directory and profile, and builds it first when it is missing or older than the
//! test. Node logs are kept under `<target>/test-artifacts/chaos/<scenario>/` and their tails
//! printed when a check fails.

mod cells;
mod cluster;
mod database_cut;
mod database_down;
mod ha;
mod listener_blackholed;
mod producer;
mod result_frozen;
mod topology;
mod verdict;
mod worker_drained;
mod worker_frozen;
mod worker_killed;
mod worker_stalled;
