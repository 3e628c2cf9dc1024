//! Mooncake-format request traces: one JSON object per line with `timestamp` (ms),
//! `input_length` and `output_length` (tokens) and `hash_ids` (one id per 512-token block;
//! equal ids mean a shared prefix block).

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use serde::Deserialize;

/// Tokens per hash id in Mooncake traces.
pub const TRACE_BLOCK_TOKENS: u64 = 512;

/// One request of a trace.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Request {
    /// Arrival time in milliseconds since the start of the trace.
    pub timestamp: u64,
    /// Prompt length in tokens.
    pub input_length: u64,
    /// Generated tokens.
    pub output_length: u64,
    /// Prompt blocks of 512 tokens, as shared ids.
    pub hash_ids: Vec<u64>,
}

/// Reads a whole trace; blank lines are skipped, a malformed line is an error naming it.
pub fn read_trace(path: &Path) -> Result<Vec<Request>, String> {
    let file =
        File::open(path).map_err(|e| format!("cannot open trace {}: {e}", path.display()))?;
    parse_trace(BufReader::new(file), &path.display().to_string())
}

/// Parses a trace from any reader; `name` is used in error messages.
pub fn parse_trace(reader: impl BufRead, name: &str) -> Result<Vec<Request>, String> {
    let mut requests = Vec::new();
    for (index, line) in reader.lines().enumerate() {
        let line = line.map_err(|e| format!("{name}: read error: {e}"))?;
        if line.trim().is_empty() {
            continue;
        }
        let request: Request = serde_json::from_str(&line)
            .map_err(|e| format!("{name}:{}: bad trace line: {e}", index + 1))?;
        requests.push(request);
    }
    Ok(requests)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_mooncake_lines_and_names_bad_ones() {
        let text = "{\"timestamp\": 5, \"input_length\": 600, \"output_length\": 7, \"hash_ids\": [0, 3]}\n\n";
        let parsed = parse_trace(text.as_bytes(), "t").unwrap();
        assert_eq!(
            parsed,
            vec![Request {
                timestamp: 5,
                input_length: 600,
                output_length: 7,
                hash_ids: vec![0, 3]
            }]
        );
        let err = parse_trace("{\"timestamp\": 1}\n".as_bytes(), "t").unwrap_err();
        assert!(err.starts_with("t:1:"), "{err}");
    }

    #[test]
    fn shipped_sample_trace_reads() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/sample_trace.jsonl");
        let trace = read_trace(&path).unwrap();
        assert!(trace.len() >= 300, "sample has {} requests", trace.len());
        assert!(trace.windows(2).all(|w| w[0].timestamp <= w[1].timestamp));
    }
}
