//! The mock engine fleet: routes trace requests to workers and records what they publish.
//!
//! Time is the trace's clock. A request arrives at its timestamp: the router is asked (a
//! `match` query over the prompt's local hashes is recorded), a policy picks a worker, and the
//! worker's pool references its cached prefix (the hit), allocates the rest (evicting LRU
//! blocks) and announces them. The request then runs for `output_length * decode_ms_per_token`
//! ms; when it ends, its generated blocks (`output_length * F / 512` of them) are cached and
//! announced, and every block it used is released (becomes evictable).
//!
//! With a host tier (`host_blocks_per_worker > 0`) each worker's GPU evictions go to host
//! memory and a request's prefix may continue there (host hits, reloaded to the GPU); see
//! `block_pool` for the events and their order. Routing quality then counts GPU hits and host
//! hits separately.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use kvidx::{Block, Event, Worker};

use crate::block_pool::BlockPool;
use crate::chain::{decode_chain, prompt_chain};
use crate::delay::Delayed;
pub use crate::engine_hash::EngineHash;
use crate::engine_hash::Salter;
use crate::progress;
use crate::router::{Load, Router};
pub use crate::router::{Policy, RouterIndex, View};
use crate::trace::{Request, TRACE_BLOCK_TOKENS};
use crate::ttl::Ttl;
use crate::workload::{Op, TimedOp};

/// Settings of one simulation.
#[derive(Debug, Clone, Copy)]
pub struct SimConfig {
    /// Workers (worker ids `0..workers`, dp rank 0).
    pub workers: usize,
    /// Blocks in each worker's pool.
    pub blocks_per_worker: usize,
    /// Blocks per trace hash id.
    pub length_factor: u32,
    /// Copies of the trace, interleaved, sharing nothing.
    pub duplication: u32,
    /// Seed of the random policy and of tie-breaks.
    pub seed: u64,
    /// The routing policy.
    pub policy: Policy,
    /// Where kv-aware routing reads overlaps.
    pub router_index: RouterIndex,
    /// Simulated decode time per output token, in milliseconds.
    pub decode_ms_per_token: f64,
    /// How the engines name their blocks: the contract's shared chain, or salted per worker.
    pub engine_hash: EngineHash,
    /// Blocks in each worker's host-memory pool (0: no host tier).
    pub host_blocks_per_worker: usize,
    /// What a block in host memory is worth to the tier-aware policy, relative to one on
    /// the GPU (`Policy::KvCostTiered`).
    pub host_weight: f64,
    /// What the kv policies know of the caches: the events, predictions, or the pools.
    pub view: View,
    /// How long after an engine publishes an event the router's index receives it (ms).
    pub event_delay_ms: u64,
    /// How long a prediction lasts with events (`View::EventsPredictions`), in ms.
    pub predict_ttl_ms: u64,
    /// How long a prediction lasts without events (`View::PredictionsOnly`).
    pub event_free_ttl: Ttl,
}

/// Routing quality and event counts of one simulation.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Routing {
    /// Requests routed (copies included).
    pub requests: u64,
    /// Prompt blocks over all requests.
    pub prompt_blocks: u64,
    /// Prompt blocks found cached on the chosen worker (prefix hits, on the GPU or reloaded
    /// from host memory).
    pub hit_blocks: u64,
    /// Of the hit blocks, those reloaded from host memory (0 without a host tier).
    pub host_hit_blocks: u64,
    /// Blocks the GPU pools offloaded to host memory (host `Stored` events).
    pub offloaded: u64,
    /// Stored events published.
    pub stored_events: u64,
    /// Removed (single-block) events published.
    pub removed_events: u64,
    /// Requests routed to the busiest worker: how evenly the policy spreads the load.
    pub max_worker_requests: u64,
    /// Prompt tokens the chosen workers had to prefill: the prompt blocks not hit, at
    /// `512 / length factor` tokens each.
    pub prefill_tokens: u64,
}

impl Routing {
    /// Prefix-cache hit rate: hit blocks / prompt blocks.
    pub fn hit_rate(&self) -> f64 {
        if self.prompt_blocks == 0 {
            0.0
        } else {
            self.hit_blocks as f64 / self.prompt_blocks as f64
        }
    }

    /// Hit blocks found on the GPU.
    pub fn device_hit_blocks(&self) -> u64 {
        self.hit_blocks - self.host_hit_blocks
    }

    /// GPU hit rate: hit blocks found on the GPU / prompt blocks.
    pub fn device_hit_rate(&self) -> f64 {
        self.share(self.device_hit_blocks())
    }

    /// Host hit rate: hit blocks reloaded from host memory / prompt blocks.
    pub fn host_hit_rate(&self) -> f64 {
        self.share(self.host_hit_blocks)
    }

    fn share(&self, blocks: u64) -> f64 {
        if self.prompt_blocks == 0 {
            0.0
        } else {
            blocks as f64 / self.prompt_blocks as f64
        }
    }
}

