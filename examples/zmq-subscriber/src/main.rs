//! `kvidx-zmq-subscriber`: connects to engines' ZMQ KV-event publishers (vLLM, SGLang,
//! TensorRT-LLM; one PUB endpoint per DP rank, topic `kv@<pod>@<model>`), feeds a kvidx
//! index, asks the replay socket for missing batches on gaps, and at the end prints one JSON
//! line: per-publisher counters and the answers to the given token-range queries.
//!
//! ```text
//! kvidx-zmq-subscriber --endpoint tcp://127.0.0.1:5557 --replay tcp://127.0.0.1:5558 \
//!     [--endpoint ... --replay ...] [--worker-id 7] [--format vllm|sglang|trtllm] \
//!     [--topic kv@] [--block-size 16] [--query NAME=FIRST-LAST ...] \
//!     [--idle-ms 1000] [--max-seconds 60] [--connect-timeout-ms 2000] \
//!     [--replay-max-batches 10000] [--replay-max-bytes 67108864] [--replay-timeout-ms 10000] \
//!     [--max-message-bytes 67108864]
//! ```
//! The i-th `--endpoint` is DP rank i; `--replay -` means that rank has no replay socket.
//! Endpoints that refuse, drop or garble the connection are connected to again until the
//! end; a replay reply beyond the `--replay-max-*` limits or the timeout counts as a failed
//! replay (the worker is cleared, as without replay). A peer's frames and messages are bounded
//! by `--max-message-bytes` (beyond: the connection is dropped and made again); see `zmtp`.
//!
//! With `bridge` as its first argument it is instead a bridge to NATS JetStream: it publishes
//! every batch to the stream `KVIDX_EVENTS` (see the `bridge` module and docs/bridge.md):
//!
//! ```text
//! kvidx-zmq-subscriber bridge --nats nats://127.0.0.1:4222 --endpoint tcp://10.0.0.7:5557=7 \
//!     [--endpoint tcp://10.0.0.7:5558=7:1 ...] [--format vllm|sglang] [--topic kv@] ...
//! ```
//!
//! With `publish` it replays a workload file as engine publishers (PUB and replay sockets) on
//! loopback, for walkthroughs and tests without an engine (see the `publish` module):
//!
//! ```text
//! kvidx-zmq-subscriber publish --workload FILE --endpoint tcp://127.0.0.1:5557=7 \
//!     --replay tcp://127.0.0.1:5567 [--format vllm|sglang] [--rate N] [--queries FILE]
//! ```

mod bridge;
mod publish;
mod publisher;
mod replay;
mod zmtp;

use std::sync::Arc;
use std::time::{Duration, Instant};

use kvidx::engine::Format;
use kvidx::hashing::hash_tokens;
use kvidx::{Config, Indexer, Worker};

use publisher::{Report, Source, Timing};
use replay::ReplayLimits;

struct Options {
    endpoints: Vec<String>,
    replays: Vec<Option<String>>,
    worker_id: u64,
    format: Format,
    topic: String,
    block_size: usize,
    queries: Vec<(String, u32, u32)>,
    idle: Duration,
    max: Duration,
    connect_timeout: Duration,
    replay_limits: ReplayLimits,
    limits: zmtp::Limits,
}

/// The usage: on stdout for `--help`, on stderr after a bad command line.
const USAGE: &str = "usage: kvidx-zmq-subscriber --endpoint URL [--replay URL|-] \
[--endpoint ... [--replay ...]] [--worker-id N] [--format vllm|sglang|trtllm] [--topic PREFIX] \
[--block-size N] [--query NAME=FIRST-LAST ...] [--idle-ms N] [--max-seconds N] \
[--connect-timeout-ms N] [--replay-max-batches N] [--replay-max-bytes N] \
[--replay-timeout-ms N] [--max-message-bytes N]
       kvidx-zmq-subscriber bridge --help   (the bridge to NATS JetStream)
       kvidx-zmq-subscriber publish --help  (engine publishers replaying a workload file)";

