//! The `bridge` subcommand's command line.
//!
//! ```text
//! kvidx-zmq-subscriber bridge --nats nats://127.0.0.1:4222 \
//!     --endpoint tcp://10.0.0.7:5557=7 --replay tcp://10.0.0.7:5567 \
//!     --endpoint tcp://10.0.0.7:5558=7:1 [--replay -] [--endpoint ...] \
//!     [--format vllm|sglang] [--topic kv@] [--max-buffer-bytes 268435456] [--max-in-flight 256] \
//!     [--ack-timeout-ms 2000] [--duplicate-window-s 120] [--drain-timeout-ms 10000] \
//!     [--connect-timeout-ms 2000] [--max-message-bytes 67108864] [--max-seconds 0] \
//!     [--replay-max-batches 10000] [--replay-max-bytes 67108864] [--replay-timeout-ms 10000]
//! ```
//! `--endpoint URL=WORKER_ID[:DP_RANK]` names one engine publisher and the worker its batches
//! belong to (DP rank 0 when omitted); each `(worker_id, dp_rank)` may appear once. The i-th
//! `--replay` is the i-th endpoint's replay socket (`-`: none), as in the subscriber mode.

use std::time::Duration;

use kvidx::engine::Format;

use crate::replay::ReplayLimits;
use crate::zmtp;

/// One engine publisher to bridge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The PUB endpoint (`tcp://host:port`).
    pub url: String,
    /// The worker its batches belong to.
    pub worker_id: u64,
    /// The worker's DP rank.
    pub dp_rank: u32,
    /// The engine's ROUTER replay endpoint, asked for the batches of a gap.
    pub replay: Option<String>,
}

impl Endpoint {
    /// The JetStream subject of this publisher's batches (`kvidx.events.<worker_id>.<dp_rank>`).
    pub fn subject(&self) -> String {
        format!("{SUBJECT_PREFIX}.{}.{}", self.worker_id, self.dp_rank)
    }
}

/// The stream every batch goes to (fixed: the replicas read it by this name).
pub const STREAM: &str = "KVIDX_EVENTS";
/// The subjects' common prefix; the stream holds `kvidx.events.>`.
pub const SUBJECT_PREFIX: &str = "kvidx.events";

/// Everything the bridge is told.
#[derive(Debug, Clone)]
pub struct BridgeOptions {
    /// The NATS server(s), comma-separated URLs as the client takes them.
    pub nats: String,
    /// The publishers.
    pub endpoints: Vec<Endpoint>,
    /// The engines' wire format (one per bridge: `Kvidx-Format` header).
    pub format: Format,
    /// The ZMQ topic prefix subscribed to.
    pub topic: String,
    /// Most payload bytes held (read from ZMQ, not yet acknowledged by JetStream) over all
    /// publishers; at the cap the bridge stops reading ZMQ.
    pub max_buffer_bytes: u64,
    /// Most publishes awaiting their acknowledgement over all publishers (each publisher has
    /// at most one: its batches are stored in order).
    pub max_in_flight: usize,
    /// How long to wait for one acknowledgement before publishing the batch again.
    pub ack_timeout: Duration,
    /// The stream's duplicate window when the bridge creates it.
    pub duplicate_window: Duration,
    /// After a stop, how long buffered batches may still be published.
    pub drain_timeout: Duration,
    /// Longest wait for one ZMQ connection (TCP and ZMTP handshake).
    pub connect_timeout: Duration,
    /// Bounds on one ZMQ message.
    pub limits: zmtp::Limits,
    /// Stop after this long (`None`: at SIGINT or SIGTERM only).
    pub max_run: Option<Duration>,
    /// Bounds on one replay reply.
    pub replay_limits: ReplayLimits,
}

