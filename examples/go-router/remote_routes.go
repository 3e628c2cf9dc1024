package main

import (
	"slices"
	"sync"
	"time"
)

// routeSharer is told of every route this router makes and of every one done here (DELETE),
// so that other replicas can count them as load (see routeshare.go).
type routeSharer interface {
	routed(d Decision, localHashes []uint64)
	done(requestID uint64)
}

// remoteKey names a route another replica made: its replica's id and its request id there.
type remoteKey struct {
	replica string
	id      uint64
}

// remoteRoutes are the routes other replicas made, counted as in flight on their workers here
// until the other replica says they are done, or until RouteTTL after they arrived. At most
// MaxRoutes are kept (the oldest are dropped first, as expired).
type remoteRoutes struct {
	mu     sync.Mutex
	routes map[remoteKey]route
	order  []remoteKey // oldest first from head; keys already done are skipped
	head   int
	// expired counts remote routes dropped after RouteTTL or beyond MaxRoutes.
	expired uint64
}

// AddRemote counts a route another replica made to worker k as in flight here (registering
// k as a candidate when this replica does not know it yet) and, when this router predicts,
// records localHashes (the route's blocks, if sent) as predicted for k. It reports whether
// the route was counted: false for a worker that cannot be registered or a route already
// counted.
func (r *Router) AddRemote(replica string, id uint64, k workerKey, localHashes []uint64) bool {
	if !r.known(k) {
		if _, err := r.Register([]workerKey{k}); err != nil {
			return false
		}
	}
	key := remoteKey{replica, id}
	rr := &r.remote
	rr.mu.Lock()
	if _, dup := rr.routes[key]; dup {
		rr.mu.Unlock()
		return false
	}
	rr.mu.Unlock()
	sh := r.workerShard(k.ID)
	sh.mu.Lock()
	st := sh.find(k)
	if st != nil {
		st.inflight++
		sh.down(st.pos)
	}
	sh.mu.Unlock()
	if st == nil {
		return false // removed meanwhile
	}
	r.predict(k, localHashes)
	now := r.now()
	rr.mu.Lock()
	rr.routes[key] = route{worker: st, shard: sh, deadline: now.Add(r.limits.RouteTTL)}
	rr.order = append(rr.order, key)
	released := r.expireRemoteLocked(now, r.limits.MaxRoutes)
	rr.mu.Unlock()
	for _, rt := range released {
		release(rt)
	}
	return true
}

// DoneRemote ends a route another replica made; it reports whether it was counted here.
func (r *Router) DoneRemote(replica string, id uint64) bool {
	rr := &r.remote
	rr.mu.Lock()
	rt, ok := rr.routes[remoteKey{replica, id}]
	delete(rr.routes, remoteKey{replica, id})
	rr.mu.Unlock()
	if ok {
		release(rt)
	}
	return ok
}

// expireRemoteLocked drops, oldest first, the remote routes past their deadline and those
// beyond limit (limit < 0: none for the limit), returning them so that their load can be
// released once r.remote is unlocked.
func (r *Router) expireRemoteLocked(now time.Time, limit int) []route {
	rr := &r.remote
	var out []route
	for rr.head < len(rr.order) {
		key := rr.order[rr.head]
		rt, live := rr.routes[key]
		if live && !now.After(rt.deadline) && (limit < 0 || len(rr.routes) <= limit) {
			break
		}
		rr.head++
		if live {
			delete(rr.routes, key)
			rr.expired++
			out = append(out, rt)
		}
	}
	rr.order, rr.head = compactOrder(rr.order, rr.head, rr.routes)
	return out
}

// expireRemote releases the remote routes past their deadline now.
func (r *Router) expireRemote() {
	r.remote.mu.Lock()
	released := r.expireRemoteLocked(r.now(), -1)
	r.remote.mu.Unlock()
	for _, rt := range released {
		release(rt)
	}
}

// forgetRemote drops the remote routes whose worker matches (the worker was removed).
func (r *Router) forgetRemote(match func(workerKey) bool) {
	r.remote.mu.Lock()
	for key, rt := range r.remote.routes {
		if match(rt.worker.key) {
			delete(r.remote.routes, key)
		}
	}
	r.remote.mu.Unlock()
}

// RemoteInFlight expires old remote routes and returns the number still counted.
func (r *Router) RemoteInFlight() int {
	r.expireRemote()
	r.remote.mu.Lock()
	defer r.remote.mu.Unlock()
	return len(r.remote.routes)
}

// workerLoad is one worker's requests in flight as this router counts them (its own routes
// and, with route sharing, the other replicas').
type workerLoad struct {
	WorkerID uint64 `json:"worker_id"`
	DpRank   uint32 `json:"dp_rank"`
	InFlight int    `json:"in_flight"`
}

// Loads expires old routes and returns every worker with requests in flight, by worker.
func (r *Router) Loads() []workerLoad {
	r.Expire()
	var out []workerLoad
	for i := range r.workers {
		sh := &r.workers[i]
		sh.mu.RLock()
		for _, st := range sh.heap {
			if st.inflight > 0 {
				out = append(out, workerLoad{st.key.ID, st.key.DpRank, st.inflight})
			}
		}
		sh.mu.RUnlock()
	}
	slices.SortFunc(out, func(a, b workerLoad) int {
		return workerKey{a.WorkerID, a.DpRank}.compare(workerKey{b.WorkerID, b.DpRank})
	})
	return out
}

// loadReport is the body of GET /load: the requests in flight as this router counts them.
type loadReport struct {
	// LocalInFlight counts this router's own routes in flight.
	LocalInFlight int `json:"local_in_flight"`
	// RemoteInFlight counts the other replicas' routes counted in flight here (--nats route
	// sharing); RemoteExpired those dropped after -route-ttl (or beyond -max-routes) without
	// a done.
	RemoteInFlight int    `json:"remote_in_flight"`
	RemoteExpired  uint64 `json:"remote_expired"`
	// Workers is each worker's requests in flight (own and remote), for the workers with any,
	// by worker id and dp rank.
	Workers []workerLoad `json:"workers"`
	// Sharing is the route sharing's counters (absent without it).
	Sharing *shareReport `json:"sharing,omitempty"`
}

// loadReport returns the load this router counts now.
func (r *Router) loadReport() loadReport {
	rep := loadReport{LocalInFlight: r.InFlight(), RemoteInFlight: r.RemoteInFlight(), Workers: r.Loads()}
	r.remote.mu.Lock()
	rep.RemoteExpired = r.remote.expired
	r.remote.mu.Unlock()
	if rep.Workers == nil {
		rep.Workers = []workerLoad{}
	}
	return rep
}
