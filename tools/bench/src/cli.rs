//! Command-line arguments.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::burst::{DEFAULT_BURST, DEFAULT_WINDOW_MS};
use crate::sim::{EngineHash, Policy, RouterIndex};
use crate::study::DEFAULT_DELAYS_MS;
use crate::target::Subject;
use crate::ttl::{Ttl, DEFAULT_EVENT_FREE_TTL};

/// Trace replay for kvidx: a mock prefix-caching engine fleet, workload files, and an honest
/// side-by-side benchmark of the index backends and a naive baseline.
///
/// With no subcommand: runs a trace (by default the shipped conversation trace, the published
/// measurement's settings; `--quick` for the 400-request sample) through the mock engine under
/// every routing policy, prints routing quality, then replays the workload of one policy
/// against every index and prints the side-by-side table. Results, plots and run metadata go
/// to `target/kvidx-bench/<command>/`.
#[derive(Debug, Parser)]
#[command(name = "kvidx-bench", version, args_conflicts_with_subcommands = true)]
pub struct Cli {
    /// What to do; none runs the main job.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Main-job options.
    #[command(flatten)]
    pub main: MainArgs,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a trace through the mock engine and write the workload file (docs/contract.md section 4).
    Generate(GenerateArgs),
    /// Replay a workload file against the indexes side by side.
    Replay(ReplayArgs),
    /// Measure one index in this process and print its figures as JSON (used by replay).
    #[command(hide = true)]
    Measure(MeasureArgs),
    /// Time writing and restoring a snapshot of a workload's final state.
    Snapshot(SnapshotArgs),
    /// Routing before the events arrive: kv-cost under each view of the caches, at each
    /// event delay, on the trace and its bursty variant (the main job's study, alone).
    Delays(DelaysArgs),
    /// Find each index's sustained rate: the highest offered block-op rate it keeps up with
    /// in open loop (a fresh process per probe).
    Sustain(SustainArgs),
    /// Replay a workload once against one index in this process, at an offered rate or
    /// closed loop, and print the run's figures as JSON (used by sustain).
    #[command(hide = true)]
    Probe(ProbeArgs),
}

/// The fleet of the full measurement (the published figures): the conversation trace on 256
/// workers of 4,096 blocks.
pub const FULL_WORKERS: usize = 256;
/// Blocks per worker of the full measurement.
pub const FULL_BLOCKS_PER_WORKER: usize = 4096;
/// The fleet of `--quick`, sized for the 400-request sample so that pools evict and the
/// policies differ.
pub const QUICK_WORKERS: usize = 16;
/// Blocks per worker of `--quick`.
pub const QUICK_BLOCKS_PER_WORKER: usize = 2048;

