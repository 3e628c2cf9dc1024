//! The router of the mock fleet: a policy picks the worker for each request, reading
//! overlaps from a kvidx index fed with the published events (or from the pools themselves).

use std::cmp::Reverse;

use kvidx::{BackendKind, Block, Config, Event, Indexer, Match};

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
    KvCost,
}

impl Policy {
    /// Every policy, in report order.
    pub const ALL: [Policy; 4] = [
        Policy::Random,
        Policy::RoundRobin,
        Policy::KvAware,
        Policy::KvCost,
    ];

    /// The policy's command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Random => "random",
            Policy::RoundRobin => "round-robin",
            Policy::KvAware => "kv-aware",
            Policy::KvCost => "kv-cost",
        }
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

/// The router: a policy and, for kv-aware routing, the index it reads.
pub(crate) struct Router {
    policy: Policy,
    rng: Rng,
    next: usize,
    index: Option<Indexer>,
    matches: Vec<Match>,
    depths: Vec<u32>,
}

impl Router {
    pub(crate) fn new(cfg: &SimConfig) -> Self {
        let backend = match cfg.router_index {
            RouterIndex::Positional => Some(BackendKind::Positional),
            RouterIndex::Radix => Some(BackendKind::Radix),
            RouterIndex::Oracle => None,
        };
        let uses_index = matches!(cfg.policy, Policy::KvAware | Policy::KvCost);
        let index = match (uses_index, backend) {
            (true, Some(backend)) => Some(
                Indexer::new(Config {
                    backend,
                    event_threads: 0,
                    ..Config::default()
                })
                .expect("a synchronous indexer always builds"),
            ),
            _ => None,
        };
        Self {
            policy: cfg.policy,
            rng: Rng::new(cfg.seed),
            next: 0,
            index,
            matches: Vec::new(),
            depths: vec![0; cfg.workers],
        }
    }

    /// Feeds a published event to the router's index.
    pub(crate) fn observe(&self, event: &Event) {
        if let Some(index) = &self.index {
            index
                .apply_event(event.clone())
                .expect("the mock engine publishes only valid events");
        }
    }

    /// Fills `self.depths` with each worker's cached prefix of `prompt`.
    fn overlaps(&mut self, prompt: &[Block], pools: &[BlockPool]) {
        self.depths.iter_mut().for_each(|d| *d = 0);
        match &self.index {
            Some(index) => {
                let locals: Vec<u64> = prompt.iter().map(|b| b.local_hash).collect();
                index.find_matches_into(&locals, &mut self.matches);
                for m in &self.matches {
                    self.depths[m.worker_id as usize] = m.depth;
                }
            }
            None => {
                for (d, pool) in self.depths.iter_mut().zip(pools) {
                    *d = pool.prefix_hits(prompt) as u32;
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
        }
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
