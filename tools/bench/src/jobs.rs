//! The tool's jobs: the main job, `generate`, `replay` and the internal `measure`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde::Serialize;

use crate::cli::{
    DelaysArgs, EngineArgs, GenerateArgs, MainArgs, MeasureArgs, ReplayArgs, ReplayOpts, StudyArgs,
};
use crate::meta::RunMeta;
use crate::replay::{self, Plan, SubjectReport, Threads};
use crate::report::FirstBlock;
use crate::rounds::{
    beyond_harness, latency_figures, median_reports, paired_ratios, BeyondHarness, PairedRatio,
    RoundLatency,
};
use crate::sim::{simulate, EngineHash, Policy, Routing, SimConfig, SimOutput, View};
use crate::study::{self, StudyRow, Targets};
use crate::trace::{read_trace, Request};
use crate::workload::{read_workload, write_workload, Counts, TimedOp};
use crate::{plot, report};

/// The repository this tool was built from.
pub(crate) fn repo_dir() -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    path.canonicalize().unwrap_or(path)
}

/// A file of the shipped data/ folder.
fn data_path(name: &str) -> PathBuf {
    repo_dir().join("data").join(name)
}

/// The shipped sample trace (the first 400 requests of the conversation trace).
pub fn sample_trace_path() -> PathBuf {
    data_path("sample_trace.jsonl")
}

/// The shipped full conversation trace.
pub fn full_trace_path() -> PathBuf {
    data_path("conversation_trace.jsonl")
}

/// The output directory: `--out-dir`, else `target/kvidx-bench/<command>` of the repository
/// (each command its own, so that `replay` never overwrites the main job's figures).
pub(crate) fn out_dir(opts: &ReplayOpts, command: &str) -> Result<PathBuf, String> {
    out_dir_of(opts.out_dir.as_deref(), command)
}

/// The output directory: `chosen`, else `target/kvidx-bench/<command>` of the repository.
pub(crate) fn out_dir_of(chosen: Option<&Path>, command: &str) -> Result<PathBuf, String> {
    let dir = match chosen {
        Some(d) => d.to_path_buf(),
        None => {
            let repo = repo_dir();
            if repo.join("Cargo.toml").is_file() {
                repo.join("target/kvidx-bench").join(command)
            } else {
                std::env::temp_dir().join("kvidx-bench").join(command)
            }
        }
    };
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(dir.canonicalize().unwrap_or(dir))
}

/// A progress line on stderr (the tables go to stdout).
pub(crate) fn phase(what: &str) {
    eprintln!("kvidx-bench: {what}");
}

fn load_trace(engine: &EngineArgs) -> Result<(PathBuf, Vec<Request>), String> {
    let path = engine.trace.clone().unwrap_or_else(|| {
        if engine.quick {
            sample_trace_path()
        } else {
            full_trace_path()
        }
    });
    let mut trace = read_trace(&path)?;
    if engine.limit > 0 {
        trace.truncate(engine.limit);
    }
    Ok((path, trace))
}

fn sim_config(engine: &EngineArgs, policy: Policy) -> Result<SimConfig, String> {
    if engine.workers() == 0 || engine.blocks_per_worker() == 0 || engine.length_factor == 0 {
        return Err("--workers, --blocks-per-worker and --length-factor must be positive".into());
    }
    if !(engine.decode_ms_per_token >= 0.0 && engine.decode_ms_per_token.is_finite()) {
        return Err("--decode-ms-per-token must be a finite number >= 0".into());
    }
    if !(0.0..=1.0).contains(&engine.host_weight) {
        return Err("--host-weight must be between 0 and 1".into());
    }
    Ok(SimConfig {
        workers: engine.workers(),
        blocks_per_worker: engine.blocks_per_worker(),
        length_factor: engine.length_factor,
        duplication: engine.duplication.max(1),
        seed: engine.seed,
        policy,
        router_index: engine.router_index,
        decode_ms_per_token: engine.decode_ms_per_token,
        engine_hash: engine.engine_hash,
        host_blocks_per_worker: engine.host_blocks_per_worker,
        host_weight: engine.host_weight,
        view: View::EventsOnly,
        event_delay_ms: engine.event_delay_ms,
        predict_ttl_ms: engine.predict_ttl_ms,
        event_free_ttl: engine.event_free_ttl_ms,
    })
}

fn describe_fleet(path: &Path, trace: &[Request], e: &EngineArgs) -> String {
    format!(
        "trace {} ({} requests); {} workers x {} blocks, length factor {}, duplication {}, \
         decode {} ms/token{}{}",
        path.display(),
        trace.len(),
        e.workers(),
        e.blocks_per_worker(),
        e.length_factor,
        e.duplication.max(1),
        e.decode_ms_per_token,
        match e.engine_hash {
            EngineHash::Shared => "",
            EngineHash::PerWorker => ", engine hashes salted per worker",
        },
        match e.host_blocks_per_worker {
            0 => String::new(),
            n => format!(
                "; host tier of {n} blocks per worker (kv-cost-tiered host weight {})",
                e.host_weight
            ),
        }
    )
}

/// One policy's routing quality, as stored in `results.json`.
#[derive(Serialize)]
struct RoutingRow {
    policy: &'static str,
    hit_rate: f64,
    hit_blocks: u64,
    prompt_blocks: u64,
    requests: u64,
    stored_events: u64,
    removed_events: u64,
    max_worker_requests: u64,
    /// The host-tier figures (only with a host tier).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    tiers: Option<TierRow>,
}

/// The host-tier part of a policy's routing quality in `results.json`.
#[derive(Serialize)]
struct TierRow {
    /// Hit blocks found on the GPU / prompt blocks.
    device_hit_rate: f64,
    /// Hit blocks reloaded from host memory / prompt blocks.
    host_hit_rate: f64,
    device_hit_blocks: u64,
    host_hit_blocks: u64,
    /// Blocks offloaded to host memory (host Stored events).
    offloaded: u64,
}

