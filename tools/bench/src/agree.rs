//! An untimed cross-check: every index replays the workload synchronously, in order, and
//! each query's answer is compared with the first exact index's. Shows how inexact the
//! baseline is on this workload, and that the exact backends agree. With the feature `peer`
//! the public peer's indexes take part too (never as the reference). On a workload with
//! tiered events, `find_matches_tiered` answers are compared too (kvidx's indexes only).

use kvidx::{Event, Indexer, Match, TieredMatch};

use crate::target::Subject;
use crate::workload::{Counts, Op, TimedOp};

/// Per index: queries whose answer differs from the reference index's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agreement {
    /// The index answers are compared with.
    pub against: &'static str,
    /// Queries compared.
    pub queries: u64,
    /// `(index, queries answered differently)`, the reference index excluded.
    pub differ: Vec<(&'static str, u64)>,
    /// The same for `find_matches_tiered`, on a workload with tiered events (else empty),
    /// for the indexes that answer tiered queries.
    pub differ_tiered: Vec<(&'static str, u64)>,
}

/// Compares every subject's answers (those that [`Subject::answers_queries`]) with those of
/// the first exact subject; `None` when there is no exact subject or nothing else to compare.
pub fn check(ops: &[TimedOp], subjects: &[Subject]) -> Option<Agreement> {
    let exact = *subjects.iter().find(|s| s.is_exact())?;
    let others: Vec<Subject> = subjects
        .iter()
        .copied()
        .filter(|s| *s != exact && s.answers_queries())
        .collect();
    if others.is_empty() {
        return None;
    }
    // Synchronous indexers: every write is applied, in order, before the next.
    let truth = exact.indexer(0);
    let rest: Vec<Replica> = others.iter().map(|s| Replica::of(*s)).collect();
    let mut differ = vec![0u64; others.len()];
    let tiers = Counts::of(ops).tiered > 0;
    let mut differ_tiered: Vec<Option<u64>> = others
        .iter()
        .map(|s| (tiers && s.answers_tiers()).then_some(0))
        .collect();
    let (mut want, mut got) = (Vec::new(), Vec::new());
    let (mut want_tiered, mut got_tiered) = (Vec::new(), Vec::new());
    let mut queries = 0;
    for op in ops {
        match &op.op {
            Op::Event(e) => {
                // A rejected event or an unknown removal is part of the workload, not an
                // error here.
                let _ = truth.apply_event(e.clone());
                rest.iter().for_each(|s| s.apply(e));
            }
            Op::Match(q) => {
                queries += 1;
                truth.find_matches_into(q, &mut want);
                for (s, d) in rest.iter().zip(differ.iter_mut()) {
                    s.find(q, &mut got);
                    if got != want {
                        *d += 1;
                    }
                }
                if tiers {
                    truth.find_matches_tiered_into(q, &mut want_tiered);
                    for (s, d) in rest.iter().zip(differ_tiered.iter_mut()) {
                        let Some(d) = d else { continue };
                        s.find_tiered(q, &mut got_tiered);
                        *d += u64::from(got_tiered != want_tiered);
                    }
                }
            }
        }
    }
    Some(Agreement {
        against: exact.name(),
        queries,
        differ: others.iter().map(|s| s.name()).zip(differ).collect(),
        differ_tiered: others
            .iter()
            .zip(differ_tiered)
            .filter_map(|(s, d)| Some((s.name(), d?)))
            .collect(),
    })
}

/// One index replaying synchronously for the check.
enum Replica {
    /// A kvidx indexer with no event threads.
    Ours(Indexer),
    /// One of the peer's indexes, applying each event and waiting for it (see `peer`).
    #[cfg(feature = "peer")]
    Peer(Box<dyn crate::target::Target>),
}

impl Replica {
    fn of(subject: Subject) -> Self {
        #[cfg(feature = "peer")]
        if subject.peer().is_some() {
            return Replica::Peer(subject.build(0));
        }
        Replica::Ours(subject.indexer(0))
    }

    fn apply(&self, event: &Event) {
        match self {
            // A rejected event or an unknown removal is part of the workload, not an error.
            Replica::Ours(indexer) => {
                let _ = indexer.apply_event(event.clone());
            }
            #[cfg(feature = "peer")]
            Replica::Peer(peer) => peer.submit(event.clone()),
        }
    }

    fn find(&self, query: &[u64], out: &mut Vec<Match>) {
        match self {
            Replica::Ours(indexer) => indexer.find_matches_into(query, out),
            #[cfg(feature = "peer")]
            Replica::Peer(peer) => peer.find_matches_into(query, out),
        }
    }

    /// A tiered answer (only for replicas whose subject answers tiered queries).
    fn find_tiered(&self, query: &[u64], out: &mut Vec<TieredMatch>) {
        match self {
            Replica::Ours(indexer) => indexer.find_matches_tiered_into(query, out),
            #[cfg(feature = "peer")]
            Replica::Peer(peer) => peer.find_matches_tiered_into(query, out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kvidx::{Block, Event, Worker};

    #[test]
    fn counts_the_baselines_wrong_answers() {
        let w = Worker::new(0, 0);
        let ops: Vec<TimedOp> = [
            Op::Event(Event::stored(w, 0, None, vec![Block::new(1, 10)])),
            Op::Match(vec![1, 2]),
            // Local 2 held only at position 0 of another chain: the baseline says depth 2.
            Op::Event(Event::stored(w, 1, None, vec![Block::new(2, 2)])),
            Op::Match(vec![1, 2]),
            Op::Match(vec![2]),
        ]
        .into_iter()
        .map(|op| TimedOp { t: 0, op })
        .collect();
        let a = check(
            &ops,
            &[
                Subject::Positional,
                Subject::Radix,
                Subject::Runs,
                Subject::Baseline,
            ],
        )
        .unwrap();
        assert_eq!(a.against, "positional");
        assert_eq!(a.queries, 3);
        assert_eq!(a.differ, vec![("radix", 0), ("runs", 0), ("nested-map", 1)]);
        assert!(a.differ_tiered.is_empty(), "no tiered events");
        assert_eq!(check(&ops, &[Subject::Baseline]), None);
        assert_eq!(check(&ops, &[Subject::Positional, Subject::Null]), None);
    }

    #[test]
    fn tiered_answers_are_compared_on_tiered_workloads() {
        let w = Worker::new(0, 0);
        let ops: Vec<TimedOp> = [
            Op::Event(Event::stored(
                w,
                0,
                None,
                vec![Block::new(1, 10), Block::new(2, 20)],
            )),
            // Block 20 moves to host memory: the baseline, which keeps no tiers, drops it
            // on the device removal.
            Op::Event(Event::stored_on(
                w,
                1,
                Some(10),
                vec![Block::new(2, 20)],
                kvidx::Tier::Host,
            )),
            Op::Event(Event::removed_from(w, 2, vec![20], kvidx::Tier::Device)),
            Op::Match(vec![1, 2]),
        ]
        .into_iter()
        .map(|op| TimedOp { t: 0, op })
        .collect();
        let a = check(
            &ops,
            &[Subject::Positional, Subject::Radix, Subject::Baseline],
        )
        .unwrap();
        assert_eq!(a.differ, vec![("radix", 0), ("nested-map", 1)]);
        assert_eq!(a.differ_tiered, vec![("radix", 0), ("nested-map", 1)]);
    }

    #[cfg(feature = "peer")]
    #[test]
    fn the_peer_takes_part_but_is_never_the_reference() {
        // Sequence hashes as the hashing contract computes them (the peer's positional
        // index recomputes them from the query).
        let (w, s) = (Worker::new(0, 0), kvidx::hashing::seq_hashes(&[1, 2]));
        let ops: Vec<TimedOp> = [
            Op::Event(Event::stored(w, 0, None, vec![Block::new(1, s[0])])),
            Op::Match(vec![1, 2]),
            Op::Event(Event::stored(w, 1, Some(s[0]), vec![Block::new(2, s[1])])),
            Op::Match(vec![1, 2]),
        ]
        .into_iter()
        .map(|op| TimedOp { t: 0, op })
        .collect();
        let subjects = [
            Subject::PeerCompressed,
            Subject::Radix,
            Subject::PeerPositional,
            Subject::PeerSmg,
        ];
        let a = check(&ops, &subjects).unwrap();
        assert_eq!(a.against, "radix");
        assert_eq!(a.queries, 2);
        assert_eq!(
            a.differ,
            vec![
                ("peer-compressed", 0),
                ("peer-positional", 0),
                ("peer-smg", 0)
            ]
        );
        assert!(a.differ_tiered.is_empty());
        assert_eq!(check(&ops, &[Subject::PeerCompressed]), None);
    }
}
