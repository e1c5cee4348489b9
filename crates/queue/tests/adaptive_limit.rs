//! The adaptive concurrency limit of a group ([`adapt_limit`]) against a real Postgres: it
//! follows the group's own latency (grows while the recent latency stays within the tolerance of
//! the baseline, however slow that is; is cut when it rises past it, or on overload), within
//! the floor and the ceiling or the group's `max_in_flight`.
//!
//! The tests feed `adapt_limit` directly, as the worker does after each attempt. A group "busy"
//! has as many jobs in flight as its limit (the growth rule's `in_flight ≥ limit / 2` holds, as
//! for a group with a backlog); its `in_flight` is set on the row, no job runs.

use breakwater_queue::{
    adapt_limit, complete, define_group, enqueue_many, fetch, finish_batch, group_state,
    set_max_in_flight, Feedback, Finish, GroupLimits, GroupState, GroupSuccesses, NewJob,
};
use sqlx::PgPool;
use std::time::Duration;
use uuid::Uuid;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations");

/// One success of `ms` milliseconds.
fn ok(ms: u64) -> Feedback {
    Feedback::Ok {
        latency: Duration::from_millis(ms),
        runs: 1,
    }
}

async fn new_group(pool: &PgPool) -> Uuid {
    let g = Uuid::new_v4();
    define_group(pool, g, None).await.unwrap();
    g
}

async fn state(pool: &PgPool, g: Uuid) -> GroupState {
    group_state(pool, g)
        .await
        .unwrap()
        .expect("the group's row")
}

/// The limit as the fetch reads it (`initial` until the group has one), unclamped.
async fn limit(pool: &PgPool, g: Uuid, limits: &GroupLimits) -> f32 {
    state(pool, g)
        .await
        .concurrency_limit
        .unwrap_or(limits.initial as f32)
}

/// Sets the group's `in_flight` to `n` (what the fetch and the slot trigger keep).
async fn set_in_flight(pool: &PgPool, g: Uuid, n: i32) {
    sqlx::query("UPDATE job_groups SET in_flight = $2 WHERE group_id = $1")
        .bind(g)
        .bind(n)
        .execute(pool)
        .await
        .unwrap();
}

/// Feeds `feedback` to a busy group: first its `in_flight` is set to its whole limit.
async fn busy(pool: &PgPool, g: Uuid, feedback: Feedback, limits: &GroupLimits) -> f32 {
    let l = limit(pool, g, limits).await;
    set_in_flight(pool, g, l.floor() as i32).await;
    adapt_limit(pool, g, feedback, limits).await.unwrap();
    limit(pool, g, limits).await
}