impl RoutingRow {
    /// The row of `policy`; with the host-tier figures when `tiers`.
    fn of(policy: Policy, r: &Routing, tiers: bool) -> Self {
        Self {
            policy: policy.name(),
            hit_rate: r.hit_rate(),
            hit_blocks: r.hit_blocks,
            prompt_blocks: r.prompt_blocks,
            requests: r.requests,
            stored_events: r.stored_events,
            removed_events: r.removed_events,
            max_worker_requests: r.max_worker_requests,
            tiers: tiers.then(|| TierRow {
                device_hit_rate: r.device_hit_rate(),
                host_hit_rate: r.host_hit_rate(),
                device_hit_blocks: r.device_hit_blocks(),
                host_hit_blocks: r.host_hit_blocks,
                offloaded: r.offloaded,
            }),
        }
    }
}

/// The fleet of a main-job run, as stored in `results.json`.
#[derive(Serialize)]
struct Fleet {
    trace: String,
    requests: usize,
    workers: usize,
    blocks_per_worker: usize,
    length_factor: u32,
    duplication: u32,
    decode_ms_per_token: f64,
    seed: u64,
    engine_hash: &'static str,
    replayed_policy: &'static str,
    /// Blocks of each worker's host tier (absent: no host tier).
    #[serde(skip_serializing_if = "Option::is_none")]
    host_blocks_per_worker: Option<usize>,
    /// kv-cost-tiered's host weight (absent: no host tier).
    #[serde(skip_serializing_if = "Option::is_none")]
    host_weight: Option<f64>,
}

/// One row of the study of routing before the events arrive, as stored in `results.json`.
#[derive(Serialize)]
struct DelayRow {
    trace: study::Variant,
    event_delay_ms: u64,
    view: &'static str,
    hit_rate: f64,
    prefill_tokens: u64,
    hit_blocks: u64,
    prompt_blocks: u64,
    requests: u64,
    max_worker_requests: u64,
}

impl DelayRow {
    fn of(s: &StudyRow) -> Self {
        let r = &s.routing;
        Self {
            trace: s.variant,
            event_delay_ms: s.delay_ms,
            view: s.view.name(),
            hit_rate: r.hit_rate(),
            prefill_tokens: r.prefill_tokens,
            hit_blocks: r.hit_blocks,
            prompt_blocks: r.prompt_blocks,
            requests: r.requests,
            max_worker_requests: r.max_worker_requests,
        }
    }
}

/// The study of routing before the events arrive, as stored in `results.json`.
#[derive(Serialize)]
struct DelayStudy {
    burst: u32,
    burst_window_ms: u64,
    /// How long events+predictions credits a routed prompt (ms).
    predict_ttl_ms: u64,
    /// How long predictions-only credits a routed prompt (ms; null: no limit).
    event_free_ttl_ms: Option<u64>,
    rows: Vec<DelayRow>,
    targets: Vec<Targets>,
}

/// Runs and prints the study of routing before the events arrive: kv-cost under every view
/// at every delay of `study`, on `trace` and its bursty variant.
fn delay_study(
    trace: &[Request],
    engine: &EngineArgs,
    study: &StudyArgs,
) -> Result<DelayStudy, String> {
    if study.delays.is_empty() || study.burst == 0 {
        return Err("--delays must name a delay and --burst must be positive".into());
    }
    let base = sim_config(engine, Policy::KvCost)?;
    let bursts = study::Bursts {
        size: study.burst,
        window_ms: study.burst_window_ms,
    };
    let started = Instant::now();
    let rows = study::run(trace, &base, &study.delays, &View::ALL, bursts, |r| {
        phase(&format!(
            "simulated {} at {} ms, {} ({:.1} s so far)",
            r.variant.name(),
            r.delay_ms,
            r.view.name(),
            started.elapsed().as_secs_f64()
        ))
    });
    println!(
        "\nrouting before the events arrive (kv-cost routing; each engine's events reach the \
         router's index the event delay after it caches the blocks; bursty = each request \
         repeated {} times over {} ms, all but its last 512-token block shared; predictions \
         last {} ms with events, {} without (predictions-only); prefill tokens = prompt \
         blocks not hit x {} tokens):",
        study.burst,
        study.burst_window_ms,
        base.predict_ttl_ms,
        match base.event_free_ttl.millis() {
            Some(ms) => format!("{ms} ms"),
            None => "without limit".into(),
        },
        crate::trace::TRACE_BLOCK_TOKENS / u64::from(engine.length_factor)
    );
    print!("{}", report::delay_table(&rows));
    let delay = if study.delays.contains(&study::TARGET_DELAY_MS) {
        study::TARGET_DELAY_MS
    } else {
        study.delays[0]
    };
    let targets = study::targets(&rows, delay);
    for line in report::target_lines(&targets) {
        println!("{line}");
    }
    Ok(DelayStudy {
        burst: study.burst,
        burst_window_ms: study.burst_window_ms,
        predict_ttl_ms: base.predict_ttl_ms,
        event_free_ttl_ms: base.event_free_ttl.millis(),
        rows: rows.iter().map(DelayRow::of).collect(),
        targets,
    })
}

/// `kvidx-bench delays`.
pub fn delays(args: &DelaysArgs) -> Result<(), String> {
    let (path, trace) = load_trace(&args.engine)?;
    println!("{}", describe_fleet(&path, &trace, &args.engine));
    delay_study(&trace, &args.engine, &args.study)?;
    Ok(())
}

