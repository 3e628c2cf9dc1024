//! The tool's jobs: the main job, `generate`, `replay` and the internal `measure`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde::Serialize;

use crate::cli::{EngineArgs, GenerateArgs, MainArgs, MeasureArgs, ReplayArgs, ReplayOpts};
use crate::meta::RunMeta;
use crate::replay::{self, Plan, SubjectReport, Threads};
use crate::report::FirstBlock;
use crate::sim::{simulate, EngineHash, Policy, Routing, SimConfig, SimOutput};
use crate::trace::{read_trace, Request};
use crate::workload::{read_workload, write_workload, Counts, TimedOp};
use crate::{plot, report};

/// The repository this tool was built from.
fn repo_dir() -> PathBuf {
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
fn out_dir(opts: &ReplayOpts, command: &str) -> Result<PathBuf, String> {
    let dir = match &opts.out_dir {
        Some(d) => d.clone(),
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
fn phase(what: &str) {
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
    })
}

fn describe_fleet(path: &Path, trace: &[Request], e: &EngineArgs) -> String {
    format!(
        "trace {} ({} requests); {} workers x {} blocks, length factor {}, duplication {}, \
         decode {} ms/token{}",
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
}

impl RoutingRow {
    fn of(policy: Policy, r: &Routing) -> Self {
        Self {
            policy: policy.name(),
            hit_rate: r.hit_rate(),
            hit_blocks: r.hit_blocks,
            prompt_blocks: r.prompt_blocks,
            requests: r.requests,
            stored_events: r.stored_events,
            removed_events: r.removed_events,
            max_worker_requests: r.max_worker_requests,
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
}

/// The routing part of a main-job run.
struct RoutingResults {
    fleet: Fleet,
    rows: Vec<RoutingRow>,
    notes: Vec<String>,
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
    let mut routing = Vec::new();
    let mut chosen: Option<SimOutput> = None;
    for policy in Policy::ALL {
        let started = Instant::now();
        let out = simulate(&trace, &sim_config(&args.engine, policy)?);
        phase(&format!(
            "simulated {} routing of {} requests in {:.1} s",
            policy.name(),
            trace.len(),
            started.elapsed().as_secs_f64()
        ));
        routing.push((policy, out.routing));
        if policy == args.policy {
            chosen = Some(out);
        }
    }
    println!("\nrouting quality (prefix-cache hit rate = hit blocks / prompt blocks):");
    print!("{}", report::routing_table(&routing));
    let first = FirstBlock::of(trace.iter().filter_map(|r| r.hash_ids.first().copied()));
    let notes = report::routing_notes(&routing, first);
    for note in &notes {
        println!("{note}");
    }
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
    let chosen = chosen.expect("every policy is simulated");
    let workload = dir.join(format!("workload-{}.jsonl", args.policy.name()));
    write_workload(&workload, &chosen.ops)?;
    println!(
        "\nworkload of {} routing written to {}",
        args.policy.name(),
        workload.display()
    );
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
        },
        rows: routing.iter().map(|(p, r)| RoutingRow::of(*p, r)).collect(),
        notes,
    };
    replay_and_report(
        &workload,
        &chosen.ops,
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
    print!("{}", report::routing_table(&[(args.policy, out.routing)]));
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
    replay_and_report(&args.workload, &ops, &args.replay, &dir, &meta, None)
}

/// `kvidx-bench measure` (internal): one index, JSON on stdout.
pub fn measure(args: &MeasureArgs) -> Result<(), String> {
    let ops = read_workload(&args.workload)?;
    let threads = Threads {
        events: args.event_threads,
        queries: args.query_threads,
    };
    let plan = Plan {
        fractions: args.fractions.clone(),
        rates: args.rates.clone(),
        repeat: args.repeat,
    };
    let r = replay::measure(&ops, args.subject, threads, &plan);
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

/// Measures one index in a child process of this binary, so that its memory figures are its
/// own (a fresh heap and its own peak RSS).
fn measure_in_child(
    workload: &Path,
    opts: &ReplayOpts,
    subject: crate::target::Subject,
) -> Result<SubjectReport, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find own binary: {e}"))?;
    let mut cmd = Command::new(exe);
    cmd.arg("measure")
        .arg("--workload")
        .arg(workload)
        .args(["--subject", subject.name()])
        .args(["--event-threads", &opts.event_threads.to_string()])
        .args(["--query-threads", &opts.query_threads.to_string()])
        .args(["--repeat", &opts.repeat.to_string()]);
    if !opts.fractions.is_empty() {
        cmd.args(["--fractions", &join(&opts.fractions)]);
    }
    if !opts.rates.is_empty() {
        cmd.args(["--rates", &join(&opts.rates)]);
    }
    let out = cmd
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run measure child: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "measuring {} failed ({})",
            subject.name(),
            out.status
        ));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("bad measure output: {e}"))
}

