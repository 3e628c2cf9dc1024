package main

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	kvidx "github.com/kvidx/kvidx/bindings/go"
)

// workerKey names one engine rank.
type workerKey struct {
	ID     uint64
	DpRank uint32
}

func (a workerKey) compare(b workerKey) int {
	return cmp.Or(cmp.Compare(a.ID, b.ID), cmp.Compare(a.DpRank, b.DpRank))
}

// Limits bound what the router keeps. Every field must be positive.
type Limits struct {
	// MaxWorkers is the number of workers (id, dp rank) the router knows at once; events
	// naming a new worker beyond it are refused until workers are removed.
	MaxWorkers int
	// MaxNewWorkersPerRequest is the number of new workers one events request may register.
	MaxNewWorkersPerRequest int
	// MaxRoutes (at least 64) is the number of routed requests tracked as in flight; beyond
	// it the oldest ones are forgotten (their load released) as if they had expired. Routes
	// are kept in 64 shards of MaxRoutes/64 each: the oldest route of the shard is dropped.
	MaxRoutes int
	// RouteTTL is how long a routed request counts as in flight without DELETE /requests/{id}.
	RouteTTL time.Duration
}

// DefaultLimits are the limits of the command-line defaults.
func DefaultLimits() Limits {
	return Limits{MaxWorkers: 65536, MaxNewWorkersPerRequest: 1024, MaxRoutes: 1 << 20, RouteTTL: 10 * time.Minute}
}

// Errors of Router.Register.
var (
	errTooManyNewWorkers = errors.New("too many new workers in one request")
	errWorkerLimit       = errors.New("worker limit reached")
)

// numShards is the number of worker shards and of route shards. Route reads every worker
// shard's least-loaded worker under that shard's read lock, so no lock is held for more than
// a few map or heap operations and concurrent routes only meet on the shard they update.
const numShards = 64

// workerState is one known worker and its requests in flight.
type workerState struct {
	key      workerKey
	inflight int
	pos      int // index in its shard's heap; -1 once removed
}

// workerShard holds the workers whose id hashes to it, and a min-heap of them by
// (requests in flight, key) — by key alone when in-flight requests carry no weight.
type workerShard struct {
	mu     sync.RWMutex
	byID   map[uint64][]*workerState
	heap   []*workerState
	byLoad bool
}

func (s *workerShard) find(k workerKey) *workerState {
	for _, st := range s.byID[k.ID] {
		if st.key.DpRank == k.DpRank {
			return st
		}
	}
	return nil
}

func (s *workerShard) less(a, b *workerState) bool {
	return s.lessLoaded(a.key, a.inflight, b.key, b.inflight)
}

// lessLoaded is the heap order: fewer requests in flight (when they carry weight), then key.
func (s *workerShard) lessLoaded(a workerKey, aInflight int, b workerKey, bInflight int) bool {
	if s.byLoad && aInflight != bInflight {
		return aInflight < bInflight
	}
	return a.compare(b) < 0
}

func (s *workerShard) swap(i, j int) {
	s.heap[i], s.heap[j] = s.heap[j], s.heap[i]
	s.heap[i].pos, s.heap[j].pos = i, j
}

func (s *workerShard) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !s.less(s.heap[i], s.heap[p]) {
			return
		}
		s.swap(i, p)
		i = p
	}
}

func (s *workerShard) down(i int) {
	for {
		l, small := 2*i+1, i
		if l < len(s.heap) && s.less(s.heap[l], s.heap[small]) {
			small = l
		}
		if r := l + 1; r < len(s.heap) && s.less(s.heap[r], s.heap[small]) {
			small = r
		}
		if small == i {
			return
		}
		s.swap(i, small)
		i = small
	}
}

func (s *workerShard) push(st *workerState) {
	st.pos = len(s.heap)
	s.heap = append(s.heap, st)
	s.up(st.pos)
}

func (s *workerShard) remove(st *workerState) {
	i, last := st.pos, len(s.heap)-1
	if i != last {
		s.swap(i, last)
	}
	s.heap[last] = nil
	s.heap = s.heap[:last]
	if i != last {
		s.down(i)
		s.up(i)
	}
	st.pos = -1
}

// route is one routed request while it counts as in flight.
type route struct {
	worker   *workerState
	shard    *workerShard
	deadline time.Time
}

