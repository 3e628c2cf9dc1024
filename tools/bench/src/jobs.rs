//! The tool's jobs: the main job, `generate`, `replay` and the internal `measure`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cli::{EngineArgs, GenerateArgs, MainArgs, MeasureArgs, ReplayArgs, ReplayOpts};
use crate::replay::{self, Plan, SubjectReport, Threads};
use crate::sim::{simulate, Policy, SimConfig, SimOutput};
use crate::trace::{read_trace, Request};
use crate::workload::{read_workload, write_workload, Counts, TimedOp};
use crate::{plot, report};

/// The shipped sample trace, found relative to this crate's source.
pub fn sample_trace_path() -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/sample_trace.jsonl");
    path.canonicalize().unwrap_or(path)
}

fn out_dir(opts: &ReplayOpts) -> Result<PathBuf, String> {
    let dir = match &opts.out_dir {
        Some(d) => d.clone(),
        None => {
            let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
            if repo.join("Cargo.toml").is_file() {
                repo.join("target/kvidx-bench")
            } else {
                std::env::temp_dir().join("kvidx-bench")
            }
        }
    };
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(dir.canonicalize().unwrap_or(dir))
}

fn load_trace(engine: &EngineArgs) -> Result<(PathBuf, Vec<Request>), String> {
    let path = engine.trace.clone().unwrap_or_else(sample_trace_path);
    let mut trace = read_trace(&path)?;
    if engine.limit > 0 {
        trace.truncate(engine.limit);
    }
    Ok((path, trace))
}

fn sim_config(engine: &EngineArgs, policy: Policy) -> Result<SimConfig, String> {
    if engine.workers == 0 || engine.blocks_per_worker == 0 || engine.length_factor == 0 {
        return Err("--workers, --blocks-per-worker and --length-factor must be positive".into());
    }
    if !(engine.decode_ms_per_token >= 0.0 && engine.decode_ms_per_token.is_finite()) {
        return Err("--decode-ms-per-token must be a finite number >= 0".into());
    }
    Ok(SimConfig {
        workers: engine.workers,
        blocks_per_worker: engine.blocks_per_worker,
        length_factor: engine.length_factor,
        duplication: engine.duplication.max(1),
        seed: engine.seed,
        policy,
        router_index: engine.router_index,
        decode_ms_per_token: engine.decode_ms_per_token,
    })
}

fn describe_fleet(path: &Path, trace: &[Request], e: &EngineArgs) -> String {
    format!(
        "trace {} ({} requests); {} workers x {} blocks, length factor {}, duplication {}, \
         decode {} ms/token",
        path.display(),
        trace.len(),
        e.workers,
        e.blocks_per_worker,
        e.length_factor,
        e.duplication.max(1),
        e.decode_ms_per_token
    )
}

/// `kvidx-bench` with no subcommand.
pub fn main_job(args: &MainArgs) -> Result<(), String> {
    let (path, trace) = load_trace(&args.engine)?;
    println!("{}", describe_fleet(&path, &trace, &args.engine));
    let mut routing = Vec::new();
    let mut chosen: Option<SimOutput> = None;
    for policy in Policy::ALL {
        let out = simulate(&trace, &sim_config(&args.engine, policy)?);
        routing.push((policy, out.routing));
        if policy == args.policy {
            chosen = Some(out);
        }
    }
    println!("\nrouting quality (prefix-cache hit rate = hit blocks / prompt blocks):");
    print!("{}", report::routing_table(&routing));
    let chosen = chosen.expect("every policy is simulated");
    let dir = out_dir(&args.replay)?;
    let workload = dir.join(format!("workload-{}.jsonl", args.policy.name()));
    write_workload(&workload, &chosen.ops)?;
    println!(
        "\nworkload of {} routing written to {}",
        args.policy.name(),
        workload.display()
    );
    replay_and_report(&workload, &chosen.ops, &args.replay, &dir)
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
    let ops = read_workload(&args.workload)?;
    let dir = out_dir(&args.replay)?;
    replay_and_report(&args.workload, &ops, &args.replay, &dir)
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

fn replay_and_report(
    workload: &Path,
    ops: &[TimedOp],
    opts: &ReplayOpts,
    dir: &Path,
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
        let title = format!("kvidx replay: {}", workload.display());
        std::fs::write(&svg, plot::render(&reports, &title))
            .map_err(|e| format!("cannot write {}: {e}", svg.display()))?;
        println!("plot: {}", svg.display());
    }
    let json = dir.join("results.json");
    let text = serde_json::to_string_pretty(&reports).map_err(|e| e.to_string())?;
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
