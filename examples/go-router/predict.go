package main

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	kvidx "github.com/kvidx/kvidx/bindings/go"
)

// PredictRoutes makes the router record each route it makes as a prediction: the request's
// blocks are credited to the chosen worker for ttl (kvidx's Indexer.Predict), until the
// worker's events confirm or drop them, and every worker is scored by its predicted depth,
// the larger of what its events confirm and what earlier routes predicted. A burst of
// requests sharing a prefix then follows the first to its worker before that worker's
// events arrive. ttl 0 turns it off. Call it before the router routes anything.
func (r *Router) PredictRoutes(ttl time.Duration) {
	r.predictTTL = ttl
}

// predict records a route's blocks as predicted for its worker (with predictions on).
func (r *Router) predict(k workerKey, localHashes []uint64) {
	if r.predictTTL <= 0 || len(localHashes) == 0 {
		return
	}
	if err := r.ix.Predict(k.ID, k.DpRank, localHashes, r.predictTTL); err != nil {
		if r.predictFailures.Add(1) == 1 {
			slog.Warn(fmt.Sprintf("recording a route as predicted: %v (counting, logged once)", err))
		}
	}
}

// predictedDepths maps each worker of a predicted answer to its predicted depth (nil for an
// empty answer).
func predictedDepths(predicted []kvidx.PredictedMatch) map[workerKey]uint32 {
	if len(predicted) == 0 {
		return nil
	}
	out := make(map[workerKey]uint32, len(predicted))
	for _, p := range predicted {
		out[workerKey{p.WorkerID, p.DpRank}] = p.PredictedDepth
	}
	return out
}

// defaultEventFreeTTL is how long a route's prediction lasts in -event-free mode when
// -predict-ttl is not given. In that mode -predict-worker-capacity is what approximates each
// engine's cache (its least recently routed blocks forgotten first, as an LRU cache evicts);
// an engine's cache has no time to live. The TTL only bounds how long a worker is credited
// with a chain nobody routed there since, for a cache lost without the router knowing (an
// engine restarted), so it is long against the pauses of a conversation between turns
// (minutes to tens of minutes): it never decides in the capacity's place.
const defaultEventFreeTTL = time.Hour

// predictionOptions are the command-line prediction settings.
type predictionOptions struct {
	ttl            time.Duration
	eventFree      bool
	workerIDs      string
	workerCapacity uint64
	maxBytes       uint64
	// workers are the parsed -worker-ids (after resolve).
	workers []workerKey
}

// resolve checks the settings and fills in the defaults of -event-free mode; fedByEvents says
// whether the router takes engine events from a feed (--nats or --zmq).
func (p predictionOptions) resolve(fedByEvents bool) (predictionOptions, error) {
	if p.ttl < 0 {
		return p, errors.New("-predict-ttl must not be negative")
	}
	if !p.eventFree {
		if p.workerIDs != "" {
			return p, errors.New("-worker-ids is for -event-free mode (otherwise the events name the workers)")
		}
		return p, nil
	}
	if fedByEvents {
		return p, errors.New("-event-free does not go together with --nats or --zmq: those feed the index with the engines' events")
	}
	workers, err := parseWorkerIDs(p.workerIDs)
	if err != nil {
		return p, err
	}
	if len(workers) == 0 {
		return p, errors.New("-event-free needs the routing candidates: -worker-ids")
	}
	if p.workerCapacity == 0 {
		return p, errors.New("-event-free needs -predict-worker-capacity: about each engine's cache in blocks (the router forgets a worker's least recently routed blocks beyond it)")
	}
	if p.ttl == 0 {
		p.ttl = defaultEventFreeTTL
	}
	p.workers = workers
	return p, nil
}

// parseWorkerIDs reads comma-separated worker ids, each "id" (rank 0) or "id:rank", distinct.
func parseWorkerIDs(s string) ([]workerKey, error) {
	var out []workerKey
	seen := map[workerKey]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		idText, rankText, hasRank := strings.Cut(part, ":")
		id, err := strconv.ParseUint(idText, 10, 64)
		var rank uint64
		if err == nil && hasRank {
			rank, err = strconv.ParseUint(rankText, 10, 32)
		}
		if err != nil {
			return nil, fmt.Errorf("-worker-ids: %q is not a worker id (id or id:rank)", part)
		}
		k := workerKey{id, uint32(rank)}
		if seen[k] {
			return nil, fmt.Errorf("-worker-ids: %q appears twice", part)
		}
		seen[k] = true
		out = append(out, k)
	}
	return out, nil
}