// routeShard holds the routes whose id maps to it, with their ids in routing order (which is
// expiry order, all routes having the same TTL).
type routeShard struct {
	mu     sync.Mutex
	routes map[uint64]route
	order  []uint64 // ids, oldest first from head; ids already done are skipped
	head   int
}

// Router picks a worker per request from the index's prefix overlap and the requests it has
// routed that are still in flight. Its methods may be called from many goroutines.
type Router struct {
	ix *kvidx.Indexer
	// loadWeight is how many blocks of prefill one in-flight request is worth in the cost.
	loadWeight float64
	limits     Limits
	now        func() time.Time // the clock of route expiry (tests replace it)

	workers  [numShards]workerShard
	nworkers atomic.Int64
	routes   [numShards]routeShard
	nextID   atomic.Uint64
	expired  atomic.Uint64 // routes forgotten after RouteTTL
	evicted  atomic.Uint64 // routes forgotten to stay within MaxRoutes
	matches  sync.Pool     // *[]kvidx.TieredMatch scratch buffers
	// workerLocks make the changes of one worker linearizable: registering it and applying
	// its events (POST /events) happen under its stripe, and so does removing it
	// (RemoveWorker), so the index and the candidates always agree on it.
	workerLocks [workerLockStripes]sync.Mutex
	// lockWaits counts the times lockWorkers or RemoveWorker found a stripe taken and waited.
	lockWaits atomic.Uint64
	// tierWeights is what one cached block is worth by its fastest storage tier (a block on
	// the device saves its whole prefill, one in host memory a little less, ...).
	tierWeights [kvidx.NumTiers]float64
	// remote are the routes other replicas made (--nats route sharing), counted as load.
	remote remoteRoutes
	// share, when set, is told of each route made and each route done here.
	share routeSharer
	// predictTTL > 0 records each route's blocks as predicted for its worker for that long
	// (kvidx's Indexer.Predict) and scores workers by their predicted depth (predict.go).
	predictTTL time.Duration
	predicted  sync.Pool // *[]kvidx.PredictedMatch scratch buffers
	// predictFailures counts routes whose prediction the library refused.
	predictFailures atomic.Uint64
}

// DefaultTierWeights are the tier weights of the command-line default: a block in host memory
// is worth 80% of one on the device, on disk 50%, in an external store 20%.
var DefaultTierWeights = [kvidx.NumTiers]float64{1, 0.8, 0.5, 0.2}

// validTierWeights checks tier weights: each in [0, 1], and never more for a slower tier.
func validTierWeights(w [kvidx.NumTiers]float64) error {
	for i, x := range w {
		if !(x >= 0 && x <= 1) {
			return fmt.Errorf("tier weight %d (%s) is %v: want a number in [0, 1]", i, kvidx.Tier(i), x)
		}
		if i > 0 && x > w[i-1] {
			return fmt.Errorf("tier weights %v: a slower tier (%s) may not weigh more than a faster one",
				w, kvidx.Tier(i))
		}
	}
	return nil
}

// TierDepths are a worker's cached depths by storage tier, cumulative as in
// kvidx.TieredMatch: Host counts the blocks of the prefix held on the device or in host
// memory, and so on, so External is the overlap on any tier.
type TierDepths struct {
	Device   uint32 `json:"device"`
	Host     uint32 `json:"host"`
	Disk     uint32 `json:"disk"`
	External uint32 `json:"external"`
}

func tierDepthsOf(d [kvidx.NumTiers]uint32) TierDepths {
	return TierDepths{Device: d[kvidx.TierDevice], Host: d[kvidx.TierHost], Disk: d[kvidx.TierDisk],
		External: d[kvidx.TierExternal]}
}

// Decision is the answer to one routing request.
type Decision struct {
	RequestID     uint64  `json:"request_id"`
	WorkerID      uint64  `json:"worker_id"`
	DpRank        uint32  `json:"dp_rank"`
	OverlapBlocks uint32  `json:"overlap_blocks"`
	RequestBlocks int     `json:"request_blocks"`
	InFlight      int     `json:"in_flight"`
	Cost          float64 `json:"cost"`
	// TierDepths are the chosen worker's depths per storage tier (OverlapBlocks is their
	// External, the overlap on any tier).
	TierDepths TierDepths `json:"tier_depths"`
	// HitBlocks is the overlap with each block weighted by its fastest tier (see
	// Router.Route); it equals OverlapBlocks when every block is on the device. With
	// predictions it is at least PredictedBlocks.
	HitBlocks float64 `json:"hit_blocks"`
	// PredictedBlocks is the chosen worker's predicted depth (-predict-ttl, -event-free):
	// the longest prefix it holds by events or was predicted to hold by earlier routes
	// (0 without predictions).
	PredictedBlocks uint32 `json:"predicted_blocks"`
}

