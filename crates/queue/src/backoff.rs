//! Exponential backoff with jitter.

use rand::Rng;
use std::time::Duration;

/// Exponential backoff with proportional jitter: after run `n` (1-based) fails, wait
/// `min(base × factor^(n−1), cap)`, scaled by a random factor in `[1 − jitter, 1 + jitter]`.
///
/// The [`Default`] is the delivery schedule documented in README.md: base 10 s, factor 3, cap
/// 12 h, jitter ±20 %: 10 s, 30 s, 1.5 min, 4.5 min, 13.5 min, 40 min, 2 h, 6 h, then 12 h.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    /// Delay after the first failure.
    pub base: Duration,
    /// Growth per failure (≥ 1).
    pub factor: f64,
    /// Largest delay before jitter.
    pub cap: Duration,
    /// Proportional jitter, 0.0 ..= 1.0.
    pub jitter: f64,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            base: Duration::from_secs(10),
            factor: 3.0,
            cap: Duration::from_secs(12 * 3600),
            jitter: 0.2,
        }
    }
}

impl Backoff {
    /// The delay before run `attempt + 1`, with no jitter.
    pub fn nominal(&self, attempt: i32) -> Duration {
        let exp = (attempt.max(1) - 1).min(64);
        let secs = self.base.as_secs_f64() * self.factor.max(1.0).powi(exp);
        Duration::from_secs_f64(secs.min(self.cap.as_secs_f64()))
    }

    /// The delay before run `attempt + 1`, jittered.
    pub fn delay(&self, attempt: i32) -> Duration {
        let nominal = self.nominal(attempt).as_secs_f64();
        let j = self.jitter.clamp(0.0, 1.0);
        let scale = if j > 0.0 {
            rand::thread_rng().gen_range(1.0 - j..=1.0 + j)
        } else {
            1.0
        };
        Duration::from_secs_f64(nominal * scale)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_schedule_grows_by_three_and_caps_at_twelve_hours() {
        let b = Backoff::default();
        let secs: Vec<u64> = (1..=10).map(|n| b.nominal(n).as_secs()).collect();
        assert_eq!(
            secs,
            vec![10, 30, 90, 270, 810, 2430, 7290, 21870, 43200, 43200]
        );
    }

    #[test]
    fn jitter_stays_within_bounds() {
        let b = Backoff::default();
        for _ in 0..1000 {
            let d = b.delay(2).as_secs_f64();
            assert!((24.0..=36.0).contains(&d), "{d}");
        }
    }
}
