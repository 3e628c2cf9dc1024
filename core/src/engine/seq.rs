//! Batch sequence tracking per publisher: the second ZMQ frame is an 8-byte big-endian
//! counter, starting at 0 per publisher process and +1 per batch. A jump forward means
//! batches were lost (slow subscriber, HWM drop); a step backwards means the publisher
//! restarted (its cache is empty again). Since the counter starts at 0, a publisher's first
//! batch above 0 follows batches it published before it was seen ("missed from the start").

use std::collections::HashMap;
use std::hash::Hash;

/// The sequence the replay socket sends as its end marker (`0xFF` × 8).
pub const REPLAY_END_SEQ: u64 = u64::MAX;

/// Reads the sequence frame: exactly 8 bytes, big-endian.
pub fn parse_seq_frame(frame: &[u8]) -> Option<u64> {
    <[u8; 8]>::try_from(frame).ok().map(u64::from_be_bytes)
}

/// How a batch's sequence number relates to the publisher's previous batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeqStatus {
    /// The first batch seen from this publisher.
    First,
    /// Exactly the expected next batch.
    InOrder,
    /// Batches `expected .. got` were missed.
    Gap {
        /// The first missing sequence number.
        expected: u64,
        /// The sequence number received.
        got: u64,
    },
    /// The sequence went backwards: the publisher restarted (or replayed an old batch).
    Restart {
        /// The sequence number that was expected.
        expected: u64,
        /// The sequence number received.
        got: u64,
    },
}

impl SeqStatus {
    /// Batches missed before this one (0 unless [`SeqStatus::Gap`]).
    pub fn missed(&self) -> u64 {
        match self {
            SeqStatus::Gap { expected, got } => got.saturating_sub(*expected),
            _ => 0,
        }
    }
}

/// Counters of a [`SeqTracker`]; each saturates at `u64::MAX` instead of wrapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SeqCounters {
    /// Batches recorded.
    pub batches: u64,
    /// Gaps seen.
    pub gaps: u64,
    /// Batches missed, summed over gaps.
    pub missed: u64,
    /// Restarts seen.
    pub restarts: u64,
    /// Publishers whose first batch recorded was above 0 (they had published before).
    pub late_starts: u64,
    /// Batches those publishers sent before their first batch recorded (its sequence).
    pub missed_from_start: u64,
}

/// The next expected sequence number per publisher key (e.g. endpoint and topic, or worker).
#[derive(Debug, Clone)]
pub struct SeqTracker<K> {
    next: HashMap<K, u64>,
    counters: SeqCounters,
}

impl<K: Eq + Hash + Clone> Default for SeqTracker<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Eq + Hash + Clone> SeqTracker<K> {
    /// An empty tracker.
    pub fn new() -> Self {
        Self {
            next: HashMap::new(),
            counters: SeqCounters::default(),
        }
    }

    /// Classifies `seq` for `key` without recording it.
    pub fn check(&self, key: &K, seq: u64) -> SeqStatus {
        match self.next.get(key) {
            None => SeqStatus::First,
            Some(&next) if seq == next => SeqStatus::InOrder,
            Some(&next) if seq > next => SeqStatus::Gap {
                expected: next,
                got: seq,
            },
            Some(&next) => SeqStatus::Restart {
                expected: next,
                got: seq,
            },
        }
    }

    /// The next sequence expected from `key`: after its last recorded batch, or 0 for a
    /// publisher not recorded yet (its sequence starts at 0). A batch above it follows
    /// missing batches, a publisher's first batch included: ask a replay socket from here.
    pub fn next_expected(&self, key: &K) -> u64 {
        self.next.get(key).copied().unwrap_or(0)
    }

    /// Records that batch `seq` of `key` was handled (the next expected is `seq + 1`),
    /// counts it, and returns how it related to the previous one.
    pub fn record(&mut self, key: &K, seq: u64) -> SeqStatus {
        let status = self.check(key, seq);
        let c = &mut self.counters;
        c.batches = c.batches.saturating_add(1);
        match status {
            SeqStatus::Gap { .. } => {
                c.gaps = c.gaps.saturating_add(1);
                c.missed = c.missed.saturating_add(status.missed());
            }
            SeqStatus::Restart { .. } => c.restarts = c.restarts.saturating_add(1),
            SeqStatus::First if seq > 0 => {
                c.late_starts = c.late_starts.saturating_add(1);
                c.missed_from_start = c.missed_from_start.saturating_add(seq);
            }
            SeqStatus::First | SeqStatus::InOrder => {}
        }
        self.next.insert(key.clone(), seq.wrapping_add(1));
        status
    }

