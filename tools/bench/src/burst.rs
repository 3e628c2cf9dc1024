//! The bursty variant of a trace: the same prefix arriving many times within the event delay.
//!
//! Each request of the trace becomes a burst of `size` requests spread evenly over
//! `window_ms`: the first is the request itself, each other one has its prompt with the last
//! hash id replaced by a fresh one (so the burst shares everything but its last 512 tokens,
//! as many users sending the same long system prompt or document at once). A router that
//! sees the first request's blocks only after the burst is over spreads it; one that
//! remembers where it sent the first keeps the burst together.

use crate::trace::Request;

/// The bursts of the default variant: 8 requests each.
pub const DEFAULT_BURST: u32 = 8;
/// The window of the default variant's bursts (ms): within the default 50 ms event delay.
pub const DEFAULT_WINDOW_MS: u64 = 40;

/// `trace` with every request turned into a burst of `size` requests over `window_ms`,
/// ordered by arrival (requests arriving together keep the trace's order).
pub fn bursty(trace: &[Request], size: u32, window_ms: u64) -> Vec<Request> {
    let size = u64::from(size.max(1));
    let mut fresh = trace
        .iter()
        .flat_map(|r| r.hash_ids.iter().copied())
        .max()
        .map_or(0, |m| m + 1);
    let mut out = Vec::with_capacity(trace.len() * size as usize);
    for r in trace {
        for k in 0..size {
            let mut copy = r.clone();
            copy.timestamp = r.timestamp + k * window_ms / size;
            if k > 0 {
                if let Some(last) = copy.hash_ids.last_mut() {
                    *last = fresh;
                    fresh += 1;
                }
            }
            out.push(copy);
        }
    }
    out.sort_by_key(|r| r.timestamp);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(timestamp: u64, hash_ids: &[u64]) -> Request {
        Request {
            timestamp,
            input_length: 512 * hash_ids.len() as u64,
            output_length: 10,
            hash_ids: hash_ids.to_vec(),
        }
    }

    #[test]
    fn each_request_becomes_a_burst_sharing_all_but_its_last_block() {
        let trace = [request(0, &[0, 1, 2]), request(100, &[0, 3])];
        let b = bursty(&trace, 4, 40);
        assert_eq!(b.len(), 8);
        let times: Vec<u64> = b.iter().map(|r| r.timestamp).collect();
        assert_eq!(times, [0, 10, 20, 30, 100, 110, 120, 130]);
        assert_eq!(b[0], trace[0], "the first of a burst is the request itself");
        assert_eq!(b[4], trace[1]);
        let ids: Vec<&[u64]> = b.iter().map(|r| r.hash_ids.as_slice()).collect();
        assert_eq!(
            ids,
            [
                &[0, 1, 2][..],
                &[0, 1, 4],
                &[0, 1, 5],
                &[0, 1, 6],
                &[0, 3],
                &[0, 7],
                &[0, 8],
                &[0, 9]
            ]
        );
    }

    #[test]
    fn overlapping_bursts_are_ordered_by_arrival() {
        let trace = [request(0, &[0]), request(5, &[1])];
        let b = bursty(&trace, 2, 20);
        let got: Vec<(u64, u64)> = b.iter().map(|r| (r.timestamp, r.hash_ids[0])).collect();
        assert_eq!(got, [(0, 0), (5, 1), (10, 2), (15, 3)]);
    }
}