/// Parses the subscriber's command line; `None` when it asks for the usage (`--help`, `-h`).
fn parse_args(args: impl Iterator<Item = String>) -> Result<Option<Options>, String> {
    let mut o = Options {
        endpoints: Vec::new(),
        replays: Vec::new(),
        worker_id: 0,
        format: Format::Vllm,
        topic: String::new(),
        block_size: 16,
        queries: Vec::new(),
        idle: Duration::from_millis(1000),
        max: Duration::from_secs(60),
        connect_timeout: Duration::from_secs(2),
        replay_limits: ReplayLimits::default(),
        limits: zmtp::Limits::default(),
    };
    let mut args = args.peekable();
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        let num = |v: String| v.parse::<u64>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--help" | "-h" => return Ok(None),
            "--endpoint" => o.endpoints.push(value()?),
            "--replay" => {
                let v = value()?;
                o.replays.push((v != "-").then_some(v));
            }
            "--worker-id" => o.worker_id = num(value()?)?,
            "--format" => {
                o.format = match value()?.as_str() {
                    "vllm" => Format::Vllm,
                    "sglang" => Format::Sglang,
                    "trtllm" => Format::TrtLlm,
                    other => return Err(format!("unknown format {other}")),
                }
            }
            "--topic" => o.topic = value()?,
            "--block-size" => o.block_size = num(value()?)?.max(1) as usize,
            "--query" => {
                let v = value()?;
                let (name, range) = v.split_once('=').ok_or("--query NAME=FIRST-LAST")?;
                let (a, b) = range.split_once('-').ok_or("--query NAME=FIRST-LAST")?;
                let parse = |s: &str| s.parse::<u32>().map_err(|e| format!("--query: {e}"));
                o.queries.push((name.to_owned(), parse(a)?, parse(b)?));
            }
            "--idle-ms" => o.idle = Duration::from_millis(num(value()?)?),
            "--max-seconds" => o.max = Duration::from_secs(num(value()?)?),
            "--connect-timeout-ms" => {
                o.connect_timeout = Duration::from_millis(num(value()?)?.max(1))
            }
            "--max-message-bytes" => {
                let n = num(value()?)?.max(1);
                o.limits.max_frame = n;
                o.limits.max_message = n;
            }
            "--replay-max-batches" => o.replay_limits.max_batches = num(value()?)? as usize,
            "--replay-max-bytes" => o.replay_limits.max_bytes = num(value()?)? as usize,
            "--replay-timeout-ms" => {
                o.replay_limits.total = Duration::from_millis(num(value()?)?.max(1))
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if o.endpoints.is_empty() {
        return Err("at least one --endpoint is needed".into());
    }
    if o.replays.len() > o.endpoints.len() {
        return Err("more --replay than --endpoint".into());
    }
    o.replays.resize(o.endpoints.len(), None);
    Ok(Some(o))
}

fn report_json(source: &Source, r: &Report) -> String {
    let s = &r.stats;
    format!(
        concat!(
            "{{\"endpoint\":\"{}\",\"dp_rank\":{},\"batches\":{},\"malformed\":{},",
            "\"gaps\":{},\"missed\":{},\"restarts\":{},\"cleared\":{},\"gaps_detected\":{},\"replayed\":{},",
            "\"duplicates\":{},\"replay_failures\":{},\"bad_frames\":{},",
            "\"connects\":{},\"connect_failures\":{},\"disconnects\":{},",
            "\"events_submitted\":{},\"events_rejected\":{},\"events_skipped\":{}}}"
        ),
        source.endpoint,
        source.worker.dp_rank,
        s.batches,
        s.batches_malformed,
        s.gaps,
        s.batches_missed,
        s.restarts,
        s.workers_cleared,
        r.gaps_detected,
        r.replayed,
        r.duplicates,
        r.replay_failures,
        r.bad_frames,
        r.connects,
        r.connect_failures,
        r.disconnects,
        s.events_submitted,
        s.events_rejected,
        s.events_skipped,
    )
}

fn main() {
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().map(String::as_str) == Some("bridge") {
        args.next();
        std::process::exit(bridge::main(args));
    }
    if args.peek().map(String::as_str) == Some("publish") {
        args.next();
        std::process::exit(publish::main(args));
    }
    let options = match parse_args(args) {
        Ok(Some(o)) => o,
        Ok(None) => {
            println!("{USAGE}");
            return;
        }
        Err(e) => {
            eprintln!("kvidx-zmq-subscriber: {e}\n{USAGE}");
            std::process::exit(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let code = runtime.block_on(run(options));
    std::process::exit(code);
}

async fn run(o: Options) -> i32 {
    let indexer = Arc::new(Indexer::new(Config::default()).expect("indexer"));
    let timing = Timing {
        idle: o.idle,
        deadline: Instant::now() + o.max,
        connect_timeout: o.connect_timeout,
        max_backoff: Duration::from_secs(2),
    };
    let sources: Vec<Source> = o
        .endpoints
        .iter()
        .zip(&o.replays)
        .enumerate()
        .map(|(rank, (endpoint, replay))| Source {
            endpoint: endpoint.clone(),
            replay: replay.clone(),
            worker: Worker::new(o.worker_id, rank as u32),
        })
        .collect();
    let tasks: Vec<_> = sources
        .iter()
        .map(|s| {
            let fut = publisher::run(
                s.clone(),
                o.topic.clone(),
                o.format,
                Arc::clone(&indexer),
                timing,
                o.limits,
                o.replay_limits,
            );
            tokio::spawn(fut)
        })
        .collect();
    eprintln!("subscribed to {} publisher(s)", sources.len());
    let mut reports = Vec::new();
    let mut failed = false;
    for (source, task) in sources.iter().zip(tasks) {
        match task.await {
            Ok(Ok(report)) => reports.push(report_json(source, &report)),
            Ok(Err(e)) => {
                eprintln!("{}: {e}", source.endpoint);
                failed = true;
            }
            Err(e) => {
                eprintln!("{}: task failed: {e}", source.endpoint);
                failed = true;
            }
        }
    }
    let queries: Vec<String> = o
        .queries
        .iter()
        .map(|(name, first, last)| {
            let tokens: Vec<u32> = (*first..=*last).collect();
            let matches = indexer.find_matches(&hash_tokens(&tokens, o.block_size));
            let list: Vec<String> = matches
                .iter()
                .map(|m| format!("[{},{},{}]", m.worker_id, m.dp_rank, m.depth))
                .collect();
            format!("{{\"name\":\"{name}\",\"matches\":[{}]}}", list.join(","))
        })
        .collect();
    let st = indexer.stats();
    println!(
        concat!(
            "{{\"publishers\":[{}],\"queries\":[{}],\"index\":{{\"events_applied\":{},",
            "\"events_rejected\":{},\"unknown_removals\":{},\"workers\":{},",
            "\"worker_blocks\":{}}}}}"
        ),
        reports.join(","),
        queries.join(","),
        st.events_applied,
        st.events_rejected,
        st.unknown_removals,
        st.workers,
        st.worker_blocks,
    );
    i32::from(failed)
}
