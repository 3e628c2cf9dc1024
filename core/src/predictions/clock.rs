//! The time predictions expire by: the system's monotonic clock, or a manual clock that only
//! moves when the caller moves it (tests and simulations drive time without sleeping).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::Error;

/// Which clock an indexer's predictions expire by ([`crate::PredictionConfig::clock`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Clock {
    /// The system's monotonic clock; time 0 is when the indexer was built.
    #[default]
    Monotonic,
    /// Time starts at 0 and moves only by [`crate::Indexer::set_time`] and
    /// [`crate::Indexer::advance_time`].
    Manual,
}

/// A running clock: nanoseconds since the indexer was built (monotonic) or as last set.
#[derive(Debug)]
pub(crate) enum RunningClock {
    Monotonic(Instant),
    Manual(AtomicU64),
}

impl RunningClock {
    pub(crate) fn start(kind: Clock) -> Self {
        match kind {
            Clock::Monotonic => Self::Monotonic(Instant::now()),
            Clock::Manual => Self::Manual(AtomicU64::new(0)),
        }
    }

    /// Nanoseconds since the clock's origin.
    pub(crate) fn now_nanos(&self) -> u64 {
        match self {
            Self::Monotonic(origin) => saturating_nanos(origin.elapsed()),
            Self::Manual(now) => now.load(Ordering::Acquire),
        }
    }

    /// Moves a manual clock to `to` (never back).
    pub(crate) fn set(&self, to: Duration) -> Result<(), Error> {
        let to = saturating_nanos(to);
        let now = self.manual()?;
        now.fetch_update(Ordering::AcqRel, Ordering::Acquire, |at| {
            (to >= at).then_some(to)
        })
        .map(|_| ())
        .map_err(|_| Error::InvalidArgument("a manual clock never goes back"))
    }

    /// Moves a manual clock forward by `by` (saturating).
    pub(crate) fn advance(&self, by: Duration) -> Result<(), Error> {
        let by = saturating_nanos(by);
        let now = self.manual()?;
        let _ = now.fetch_update(Ordering::AcqRel, Ordering::Acquire, |at| {
            Some(at.saturating_add(by))
        });
        Ok(())
    }

    fn manual(&self) -> Result<&AtomicU64, Error> {
        match self {
            Self::Manual(now) => Ok(now),
            Self::Monotonic(_) => Err(Error::InvalidArgument(
                "only a manual clock is set by the caller",
            )),
        }
    }
}

/// A duration in nanoseconds, saturating at `u64::MAX` (about 584 years).
pub(crate) fn saturating_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