/// Makes the last cut lie a long time back, as if a round trip had passed since.
async fn a_round_trip_passes(pool: &PgPool, g: Uuid) {
    sqlx::query(
        "UPDATE job_groups SET limit_cut_at = now() - interval '1 hour' WHERE group_id = $1",
    )
    .bind(g)
    .execute(pool)
    .await
    .unwrap();
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_steady_slow_group_grows_from_its_initial_limit_to_what_its_backlog_needs(pool: PgPool) {
    let limits = GroupLimits::default();
    let g = new_group(&pool).await;

    // Idle (nothing in flight): a success grows nothing, whatever its latency.
    adapt_limit(&pool, g, ok(2_000), &limits).await.unwrap();
    let s = state(&pool, g).await;
    assert_eq!(s.concurrency_limit, None, "an idle group keeps its initial");
    assert_eq!(
        (s.latency_recent_ms, s.latency_baseline_ms),
        (Some(2_000.0), Some(2_000.0)),
        "the first success sets both estimates"
    );

    // Busy, 2 s per request with ±20 % jitter: every success grows the limit by 1 (the old fixed
    // 1-s target cut it on each of them, to the floor).
    let mut l = limits.initial as f32;
    for (n, ms) in [2_000, 2_400, 1_700, 2_100]
        .into_iter()
        .cycle()
        .take(28)
        .enumerate()
    {
        let next = busy(&pool, g, ok(ms), &limits).await;
        assert_eq!(next, l + 1.0, "success {n} ({ms} ms) grew the limit by 1");
        l = next;
    }
    assert!(l >= 32.0, "4 + 28 successes: {l}");
    for _ in 0..40 {
        busy(&pool, g, ok(2_000), &limits).await;
    }
    assert_eq!(
        limit(&pool, g, &limits).await,
        limits.ceiling as f32,
        "it grows up to the ceiling and stays there"
    );
    let s = state(&pool, g).await;
    let (recent, baseline) = (s.latency_recent_ms.unwrap(), s.latency_baseline_ms.unwrap());
    assert!((1_700.0..=2_400.0).contains(&recent), "recent {recent} ms");
    assert!(
        (1_700.0..=recent).contains(&baseline),
        "baseline {baseline} ms"
    );
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_group_whose_latency_doubles_is_cut_within_a_few_samples_once_per_round_trip(
    pool: PgPool,
) {
    let limits = GroupLimits::default();
    let g = new_group(&pool).await;
    for _ in 0..20 {
        busy(&pool, g, ok(1_000), &limits).await;
    }
    assert_eq!(limit(&pool, g, &limits).await, 24.0);

    // The endpoint slows down under the load: 2 s per request from now on.
    let mut before = limit(&pool, g, &limits).await;
    let mut cut_after = None;
    for n in 1..=10 {
        let after = busy(&pool, g, ok(2_000), &limits).await;
        if after < before {
            assert_eq!(after, before * 0.5, "cut by the decrease factor");
            cut_after = Some(n);
            break;
        }
        before = after;
    }
    let n = cut_after.expect("the limit was cut");
    assert!(n <= 5, "cut after {n} slow samples");
    let cut = limit(&pool, g, &limits).await;

    // Within the round trip after the cut, more slow answers (sent before it) change nothing:
    // no growth (too slow), no second cut.
    for _ in 0..5 {
        assert_eq!(busy(&pool, g, ok(2_000), &limits).await, cut);
    }
    // A round trip later, still slow: cut again.
    a_round_trip_passes(&pool, g).await;
    assert_eq!(busy(&pool, g, ok(2_000), &limits).await, cut * 0.5);

    // If it stays at 2 s for good, the baseline drifts up to it and the limit grows again.
    for _ in 0..60 {
        busy(&pool, g, ok(2_000), &limits).await;
    }
    let s = state(&pool, g).await;
    assert!(
        s.latency_baseline_ms.unwrap() * 1.5 >= s.latency_recent_ms.unwrap(),
        "re-based: {s:?}"
    );
    let l = limit(&pool, g, &limits).await;
    assert_eq!(busy(&pool, g, ok(2_000), &limits).await, l + 1.0, "{s:?}");
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn jitter_of_a_fast_endpoint_below_the_noise_floor_is_no_slowdown(pool: PgPool) {
    let limits = GroupLimits::default();
    let g = new_group(&pool).await;
    busy(&pool, g, ok(5), &limits).await;
    // 5 ms, then 40 ms (8× slower, but all well under the 100-ms noise floor): still growing.
    let mut l = limit(&pool, g, &limits).await;
    for _ in 0..10 {
        let next = busy(&pool, g, ok(40), &limits).await;
        assert_eq!(next, l + 1.0);
        l = next;
    }
    // 400 ms is a slowdown past 1.5 × the floor: cut.
    let mut cut = false;
    for _ in 0..10 {
        let next = busy(&pool, g, ok(400), &limits).await;
        if next < l {
            cut = true;
            break;
        }
        l = next;
    }
    assert!(cut, "a rise from 5 to 400 ms is cut");
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn overloaded_cuts_to_the_floor_and_neutral_changes_nothing(pool: PgPool) {
    let limits = GroupLimits::default();
    let g = new_group(&pool).await;
    for _ in 0..12 {
        busy(&pool, g, ok(300), &limits).await;
    }
    assert_eq!(limit(&pool, g, &limits).await, 16.0);
    let before = state(&pool, g).await;

    adapt_limit(&pool, g, Feedback::Neutral, &limits)
        .await
        .unwrap();
    adapt_limit(
        &pool,
        g,
        Feedback::Ok {
            latency: Duration::from_secs(60),
            runs: 0,
        },
        &limits,
    )
    .await
    .unwrap();
    assert_eq!(
        state(&pool, g).await,
        before,
        "Neutral and 0 runs change nothing"
    );

    // Every overload cuts (no round-trip wait); the latency estimates stay.
    for want in [8.0, 4.0, 2.0, 1.0, 1.0] {
        adapt_limit(&pool, g, Feedback::Overloaded, &limits)
            .await
            .unwrap();
        assert_eq!(limit(&pool, g, &limits).await, want);
    }
    let after = state(&pool, g).await;
    assert_eq!(
        (after.latency_recent_ms, after.latency_baseline_ms),
        (before.latency_recent_ms, before.latency_baseline_ms)
    );

    // From the initial limit (no row value yet) too.
    let h = new_group(&pool).await;
    adapt_limit(&pool, h, Feedback::Overloaded, &limits)
        .await
        .unwrap();
    assert_eq!(state(&pool, h).await.concurrency_limit, Some(2.0));
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn the_limit_stays_within_the_floor_the_ceiling_and_max_in_flight(pool: PgPool) {
    let limits = GroupLimits {
        initial: 4,
        floor: 2,
        ceiling: 10,
        ..GroupLimits::default()
    };
    let g = new_group(&pool).await;
    for _ in 0..20 {
        busy(&pool, g, ok(1_000), &limits).await;
    }
    assert_eq!(limit(&pool, g, &limits).await, 10.0, "the ceiling");
    for _ in 0..6 {
        adapt_limit(&pool, g, Feedback::Overloaded, &limits)
            .await
            .unwrap();
    }
    assert_eq!(limit(&pool, g, &limits).await, 2.0, "the floor");

    // The group's own max_in_flight replaces the ceiling, above it or below.
    set_max_in_flight(&pool, g, Some(20)).await.unwrap();
    for _ in 0..30 {
        busy(&pool, g, ok(1_000), &limits).await;
    }
    assert_eq!(
        limit(&pool, g, &limits).await,
        20.0,
        "max_in_flight above the ceiling"
    );
    set_max_in_flight(&pool, g, Some(6)).await.unwrap();
    busy(&pool, g, ok(1_000), &limits).await;
    assert_eq!(
        limit(&pool, g, &limits).await,
        6.0,
        "max_in_flight below it"
    );
    // A max_in_flight below the floor is the floor too.
    set_max_in_flight(&pool, g, Some(1)).await.unwrap();
    adapt_limit(&pool, g, Feedback::Overloaded, &limits)
        .await
        .unwrap();
    busy(&pool, g, ok(1_000), &limits).await;
    assert_eq!(limit(&pool, g, &limits).await, 1.0);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_batch_of_successes_grows_by_up_to_its_runs_and_weighs_as_many_single_ones(pool: PgPool) {
    let limits = GroupLimits {
        ceiling: 12,
        ..GroupLimits::default()
    };
    let batch = |ms: u64, runs: u32| Feedback::Ok {
        latency: Duration::from_millis(ms),
        runs,
    };
    let g = new_group(&pool).await;
    assert_eq!(busy(&pool, g, batch(2_000, 5), &limits).await, 9.0, "4 + 5");
    assert_eq!(
        busy(&pool, g, batch(2_000, 10), &limits).await,
        12.0,
        "up to the ceiling"
    );

    // Three runs of 3 s in one call move the recent latency as three calls of one do (and the
    // baseline, which drifts towards it, nearly so).
    let (a, b) = (new_group(&pool).await, new_group(&pool).await);
    for h in [a, b] {
        busy(&pool, h, ok(1_000), &limits).await;
    }
    busy(&pool, a, batch(3_000, 3), &limits).await;
    for _ in 0..3 {
        adapt_limit(&pool, b, ok(3_000), &limits).await.unwrap();
    }
    let (sa, sb) = (state(&pool, a).await, state(&pool, b).await);
    let close = |x: Option<f32>, y: Option<f32>| (x.unwrap() - y.unwrap()).abs() < 0.5;
    assert!(
        close(sa.latency_recent_ms, sb.latency_recent_ms),
        "{sa:?} {sb:?}"
    );
    let (ba, bb) = (
        sa.latency_baseline_ms.unwrap(),
        sb.latency_baseline_ms.unwrap(),
    );
    assert!((ba - bb).abs() < 0.01 * bb, "{sa:?} {sb:?}");
}

/// A batch of results ([`finish_batch`]) moves each group's limit in the same update that
/// releases its slots, by the rule [`adapt_limit`] applies: two groups alike, one finished in a
/// batch with its successes, the other by `adapt_limit` and `complete` one at a time, end with
/// the same row. A group whose only result is a cancellation keeps its limit and estimates.
#[sqlx::test(migrator = "MIGRATOR")]
async fn a_finished_batch_moves_each_group_s_limit_as_adapt_limit_does(pool: PgPool) {
    let limits = GroupLimits::default();
    let (a, b, c) = (
        new_group(&pool).await,
        new_group(&pool).await,
        new_group(&pool).await,
    );
    let mut conn = pool.acquire().await.unwrap();
    let jobs: Vec<NewJob> = [(a, 4), (b, 4), (c, 1)]
        .into_iter()
        .flat_map(|(g, n)| {
            (0..n).map(move |_| NewJob::new("q", "t", serde_json::json!({})).group(g))
        })
        .collect();
    enqueue_many(&mut conn, &jobs).await.unwrap();
    let claimed = fetch(&pool, "q", "n1", 16, &limits).await.unwrap();
    assert_eq!(claimed.len(), 9, "every group under its initial cap of 4");
    let of = |g: Uuid| claimed.iter().filter(move |j| j.group_id == Some(g));
    let three_seconds = |runs| GroupSuccesses {
        group_id: a,
        mean_latency: Duration::from_secs(3),
        runs,
    };

    // a: three of its four jobs end in one batch with their three successes; c's one job ends
    // cancelled in the same batch.
    let mut batch: Vec<Finish<'_>> = of(a)
        .take(3)
        .map(|j| Finish {
            id: j.id,
            claim_token: j.claim_token,
            cancel_reason: None,
        })
        .collect();
    let cj = of(c).next().unwrap();
    batch.push(Finish {
        id: cj.id,
        claim_token: cj.claim_token,
        cancel_reason: Some("cancelled while in flight"),
    });
    let done = finish_batch(&pool, &batch, &[three_seconds(3)], &limits)
        .await
        .unwrap();
    assert_eq!(done.len(), 4);

    // b: the same results one at a time, as a result recorded alone does (the limit first, in
    // flight as the batch counts it: its jobs still running plus these runs).
    adapt_limit(
        &pool,
        b,
        Feedback::Ok {
            latency: Duration::from_secs(3),
            runs: 3,
        },
        &limits,
    )
    .await
    .unwrap();
    for j in of(b).take(3) {
        assert!(complete(&pool, j.id, j.claim_token).await.unwrap());
    }

    let (sa, sb, sc) = (
        state(&pool, a).await,
        state(&pool, b).await,
        state(&pool, c).await,
    );
    assert_eq!(sa.in_flight, 1);
    assert_eq!(sa.concurrency_limit, Some(7.0), "4 + 3: {sa:?}");
    assert_eq!(
        (
            sa.in_flight,
            sa.concurrency_limit,
            sa.latency_recent_ms,
            sa.latency_baseline_ms
        ),
        (
            sb.in_flight,
            sb.concurrency_limit,
            sb.latency_recent_ms,
            sb.latency_baseline_ms
        ),
        "batch {sa:?}, one at a time {sb:?}"
    );
    assert_eq!(sc.in_flight, 0);
    assert_eq!(
        (
            sc.concurrency_limit,
            sc.latency_recent_ms,
            sc.latency_baseline_ms
        ),
        (None, None, None),
        "a cancellation moves no limit: {sc:?}"
    );
}

#[test]
fn the_latency_rule_s_factors_are_validated_naming_the_key() {
    let key = |f: &str| format!("k.{f}");
    assert_eq!(GroupLimits::default().validate(key), Ok(()));
    let bad = [
        GroupLimits {
            latency_tolerance: 1.0,
            ..GroupLimits::default()
        },
        GroupLimits {
            latency_tolerance: f64::NAN,
            ..GroupLimits::default()
        },
        GroupLimits {
            latency_recent_weight: 0.0,
            ..GroupLimits::default()
        },
        GroupLimits {
            latency_recent_weight: 1.5,
            ..GroupLimits::default()
        },
        GroupLimits {
            latency_baseline_weight: 0.0,
            ..GroupLimits::default()
        },
        GroupLimits {
            latency_baseline_weight: 0.5,
            ..GroupLimits::default()
        },
    ];
    let names = [
        "tolerance",
        "tolerance",
        "recent_weight",
        "recent_weight",
        "baseline_weight",
        "baseline_weight",
    ];
    for (l, name) in bad.iter().zip(names) {
        let err = l.validate(key).unwrap_err();
        assert!(err.starts_with(&format!("k.latency_{name} ")), "{err}");
    }
}

/// [`GroupLimits::cap`] (what the API shows as a channel's limit) is the cap the fetch enforces:
/// for each adaptive limit, `max_in_flight` and FIFO setting, a group with no job in flight and
/// a 40-job backlog gives one fetch exactly that many jobs.
#[sqlx::test(migrator = "MIGRATOR")]
async fn the_cap_in_rust_is_the_cap_the_fetch_enforces(pool: PgPool) {
    let limits = GroupLimits {
        initial: 6,
        floor: 2,
        ceiling: 12,
        ..GroupLimits::default()
    };
    let mut conn = pool.acquire().await.unwrap();
    let cases: [(Option<f32>, Option<i32>, bool); 9] = [
        (None, None, false),
        (Some(0.5), None, false),
        (Some(3.9), None, false),
        (Some(30.0), None, false),
        (Some(30.0), Some(20), false),
        (Some(9.0), Some(5), false),
        (Some(9.0), Some(1), false),
        (None, Some(3), false),
        (Some(9.0), None, true),
    ];
    for (i, (limit, max_in_flight, fifo)) in cases.into_iter().enumerate() {
        let g = new_group(&pool).await;
        if let Some(m) = max_in_flight {
            set_max_in_flight(&pool, g, Some(m)).await.unwrap();
        }
        breakwater_queue::set_group_fifo(&mut conn, g, fifo)
            .await
            .unwrap();
        sqlx::query("UPDATE job_groups SET concurrency_limit = $2 WHERE group_id = $1")
            .bind(g)
            .bind(limit)
            .execute(&pool)
            .await
            .unwrap();
        let queue = format!("cap{i}");
        let jobs: Vec<breakwater_queue::NewJob> = (0..40)
            .map(|n| {
                breakwater_queue::NewJob::new(&queue, "test", serde_json::json!({ "n": n }))
                    .group(g)
            })
            .collect();
        breakwater_queue::enqueue_many(&mut conn, &jobs)
            .await
            .unwrap();
        let got = breakwater_queue::fetch(&pool, &queue, "n1", 100, &limits)
            .await
            .unwrap()
            .len();
        assert_eq!(
            got as u32,
            limits.cap(limit, max_in_flight, fifo),
            "limit {limit:?}, max_in_flight {max_in_flight:?}, fifo {fifo}"
        );
    }
}
