//! `kvidx-zmq-subscriber publish`: replays a workload file (docs/contract.md, section 4) as
//! engine publishers on loopback, so the subscriber, the bridge and the router replicas can be
//! run without an inference engine. Each `--endpoint URL=WORKER[:RANK]` is one engine: a PUB
//! socket sending the workload events of that worker and DP rank as vLLM or SGLang batches
//! (`[topic, 8-byte sequence from 0, msgpack batch]`), and, with a `--replay URL`, a ROUTER
//! replay socket holding every batch sent. See the `serve` module for the sockets and the
//! `workload` module for the batches.
//!
//! Each engine waits for a first subscriber, sends its batches (`--rate` batches per second
//! each, or as fast as they go), then keeps its sockets open until SIGINT, SIGTERM or
//! `--max-seconds`, and the command prints one JSON line: per engine the batches sent.

mod serve;
mod workload;

use std::fs::File;
use std::io::{BufReader, Write};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use kvidx::engine::Format;

use crate::bridge::options::{parse_endpoint, Endpoint};
use serve::Engine;
use workload::Encoding;

/// The usage: on stdout for `--help`, on stderr after a bad command line.
pub const USAGE: &str = "usage: kvidx-zmq-subscriber publish --workload FILE \
--endpoint tcp://127.0.0.1:PORT=WORKER_ID[:DP_RANK] [--replay tcp://127.0.0.1:PORT|-] \
[--endpoint ... [--replay ...]] [--format vllm|sglang] [--topic TOPIC] [--block-size N] \
[--batch-events N] [--rate BATCHES_PER_S] [--queries FILE] [--max-seconds N]";

struct Options {
    workload: String,
    endpoints: Vec<Endpoint>,
    replays: Vec<Option<String>>,
    format: Format,
    topic: String,
    block_size: usize,
    per_batch: usize,
    rate: f64,
    queries: Option<String>,
    max_run: Option<Duration>,
}

fn parse(args: impl Iterator<Item = String>) -> Result<Option<Options>, String> {
    let mut o = Options {
        workload: String::new(),
        endpoints: Vec::new(),
        replays: Vec::new(),
        format: Format::Vllm,
        topic: "kv@127.0.0.1@workload".into(),
        block_size: 16,
        per_batch: 8,
        rate: 0.0,
        queries: None,
        max_run: None,
    };
    let mut args = args.peekable();
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        let num = |v: String| v.parse::<u64>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--help" | "-h" => return Ok(None),
            "--workload" => o.workload = value()?,
            "--endpoint" => o.endpoints.push(parse_endpoint(&value()?)?),
            "--replay" => {
                let v = value()?;
                o.replays.push((v != "-").then_some(v));
            }
            "--format" => {
                o.format = match value()?.as_str() {
                    "vllm" => Format::Vllm,
                    "sglang" => Format::Sglang,
                    other => return Err(format!("unknown format {other}")),
                }
            }
            "--topic" => o.topic = value()?,
            "--block-size" => o.block_size = num(value()?)?.max(1) as usize,
            "--batch-events" => o.per_batch = num(value()?)?.max(1) as usize,
            "--rate" => {
                o.rate = value()?
                    .parse::<f64>()
                    .map_err(|e| format!("--rate: {e}"))?
                    .max(0.0)
            }
            "--queries" => o.queries = Some(value()?),
            "--max-seconds" => o.max_run = Some(Duration::from_secs(num(value()?)?)),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if o.workload.is_empty() {
        return Err("--workload is needed".into());
    }
    if o.endpoints.is_empty() {
        return Err("at least one --endpoint is needed".into());
    }
    if o.replays.len() > o.endpoints.len() {
        return Err("more --replay than --endpoint".into());
    }
    o.replays.resize(o.endpoints.len(), None);
    let mut keys: Vec<_> = o
        .endpoints
        .iter()
        .map(|e| (e.worker_id, e.dp_rank))
        .collect();
    keys.sort_unstable();
    if keys.windows(2).any(|w| w[0] == w[1]) {
        return Err("a (worker, rank) may be published once".into());
    }
    Ok(Some(o))
}

