//! The per-node cap on one channel's concurrent deliveries.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use uuid::Uuid;

/// Counts this node's in-flight deliveries per channel and refuses more than `cap` at once, so
/// one slow channel cannot hold a whole pool (`worker.max_in_flight_per_channel`).
#[derive(Debug)]
pub struct ChannelSlots {
    cap: usize,
    counts: Mutex<HashMap<Uuid, usize>>,
}

/// A held slot; released on drop.
#[derive(Debug)]
pub struct SlotGuard {
    slots: Arc<ChannelSlots>,
    channel: Uuid,
}

impl ChannelSlots {
    /// At most `cap` (≥ 1) deliveries per channel at once.
    pub fn new(cap: usize) -> Arc<Self> {
        Arc::new(Self {
            cap: cap.max(1),
            counts: Mutex::default(),
        })
    }

    /// Takes a slot for `channel`, or `None` if it already has `cap` in flight here.
    pub fn try_acquire(self: &Arc<Self>, channel: Uuid) -> Option<SlotGuard> {
        let mut counts = self.counts.lock().expect("slots lock poisoned");
        let n = counts.entry(channel).or_default();
        if *n >= self.cap {
            return None;
        }
        *n += 1;
        Some(SlotGuard {
            slots: self.clone(),
            channel,
        })
    }

    /// The cap: most deliveries of one channel at once on this node.
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// Channels at their cap right now (the runner skips their jobs when fetching).
    pub fn saturated(&self) -> Vec<Uuid> {
        let counts = self.counts.lock().expect("slots lock poisoned");
        counts
            .iter()
            .filter(|(_, n)| **n >= self.cap)
            .map(|(c, _)| *c)
            .collect()
    }

    /// In-flight deliveries of `channel` on this node.
    pub fn in_flight(&self, channel: Uuid) -> usize {
        self.counts
            .lock()
            .expect("slots lock poisoned")
            .get(&channel)
            .copied()
            .unwrap_or(0)
    }
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        let mut counts = self.slots.counts.lock().expect("slots lock poisoned");
        if let Some(n) = counts.get_mut(&self.channel) {
            *n -= 1;
            if *n == 0 {
                counts.remove(&self.channel);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_one_channel_and_frees_on_drop() {
        let slots = ChannelSlots::new(2);
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        let g1 = slots.try_acquire(a).unwrap();
        let g2 = slots.try_acquire(a).unwrap();
        assert!(slots.try_acquire(a).is_none(), "third slot refused");
        assert!(slots.try_acquire(b).is_some(), "other channels unaffected");
        assert_eq!(slots.saturated(), vec![a]);
        drop(g1);
        assert!(slots.saturated().is_empty());
        assert_eq!(slots.in_flight(a), 1);
        drop(g2);
        assert_eq!(slots.in_flight(a), 0);
    }
}
