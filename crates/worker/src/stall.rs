//! The node's own stalls: a node that stood still — stopped (`SIGSTOP`), its
//! VM frozen, its runtime starved — must not blame the endpoints it was talking to for the time
//! it lost.
//!
//! [`StallWatch`] ticks every [`TICK`] on the node's runtime and records every gap between two
//! ticks longer than the threshold (`worker.stall_threshold_ms`) as a stall: the time past the
//! expected tick, on the monotonic clock. Two uses:
//! - [`StallWatch::run_for`] runs a request for a budget of the node's *running* time: when the
//!   timer fires and a stall ate part of the window, the deadline moves out by the stall's
//!   length and the request is polled again, so a response that arrived in the socket while the
//!   node stood still is read instead of dropped (reqwest's own timeout checks its timer before
//!   its response and would have timed out every request in flight at a long stall);
//! - [`StallWatch::stalled_since`] tells how long the node stood still since an instant, for
//!   [`breakwater_core::outcome::stall_excuses`] to judge whether a failure says anything about
//!   the endpoint.
//!
//! A stall still in progress when asked (the ticker has not run since the node woke, which is
//! likely: every task woken at once competes for the first polls) counts too: the gap from the
//! last tick to now, when it is past the threshold.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The stall watch's tick.
pub(crate) const TICK: Duration = Duration::from_millis(100);

/// Stalls kept for [`StallWatch::stalled_since`]: the most recent ones, at most this many and
/// none that ended longer ago than [`KEEP_FOR`].
const KEEP_MAX: usize = 1024;

/// How long a stall is remembered: far longer than any attempt's window (its timeouts, plus the
/// stalls that extended them).
const KEEP_FOR: Duration = Duration::from_secs(3600);

/// What the ticker saw: its last tick, and the stalls (`[start, end)`: from the expected tick to
/// the tick that came) of the last [`KEEP_FOR`].
struct Seen {
    last_tick: Instant,
    stalls: VecDeque<(Instant, Instant)>,
}

/// The node's stall watch; cheap to clone (one per node, shared by every job).
#[derive(Clone)]
pub(crate) struct StallWatch {
    threshold: Duration,
    seen: Arc<Mutex<Seen>>,
}

impl StallWatch {
    /// A watch that counts a gap between ticks longer than `threshold` (≥ 2 × [`TICK`],
    /// validated with the configuration) as a stall. Call [`StallWatch::tick_until`] on the
    /// node's runtime to run it.
    pub(crate) fn new(threshold: Duration) -> Self {
        StallWatch {
            threshold,
            seen: Arc::new(Mutex::new(Seen {
                last_tick: Instant::now(),
                stalls: VecDeque::new(),
            })),
        }
    }

