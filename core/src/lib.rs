//! # kvidx
//!
//! A global index of every cached KV block on every LLM inference worker. On each request it
//! answers: which workers hold the longest prefix of this request's blocks?
//!
//! - Engines publish events ([`Event`]): blocks stored (with a parent), removed, or cleared.
//! - [`Indexer::find_matches`] takes a request's local block hashes and returns, per worker,
//!   the depth of the longest prefix it holds ([`Match`]), deepest first.
//! - Answers are exact whatever sequence-hash algorithm an engine uses: the index names blocks
//!   by its own prefix chain over local hashes ([`identity`]), and engine hashes stay opaque.
//!
//! The semantics are those of [`reference::ReferenceIndex`], the oracle every backend is
//! tested against. The hashing contract used by Dynamo-compatible publishers is in [`hashing`].
//!
//! ```
//! use kvidx::{Block, Config, Event, Indexer, Match, Worker};
//!
//! let index = Indexer::new(Config { event_threads: 0, ..Config::default() })?;
//! let w = Worker::new(7, 0);
//! index.apply_event(Event::stored(w, 0, None, vec![Block::new(11, 11), Block::new(12, 907)]))?;
//! index.flush()?; // a no-op in synchronous mode; a barrier with event threads
//! let matches = index.find_matches(&[11, 12, 13]);
//! assert_eq!(matches, vec![Match { worker_id: 7, dp_rank: 0, depth: 2 }]);
//! # Ok::<(), kvidx::Error>(())
//! ```

#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod applier;
mod cbor;
pub mod engine;
pub mod hashing;
pub mod identity;
pub mod index;
mod indexer;
pub mod llmd;
pub mod model;
pub mod namespace;
mod pool;
pub mod predictions;
pub use index::reference;
pub mod scratch;
pub mod snapshot;
#[cfg(test)]
mod test_rng;
mod writer;

pub use index::{Backend, BackendKind};
pub use indexer::{
    Config, Indexer, DEFAULT_JUMP_SIZE, DEFAULT_QUEUE_BYTES, DEFAULT_QUEUE_CAPACITY,
    MAX_EVENT_THREADS, MAX_JUMP_SIZE, MAX_QUEUE_CAPACITY,
};
pub use model::{
    BatchOutcome, Block, Event, EventData, Match, Outcome, PredictedMatch, RejectReason,
    ReplicaStats, Stats, Tier, TieredMatch, Worker, Write, TIERS,
};
pub use predictions::{Clock, PredictionConfig, PredictionStats, DEFAULT_PREDICTION_BYTES};
pub use snapshot::SnapshotInfo;

/// Why an indexer call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Error {
    /// A setting or an event was out of range; the text says which.
    InvalidArgument(&'static str),
    /// Synchronous mode: the Stored event's parent is not held by the worker; nothing applied.
    ParentNotFound,
    /// The indexer's event threads are gone (an internal bug stopped them).
    ShutDown,
    /// A snapshot being restored is not a valid kvidx snapshot (truncated, corrupted, foreign,
    /// a newer format version); the text says what was wrong. Nothing was restored.
    Malformed(&'static str),
    /// Reading or writing a snapshot failed in the reader or writer it was given.
    Io(std::io::ErrorKind),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::InvalidArgument(what) => write!(f, "invalid argument: {what}"),
            Error::ParentNotFound => f.write_str("the parent block is not held by the worker"),
            Error::ShutDown => f.write_str("the indexer's event threads are gone"),
            Error::Malformed(what) => write!(f, "malformed snapshot: {what}"),
            Error::Io(kind) => write!(f, "snapshot input/output failed: {kind}"),
        }
    }
}

impl std::error::Error for Error {}
