//! How long the event-free router credits a routed prompt to its worker: a number of
//! milliseconds, or no limit (`none` on the command line).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// The event-free view's default: an hour. In event-free routing the per-worker capacity
/// (`--blocks-per-worker` predicted blocks, least recently routed dropped first) is what
/// approximates each engine's LRU cache; an engine's cache has no time to live. The TTL only
/// bounds how long a worker is credited with a chain nobody routed there since, for a cache
/// lost without the router knowing (an engine restarted). So it is set long against the time
/// a conversation pauses between turns (minutes to tens of minutes), never to decide in the
/// capacity's place.
pub const DEFAULT_EVENT_FREE_TTL: Ttl = Ttl::Millis(3_600_000);

/// A prediction's time to live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ttl {
    /// This many milliseconds (more than 0).
    Millis(u64),
    /// No limit: predictions leave only by the capacity or the byte bound.
    Unbounded,
}

impl Ttl {
    /// The TTL to give `Indexer::predict` (unbounded: the longest duration, which the
    /// indexer's clock never reaches).
    pub fn duration(self) -> Duration {
        match self {
            Ttl::Millis(ms) => Duration::from_millis(ms),
            Ttl::Unbounded => Duration::MAX,
        }
    }

    /// The milliseconds, `None` when unbounded (for `results.json`).
    pub fn millis(self) -> Option<u64> {
        match self {
            Ttl::Millis(ms) => Some(ms),
            Ttl::Unbounded => None,
        }
    }
}

impl fmt::Display for Ttl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ttl::Millis(ms) => write!(f, "{ms}"),
            Ttl::Unbounded => f.write_str("none"),
        }
    }
}

impl FromStr for Ttl {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if s == "none" {
            return Ok(Ttl::Unbounded);
        }
        match s.parse::<u64>() {
            Ok(0) => Err("0 would predict nothing; `none` means no limit".into()),
            Ok(ms) => Ok(Ttl::Millis(ms)),
            Err(_) => Err(format!("{s:?}: want milliseconds or `none`")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_milliseconds_or_none_and_prints_them_back() {
        for text in ["3600000", "1", "none"] {
            let ttl: Ttl = text.parse().unwrap();
            assert_eq!(ttl.to_string(), text);
        }
        assert_eq!("none".parse::<Ttl>().unwrap().duration(), Duration::MAX);
        assert_eq!(DEFAULT_EVENT_FREE_TTL.duration(), Duration::from_secs(3600));
        assert!("0".parse::<Ttl>().unwrap_err().contains("none"));
        assert!("1h".parse::<Ttl>().is_err());
    }
}
