//! Event threads: sticky routing per worker, bounded queues with backpressure, a true flush
//! barrier.
//!
//! Every event of a `worker_id` (all its dp ranks) goes to one thread, chosen by hashing the
//! id, so a worker's events and its removal are applied in the order they were accepted.
//! Queues are bounded: when a thread falls behind, senders block until there is room.
//! `flush` puts a barrier in every queue and waits until every thread has passed it.

use std::hash::{BuildHasher, Hash};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{bounded, Receiver, Sender};

use crate::applier::Applier;
use crate::model::{Event, Worker};
use crate::Error;

/// One unit of work for an event thread.
enum Job {
    Event(Event),
    RemoveWorker(u64),
    RemoveWorkerDpRank(Worker),
    /// Acknowledged once every job queued before it on this thread is applied.
    Barrier(Sender<Result<(), Error>>),
}

/// A fixed set of event threads fed through bounded queues.
pub(crate) struct EventPool {
    senders: Vec<Sender<Job>>,
    threads: Vec<JoinHandle<()>>,
    failed: Arc<AtomicBool>,
}

impl EventPool {
    /// Starts `threads` event threads (> 0), each with a queue of `capacity` jobs.
    pub(crate) fn start(
        applier: Arc<Applier>,
        threads: usize,
        capacity: usize,
    ) -> Result<Self, Error> {
        let failed = Arc::new(AtomicBool::new(false));
        let mut senders = Vec::with_capacity(threads);
        let mut handles = Vec::with_capacity(threads);
        for index in 0..threads {
            let (tx, rx) = bounded(capacity);
            let applier = Arc::clone(&applier);
            let failed = Arc::clone(&failed);
            let handle = std::thread::Builder::new()
                .name(format!("kvidx-events-{index}"))
                .spawn(move || run_thread(&applier, &rx, &failed))
                .map_err(|_| Error::ShutDown)?;
            senders.push(tx);
            handles.push(handle);
        }
        Ok(Self {
            senders,
            threads: handles,
            failed,
        })
    }

    fn thread_of(&self, worker_id: u64) -> usize {
        let mut hasher = rustc_hash::FxBuildHasher.build_hasher();
        worker_id.hash(&mut hasher);
        let hash = std::hash::Hasher::finish(&hasher);
        // The high bits of an Fx hash are the well-mixed ones.
        ((hash >> 32) % self.senders.len() as u64) as usize
    }

    fn send(&self, worker_id: u64, job: Job) -> Result<(), Error> {
        if self.failed.load(Ordering::Acquire) {
            return Err(Error::ShutDown);
        }
        self.senders[self.thread_of(worker_id)]
            .send(job)
            .map_err(|_| Error::ShutDown)
    }

    /// Queues an event behind the earlier events of its worker; blocks while the queue is full.
    pub(crate) fn submit(&self, event: Event) -> Result<(), Error> {
        self.send(event.worker.worker_id, Job::Event(event))
    }

    /// Queues the removal of every dp rank of a worker behind its earlier events.
    pub(crate) fn remove_worker(&self, worker_id: u64) -> Result<(), Error> {
        self.send(worker_id, Job::RemoveWorker(worker_id))
    }

    /// Queues the removal of one worker behind its earlier events.
    pub(crate) fn remove_worker_dp_rank(&self, worker: Worker) -> Result<(), Error> {
        self.send(worker.worker_id, Job::RemoveWorkerDpRank(worker))
    }

    /// Returns once every job accepted before the call has been applied.
    pub(crate) fn flush(&self) -> Result<(), Error> {
        if self.failed.load(Ordering::Acquire) {
            return Err(Error::ShutDown);
        }
        let (ack_tx, ack_rx) = bounded(self.senders.len());
        for sender in &self.senders {
            sender
                .send(Job::Barrier(ack_tx.clone()))
                .map_err(|_| Error::ShutDown)?;
        }
        drop(ack_tx);
        for _ in 0..self.senders.len() {
            // A thread that is gone drops its barrier: recv fails instead of hanging.
            ack_rx.recv().map_err(|_| Error::ShutDown)??;
        }
        Ok(())
    }
}

impl Drop for EventPool {
    /// Disconnects the queues, lets every thread drain what was accepted, and joins them.
    fn drop(&mut self) {
        self.senders.clear();
        for handle in self.threads.drain(..) {
            let _ = handle.join();
        }
    }
}

fn run_thread(applier: &Applier, jobs: &Receiver<Job>, failed: &AtomicBool) {
    for job in jobs.iter() {
        if let Job::Barrier(ack) = job {
            let status = if failed.load(Ordering::Acquire) {
                Err(Error::ShutDown)
            } else {
                Ok(())
            };
            let _ = ack.send(status);
            continue;
        }
        if failed.load(Ordering::Acquire) {
            continue; // a bug broke the index: refuse to build on it, keep answering barriers
        }
        let applied = catch_unwind(AssertUnwindSafe(|| match job {
            Job::Event(event) => {
                let _ = applier.apply(&event);
            }
            Job::RemoveWorker(worker_id) => applier.backend().remove_worker(worker_id),
            Job::RemoveWorkerDpRank(worker) => applier.backend().remove_worker_dp_rank(worker),
            Job::Barrier(_) => unreachable!("barriers are handled above"),
        }));
        if applied.is_err() {
            failed.store(true, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::Backend;
    use crate::model::{EventData, Match, Outcome};

    /// A backend with a bug: it panics on every Cleared event.
    struct PanicsOnClear;

    impl Backend for PanicsOnClear {
        fn apply(&self, _: Worker, data: &EventData) -> Outcome {
            assert!(!matches!(data, EventData::Cleared), "injected bug");
            Outcome::Applied {
                unknown_removals: 0,
            }
        }
        fn remove_worker(&self, _: u64) {}
        fn remove_worker_dp_rank(&self, _: Worker) {}
        fn find_matches_into(&self, _: &[u64], out: &mut Vec<Match>) {
            out.clear();
        }
        fn workers(&self) -> u64 {
            0
        }
        fn worker_blocks(&self) -> u64 {
            0
        }
    }

    #[test]
    fn a_panic_on_an_event_thread_shuts_the_pool_down_without_hanging() {
        let applier = Arc::new(Applier::new(Box::new(PanicsOnClear)));
        let pool = EventPool::start(Arc::clone(&applier), 2, 1).unwrap();
        let w = Worker::new(3, 0);
        pool.submit(Event::removed(w, 0, vec![])).unwrap();
        pool.flush().unwrap();
        assert_eq!(applier.stats().events_applied, 1);

        pool.submit(Event::cleared(w, 1)).unwrap();
        // The barrier is answered, with the failure, instead of waiting forever.
        assert_eq!(pool.flush(), Err(Error::ShutDown));
        assert_eq!(
            pool.submit(Event::removed(w, 2, vec![])),
            Err(Error::ShutDown)
        );
        assert_eq!(pool.remove_worker(3), Err(Error::ShutDown));
        drop(pool); // joins the threads: none is stuck
        assert_eq!(applier.stats().events_applied, 1);
    }
}
