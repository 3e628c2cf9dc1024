//! Peak memory of a burst of large events: one worker re-stores the same long chain many
//! times, much faster than one event thread can apply it, so the queue fills up. With queues
//! bounded in bytes ([`kvidx::Config::queue_bytes`]), queued events hold at most the budget.
//!
//! `cargo run --release -p kvidx --example queue_memory [EVENTS] [BLOCKS_PER_EVENT]`
//! (defaults 3000 and 20000). Prints the process's peak resident memory (Linux).
//! `... --example queue_memory threads N`: the memory of an idle indexer with N event threads.

use std::time::Instant;

use kvidx::{Block, Config, Event, Indexer, Worker};

/// The process's peak resident set size in MiB (`VmHWM`), if the platform reports it.
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

fn main() {
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().map(String::as_str) == Some("threads") {
        let threads = args.nth(1).and_then(|s| s.parse().ok()).unwrap_or(1024);
        let index = Indexer::new(Config {
            event_threads: threads,
            ..Config::default()
        })
        .expect("valid config");
        index.flush().expect("event threads alive");
        println!(
            "{threads} event threads: peak RSS {:.1} MiB",
            peak_rss_mib().unwrap_or(f64::NAN)
        );
        return;
    }
    let events: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(3000);
    let blocks: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(20_000);
    let index = Indexer::new(Config {
        event_threads: 1,
        ..Config::default()
    })
    .expect("valid config");
    let worker = Worker::new(1, 0);
    let started = Instant::now();
    for event_id in 0..events {
        let chain = (0..blocks).map(|p| Block::new(p, 1_000_000 + p)).collect();
        index
            .apply_event(Event::stored(worker, event_id, None, chain))
            .expect("event threads alive");
    }
    index.flush().expect("event threads alive");
    let stats = index.stats();
    println!(
        "{events} events of {blocks} blocks in {:.2} s: {} applied, {} blocks held, peak RSS {:.1} MiB",
        started.elapsed().as_secs_f64(),
        stats.events_applied,
        stats.worker_blocks,
        peak_rss_mib().unwrap_or(f64::NAN)
    );
}
