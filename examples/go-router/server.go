package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	kvidx "github.com/kvidx/kvidx/bindings/go"
)

// server is the HTTP front of a Router.
type server struct {
	router    *Router
	ix        *kvidx.Indexer
	blockSize uint32
	maxBody   int64
	metrics   *metrics
	// budget bounds the request bytes held at once (bodies being read, decoded ids).
	budget *byteBudget
	// unknownMedium is the storage tier of an event's medium that kvidx does not know.
	unknownMedium kvidx.Tier
	// applyGate lets ?wait=1 requests apply alone: others hold it shared while they submit
	// events, a waiting request holds it exclusively from a first flush to its last, so the
	// index's counters move only with its own events in between.
	applyGate sync.RWMutex
	// replica, in --nats mode, feeds the index from the stream: POST /events and
	// DELETE /workers are then refused (409) so replicas stay identical; GET /replica reports.
	replica *replica
	// zmq, in --zmq mode, feeds the index from the engines' publishers: POST /events and
	// DELETE /workers are then refused (409), the engines being the index's only source.
	zmq *zmqInput
	// eventFree (-event-free): the index is fed by routing decisions only; POST /events is
	// refused (409).
	eventFree bool
	// beforeApply, when set (tests only), runs in POST /events between registering the
	// request's workers and submitting its events, with the workers' locks held.
	beforeApply func(workers []workerKey)
}

// routeRequest is the body of POST /route: token ids (hashed with the router's block size,
// under the request's namespace and multimodal spans when given) or the request's local
// block hashes.
type routeRequest struct {
	TokenIDs    []uint32 `json:"token_ids"`
	LocalHashes []uint64 `json:"local_hashes"`
	// LoRAName and CacheSalt are the request's namespace (docs/contract.md section 3.1).
	LoRAName  string `json:"lora_name"`
	CacheSalt string `json:"cache_salt"`
	// MMSpans are the request's multimodal items.
	MMSpans []mmSpan `json:"mm_spans"`
}

// mmSpan is a multimodal item of a POST /route request: the engine's identifier of the item
// and the token span [start, end) of its placeholder tokens.
type mmSpan struct {
	Identifier string `json:"identifier"`
	Start      uint64 `json:"start"`
	End        uint64 `json:"end"`
}

// namespaced says whether the request names a namespace or multimodal spans.
func (rr *routeRequest) namespaced() bool {
	return rr.LoRAName != "" || rr.CacheSalt != "" || rr.MMSpans != nil
}

// checkSpans refuses spans without an identifier or with end <= start.
func (rr *routeRequest) checkSpans() error {
	for i, sp := range rr.MMSpans {
		switch {
		case sp.Identifier == "":
			return fmt.Errorf("mm_spans[%d]: identifier is empty", i)
		case sp.End <= sp.Start:
			return fmt.Errorf("mm_spans[%d]: end %d is not above start %d", i, sp.End, sp.Start)
		}
	}
	return nil
}

// hash computes the local hashes of the request's tokens under its namespace and spans.
func (rr *routeRequest) hash(blockSize uint32) ([]uint64, error) {
	if !rr.namespaced() {
		return kvidx.HashTokens(rr.TokenIDs, blockSize)
	}
	spans := make([]kvidx.MultimodalSpan, len(rr.MMSpans))
	for i, sp := range rr.MMSpans {
		spans[i] = kvidx.MultimodalSpan{Identifier: []byte(sp.Identifier), Start: sp.Start, End: sp.End}
	}
	ns := kvidx.Namespace{LoRAName: []byte(rr.LoRAName), CacheSalt: []byte(rr.CacheSalt)}
	return kvidx.HashRequest(rr.TokenIDs, blockSize, ns, spans)
}

// eventsResponse is the body of a successful POST /events. With ?wait=1 it also says what
// became of the request's events once applied.
type eventsResponse struct {
	Accepted int `json:"accepted"`
	// Ignored counts the removed events about workers the router does not know (see kvEvent):
	// not applied, and not in Accepted.
	Ignored int `json:"ignored,omitempty"`
	// Applied, Rejected (stored events whose parent the worker did not hold) and
	// UnknownRemovals (removed block names the worker did not hold): ?wait=1 only.
	Applied         *uint64 `json:"applied,omitempty"`
	Rejected        *uint64 `json:"rejected,omitempty"`
	UnknownRemovals *uint64 `json:"unknown_removals,omitempty"`
}

// errorResponse is the body of every error status.
type errorResponse struct {
	Error string `json:"error"`
}

