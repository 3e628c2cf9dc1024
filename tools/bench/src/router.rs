//! The router of the mock fleet: a policy picks the worker for each request, reading
//! overlaps from a kvidx index fed with the published events (or from the pools themselves).

use std::cmp::Reverse;

use std::time::Duration;

use kvidx::{
    BackendKind, Block, Clock, Config, Event, Indexer, Match, PredictedMatch, PredictionConfig,
    TieredMatch, Worker, TIERS,
};

use crate::block_pool::BlockPool;
use crate::rng::Rng;
use crate::sim::SimConfig;

/// How the router picks a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Policy {
    /// Uniformly at random.
    Random,
    /// Each worker in turn.
    RoundRobin,
    /// The worker with the deepest cached prefix (from the index); ties go to the least
    /// loaded (fewest running requests), then at random.
    KvAware,
    /// The worker with the least work, counted in blocks: prompt blocks it would have to
    /// compute (prompt minus overlap from the index) plus blocks its running requests hold;
    /// ties at random. A cost model in the style of Dynamo's router (overlap weight 1).
    /// Tier-blind: a prefix block in host memory counts as one on the GPU.
    KvCost,
    /// `kv-cost` made tier-aware: the overlap is the index's tiered score
    /// ([`TieredMatch::score`]), each prefix block weighted by its fastest tier (GPU 1, host
    /// `--host-weight`), so a block to reload from host memory costs `1 - weight` of a block
    /// to compute. Routes as `kv-cost` when no block is off the GPU.
    KvCostTiered,
}

impl Policy {
    /// Every tier-blind policy, in report order: what the main job simulates without a host
    /// tier.
    pub const ALL: [Policy; 4] = [
        Policy::Random,
        Policy::RoundRobin,
        Policy::KvAware,
        Policy::KvCost,
    ];

    /// The policies the main job simulates: [`Policy::ALL`], and the tier-aware
    /// `kv-cost-tiered` too when the workers have a host tier.
    pub fn simulated(host_tier: bool) -> Vec<Policy> {
        let mut all = Policy::ALL.to_vec();
        if host_tier {
            all.push(Policy::KvCostTiered);
        }
        all
    }

    /// The policy's command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Random => "random",
            Policy::RoundRobin => "round-robin",
            Policy::KvAware => "kv-aware",
            Policy::KvCost => "kv-cost",
            Policy::KvCostTiered => "kv-cost-tiered",
        }
    }

    /// Whether the policy reads overlaps from the router's index.
    fn reads_overlaps(self) -> bool {
        matches!(
            self,
            Policy::KvAware | Policy::KvCost | Policy::KvCostTiered
        )
    }
}

/// What the kv policies know of the engines' caches when they route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum View {
    /// The published events, as they arrive: `--event-delay-ms` after the engine caches the
    /// blocks.
    EventsOnly,
    /// The events as they arrive, and a prediction of each routed request's prompt on its
    /// worker (`--predict-ttl-ms`): a worker's overlap is its predicted depth, the larger of
    /// what the events confirm and what was predicted and not yet settled or expired.
    EventsPredictions,
    /// Predictions only, no events (an event-free fleet): each routed request's prompt is
    /// predicted on its worker for `--event-free-ttl-ms`, at most `--blocks-per-worker`
    /// predicted blocks per worker (least recently routed dropped first).
    PredictionsOnly,
    /// Perfect knowledge: the pools themselves at the moment of routing (no index, no delay).
    Oracle,
}

impl View {
    /// Every view, in report order.
    pub const ALL: [View; 4] = [
        View::EventsOnly,
        View::EventsPredictions,
        View::PredictionsOnly,
        View::Oracle,
    ];

    /// The view's command-line name.
    pub fn name(self) -> &'static str {
        match self {
            View::EventsOnly => "events-only",
            View::EventsPredictions => "events+predictions",
            View::PredictionsOnly => "predictions-only",
            View::Oracle => "oracle",
        }
    }

    /// Whether the router's index is fed the published events.
    pub fn reads_events(self) -> bool {
        matches!(self, View::EventsOnly | View::EventsPredictions)
    }

    /// Whether the router records a prediction of each request's blocks on its worker.
    pub fn predicts(self) -> bool {
        matches!(self, View::EventsPredictions | View::PredictionsOnly)
    }
}

/// Where the kv-aware router reads overlaps from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RouterIndex {
    /// A kvidx indexer (positional backend, synchronous) fed with the published events.
    Positional,
    /// A kvidx indexer (radix backend, synchronous) fed with the published events.
    Radix,
    /// The pools' own prefix hits: what an exact index answers, without an index.
    Oracle,
}

