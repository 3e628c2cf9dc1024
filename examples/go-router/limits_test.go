package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	kvidx "github.com/kvidx/kvidx/bindings/go"
)

func TestBodyTooLargeIs413(t *testing.T) {
	o := testOptions()
	o.maxBody = 1024
	s := startServer(t, o)
	ok := `{"worker_id": 1, "cleared": {}}` + strings.Repeat(" ", 1024-31)
	s.mustDo("POST", "/events", ok, http.StatusOK) // exactly at the limit
	big := `[` + strings.Repeat(`{"worker_id": 2, "cleared": {}},`, 40) + `{"worker_id": 2, "cleared": {}}]`
	s.wantError("POST", "/events", big, http.StatusRequestEntityTooLarge, "larger than 1024 bytes")
	s.wantError("POST", "/route", `{"local_hashes": [`+strings.Repeat("1,", 600)+`1]}`,
		http.StatusRequestEntityTooLarge, "larger than 1024 bytes")
	if got := s.metric("router_too_large_requests_total"); got != "2" {
		t.Fatalf("too large %s, want 2", got)
	}
	if got := s.metric("kvidx_workers"); got != "1" {
		t.Fatalf("kvidx_workers %s, want 1 (the too-large batch applied nothing)", got)
	}
}

func TestServerTimeouts(t *testing.T) {
	o := testOptions()
	o.timeouts = timeouts{readHeader: 200 * time.Millisecond, read: 400 * time.Millisecond,
		write: 5 * time.Second, idle: 300 * time.Millisecond}
	s := startServer(t, o)
	addr := strings.TrimPrefix(s.base, "http://")
	dial := func() net.Conn {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// closedWithin reads until the server closes the connection; it fails after bound.
	closedWithin := func(c net.Conn, start time.Time, bound time.Duration) time.Duration {
		t.Helper()
		_ = c.SetReadDeadline(time.Now().Add(bound))
		_, err := io.Copy(io.Discard, c)
		if err != nil {
			t.Fatalf("connection still open after %v: %v", bound, err)
		}
		return time.Since(start)
	}

	t.Run("slow header", func(t *testing.T) {
		c := dial()
		start := time.Now()
		fmt.Fprintf(c, "POST /events HTTP/1.1\r\nHost: x\r\n") // and never the end of the header
		if d := closedWithin(c, start, 5*time.Second); d < 150*time.Millisecond {
			t.Fatalf("closed after %v, before the header timeout", d)
		}
	})
	t.Run("slow body", func(t *testing.T) {
		c := dial()
		start := time.Now()
		fmt.Fprintf(c, "POST /events HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n[{\"worker_id\": 1,")
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("no response to a stalled body: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), `"error"`) {
			t.Fatalf("stalled body: status %d %s, want 408 with a JSON error", resp.StatusCode, body)
		}
		if d := time.Since(start); d < 350*time.Millisecond || d > 4*time.Second {
			t.Fatalf("answered after %v, want about the read timeout (400ms)", d)
		}
		closedWithin(c, start, 5*time.Second)
	})
	t.Run("idle keep-alive", func(t *testing.T) {
		c := dial()
		fmt.Fprintf(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("metrics: %v %v", resp, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		start := time.Now()
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.Copy(io.Discard, br); err != nil {
			t.Fatalf("idle connection still open after 5s: %v", err)
		}
		if d := time.Since(start); d < 250*time.Millisecond || d > 4*time.Second {
			t.Fatalf("idle connection closed after %v, want about the idle timeout (300ms)", d)
		}
	})
	// The server still answers afterwards.
	s.mustDo("GET", "/metrics", nil, http.StatusOK)
}

func TestServerSettingsFromOptions(t *testing.T) {
	srv, ix, err := newServer(defaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if srv.ReadHeaderTimeout != 5*time.Second || srv.ReadTimeout != 30*time.Second ||
		srv.WriteTimeout != 30*time.Second || srv.IdleTimeout != 2*time.Minute || srv.MaxHeaderBytes != 64<<10 {
		t.Fatalf("server timeouts %v %v %v %v, max header %d", srv.ReadHeaderTimeout, srv.ReadTimeout,
			srv.WriteTimeout, srv.IdleTimeout, srv.MaxHeaderBytes)
	}
	for _, bad := range []func(*options){
		func(o *options) { o.maxBody = 0 },
		func(o *options) { o.timeouts.idle = 0 },
		func(o *options) { o.limits.MaxWorkers = 0 },
		func(o *options) { o.limits.MaxNewWorkersPerRequest = -1 },
		func(o *options) { o.limits.MaxRoutes = 63 },
		func(o *options) { o.limits.RouteTTL = 0 },
		func(o *options) { o.loadWeight = -1 },
	} {
		o := defaultOptions()
		bad(&o)
		if _, _, err := newServer(o); err == nil {
			t.Errorf("options %+v accepted", o)
		}
	}
}

// cleared returns a JSON array of cleared events, one per worker id.
func cleared(ids ...uint64) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"worker_id": %d, "cleared": {}}`, id)
	}
	b.WriteByte(']')
	return b.String()
}

func TestWorkerLimits(t *testing.T) {
	o := testOptions()
	o.limits.MaxNewWorkersPerRequest, o.limits.MaxWorkers = 3, 5
	s := startServer(t, o)
	workers := func(want string) {
		t.Helper()
		for _, name := range []string{"kvidx_workers", "router_workers"} {
			if got := s.metric(name); got != want {
				t.Fatalf("%s = %s, want %s", name, got, want)
			}
		}
	}
	s.wantError("POST", "/events", cleared(1, 2, 3, 4), http.StatusBadRequest, "too many new workers in one request: 4, at most 3")
	workers("0")
	s.mustDo("POST", "/events", cleared(1, 2, 3, 3, 2), http.StatusOK)
	s.mustDo("POST", "/events", cleared(1, 2, 3), http.StatusOK) // known: not new
	workers("3")
	// A new dp rank is a new worker; three new ones would make 6 > 5.
	s.wantError("POST", "/events", `[{"worker_id": 1, "dp_rank": 1, "cleared": {}}, `+cleared(4, 5)[1:],
		http.StatusConflict, "worker limit reached: 3 known, 3 new, at most 5")
	workers("3")
	s.mustDo("POST", "/events", cleared(4, 5), http.StatusOK)
	s.wantError("POST", "/events", cleared(6), http.StatusConflict, "worker limit reached")
	workers("5")
	s.mustDo("DELETE", "/workers/2", nil, http.StatusNoContent)
	s.mustDo("POST", "/events", cleared(6), http.StatusOK)
	workers("5")
	if d := s.route(routeRequest{LocalHashes: []uint64{1}}); d.WorkerID != 1 {
		t.Fatalf("decision %+v, want the lowest idle worker 1", d)
	}
}

// TestWaitReportsRejections checks that ?wait=1 answers with the outcome of the request's own
// events, in both apply modes, while other requests post events at the same time.
func TestWaitReportsRejections(t *testing.T) {
	for _, threads := range []uint{0, 2} {
		t.Run(fmt.Sprintf("event threads %d", threads), func(t *testing.T) {
			o := testOptions()
			o.eventThreads = threads
			s := startServer(t, o)
			type outcome struct {
				Accepted        int     `json:"accepted"`
				Applied         *uint64 `json:"applied"`
				Rejected        *uint64 `json:"rejected"`
				UnknownRemovals *uint64 `json:"unknown_removals"`
			}
			post := func(path, body string) outcome {
				t.Helper()
				var out outcome
				if err := json.Unmarshal(s.mustDo("POST", path, body, http.StatusOK), &out); err != nil {
					t.Fatal(err)
				}
				return out
			}
			if out := post("/events", cleared(1)); out.Accepted != 1 || out.Applied != nil || out.Rejected != nil {
				t.Fatalf("without wait: %+v, want only accepted", out)
			}
			// Background noise: other workers' events, some rejected, without wait.
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 5000; i++ {
					select {
					case <-stop:
						return
					default:
					}
					body := fmt.Sprintf(`[{"worker_id": 1000, "stored": {"parent_hash": 5, "blocks": [{"block_hash": %d, "tokens_hash": 1}]}},
						{"worker_id": 1000, "removed": {"block_hashes": [12345]}}]`, i)
					if code, out := s.do("POST", "/events", body); code != http.StatusOK {
						t.Errorf("noise: %d %s", code, out)
						return
					}
				}
			}()
			for i := range uint64(50) {
				w := 10 + i
				body := fmt.Sprintf(`[
					{"worker_id": %d, "stored": {"parent_hash": null, "blocks": [{"block_hash": 70, "tokens_hash": 7}, {"block_hash": 80, "tokens_hash": 8}]}},
					{"worker_id": %d, "stored": {"parent_hash": 999, "blocks": [{"block_hash": 90, "tokens_hash": 9}]}},
					{"worker_id": %d, "removed": {"block_hashes": [80, 12345, 777]}},
					{"worker_id": %d, "stored": {"parent_hash": 4242, "blocks": [{"block_hash": 91, "tokens_hash": 9}]}}]`, w, w, w, w)
				out := post("/events?wait=1", body)
				if out.Accepted != 4 || out.Applied == nil || *out.Applied != 2 || *out.Rejected != 2 || *out.UnknownRemovals != 2 {
					t.Fatalf("wait=1 outcome %+v (applied %v rejected %v unknown %v), want 4 accepted, 2 applied, 2 rejected, 2 unknown removals",
						out, deref(out.Applied), deref(out.Rejected), deref(out.UnknownRemovals))
				}
			}
			close(stop)
			wg.Wait()
			out := post("/events?wait=1", cleared(2))
			if *out.Applied != 1 || *out.Rejected != 0 || *out.UnknownRemovals != 0 {
				t.Fatalf("clean batch: %+v", out)
			}
		})
	}
}

func deref(p *uint64) any {
	if p == nil {
		return nil
	}
	return *p
}

// newTestRouter returns a router over a fresh synchronous index.
func newTestRouter(t *testing.T, loadWeight float64, limits Limits) *Router {
	t.Helper()
	ix, err := kvidx.New(kvidx.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ix.Close() })
	r, err := NewRouter(ix, loadWeight, limits)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// loads returns every known worker's requests in flight, checking each shard's heap order.
func (r *Router) loads(t *testing.T) map[workerKey]int {
	t.Helper()
	out := map[workerKey]int{}
	for i := range r.workers {
		sh := &r.workers[i]
		sh.mu.RLock()
		for j, st := range sh.heap {
			out[st.key] = st.inflight
			if st.pos != j || (j > 0 && sh.less(st, sh.heap[(j-1)/2])) {
				t.Errorf("shard %d: heap broken at %d", i, j)
			}
		}
		sh.mu.RUnlock()
	}
	return out
}

func TestRoutesExpireAndAreBounded(t *testing.T) {
	limits := DefaultLimits()
	limits.RouteTTL = time.Minute
	r := newTestRouter(t, 1, limits)
	now := time.Unix(1000, 0)
	r.now = func() time.Time { return now }
	if _, err := r.Register([]workerKey{{1, 0}, {2, 0}}); err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	for range 4 {
		d, ok, err := r.Route([]uint64{5})
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		ids = append(ids, d.RequestID)
	}
	if got := r.loads(t); got[workerKey{1, 0}] != 2 || got[workerKey{2, 0}] != 2 || r.InFlight() != 4 {
		t.Fatalf("loads %v, in flight %d", got, r.InFlight())
	}
	now = now.Add(59 * time.Second)
	if !r.Done(ids[0]) || r.InFlight() != 3 {
		t.Fatalf("in flight %d after one done before the TTL", r.InFlight())
	}
	now = now.Add(2 * time.Second) // the other three are past their TTL
	if n := r.InFlight(); n != 0 {
		t.Fatalf("in flight %d after the TTL, want 0", n)
	}
	if got := r.loads(t); got[workerKey{1, 0}] != 0 || got[workerKey{2, 0}] != 0 {
		t.Fatalf("loads %v after expiry, want 0", got)
	}
	if r.expired.Load() != 3 || r.Done(ids[1]) {
		t.Fatalf("expired %d; an expired route must not be done again", r.expired.Load())
	}

	// Never released: at most MaxRoutes are tracked, the oldest are forgotten.
	limits.MaxRoutes = 64
	r = newTestRouter(t, 1, limits)
	if _, err := r.Register([]workerKey{{1, 0}, {2, 0}, {3, 0}}); err != nil {
		t.Fatal(err)
	}
	const n = 1000
	var last uint64
	for range n {
		d, _, err := r.Route([]uint64{9})
		if err != nil {
			t.Fatal(err)
		}
		last = d.RequestID
	}
	sum := 0
	for _, l := range r.loads(t) {
		sum += l
	}
	if got := r.InFlight(); got != 64 || sum != 64 || r.evicted.Load() != n-64 {
		t.Fatalf("in flight %d, load sum %d, evicted %d: want 64, 64, %d", got, sum, r.evicted.Load(), n-64)
	}
	if !r.Done(last) || r.Done(1) {
		t.Fatal("the newest route must still be tracked, the oldest not")
	}
	for i := range r.routes {
		rs := &r.routes[i]
		if len(rs.order)-rs.head > 64+2*len(rs.routes) {
			t.Fatalf("a shard keeps %d ids for %d routes", len(rs.order)-rs.head, len(rs.routes))
		}
	}
}

// fullScan is the reference router: every known worker's cost, as the router once computed
// it by looking at all of them (blocks weighted by their fastest tier with DefaultTierWeights).
func fullScan(q []uint64, matches []kvidx.TieredMatch, loads map[workerKey]int, w float64) (best workerKey, bd Decision) {
	byKey := map[workerKey]kvidx.TieredMatch{}
	for _, m := range matches {
		byKey[workerKey{m.WorkerID, m.DpRank}] = m
	}
	found := false
	for k, inflight := range loads {
		m := byKey[k]
		c := Decision{WorkerID: k.ID, DpRank: k.DpRank, OverlapBlocks: m.Depth, RequestBlocks: len(q), InFlight: inflight,
			TierDepths: tierDepthsOf(m.TierDepths), HitBlocks: m.Score(DefaultTierWeights)}
		c.Cost = float64(len(q)) - c.HitBlocks + w*float64(inflight)
		if !found || better(c, bd, k, best) {
			best, bd, found = k, c, true
		}
	}
	return best, bd
}

// TestRouteEqualsFullScan drives random events, routes and releases, and checks every
// decision against the full scan over all workers.
func TestRouteEqualsFullScan(t *testing.T) {
	for _, w := range []float64{0, 0.5, 4} {
		t.Run(fmt.Sprintf("load weight %v", w), func(t *testing.T) {
			r := newTestRouter(t, w, DefaultLimits())
			rng := rand.New(rand.NewPCG(uint64(w*10), 3))
			loads := map[workerKey]int{}
			var open []Decision
			for step := range 3000 {
				switch op := rng.IntN(10); {
				case op < 2: // a worker stores a chain
					k := workerKey{uint64(rng.IntN(200)), uint32(rng.IntN(2))}
					n := 1 + rng.IntN(6)
					local := make([]uint64, n)
					for i := range local {
						local[i] = uint64(1 + rng.IntN(3))
					}
					seq, err := kvidx.SeqHashes(local)
					if err != nil {
						t.Fatal(err)
					}
					blocks := make([]kvidx.Block, n)
					for i := range blocks {
						blocks[i] = kvidx.Block{LocalHash: local[i], SeqHash: seq[i]}
					}
					if _, err := r.Register([]workerKey{k}); err != nil {
						t.Fatal(err)
					}
					// Mostly on the device, else on a random tier (a block already held gains it).
					tier := kvidx.TierDevice
					if rng.IntN(3) == 0 {
						tier = kvidx.Tier(rng.IntN(kvidx.NumTiers))
					}
					if err := r.ix.ApplyEventOnTier(kvidx.StoredEvent(k.ID, k.DpRank, 0, blocks), tier); err != nil {
						t.Fatal(err)
					}
					// Sometimes a block of the chain leaves the device (evicted to the other
					// tiers the worker holds it on, if any).
					if rng.IntN(4) == 0 {
						ev := kvidx.RemovedEvent(k.ID, k.DpRank, 1, []uint64{seq[rng.IntN(n)]})
						if err := r.ix.ApplyEventOnTier(ev, kvidx.TierDevice); err != nil {
							t.Fatal(err)
						}
					}
					if _, ok := loads[k]; !ok {
						loads[k] = 0
					}
				case op < 3 && len(loads) > 0: // a worker leaves
					id := uint64(rng.IntN(200))
					if err := r.RemoveWorker(id); err != nil {
						t.Fatal(err)
					}
					for k := range loads {
						if k.ID == id {
							delete(loads, k)
						}
					}
					open = slices.DeleteFunc(open, func(d Decision) bool { return d.WorkerID == id })
				case op < 5 && len(open) > 0: // a request is done
					i := rng.IntN(len(open))
					d := open[i]
					open = slices.Delete(open, i, i+1)
					if !r.Done(d.RequestID) {
						t.Fatalf("step %d: request %d not in flight", step, d.RequestID)
					}
					loads[workerKey{d.WorkerID, d.DpRank}]--
				default: // a request is routed
					q := make([]uint64, rng.IntN(7))
					for i := range q {
						q[i] = uint64(1 + rng.IntN(3))
					}
					matches, err := r.ix.FindMatchesTiered(q)
					if err != nil {
						t.Fatal(err)
					}
					d, ok, err := r.Route(q)
					if err != nil {
						t.Fatal(err)
					}
					if ok != (len(loads) > 0) {
						t.Fatalf("step %d: ok %v with %d workers", step, ok, len(loads))
					}
					if !ok {
						continue
					}
					wantKey, want := fullScan(q, matches, loads, w)
					want.RequestID = d.RequestID
					if d != want {
						t.Fatalf("step %d: decision %+v, the full scan says %+v (worker %v)", step, d, want, wantKey)
					}
					loads[wantKey]++
					open = append(open, d)
				}
			}
			if got := r.loads(t); !mapsEqual(got, loads) {
				t.Fatalf("loads %v, want %v", got, loads)
			}
		})
	}
}

func mapsEqual(a, b map[workerKey]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestConcurrentRouting routes, releases, registers and removes from many goroutines (run
// it with -race); once every request is done, no load may remain.
func TestConcurrentRouting(t *testing.T) {
	limits := DefaultLimits()
	limits.MaxRoutes = 1 << 16
	r := newTestRouter(t, 2, limits)
	var keys []workerKey
	for id := range uint64(64) {
		keys = append(keys, workerKey{id, 0})
	}
	if _, err := r.Register(keys); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	deadline := time.Now().Add(2 * time.Second)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 11))
			var open []uint64
			for i := 0; i < 20000 && time.Now().Before(deadline); i++ {
				switch rng.IntN(8) {
				case 0:
					id := 100 + uint64(rng.IntN(32))
					if g%2 == 0 {
						_, _ = r.Register([]workerKey{{id, uint32(rng.IntN(2))}})
					} else if err := r.RemoveWorker(id); err != nil {
						t.Error(err)
						return
					}
				case 1, 2, 3:
					d, ok, err := r.Route([]uint64{uint64(rng.IntN(4))})
					if err != nil || !ok {
						t.Error("route", ok, err)
						return
					}
					open = append(open, d.RequestID)
				default:
					if len(open) > 0 {
						r.Done(open[len(open)-1]) // false if its worker was removed
						open = open[:len(open)-1]
					}
				}
			}
			for _, id := range open {
				r.Done(id)
			}
		}()
	}
	wg.Wait()
	if n := r.InFlight(); n != 0 {
		t.Fatalf("%d routes in flight after every one was done", n)
	}
	for k, l := range r.loads(t) {
		if l != 0 {
			t.Errorf("worker %v keeps load %d", k, l)
		}
	}
	if got, want := r.Workers(), len(r.loads(t)); got != want {
		t.Fatalf("worker count %d, %d in the shards", got, want)
	}
}

// routeMedian returns the median time of Route with n idle workers registered.
func routeMedian(t *testing.T, n int) time.Duration {
	limits := DefaultLimits()
	limits.MaxWorkers, limits.MaxNewWorkersPerRequest = n, n
	r := newTestRouter(t, 4, limits)
	keys := make([]workerKey, n)
	for i := range keys {
		keys[i] = workerKey{uint64(i), 0}
	}
	if _, err := r.Register(keys); err != nil {
		t.Fatal(err)
	}
	times := make([]time.Duration, 301)
	for i := range times {
		start := time.Now()
		d, ok, err := r.Route([]uint64{uint64(i), 2, 3})
		times[i] = time.Since(start)
		if err != nil || !ok || !r.Done(d.RequestID) {
			t.Fatal(ok, err)
		}
	}
	slices.Sort(times)
	return times[len(times)/2]
}

// TestRouteTimeIndependentOfWorkers is the short version of the load test: Route must not
// look at every worker (it once did, under one mutex: 1M workers made it 100x slower).
func TestRouteTimeIndependentOfWorkers(t *testing.T) {
	small, large := routeMedian(t, 1000), routeMedian(t, 256*1024)
	t.Logf("Route median: %v with 1k workers, %v with 256k workers", small, large)
	if large > 10*small+200*time.Microsecond {
		t.Fatalf("Route takes %v with 256k workers, %v with 1k: it scales with the workers", large, small)
	}
}

// TestRouterSoak routes without ever releasing, while workers come and go, and checks that
// what the router keeps stays bounded: tracked routes within MaxRoutes, the routes' id lists
// within a few times the routes, the Go heap flat. 1 s in the normal run; set
// KVIDX_ROUTER_SOAK_SECONDS (e.g. 180) for the long version.
func TestRouterSoak(t *testing.T) {
	seconds := envInt(t, "KVIDX_ROUTER_SOAK_SECONDS", 1)
	limits := DefaultLimits()
	limits.MaxRoutes, limits.RouteTTL = 4096, 200*time.Millisecond
	r := newTestRouter(t, 4, limits)
	var keys []workerKey
	for id := range uint64(256) {
		keys = append(keys, workerKey{id, 0})
	}
	if _, err := r.Register(keys); err != nil {
		t.Fatal(err)
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse
	}
	var base uint64
	deadline := time.Now().Add(time.Duration(seconds) * time.Second)
	warm := time.Now().Add(time.Duration(seconds) * time.Second / 4)
	rng := rand.New(rand.NewPCG(5, 5))
	routes := 0
	for i := 0; time.Now().Before(deadline) && i < 1<<30; i++ {
		if _, ok, err := r.Route([]uint64{uint64(rng.IntN(64))}); err != nil || !ok {
			t.Fatal(ok, err)
		}
		routes++
		if i%1000 == 0 { // churn: one worker leaves, another arrives
			id := uint64(rng.IntN(512))
			if err := r.RemoveWorker(id); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Register([]workerKey{{uint64(rng.IntN(512)), 0}}); err != nil {
				t.Fatal(err)
			}
		}
		if i%100000 == 99999 { // a pause longer than the TTL: everything expires
			time.Sleep(limits.RouteTTL + 50*time.Millisecond)
			if n := r.InFlight(); n != 0 {
				t.Fatalf("%d routes in flight after the TTL", n)
			}
			for k, l := range r.loads(t) {
				if l != 0 {
					t.Fatalf("worker %v keeps load %d after the TTL", k, l)
				}
			}
		}
		if i%20000 == 0 {
			if n := r.InFlight(); n > limits.MaxRoutes {
				t.Fatalf("%d routes tracked, limit %d", n, limits.MaxRoutes)
			}
			for j := range r.routes {
				rs := &r.routes[j]
				rs.mu.Lock()
				pending, live := len(rs.order)-rs.head, len(rs.routes)
				rs.mu.Unlock()
				if pending > 65+4*live {
					t.Fatalf("route shard %d keeps %d ids for %d routes", j, pending, live)
				}
			}
			if base == 0 && time.Now().After(warm) {
				base = heap()
			} else if h := heap(); base != 0 && h > base+16<<20 {
				t.Fatalf("heap grew from %d to %d bytes", base, h)
			}
		}
	}
	n := r.InFlight() // expires what is due; nothing changes the loads afterwards
	sum := 0
	for _, l := range r.loads(t) {
		sum += l
	}
	if sum != n {
		t.Fatalf("load sum %d, %d routes in flight", sum, n)
	}
	t.Logf("%d routes in %ds, %d expired, %d evicted, %d in flight", routes, seconds, r.expired.Load(), r.evicted.Load(), r.InFlight())
}