/// Everything `results.json` holds.
#[derive(Serialize)]
struct Results<'a> {
    run: &'a RunMeta,
    #[serde(skip_serializing_if = "Option::is_none")]
    fleet: Option<&'a Fleet>,
    routing: Vec<&'a RoutingRow>,
    routing_notes: &'a [String],
    workload: WorkloadInfo,
    replay: ReplayInfo,
    /// Why the figures are only indicative; `None` when the runs were long enough.
    indicative: Option<String>,
    indexes: &'a [SubjectReport],
}

#[derive(Serialize)]
struct WorkloadInfo {
    path: String,
    ops: u64,
    stored: u64,
    removed: u64,
    cleared: u64,
    matches: u64,
    block_ops: u64,
}

#[derive(Serialize)]
struct ReplayInfo {
    event_threads: usize,
    query_threads: usize,
    repeat: usize,
    in_process: bool,
    fractions: Vec<f64>,
    rates: Vec<f64>,
}

fn replay_and_report(
    workload: &Path,
    ops: &[TimedOp],
    opts: &ReplayOpts,
    dir: &Path,
    meta: &RunMeta,
    routing: Option<RoutingResults>,
) -> Result<(), String> {
    if opts.subjects.is_empty() {
        return Err("--subjects is empty".into());
    }
    let counts = Counts::of(ops);
    println!("\nreplay: {}", report::workload_line(&counts));
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
    if let Some(a) = crate::agree::check(ops, &opts.subjects) {
        let parts: Vec<String> = a
            .differ
            .iter()
            .map(|(name, n)| format!("{name} {n}/{}", a.queries))
            .collect();
        println!(
            "answers that differ from {} (untimed, in order): {}",
            a.against,
            parts.join(", ")
        );
    }
    let threads = Threads {
        events: opts.event_threads,
        queries: opts.query_threads,
    };
    let mut reports = Vec::new();
    for &subject in &opts.subjects {
        let started = Instant::now();
        let r = if opts.in_process {
            let plan = Plan {
                fractions: opts.fractions.clone(),
                rates: opts.rates.clone(),
                repeat: opts.repeat,
            };
            replay::measure(ops, subject, threads, &plan)
        } else {
            measure_in_child(workload, opts, subject)?
        };
        phase(&format!(
            "measured {} ({} closed-loop run(s), {} open-loop) in {:.1} s",
            subject.name(),
            opts.repeat.max(1),
            r.open.len(),
            started.elapsed().as_secs_f64()
        ));
        reports.push(r);
    }
    println!(
        "\nclosed loop, side by side (find = find_matches service time under concurrent ingest):"
    );
    print!("{}", report::closed_table(&reports));
    if reports.iter().any(|r| !r.open.is_empty()) {
        println!("\nopen loop:");
        print!("{}", report::open_table(&reports));
        let svg = dir.join("replay.svg");
        let title = format!(
            "kvidx replay: {} (commit {}, {} x {} cores)",
            file_name(workload),
            meta.commit,
            meta.machine.cpu,
            meta.machine.cores
        );
        std::fs::write(&svg, plot::render(&reports, &title))
            .map_err(|e| format!("cannot write {}: {e}", svg.display()))?;
        println!("plot: {}", svg.display());
    }
    let indicative = report::indicative_reason(&reports);
    match &indicative {
        Some(why) => println!("figures are INDICATIVE only: {why}"),
        None => println!(
            "stable figures: closed-loop runs of {:.1} s or more, median of {}",
            reports
                .iter()
                .map(|r| r.closed.seconds)
                .fold(f64::INFINITY, f64::min),
            opts.repeat.max(1)
        ),
    }
    println!("measured: {}", meta.line());
    println!("command: {}", meta.command);
    let json = dir.join("results.json");
    let results = Results {
        run: meta,
        fleet: routing.as_ref().map(|r| &r.fleet),
        routing: routing.iter().flat_map(|r| r.rows.iter()).collect(),
        routing_notes: routing.as_ref().map_or(&[], |r| r.notes.as_slice()),
        workload: WorkloadInfo {
            path: workload.display().to_string(),
            ops: counts.ops(),
            stored: counts.stored,
            removed: counts.removed,
            cleared: counts.cleared,
            matches: counts.matches,
            block_ops: counts.block_ops,
        },
        replay: ReplayInfo {
            event_threads: opts.event_threads,
            query_threads: opts.query_threads,
            repeat: opts.repeat.max(1),
            in_process: opts.in_process,
            fractions: opts.fractions.clone(),
            rates: opts.rates.clone(),
        },
        indicative,
        indexes: &reports,
    };
    let text = serde_json::to_string_pretty(&results).map_err(|e| e.to_string())?;
    std::fs::write(&json, text).map_err(|e| format!("cannot write {}: {e}", json.display()))?;
    println!("figures: {}", json.display());
    for r in &reports {
        if r.memory.rejected > 0 || r.memory.unknown_removals > 0 {
            println!(
                "note: {} rejected {} events and saw {} unknown removals",
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
}
