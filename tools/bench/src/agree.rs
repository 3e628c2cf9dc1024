//! An untimed cross-check: every index replays the workload synchronously, in order, and
//! each query's answer is compared with the first exact index's. Shows how inexact the
//! baseline is on this workload, and that the exact backends agree.

use kvidx::Indexer;

use crate::target::Subject;
use crate::workload::{Op, TimedOp};

/// Per index: queries whose answer differs from the reference index's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agreement {
    /// The index answers are compared with.
    pub against: &'static str,
    /// Queries compared.
    pub queries: u64,
    /// `(index, queries answered differently)`, the reference index excluded.
    pub differ: Vec<(&'static str, u64)>,
}

/// Compares every subject's answers with those of the first exact subject; `None` when
/// there is no exact subject or nothing else to compare.
pub fn check(ops: &[TimedOp], subjects: &[Subject]) -> Option<Agreement> {
    let exact = *subjects.iter().find(|s| **s != Subject::Baseline)?;
    let others: Vec<Subject> = subjects.iter().copied().filter(|s| *s != exact).collect();
    if others.is_empty() {
        return None;
    }
    // Synchronous indexers: every write is applied, in order, before the next.
    let truth = exact.indexer(0);
    let rest: Vec<Indexer> = others.iter().map(|s| s.indexer(0)).collect();
    let mut differ = vec![0u64; others.len()];
    let (mut want, mut got) = (Vec::new(), Vec::new());
    let mut queries = 0;
    for op in ops {
        match &op.op {
            Op::Event(e) => {
                // A rejected event or an unknown removal is part of the workload, not an
                // error here.
                let _ = truth.apply_event(e.clone());
                rest.iter().for_each(|s| {
                    let _ = s.apply_event(e.clone());
                });
            }
            Op::Match(q) => {
                queries += 1;
                truth.find_matches_into(q, &mut want);
                for (s, d) in rest.iter().zip(differ.iter_mut()) {
                    s.find_matches_into(q, &mut got);
                    if got != want {
                        *d += 1;
                    }
                }
            }
        }
    }
    Some(Agreement {
        against: exact.name(),
        queries,
        differ: others.iter().map(|s| s.name()).zip(differ).collect(),
    })
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
            &[Subject::Positional, Subject::Radix, Subject::Baseline],
        )
        .unwrap();
        assert_eq!(a.against, "positional");
        assert_eq!(a.queries, 3);
        assert_eq!(a.differ, vec![("radix", 0), ("nested-map", 1)]);
        assert_eq!(check(&ops, &[Subject::Baseline]), None);
    }
}