    /// The next sequence number expected from `key`, if any batch was recorded.
    pub fn expected(&self, key: &K) -> Option<u64> {
        self.next.get(key).copied()
    }

    /// Sets the next sequence expected from `key`, as if `next - 1` had been recorded (e.g.
    /// restoring saved state); the counters are not touched.
    pub fn set_expected(&mut self, key: &K, next: u64) {
        self.next.insert(key.clone(), next);
    }

    /// Forgets a publisher (e.g. when its worker is removed); returns whether it was known.
    pub fn forget(&mut self, key: &K) -> bool {
        self.next.remove(key).is_some()
    }

    /// Keeps only the publishers for which `keep` returns true.
    pub fn retain(&mut self, mut keep: impl FnMut(&K) -> bool) {
        self.next.retain(|key, _| keep(key));
    }

    /// The number of publishers tracked.
    pub fn len(&self) -> usize {
        self.next.len()
    }

    /// Whether no publisher is tracked.
    pub fn is_empty(&self) -> bool {
        self.next.is_empty()
    }

    /// The counters so far.
    pub fn counters(&self) -> SeqCounters {
        self.counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_first_in_order_gap_restart() {
        let mut t = SeqTracker::new();
        assert_eq!(t.record(&"a", 5), SeqStatus::First);
        assert_eq!(t.record(&"a", 6), SeqStatus::InOrder);
        assert_eq!(
            t.record(&"a", 9),
            SeqStatus::Gap {
                expected: 7,
                got: 9
            }
        );
        assert_eq!(
            t.record(&"a", 0),
            SeqStatus::Restart {
                expected: 10,
                got: 0
            }
        );
        assert_eq!(t.record(&"b", 0), SeqStatus::First);
        let c = t.counters();
        assert_eq!((c.batches, c.gaps, c.missed, c.restarts), (5, 1, 2, 1));
        // "a" started at 5: batches 0-4 were published before it was seen.
        assert_eq!((c.late_starts, c.missed_from_start), (1, 5));
        assert_eq!(t.expected(&"a"), Some(1));
        t.forget(&"a");
        assert_eq!(t.check(&"a", 3), SeqStatus::First);
    }

    #[test]
    fn a_publisher_not_seen_yet_is_expected_from_0() {
        let mut t = SeqTracker::new();
        assert_eq!(t.next_expected(&"a"), 0);
        assert_eq!(t.check(&"a", 3), SeqStatus::First);
        t.record(&"a", 3);
        assert_eq!(t.next_expected(&"a"), 4);
        t.record(&"b", 0);
        let c = t.counters();
        assert_eq!((c.late_starts, c.missed_from_start, c.gaps), (1, 3, 0));
        t.forget(&"a");
        assert_eq!(t.next_expected(&"a"), 0);
    }

    #[test]
    fn counters_saturate_instead_of_wrapping() {
        let mut t = SeqTracker::new();
        t.record(&"a", 0);
        // Two gaps of almost 2^64 batches each: the sum saturates.
        assert_eq!(t.record(&"a", u64::MAX - 1).missed(), u64::MAX - 2);
        t.record(&"a", 0);
        t.record(&"a", u64::MAX - 1);
        assert_eq!(t.counters().missed, u64::MAX);
        assert_eq!(t.counters().gaps, 2);
        assert_eq!(t.len(), 1);
        t.retain(|k| *k != "a");
        assert!(t.is_empty());
    }

    #[test]
    fn parses_only_eight_byte_frames() {
        assert_eq!(parse_seq_frame(&[0, 0, 0, 0, 0, 0, 1, 2]), Some(258));
        assert_eq!(parse_seq_frame(&[0xFF; 8]), Some(REPLAY_END_SEQ));
        assert_eq!(parse_seq_frame(&[1, 2]), None);
        assert_eq!(parse_seq_frame(&[0; 9]), None);
    }
}
