//! The channel circuit's steps, called directly on the test database (the probe watcher's and
//! the operator's), for tests that walk a circuit through its states without waiting for a
//! worker to do it.

use breakwater_core::circuit::{CircuitConfig, ProbeStep};
use breakwater_core::testing;
use sqlx::PgPool;
use uuid::Uuid;

/// Opens `channel`'s closed circuit as the operator does (reason `"test"`), in its own committed
/// transaction; panics when it was not closed.
pub async fn open_circuit(pool: &PgPool, channel: Uuid, cfg: &CircuitConfig) {
    let mut tx = pool.begin().await.unwrap();
    testing::open_from_closed(&mut tx, channel, "test", "operator", cfg)
        .await
        .unwrap()
        .expect("opened");
    tx.commit().await.unwrap();
}

/// Ends `channel`'s cooldown now (`next_probe_at = now()`, the database clock): its next probe
/// step may start a probe.
pub async fn end_cooldown(pool: &PgPool, channel: Uuid) {
    sqlx::query("UPDATE channels SET next_probe_at = now() WHERE id = $1")
        .bind(channel)
        .execute(pool)
        .await
        .unwrap();
}

/// One step of the probe watcher for `channel` ([`testing::probe_step`]), in its own committed
/// transaction.
pub async fn probe_step(pool: &PgPool, channel: Uuid, cfg: &CircuitConfig) -> ProbeStep {
    let mut tx = pool.begin().await.unwrap();
    let step = testing::probe_step(&mut tx, channel, cfg).await.unwrap();
    tx.commit().await.unwrap();
    step
}
