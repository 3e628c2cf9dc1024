package main

import (
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http"
	"strconv"
	"time"

	kvidx "github.com/kvidx/kvidx/bindings/go"
)

// maxBody bounds request bodies (events batches included).
const maxBody = 32 << 20

// server is the HTTP front of a Router.
type server struct {
	router    *Router
	ix        *kvidx.Indexer
	blockSize uint32
	metrics   *metrics
}

// routeRequest is the body of POST /route: token ids (hashed with the router's block size)
// or the request's local block hashes.
type routeRequest struct {
	TokenIDs    []uint32 `json:"token_ids"`
	LocalHashes []uint64 `json:"local_hashes"`
}

// newHandler returns the router's HTTP API:
//
//	POST   /events              KV events (one object or an array); ?wait=1 returns once applied
//	POST   /route               {"token_ids": [...]} or {"local_hashes": [...]} -> Decision
//	DELETE /requests/{id}       the routed request is done (no longer counts as load)
//	DELETE /workers/{id}        forget a worker (all dp ranks)
//	GET    /metrics             Prometheus text
func newHandler(r *Router, ix *kvidx.Indexer, blockSize uint32) http.Handler {
	s := &server{router: r, ix: ix, blockSize: blockSize, metrics: newMetrics()}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /events", s.postEvents)
	mux.HandleFunc("POST /route", s.postRoute)
	mux.HandleFunc("DELETE /requests/{id}", s.deleteRequest)
	mux.HandleFunc("DELETE /workers/{id}", s.deleteWorker)
	mux.HandleFunc("GET /metrics", s.getMetrics)
	return mux
}

func (s *server) badRequest(w http.ResponseWriter, err error) {
	s.metrics.badRequests.Add(1)
	http.Error(w, err.Error(), http.StatusBadRequest)
}

func (s *server) postEvents(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, maxBody))
	if err != nil {
		s.badRequest(w, err)
		return
	}
	raw, err := decodeEvents(body)
	if err != nil {
		s.badRequest(w, err)
		return
	}
	evs := make([]kvidx.Event, len(raw))
	for i := range raw {
		if evs[i], err = raw[i].toIndexEvent(); err != nil {
			s.badRequest(w, err)
			return
		}
	}
	s.metrics.eventsReceived.Add(uint64(len(evs)))
	err = s.ix.ApplyEvents(evs)
	switch {
	case errors.Is(err, kvidx.ErrParentNotFound):
		// Synchronous mode: the rejected event is counted in the index's stats; the rest applied.
	case errors.Is(err, kvidx.ErrInvalidArgument):
		s.badRequest(w, err)
		return
	case err != nil:
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	s.router.Observe(evs)
	if req.URL.Query().Get("wait") == "1" {
		if err := s.ix.Flush(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	writeJSON(w, map[string]int{"accepted": len(evs)})
}

func (s *server) postRoute(w http.ResponseWriter, req *http.Request) {
	start := time.Now()
	var rr routeRequest
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, maxBody))
	if err == nil {
		err = strictUnmarshal(body, &rr)
	}
	if err == nil && len(rr.TokenIDs) > 0 && len(rr.LocalHashes) > 0 {
		err = errors.New("give token_ids or local_hashes, not both")
	}
	if err != nil {
		s.badRequest(w, err)
		return
	}
	q := rr.LocalHashes
	if len(rr.TokenIDs) > 0 {
		if q, err = kvidx.HashTokens(rr.TokenIDs, s.blockSize); err != nil {
			s.badRequest(w, err)
			return
		}
	}
	d, ok, err := s.router.Route(q)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if !ok {
		http.Error(w, "no worker known yet", http.StatusServiceUnavailable)
		return
	}
	s.metrics.routeLatency.observe(time.Since(start))
	s.metrics.routed.Add(1)
	writeJSON(w, d)
}

func (s *server) deleteRequest(w http.ResponseWriter, req *http.Request) {
	id, err := strconv.ParseUint(req.PathValue("id"), 10, 64)
	if err != nil {
		s.badRequest(w, err)
		return
	}
	if !s.router.Done(id) {
		http.Error(w, "no such request in flight", http.StatusNotFound)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *server) deleteWorker(w http.ResponseWriter, req *http.Request) {
	id, err := strconv.ParseUint(req.PathValue("id"), 10, 64)
	if err != nil {
		s.badRequest(w, err)
		return
	}
	if err := s.router.RemoveWorker(id); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *server) getMetrics(w http.ResponseWriter, _ *http.Request) {
	st, err := s.ix.Stats()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	s.metrics.write(w, st, s.router.InFlight())
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(v); err != nil {
		log.Printf("writing response: %v", err)
	}
}