/// The mock engine fleet and the trace.
#[derive(Debug, Clone, Args)]
pub struct EngineArgs {
    /// Quick run: the 400-request sample (data/sample_trace.jsonl) on 16 workers x 2,048
    /// blocks. Its figures are indicative only (runs of milliseconds, a few hundred queries).
    #[arg(long)]
    pub quick: bool,
    /// Mooncake-format trace (JSON lines); default: the shipped data/conversation_trace.jsonl
    /// (data/sample_trace.jsonl with --quick).
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Use only the first N requests of the trace (0: all).
    #[arg(long, default_value_t = 0)]
    pub limit: usize,
    /// Workers in the fleet [default: 256; 16 with --quick].
    #[arg(long)]
    pub workers: Option<usize>,
    /// KV blocks in each worker's pool [default: 4096; 2048 with --quick].
    #[arg(long)]
    pub blocks_per_worker: Option<usize>,
    /// Blocks per trace hash id (each 512-token id becomes this many blocks).
    #[arg(long, default_value_t = 4)]
    pub length_factor: u32,
    /// Copies of the trace, interleaved, sharing no blocks.
    #[arg(long, default_value_t = 1)]
    pub duplication: u32,
    /// Seed of random routing and tie-breaks.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Simulated decode time per output token (ms): how long a request holds its blocks.
    #[arg(long, default_value_t = 20.0)]
    pub decode_ms_per_token: f64,
    /// Where kv-aware routing reads overlaps.
    #[arg(long, value_enum, default_value_t = RouterIndex::Positional)]
    pub router_index: RouterIndex,
    /// How the engines name blocks in their events. `shared`: the hashing contract's sequence
    /// hashes, the same for a prefix on every worker. `per-worker`: each worker salts its
    /// sequence hashes (as an engine with its own hash seed does), so the same prefix has
    /// different names on different workers; local hashes, queries and routing are unchanged.
    #[arg(long, value_enum, default_value_t = EngineHash::Shared)]
    pub engine_hash: EngineHash,
    /// Blocks in each worker's host-memory pool (0: no host tier). With a host tier a block
    /// the GPU evicts moves to host memory (a Stored on tier host, then a Removed on tier
    /// device), host evictions remove it (a Removed on tier host), and a prefix continuing in
    /// host memory is a host hit, reloaded to the GPU. The main job then also simulates the
    /// tier-aware kv-cost-tiered policy, reports GPU and host hit rates, and replays the
    /// single-tier workload (the same run without a host tier) beside the host-tier one.
    #[arg(long, default_value_t = 0)]
    pub host_blocks_per_worker: usize,
    /// What a prefix block in host memory is worth to kv-cost-tiered, relative to one on the
    /// GPU (0 to 1): a block to reload costs 1 - weight of a block to compute.
    #[arg(long, default_value_t = 0.8)]
    pub host_weight: f64,
    /// How long after an engine caches blocks its events reach the router's index (ms): until
    /// then the router does not see them.
    #[arg(long, default_value_t = 50)]
    pub event_delay_ms: u64,
    /// With events and predictions: how long the router credits a routed request's prompt
    /// to its worker before the events confirm it (ms).
    #[arg(long, default_value_t = 1000)]
    pub predict_ttl_ms: u64,
    /// Event-free routing (predictions only): how long a routed request's prompt is credited
    /// to its worker (ms), or `none` for no limit. The per-worker capacity
    /// (--blocks-per-worker predicted blocks, least recently routed dropped first) is what
    /// approximates each engine's cache; this only bounds how long a cache lost without the
    /// router knowing stays credited.
    #[arg(long, default_value_t = DEFAULT_EVENT_FREE_TTL)]
    pub event_free_ttl_ms: Ttl,
}

impl EngineArgs {
    /// Workers in the fleet, after the preset.
    pub fn workers(&self) -> usize {
        self.workers.unwrap_or(if self.quick {
            QUICK_WORKERS
        } else {
            FULL_WORKERS
        })
    }

    /// Blocks per worker, after the preset.
    pub fn blocks_per_worker(&self) -> usize {
        self.blocks_per_worker.unwrap_or(if self.quick {
            QUICK_BLOCKS_PER_WORKER
        } else {
            FULL_BLOCKS_PER_WORKER
        })
    }
}

/// The study of routing before the events arrive.
#[derive(Debug, Clone, Args)]
pub struct StudyArgs {
    /// Event delays studied (ms).
    #[arg(long, value_delimiter = ',', default_values_t = DEFAULT_DELAYS_MS)]
    pub delays: Vec<u64>,
    /// Requests per burst of the bursty variant.
    #[arg(long, default_value_t = DEFAULT_BURST)]
    pub burst: u32,
    /// Time a burst spreads over (ms).
    #[arg(long, default_value_t = DEFAULT_WINDOW_MS)]
    pub burst_window_ms: u64,
}

/// `delays`.
#[derive(Debug, Clone, Args)]
pub struct DelaysArgs {
    /// The fleet.
    #[command(flatten)]
    pub engine: EngineArgs,
    /// The study.
    #[command(flatten)]
    pub study: StudyArgs,
}

