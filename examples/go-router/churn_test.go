package main

import (
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	kvidx "github.com/kvidx/kvidx/bindings/go"
)

// startAPI is startServer that also returns the API's state and the index.
func startAPI(t *testing.T, o options) (*testServer, *server, *kvidx.Indexer) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, ix, api, err := buildServer(o)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		_ = ix.Close()
	})
	return &testServer{t: t, base: "http://" + ln.Addr().String(), client: &http.Client{Timeout: 10 * time.Second}}, api, ix
}

// indexAndRouterWorkers returns the index's workers (once every event is applied) and the
// router's candidates.
func indexAndRouterWorkers(t *testing.T, ix *kvidx.Indexer, api *server) (index uint64, router int) {
	t.Helper()
	if err := ix.Flush(); err != nil {
		t.Fatal(err)
	}
	st, err := ix.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return st.Workers, api.router.Workers()
}

// storedFor is a POST /events body storing one block on a worker.
func storedFor(id uint64) string {
	return fmt.Sprintf(`{"worker_id": %d, "event_id": 1, "stored": {"blocks": [{"block_hash": %d, "tokens_hash": 7}]}}`, id, id)
}

// A DELETE /workers/{id} issued while POST /events has registered the worker but not yet
// applied its events takes effect wholly before or after the request: the index and the
// router agree on every worker. The DELETE is started at exactly that point (beforeApply)
// and the POST goes on only once it has finished or is waiting for the worker's lock.
func TestRemoveWorkerDuringRegistration(t *testing.T) {
	for _, threads := range []uint{0, 2} {
		t.Run(fmt.Sprintf("event-threads=%d", threads), func(t *testing.T) {
			o := testOptions()
			o.eventThreads = threads
			s, api, ix := startAPI(t, o)
			var removed sync.WaitGroup
			api.beforeApply = func(ws []workerKey) {
				waits := api.router.lockWaits.Load()
				done := make(chan struct{})
				removed.Go(func() {
					defer close(done)
					if err := api.router.RemoveWorker(ws[0].ID); err != nil {
						t.Error(err)
					}
				})
				for {
					select {
					case <-done:
						return
					default:
					}
					if api.router.lockWaits.Load() > waits {
						return // the removal waits for this request's worker lock
					}
					runtime.Gosched()
				}
			}
			for id := range uint64(20) {
				s.mustDo("POST", "/events", storedFor(id), http.StatusOK)
				removed.Wait()
				if index, router := indexAndRouterWorkers(t, ix, api); index != uint64(router) {
					t.Fatalf("after the race on worker %d: %d workers in the index, %d in the router", id, index, router)
				}
			}
		})
	}
}

// Many concurrent POST /events and DELETE /workers pairs for fresh workers, with a small
// -max-workers: afterwards the index and the router hold the same workers, within the bound.
func TestEventsRacingWorkerRemovals(t *testing.T) {
	const rounds, parallel, maxWorkers = 400, 8, 16
	for _, threads := range []uint{0, 2} {
		t.Run(fmt.Sprintf("event-threads=%d", threads), func(t *testing.T) {
			o := testOptions()
			o.eventThreads = threads
			o.limits.MaxWorkers = maxWorkers
			s, api, ix := startAPI(t, o)
			do := func(method, path, body string) error {
				req, err := http.NewRequest(method, s.base+path, strings.NewReader(body))
				if err != nil {
					return err
				}
				resp, err := s.client.Do(req)
				if err != nil {
					return err
				}
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusOK, http.StatusNoContent, http.StatusConflict: // 409: bound reached
					return nil
				}
				return fmt.Errorf("%s %s: status %d", method, path, resp.StatusCode)
			}
			var wg sync.WaitGroup
			errs := make(chan error, 2*rounds)
			next := make(chan uint64)
			for range parallel {
				wg.Go(func() {
					for id := range next {
						var pair sync.WaitGroup
						pair.Go(func() { errs <- do("POST", "/events", storedFor(id)) })
						pair.Go(func() { errs <- do("DELETE", fmt.Sprintf("/workers/%d", id), "") })
						pair.Wait()
					}
				})
			}
			for id := range uint64(rounds) {
				next <- id + 1000
			}
			close(next)
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			index, router := indexAndRouterWorkers(t, ix, api)
			if index != uint64(router) || router > maxWorkers {
				t.Fatalf("%d workers in the index, %d in the router (at most %d)", index, router, maxWorkers)
			}
			t.Logf("%d rounds: %d workers kept in both", rounds, router)
		})
	}
}