/// Tier weights of the tier-aware policy: GPU 1, host `host_weight`, slower tiers 0 (the
/// mock engine has none).
pub(crate) fn tier_weights(host_weight: f64) -> [f64; TIERS] {
    [1.0, host_weight, 0.0, 0.0]
}

/// A tier-aware overlap score in millionths of a block, so that scores compare (and tie)
/// exactly as integers.
fn micro_blocks(score: f64) -> u64 {
    (score * 1e6).round() as u64
}

/// `m`'s tier-aware score in millionths of a block.
fn micro_score(m: &TieredMatch, weights: &[f64; TIERS]) -> u64 {
    micro_blocks(
        m.score(weights)
            .expect("a lookup's answer and weights within 0..=1 always score"),
    )
}

/// The router: a policy and, for kv-aware routing, the index it reads.
pub(crate) struct Router {
    policy: Policy,
    view: View,
    /// How long a prediction lasts (views that predict).
    predict_ttl: Duration,
    predicted: Vec<PredictedMatch>,
    rng: Rng,
    next: usize,
    index: Option<Indexer>,
    matches: Vec<Match>,
    tiered: Vec<TieredMatch>,
    depths: Vec<u32>,
    /// Per worker, the tier-aware overlap in millionths of a block (`kv-cost-tiered`).
    scores: Vec<u64>,
    weights: [f64; TIERS],
}

impl Router {
    pub(crate) fn new(cfg: &SimConfig) -> Self {
        let backend = match cfg.router_index {
            RouterIndex::Positional => Some(BackendKind::Positional),
            RouterIndex::Radix => Some(BackendKind::Radix),
            RouterIndex::Oracle => None,
        };
        let backend = if cfg.view == View::Oracle {
            None
        } else {
            backend
        };
        let uses_index = cfg.policy.reads_overlaps();
        let index = match (uses_index, backend) {
            (true, Some(backend)) => Some(
                Indexer::new(Config {
                    backend,
                    event_threads: 0,
                    predictions: PredictionConfig {
                        // The event-free indexer approximates each engine's cache.
                        worker_capacity: if cfg.view == View::PredictionsOnly {
                            cfg.blocks_per_worker
                        } else {
                            0
                        },
                        // Predictions expire on the trace's clock.
                        clock: Clock::Manual,
                        ..PredictionConfig::default()
                    },
                    ..Config::default()
                })
                .expect("a synchronous indexer always builds"),
            ),
            _ => None,
        };
        let predict_ttl = match cfg.view {
            View::PredictionsOnly => cfg.event_free_ttl.duration(),
            _ => Duration::from_millis(cfg.predict_ttl_ms),
        };
        Self {
            policy: cfg.policy,
            view: cfg.view,
            predict_ttl,
            predicted: Vec::new(),
            rng: Rng::new(cfg.seed),
            next: 0,
            index,
            matches: Vec::new(),
            tiered: Vec::new(),
            depths: vec![0; cfg.workers],
            scores: vec![0; cfg.workers],
            weights: tier_weights(cfg.host_weight),
        }
    }

    /// Feeds a published event, once it arrives, to the router's index (if the view reads
    /// events).
    pub(crate) fn observe(&self, event: &Event) {
        if !self.view.reads_events() {
            return;
        }
        if let Some(index) = &self.index {
            index
                .apply_event(event.clone())
                .expect("the mock engine publishes only valid events");
        }
    }

    /// Moves the router's clock to time `t` (ms of the trace) before it routes: predictions
    /// expire by it.
    pub(crate) fn at(&self, t: u64) {
        if let (true, Some(index)) = (self.view.predicts(), &self.index) {
            index
                .set_time(Duration::from_millis(t))
                .expect("a manual clock, moved forward");
        }
    }

    /// Records that `prompt` was routed to `worker` (views that predict): the worker is
    /// credited with its blocks for the prediction's time to live.
    pub(crate) fn routed(&self, worker: usize, prompt: &[Block]) {
        if let (true, Some(index)) = (self.view.predicts(), &self.index) {
            let locals: Vec<u64> = prompt.iter().map(|b| b.local_hash).collect();
            index
                .predict(Worker::new(worker as u64, 0), &locals, self.predict_ttl)
                .expect("predictions are never refused");
        }
    }

    /// Fills `self.depths` with each worker's cached prefix of `prompt` (on any tier); with
    /// predictions, its predicted depth.
    fn overlaps(&mut self, prompt: &[Block], pools: &[BlockPool]) {
        self.depths.iter_mut().for_each(|d| *d = 0);
        match &self.index {
            Some(index) if self.view.predicts() => {
                let locals: Vec<u64> = prompt.iter().map(|b| b.local_hash).collect();
                index.find_matches_predicted_into(&locals, &mut self.predicted);
                for m in &self.predicted {
                    self.depths[m.worker_id as usize] = m.predicted_depth;
                }
            }
            Some(index) => {
                let locals: Vec<u64> = prompt.iter().map(|b| b.local_hash).collect();
                index.find_matches_into(&locals, &mut self.matches);
                for m in &self.matches {
                    self.depths[m.worker_id as usize] = m.depth;
                }
            }
            None => {
                for (d, pool) in self.depths.iter_mut().zip(pools) {
                    *d = pool.tier_depths(prompt).1 as u32;
                }
            }
        }
    }

