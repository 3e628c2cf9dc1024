//! `kvidx-bench`: trace replay for kvidx. See `docs/bench.md`.

mod agree;
mod baseline;
mod block_pool;
mod burst;
mod chain;
mod cli;
mod cross_core;
mod delay;
mod engine_hash;
mod host_pool;
mod jobs;
mod meta;
mod null_index;
#[cfg(feature = "peer")]
mod peer;
#[cfg(feature = "peer")]
mod peer_smg;
mod plot;
mod progress;
mod replay;
mod report;
mod rng;
mod rounds;
mod router;
mod rss;
mod sim;
mod snapshot;
mod study;
mod sustain;
mod target;
mod trace;
mod ttl;
mod workload;

use clap::Parser;

fn main() {
    let cli = cli::Cli::parse();
    let result = match &cli.command {
        None => jobs::main_job(&cli.main),
        Some(cli::Command::Generate(a)) => jobs::generate(a),
        Some(cli::Command::Replay(a)) => jobs::replay_file(a),
        Some(cli::Command::Measure(a)) => jobs::measure(a),
        Some(cli::Command::Snapshot(a)) => snapshot::run(a),
        Some(cli::Command::Delays(a)) => jobs::delays(a),
        Some(cli::Command::Sustain(a)) => sustain::run(a),
        Some(cli::Command::Probe(a)) => sustain::probe(a),
    };
    if let Err(e) = result {
        eprintln!("kvidx-bench: {e}");
        std::process::exit(1);
    }
}