// newHandler returns the router's HTTP API (successes and errors are JSON, {"error": "..."}):
//
//	POST   /events              KV events (one object or an array, see kvEvent; an event may
//	                            name its storage tier with "medium" or "tier"); ?wait=1 returns
//	                            once applied, with the counts of applied and rejected events
//	POST   /route               {"token_ids": [...]} or {"local_hashes": [...]} -> Decision
//	                            (with the chosen worker's depths per storage tier and, with
//	                            -predict-ttl or -event-free, its predicted depth)
//	DELETE /requests/{id}       the routed request is done (no longer counts as load)
//	DELETE /workers/{id}        forget a worker (all dp ranks)
//	GET    /metrics             Prometheus text
//	GET    /replica             --nats mode: the replica's state as JSON (stream position,
//	                            lag, watermarks, offset-batch stats, bootstrap, snapshots)
//	GET    /load                the requests in flight per worker as this router counts them
//	                            (its own and, in --nats mode, the other replicas'), and the
//	                            route sharing's counters
//
// Statuses: 400 bad input, 404 unknown request or endpoint (GET /replica without --nats),
// 405 wrong method, 408 body not received in time, 409 worker limit reached (and, in --nats
// mode, POST /events and DELETE /workers: the index follows the stream only; in -event-free
// mode, POST /events), 413 body larger
// than maxBody (or a /route body whose decoded ids alone need more than maxInflight bytes),
// 503 no worker known yet, or (with Retry-After) the request's bytes do not fit in
// maxInflight now, or, in --nats mode, the replica has not caught up with the stream yet
// or the stream it follows was deleted or recreated.
// unknownMedium is the storage tier of an event medium kvidx does not know.
func newHandler(r *Router, ix *kvidx.Indexer, blockSize uint32, maxBody, maxInflight int64, unknownMedium kvidx.Tier) http.Handler {
	return newAPI(r, ix, blockSize, maxBody, maxInflight, unknownMedium).handler()
}

// newAPI returns the state of the router's HTTP API (see newHandler).
func newAPI(r *Router, ix *kvidx.Indexer, blockSize uint32, maxBody, maxInflight int64, unknownMedium kvidx.Tier) *server {
	return &server{router: r, ix: ix, blockSize: blockSize, maxBody: maxBody, metrics: newMetrics(),
		unknownMedium: unknownMedium, budget: newByteBudget(maxInflight)}
}

// handler returns the HTTP API over s (see newHandler); in --nats mode GET /replica reports
// the replica's state as JSON.
func (s *server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /events", s.postEvents)
	mux.HandleFunc("POST /route", s.postRoute)
	mux.HandleFunc("DELETE /requests/{id}", s.deleteRequest)
	mux.HandleFunc("DELETE /workers/{id}", s.deleteWorker)
	mux.HandleFunc("GET /metrics", s.getMetrics)
	mux.HandleFunc("GET /replica", s.getReplica)
	mux.HandleFunc("GET /load", s.getLoad)
	mux.HandleFunc("/", s.unknown)
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if msg := uncleanPath(req.URL.Path); msg != "" {
			s.fail(w, http.StatusBadRequest, msg)
			return
		}
		mux.ServeHTTP(w, req)
	})
}

// uncleanPath says why a request path is refused before routing, or returns "": the mux would
// answer a path with empty, "." or ".." segments with a redirect to its cleaned form, which a
// client that follows redirects would execute on another resource (DELETE
// /requests/../workers/3 becoming DELETE /workers/3). The API never redirects.
func uncleanPath(p string) string {
	if !strings.HasPrefix(p, "/") {
		return fmt.Sprintf("the path %q does not start with /", p)
	}
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	if clean != p {
		return fmt.Sprintf("the path %q is not clean (empty, . or .. segments): this API does not redirect", p)
	}
	return ""
}

// allowed is the method each route of the API takes, by path (ids replaced by {id}).
var allowed = map[string]string{
	"/events": "POST", "/route": "POST", "/metrics": "GET",
	"/requests/{id}": "DELETE", "/workers/{id}": "DELETE", "/replica": "GET", "/load": "GET",
}

