//! What a replay drives: an index that takes events (queued to its event threads) and
//! answers queries on the caller's thread.

use kvidx::{BackendKind, Config, Event, Indexer, Match, TieredMatch};

use crate::baseline::NestedMap;

/// An index under test.
pub trait Target: Send + Sync {
    /// Accepts one event (queues it; it counts once applied).
    fn submit(&self, event: Event);
    /// Returns once every event accepted before the call is applied.
    fn flush(&self);
    /// Answers a query (local hashes) into `out`.
    fn find_matches_into(&self, local_hashes: &[u64], out: &mut Vec<Match>);
    /// Answers a tiered query into `out` (only called on subjects that
    /// [`Subject::answers_tiers`]).
    fn find_matches_tiered_into(&self, local_hashes: &[u64], out: &mut Vec<TieredMatch>) {
        let _ = (local_hashes, out);
        panic!("this index does not answer tiered queries");
    }
    /// Sum over workers of the blocks held (after a flush).
    fn worker_blocks(&self) -> u64;
    /// Events rejected and names removed that were not held (after a flush).
    fn anomalies(&self) -> (u64, u64);
}

/// Which index a replay measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Subject {
    /// kvidx, positional backend.
    Positional,
    /// kvidx, radix backend.
    Radix,
    /// kvidx, run-compressed backend.
    Runs,
    /// kvidx, the reference model (slow: linear scans under one lock).
    Reference,
    /// The naive nested map of the design story (inexact; see `baseline`).
    #[value(name = "nested-map", alias = "baseline")]
    Baseline,
    /// No index at all (see `null_index`): the harness's own ceiling.
    Null,
    /// The public peer (dynamo-kv-router 1.6.1, feature `peer`): its compressed radix tree
    /// behind its thread pool (see `peer`).
    #[cfg(feature = "peer")]
    #[value(name = "peer-compressed")]
    PeerCompressed,
    /// The public peer (feature `peer`): its positional indexer behind its thread pool.
    #[cfg(feature = "peer")]
    #[value(name = "peer-positional")]
    PeerPositional,
    /// The second public peer (kv-index 2.0.0, feature `peer`): its `ChainIndex` behind event
    /// threads shaped like kvidx's (see `peer_smg`).
    #[cfg(feature = "peer")]
    #[value(name = "peer-smg")]
    PeerSmg,
}

impl Subject {
    /// The name used on the command line (`--subjects`) and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Subject::Positional => "positional",
            Subject::Radix => "radix",
            Subject::Runs => "runs",
            Subject::Reference => "reference",
            Subject::Baseline => "nested-map",
            Subject::Null => "null",
            #[cfg(feature = "peer")]
            Subject::PeerCompressed => "peer-compressed",
            #[cfg(feature = "peer")]
            Subject::PeerPositional => "peer-positional",
            #[cfg(feature = "peer")]
            Subject::PeerSmg => "peer-smg",
        }
    }

    /// Whether answers of this subject are the ones others are checked against: kvidx's exact
    /// backends (not the nested-map baseline, not the peer).
    pub fn is_exact(self) -> bool {
        matches!(
            self,
            Subject::Positional | Subject::Radix | Subject::Runs | Subject::Reference
        )
    }

    /// Whether this subject's answers mean anything: every index but `null`, which answers
    /// nothing by design (so it takes no part in the answer cross-check).
    pub fn answers_queries(self) -> bool {
        self != Subject::Null
    }

    /// Whether this subject answers `find_matches_tiered`: kvidx's indexers (the nested-map
    /// baseline through kvidx's write path, answering with every tier depth equal to its
    /// depth), not the peer.
    pub fn answers_tiers(self) -> bool {
        match self {
            Subject::Positional
            | Subject::Radix
            | Subject::Runs
            | Subject::Reference
            | Subject::Baseline
            | Subject::Null => true,
            #[cfg(feature = "peer")]
            Subject::PeerCompressed | Subject::PeerPositional | Subject::PeerSmg => false,
        }
    }

    /// The peers' indexer this subject drives, if it is one of the peers'.
    #[cfg(feature = "peer")]
    pub fn peer(self) -> Option<crate::peer::PeerKind> {
        match self {
            Subject::PeerCompressed => Some(crate::peer::PeerKind::Compressed),
            Subject::PeerPositional => Some(crate::peer::PeerKind::Positional),
            Subject::PeerSmg => Some(crate::peer::PeerKind::Smg),
            _ => None,
        }
    }

    /// Builds a fresh, empty index with `event_threads` event threads.
    pub fn build(self, event_threads: usize) -> Box<dyn Target> {
        #[cfg(feature = "peer")]
        if let Some(peer) = self.peer() {
            return peer.build(event_threads);
        }
        Box::new(self.indexer(event_threads))
    }

    /// The indexer of this subject with `event_threads` event threads (0: synchronous).
    ///
    /// # Panics
    ///
    /// For the peer's subjects, which are not kvidx indexers (use [`Subject::build`]).
    pub fn indexer(self, event_threads: usize) -> Indexer {
        let config = |backend| Config {
            backend,
            event_threads,
            ..Config::default()
        };
        let indexer = match self {
            Subject::Positional => Indexer::new(config(BackendKind::Positional)),
            Subject::Radix => Indexer::new(config(BackendKind::Radix)),
            Subject::Runs => Indexer::new(config(BackendKind::Runs)),
            Subject::Reference => Indexer::new(config(BackendKind::Reference)),
            // The baseline structure behind kvidx's own write path.
            Subject::Baseline => Indexer::with_backend(
                Box::new(NestedMap::default()),
                config(BackendKind::Reference),
            ),
            Subject::Null => Indexer::with_backend(
                Box::new(crate::null_index::NullIndex::default()),
                config(BackendKind::Reference),
            ),
            #[cfg(feature = "peer")]
            Subject::PeerCompressed | Subject::PeerPositional | Subject::PeerSmg => {
                panic!("{} is not a kvidx indexer", self.name())
            }
        };
        indexer.expect("valid indexer settings")
    }
}

impl Target for Indexer {
    fn submit(&self, event: Event) {
        self.apply_event(event)
            .expect("a pooled indexer accepts well-formed events");
    }

    fn flush(&self) {
        Indexer::flush(self).expect("the event threads are alive");
    }

    fn find_matches_into(&self, local_hashes: &[u64], out: &mut Vec<Match>) {
        Indexer::find_matches_into(self, local_hashes, out);
    }

    fn find_matches_tiered_into(&self, local_hashes: &[u64], out: &mut Vec<TieredMatch>) {
        Indexer::find_matches_tiered_into(self, local_hashes, out);
    }

    fn worker_blocks(&self) -> u64 {
        self.stats().worker_blocks
    }

    fn anomalies(&self) -> (u64, u64) {
        let s = self.stats();
        (s.events_rejected, s.unknown_removals)
    }
}
