package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"time"
)

// newLogger returns the router's logger: text lines on w, from level up (-log-level: debug
// logs every request; info, the default, the start, the replica's progress and errors).
func newLogger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

// logRequests wraps next so that each request is logged at debug level once answered, with
// its method, path, status and duration. When logger does not log debug lines, next is
// returned as is: the requests pay nothing for logging.
func logRequests(next http.Handler, logger *slog.Logger) http.Handler {
	if !logger.Enabled(context.Background(), slog.LevelDebug) {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, req)
		logger.LogAttrs(req.Context(), slog.LevelDebug, "request",
			slog.String("method", req.Method), slog.String("path", req.URL.Path),
			slog.Int("status", rec.status()), slog.Duration("duration", time.Since(start)))
	})
}

// statusRecorder remembers the status a handler answered with.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap gives http.ResponseController the writer below.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// status is the answered status (200 when the handler wrote nothing).
func (s *statusRecorder) status() int {
	if s.code == 0 {
		return http.StatusOK
	}
	return s.code
}