    /// The ticker: every [`TICK`] until `shutdown`, records a gap longer than the threshold as a
    /// stall, and logs it once (warn, with its length).
    pub(crate) async fn tick_until(self, shutdown: CancellationToken) {
        // The time between the watch's creation and its first tick (the node's start-up) is no
        // stall.
        self.seen
            .lock()
            .expect("stall watch lock poisoned")
            .last_tick = Instant::now();
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            if let Some(stalled) = self.tick(Instant::now()) {
                tracing::warn!(
                    stalled_ms = stalled.as_millis() as u64,
                    "this node stood still (its stall watch's tick came late); timeouts of \
                     attempts in flight meanwhile are not counted against their endpoints"
                );
            }
        }
    }

    /// One tick at `now`: records the gap since the last tick as a stall if it is past the
    /// threshold, and returns the stall's length.
    fn tick(&self, now: Instant) -> Option<Duration> {
        let mut seen = self.seen.lock().expect("stall watch lock poisoned");
        let gap = now.saturating_duration_since(seen.last_tick);
        seen.last_tick = now;
        while seen
            .stalls
            .front()
            .is_some_and(|&(_, end)| now.saturating_duration_since(end) > KEEP_FOR)
            || seen.stalls.len() >= KEEP_MAX
        {
            seen.stalls.pop_front();
        }
        if gap <= self.threshold {
            return None;
        }
        let start = now - gap + TICK.min(gap);
        seen.stalls.push_back((start, now));
        Some(now - start)
    }

    /// How long the node stood still between `since` and now: the recorded stalls' overlap with
    /// that window, plus a stall still in progress (the last tick older than the threshold).
    pub(crate) fn stalled_since(&self, since: Instant) -> Duration {
        let now = Instant::now();
        let seen = self.seen.lock().expect("stall watch lock poisoned");
        let overlap =
            |start: Instant, end: Instant| end.min(now).saturating_duration_since(start.max(since));
        let mut stalled: Duration = seen.stalls.iter().map(|&(s, e)| overlap(s, e)).sum();
        let gap = now.saturating_duration_since(seen.last_tick);
        if gap > self.threshold {
            stalled += overlap(seen.last_tick + TICK, now);
        }
        stalled
    }

    /// Runs `fut` for at most `budget` of the node's running time: `Ok` with its output, or
    /// `Err` with the wall time it was given when the budget ran out. Each time the timer fires
    /// the stalls since the start are read again, and while they have grown the deadline moves
    /// out by as much and `fut` is polled again (so a response that arrived during the stall is
    /// read). The budget is spent only while the node runs.
    pub(crate) async fn run_for<F: Future>(
        &self,
        budget: Duration,
        fut: F,
    ) -> Result<F::Output, Duration> {
        let start = Instant::now();
        let mut deadline = start + budget;
        let mut excused = Duration::ZERO;
        let mut fut = std::pin::pin!(fut);
        loop {
            match tokio::time::timeout_at(deadline.into(), fut.as_mut()).await {
                Ok(out) => return Ok(out),
                Err(_) => {
                    let stalled = self.stalled_since(start);
                    if stalled <= excused {
                        return Err(start.elapsed());
                    }
                    deadline += stalled - excused;
                    excused = stalled;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_late_tick_is_a_stall_and_an_on_time_one_is_not() {
        let w = StallWatch::new(Duration::from_millis(500));
        let t0 = w.seen.lock().unwrap().last_tick;
        assert_eq!(w.tick(t0 + Duration::from_millis(120)), None);
        // 3 s between ticks: 2.9 s past the expected tick.
        let stalled = w.tick(t0 + Duration::from_millis(3_120));
        assert_eq!(stalled, Some(Duration::from_millis(2_900)));
        assert_eq!(w.seen.lock().unwrap().stalls.len(), 1);
    }

    #[test]
    fn only_the_part_of_a_stall_after_since_counts() {
        let w = StallWatch::new(Duration::from_millis(500));
        let now = Instant::now();
        {
            let mut seen = w.seen.lock().unwrap();
            seen.last_tick = now;
            seen.stalls
                .push_back((now - Duration::from_secs(10), now - Duration::from_secs(4)));
        }
        let since = now - Duration::from_secs(6);
        let got = w.stalled_since(since);
        assert!(
            got >= Duration::from_secs(2) && got < Duration::from_millis(2_100),
            "{got:?}"
        );
        assert_eq!(
            w.stalled_since(now - Duration::from_secs(3)),
            Duration::ZERO
        );
    }

    #[test]
    fn a_stall_in_progress_counts_before_the_ticker_runs_again() {
        let w = StallWatch::new(Duration::from_millis(500));
        let since = Instant::now() - Duration::from_secs(5);
        w.seen.lock().unwrap().last_tick = Instant::now() - Duration::from_secs(3);
        let got = w.stalled_since(since);
        assert!(
            got >= Duration::from_millis(2_900) && got < Duration::from_millis(3_100),
            "{got:?}"
        );
    }

    #[tokio::test]
    async fn the_budget_is_running_time_and_a_late_answer_is_read() {
        // A stall of 3 s recorded inside the window: a future that needs 400 ms of a 300 ms
        // budget is given the 3 s more and finishes.
        let w = StallWatch::new(Duration::from_millis(500));
        let start = Instant::now();
        w.seen
            .lock()
            .unwrap()
            .stalls
            .push_back((start, start + Duration::from_secs(3)));
        let out = w
            .run_for(Duration::from_millis(300), async {
                tokio::time::sleep(Duration::from_millis(400)).await;
                7
            })
            .await;
        assert_eq!(out, Ok(7));
        // Without a stall the budget holds.
        let w = StallWatch::new(Duration::from_millis(500));
        let ticker = CancellationToken::new();
        tokio::spawn(w.clone().tick_until(ticker.clone()));
        let out = w
            .run_for(Duration::from_millis(300), async {
                tokio::time::sleep(Duration::from_millis(2_000)).await;
            })
            .await;
        ticker.cancel();
        let waited = out.expect_err("the budget ran out");
        assert!(waited < Duration::from_millis(1_000), "{waited:?}");
    }
}