// NewRouter builds a router over an open indexer with the default tier weights; loadWeight
// (>= 0) weighs in-flight requests against blocks to prefill.
func NewRouter(ix *kvidx.Indexer, loadWeight float64, limits Limits) (*Router, error) {
	return NewTieredRouter(ix, loadWeight, DefaultTierWeights, limits)
}

// NewTieredRouter is NewRouter with tier weights: what one cached block is worth by the
// fastest storage tier holding it (each in [0, 1], non-increasing from device to external).
func NewTieredRouter(ix *kvidx.Indexer, loadWeight float64, tierWeights [kvidx.NumTiers]float64, limits Limits) (*Router, error) {
	if err := validTierWeights(tierWeights); err != nil {
		return nil, err
	}
	if !(loadWeight >= 0) || loadWeight > 1e12 {
		return nil, fmt.Errorf("load weight %v: want a number in [0, 1e12]", loadWeight)
	}
	if limits.MaxWorkers <= 0 || limits.MaxNewWorkersPerRequest <= 0 || limits.MaxRoutes < numShards || limits.RouteTTL <= 0 {
		return nil, fmt.Errorf("limits %+v: every limit must be positive, MaxRoutes at least %d", limits, numShards)
	}
	r := &Router{ix: ix, loadWeight: loadWeight, limits: limits, now: time.Now, tierWeights: tierWeights}
	for i := range r.workers {
		r.workers[i].byID = map[uint64][]*workerState{}
		r.workers[i].byLoad = loadWeight > 0
		r.routes[i].routes = map[uint64]route{}
	}
	r.remote.routes = map[remoteKey]route{}
	r.predicted.New = func() any { s := make([]kvidx.PredictedMatch, 0, 64); return &s }
	r.matches.New = func() any { s := make([]kvidx.TieredMatch, 0, 64); return &s }
	return r, nil
}

func (r *Router) workerShard(id uint64) *workerShard {
	return &r.workers[(id*0x9E3779B97F4A7C15)>>58] // the top 6 bits of a multiplicative hash
}

func (r *Router) routeShard(id uint64) *routeShard { return &r.routes[id%numShards] }

// Workers returns the number of workers known as routing candidates.
func (r *Router) Workers() int { return int(r.nworkers.Load()) }

// workerLockStripes is the number of worker lock stripes.
const workerLockStripes = 256

func workerStripe(id uint64) int { return int((id * 0x9E3779B97F4A7C15) >> 56) }

// lockStripe takes one worker lock stripe, counting a wait when it is taken.
func (r *Router) lockStripe(i int) {
	if !r.workerLocks[i].TryLock() {
		r.lockWaits.Add(1)
		r.workerLocks[i].Lock()
	}
}

// lockWorkers takes the locks of the workers ids (their stripes, in ascending order, so
// concurrent callers never deadlock) and returns the function that releases them. Hold them
// from checking or registering the workers to submitting their events, so that a concurrent
// RemoveWorker comes wholly before or wholly after.
func (r *Router) lockWorkers(ids []uint64) (unlock func()) {
	stripes := make([]int, 0, len(ids))
	for _, id := range ids {
		stripes = append(stripes, workerStripe(id))
	}
	slices.Sort(stripes)
	stripes = slices.Compact(stripes)
	for _, i := range stripes {
		r.lockStripe(i)
	}
	return func() {
		for _, i := range slices.Backward(stripes) {
			r.workerLocks[i].Unlock()
		}
	}
}

// known reports whether a worker is a routing candidate.
func (r *Router) known(k workerKey) bool {
	sh := r.workerShard(k.ID)
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	return sh.find(k) != nil
}

