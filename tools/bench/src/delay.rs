//! The event delay: engines' events reach the router a fixed latency after they are
//! published.
//!
//! An engine publishes a request's blocks when it caches them; the router's index learns of
//! them only when the events arrive. `Delayed` holds the published events in a time-ordered
//! queue (by due time, then publication order) and hands out those due by a given time.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use kvidx::Event;

/// Events on their way to the router, each due `delay_ms` after it was published.
pub(crate) struct Delayed {
    delay_ms: u64,
    /// (due time, publication number) of each pending event; the number orders events due
    /// at the same time as they were published and keys `events`.
    due: BinaryHeap<Reverse<(u64, u64)>>,
    events: HashMap<u64, Event>,
    published: u64,
}

impl Delayed {
    /// An empty queue whose events arrive `delay_ms` after they are published.
    pub(crate) fn new(delay_ms: u64) -> Self {
        Self {
            delay_ms,
            due: BinaryHeap::new(),
            events: HashMap::new(),
            published: 0,
        }
    }

    /// Queues an event published at time `t` (ms).
    pub(crate) fn publish(&mut self, t: u64, event: Event) {
        let number = self.published;
        self.published += 1;
        self.due
            .push(Reverse((t.saturating_add(self.delay_ms), number)));
        self.events.insert(number, event);
    }

    /// Removes and returns, in due order, the events that have arrived by time `t` (due at
    /// or before it).
    pub(crate) fn arrived(&mut self, t: u64) -> Vec<Event> {
        let mut out = Vec::new();
        while let Some(Reverse((due, number))) = self.due.peek().copied() {
            if due > t {
                break;
            }
            self.due.pop();
            out.push(self.events.remove(&number).expect("queued once"));
        }
        out
    }

    /// Events published and not yet arrived.
    #[cfg(test)]
    pub(crate) fn pending(&self) -> usize {
        self.due.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kvidx::{Block, EventData, Worker};

    fn stored(worker: u64, id: u64) -> Event {
        Event {
            worker: Worker::new(worker, 0),
            event_id: id,
            data: EventData::Stored {
                parent: None,
                blocks: vec![Block::new(id, id)],
                tier: kvidx::Tier::Device,
            },
        }
    }

    fn ids(events: &[Event]) -> Vec<(u64, u64)> {
        events
            .iter()
            .map(|e| (e.worker.worker_id, e.event_id))
            .collect()
    }

    #[test]
    fn events_arrive_the_delay_after_they_are_published_in_publication_order() {
        let mut q = Delayed::new(50);
        q.publish(0, stored(0, 1));
        q.publish(0, stored(1, 1));
        q.publish(30, stored(0, 2));
        assert!(q.arrived(0).is_empty(), "nothing is due before 50 ms");
        assert!(q.arrived(49).is_empty());
        assert_eq!(ids(&q.arrived(50)), [(0, 1), (1, 1)], "due at 50, in order");
        assert_eq!(q.pending(), 1);
        assert!(q.arrived(79).is_empty());
        assert_eq!(ids(&q.arrived(80)), [(0, 2)]);
        assert_eq!(q.pending(), 0);
    }

    #[test]
    fn a_late_look_gets_everything_due_in_due_order() {
        let mut q = Delayed::new(500);
        for (t, w) in [(10, 3), (10, 1), (200, 2), (600, 0)] {
            q.publish(t, stored(w, t));
        }
        assert_eq!(ids(&q.arrived(1000)), [(3, 10), (1, 10), (2, 200)]);
        assert_eq!(ids(&q.arrived(1100)), [(0, 600)]);
    }

    #[test]
    fn without_a_delay_an_event_arrives_at_once() {
        let mut q = Delayed::new(0);
        q.publish(7, stored(0, 1));
        assert!(q.arrived(6).is_empty());
        assert_eq!(ids(&q.arrived(7)), [(0, 1)]);
    }
}