    /// Fills `self.scores` with each worker's tier-aware overlap of `prompt`: the tiered
    /// match's score, from the index's `find_matches_tiered` (or the pools' own tier depths).
    fn tiered_overlaps(&mut self, prompt: &[Block], pools: &[BlockPool]) {
        self.scores.iter_mut().for_each(|s| *s = 0);
        match &self.index {
            Some(index) => {
                let locals: Vec<u64> = prompt.iter().map(|b| b.local_hash).collect();
                index.find_matches_tiered_into(&locals, &mut self.tiered);
                for m in &self.tiered {
                    self.scores[m.worker_id as usize] = micro_score(m, &self.weights);
                }
            }
            None => {
                for (w, pool) in pools.iter().enumerate() {
                    let m = oracle_match(w, pool.tier_depths(prompt));
                    self.scores[w] = micro_score(&m, &self.weights);
                }
            }
        }
    }

    /// A worker with the largest key, ties at random.
    fn best_by<K: Ord + Copy>(&mut self, n: usize, key: impl Fn(usize) -> K) -> usize {
        let best = (0..n).map(&key).max().expect("at least one worker");
        let ties: Vec<usize> = (0..n).filter(|&w| key(w) == best).collect();
        ties[self.rng.below(ties.len())]
    }

    pub(crate) fn choose(&mut self, prompt: &[Block], pools: &[BlockPool], load: &[Load]) -> usize {
        let n = pools.len();
        match self.policy {
            Policy::Random => self.rng.below(n),
            Policy::RoundRobin => {
                let w = self.next;
                self.next = (self.next + 1) % n;
                w
            }
            Policy::KvAware => {
                self.overlaps(prompt, pools);
                let depths = std::mem::take(&mut self.depths);
                let w = self.best_by(n, |w| (depths[w], Reverse(load[w].requests)));
                self.depths = depths;
                w
            }
            Policy::KvCost => {
                self.overlaps(prompt, pools);
                let depths = std::mem::take(&mut self.depths);
                let len = prompt.len() as u64;
                let w = self.best_by(n, |w| {
                    Reverse(len - u64::from(depths[w]).min(len) + load[w].blocks)
                });
                self.depths = depths;
                w
            }
            Policy::KvCostTiered => {
                self.tiered_overlaps(prompt, pools);
                let scores = std::mem::take(&mut self.scores);
                let len = micro_blocks(prompt.len() as f64);
                let w = self.best_by(n, |w| {
                    Reverse(len - scores[w].min(len) + micro_blocks(load[w].blocks as f64))
                });
                self.scores = scores;
                w
            }
        }
    }
}

/// The tiered match an exact index reports for a worker whose pool holds the prompt's first
/// `device` blocks on the GPU and its first `any` on the GPU or in host memory.
fn oracle_match(worker: usize, (device, any): (usize, usize)) -> TieredMatch {
    let any = any as u32;
    TieredMatch {
        worker_id: worker as u64,
        dp_rank: 0,
        depth: any,
        tier_depths: [device as u32, any, any, any],
    }
}