// Register makes the given distinct workers routing candidates and returns those that were
// new. It refuses (registering none) more than MaxNewWorkersPerRequest new workers, with
// errTooManyNewWorkers, and going beyond MaxWorkers, with errWorkerLimit.
func (r *Router) Register(keys []workerKey) ([]workerKey, error) {
	var fresh []workerKey
	for _, k := range keys {
		sh := r.workerShard(k.ID)
		sh.mu.RLock()
		known := sh.find(k) != nil
		sh.mu.RUnlock()
		if !known {
			fresh = append(fresh, k)
		}
	}
	if len(fresh) > r.limits.MaxNewWorkersPerRequest {
		return nil, fmt.Errorf("%w: %d, at most %d", errTooManyNewWorkers, len(fresh), r.limits.MaxNewWorkersPerRequest)
	}
	if len(fresh) == 0 {
		return nil, nil
	}
	if n := r.nworkers.Add(int64(len(fresh))); n > int64(r.limits.MaxWorkers) {
		r.nworkers.Add(-int64(len(fresh)))
		return nil, fmt.Errorf("%w: %d known, %d new, at most %d (DELETE /workers/{id} frees room)",
			errWorkerLimit, n-int64(len(fresh)), len(fresh), r.limits.MaxWorkers)
	}
	added := make([]workerKey, 0, len(fresh))
	for _, k := range fresh {
		sh := r.workerShard(k.ID)
		sh.mu.Lock()
		if sh.find(k) == nil {
			st := &workerState{key: k}
			sh.byID[k.ID] = append(sh.byID[k.ID], st)
			sh.push(st)
			added = append(added, k)
		} else {
			r.nworkers.Add(-1) // registered meanwhile by another request
		}
		sh.mu.Unlock()
	}
	return added, nil
}

// unregister forgets workers as candidates (not in the index); requests routed to them are
// no longer tracked.
func (r *Router) unregister(keys []workerKey) {
	for _, k := range keys {
		sh := r.workerShard(k.ID)
		sh.mu.Lock()
		ranks := sh.byID[k.ID]
		for i, st := range ranks {
			if st.key == k {
				sh.remove(st)
				ranks = append(ranks[:i], ranks[i+1:]...)
				r.nworkers.Add(-1)
				break
			}
		}
		if len(ranks) == 0 {
			delete(sh.byID, k.ID)
		} else {
			sh.byID[k.ID] = ranks
		}
		sh.mu.Unlock()
	}
	gone := make(map[workerKey]bool, len(keys))
	for _, k := range keys {
		gone[k] = true
	}
	r.forgetRoutes(func(k workerKey) bool { return gone[k] })
}

// RemoveWorker forgets every rank of a worker, in the index and as a candidate, with the
// requests routed to it. It holds the worker's lock (see lockWorkers) throughout.
func (r *Router) RemoveWorker(id uint64) error {
	i := workerStripe(id)
	r.lockStripe(i)
	defer r.workerLocks[i].Unlock()
	if err := r.ix.RemoveWorker(id); err != nil {
		return err
	}
	sh := r.workerShard(id)
	sh.mu.Lock()
	for _, st := range sh.byID[id] {
		sh.remove(st)
		r.nworkers.Add(-1)
	}
	delete(sh.byID, id)
	sh.mu.Unlock()
	r.forgetRoutes(func(k workerKey) bool { return k.ID == id })
	return nil
}

// forgetRoutes drops the tracked routes whose worker matches, the other replicas' included.
func (r *Router) forgetRoutes(match func(workerKey) bool) {
	r.forgetRemote(match)
	for i := range r.routes {
		rs := &r.routes[i]
		rs.mu.Lock()
		for id, rt := range rs.routes {
			if match(rt.worker.key) {
				delete(rs.routes, id)
			}
		}
		rs.mu.Unlock()
	}
}

// candidate is a worker considered for a request, with what it would cost.
type candidate struct {
	st    *workerState
	shard *workerShard
	d     Decision
}

