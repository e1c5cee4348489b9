//! Cancelling jobs, against a real Postgres (a fresh database per test).

use breakwater_queue::{
    cancel, cancel_groups, cancel_keys, complete, enqueue, fetch, group_state, park_group, NewJob,
};
use chrono::Utc;
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

mod support;
use support::uncapped;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations");

async fn state(pool: &PgPool, id: i64) -> String {
    sqlx::query_scalar("SELECT state FROM jobs WHERE id = $1")
        .bind(id)
        .fetch_one(pool)
        .await
        .unwrap()
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn cancel_groups_ends_waiting_and_parked_jobs_and_leaves_running_ones(pool: PgPool) {
    let mut conn = pool.acquire().await.unwrap();
    let (g, parked, other) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
    let job = |n: i64, group: Uuid| NewJob::new("q", "test", json!({ "n": n })).group(group);
    let running = enqueue(&mut conn, &job(0, g)).await.unwrap().unwrap();
    let claimed = fetch(&pool, "q", "n1", 1, &uncapped()).await.unwrap();
    assert_eq!(claimed[0].id, running);
    let due = enqueue(&mut conn, &job(1, g)).await.unwrap().unwrap();
    let later = enqueue(
        &mut conn,
        &job(2, g).scheduled_at(Utc::now() + chrono::Duration::hours(1)),
    )
    .await
    .unwrap()
    .unwrap();
    let held = enqueue(&mut conn, &job(3, parked)).await.unwrap().unwrap();
    park_group(&mut conn, parked).await.unwrap();
    let untouched = enqueue(&mut conn, &job(4, other)).await.unwrap().unwrap();

    let n = cancel_groups(&mut *conn, &[g, parked], "called off")
        .await
        .unwrap();
    assert_eq!(n, 3, "two waiting jobs of g and the parked one");
    for id in [due, later, held] {
        assert_eq!(state(&pool, id).await, "cancelled");
    }
    assert_eq!(state(&pool, running).await, "executing");
    assert_eq!(state(&pool, untouched).await, "available");
    let errors: serde_json::Value = sqlx::query_scalar("SELECT errors FROM jobs WHERE id = $1")
        .bind(due)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(errors[0]["error"], "called off");

    // The running job finishes normally and frees its slot; nothing of g is fetched again.
    assert!(complete(&pool, running, claimed[0].claim_token)
        .await
        .unwrap());
    assert_eq!(group_state(&pool, g).await.unwrap().unwrap().in_flight, 0);
    let next = fetch(&pool, "q", "n1", 10, &uncapped()).await.unwrap();
    assert_eq!(
        next.iter().map(|j| j.id).collect::<Vec<_>>(),
        vec![untouched]
    );
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn cancel_keys_frees_the_key_and_cancel_fences_a_claim(pool: PgPool) {
    let mut conn = pool.acquire().await.unwrap();
    let keyed = |k: &str| NewJob::new("q", "test", json!({})).unique_key(k);
    let a = enqueue(&mut conn, &keyed("a")).await.unwrap().unwrap();
    assert_eq!(
        cancel_keys(&mut *conn, &["a".into(), "missing".into()], "no")
            .await
            .unwrap(),
        1
    );
    assert_eq!(state(&pool, a).await, "cancelled");
    // A cancelled job is not live: the key can be used again.
    let a2 = enqueue(&mut conn, &keyed("a")).await.unwrap().unwrap();
    let claimed = fetch(&pool, "q", "n1", 1, &uncapped()).await.unwrap();
    assert_eq!(claimed[0].id, a2);
    // An executing job is not a waiting one: cancel_keys leaves it to its handler.
    assert_eq!(
        cancel_keys(&mut *conn, &["a".into()], "no").await.unwrap(),
        0
    );
    // The handler ends it as cancelled, fenced by its claim token.
    assert!(!cancel(&pool, a2, Uuid::new_v4(), "stale").await.unwrap());
    assert!(cancel(&pool, a2, claimed[0].claim_token, "called off")
        .await
        .unwrap());
    assert_eq!(state(&pool, a2).await, "cancelled");
    let finalized: bool =
        sqlx::query_scalar("SELECT finalized_at IS NOT NULL FROM jobs WHERE id = $1")
            .bind(a2)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(finalized, "cancelled jobs are pruned like other final jobs");
}
