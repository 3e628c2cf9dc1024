package main

import (
	"encoding/json"
	"net/http"
	"testing"
)

// Incomplete input gets a clear 400, or the documented behaviour, and changes nothing.
func TestIncompleteInput(t *testing.T) {
	s := startServer(t, testOptions()) // 4-token blocks
	for _, c := range []struct{ body, want string }{
		{`{"worker_id": 1, "stored": {"blocks": [{}]}}`, "event 0: worker 1 event 0: stored block 0: block_hash is missing"},
		{`{"worker_id": 1, "stored": {"blocks": [{"tokens_hash": 5}]}}`, "stored block 0: block_hash is missing"},
		{`{"worker_id": 1, "stored": {"blocks": [{"block_hash": 5, "tokens_hash": 6}, {"block_hash": 7}]}}`,
			"stored block 1: tokens_hash is missing"},
	} {
		s.wantError("POST", "/events", c.body, http.StatusBadRequest, c.want)
	}
	s.wantError("POST", "/route", `{"token_ids": [1, 2, 3]}`, http.StatusBadRequest,
		"token_ids: 3 tokens make no full block of 4")
	for _, name := range []string{"kvidx_workers", "router_workers", "kvidx_worker_blocks"} {
		if got := s.metric(name); got != "0" {
			t.Errorf("%s = %s after refused input, want 0", name, got)
		}
	}

	// A removed event about a never-seen worker is ignored: not applied, not a candidate.
	var resp eventsResponse
	out := s.mustDo("POST", "/events?wait=1", `{"worker_id": 9, "event_id": 1, "removed": {"block_hashes": [5]}}`, http.StatusOK)
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Accepted != 0 || resp.Ignored != 1 || deref(resp.Applied) != uint64(0) {
		t.Fatalf("response %s, want accepted 0, ignored 1, applied 0", out)
	}
	for _, name := range []string{"kvidx_workers", "router_workers"} {
		if got := s.metric(name); got != "0" {
			t.Errorf("%s = %s after a removed event for an unknown worker, want 0", name, got)
		}
	}
	s.wantError("POST", "/route", `{"local_hashes": [5]}`, http.StatusServiceUnavailable, "no worker known")

	// Once the worker announced itself (stored or cleared), its removed events apply.
	s.mustDo("POST", "/events", `{"worker_id": 9, "event_id": 2, "stored": {"blocks": [{"block_hash": 5, "tokens_hash": 6}]}}`, http.StatusOK)
	out = s.mustDo("POST", "/events?wait=1", `{"worker_id": 9, "event_id": 3, "removed": {"block_hashes": [5]}}`, http.StatusOK)
	resp = eventsResponse{}
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Accepted != 1 || resp.Ignored != 0 || deref(resp.Applied) != uint64(1) {
		t.Fatalf("response %s, want accepted 1, applied 1", out)
	}
	if d := s.route(routeRequest{TokenIDs: []uint32{1, 2, 3, 4, 5}}); d.RequestBlocks != 1 || d.WorkerID != 9 {
		t.Fatalf("decision %+v, want 1 request block (the partial one dropped) on worker 9", d)
	}
}