/// The routing part of a main-job run.
struct RoutingResults {
    fleet: Fleet,
    rows: Vec<RoutingRow>,
    notes: Vec<String>,
    delay_study: DelayStudy,
    /// With a host tier: the replayed policy's run without it (the single-tier workload).
    single_tier: Option<RoutingRow>,
}

/// Simulates `trace` under `policy` and says how long it took.
fn simulate_policy(
    trace: &[Request],
    engine: &EngineArgs,
    policy: Policy,
) -> Result<SimOutput, String> {
    let started = Instant::now();
    let out = simulate(trace, &sim_config(engine, policy)?);
    phase(&format!(
        "simulated {} routing of {} requests in {:.1} s",
        policy.name(),
        trace.len(),
        started.elapsed().as_secs_f64()
    ));
    Ok(out)
}

/// The runs of every simulated policy (with the replayed one's output kept whole).
struct PolicyRuns {
    routing: Vec<(Policy, Routing)>,
    chosen: SimOutput,
    /// The tier-blind and tier-aware kv-cost choices, when both ran.
    tier_comparison: Option<report::TierComparison>,
}

/// Simulates every policy of the main job: the tier-blind ones, kv-cost-tiered with a host
/// tier, and the replayed one.
fn simulate_policies(trace: &[Request], args: &MainArgs) -> Result<PolicyRuns, String> {
    let mut policies = Policy::simulated(args.engine.host_blocks_per_worker > 0);
    if !policies.contains(&args.policy) {
        policies.push(args.policy);
    }
    let mut routing = Vec::new();
    let mut chosen = None;
    let mut kv_cost: [Option<(Routing, Vec<u32>)>; 2] = [None, None];
    for policy in policies {
        let out = simulate_policy(trace, &args.engine, policy)?;
        routing.push((policy, out.routing));
        match policy {
            Policy::KvCost => kv_cost[0] = Some((out.routing, out.choices.clone())),
            Policy::KvCostTiered => kv_cost[1] = Some((out.routing, out.choices.clone())),
            _ => {}
        }
        if policy == args.policy {
            chosen = Some(out);
        }
    }
    let tier_comparison = match (&kv_cost[0], &kv_cost[1]) {
        (Some(blind), Some(aware)) if args.engine.host_blocks_per_worker > 0 => {
            Some(report::TierComparison::of(
                (blind.0, &blind.1),
                (aware.0, &aware.1),
                args.engine.host_weight,
            ))
        }
        _ => None,
    };
    Ok(PolicyRuns {
        routing,
        chosen: chosen.expect("the replayed policy is simulated"),
        tier_comparison,
    })
}

/// With a host tier: the replayed policy simulated without it, its workload written beside
/// the host-tier one, for the replay's comparison.
fn single_tier_run(
    trace: &[Request],
    args: &MainArgs,
    dir: &Path,
) -> Result<(SimOutput, PathBuf), String> {
    let engine = EngineArgs {
        host_blocks_per_worker: 0,
        ..args.engine.clone()
    };
    let out = simulate_policy(trace, &engine, args.policy)?;
    let path = dir.join(format!("workload-{}-single-tier.jsonl", args.policy.name()));
    write_workload(&path, &out.ops)?;
    Ok((out, path))
}

