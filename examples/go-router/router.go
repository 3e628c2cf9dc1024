package main

import (
	"cmp"
	"sync"

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

// Router picks a worker per request from the index's prefix overlap and the requests it has
// routed that are still in flight. Its methods may be called from many goroutines.
type Router struct {
	ix *kvidx.Indexer
	// LoadWeight is how many blocks of prefill one in-flight request is worth in the cost.
	loadWeight float64

	mu       sync.Mutex
	workers  map[workerKey]int    // known workers -> requests in flight
	requests map[uint64]workerKey // request id -> worker, while in flight
	nextID   uint64
	matches  sync.Pool // *[]kvidx.Match scratch buffers
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
}

// NewRouter builds a router over an open indexer; loadWeight weighs in-flight requests
// against blocks to prefill.
func NewRouter(ix *kvidx.Indexer, loadWeight float64) *Router {
	r := &Router{
		ix:         ix,
		loadWeight: loadWeight,
		workers:    map[workerKey]int{},
		requests:   map[uint64]workerKey{},
	}
	r.matches.New = func() any { s := make([]kvidx.Match, 0, 64); return &s }
	return r
}

// Observe registers the workers named by events, so they become routing candidates.
func (r *Router) Observe(evs []kvidx.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range evs {
		k := workerKey{evs[i].WorkerID, evs[i].DpRank}
		if _, ok := r.workers[k]; !ok {
			r.workers[k] = 0
		}
	}
}

// RemoveWorker forgets every rank of a worker, in the index and as a candidate.
func (r *Router) RemoveWorker(id uint64) error {
	if err := r.ix.RemoveWorker(id); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.workers {
		if k.ID == id {
			delete(r.workers, k)
		}
	}
	for req, k := range r.requests {
		if k.ID == id {
			delete(r.requests, req)
		}
	}
	return nil
}

// Route picks the worker with the lowest cost = blocks to prefill + loadWeight * requests in
// flight (ties: deeper overlap, then lower worker id and rank) and counts the request in flight
// on it until Done. ok is false when no worker is known.
func (r *Router) Route(localHashes []uint64) (d Decision, ok bool, err error) {
	buf := r.matches.Get().(*[]kvidx.Match)
	defer r.matches.Put(buf)
	*buf, err = r.ix.FindMatchesInto(localHashes, (*buf)[:0])
	if err != nil {
		return d, false, err
	}
	depth := make(map[workerKey]uint32, len(*buf))
	for _, m := range *buf {
		depth[workerKey{m.WorkerID, m.DpRank}] = m.Depth
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var best workerKey
	found := false
	for k, inflight := range r.workers {
		c := Decision{
			WorkerID:      k.ID,
			DpRank:        k.DpRank,
			OverlapBlocks: depth[k],
			RequestBlocks: len(localHashes),
			InFlight:      inflight,
		}
		c.Cost = float64(len(localHashes)-int(c.OverlapBlocks)) + r.loadWeight*float64(inflight)
		if !found || better(c, d, k, best) {
			d, best, found = c, k, true
		}
	}
	if !found {
		return d, false, nil
	}
	r.nextID++
	d.RequestID = r.nextID
	r.requests[d.RequestID] = best
	r.workers[best]++
	return d, true, nil
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

// Done ends a routed request; it reports whether the request was in flight.
func (r *Router) Done(requestID uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	k, ok := r.requests[requestID]
	if !ok {
		return false
	}
	delete(r.requests, requestID)
	if _, known := r.workers[k]; known {
		r.workers[k]--
	}
	return true
}

// InFlight returns the number of requests routed and not yet done.
func (r *Router) InFlight() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.requests)
}
