package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// tokenBody is a POST /route body of n token ids.
func tokenBody(n int) string {
	return `{"token_ids": [` + strings.Repeat("1,", n-1) + `1]}`
}

// metricInt reads an integer metric.
func (s *testServer) metricInt(name string) int64 {
	s.t.Helper()
	v, err := strconv.ParseInt(s.metric(name), 10, 64)
	if err != nil {
		s.t.Fatalf("%s: %v", name, err)
	}
	return v
}

// The bytes requests hold at once (bodies being read, decoded ids) stay within
// -max-inflight-bytes: while one request holds most of it, concurrent large ones get 503
// with Retry-After and the JSON error; one that alone needs more than the bound gets 413;
// the peak the router measured never exceeds the bound.
func TestInflightBytesAreBounded(t *testing.T) {
	const limit = 1 << 20
	o := testOptions()
	o.maxBody, o.maxInflight = 1<<20, limit
	s := startServer(t, o)
	s.mustDo("POST", "/events", cleared(1), http.StatusOK)

	// A request that stalls in the middle of its body holds its decoded ids: 100k token ids
	// in a slice of 131072 (512 KiB), plus its 16 KiB read buffer.
	const stalledIDs, held = 100_000, routeReadBuffer + 131072*4
	c, err := net.Dial("tcp", strings.TrimPrefix(s.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	head := `{"token_ids": [` + strings.Repeat("1,", stalledIDs)
	fmt.Fprintf(c, "POST /route HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		len(head)+3, head)
	deadline := time.Now().Add(30 * time.Second)
	for s.metricInt("router_inflight_bytes") < held {
		if time.Now().After(deadline) {
			t.Fatalf("the stalled request holds %d bytes, want %d", s.metricInt("router_inflight_bytes"), held)
		}
	}

	// Concurrent requests of the same size do not fit beside it: 503, Retry-After, JSON.
	const concurrent = 8
	var wg sync.WaitGroup
	errs := make(chan string, concurrent)
	for range concurrent {
		wg.Go(func() {
			resp, err := http.Post(s.base+"/route", "application/json", strings.NewReader(tokenBody(stalledIDs)))
			if err != nil {
				errs <- err.Error()
				return
			}
			defer resp.Body.Close()
			var e errorResponse
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" ||
				json.Unmarshal(body, &e) != nil || !strings.Contains(e.Error, "in flight") {
				errs <- fmt.Sprintf("status %d, Retry-After %q, body %q; want 503 with Retry-After and the JSON error",
					resp.StatusCode, resp.Header.Get("Retry-After"), body)
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if got := s.metricInt("router_overloaded_requests_total"); got != concurrent {
		t.Errorf("router_overloaded_requests_total %d, want %d", got, concurrent)
	}
	// A small request fits.
	if d := s.route(routeRequest{TokenIDs: make([]uint32, 16)}); d.WorkerID != 1 {
		t.Fatalf("decision %+v", d)
	}

	// The stalled request completes.
	fmt.Fprint(c, "1]}")
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the stalled request: status %d", resp.StatusCode)
	}

	// A request whose ids alone need more than the bound: 413.
	s.wantError("POST", "/route", tokenBody(300_000), http.StatusRequestEntityTooLarge, "needs more memory than -max-inflight-bytes")

	if peak, lim := s.metricInt("router_inflight_bytes_peak"), s.metricInt("router_inflight_bytes_limit"); peak > lim || lim != limit || peak < held {
		t.Fatalf("peak in-flight bytes %d, limit %d; want the peak within the limit %d (and at least %d)", peak, lim, limit, held)
	}
}