/// `kvidx-bench` with no subcommand.
pub fn main_job(args: &MainArgs) -> Result<(), String> {
    let meta = RunMeta::collect(&repo_dir());
    let dir = out_dir(&args.replay, "main")?;
    let (path, trace) = load_trace(&args.engine)?;
    println!("{}", describe_fleet(&path, &trace, &args.engine));
    println!("run: {}", meta.line());
    if args.engine.quick {
        println!("quick run (--quick): the 400-request sample; replay figures are indicative only");
    }
    let host_tier = args.engine.host_blocks_per_worker > 0;
    let runs = simulate_policies(&trace, args)?;
    let routing = runs.routing;
    if host_tier {
        println!(
            "\nrouting quality (prefix-cache hit rate = hit blocks / prompt blocks = GPU hit rate \
             + host hit rate: hit blocks found on the GPU, and reloaded from host memory; \
             offloaded = blocks the GPU evicted to host memory):"
        );
    } else {
        println!("\nrouting quality (prefix-cache hit rate = hit blocks / prompt blocks):");
    }
    print!("{}", report::routing_table(&routing, host_tier));
    let first = FirstBlock::of(trace.iter().filter_map(|r| r.hash_ids.first().copied()));
    let mut notes = report::routing_notes(&routing, first);
    notes.extend(runs.tier_comparison.as_ref().map(report::tier_note));
    for note in &notes {
        println!("{note}");
    }
    let delay_study = delay_study(&trace, &args.engine, &args.study)?;
    let svg = dir.join("routing.svg");
    let mut picture_notes = notes.clone();
    picture_notes.push(format!(
        "{}; {}",
        describe_fleet(&path, &trace, &args.engine),
        meta.line()
    ));
    let title = format!("kvidx-bench routing quality: {}", file_name(&path));
    std::fs::write(&svg, plot::render_routing(&routing, &title, &picture_notes))
        .map_err(|e| format!("cannot write {}: {e}", svg.display()))?;
    println!("routing plot: {}", svg.display());
    let chosen = runs.chosen;
    let workload = dir.join(format!("workload-{}.jsonl", args.policy.name()));
    write_workload(&workload, &chosen.ops)?;
    println!(
        "\nworkload of {} routing written to {}",
        args.policy.name(),
        workload.display()
    );
    let single = if host_tier {
        let (out, single_path) = single_tier_run(&trace, args, &dir)?;
        println!(
            "single-tier workload (the same run without a host tier: {} hit rate {:.1}%) \
             written to {}",
            args.policy.name(),
            100.0 * out.routing.hit_rate(),
            single_path.display()
        );
        Some((out, single_path))
    } else {
        None
    };
    let e = &args.engine;
    let routing = RoutingResults {
        fleet: Fleet {
            trace: path.display().to_string(),
            requests: trace.len(),
            workers: e.workers(),
            blocks_per_worker: e.blocks_per_worker(),
            length_factor: e.length_factor,
            duplication: e.duplication.max(1),
            decode_ms_per_token: e.decode_ms_per_token,
            seed: e.seed,
            engine_hash: e.engine_hash.name(),
            replayed_policy: args.policy.name(),
            host_blocks_per_worker: host_tier.then_some(e.host_blocks_per_worker),
            host_weight: host_tier.then_some(e.host_weight),
        },
        rows: routing
            .iter()
            .map(|(p, r)| RoutingRow::of(*p, r, host_tier))
            .collect(),
        notes,
        delay_study,
        single_tier: single
            .as_ref()
            .map(|(out, _)| RoutingRow::of(args.policy, &out.routing, true)),
    };
    let main = Replayed {
        path: &workload,
        ops: &chosen.ops,
        // Named only beside the single-tier workload it is compared with.
        label: if single.is_some() { "host tier" } else { "" },
    };
    let compared = single.as_ref().map(|(out, p)| Replayed {
        path: p,
        ops: &out.ops,
        label: "single-tier",
    });
    replay_and_report(
        &main,
        compared.as_ref(),
        &args.replay,
        &dir,
        &meta,
        Some(routing),
    )
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// `kvidx-bench generate`.
pub fn generate(args: &GenerateArgs) -> Result<(), String> {
    let (path, trace) = load_trace(&args.engine)?;
    eprintln!("{}", describe_fleet(&path, &trace, &args.engine));
    let out = simulate(&trace, &sim_config(&args.engine, args.policy)?);
    write_workload(&args.out, &out.ops)?;
    let tiers = args.engine.host_blocks_per_worker > 0;
    print!(
        "{}",
        report::routing_table(&[(args.policy, out.routing)], tiers)
    );
    println!(
        "{}\n{} (worker, block) pairs cached at the end\nwritten to {}",
        report::workload_line(&Counts::of(&out.ops)),
        out.final_blocks,
        args.out.display()
    );
    Ok(())
}

/// `kvidx-bench replay`.
pub fn replay_file(args: &ReplayArgs) -> Result<(), String> {
    let meta = RunMeta::collect(&repo_dir());
    let ops = read_workload(&args.workload)?;
    let dir = out_dir(&args.replay, "replay")?;
    println!("run: {}", meta.line());
    let main = Replayed {
        path: &args.workload,
        ops: &ops,
        label: "",
    };
    replay_and_report(&main, None, &args.replay, &dir, &meta, None)
}

/// `kvidx-bench measure` (internal): one index, JSON on stdout.
pub fn measure(args: &MeasureArgs) -> Result<(), String> {
    let ops = read_workload(&args.index.workload)?;
    let threads = args.index.threads();
    let plan = Plan {
        fractions: args.fractions.clone(),
        rates: args.rates.clone(),
        repeat: args.repeat,
    };
    let r = replay::measure(&ops, args.index.subject, threads, &plan);
    println!("{}", serde_json::to_string(&r).map_err(|e| e.to_string())?);
    Ok(())
}

fn join(values: &[f64]) -> String {
    values
        .iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// A workload to replay: its file, its operations, and its name in the tables when a run
/// compares two.
struct Replayed<'a> {
    path: &'a Path,
    ops: &'a [TimedOp],
    label: &'static str,
}

/// Runs this binary with `args` in a child process (its progress on our stderr) and reads
/// the JSON it prints; `what` names the run in errors.
pub(crate) fn run_child<T: serde::de::DeserializeOwned>(
    args: &[std::ffi::OsString],
    what: &str,
) -> Result<T, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find own binary: {e}"))?;
    let out = Command::new(exe)
        .args(args)
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run a child for {what}: {e}"))?;
    if !out.status.success() {
        return Err(format!("{what} failed ({})", out.status));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("bad output of {what}: {e}"))
}

/// Measures one index in a child process of this binary, so that its memory figures are its
/// own (a fresh heap and its own peak RSS). Without `open`, closed loop only.
fn measure_in_child(
    workload: &Path,
    opts: &ReplayOpts,
    subject: crate::target::Subject,
    open: bool,
) -> Result<SubjectReport, String> {
    let mut args: Vec<std::ffi::OsString> = vec!["measure".into(), "--workload".into()];
    args.push(workload.into());
    for (flag, value) in [
        ("--subject", subject.name().to_string()),
        ("--event-threads", opts.event_threads.to_string()),
        ("--query-threads", opts.query_threads.to_string()),
        ("--repeat", opts.repeat.to_string()),
    ] {
        args.extend([flag.into(), value.into()]);
    }
    if open && !opts.fractions.is_empty() {
        args.extend(["--fractions".into(), join(&opts.fractions).into()]);
    }
    if open && !opts.rates.is_empty() {
        args.extend(["--rates".into(), join(&opts.rates).into()]);
    }
    run_child(&args, &format!("measuring {}", subject.name()))
}

/// Measures one index on one workload (in a child process unless `--in-process`); without
/// `open`, closed loop only.
fn measure_one(
    workload: &Replayed,
    opts: &ReplayOpts,
    subject: crate::target::Subject,
    open: bool,
) -> Result<SubjectReport, String> {
    let started = Instant::now();
    let r = if opts.in_process {
        let plan = Plan {
            fractions: if open { opts.fractions.clone() } else { vec![] },
            rates: if open { opts.rates.clone() } else { vec![] },
            repeat: opts.repeat,
        };
        let threads = Threads {
            events: opts.event_threads,
            queries: opts.query_threads,
        };
        replay::measure(workload.ops, subject, threads, &plan)
    } else {
        measure_in_child(workload.path, opts, subject, open)?
    };
    let on = if workload.label.is_empty() {
        String::new()
    } else {
        format!(" on the {} workload", workload.label)
    };
    phase(&format!(
        "measured {}{on} ({} closed-loop run(s){}, {} open-loop) in {:.1} s",
        subject.name(),
        opts.repeat.max(1),
        if r.tiered.is_some() {
            " with find_matches, as many with find_matches_tiered"
        } else {
            ""
        },
        r.open.len(),
        started.elapsed().as_secs_f64()
    ));
    Ok(r)
}

