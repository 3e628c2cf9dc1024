package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// rawRequest sends raw bytes on a new connection and reads one response (its body read).
func rawRequest(t *testing.T, s *testServer, raw string) (*http.Response, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(s.base, "http://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%q: no response: %v", raw, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(body)
}

// Paths with empty, . or .. segments get 400 with the JSON error, never a redirect (the mux
// would redirect DELETE /requests/../workers/3 to /workers/3).
func TestUncleanPathsAre400NotRedirects(t *testing.T) {
	s := startServer(t, testOptions())
	s.mustDo("POST", "/events", cleared(3), http.StatusOK)
	for _, p := range []string{"/requests/../workers/3", "/requests/%2e%2e/workers/3", "//workers/3",
		"/workers/./3", "/workers/3/..", "/events/.", "/./metrics"} {
		method := "DELETE"
		if strings.HasSuffix(p, "metrics") {
			method = "GET"
		}
		resp, body := rawRequest(t, s, method+" "+p+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		var e errorResponse
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Location") != "" ||
			resp.Header.Get("Content-Type") != "application/json" || json.Unmarshal([]byte(body), &e) != nil ||
			!strings.Contains(e.Error, "not clean") {
			t.Errorf("%s %s: %d, Location %q, body %q; want 400 with a JSON error, no redirect",
				method, p, resp.StatusCode, resp.Header.Get("Location"), body)
		}
	}
	if got := s.metric("router_workers"); got != "1" {
		t.Fatalf("router_workers %s: worker 3 was deleted through an unclean path", got)
	}
}

// The statuses Go's HTTP server answers itself, before the router's handler, in plain text
// (docs/go.md lists them): each is what the docs say.
func TestStatusesFromGoServer(t *testing.T) {
	s := startServer(t, testOptions())
	for _, c := range []struct {
		name, raw string
		code      int
		empty     bool // no body at all (else a plain-text one)
	}{
		{"header too large", "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 80<<10) + "\r\n\r\n", 431, false},
		{"unsupported transfer encoding", "POST /events HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501, false},
		{"bad Content-Length", "POST /events HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400, false},
		{"missing Host", "GET /metrics HTTP/1.1\r\n\r\n", 400, false},
		{"malformed request line", "GET\r\n\r\n", 400, false},
		{"unsupported HTTP version", "GET /metrics HTTP/2.0\r\nHost: x\r\n\r\n", 505, false},
		{"unsupported Expect", "POST /events HTTP/1.1\r\nHost: x\r\nExpect: magic\r\nContent-Length: 2\r\n\r\n{}", 417, true},
		{"OPTIONS *", "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", 200, true},
	} {
		resp, body := rawRequest(t, s, c.raw)
		plain := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain")
		if resp.StatusCode != c.code || (c.empty && body != "") || (!c.empty && !plain) {
			t.Errorf("%s: %d %q (%q), want %d (plain text or empty) as documented", c.name, resp.StatusCode,
				resp.Header.Get("Content-Type"), body, c.code)
		}
	}
	// The server still answers.
	s.mustDo("GET", "/metrics", nil, http.StatusOK)
}
