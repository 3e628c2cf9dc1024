package main

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// -log-level takes slog's level names; info is the default, and a bad name is a usage error.
func TestLogLevelFlag(t *testing.T) {
	for args, want := range map[string]slog.Level{"": slog.LevelInfo, "-log-level debug": slog.LevelDebug,
		"--log-level=warn": slog.LevelWarn, "-log-level ERROR": slog.LevelError} {
		o, exit, done := parseCommandLine(strings.Fields(args), io.Discard, io.Discard)
		if done || exit != 0 || o.logLevel != want {
			t.Errorf("%q: level %v (exit %d, done %v); want %v", args, o.logLevel, exit, done, want)
		}
	}
	var stderr bytes.Buffer
	if _, exit, done := parseCommandLine([]string{"-log-level", "loud"}, io.Discard, &stderr); !done || exit != 2 ||
		!strings.Contains(stderr.String(), "-log-level") {
		t.Errorf("-log-level loud: exit %d, done %v, stderr %q; want a usage error", exit, done, stderr.String())
	}
}

// At debug level each request is logged with its method, path, status and duration; at info
// level requests are not logged and the handler is not wrapped.
func TestRequestsAreLoggedAtDebugLevel(t *testing.T) {
	api := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/missing" {
			http.Error(w, "no", http.StatusNotFound)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	var logs bytes.Buffer
	h := logRequests(api, newLogger(&logs, slog.LevelDebug))
	for _, target := range []string{"/route", "/missing"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, target, nil))
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d log lines, want 2:\n%s", len(lines), logs.String())
	}
	for i, want := range []string{"method=POST path=/route status=200 duration=", "method=POST path=/missing status=404 duration="} {
		if !strings.Contains(lines[i], "level=DEBUG msg=request "+want) {
			t.Errorf("line %d: %q; want it to contain %q", i, lines[i], want)
		}
	}

	var quiet bytes.Buffer
	h = logRequests(api, newLogger(&quiet, slog.LevelInfo))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/route", nil))
	if quiet.Len() != 0 {
		t.Errorf("info level logged a request: %q", quiet.String())
	}
}

// The catch-up line gives the rate over the time spent applying only: a replica that waited
// for its first message says it was idle instead of dividing by the wait.
func TestCatchUpMessage(t *testing.T) {
	for _, tc := range []struct {
		name          string
		wall, apply   time.Duration
		msgs, events  uint64
		want, without string
	}{
		{"idle, then one message", 234650800 * time.Microsecond, 200 * time.Microsecond, 1, 1,
			"replica: caught up with the stream at 1: 1 messages, 1 events applied in 0.2 ms (5000 events/s); idle 234650.6 ms of the 234650.8 ms since the consumer started (waiting for messages)",
			"(0 events/s)"},
		{"busy catch-up", 2000 * time.Millisecond, 2000*time.Millisecond - 300*time.Microsecond, 100, 40000,
			"replica: caught up with the stream at 1: 100 messages, 40000 events applied in 1999.7 ms (20003 events/s)",
			"idle"},
		{"empty stream", 3 * time.Millisecond, 0, 0, 0,
			"replica: caught up with the stream at 1: nothing to apply (3.0 ms after the consumer started)",
			"events/s"},
	} {
		got := catchUpMessage(1, newCatchUpReport(tc.wall, tc.apply, tc.msgs, tc.events))
		if got != tc.want || strings.Contains(got, tc.without) {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}
