package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	kvidx "github.com/kvidx/kvidx/bindings/go"
)

// testServer is a router listening on a random loopback port.
type testServer struct {
	t      *testing.T
	base   string
	client *http.Client
}

func startServer(t *testing.T, o options) *testServer {
	t.Helper()
	s, _, _ := startAPI(t, o)
	return s
}

// testOptions are the command-line defaults with synchronous events and 4-token blocks.
func testOptions() options {
	o := defaultOptions()
	o.eventThreads, o.blockSize = 0, 4
	return o
}

// do sends a request and returns the status code and body.
func (s *testServer) do(method, path string, body any) (int, []byte) {
	s.t.Helper()
	resp, out := s.doResp(method, path, body)
	return resp.StatusCode, out
}

// doResp sends a request and returns the response (its body closed) and its body.
func (s *testServer) doResp(method, path string, body any) (*http.Response, []byte) {
	s.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			s.t.Fatal(err)
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, s.base+path, r)
	if err != nil {
		s.t.Fatal(err)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	return resp, out
}

// wantError sends a request and checks that it fails with the status and a JSON body
// {"error": "..."} containing want, in the API's terms (no Go types or decoder prefixes).
func (s *testServer) wantError(method, path, body string, code int, want string) {
	s.t.Helper()
	resp, out := s.doResp(method, path, body)
	if resp.StatusCode != code {
		s.t.Errorf("%s %s %s: status %d (%s), want %d", method, path, body, resp.StatusCode, out, code)
		return
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		s.t.Errorf("%s %s %s: Content-Type %q, want application/json", method, path, body, ct)
	}
	var e struct {
		Error string `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || e.Error == "" {
		s.t.Errorf("%s %s %s: body %q is not {\"error\": \"...\"}: %v", method, path, body, out, err)
		return
	}
	if !strings.Contains(e.Error, want) {
		s.t.Errorf("%s %s %s: error %q, want it to contain %q", method, path, body, e.Error, want)
	}
	for _, internal := range []string{"json:", "Go ", "struct", "main.", "wireEvent", "routeRequest", "uint64", "uint32"} {
		if strings.Contains(e.Error, internal) {
			s.t.Errorf("%s %s %s: error %q shows Go internals (%q)", method, path, body, e.Error, internal)
		}
	}
}

func (s *testServer) mustDo(method, path string, body any, want int) []byte {
	s.t.Helper()
	code, out := s.do(method, path, body)
	if code != want {
		s.t.Fatalf("%s %s: status %d (%s), want %d", method, path, code, out, want)
	}
	return out
}

func (s *testServer) route(body any) Decision {
	s.t.Helper()
	var d Decision
	if err := json.Unmarshal(s.mustDo("POST", "/route", body, http.StatusOK), &d); err != nil {
		s.t.Fatal(err)
	}
	return d
}

// metric reads one unlabelled sample from GET /metrics.
func (s *testServer) metric(name string) string {
	s.t.Helper()
	text := string(s.mustDo("GET", "/metrics", nil, http.StatusOK))
	for line := range strings.Lines(text) {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			return strings.TrimSpace(rest)
		}
	}
	s.t.Fatalf("metric %s missing from:\n%s", name, text)
	return ""
}

// storedFromTokens builds a stored event for a worker caching tokens, with the hashing
// contract's local and sequence hashes, as an engine would publish it.
func storedFromTokens(t *testing.T, worker uint64, tokens []uint32) kvEvent {
	t.Helper()
	local, err := kvidx.HashTokens(tokens, 4)
	if err != nil {
		t.Fatal(err)
	}
	seq, err := kvidx.SeqHashes(local)
	if err != nil {
		t.Fatal(err)
	}
	st := &storedData{}
	for i := range local {
		st.Blocks = append(st.Blocks, storedBlock{BlockHash: seq[i], TokensHash: local[i]})
	}
	return kvEvent{WorkerID: worker, Stored: st}
}

func TestRoutesToCachedPrefixAndAwayFromRemovedWorker(t *testing.T) {
	s := startServer(t, testOptions())
	prompt := []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}
	s.mustDo("POST", "/events", []kvEvent{
		storedFromTokens(t, 2, prompt[:12]),
		storedFromTokens(t, 1, prompt[:4]),
		{WorkerID: 3, Cleared: &struct{}{}},
	}, http.StatusOK)

	d := s.route(routeRequest{TokenIDs: prompt})
	if d.WorkerID != 2 || d.OverlapBlocks != 3 || d.RequestBlocks != 3 {
		t.Fatalf("decision %+v: want worker 2 with its 3 cached blocks", d)
	}
	s.mustDo("DELETE", fmt.Sprintf("/requests/%d", d.RequestID), nil, http.StatusNoContent)

	// Worker 2 leaves: the prefix's next best holder is worker 1 (one block).
	s.mustDo("DELETE", "/workers/2", nil, http.StatusNoContent)
	d = s.route(routeRequest{TokenIDs: prompt})
	if d.WorkerID != 1 || d.OverlapBlocks != 1 {
		t.Fatalf("decision %+v after removing worker 2: want worker 1", d)
	}
	if got := s.metric("kvidx_workers"); got != "2" {
		t.Fatalf("kvidx_workers %s, want 2", got)
	}
	if got := s.metric("router_in_flight_requests"); got != "1" {
		t.Fatalf("in flight %s, want 1", got)
	}
	if got := s.metric("router_route_latency_seconds_count"); got != "2" {
		t.Fatalf("route latency count %s, want 2", got)
	}
}

func TestLoadSpreadsRequestsWithoutCachedPrefix(t *testing.T) {
	s := startServer(t, testOptions())
	var evs []kvEvent
	for w := uint64(1); w <= 3; w++ {
		evs = append(evs, kvEvent{WorkerID: w, Cleared: &struct{}{}})
	}
	s.mustDo("POST", "/events", evs, http.StatusOK)
	var got []uint64
	var first Decision
	for i := range 3 {
		d := s.route(routeRequest{LocalHashes: []uint64{42, 43}})
		if i == 0 {
			first = d
		}
		got = append(got, d.WorkerID)
	}
	slices.Sort(got)
	if !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("three requests went to %v: want one per worker", got)
	}
	// Once the first request is done, its worker is the least loaded again.
	s.mustDo("DELETE", fmt.Sprintf("/requests/%d", first.RequestID), nil, http.StatusNoContent)
	if d := s.route(routeRequest{LocalHashes: []uint64{42}}); d.WorkerID != first.WorkerID {
		t.Fatalf("decision %+v: want the idle worker %d", d, first.WorkerID)
	}
}

func TestEventsOutcomeInMetrics(t *testing.T) {
	o := testOptions()
	o.backend, o.eventThreads, o.loadWeight = "radix", 2, 1
	s := startServer(t, o)
	parent := uint64(999)
	s.mustDo("POST", "/events?wait=1", `[
		{"worker_id": 5, "dp_rank": 1, "event_id": 1,
		 "stored": {"parent_hash": null, "blocks": [{"block_hash": 70, "tokens_hash": 7}, {"block_hash": 80, "tokens_hash": 8}]}},
		{"worker_id": 5, "dp_rank": 1, "event_id": 2, "removed": {"block_hashes": [80, 12345]}}
	]`, http.StatusOK)
	s.mustDo("POST", "/events?wait=1", kvEvent{WorkerID: 6, EventID: 1, Stored: &storedData{
		ParentHash: &parent, Blocks: []storedBlock{{BlockHash: 1, TokensHash: 1}}}}, http.StatusOK)
	for name, want := range map[string]string{
		"kvidx_events_applied_total":   "2",
		"kvidx_events_rejected_total":  "1",
		"kvidx_unknown_removals_total": "1",
		"kvidx_workers":                "1",
		"kvidx_worker_blocks":          "1",
		"router_events_received_total": "3",
	} {
		if got := s.metric(name); got != want {
			t.Errorf("%s = %s, want %s", name, got, want)
		}
	}
	if d := s.route(routeRequest{LocalHashes: []uint64{7, 8}}); d.WorkerID != 5 || d.DpRank != 1 || d.OverlapBlocks != 1 {
		t.Fatalf("decision %+v", d)
	}
}

// TestBadRequests checks that bad input gets 400 (or 404, 503) with a JSON error body in
// the API's terms, and changes nothing.
func TestBadRequests(t *testing.T) {
	s := startServer(t, testOptions())
	s.wantError("POST", "/route", `{"local_hashes": [1]}`, http.StatusServiceUnavailable, "no worker known")
	for _, c := range []struct{ method, path, body, want string }{
		{"POST", "/events", `{"worker_id": 1`, "ends in the middle"},
		{"POST", "/events", `{"worker_id": 1, "event_id": 1}`, "exactly one of"},
		{"POST", "/events", `{"worker_id": 1, "cleared": {}, "removed": {"block_hashes": []}}`, "exactly one of"},
		{"POST", "/events", `{"worker_id": 1, "cleared": {}, "bogus": 1}`, `unknown field "bogus"`},
		{"POST", "/events", `{"worker_id": -1, "cleared": {}}`, "worker_id: expected an integer in [0, 18446744073709551615], got number -1"},
		{"POST", "/events", `{"worker_id": "7", "cleared": {}}`, "worker_id: expected an integer"},
		{"POST", "/events", `{"worker_id": 1, "dp_rank": 4294967296, "cleared": {}}`, "dp_rank: expected an integer in [0, 4294967295]"},
		{"POST", "/events", `{"cleared": {}}`, "event 0: worker_id is missing"},
		{"POST", "/events", `{"worker_id": null, "cleared": {}}`, "event 0: worker_id is missing"},
		{"POST", "/events", `[{"worker_id": 1, "cleared": {}}, {"dp_rank": 1, "cleared": {}}]`, "event 1: worker_id is missing"},
		{"POST", "/events", `null`, "null is not an event"},
		{"POST", "/events", `[null]`, "null is not an event"},
		{"POST", "/events", `[]`, "the array is empty"},
		{"POST", "/events", ``, "the body is empty"},
		{"POST", "/events", `{"worker_id": 1, "cleared": {}} {}`, "trailing data"},
		{"POST", "/events", `{"worker_id": 1, "cleared": {}`, "ends in the middle"},
		{"POST", "/events", `{"worker_id": 1 "cleared": {}}`, "invalid JSON at byte 17"},
		{"POST", "/events", `{"worker_id": 1, "stored": {"blocks": [{"block_hash": 1.5}]}}`, "stored.blocks.block_hash: expected an integer"},
		{"POST", "/route", `{"token_ids": [1], "local_hashes": [1]}`, "not both"},
		{"POST", "/route", `[1, 2]`, "the body: expected an object, got array"},
		{"POST", "/route", `null`, "give token_ids or local_hashes"},
		{"POST", "/route", `{}`, "give token_ids or local_hashes"},
		{"POST", "/route", `{"local_hashes": null}`, "give token_ids or local_hashes"},
		{"POST", "/route", `{"token_ids": []}`, "the request is empty"},
		{"POST", "/route", `{"local_hashes": []}`, "the request is empty"},
		{"POST", "/route", `{"token_ids": [-1]}`, "token_ids: expected an integer in [0, 4294967295]"},
		{"DELETE", "/workers/abc", "", `"abc" is not an id`},
		{"DELETE", "/requests/x", "", `"x" is not an id`},
	} {
		s.wantError(c.method, c.path, c.body, http.StatusBadRequest, c.want)
	}
	s.wantError("DELETE", "/requests/77", "", http.StatusNotFound, "no such request")
	s.wantError("GET", "/events", "", http.StatusMethodNotAllowed, "/events takes POST, not GET")
	s.wantError("POST", "/workers/3", "", http.StatusMethodNotAllowed, "/workers/{id} takes DELETE, not POST")
	s.wantError("GET", "/nope", "", http.StatusNotFound, "no such endpoint: /nope")
	if got := s.metric("router_bad_requests_total"); got != "32" {
		t.Fatalf("bad requests %s, want 32 (every 4xx)", got)
	}
	for _, name := range []string{"kvidx_workers", "router_workers", "router_events_received_total", "kvidx_events_applied_total"} {
		if got := s.metric(name); got != "0" {
			t.Errorf("%s = %s after refused requests, want 0", name, got)
		}
	}
}

// workloadOp is one line of a workload file (docs/contract.md section 4).
type workloadOp struct {
	Op          string      `json:"op"`
	Worker      uint64      `json:"worker"`
	DpRank      uint32      `json:"dp_rank"`
	EventID     uint64      `json:"event_id"`
	Parent      *uint64     `json:"parent"`
	Blocks      [][2]uint64 `json:"blocks"`
	SeqHashes   []uint64    `json:"seq_hashes"`
	LocalHashes []uint64    `json:"local_hashes"`
}

// toEvent converts a workload event line into the router's JSON event.
func (op *workloadOp) toEvent(t *testing.T) kvEvent {
	ev := kvEvent{WorkerID: op.Worker, DpRank: op.DpRank, EventID: op.EventID}
	switch op.Op {
	case "stored":
		ev.Stored = &storedData{ParentHash: op.Parent}
		for _, b := range op.Blocks {
			ev.Stored.Blocks = append(ev.Stored.Blocks, storedBlock{TokensHash: b[0], BlockHash: b[1]})
		}
	case "removed":
		ev.Removed = &removedData{BlockHashes: op.SeqHashes}
	case "cleared":
		ev.Cleared = &struct{}{}
	default:
		t.Fatalf("unknown op %q", op.Op)
	}
	return ev
}

// TestWorkloadReplay drives the router over loopback with a workload file from the bench tool:
// events go to POST /events, each match line becomes POST /route. An index of its own, fed the
// same events, says what every answer must be: with every request released at once, all loads
// are zero, so the router must pick the deepest holder (ties: lowest worker id, then rank), or
// the lowest known worker when nobody holds the first block.
func TestWorkloadReplay(t *testing.T) {
	path := os.Getenv("KVIDX_WORKLOAD")
	if path == "" {
		path = "testdata/workload.jsonl"
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	o := testOptions()
	o.eventThreads, o.blockSize = 2, 16
	s := startServer(t, o)
	oracle, err := kvidx.New(kvidx.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer oracle.Close()

	known := map[workerKey]bool{}
	var pending []kvEvent
	var pendingIdx []kvidx.Event
	routes, hits, events := 0, 0, 0
	const maxRoutes = 1000 // bounded: at most ~3 requests per route
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() && routes < maxRoutes {
		var op workloadOp
		if err := json.Unmarshal(sc.Bytes(), &op); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if op.Op != "match" {
			ev := op.toEvent(t)
			ie, err := ev.toIndexEvent()
			if err != nil {
				t.Fatal(err)
			}
			pending, pendingIdx = append(pending, ev), append(pendingIdx, ie)
			known[workerKey{op.Worker, op.DpRank}] = true
			events++
			continue
		}
		if len(pending) > 0 {
			s.mustDo("POST", "/events?wait=1", pending, http.StatusOK)
			if err := oracle.ApplyEvents(pendingIdx); err != nil {
				t.Fatalf("oracle: %v", err)
			}
			pending, pendingIdx = pending[:0], pendingIdx[:0]
		}
		if len(known) == 0 {
			s.mustDo("POST", "/route", routeRequest{LocalHashes: op.LocalHashes}, http.StatusServiceUnavailable)
			continue
		}
		want, err := oracle.FindMatches(op.LocalHashes)
		if err != nil {
			t.Fatal(err)
		}
		d := s.route(routeRequest{LocalHashes: op.LocalHashes})
		routes++
		var wantKey workerKey
		var wantDepth uint32
		if len(want) > 0 {
			wantKey, wantDepth = workerKey{want[0].WorkerID, want[0].DpRank}, want[0].Depth
			hits++
		} else {
			keys := slices.Collect(func(yield func(workerKey) bool) {
				for k := range known {
					if !yield(k) {
						return
					}
				}
			})
			wantKey = slices.MinFunc(keys, workerKey.compare)
		}
		if (workerKey{d.WorkerID, d.DpRank}) != wantKey || d.OverlapBlocks != wantDepth {
			t.Fatalf("route %d: decision %+v, want worker %v with %d blocks (matches %v)",
				routes, d, wantKey, wantDepth, want)
		}
		s.mustDo("DELETE", fmt.Sprintf("/requests/%d", d.RequestID), nil, http.StatusNoContent)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	stats, err := oracle.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if got := s.metric("kvidx_worker_blocks"); got != fmt.Sprint(stats.WorkerBlocks) {
		t.Fatalf("router holds %s blocks, oracle %d", got, stats.WorkerBlocks)
	}
	if routes == 0 || hits == 0 {
		t.Fatalf("%d routes, %d with a cached prefix: the workload exercised nothing", routes, hits)
	}
	t.Logf("%s: %d events, %d routes, %d routed to a cached prefix, %d blocks held at the end",
		path, events, routes, hits, stats.WorkerBlocks)
}