// Route picks the worker with the lowest cost = blocks to prefill + loadWeight * requests in
// flight (ties: deeper overlap, then lower worker id and rank) and counts the request in flight
// on it until Done or until it expires. ok is false when no worker is known.
//
// Blocks to prefill are len(query) - HitBlocks: each block of the worker's cached prefix is a
// partial hit worth the weight of the fastest storage tier it is on (1 for the device by
// default, so a prefix held on the device only counts its full depth; one in host memory
// must be loaded back, and counts less).
//
// Only workers holding a prefix (from the index, with their depths per tier) and each shard's
// least-loaded worker are looked at: a worker holding nothing costs len(query) + loadWeight *
// in-flight, so the least-loaded one is the best of them. Each look is under one shard's read lock; concurrent
// routes may both see the same least-loaded worker (the loads they read are a moment old).
func (r *Router) Route(localHashes []uint64) (d Decision, ok bool, err error) {
	buf := r.matches.Get().(*[]kvidx.TieredMatch)
	defer r.matches.Put(buf)
	*buf, err = r.ix.FindMatchesTieredInto(localHashes, (*buf)[:0])
	if err != nil {
		return d, false, err
	}
	var predicted []kvidx.PredictedMatch
	if r.predictTTL > 0 {
		pbuf := r.predicted.Get().(*[]kvidx.PredictedMatch)
		defer r.predicted.Put(pbuf)
		if *pbuf, err = r.ix.FindMatchesPredictedInto(localHashes, (*pbuf)[:0]); err != nil {
			return d, false, err
		}
		predicted = *pbuf
	}
	for range 8 { // retried only when the chosen worker is removed meanwhile
		c, found := r.best(localHashes, *buf, predicted)
		if !found {
			return d, false, nil
		}
		c.shard.mu.Lock()
		live := c.st.pos >= 0
		if live {
			c.st.inflight++
			c.shard.down(c.st.pos)
		}
		c.shard.mu.Unlock()
		if !live {
			continue
		}
		c.d.RequestID = r.track(c.st, c.shard)
		r.predict(c.st.key, localHashes)
		if r.share != nil {
			r.share.routed(c.d, localHashes)
		}
		return c.d, true, nil
	}
	return d, false, nil
}

// best returns the best candidate for a query, its matches and (with predictions) its
// predicted matches, without changing anything.
func (r *Router) best(q []uint64, matches []kvidx.TieredMatch, predicted []kvidx.PredictedMatch) (best candidate, found bool) {
	consider := func(st *workerState, sh *workerShard, inflight int, m kvidx.TieredMatch, predictedDepth uint32) {
		c := candidate{st: st, shard: sh, d: Decision{
			WorkerID:        st.key.ID,
			DpRank:          st.key.DpRank,
			OverlapBlocks:   m.Depth,
			RequestBlocks:   len(q),
			InFlight:        inflight,
			TierDepths:      tierDepthsOf(m.TierDepths),
			HitBlocks:       max(m.Score(r.tierWeights), float64(predictedDepth)),
			PredictedBlocks: predictedDepth,
		}}
		c.d.Cost = routeCost(len(q), c.d.HitBlocks, r.loadWeight, inflight)
		if !found || better(c.d, best.d, st.key, best.st.key) {
			best, found = c, true
		}
	}
	look := func(k workerKey) (*workerState, *workerShard, int) {
		sh := r.workerShard(k.ID)
		sh.mu.RLock()
		defer sh.mu.RUnlock()
		st := sh.find(k)
		if st == nil {
			return nil, sh, 0
		}
		return st, sh, st.inflight
	}
	depths := predictedDepths(predicted)
	for _, m := range matches {
		k := workerKey{m.WorkerID, m.DpRank}
		if st, sh, inflight := look(k); st != nil && m.Depth > 0 {
			consider(st, sh, inflight, m, depths[k])
			delete(depths, k)
		}
	}
	// Workers predicted to hold a prefix beyond what the events confirm (in the order of
	// the predicted answer, so that the choice does not depend on map order).
	for _, p := range predicted {
		k := workerKey{p.WorkerID, p.DpRank}
		if d, left := depths[k]; left {
			if st, sh, inflight := look(k); st != nil {
				consider(st, sh, inflight, kvidx.TieredMatch{WorkerID: k.ID, DpRank: k.DpRank}, d)
			}
		}
	}
	// The least-loaded worker overall, with no overlap: if it holds a prefix, its entry
	// above costs no more (weights are >= 0) and has the deeper overlap, which wins ties, so
	// counting it at depth 0 here never makes it win wrongly.
	var top *workerState
	var topShard *workerShard
	topInflight := 0
	for i := range r.workers {
		sh := &r.workers[i]
		sh.mu.RLock()
		if len(sh.heap) > 0 {
			h := sh.heap[0]
			if top == nil || sh.lessLoaded(h.key, h.inflight, top.key, topInflight) {
				top, topShard, topInflight = h, sh, h.inflight
			}
		}
		sh.mu.RUnlock()
	}
	if top != nil {
		consider(top, topShard, topInflight, kvidx.TieredMatch{}, 0)
	}
	return best, found
}

