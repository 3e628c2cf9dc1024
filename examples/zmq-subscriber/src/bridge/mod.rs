//! `kvidx-zmq-subscriber bridge`: subscribes to engines' ZMQ KV-event publishers and publishes
//! each batch, byte for byte, to the JetStream stream `KVIDX_EVENTS` (subject
//! `kvidx.events.<worker_id>.<dp_rank>`, headers `Kvidx-Worker-Id`, `Kvidx-Dp-Rank`,
//! `Kvidx-Format`, `Kvidx-Engine-Seq`, `Kvidx-Engine-Epoch`, `Nats-Msg-Id`), awaiting each
//! acknowledgement. See docs/bridge.md.
//!
//! Per publisher a reader task ([`source`]) feeds a publishing task ([`sink`]) through an
//! unbounded channel whose contents are bounded by the byte cap. It runs until SIGINT,
//! SIGTERM or `--max-seconds`; then it stops reading, publishes what it holds (at most
//! `--drain-timeout-ms`), prints one JSON line of counters and exits 0, or 1 when batches it
//! had taken from ZMQ were left undelivered.

mod counters;
mod held;
pub(crate) mod options;
mod sink;
mod source;

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::{mpsc, watch, Semaphore};

use counters::{get, BridgeCounters, Counters};
use options::BridgeOptions;

/// Runs the bridge with the arguments that follow `bridge`; returns the exit code.
pub fn main(args: impl Iterator<Item = String>) -> i32 {
    let o = match options::parse(args) {
        Ok(options::Command::Run(o)) => *o,
        Ok(options::Command::Help) => {
            println!("{}", options::USAGE);
            return 0;
        }
        Err(e) => {
            eprintln!("kvidx-zmq-subscriber bridge: {e}\n{}", options::USAGE);
            return 2;
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(run(o))
}

/// Resolves at SIGINT, SIGTERM or after `max_run` (`--max-seconds`), saying which on stderr
/// after `who: ` (the bridge and the `publish` mode).
pub(crate) async fn stop_signal(max_run: Option<std::time::Duration>, who: &str) {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
    let limit = async {
        match max_run {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = term.recv() => eprintln!("{who}: SIGTERM: stopping"),
        _ = int.recv() => eprintln!("{who}: SIGINT: stopping"),
        _ = limit => eprintln!("{who}: --max-seconds reached: stopping"),
    }
}

async fn run(o: BridgeOptions) -> i32 {
    let bridge = Arc::new(BridgeCounters::default());
    let nats = match sink::Nats::connect(&o, Arc::clone(&bridge)).await {
        Ok(n) => Arc::new(n),
        Err(e) => {
            eprintln!("kvidx-zmq-subscriber bridge: {e}");
            return 2;
        }
    };
    let cap = o.max_buffer_bytes.min(Semaphore::MAX_PERMITS as u64);
    let shared = Arc::new(source::Shared {
        topic: o.topic.clone(),
        format: o.format,
        limits: o.limits,
        connect_timeout: o.connect_timeout,
        buffer: Arc::new(Semaphore::new(cap as usize)),
        buffer_cap: cap,
        epochs: source::EpochClock::default(),
        bridge: Arc::clone(&bridge),
        replay_limits: o.replay_limits,
    });
    let (stop_tx, stop_rx) = watch::channel(false);
    let (drain_tx, drain_rx) = watch::channel(None::<Instant>);
    let mut readers = Vec::new();
    let mut writers = Vec::new();
    let mut all = Vec::new();
    for endpoint in &o.endpoints {
        let c = Arc::new(Counters::new());
        let (tx, rx) = mpsc::unbounded_channel();
        readers.push(tokio::spawn(source::run(
            endpoint.clone(),
            Arc::clone(&shared),
            Arc::clone(&c),
            tx,
            stop_rx.clone(),
        )));
        writers.push(tokio::spawn(sink::run(
            endpoint.clone(),
            o.format,
            Arc::clone(&nats),
            Arc::clone(&c),
            rx,
            drain_rx.clone(),
        )));
        all.push((endpoint.clone(), c));
    }
    eprintln!(
        "bridge: {} publisher(s) -> {} stream {}",
        o.endpoints.len(),
        o.nats,
        options::STREAM
    );
    stop_signal(o.max_run, "bridge").await;
    let _ = stop_tx.send(true);
    for r in readers {
        let _ = r.await;
    }
    let _ = drain_tx.send(Some(Instant::now() + o.drain_timeout));
    for w in writers {
        let _ = w.await;
    }
    let publishers: Vec<String> = all
        .iter()
        .map(|(e, c)| {
            format!(
                "{{\"endpoint\":\"{}\",\"worker_id\":{},\"dp_rank\":{},\"subject\":\"{}\",{}}}",
                e.url,
                e.worker_id,
                e.dp_rank,
                e.subject(),
                c.json_fields()
            )
        })
        .collect();
    let undelivered: u64 = all.iter().map(|(_, c)| get(&c.undelivered)).sum();
    println!(
        concat!(
            "{{\"bridge\":[{}],\"nats\":{{\"connects\":{},\"disconnects\":{}}},",
            "\"buffer\":{{\"cap\":{},\"peak\":{},\"batch_overhead\":{}}}}}"
        ),
        publishers.join(","),
        get(&bridge.nats_connects),
        get(&bridge.nats_disconnects),
        cap,
        get(&bridge.buffer_peak),
        held::HELD_BATCH_OVERHEAD,
    );
    i32::from(undelivered > 0)
}