/// Runs the publishers with the arguments that follow `publish`; returns the exit code.
pub fn main(args: impl Iterator<Item = String>) -> i32 {
    let o = match parse(args) {
        Ok(Some(o)) => o,
        Ok(None) => {
            println!("{USAGE}");
            return 0;
        }
        Err(e) => {
            eprintln!("kvidx-zmq-subscriber publish: {e}\n{USAGE}");
            return 2;
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    match runtime.block_on(run(o)) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("kvidx-zmq-subscriber publish: {e}");
            1
        }
    }
}

async fn run(o: Options) -> Result<(), String> {
    let file = File::open(&o.workload).map_err(|e| format!("{}: {e}", o.workload))?;
    let keys: Vec<(u64, u32)> = o
        .endpoints
        .iter()
        .map(|e| (e.worker_id, e.dp_rank))
        .collect();
    let enc = Encoding {
        format: o.format,
        block_size: o.block_size,
        per_batch: o.per_batch,
    };
    let mut converted = workload::convert(BufReader::new(file), &keys, enc)
        .map_err(|e| format!("{}: {e}", o.workload))?;
    if let Some(path) = &o.queries {
        let mut out = File::create(path).map_err(|e| format!("{path}: {e}"))?;
        for q in &converted.queries {
            writeln!(out, "{q}").map_err(|e| format!("{path}: {e}"))?;
        }
    }
    let mut engines = Vec::new();
    for (e, replay) in o.endpoints.iter().zip(&o.replays) {
        let batches = converted
            .batches
            .remove(&(e.worker_id, e.dp_rank))
            .unwrap_or_default();
        let engine = Engine::new(o.topic.clone().into_bytes(), batches);
        tokio::spawn(serve::serve_pub(
            serve::bind(&e.url).await?,
            Arc::clone(&engine),
        ));
        if let Some(r) = replay {
            tokio::spawn(serve::serve_replay(
                serve::bind(r).await?,
                Arc::clone(&engine),
            ));
        }
        eprintln!(
            "publish: {} (worker {}, rank {}): {} batches, waiting for a subscriber",
            e.url,
            e.worker_id,
            e.dp_rank,
            engine.batches.len()
        );
        tokio::spawn(send_all(Arc::clone(&engine), e.url.clone(), o.rate));
        engines.push(engine);
    }
    eprintln!(
        "publish: {} queries, {} events of other workers not published",
        converted.queries.len(),
        converted.unselected_events
    );
    crate::bridge::stop_signal(o.max_run, "publish").await;
    let list: Vec<String> = o
        .endpoints
        .iter()
        .zip(&engines)
        .map(|(e, engine)| {
            format!(
                "{{\"endpoint\":\"{}\",\"worker_id\":{},\"dp_rank\":{},\"batches\":{},\"sent\":{}}}",
                e.url,
                e.worker_id,
                e.dp_rank,
                engine.batches.len(),
                engine.sent.load(Ordering::SeqCst)
            )
        })
        .collect();
    println!("{{\"engines\":[{}]}}", list.join(","));
    Ok(())
}

/// Sends an engine's batches once a subscriber is in, at `rate` per second (0: no pause).
async fn send_all(engine: Arc<Engine>, url: String, rate: f64) {
    engine.first_subscriber().await;
    let mut tick = (rate > 0.0).then(|| tokio::time::interval(Duration::from_secs_f64(1.0 / rate)));
    loop {
        if let Some(t) = tick.as_mut() {
            t.tick().await;
        }
        if !engine.send_next() {
            break;
        }
        tokio::task::yield_now().await; // let the subscribers' tasks write
    }
    eprintln!("publish: {url}: all {} batches sent", engine.batches.len());
}