/// What a worker is running.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Load {
    /// Running requests.
    pub(crate) requests: u32,
    /// Blocks the running requests hold.
    pub(crate) blocks: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::EngineHash;
    use crate::ttl::{Ttl, DEFAULT_EVENT_FREE_TTL};
    use kvidx::Worker;

    fn chain(tag: u64, n: u64) -> Vec<Block> {
        (0..n)
            .map(|i| Block::new(tag * 100 + i, tag * 1000 + i))
            .collect()
    }

    fn names(chain: &[Block]) -> Vec<u64> {
        chain.iter().map(|b| b.seq_hash).collect()
    }

    /// Worker 0 holds the prompt's first 6 blocks on the GPU; worker 1 its first 7, all in
    /// host memory (evicted from its GPU by another chain). Returns the pools and the events
    /// they published.
    fn fleet(prompt: &[Block]) -> (Vec<BlockPool>, Vec<Event>) {
        let mut events = Vec::new();
        let mut gpu = BlockPool::with_host(Worker::new(0, 0), 8, 8);
        gpu.acquire(None, &prompt[..6], &mut events);
        gpu.release(&names(&prompt[..6]));
        let mut host = BlockPool::with_host(Worker::new(1, 0), 7, 8);
        host.acquire(None, &prompt[..7], &mut events);
        host.release(&names(&prompt[..7]));
        let other = chain(2, 7);
        host.acquire(None, &other, &mut events);
        host.release(&names(&other));
        assert_eq!(gpu.tier_depths(prompt), (6, 6));
        assert_eq!(host.tier_depths(prompt), (0, 7));
        (vec![gpu, host], events)
    }

    fn router(policy: Policy, router_index: RouterIndex) -> Router {
        Router::new(&router_config(policy, router_index))
    }

    fn router_config(policy: Policy, router_index: RouterIndex) -> SimConfig {
        SimConfig {
            workers: 2,
            blocks_per_worker: 8,
            length_factor: 1,
            duplication: 1,
            seed: 1,
            policy,
            router_index,
            decode_ms_per_token: 20.0,
            engine_hash: EngineHash::Shared,
            host_blocks_per_worker: 8,
            host_weight: 0.8,
            view: View::EventsOnly,
            event_delay_ms: 0,
            predict_ttl_ms: 1000,
            event_free_ttl: DEFAULT_EVENT_FREE_TTL,
        }
    }

    /// A kv-cost router over 2 workers of 64 blocks, under `view`, whose event-free
    /// predictions last 100 ms.
    fn viewing(view: View) -> Router {
        Router::new(&SimConfig {
            blocks_per_worker: 64,
            host_blocks_per_worker: 0,
            view,
            event_free_ttl: Ttl::Millis(100),
            predict_ttl_ms: 50,
            ..router_config(Policy::KvCost, RouterIndex::Positional)
        })
    }

    /// The depth each of the 2 workers has for `prompt` in `r`'s view.
    fn depths(r: &mut Router, prompt: &[Block]) -> Vec<u32> {
        let pools = [
            BlockPool::new(Worker::new(0, 0), 1),
            BlockPool::new(Worker::new(1, 0), 1),
        ];
        r.overlaps(prompt, &pools);
        r.depths.clone()
    }

    #[test]
    fn a_prediction_counts_for_its_worker_until_its_ttl() {
        let prompt = chain(1, 10);
        for (view, ttl) in [(View::PredictionsOnly, 100), (View::EventsPredictions, 50)] {
            let mut r = viewing(view);
            r.at(1000);
            r.routed(1, &prompt[..6]);
            assert_eq!(depths(&mut r, &prompt), [0, 6], "{view:?}");
            r.at(999 + ttl);
            assert_eq!(depths(&mut r, &prompt), [0, 6], "{view:?}: within its TTL");
            r.at(1000 + ttl);
            assert_eq!(depths(&mut r, &prompt), [0, 0], "{view:?}: expired at it");
        }
        // Events-only records nothing.
        let mut r = viewing(View::EventsOnly);
        r.routed(1, &prompt);
        assert_eq!(depths(&mut r, &prompt), [0, 0]);
    }

    #[test]
    fn the_event_free_view_ignores_events_and_the_others_read_them() {
        let prompt = chain(1, 10);
        let mut events = Vec::new();
        let mut pool = BlockPool::new(Worker::new(0, 0), 16);
        pool.acquire(None, &prompt[..4], &mut events);
        for (view, want) in [
            (View::EventsOnly, [4, 0]),
            (View::EventsPredictions, [4, 7]),
            (View::PredictionsOnly, [0, 7]),
        ] {
            let mut r = viewing(view);
            events.iter().for_each(|e| r.observe(e));
            r.routed(1, &prompt[..7]);
            assert_eq!(depths(&mut r, &prompt), want, "{view:?}");
        }
    }

    #[test]
    fn tier_aware_cost_prefers_a_shorter_prefix_on_the_gpu() {
        let prompt = chain(1, 10);
        let (pools, events) = fleet(&prompt);
        let load = [Load::default(); 2];
        for index in [
            RouterIndex::Oracle,
            RouterIndex::Positional,
            RouterIndex::Radix,
        ] {
            let choose = |policy| {
                let mut r = router(policy, index);
                events.iter().for_each(|e| r.observe(e));
                r.choose(&prompt, &pools, &load)
            };
            // Tier-blind: 10 - 7 = 3 blocks to compute on worker 1, 4 on worker 0.
            assert_eq!(choose(Policy::KvCost), 1, "{index:?}");
            assert_eq!(choose(Policy::KvAware), 1, "{index:?}");
            // Tier-aware: 7 host blocks score 5.6, so worker 1 costs 4.4 against 4.
            assert_eq!(choose(Policy::KvCostTiered), 0, "{index:?}");
        }
        assert_eq!(
            tier_weights(0.8),
            [1.0, 0.8, 0.0, 0.0],
            "GPU 1, host the flag"
        );
        assert_eq!(micro_blocks(5.6), 5_600_000);
    }
}