/// What a simulation produced.
#[derive(Debug)]
pub struct SimOutput {
    /// The workload: events and queries in issue order.
    pub ops: Vec<TimedOp>,
    /// Routing quality.
    pub routing: Routing,
    /// Blocks held at the end (on either tier), summed over workers.
    pub final_blocks: u64,
    /// The worker chosen for each request, in admission order.
    pub choices: Vec<u32>,
}

/// A request that is running on a worker.
struct Running {
    worker: usize,
    request: u64,
    /// Prompt blocks it references (a prefix of its prompt chain).
    prompt: Vec<Block>,
    /// Whether the whole prompt got cached (then its generated blocks can follow it).
    whole_prompt: bool,
    decode_blocks: u32,
}

/// The fleet being simulated.
struct Fleet {
    pools: Vec<BlockPool>,
    load: Vec<Load>,
    router: Router,
    /// Published events on their way to the router.
    delayed: Delayed,
    /// Tokens per block (`512 / length factor`).
    block_tokens: u64,
    ops: Vec<TimedOp>,
    events: Vec<Event>,
    routing: Routing,
    /// Requests routed to each worker.
    served: Vec<u64>,
    /// Renames published events to per-worker salted names (`EngineHash::PerWorker`).
    salter: Option<Salter>,
    /// The worker chosen for each request.
    choices: Vec<u32>,
}

impl Fleet {
    /// Moves the events the pools just published into the workload and the router's index
    /// (renamed to the worker's salted names first, with per-worker engine hashes).
    fn publish(&mut self, t: u64) {
        for mut event in self.events.drain(..) {
            if let Some(salter) = &mut self.salter {
                salter.rename(&mut event);
            }
            match &event.data {
                kvidx::EventData::Stored { tier, .. } => {
                    self.routing.stored_events += 1;
                    self.routing.offloaded += u64::from(*tier == kvidx::Tier::Host);
                }
                kvidx::EventData::Removed { .. } => self.routing.removed_events += 1,
                kvidx::EventData::Cleared => {}
            }
            self.ops.push(TimedOp {
                t,
                op: Op::Event(event.clone()),
            });
            self.delayed.publish(t, event);
        }
    }

    fn admit(&mut self, t: u64, request: u64, prompt: Vec<Block>, decode_blocks: u32) -> Running {
        let locals = prompt.iter().map(|b| b.local_hash).collect();
        self.ops.push(TimedOp {
            t,
            op: Op::Match(locals),
        });
        for event in self.delayed.arrived(t) {
            self.router.observe(&event);
        }
        self.router.at(t);
        let worker = self.router.choose(&prompt, &self.pools, &self.load);
        self.router.routed(worker, &prompt);
        self.choices.push(worker as u32);
        let pool = &mut self.pools[worker];
        self.served[worker] += 1;
        self.routing.requests += 1;
        self.routing.prompt_blocks += prompt.len() as u64;
        let got = pool.acquire(None, &prompt, &mut self.events);
        self.routing.hit_blocks += got.hits() as u64;
        self.routing.prefill_tokens += (prompt.len() - got.hits()) as u64 * self.block_tokens;
        self.routing.host_hit_blocks += got.host_hits as u64;
        let referenced = got.referenced;
        self.publish(t);
        self.load[worker].requests += 1;
        self.load[worker].blocks += referenced as u64;
        let whole_prompt = referenced == prompt.len() && !prompt.is_empty();
        let mut prompt = prompt;
        prompt.truncate(referenced);
        Running {
            worker,
            request,
            prompt,
            whole_prompt,
            decode_blocks,
        }
    }

    fn complete(&mut self, t: u64, run: Running) {
        let pool = &mut self.pools[run.worker];
        let mut used: Vec<u64> = run.prompt.iter().map(|b| b.seq_hash).collect();
        if run.whole_prompt && run.decode_blocks > 0 {
            let last = run
                .prompt
                .last()
                .expect("whole prompt is not empty")
                .seq_hash;
            let decode = decode_chain(run.request, run.decode_blocks, last);
            let referenced = pool
                .acquire(Some(last), &decode, &mut self.events)
                .referenced;
            used.extend(decode[..referenced].iter().map(|b| b.seq_hash));
        }
        pool.release(&used);
        self.load[run.worker].requests -= 1;
        self.load[run.worker].blocks -= run.prompt.len() as u64;
        self.publish(t);
    }
}