/// The usage line: on stdout for `--help`, on stderr after a bad command line.
pub const USAGE: &str = "usage: kvidx-zmq-subscriber bridge --nats URL \
--endpoint URL=WORKER_ID[:DP_RANK] [--replay URL|-] [--endpoint ... [--replay ...]] \
[--format vllm|sglang] [--topic PREFIX] [--max-buffer-bytes N] [--max-in-flight N] \
[--ack-timeout-ms N] [--duplicate-window-s N] [--drain-timeout-ms N] [--connect-timeout-ms N] \
[--max-message-bytes N] [--max-seconds N] [--replay-max-batches N] [--replay-max-bytes N] \
[--replay-timeout-ms N]";

pub(crate) fn parse_endpoint(v: &str) -> Result<Endpoint, String> {
    let (url, who) = v
        .rsplit_once('=')
        .ok_or(format!("--endpoint {v}: expected URL=WORKER_ID[:DP_RANK]"))?;
    let (worker, rank) = match who.split_once(':') {
        Some((w, r)) => (w, r),
        None => (who, "0"),
    };
    let worker_id = worker
        .parse::<u64>()
        .map_err(|e| format!("--endpoint {v}: worker id: {e}"))?;
    let dp_rank = rank
        .parse::<u32>()
        .map_err(|e| format!("--endpoint {v}: dp rank: {e}"))?;
    if !url.starts_with("tcp://") {
        return Err(format!(
            "--endpoint {v}: only tcp:// endpoints are supported"
        ));
    }
    Ok(Endpoint {
        url: url.to_owned(),
        worker_id,
        dp_rank,
        replay: None,
    })
}

/// What the command line asks for.
#[derive(Debug)]
pub enum Command {
    /// Run the bridge.
    Run(Box<BridgeOptions>),
    /// Print the usage (`--help` or `-h`) and exit 0.
    Help,
}

