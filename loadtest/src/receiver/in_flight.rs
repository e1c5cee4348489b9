//! The gauge of the requests a receiver holds at once ([`InFlight`]), kept by the dead and the
//! slow receivers.

use std::sync::atomic::{AtomicU64, Ordering};

/// A gauge of the requests a receiver holds: how many now, the most ever at once, and how many
/// in all. A request counts from its arrival at the handler until the handler returns its
/// response, or until the request is dropped (the client closed the connection first).
#[derive(Debug, Default)]
pub struct InFlight {
    current: AtomicU64,
    max: AtomicU64,
    total: AtomicU64,
}

/// Counts one request out of its [`InFlight`] gauge when dropped.
#[must_use = "the request counts as in flight until the guard is dropped"]
pub struct InFlightGuard<'a>(&'a InFlight);

impl Drop for InFlightGuard<'_> {
    fn drop(&mut self) {
        self.0.current.fetch_sub(1, Ordering::Relaxed);
    }
}

impl InFlight {
    /// Counts a request in; the guard counts it out.
    pub fn enter(&self) -> InFlightGuard<'_> {
        self.total.fetch_add(1, Ordering::Relaxed);
        let now = self.current.fetch_add(1, Ordering::Relaxed) + 1;
        self.max.fetch_max(now, Ordering::Relaxed);
        InFlightGuard(self)
    }

    /// Requests in flight now.
    pub fn current(&self) -> u64 {
        self.current.load(Ordering::Relaxed)
    }

    /// The most requests ever in flight at once (since the start or the last
    /// [`reset_max`](Self::reset_max)).
    pub fn max(&self) -> u64 {
        self.max.load(Ordering::Relaxed)
    }

    /// Requests counted in, in all.
    pub fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// Starts a new maximum from the current count (for the next round of a scenario).
    pub fn reset_max(&self) {
        self.max.store(self.current(), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_flight_keeps_the_most_at_once() {
        let g = InFlight::default();
        let a = g.enter();
        let b = g.enter();
        drop(a);
        let c = g.enter();
        assert_eq!((g.current(), g.max(), g.total()), (2, 2, 3));
        drop(b);
        drop(c);
        assert_eq!((g.current(), g.max()), (0, 2));
        g.reset_max();
        assert_eq!(g.max(), 0);
    }
}
