package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// envInt reads a positive integer from the environment, or returns def.
func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// TestRouteLatencyLoad registers KVIDX_ROUTER_LOAD_WORKERS workers (cleared events over
// POST /events, in batches the router accepts), then runs KVIDX_ROUTER_LOAD_CLIENTS clients
// that each loop POST /route + DELETE /requests/{id} on 127.0.0.1 for KVIDX_ROUTER_LOAD_SECONDS,
// and logs the client-side /route latency percentiles. Opt-in: it runs only when
// KVIDX_ROUTER_LOAD is set; the short version in the normal run is
// TestRouteTimeIndependentOfWorkers.
func TestRouteLatencyLoad(t *testing.T) {
	if os.Getenv("KVIDX_ROUTER_LOAD") == "" {
		t.Skip("set KVIDX_ROUTER_LOAD=1 to run the /route load test")
	}
	workers := envInt(t, "KVIDX_ROUTER_LOAD_WORKERS", 1<<20)
	clients := envInt(t, "KVIDX_ROUTER_LOAD_CLIENTS", 4)
	seconds := envInt(t, "KVIDX_ROUTER_LOAD_SECONDS", 5)
	p50, p99, n := routeLoad(t, loadTestOptions(workers), workers, clients, time.Duration(seconds)*time.Second)
	t.Logf("route load: %d workers, %d clients, %ds: %d routes, p50 %v, p99 %v", workers, clients, seconds, n, p50, p99)
}

// routeLoad registers workers, runs the clients for d and returns the /route latency p50, p99
// and the number of routes.
func routeLoad(t *testing.T, o options, workers, clients int, d time.Duration) (p50, p99 time.Duration, n int) {
	s := startServer(t, o)
	const chunk = 50_000
	start := time.Now()
	for lo := 0; lo < workers; lo += chunk {
		var b bytes.Buffer
		b.WriteByte('[')
		for w := lo; w < min(lo+chunk, workers); w++ {
			if w > lo {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"worker_id":%d,"cleared":{}}`, w+1)
		}
		b.WriteByte(']')
		s.mustDo("POST", "/events", b.String(), http.StatusOK)
	}
	t.Logf("registered %d workers in %v", workers, time.Since(start).Round(time.Millisecond))
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	lat := make([][]time.Duration, clients)
	var wg sync.WaitGroup
	deadline := time.Now().Add(d)
	errs := make(chan error, clients)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 7))
			for i := 0; time.Now().Before(deadline) && i < 10_000_000; i++ {
				body := fmt.Sprintf(`{"local_hashes":[%d,%d,%d,%d]}`, rng.Uint64(), rng.Uint64(), rng.Uint64(), rng.Uint64())
				t0 := time.Now()
				resp, err := client.Post(s.base+"/route", "application/json", bytes.NewReader([]byte(body)))
				if err != nil {
					errs <- err
					return
				}
				out, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				lat[c] = append(lat[c], time.Since(t0))
				if resp.StatusCode != http.StatusOK {
					errs <- fmt.Errorf("route: %d %s", resp.StatusCode, out)
					return
				}
				var dec struct {
					RequestID uint64 `json:"request_id"`
				}
				if err := json.Unmarshal(out, &dec); err != nil {
					errs <- err
					return
				}
				req, _ := http.NewRequest("DELETE", fmt.Sprintf("%s/requests/%d", s.base, dec.RequestID), nil)
				if resp, err = client.Do(req); err != nil {
					errs <- err
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	all := slices.Concat(lat...)
	if len(all) == 0 {
		t.Fatal("no route completed")
	}
	slices.Sort(all)
	return all[len(all)/2], all[len(all)*99/100], len(all)
}

// loadTestOptions are the test options with limits that let the load test register its
// workers in 50k-event requests.
func loadTestOptions(workers int) options {
	o := testOptions()
	o.limits.MaxWorkers, o.limits.MaxNewWorkersPerRequest = max(workers, 1), 50_000
	return o
}
