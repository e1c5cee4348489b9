//! Latency histograms (µs) and their summaries (ms).

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// A histogram of microseconds, 1 µs to 1 h, 3 significant figures.
pub fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid histogram bounds")
}

/// A latency summary in milliseconds.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    /// Samples.
    pub count: u64,
    /// Median, ms.
    pub p50_ms: f64,
    /// 95th percentile, ms.
    pub p95_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// Largest, ms.
    pub max_ms: f64,
    /// Mean, ms.
    pub mean_ms: f64,
}

fn ms(us: u64) -> f64 {
    (us as f64 / 10.0).round() / 100.0
}

/// Summarises a histogram of microseconds.
pub fn summarize(h: &Histogram<u64>) -> Summary {
    if h.is_empty() {
        return Summary::default();
    }
    Summary {
        count: h.len(),
        p50_ms: ms(h.value_at_quantile(0.50)),
        p95_ms: ms(h.value_at_quantile(0.95)),
        p99_ms: ms(h.value_at_quantile(0.99)),
        max_ms: ms(h.max()),
        mean_ms: (h.mean() / 10.0).round() / 100.0,
    }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "n={:<6} p50={:>9.2} ms  p95={:>9.2} ms  p99={:>9.2} ms  max={:>9.2} ms",
            self.count, self.p50_ms, self.p95_ms, self.p99_ms, self.max_ms
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_in_ms() {
        let mut h = new_hist();
        for v in 1..=1000u64 {
            h.record(v * 1000).unwrap();
        }
        let s = summarize(&h);
        assert_eq!(s.count, 1000);
        assert!((s.p50_ms - 500.0).abs() < 1.0, "{s:?}");
        assert!((s.p95_ms - 950.0).abs() < 1.0, "{s:?}");
        assert!((s.max_ms - 1000.0).abs() < 1.0, "{s:?}");
        assert_eq!(summarize(&new_hist()), Summary::default());
    }
}