/// Everything `results.json` holds.
#[derive(Serialize)]
struct Results<'a> {
    run: &'a RunMeta,
    #[serde(skip_serializing_if = "Option::is_none")]
    fleet: Option<&'a Fleet>,
    routing: Vec<&'a RoutingRow>,
    routing_notes: &'a [String],
    /// The study of routing before the events arrive (main job).
    #[serde(skip_serializing_if = "Option::is_none")]
    delay_study: Option<&'a DelayStudy>,
    /// With a host tier: the replayed policy's routing without it.
    #[serde(skip_serializing_if = "Option::is_none")]
    single_tier_routing: Option<&'a RoutingRow>,
    workload: WorkloadInfo,
    /// With a host tier: the single-tier workload replayed beside `workload` (its indexes
    /// carry `"workload": "single-tier"`, the others `"host tier"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    compared_workload: Option<WorkloadInfo>,
    replay: ReplayInfo,
    /// The 1-minute load average when the last index was measured (the one at the start is
    /// `run.machine.load_average`).
    load_average_at_end: f64,
    /// Why the figures are only indicative; `None` when the runs were long enough and the
    /// load average at the start was at most half the cores.
    indicative: Option<String>,
    indexes: &'a [SubjectReport],
    /// With `--rounds` 2 or more: each index's closed-loop rate over each reference index's
    /// in the same round.
    #[serde(skip_serializing_if = "<[PairedRatio]>::is_empty")]
    paired_ratios: &'a [PairedRatio],
    /// With `--rounds` 2 or more and the `null` subject: each other index's closed-loop time
    /// per operation beyond null's in the same round (nanoseconds).
    #[serde(skip_serializing_if = "<[BeyondHarness]>::is_empty")]
    beyond_harness: &'a [BeyondHarness],
    /// With `--rounds` 2 or more: each index's closed-loop find p50 and p99 over the rounds
    /// (nanoseconds).
    #[serde(skip_serializing_if = "<[RoundLatency]>::is_empty")]
    find_latency: &'a [RoundLatency],
    /// With `--rounds` 2 or more: each index's closed-loop find p50 over each reference
    /// index's (other than `null`) in the same round.
    #[serde(skip_serializing_if = "<[PairedRatio]>::is_empty")]
    find_p50_ratios: &'a [PairedRatio],
    /// With `--rounds` 2 or more: the cross-core round trip before each round, in ns
    /// (`null` with one core).
    #[serde(skip_serializing_if = "<[Option<f64>]>::is_empty")]
    round_trips_ns: &'a [Option<f64>],
    /// The cross-core round trip after the last index was measured, in ns (the one at the
    /// start is `run.machine.cross_core_round_trip_ns`).
    cross_core_round_trip_ns_at_end: Option<f64>,
}