/// How to replay.
#[derive(Debug, Clone, Args)]
pub struct ReplayOpts {
    /// Indexes to measure, side by side.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Subject::Positional, Subject::Radix, Subject::Baseline])]
    pub subjects: Vec<Subject>,
    /// Event threads of each index.
    #[arg(long, default_value_t = 1)]
    pub event_threads: usize,
    /// Threads issuing find_matches queries (0: the feeder answers each query itself, in
    /// workload order, between its events).
    #[arg(long, default_value_t = 1)]
    pub query_threads: usize,
    /// Open-loop offered rates, as fractions of each index's closed-loop rate.
    #[arg(long, value_delimiter = ',', default_values_t = [0.25, 0.5, 0.75, 1.0, 1.25])]
    pub fractions: Vec<f64>,
    /// Extra open-loop offered rates in ops/s, the same for every index.
    #[arg(long, value_delimiter = ',')]
    pub rates: Vec<f64>,
    /// Closed-loop runs per index; the median by throughput is reported.
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,
    /// Rounds of the comparison: every index is measured once per round, the indexes in
    /// turn (open loop in the first round only). With 2 or more, each index's rate is also
    /// divided by each reference index's (nested-map, null, peer-*) in the same round, and
    /// the tables show each index's median round.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rounds: u32,
    /// Measure every index in this process (memory then is an RSS delta in a shared heap)
    /// instead of one child process per index.
    #[arg(long)]
    pub in_process: bool,
    /// Directory for the workload, plots (replay.svg, routing.svg) and figures
    /// (results.json); default: target/kvidx-bench/main for the main job,
    /// target/kvidx-bench/replay for `replay`.
    #[arg(long)]
    pub out_dir: Option<PathBuf>,
}

/// The main job.
#[derive(Debug, Clone, Args)]
pub struct MainArgs {
    /// The fleet.
    #[command(flatten)]
    pub engine: EngineArgs,
    /// The replay.
    #[command(flatten)]
    pub replay: ReplayOpts,
    /// The study of routing before the events arrive.
    #[command(flatten)]
    pub study: StudyArgs,
    /// The policy whose workload is replayed.
    #[arg(long, value_enum, default_value_t = Policy::KvCost)]
    pub policy: Policy,
}

/// `generate`.
#[derive(Debug, Clone, Args)]
pub struct GenerateArgs {
    /// The fleet.
    #[command(flatten)]
    pub engine: EngineArgs,
    /// The routing policy.
    #[arg(long, value_enum, default_value_t = Policy::KvCost)]
    pub policy: Policy,
    /// The workload file to write.
    #[arg(long)]
    pub out: PathBuf,
}

/// `replay`.
#[derive(Debug, Clone, Args)]
pub struct ReplayArgs {
    /// The workload file to replay.
    #[arg(long)]
    pub workload: PathBuf,
    /// The replay.
    #[command(flatten)]
    pub replay: ReplayOpts,
}

/// `snapshot`.
#[derive(Debug, Clone, Args)]
pub struct SnapshotArgs {
    /// The workload file whose events build the state.
    #[arg(long)]
    pub workload: PathBuf,
    /// The backends (positional, radix).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Subject::Positional, Subject::Radix])]
    pub backends: Vec<Subject>,
    /// Timed runs of each write and restore (the median is reported).
    #[arg(long, default_value_t = 5)]
    pub repeat: usize,
    /// Queries of the workload checked on the restored index (spread over the workload).
    #[arg(long, default_value_t = 2000)]
    pub check_queries: usize,
}

/// `sustain`.
#[derive(Debug, Clone, Args)]
pub struct SustainArgs {
    /// The workload file to replay.
    #[arg(long)]
    pub workload: PathBuf,
    /// Indexes to measure, one after the other.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Subject::Positional, Subject::Radix])]
    pub subjects: Vec<Subject>,
    /// Event threads of each index.
    #[arg(long, default_value_t = 1)]
    pub event_threads: usize,
    /// Threads issuing find_matches queries (0: the feeder answers each query itself).
    #[arg(long, default_value_t = 1)]
    pub query_threads: usize,
    /// The search stops once the lowest failing offered rate is within this fraction above
    /// the highest sustained one.
    #[arg(long, default_value_t = 0.10)]
    pub tolerance: f64,
    /// Probes per index at most (the closed-loop run included); the bracket reached by then
    /// is reported.
    #[arg(long, default_value_t = 12, value_parser = clap::value_parser!(u32).range(2..=100))]
    pub max_probes: u32,
    /// Directory for the figures (results.json); default: target/kvidx-bench/sustain.
    #[arg(long)]
    pub out_dir: Option<PathBuf>,
}