/// Parses the arguments that follow `bridge`.
pub fn parse(args: impl Iterator<Item = String>) -> Result<Command, String> {
    let mut o = BridgeOptions {
        nats: String::new(),
        endpoints: Vec::new(),
        format: Format::Vllm,
        topic: String::new(),
        max_buffer_bytes: 256 << 20,
        max_in_flight: 256,
        ack_timeout: Duration::from_secs(2),
        duplicate_window: Duration::from_secs(120),
        drain_timeout: Duration::from_secs(10),
        connect_timeout: Duration::from_secs(2),
        limits: zmtp::Limits::default(),
        max_run: None,
        replay_limits: ReplayLimits::default(),
    };
    let mut replays: Vec<Option<String>> = Vec::new();
    let mut args = args.peekable();
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        let num = |v: String| v.parse::<u64>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--help" | "-h" => return Ok(Command::Help),
            "--nats" => o.nats = value()?,
            "--endpoint" => o.endpoints.push(parse_endpoint(&value()?)?),
            "--replay" => {
                let v = value()?;
                replays.push((v != "-").then_some(v));
            }
            "--replay-max-batches" => o.replay_limits.max_batches = num(value()?)? as usize,
            "--replay-max-bytes" => o.replay_limits.max_bytes = num(value()?)? as usize,
            "--replay-timeout-ms" => {
                o.replay_limits.total = Duration::from_millis(num(value()?)?.max(1))
            }
            "--format" => {
                o.format = match value()?.as_str() {
                    "vllm" => Format::Vllm,
                    "sglang" => Format::Sglang,
                    other => {
                        return Err(format!(
                            "--format {other}: the bridge takes vllm or sglang \
                             (TensorRT-LLM's publisher speaks the vllm wire)"
                        ))
                    }
                }
            }
            "--topic" => o.topic = value()?,
            "--max-buffer-bytes" => o.max_buffer_bytes = num(value()?)?.max(1),
            "--max-in-flight" => o.max_in_flight = num(value()?)?.max(1) as usize,
            "--ack-timeout-ms" => o.ack_timeout = Duration::from_millis(num(value()?)?.max(1)),
            "--duplicate-window-s" => {
                o.duplicate_window = Duration::from_secs(num(value()?)?.max(1))
            }
            "--drain-timeout-ms" => o.drain_timeout = Duration::from_millis(num(value()?)?),
            "--connect-timeout-ms" => {
                o.connect_timeout = Duration::from_millis(num(value()?)?.max(1))
            }
            "--max-message-bytes" => {
                let n = num(value()?)?.max(1);
                o.limits.max_frame = n;
                o.limits.max_message = n;
            }
            "--max-seconds" => {
                let n = num(value()?)?;
                o.max_run = (n > 0).then(|| Duration::from_secs(n));
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if o.nats.is_empty() {
        return Err("--nats URL is needed".into());
    }
    if o.endpoints.is_empty() {
        return Err("at least one --endpoint is needed".into());
    }
    if replays.len() > o.endpoints.len() {
        return Err("more --replay than --endpoint".into());
    }
    for (endpoint, replay) in o.endpoints.iter_mut().zip(replays) {
        endpoint.replay = replay;
    }
    for (i, a) in o.endpoints.iter().enumerate() {
        if let Some(b) = o.endpoints[..i]
            .iter()
            .find(|b| (b.worker_id, b.dp_rank) == (a.worker_id, a.dp_rank))
        {
            return Err(format!(
                "{} and {} are both worker {} dp rank {}: one publisher per (worker, rank)",
                b.url, a.url, a.worker_id, a.dp_rank
            ));
        }
    }
    Ok(Command::Run(Box::new(o)))
}

/// The `Kvidx-Format` header value of a format.
pub fn format_name(format: Format) -> &'static str {
    match format {
        Format::Sglang => "sglang",
        Format::Vllm | Format::TrtLlm => "vllm",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> impl Iterator<Item = String> + '_ {
        s.split_whitespace().map(str::to_owned)
    }

    #[test]
    fn endpoints_name_their_worker_and_rank() {
        let Command::Run(o) = parse(args(
            "--nats nats://127.0.0.1:4222 --endpoint tcp://h:5557=7 --endpoint tcp://h:5558=7:1 \
             --replay - --replay tcp://h:5568 --format sglang --max-buffer-bytes 1024 \
             --max-seconds 3 --replay-max-batches 5",
        ))
        .unwrap() else {
            panic!("not a run")
        };
        assert_eq!(
            o.endpoints,
            [
                Endpoint {
                    url: "tcp://h:5557".into(),
                    worker_id: 7,
                    dp_rank: 0,
                    replay: None,
                },
                Endpoint {
                    url: "tcp://h:5558".into(),
                    worker_id: 7,
                    dp_rank: 1,
                    replay: Some("tcp://h:5568".into()),
                }
            ]
        );
        assert_eq!(o.endpoints[1].subject(), "kvidx.events.7.1");
        assert_eq!(o.format, Format::Sglang);
        assert_eq!(o.max_buffer_bytes, 1024);
        assert_eq!(o.max_run, Some(Duration::from_secs(3)));
        assert_eq!(o.replay_limits.max_batches, 5);
    }

    #[test]
    fn bad_command_lines_are_refused() {
        let cases = [
            ("--endpoint tcp://h:1=1", "--nats URL is needed"),
            ("--nats n", "at least one --endpoint"),
            ("--nats n --endpoint tcp://h:1", "expected URL=WORKER_ID"),
            ("--nats n --endpoint tcp://h:1=x", "worker id"),
            ("--nats n --endpoint tcp://h:1=1:y", "dp rank"),
            ("--nats n --endpoint ipc:///x=1", "only tcp://"),
            (
                "--nats n --endpoint tcp://h:1=1 --endpoint tcp://h:2=1:0",
                "one publisher per (worker, rank)",
            ),
            (
                "--nats n --endpoint tcp://h:1=1 --format trtllm",
                "vllm or sglang",
            ),
            (
                "--nats n --endpoint tcp://h:1=1 --bogus",
                "unknown argument",
            ),
        ];
        for (line, want) in cases {
            let err = parse(args(line)).err().unwrap();
            assert!(err.contains(want), "{line}: {err}");
        }
    }
}