/// A workload's file and counts, as `results.json` gives them.
#[derive(Serialize)]
pub(crate) struct WorkloadInfo {
    path: String,
    ops: u64,
    stored: u64,
    removed: u64,
    cleared: u64,
    matches: u64,
    block_ops: u64,
    /// Events naming a storage tier (absent when none does).
    #[serde(skip_serializing_if = "is_zero")]
    tiered_events: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl WorkloadInfo {
    fn of(workload: &Replayed) -> Self {
        Self::of_file(workload.path, workload.ops)
    }

    /// The workload in `path`, whose operations are `ops`.
    pub(crate) fn of_file(path: &Path, ops: &[TimedOp]) -> Self {
        let counts = Counts::of(ops);
        WorkloadInfo {
            path: path.display().to_string(),
            ops: counts.ops(),
            stored: counts.stored,
            removed: counts.removed,
            cleared: counts.cleared,
            matches: counts.matches,
            block_ops: counts.block_ops,
            tiered_events: counts.tiered,
        }
    }
}

#[derive(Serialize)]
struct ReplayInfo {
    event_threads: usize,
    query_threads: usize,
    repeat: usize,
    rounds: u32,
    in_process: bool,
    fractions: Vec<f64>,
    rates: Vec<f64>,
}

/// Prints the untimed answer cross-check of the workload.
fn print_agreement(ops: &[TimedOp], subjects: &[crate::target::Subject]) {
    let Some(a) = crate::agree::check(ops, subjects) else {
        return;
    };
    let line = |differ: &[(&str, u64)]| {
        differ
            .iter()
            .map(|(name, n)| format!("{name} {n}/{}", a.queries))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!(
        "answers that differ from {} (untimed, in order): {}",
        a.against,
        line(&a.differ)
    );
    if !a.differ_tiered.is_empty() {
        println!(
            "tiered answers (find_matches_tiered) that differ from {}: {}",
            a.against,
            line(&a.differ_tiered)
        );
    }
}

/// What `--rounds` (two or more) tells of the main workload.
#[derive(Default)]
struct RoundFigures {
    /// The cross-core round trip measured before each round (see [`crate::cross_core`]).
    round_trips_ns: Vec<Option<f64>>,
    ratios: Vec<PairedRatio>,
    beyond_harness: Vec<BeyondHarness>,
    latency: Vec<RoundLatency>,
    p50_ratios: Vec<PairedRatio>,
}

/// Measures every subject on the workload, and on the compared workload first when there is
/// one (closed loop only there), one subject after the other, `--rounds` times over. Returns
/// one report per subject and workload (its median round) and, with two rounds or more, what
/// the rounds tell of the main workload.
fn measure_all(
    main: &Replayed,
    compared: Option<&Replayed>,
    opts: &ReplayOpts,
) -> Result<(Vec<SubjectReport>, RoundFigures), String> {
    let rounds = opts.rounds.max(1) as usize;
    let mut by_round = Vec::with_capacity(rounds);
    let mut round_trips_ns = Vec::with_capacity(rounds);
    for round in 0..rounds {
        if rounds > 1 {
            let round_trip = crate::cross_core::round_trip_ns();
            round_trips_ns.push(round_trip);
            phase(&format!(
                "round {} of {rounds} (cross-core round trip {})",
                round + 1,
                crate::cross_core::shown(round_trip)
            ));
        }
        let mut reports = Vec::new();
        for &subject in &opts.subjects {
            if let Some(c) = compared {
                let mut r = measure_one(c, opts, subject, false)?;
                r.workload = Some(c.label.to_string());
                reports.push(r);
            }
            let mut r = measure_one(main, opts, subject, round == 0)?;
            if compared.is_some() {
                r.workload = Some(main.label.to_string());
            }
            reports.push(r);
        }
        by_round.push(reports);
    }
    let main_label = compared.map(|_| main.label.to_string());
    let figures = if rounds > 1 {
        let of_main = |r: &&SubjectReport| r.workload == main_label;
        let names: Vec<String> = by_round[0]
            .iter()
            .filter(of_main)
            .map(|r| r.name.clone())
            .collect();
        let per_round = |figure: fn(&SubjectReport) -> f64| -> Vec<Vec<f64>> {
            by_round
                .iter()
                .map(|reports| reports.iter().filter(of_main).map(figure).collect())
                .collect()
        };
        let rates = per_round(|r| r.closed.ops_per_s());
        let (latency, p50_ratios) = latency_figures(
            &names,
            &per_round(|r| r.closed.p50_ns as f64),
            &per_round(|r| r.closed.p99_ns as f64),
        );
        RoundFigures {
            round_trips_ns,
            ratios: paired_ratios(&names, &rates),
            beyond_harness: beyond_harness(&names, &rates),
            latency,
            p50_ratios,
        }
    } else {
        RoundFigures::default()
    };
    Ok((median_reports(&by_round), figures))
}

/// Prints the closed-loop tables (and the tiered one when measured), the open-loop table
/// and writes the plot of the main workload's reports.
fn print_tables(
    reports: &[SubjectReport],
    main_label: Option<&str>,
    workload: &Path,
    dir: &Path,
    meta: &RunMeta,
    load_at_end: f64,
) -> Result<(), String> {
    println!(
        "\nclosed loop, side by side (find = find_matches service time under concurrent ingest; \
         load average {:.2} at start, {load_at_end:.2} at end, {} cores):",
        meta.machine.load_average, meta.machine.cores
    );
    print!("{}", report::closed_table(reports));
    if reports.iter().any(|r| r.tiered.is_some()) {
        println!(
            "\nclosed loop with find_matches_tiered queries{} (tiered = its service time under \
             the same concurrent ingest; find = find_matches, from the table above):",
            main_label.map_or(String::new(), |l| format!(", {l} workload"))
        );
        print!("{}", report::tiered_table(reports));
    }
    let main: Vec<SubjectReport> = reports
        .iter()
        .filter(|r| r.workload.as_deref() == main_label)
        .cloned()
        .collect();
    if main.iter().any(|r| !r.open.is_empty()) {
        println!("\nopen loop:");
        print!("{}", report::open_table(&main));
        let svg = dir.join("replay.svg");
        let title = format!(
            "kvidx replay: {} (commit {}, {} x {} cores)",
            file_name(workload),
            meta.commit,
            meta.machine.cpu,
            meta.machine.cores
        );
        std::fs::write(&svg, plot::render(&main, &title))
            .map_err(|e| format!("cannot write {}: {e}", svg.display()))?;
        println!("plot: {}", svg.display());
    }
    Ok(())
}

fn replay_and_report(
    main: &Replayed,
    compared: Option<&Replayed>,
    opts: &ReplayOpts,
    dir: &Path,
    meta: &RunMeta,
    routing: Option<RoutingResults>,
) -> Result<(), String> {
    if opts.subjects.is_empty() {
        return Err("--subjects is empty".into());
    }
    println!("\nreplay: {}", report::workload_line(&Counts::of(main.ops)));
    if let Some(c) = compared {
        println!(
            "compared with the {} workload (closed loop only): {}",
            c.label,
            report::workload_line(&Counts::of(c.ops))
        );
    }
    println!(
        "{} event thread(s), {} query thread(s); {}; throughput counts events once applied \
         (final flush included)",
        opts.event_threads,
        opts.query_threads,
        if opts.in_process {
            "all indexes in this process (memory = RSS delta)"
        } else {
            "one child process per index (memory = its own RSS delta, peak = its own VmHWM)"
        }
    );
    print_agreement(main.ops, &opts.subjects);
    let (reports, rounds) = measure_all(main, compared, opts)?;
    let load_at_end = crate::meta::load_average();
    let round_trip_at_end = crate::cross_core::round_trip_ns();
    let main_label = compared.map(|_| main.label);
    print_tables(&reports, main_label, main.path, dir, meta, load_at_end)?;
    if !rounds.ratios.is_empty() {
        println!(
            "\nclosed-loop ops/s over a reference's in the same round, median (min-max) of {} \
             rounds (the tables above show each index's median round):",
            opts.rounds
        );
        print!("{}", report::ratio_table(&rounds.ratios));
    }
    if !rounds.beyond_harness.is_empty() {
        println!(
            "\nclosed-loop time per operation beyond the harness's (1 / ops/s - 1 / null's \
             ops/s, same round), median (min-max) of {} rounds:",
            opts.rounds
        );
        print!("{}", report::beyond_harness_table(&rounds.beyond_harness));
    }
    if !rounds.latency.is_empty() {
        println!(
            "\nclosed-loop find p50 and p99, and p50 over a reference's in the same round, median \
             (min-max) of {} rounds:",
            opts.rounds
        );
        print!(
            "{}",
            report::latency_table(&rounds.latency, &rounds.p50_ratios)
        );
        println!(
            "cross-core round trip before each round (find latencies move with it; see \
             docs/bench.md): {}",
            rounds
                .round_trips_ns
                .iter()
                .map(|&ns| crate::cross_core::shown(ns))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let indicative = report::indicative([
        report::indicative_reason(&reports),
        report::load_reason(meta.machine.load_average, meta.machine.cores),
    ]);
    match &indicative {
        Some(why) => println!("figures are INDICATIVE only: {why}"),
        None => println!(
            "stable figures: closed-loop runs of {:.1} s or more, median of {}, load average \
             {:.2} at start (at most half the {} cores)",
            reports
                .iter()
                .map(|r| r.closed.seconds)
                .fold(f64::INFINITY, f64::min),
            opts.repeat.max(1),
            meta.machine.load_average,
            meta.machine.cores
        ),
    }
    println!("{}", meta.measured_line(load_at_end, round_trip_at_end));
    println!("command: {}", meta.command);
    let json = dir.join("results.json");
    let results = Results {
        run: meta,
        fleet: routing.as_ref().map(|r| &r.fleet),
        routing: routing.iter().flat_map(|r| r.rows.iter()).collect(),
        routing_notes: routing.as_ref().map_or(&[], |r| r.notes.as_slice()),
        delay_study: routing.as_ref().map(|r| &r.delay_study),
        single_tier_routing: routing.as_ref().and_then(|r| r.single_tier.as_ref()),
        workload: WorkloadInfo::of(main),
        compared_workload: compared.map(WorkloadInfo::of),
        replay: ReplayInfo {
            event_threads: opts.event_threads,
            query_threads: opts.query_threads,
            repeat: opts.repeat.max(1),
            rounds: opts.rounds.max(1),
            in_process: opts.in_process,
            fractions: opts.fractions.clone(),
            rates: opts.rates.clone(),
        },
        load_average_at_end: load_at_end,
        indicative,
        indexes: &reports,
        paired_ratios: &rounds.ratios,
        beyond_harness: &rounds.beyond_harness,
        find_latency: &rounds.latency,
        find_p50_ratios: &rounds.p50_ratios,
        round_trips_ns: &rounds.round_trips_ns,
        cross_core_round_trip_ns_at_end: round_trip_at_end,
    };
    let text = serde_json::to_string_pretty(&results).map_err(|e| e.to_string())?;
    std::fs::write(&json, text).map_err(|e| format!("cannot write {}: {e}", json.display()))?;
    println!("figures: {}", json.display());
    for r in &reports {
        if r.memory.rejected > 0 || r.memory.unknown_removals > 0 {
            let on = r
                .workload
                .as_ref()
                .map_or(String::new(), |w| format!(" ({w} workload)"));
            println!(
                "note: {}{on} rejected {} events and saw {} unknown removals",
                r.name, r.memory.rejected, r.memory.unknown_removals
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_dir_per_command() {
        let opts = |dir: Option<PathBuf>| ReplayOpts {
            subjects: vec![],
            event_threads: 1,
            query_threads: 1,
            fractions: vec![],
            rates: vec![],
            repeat: 1,
            rounds: 1,
            in_process: false,
            out_dir: dir,
        };
        let main = out_dir(&opts(None), "main").unwrap();
        let replay = out_dir(&opts(None), "replay").unwrap();
        assert!(
            main.ends_with("target/kvidx-bench/main"),
            "{}",
            main.display()
        );
        assert!(
            replay.ends_with("target/kvidx-bench/replay"),
            "{}",
            replay.display()
        );
        let tmp = tempfile::tempdir().unwrap();
        let given = out_dir(&opts(Some(tmp.path().join("x"))), "main").unwrap();
        assert!(given.ends_with("x") && given.is_dir());
        assert!(full_trace_path().is_file() && sample_trace_path().is_file());
    }

    /// Runs the main job on the first 100 sample requests (4 workers, in process) with
    /// `extra` arguments; returns its results.json.
    fn small_main_job(extra: &[&str]) -> serde_json::Value {
        use clap::Parser;
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().to_str().unwrap();
        let mut argv = vec![
            "kvidx-bench",
            "--quick",
            "--limit",
            "100",
            "--workers",
            "4",
            "--blocks-per-worker",
            "300",
            "--subjects",
            "positional",
            "--repeat",
            "1",
            "--fractions",
            "1",
            "--in-process",
            "--out-dir",
            out,
        ];
        argv.extend(extra);
        let cli = crate::cli::Cli::try_parse_from(argv).unwrap();
        main_job(&cli.main).unwrap();
        let text = std::fs::read_to_string(tmp.path().join("results.json")).unwrap();
        serde_json::from_str(&text).unwrap()
    }

    #[test]
    fn main_job_with_a_host_tier_reports_both_tiers_and_both_workloads() {
        let r = small_main_job(&["--host-blocks-per-worker", "300"]);
        let policies: Vec<&str> = r["routing"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["policy"].as_str().unwrap())
            .collect();
        assert_eq!(
            policies,
            [
                "random",
                "round-robin",
                "kv-aware",
                "kv-cost",
                "kv-cost-tiered"
            ]
        );
        for p in r["routing"].as_array().unwrap() {
            let (all, gpu, host) = (
                p["hit_rate"].as_f64().unwrap(),
                p["device_hit_rate"].as_f64().unwrap(),
                p["host_hit_rate"].as_f64().unwrap(),
            );
            assert!((gpu + host - all).abs() < 1e-9, "{p}");
        }
        assert_eq!(r["fleet"]["host_blocks_per_worker"], 300);
        assert_eq!(r["fleet"]["host_weight"], 0.8);
        assert_eq!(r["single_tier_routing"]["policy"], "kv-cost");
        assert_eq!(r["single_tier_routing"]["host_hit_blocks"], 0);
        assert!(r["workload"]["tiered_events"].as_u64().unwrap() > 0);
        assert!(r["compared_workload"]["tiered_events"].is_null());
        let indexes = r["indexes"].as_array().unwrap();
        assert_eq!(indexes.len(), 2);
        assert_eq!(indexes[0]["workload"], "single-tier");
        assert!(indexes[0]["tiered"].is_null() && indexes[0]["open"] == serde_json::json!([]));
        assert_eq!(indexes[1]["workload"], "host tier");
        assert_eq!(indexes[1]["tiered"]["queries"], 100);
        assert_eq!(indexes[1]["open"].as_array().unwrap().len(), 1);
        for i in indexes {
            assert_eq!(i["memory"]["rejected"], 0);
            assert_eq!(i["memory"]["unknown_removals"], 0);
        }
    }

    #[test]
    fn main_job_without_a_host_tier_reports_as_before() {
        let r = small_main_job(&[]);
        assert_eq!(r["routing"].as_array().unwrap().len(), 4);
        // The study: 2 variants x 3 delays x 4 views, and the targets of both variants.
        let study = &r["delay_study"];
        assert_eq!(study["rows"].as_array().unwrap().len(), 24);
        assert_eq!(study["rows"][0]["view"], "events-only");
        assert_eq!(study["rows"][23]["trace"], "bursty");
        assert_eq!(study["burst"], 8);
        assert_eq!(study["event_free_ttl_ms"], 3_600_000);
        let targets = study["targets"].as_array().unwrap();
        assert_eq!(targets.len(), 2);
        assert!(targets.iter().all(|t| t["delay_ms"] == 50));
        assert!(r["routing"][3]["device_hit_rate"].is_null());
        for key in ["single_tier_routing", "compared_workload"] {
            assert!(r[key].is_null(), "{key}");
        }
        assert!(r["fleet"]["host_blocks_per_worker"].is_null());
        assert!(r["workload"]["tiered_events"].is_null());
        let indexes = r["indexes"].as_array().unwrap();
        assert_eq!(indexes.len(), 1);
        assert!(indexes[0]["workload"].is_null() && indexes[0]["tiered"].is_null());
        // The load at both ends is recorded; a quick run is indicative whatever the load.
        assert!(r["load_average_at_end"].as_f64().is_some_and(|l| l >= 0.0));
        assert!(r["run"]["machine"]["load_average"].as_f64().is_some());
        assert!(r["indicative"].is_string());
    }

    #[test]
    fn rounds_pair_every_index_with_the_references_of_its_round() {
        let r = small_main_job(&["--subjects", "null", "--rounds", "3"]);
        assert_eq!(r["replay"]["rounds"], 3);
        // Each entry's `key`, as text.
        let texts = |entries: &[serde_json::Value], key: &str| -> Vec<String> {
            entries
                .iter()
                .map(|e| e[key].as_str().unwrap().to_string())
                .collect()
        };
        let indexes = r["indexes"].as_array().unwrap();
        assert_eq!(texts(indexes, "name"), vec!["positional", "null"]);
        // The open loop ran in the first round only, and is reported.
        assert_eq!(indexes[0]["open"].as_array().unwrap().len(), 1);
        let ratios = r["paired_ratios"].as_array().unwrap();
        assert_eq!(
            ratios.len(),
            1,
            "positional / null only: null is the reference"
        );
        assert_eq!(ratios[0]["subject"], "positional");
        assert_eq!(ratios[0]["against"], "null");
        let rounds = ratios[0]["rounds"].as_array().unwrap();
        assert_eq!(rounds.len(), 3);
        assert!(rounds.iter().all(|v| v.as_f64().unwrap() > 0.0));
        let median = ratios[0]["median"].as_f64().unwrap();
        assert!(median >= ratios[0]["min"].as_f64().unwrap());
        let beyond = r["beyond_harness"].as_array().unwrap();
        assert_eq!(beyond.len(), 1);
        assert_eq!(beyond[0]["subject"], "positional");
        assert_eq!(beyond[0]["rounds"].as_array().unwrap().len(), 3);
        // Every index's find p50 and p99 in each round; none is divided by null's.
        let latency = r["find_latency"].as_array().unwrap();
        assert_eq!(texts(latency, "subject"), vec!["positional", "null"]);
        let p50s = latency[0]["p50_ns"]["rounds"].as_array().unwrap();
        let p99s = latency[0]["p99_ns"]["rounds"].as_array().unwrap();
        assert_eq!((p50s.len(), p99s.len()), (3, 3));
        for (p50, p99) in p50s.iter().zip(p99s) {
            let (p50, p99) = (p50.as_f64().unwrap(), p99.as_f64().unwrap());
            assert!(p50 > 0.0 && p50 <= p99, "{p50} {p99}");
        }
        assert!(r["find_p50_ratios"].is_null(), "no reference but null");
        let r1 = small_main_job(&[]);
        assert!(r1["paired_ratios"].is_null(), "one round: no ratios");
        assert!(r1["find_latency"].is_null(), "one round: no spread");
    }
}