/// Runs the trace through the mock fleet under one policy.
pub fn simulate(trace: &[Request], cfg: &SimConfig) -> SimOutput {
    assert!(cfg.workers > 0 && cfg.blocks_per_worker > 0 && cfg.length_factor > 0);
    let copies = u64::from(cfg.duplication.max(1));
    let mut fleet = Fleet {
        pools: (0..cfg.workers)
            .map(|w| {
                BlockPool::with_host(
                    Worker::new(w as u64, 0),
                    cfg.blocks_per_worker,
                    cfg.host_blocks_per_worker,
                )
            })
            .collect(),
        load: vec![Load::default(); cfg.workers],
        router: Router::new(cfg),
        delayed: Delayed::new(cfg.event_delay_ms),
        block_tokens: TRACE_BLOCK_TOKENS / u64::from(cfg.length_factor),
        ops: Vec::new(),
        events: Vec::new(),
        routing: Routing::default(),
        served: vec![0; cfg.workers],
        salter: match cfg.engine_hash {
            EngineHash::Shared => None,
            EngineHash::PerWorker => Some(Salter::new()),
        },
        choices: Vec::with_capacity(trace.len() * copies as usize),
    };
    let bar = progress::bar(
        trace.len() as u64,
        &format!("simulate {}", cfg.policy.name()),
    );
    // Running requests by (end time, request number).
    let mut ending: BinaryHeap<Reverse<(u64, u64)>> = BinaryHeap::new();
    let mut running: Vec<Option<Running>> = Vec::new();
    for (i, req) in trace.iter().enumerate() {
        while let Some(Reverse((end, number))) = ending.peek().copied() {
            if end > req.timestamp {
                break;
            }
            ending.pop();
            let run = running[number as usize].take().expect("ends once");
            fleet.complete(end, run);
        }
        for copy in 0..copies {
            let number = i as u64 * copies + copy;
            let prompt = prompt_chain(&req.hash_ids, cfg.length_factor, copy, copies);
            let decode_blocks =
                (req.output_length * u64::from(cfg.length_factor) / TRACE_BLOCK_TOKENS) as u32;
            let run = fleet.admit(req.timestamp, number, prompt, decode_blocks);
            let duration = (req.output_length as f64 * cfg.decode_ms_per_token).ceil() as u64;
            ending.push(Reverse((req.timestamp + duration, number)));
            if running.len() <= number as usize {
                running.resize_with(number as usize + 1, || None);
            }
            running[number as usize] = Some(run);
        }
        bar.inc(1);
    }
    while let Some(Reverse((end, number))) = ending.pop() {
        let run = running[number as usize].take().expect("ends once");
        fleet.complete(end, run);
    }
    bar.finish_and_clear();
    fleet.routing.max_worker_requests = fleet.served.iter().copied().max().unwrap_or(0);
    let final_blocks = fleet.pools.iter().map(|p| p.held() as u64).sum();
    SimOutput {
        ops: fleet.ops,
        routing: fleet.routing,
        final_blocks,
        choices: fleet.choices,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::read_trace;
    use crate::ttl::DEFAULT_EVENT_FREE_TTL;
    use kvidx::{BackendKind, Config, EventData, Indexer};
    use std::collections::{HashMap, HashSet};

    fn sample(n: usize) -> Vec<Request> {
        let mut t = read_trace(&crate::jobs::sample_trace_path()).unwrap();
        t.truncate(n);
        t
    }

    fn config(policy: Policy, router_index: RouterIndex) -> SimConfig {
        SimConfig {
            workers: 4,
            blocks_per_worker: 300,
            length_factor: 2,
            duplication: 1,
            seed: 3,
            policy,
            router_index,
            decode_ms_per_token: 20.0,
            engine_hash: EngineHash::Shared,
            host_blocks_per_worker: 0,
            host_weight: 0.8,
            view: View::EventsOnly,
            event_delay_ms: 0,
            predict_ttl_ms: 1000,
            event_free_ttl: DEFAULT_EVENT_FREE_TTL,
        }
    }

    /// Checks the published stream like an index would: parents held (on any tier),
    /// removals of blocks held (on the tier named), single-block removals, pools never over
    /// capacity (GPU `capacity`, host `host`). Returns the blocks held at the end.
    fn check_stream(ops: &[TimedOp], capacity: usize, host: usize) -> u64 {
        // Per worker, each held block's tiers (bit = tier index).
        let mut held: HashMap<Worker, HashMap<u64, u8>> = HashMap::new();
        let mut last_t = 0;
        for op in ops {
            assert!(op.t >= last_t, "time goes forward");
            last_t = op.t;
            let Op::Event(e) = &op.op else { continue };
            let set = held.entry(e.worker).or_default();
            match &e.data {
                EventData::Stored {
                    parent,
                    blocks,
                    tier,
                } => {
                    assert!(!blocks.is_empty());
                    if let Some(p) = parent {
                        assert!(set.contains_key(p), "parent {p} not held by {:?}", e.worker);
                    }
                    if *tier == kvidx::Tier::Host {
                        assert_eq!(blocks.len(), 1, "offloads are single-block");
                    }
                    for b in blocks {
                        *set.entry(b.seq_hash).or_default() |= 1 << tier.index();
                    }
                }
                EventData::Removed { seq_hashes, tier } => {
                    assert_eq!(seq_hashes.len(), 1);
                    let name = seq_hashes[0];
                    let tiers = set.get_mut(&name).expect("removed a block not held");
                    let bits = tier.map_or(u8::MAX, |t| 1 << t.index());
                    assert!(
                        *tiers & bits != 0,
                        "removed {name} from a tier it is not on"
                    );
                    *tiers &= !bits;
                    if *tiers == 0 {
                        set.remove(&name);
                    }
                }
                EventData::Cleared => panic!("the mock engine never clears"),
            }
            let on = |t: kvidx::Tier| set.values().filter(|m| *m & (1 << t.index()) != 0).count();
            assert!(
                on(kvidx::Tier::Device) <= capacity,
                "GPU pool over capacity"
            );
            assert!(on(kvidx::Tier::Host) <= host, "host pool over capacity");
        }
        held.values().map(|s| s.len() as u64).sum()
    }

    /// Applies every event to a synchronous reference index and checks it rejected nothing,
    /// saw no unknown removal and ends holding `final_blocks` (worker, block) pairs.
    fn check_reference(ops: &[TimedOp], final_blocks: u64) {
        let index = Indexer::new(Config {
            backend: BackendKind::Reference,
            event_threads: 0,
            ..Config::default()
        })
        .unwrap();
        for op in ops {
            if let Op::Event(e) = &op.op {
                index.apply_event(e.clone()).unwrap();
            }
        }
        let stats = index.stats();
        assert_eq!((stats.events_rejected, stats.unknown_removals), (0, 0));
        assert_eq!(stats.worker_blocks, final_blocks);
    }

    #[test]
    fn every_policy_publishes_a_valid_stream() {
        let trace = sample(120);
        for policy in Policy::ALL {
            let out = simulate(&trace, &config(policy, RouterIndex::Oracle));
            let held = check_stream(&out.ops, 300, 0);
            assert_eq!(held, out.final_blocks);
            assert!(
                out.routing.removed_events > 0,
                "the pools are small enough to evict"
            );
            assert_eq!(out.routing.requests, 120);
            assert!(
                out.routing.max_worker_requests >= 30 && out.routing.max_worker_requests <= 120,
                "the busiest of 4 workers serves at least a quarter: {}",
                out.routing.max_worker_requests
            );
            // One match query per request, in arrival order.
            let queries = out
                .ops
                .iter()
                .filter(|o| matches!(o.op, Op::Match(_)))
                .count();
            assert_eq!(queries, 120);
            // An exact index agrees: nothing rejected, nothing unknown, same blocks held.
            check_reference(&out.ops, out.final_blocks);
        }
    }

    /// `config` with a host tier of `host` blocks per worker.
    fn with_host(policy: Policy, router_index: RouterIndex, host: usize) -> SimConfig {
        SimConfig {
            host_blocks_per_worker: host,
            ..config(policy, router_index)
        }
    }

    #[test]
    fn with_a_host_tier_every_policy_publishes_a_valid_stream() {
        // GPU pools of 300 blocks, host pools of 200 and of 2,000 (host evictions, and
        // host memory that keeps most offloads); the first stays below the 300 GPU blocks so
        // that host evictions are frequent.
        let trace = sample(120);
        for host in [200, 2000] {
            for policy in Policy::simulated(true) {
                let out = simulate(&trace, &with_host(policy, RouterIndex::Oracle, host));
                let held = check_stream(&out.ops, 300, host);
                assert_eq!(held, out.final_blocks, "{} host {host}", policy.name());
                // The reference model (and so every exact backend) takes the stream as it is.
                check_reference(&out.ops, out.final_blocks);
                let r = out.routing;
                assert!(
                    r.offloaded > 0,
                    "{}: GPU evictions reach host memory",
                    policy.name()
                );
                assert!(r.hit_blocks >= r.host_hit_blocks);
                assert_eq!(r.requests, 120);
            }
        }
    }

    #[test]
    fn offloads_store_on_host_before_the_device_removal() {
        let out = simulate(
            &sample(120),
            &with_host(Policy::KvCost, RouterIndex::Oracle, 200),
        );
        let events: Vec<&Event> = out
            .ops
            .iter()
            .filter_map(|o| match &o.op {
                Op::Event(e) => Some(e),
                Op::Match(_) => None,
            })
            .collect();
        let (mut offloads, mut host_evictions) = (0, 0);
        for (i, e) in events.iter().enumerate() {
            match &e.data {
                EventData::Stored {
                    blocks,
                    tier: kvidx::Tier::Host,
                    ..
                } => {
                    // The next event of the worker removes the same block from the device.
                    let next = events[i + 1];
                    assert_eq!((next.worker, next.event_id), (e.worker, e.event_id + 1));
                    assert_eq!(
                        next.data,
                        EventData::Removed {
                            seq_hashes: vec![blocks[0].seq_hash],
                            tier: Some(kvidx::Tier::Device),
                        }
                    );
                    offloads += 1;
                }
                EventData::Removed {
                    tier: Some(kvidx::Tier::Host),
                    ..
                } => host_evictions += 1,
                EventData::Removed { tier: None, .. } => {
                    panic!("with a host tier every removal names its tier")
                }
                _ => {}
            }
        }
        assert_eq!(offloads, out.routing.offloaded);
        assert!(host_evictions > 0, "the host pools evict");
    }

    #[test]
    fn a_host_tier_adds_host_hits_and_tiered_routing_through_the_index_matches_the_oracle() {
        // Conversations come back to their prefix after a few hundred requests.
        let trace = sample(400);
        let single = simulate(&trace, &config(Policy::KvCost, RouterIndex::Oracle));
        let tiered = simulate(
            &trace,
            &with_host(Policy::KvCost, RouterIndex::Oracle, 2000),
        );
        let r = tiered.routing;
        assert!(r.host_hit_blocks > 0, "prefixes are found in host memory");
        assert_eq!(r.device_hit_blocks() + r.host_hit_blocks, r.hit_blocks);
        assert!(
            r.hit_rate() > single.routing.hit_rate(),
            "host memory keeps what the GPU evicts: {} vs {}",
            r.hit_rate(),
            single.routing.hit_rate()
        );
        assert_eq!(single.routing.host_hit_blocks, 0);
        // The index's (tiered) answers equal the pools' own: same routing.
        for policy in [Policy::KvAware, Policy::KvCost, Policy::KvCostTiered] {
            let oracle = simulate(&trace, &with_host(policy, RouterIndex::Oracle, 300));
            for index in [RouterIndex::Positional, RouterIndex::Radix] {
                let b = simulate(&trace, &with_host(policy, index, 300));
                assert_eq!(oracle.ops, b.ops, "{} {index:?}", policy.name());
            }
        }
        // And the exact backends answer the tiered queries as the reference model does.
        use crate::target::Subject;
        let a = crate::agree::check(
            &tiered.ops,
            &[Subject::Reference, Subject::Positional, Subject::Radix],
        )
        .unwrap();
        assert_eq!(a.differ, vec![("positional", 0), ("radix", 0)]);
        assert_eq!(a.differ_tiered, vec![("positional", 0), ("radix", 0)]);
    }

    #[test]
    fn tier_aware_routing_is_tier_blind_routing_when_tiers_cannot_matter() {
        let trace = sample(400);
        let blind = |host| {
            simulate(
                &trace,
                &with_host(Policy::KvCost, RouterIndex::Oracle, host),
            )
        };
        let aware = |host, host_weight| {
            let cfg = SimConfig {
                host_weight,
                ..with_host(Policy::KvCostTiered, RouterIndex::Oracle, host)
            };
            simulate(&trace, &cfg)
        };
        // No host tier: every block is on the GPU, the score is the depth.
        assert_eq!(blind(0).ops, aware(0, 0.8).ops);
        // A host block worth a GPU block: the score is the depth again.
        assert_eq!(blind(2000).ops, aware(2000, 1.0).ops);
        // Worth less than a GPU block (the default 0.8): a prefix in host memory attracts
        // requests less, and some go elsewhere.
        let (b, a) = (blind(2000), aware(2000, 0.8));
        assert!(b.routing.host_hit_blocks > 0);
        assert_ne!(b.choices, a.choices);
    }

    #[test]
    fn per_worker_hashes_with_a_host_tier_keep_the_stream_valid() {
        let trace = sample(60);
        let cfg = SimConfig {
            engine_hash: EngineHash::PerWorker,
            ..with_host(Policy::KvCost, RouterIndex::Positional, 200)
        };
        let salted = simulate(&trace, &cfg);
        let shared = simulate(
            &trace,
            &SimConfig {
                engine_hash: EngineHash::Shared,
                ..cfg
            },
        );
        assert_eq!(shared.routing, salted.routing);
        assert!(salted.routing.offloaded > 0);
        renaming(&shared.ops, &salted.ops);
        assert_eq!(check_stream(&salted.ops, 300, 200), salted.final_blocks);
        check_reference(&salted.ops, salted.final_blocks);
    }

    #[test]
    fn kv_aware_routing_through_the_index_matches_the_oracle() {
        let trace = sample(60);
        let a = simulate(&trace, &config(Policy::KvAware, RouterIndex::Oracle));
        let b = simulate(&trace, &config(Policy::KvAware, RouterIndex::Positional));
        let c = simulate(&trace, &config(Policy::KvAware, RouterIndex::Radix));
        assert_eq!(a.ops, b.ops);
        assert_eq!(a.ops, c.ops);
        let a = simulate(&trace, &config(Policy::KvCost, RouterIndex::Oracle));
        let b = simulate(&trace, &config(Policy::KvCost, RouterIndex::Positional));
        assert_eq!(a.ops, b.ops);
    }

    #[test]
    fn kv_aware_routing_hits_more_than_blind_policies() {
        // Pools big enough to keep conversations across turns, small enough to evict.
        let trace = sample(400);
        let cfg = SimConfig {
            blocks_per_worker: 2000,
            length_factor: 1,
            ..config(Policy::Random, RouterIndex::Oracle)
        };
        let rate = |policy| {
            simulate(&trace, &SimConfig { policy, ..cfg })
                .routing
                .hit_rate()
        };
        let (kv, rr, rnd) = (
            rate(Policy::KvCost),
            rate(Policy::RoundRobin),
            rate(Policy::Random),
        );
        assert!(kv > rr && kv > rnd, "kv-cost {kv} rr {rr} random {rnd}");
    }

    #[test]
    fn runs_are_reproducible_and_duplication_scales_requests() {
        let trace = sample(30);
        let cfg = config(Policy::Random, RouterIndex::Oracle);
        assert_eq!(simulate(&trace, &cfg).ops, simulate(&trace, &cfg).ops);
        let dup = simulate(
            &trace,
            &SimConfig {
                duplication: 3,
                ..cfg
            },
        );
        assert_eq!(dup.routing.requests, 90);
        assert_eq!(
            dup.routing.prompt_blocks,
            3 * simulate(&trace, &cfg).routing.prompt_blocks
        );
    }

    /// The shared name -> published name map of each worker's blocks, checking that the two
    /// workloads are the same run: same operations, workers, event ids and local hashes, in
    /// the same order, only sequence hashes renamed (one published name per shared name and
    /// worker, one shared name per published name).
    fn renaming(shared: &[TimedOp], salted: &[TimedOp]) -> HashMap<(Worker, u64), u64> {
        assert_eq!(shared.len(), salted.len());
        let mut map: HashMap<(Worker, u64), u64> = HashMap::new();
        let mut back: HashMap<(Worker, u64), u64> = HashMap::new();
        let mut pair = |w: Worker, a: u64, b: u64| {
            assert_eq!(*map.entry((w, a)).or_insert(b), b, "one name per block");
            assert_eq!(*back.entry((w, b)).or_insert(a), a, "one block per name");
        };
        for (a, b) in shared.iter().zip(salted) {
            assert_eq!(a.t, b.t);
            match (&a.op, &b.op) {
                (Op::Match(x), Op::Match(y)) => assert_eq!(x, y, "queries unchanged"),
                (Op::Event(x), Op::Event(y)) => {
                    assert_eq!((x.worker, x.event_id), (y.worker, y.event_id));
                    let w = x.worker;
                    match (&x.data, &y.data) {
                        (
                            EventData::Stored {
                                parent: pa,
                                blocks: ba,
                                ..
                            },
                            EventData::Stored {
                                parent: pb,
                                blocks: bb,
                                ..
                            },
                        ) => {
                            assert_eq!(pa.is_some(), pb.is_some());
                            if let (Some(pa), Some(pb)) = (pa, pb) {
                                pair(w, *pa, *pb);
                            }
                            assert_eq!(ba.len(), bb.len());
                            for (ka, kb) in ba.iter().zip(bb) {
                                assert_eq!(ka.local_hash, kb.local_hash, "local hashes unchanged");
                                pair(w, ka.seq_hash, kb.seq_hash);
                            }
                        }
                        (
                            EventData::Removed { seq_hashes: ra, .. },
                            EventData::Removed { seq_hashes: rb, .. },
                        ) => {
                            assert_eq!(ra.len(), rb.len());
                            for (na, nb) in ra.iter().zip(rb) {
                                pair(w, *na, *nb);
                            }
                        }
                        (x, y) => panic!("different events: {x:?} / {y:?}"),
                    }
                }
                (x, y) => panic!("different operations: {x:?} / {y:?}"),
            }
        }
        map
    }

    /// Every (worker, published name) pair of the workload's Stored events.
    fn stored_names(ops: &[TimedOp]) -> HashMap<u64, HashSet<Worker>> {
        let mut by_name: HashMap<u64, HashSet<Worker>> = HashMap::new();
        for op in ops {
            if let Op::Event(e) = &op.op {
                if let EventData::Stored { blocks, .. } = &e.data {
                    for b in blocks {
                        by_name.entry(b.seq_hash).or_default().insert(e.worker);
                    }
                }
            }
        }
        by_name
    }

    #[test]
    fn per_worker_engine_hashes_rename_blocks_per_worker_and_keep_the_stream_valid() {
        // Deep chains (length factor 32) on pools small enough to evict mid-conversation; the
        // router reads a kvidx index fed the published (salted) events.
        let trace = sample(60);
        let cfg = SimConfig {
            blocks_per_worker: 1500,
            length_factor: 32,
            ..config(Policy::KvCost, RouterIndex::Positional)
        };
        let shared = simulate(&trace, &cfg);
        let salted = simulate(
            &trace,
            &SimConfig {
                engine_hash: EngineHash::PerWorker,
                ..cfg
            },
        );
        // The same run (same routing, evictions, queries), only the names differ, and
        // consistently: a block has one published name for as long as its worker holds it.
        assert_eq!(shared.routing, salted.routing);
        assert_eq!(shared.final_blocks, salted.final_blocks);
        assert!(shared.routing.removed_events > 1000, "the pools evict");
        let map = renaming(&shared.ops, &salted.ops);
        assert!(map.iter().all(|((_, a), b)| a != b), "every name is salted");
        // The same prefix block, held by several workers: one name with shared hashes, a
        // different name on every worker with salted ones.
        let (by_shared, by_salted) = (stored_names(&shared.ops), stored_names(&salted.ops));
        // (Every request of the trace starts with the same hash id: at least its 32 blocks.)
        let on_many = by_shared.values().filter(|w| w.len() > 1).count();
        assert!(on_many >= 32, "prefixes shared by workers: {on_many}");
        assert!(
            by_salted.values().all(|w| w.len() == 1),
            "no salted name is published by two workers"
        );
        let first = map
            .iter()
            .filter(|((_, a), _)| by_shared[a].len() > 1)
            .map(|((w, a), b)| (*a, (*w, *b)))
            .fold(
                HashMap::<u64, Vec<(Worker, u64)>>::new(),
                |mut m, (a, wb)| {
                    m.entry(a).or_default().push(wb);
                    m
                },
            );
        for (name, per_worker) in &first {
            let distinct: HashSet<u64> = per_worker.iter().map(|(_, b)| *b).collect();
            assert_eq!(distinct.len(), per_worker.len(), "shared name {name}");
        }
        // Valid for an index: parents held, removals of held blocks only, capacity kept.
        assert_eq!(check_stream(&salted.ops, 1500, 0), salted.final_blocks);
        check_reference(&salted.ops, salted.final_blocks);
        // The exact backends answer every query as the reference model does, and as they do
        // on the shared-hash run: names are opaque to them.
        use crate::target::Subject;
        let a = crate::agree::check(
            &salted.ops,
            &[Subject::Reference, Subject::Positional, Subject::Radix],
        )
        .unwrap();
        assert_eq!(a.queries, 60);
        assert_eq!(a.differ, vec![("positional", 0), ("radix", 0)]);
        let answers = |ops: &[TimedOp]| {
            let index = Subject::Positional.indexer(0);
            let mut all = Vec::new();
            for op in ops {
                match &op.op {
                    Op::Event(e) => index.apply_event(e.clone()).unwrap(),
                    Op::Match(q) => all.push(index.find_matches(q)),
                }
            }
            all
        };
        let (want, got) = (answers(&shared.ops), answers(&salted.ops));
        assert!(
            want.iter().filter(|m| !m.is_empty()).count() > 30,
            "most queries find a cached prefix"
        );
        assert_eq!(want, got);
    }

    /// A digest of a workload file's bytes (XXH3 of the hashing contract, so it is stable).
    fn digest(bytes: &[u8]) -> u64 {
        let words: Vec<u32> = bytes
            .chunks(4)
            .map(|c| {
                let mut w = [0u8; 4];
                w[..c.len()].copy_from_slice(c);
                u32::from_le_bytes(w)
            })
            .collect();
        kvidx::hashing::local_hash(&words) ^ bytes.len() as u64
    }

    #[test]
    fn the_default_shared_hashes_write_the_same_workload_as_before() {
        // `generate --quick --workers 8 --blocks-per-worker 1024 --length-factor 8` (seed 42,
        // kv-cost, positional router index): the digest of the file the tool wrote before
        // `--engine-hash` existed (commit 7502a7d).
        let cfg = SimConfig {
            workers: 8,
            blocks_per_worker: 1024,
            length_factor: 8,
            duplication: 1,
            seed: 42,
            policy: Policy::KvCost,
            router_index: RouterIndex::Positional,
            decode_ms_per_token: 20.0,
            engine_hash: EngineHash::default(),
            host_blocks_per_worker: 0,
            host_weight: 0.8,
            view: View::EventsOnly,
            event_delay_ms: 0,
            predict_ttl_ms: 1000,
            event_free_ttl: DEFAULT_EVENT_FREE_TTL,
        };
        let out = simulate(&sample(400), &cfg);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.jsonl");
        crate::workload::write_workload(&path, &out.ops).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(out.ops.len(), 71070);
        assert_eq!(
            digest(&bytes),
            0xcc4a_98b3_3403_9323,
            "{:#x}",
            digest(&bytes)
        );
    }

    /// `n` requests for the same 4-id prompt, `gap_ms` apart, each ending as it starts (no
    /// output), so load never matters and only the cached prefix does.
    fn same_prompt(n: u64, gap_ms: u64) -> Vec<Request> {
        (0..n)
            .map(|i| Request {
                timestamp: i * gap_ms,
                input_length: 4 * 512,
                output_length: 0,
                hash_ids: vec![0, 1, 2, 3],
            })
            .collect()
    }

    /// `config` routing kv-cost under `view` with `delay` ms of event delay.
    fn viewing(view: View, delay: u64) -> SimConfig {
        SimConfig {
            view,
            event_delay_ms: delay,
            ..config(Policy::KvCost, RouterIndex::Positional)
        }
    }

    #[test]
    fn events_reach_the_router_only_after_the_delay() {
        // 8 requests 1 ms apart: every event arrives within them without a delay, none
        // before the last with 50 ms.
        let trace = same_prompt(8, 1);
        let prompt = 8 * 4 * 2;
        let hits = |view, delay| simulate(&trace, &viewing(view, delay)).routing.hit_blocks;
        // Without a delay, the router sees the first request's blocks: the rest hit fully.
        assert_eq!(hits(View::EventsOnly, 0), prompt - 8);
        // With 50 ms it routes the burst blind (ties at random among 4 workers): at most
        // 4 workers miss, so some requests hit, but far from all.
        let late = hits(View::EventsOnly, 50);
        assert!(late < prompt - 8, "blind routing misses: {late}");
        // The oracle reads the pools: the delay does not matter to it.
        assert_eq!(hits(View::Oracle, 0), prompt - 8);
        assert_eq!(hits(View::Oracle, 50), prompt - 8);
        // Requests 100 ms apart: the events arrive in time even with 50 ms.
        let spaced = same_prompt(8, 100);
        let r = simulate(&spaced, &viewing(View::EventsOnly, 50)).routing;
        assert_eq!(r.hit_blocks, prompt - 8);
        // 8 blocks of 256 tokens prefilled: the first request's.
        assert_eq!(r.prefill_tokens, 8 * 256);
    }

    #[test]
    fn predictions_keep_a_burst_together_before_its_events_arrive() {
        let trace = same_prompt(8, 1);
        let prompt = 8 * 4 * 2;
        for view in [View::EventsPredictions, View::PredictionsOnly] {
            for delay in [0, 50, 500] {
                let r = simulate(&trace, &viewing(view, delay)).routing;
                assert_eq!(r.hit_blocks, prompt - 8, "{view:?} at {delay} ms");
                assert_eq!(r.max_worker_requests, 8, "{view:?}: one worker");
            }
        }
    }

    #[test]
    fn the_event_free_view_forgets_a_worker_s_blocks_after_its_ttl() {
        // Two requests 200 ms apart: within the event-free TTL the second goes where the
        // first went and hits; beyond it the prediction is gone and it routes blind.
        let trace = same_prompt(2, 200);
        let run = |ttl| {
            let cfg = SimConfig {
                event_free_ttl: Ttl::Millis(ttl),
                ..viewing(View::PredictionsOnly, 50)
            };
            simulate(&trace, &cfg).routing
        };
        assert_eq!(run(201).hit_blocks, 8, "a prediction counts within its TTL");
        // Expired: the second request is routed blind, among 4 idle workers.
        let expired = run(200);
        assert_eq!(expired.requests, 2);
        let blind = simulate(&trace, &viewing(View::EventsOnly, 500)).routing;
        assert_eq!(expired, blind, "as a router that knows nothing");
    }

    /// `n` conversations of `turns` turns, a turn every `gap_ms` (conversation `c`'s `c` ms
    /// later): each turn's prompt is its conversation's previous prompt and 2 ids more, no
    /// conversation shares an id with another, and no turn has output, so load never matters.
    fn conversations(n: u64, turns: u64, gap_ms: u64) -> Vec<Request> {
        let mut trace: Vec<Request> = (0..turns)
            .flat_map(|turn| {
                (0..n).map(move |c| Request {
                    timestamp: turn * gap_ms + c,
                    input_length: (turn + 1) * 2 * 512,
                    output_length: 0,
                    hash_ids: (0..(turn + 1) * 2).map(|id| c * 100 + id).collect(),
                })
            })
            .collect();
        trace.sort_by_key(|r| r.timestamp);
        trace
    }

    #[test]
    fn the_event_free_default_keeps_conversations_whose_turns_pause_beyond_two_minutes() {
        // 4 conversations of 5 turns, 5 minutes apart; each engine's 300 blocks keep all of
        // them. Each turn after the first can hit its previous prompt: (2 + 4 + 6 + 8) ids x
        // 2 blocks, per conversation.
        let trace = conversations(4, 5, 300_000);
        let all = 4 * (2 + 4 + 6 + 8) * 2;
        let hits = |cfg: SimConfig| simulate(&trace, &cfg).routing.hit_blocks;
        assert_eq!(hits(viewing(View::Oracle, 50)), all);
        assert_eq!(hits(viewing(View::EventsOnly, 50)), all);
        // Event-free with the default TTL: the capacity, not the TTL, decides what the router
        // forgets, and here the engines forget nothing.
        assert_eq!(
            config(Policy::KvCost, RouterIndex::Positional).event_free_ttl,
            DEFAULT_EVENT_FREE_TTL
        );
        let event_free = |ttl| SimConfig {
            event_free_ttl: ttl,
            ..viewing(View::PredictionsOnly, 50)
        };
        assert_eq!(hits(event_free(DEFAULT_EVENT_FREE_TTL)), all);
        assert_eq!(hits(event_free(Ttl::Unbounded)), all);
        // A 2-minute TTL forgets each prefix before its next turn: routed blind (ties at
        // random among 4 idle workers), turns miss.
        let two_minutes = hits(event_free(Ttl::Millis(120_000)));
        assert!(two_minutes < all, "{two_minutes} of {all}");
    }

    #[test]
    fn the_delay_changes_what_the_router_sees_not_what_the_engines_publish() {
        // The oracle routes the same at any delay, so the published workload is the same.
        let trace = sample(120);
        let at = |delay| simulate(&trace, &viewing(View::Oracle, delay));
        let (a, b) = (at(0), at(500));
        assert_eq!(a.ops, b.ops);
        assert_eq!(a.routing, b.routing);
        // Through the index, a delay of 0 is the oracle's routing (the index is exact).
        let c = simulate(&trace, &viewing(View::EventsOnly, 0));
        assert_eq!(a.choices, c.choices);
    }

    #[test]
    fn generated_workload_round_trips_through_a_file() {
        let out = simulate(&sample(40), &config(Policy::KvAware, RouterIndex::Oracle));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.jsonl");
        crate::workload::write_workload(&path, &out.ops).unwrap();
        assert_eq!(crate::workload::read_workload(&path).unwrap(), out.ops);
    }
}