// routeCost is a candidate's cost: blocks to prefill (the request's blocks less the weighted
// hits) plus loadWeight per request in flight.
func routeCost(requestBlocks int, hitBlocks, loadWeight float64, inflight int) float64 {
	return float64(requestBlocks) - hitBlocks + loadWeight*float64(inflight)
}

// better orders candidates: lower cost, deeper overlap, lower (worker id, dp rank).
func better(c, d Decision, ck, dk workerKey) bool {
	if c.Cost != d.Cost {
		return c.Cost < d.Cost
	}
	if c.OverlapBlocks != d.OverlapBlocks {
		return c.OverlapBlocks > d.OverlapBlocks
	}
	return ck.compare(dk) < 0
}

// track records a routed request and returns its id; it releases the routes of its shard
// that expired or exceed the shard's share of MaxRoutes.
func (r *Router) track(st *workerState, sh *workerShard) uint64 {
	id := r.nextID.Add(1)
	now := r.now()
	rs := r.routeShard(id)
	rs.mu.Lock()
	rs.routes[id] = route{worker: st, shard: sh, deadline: now.Add(r.limits.RouteTTL)}
	rs.order = append(rs.order, id)
	limit := r.limits.MaxRoutes / numShards // the shards' limits add up to MaxRoutes
	if id%numShards < uint64(r.limits.MaxRoutes%numShards) {
		limit++
	}
	released := r.expireLocked(rs, now, limit, nil)
	rs.mu.Unlock()
	for _, rt := range released {
		release(rt)
	}
	return id
}

// expireLocked drops, oldest first, the routes of rs past their deadline and those beyond
// limit (limit < 0: none for the limit); it returns them so their load can be released once
// rs is unlocked.
func (r *Router) expireLocked(rs *routeShard, now time.Time, limit int, out []route) []route {
	for rs.head < len(rs.order) {
		id := rs.order[rs.head]
		rt, live := rs.routes[id]
		if live && !now.After(rt.deadline) && (limit < 0 || len(rs.routes) <= limit) {
			break
		}
		rs.head++
		if !live {
			continue
		}
		delete(rs.routes, id)
		if now.After(rt.deadline) {
			r.expired.Add(1)
		} else {
			r.evicted.Add(1)
		}
		out = append(out, rt)
	}
	rs.order, rs.head = compactOrder(rs.order, rs.head, rs.routes)
	return out
}

// compactOrder compacts an expiry order (keys oldest first from head, some no longer in
// live) once most of it is done or dropped, amortized O(1) per key; it returns the new order
// and head.
func compactOrder[K comparable](order []K, head int, live map[K]route) ([]K, int) {
	if head > 64 && head > len(order)/2 {
		order = append(order[:0], order[head:]...)
		head = 0
	}
	if pending := len(order) - head; pending > 64 && pending > 4*len(live) {
		kept := order[:0]
		for _, k := range order[head:] {
			if _, ok := live[k]; ok {
				kept = append(kept, k)
			}
		}
		order, head = kept, 0
	}
	return order, head
}

// release takes a route's request off its worker's load (if the worker is still known).
func release(rt route) {
	rt.shard.mu.Lock()
	if rt.worker.pos >= 0 {
		rt.worker.inflight--
		rt.shard.up(rt.worker.pos)
	}
	rt.shard.mu.Unlock()
}

// Done ends a routed request; it reports whether the request was in flight (not done, not
// expired, not forgotten with its worker).
func (r *Router) Done(requestID uint64) bool {
	rs := r.routeShard(requestID)
	rs.mu.Lock()
	rt, ok := rs.routes[requestID]
	delete(rs.routes, requestID)
	rs.mu.Unlock()
	if ok {
		release(rt)
		if r.share != nil {
			r.share.done(requestID)
		}
	}
	return ok
}

// Expire releases every route past its deadline now, the other replicas' included; Route
// does it for one shard of its own routes at a time.
func (r *Router) Expire() {
	r.expireRemote()
	now := r.now()
	for i := range r.routes {
		rs := &r.routes[i]
		rs.mu.Lock()
		released := r.expireLocked(rs, now, -1, nil)
		rs.mu.Unlock()
		for _, rt := range released {
			release(rt)
		}
	}
}

// InFlight expires old routes and returns the number of requests routed and not yet done.
func (r *Router) InFlight() int {
	r.Expire()
	n := 0
	for i := range r.routes {
		rs := &r.routes[i]
		rs.mu.Lock()
		n += len(rs.routes)
		rs.mu.Unlock()
	}
	return n
}