/// One index on one workload, measured in this process (the internal `measure` and
/// `probe`).
#[derive(Debug, Clone, Args)]
pub struct OneIndexArgs {
    /// The workload file.
    #[arg(long)]
    pub workload: PathBuf,
    /// The index.
    #[arg(long, value_enum)]
    pub subject: Subject,
    /// Event threads.
    #[arg(long, default_value_t = 1)]
    pub event_threads: usize,
    /// Query threads (0: the feeder answers each query itself).
    #[arg(long, default_value_t = 1)]
    pub query_threads: usize,
}

impl OneIndexArgs {
    /// The thread counts.
    pub fn threads(&self) -> crate::replay::Threads {
        crate::replay::Threads {
            events: self.event_threads,
            queries: self.query_threads,
        }
    }
}

/// `probe` (internal).
#[derive(Debug, Clone, Args)]
pub struct ProbeArgs {
    /// The index and workload.
    #[command(flatten)]
    pub index: OneIndexArgs,
    /// Offered rate in ops/s; closed loop without it.
    #[arg(long)]
    pub rate: Option<f64>,
}

/// `measure` (internal).
#[derive(Debug, Clone, Args)]
pub struct MeasureArgs {
    /// The index and workload.
    #[command(flatten)]
    pub index: OneIndexArgs,
    /// Open-loop fractions of the closed-loop rate.
    #[arg(long, value_delimiter = ',')]
    pub fractions: Vec<f64>,
    /// Open-loop absolute rates.
    #[arg(long, value_delimiter = ',')]
    pub rates: Vec<f64>,
    /// Closed-loop runs.
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn command_line_is_consistent_and_parses_the_full_run() {
        Cli::command().debug_assert();
        let cli = Cli::try_parse_from([
            "kvidx-bench",
            "--trace",
            "t.jsonl",
            "--workers",
            "256",
            "--blocks-per-worker",
            "4096",
            "--length-factor",
            "4",
            "--subjects",
            "positional,baseline",
            "--host-blocks-per-worker",
            "4096",
            "--host-weight",
            "0.5",
            "--policy",
            "kv-cost-tiered",
        ])
        .unwrap();
        assert!(cli.command.is_none());
        assert_eq!(cli.main.engine.workers(), 256);
        assert_eq!(
            cli.main.replay.subjects,
            vec![Subject::Positional, Subject::Baseline]
        );
        assert_eq!(cli.main.policy, Policy::KvCostTiered);
        assert_eq!(
            (
                cli.main.engine.host_blocks_per_worker,
                cli.main.engine.host_weight
            ),
            (4096, 0.5)
        );
        let full = Cli::try_parse_from(["kvidx-bench"]).unwrap().main;
        assert_eq!(full.policy, Policy::KvCost);
        assert_eq!(
            (full.engine.host_blocks_per_worker, full.engine.host_weight),
            (0, 0.8),
            "no host tier by default"
        );
        assert!(!full.engine.quick && full.engine.trace.is_none());
        assert_eq!(
            (full.engine.workers(), full.engine.blocks_per_worker()),
            (FULL_WORKERS, FULL_BLOCKS_PER_WORKER)
        );
        assert_eq!(full.replay.repeat, 3);
        let quick = Cli::try_parse_from(["kvidx-bench", "--quick", "--workers", "4"])
            .unwrap()
            .main;
        assert_eq!(
            (quick.engine.workers(), quick.engine.blocks_per_worker()),
            (4, QUICK_BLOCKS_PER_WORKER)
        );
        let cli = Cli::try_parse_from(["kvidx-bench", "replay", "--workload", "w"]).unwrap();
        assert!(matches!(cli.command, Some(Command::Replay(_))));
        assert!(Cli::try_parse_from(["kvidx-bench", "--workers", "x"]).is_err());
        assert!(Cli::try_parse_from(["kvidx-bench", "--host-blocks-per-worker", "-1"]).is_err());
        let generate = Cli::try_parse_from([
            "kvidx-bench",
            "generate",
            "--out",
            "w",
            "--host-blocks-per-worker",
            "64",
        ])
        .unwrap();
        let Some(Command::Generate(g)) = generate.command else {
            panic!("generate parses")
        };
        assert_eq!(
            (g.engine.host_blocks_per_worker, g.engine.host_weight),
            (64, 0.8)
        );
    }
}