// unknown answers what no route took: 405 for a known path with another method, else 404,
// both with a JSON body (the mux's own answers are plain text).
func (s *server) unknown(w http.ResponseWriter, req *http.Request) {
	path := req.URL.Path
	for _, prefix := range []string{"/requests/", "/workers/"} {
		if rest, ok := strings.CutPrefix(path, prefix); ok && rest != "" && !strings.Contains(rest, "/") {
			path = prefix + "{id}"
		}
	}
	if method, ok := allowed[path]; ok {
		w.Header().Set("Allow", method)
		s.fail(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s takes %s, not %s", path, method, req.Method))
		return
	}
	s.fail(w, http.StatusNotFound, "no such endpoint: "+req.URL.Path)
}

// fail answers an error status with a JSON body; 4xx answers count as bad requests.
func (s *server) fail(w http.ResponseWriter, code int, msg string) {
	if code >= 400 && code < 500 {
		s.metrics.badRequests.Add(1)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	if err := json.NewEncoder(w).Encode(errorResponse{Error: msg}); err != nil {
		slog.Warn(fmt.Sprintf("writing response: %v", err))
	}
}

func (s *server) badRequest(w http.ResponseWriter, err error) {
	s.fail(w, http.StatusBadRequest, err.Error())
}

// readBody reads the whole body, at most maxBody bytes, its buffer counted in res; on failure
// it has answered (see failRead) and returns false.
func (s *server) readBody(w http.ResponseWriter, req *http.Request, res *reservation) ([]byte, bool) {
	r := http.MaxBytesReader(w, req.Body, s.maxBody)
	size := int64(4 << 10)
	if cl := req.ContentLength; cl >= 0 {
		size = min(cl, s.maxBody) + 1 // + 1: room to read the end without growing
	}
	if err := res.take(size); err != nil {
		s.failRead(w, err)
		return nil, false
	}
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			grown := min(2*int64(cap(buf)), s.maxBody+1)
			if err := res.take(grown); err != nil {
				s.failRead(w, err)
				return nil, false
			}
			next := make([]byte, len(buf), grown)
			copy(next, buf)
			res.give(int64(cap(buf)))
			buf = next
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		switch {
		case errors.Is(err, io.EOF):
			return buf, true
		case err != nil:
			s.failRead(w, err)
			return nil, false
		}
	}
}

// failRead answers the failure to read or decode a body: 413 too large (or needing more than
// the whole in-flight budget), 503 with Retry-After when the in-flight budget is taken, 408
// too slow, 400 otherwise.
func (s *server) failRead(w http.ResponseWriter, err error) {
	var tooLarge *http.MaxBytesError
	var netErr net.Error
	switch {
	case errors.As(err, &tooLarge):
		s.metrics.tooLarge.Add(1)
		s.fail(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is larger than %d bytes", tooLarge.Limit))
	case errors.Is(err, errNeedsTooMuch):
		s.metrics.tooLarge.Add(1)
		s.fail(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("%v (%d bytes)", err, s.budget.limit))
	case errors.Is(err, errOverloaded):
		w.Header().Set("Retry-After", "1")
		s.fail(w, http.StatusServiceUnavailable, err.Error())
	case errors.As(err, &netErr) && netErr.Timeout():
		s.fail(w, http.StatusRequestTimeout, "the body was not received in time")
	default:
		s.fail(w, http.StatusBadRequest, err.Error())
	}
}

// errFromStream refuses index changes over HTTP in --nats mode, errFromEngines in --zmq mode.
const (
	errFromStream  = "this router is a replica fed by the " + streamName + " stream (--nats): index changes come from the stream only"
	errFromEngines = "this router is fed by the engines' ZMQ publishers (--zmq): index changes come from them only"
)

// fedElsewhere refuses (409) a change of the index over HTTP when the index has another
// source (--nats, --zmq), and says so.
func (s *server) fedElsewhere(w http.ResponseWriter) bool {
	switch {
	case s.replica != nil:
		s.fail(w, http.StatusConflict, errFromStream)
	case s.zmq != nil:
		s.fail(w, http.StatusConflict, errFromEngines)
	default:
		return false
	}
	return true
}

func (s *server) postEvents(w http.ResponseWriter, req *http.Request) {
	if s.fedElsewhere(w) {
		return
	}
	if s.eventFree {
		s.fail(w, http.StatusConflict, "this router runs without events (-event-free): its index is fed by its routing decisions only")
		return
	}
	res := s.budget.reserve()
	defer res.release()
	body, ok := s.readBody(w, req, res)
	if !ok {
		return
	}
	raw, err := decodeEvents(body)
	if err != nil {
		s.badRequest(w, err)
		return
	}
	evs := make([]kvidx.Event, len(raw))
	tiers := make([]kvidx.Tier, len(raw))
	tiered := false // some event names its tier: apply with ApplyEventsOnTiers
	var keys []workerKey
	announced := map[workerKey]bool{} // the worker has a stored or cleared event here
	for i := range raw {
		if evs[i], err = raw[i].toIndexEvent(); err != nil {
			s.badRequest(w, fmt.Errorf("event %d: %w", i, err))
			return
		}
		var named bool
		if tiers[i], named, err = raw[i].tier(s.unknownMedium); err != nil {
			s.badRequest(w, fmt.Errorf("event %d: worker %d event %d: %w", i, raw[i].WorkerID, raw[i].EventID, err))
			return
		}
		tiered = tiered || named
		k := workerKey{raw[i].WorkerID, raw[i].DpRank}
		if _, seen := announced[k]; !seen {
			keys = append(keys, k)
		}
		announced[k] = announced[k] || raw[i].Removed == nil
	}
	// applyGate is taken before the workers' locks (registerAndApply), in both modes.
	wait := req.URL.Query().Get("wait") == "1"
	var before kvidx.Stats
	if wait {
		s.applyGate.Lock()
		defer s.applyGate.Unlock()
		if before, err = s.flushedStats(); err != nil {
			s.fail(w, http.StatusInternalServerError, err.Error())
			return
		}
	} else {
		s.applyGate.RLock()
	}
	ignored, err := s.registerAndApply(keys, announced, evs, tiers, tiered)
	if !wait {
		s.applyGate.RUnlock()
	}
	switch {
	case errors.Is(err, errTooManyNewWorkers), errors.Is(err, kvidx.ErrInvalidArgument):
		s.badRequest(w, err)
		return
	case errors.Is(err, errWorkerLimit):
		s.fail(w, http.StatusConflict, err.Error())
		return
	case errors.Is(err, kvidx.ErrParentNotFound):
		// Synchronous mode: the rejected events are counted in the index's stats; the rest
		// applied.
	case err != nil:
		s.fail(w, http.StatusInternalServerError, err.Error())
		return
	}
	resp := eventsResponse{Accepted: len(evs) - ignored, Ignored: ignored}
	if wait {
		after, err := s.flushedStats()
		if err != nil {
			s.fail(w, http.StatusInternalServerError, err.Error())
			return
		}
		applied := after.EventsApplied - before.EventsApplied
		rejected := after.EventsRejected - before.EventsRejected
		unknown := after.UnknownRemovals - before.UnknownRemovals
		resp.Applied, resp.Rejected, resp.UnknownRemovals = &applied, &rejected, &unknown
	}
	writeJSON(w, resp)
}

// flushedStats returns the index's counters once every event accepted so far is applied.
func (s *server) flushedStats() (kvidx.Stats, error) {
	if err := s.ix.Flush(); err != nil {
		return kvidx.Stats{}, err
	}
	return s.ix.Stats()
}

// registerAndApply registers the workers of a request's events and submits the events, under
// the workers' locks (Router.lockWorkers), so that a concurrent DELETE /workers/{id} of one of
// them takes effect wholly before (the events register it again) or wholly after (it is
// removed with them), never in between. Events of a worker that is not known and not
// announced (only removed events) are dropped and counted in ignored. The caller holds
// applyGate (shared, or exclusively for ?wait=1).
func (s *server) registerAndApply(keys []workerKey, announced map[workerKey]bool, evs []kvidx.Event,
	tiers []kvidx.Tier, tiered bool) (ignored int, err error) {
	ids := make([]uint64, len(keys))
	for i, k := range keys {
		ids[i] = k.ID
	}
	unlock := s.router.lockWorkers(ids)
	defer unlock()
	register := keys[:0:0]
	skip := map[workerKey]bool{}
	for _, k := range keys {
		if announced[k] || s.router.known(k) {
			register = append(register, k)
		} else {
			skip[k] = true
		}
	}
	if len(skip) > 0 {
		kept := 0
		for i, ev := range evs {
			if !skip[workerKey{ev.WorkerID, ev.DpRank}] {
				evs[kept], tiers[kept] = ev, tiers[i]
				kept++
			}
		}
		ignored, evs, tiers = len(evs)-kept, evs[:kept], tiers[:kept]
	}
	added, err := s.router.Register(register)
	if err != nil {
		return 0, err
	}
	if s.beforeApply != nil {
		s.beforeApply(register)
	}
	s.metrics.eventsReceived.Add(uint64(len(evs)))
	switch {
	case len(evs) == 0:
	case tiered:
		err = s.ix.ApplyEventsOnTiers(evs, tiers)
	default:
		err = s.ix.ApplyEvents(evs)
	}
	if errors.Is(err, kvidx.ErrInvalidArgument) {
		s.router.unregister(added) // nothing of the request was applied
	}
	return ignored, err
}

func (s *server) postRoute(w http.ResponseWriter, req *http.Request) {
	start := time.Now()
	if s.replica != nil {
		if msg, ok := s.replica.routeGate(w.Header()); !ok {
			s.fail(w, http.StatusServiceUnavailable, msg)
			return
		}
	}
	res := s.budget.reserve()
	defer res.release()
	body, err := decodeRouteBody(http.MaxBytesReader(w, req.Body, s.maxBody), res)
	if err != nil {
		s.failRead(w, err)
		return
	}
	defer body.done()
	rr := body.req
	switch {
	case rr == nil || (rr.TokenIDs == nil && rr.LocalHashes == nil):
		err = errors.New("give token_ids or local_hashes")
	case rr.TokenIDs != nil && rr.LocalHashes != nil:
		err = errors.New("give token_ids or local_hashes, not both")
	case len(rr.TokenIDs) == 0 && len(rr.LocalHashes) == 0:
		err = errors.New("the request is empty: no tokens or block hashes")
	case len(rr.TokenIDs) > 0 && len(rr.TokenIDs) < int(s.blockSize):
		err = fmt.Errorf("token_ids: %d tokens make no full block of %d (a partial block is never cached)",
			len(rr.TokenIDs), s.blockSize)
	case rr.LocalHashes != nil && rr.namespaced():
		err = errors.New("lora_name, cache_salt and mm_spans go with token_ids (local_hashes are already hashed)")
	default:
		err = rr.checkSpans()
	}
	if err != nil {
		s.badRequest(w, err)
		return
	}
	q := rr.LocalHashes
	if rr.TokenIDs != nil {
		if err := res.take(int64(len(rr.TokenIDs)/int(s.blockSize)) * 8); err != nil {
			s.failRead(w, err)
			return
		}
		if q, err = rr.hash(s.blockSize); err != nil {
			s.badRequest(w, err)
			return
		}
	}
	d, ok, err := s.router.Route(q)
	if err != nil {
		s.fail(w, http.StatusInternalServerError, err.Error())
		return
	}
	if !ok {
		s.fail(w, http.StatusServiceUnavailable, "no worker known yet")
		return
	}
	s.metrics.routeLatency.observe(time.Since(start))
	s.metrics.routed.Add(1)
	writeJSON(w, d)
}

// pathID parses the {id} of a path as a uint64.
func pathID(req *http.Request) (uint64, error) {
	id, err := strconv.ParseUint(req.PathValue("id"), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not an id (an integer in [0, 2^64-1])", req.PathValue("id"))
	}
	return id, nil
}

func (s *server) deleteRequest(w http.ResponseWriter, req *http.Request) {
	id, err := pathID(req)
	if err != nil {
		s.badRequest(w, err)
		return
	}
	if !s.router.Done(id) {
		s.fail(w, http.StatusNotFound, "no such request in flight")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *server) deleteWorker(w http.ResponseWriter, req *http.Request) {
	if s.fedElsewhere(w) {
		return
	}
	id, err := pathID(req)
	if err != nil {
		s.badRequest(w, err)
		return
	}
	if err := s.router.RemoveWorker(id); err != nil {
		s.fail(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *server) getMetrics(w http.ResponseWriter, _ *http.Request) {
	st, err := s.ix.Stats()
	if err != nil {
		s.fail(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	s.metrics.write(w, st, s.router, s.budget)
	if s.replica != nil {
		s.replica.writeMetrics(w)
	}
	if s.zmq != nil {
		s.zmq.writeMetrics(w)
	}
}

func (s *server) getReplica(w http.ResponseWriter, _ *http.Request) {
	if s.replica == nil {
		s.fail(w, http.StatusNotFound, "not a replica: start the router with --nats")
		return
	}
	rep, err := s.replica.report()
	if err != nil {
		s.fail(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, rep)
}

func (s *server) getLoad(w http.ResponseWriter, _ *http.Request) {
	rep := s.router.loadReport()
	if s.replica != nil && s.replica.share != nil {
		sh := s.replica.share.report()
		rep.Sharing = &sh
	}
	writeJSON(w, rep)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(v); err != nil {
		slog.Warn(fmt.Sprintf("writing response: %v", err))
	}
}
