package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A replica answers /route only from an index that has caught up with the stream once
// (unless --serve-while-behind), and never after the stream it follows was deleted or
// recreated: its sequences then name other messages, so nothing the stream delivers can be
// applied correctly any more (docs/replicas.md).

// pollOnce reads the stream's state: its last sequence (for the lag), whether the replica
// has caught up with it, and whether it is still the stream this replica follows.
func (r *replica) pollOnce(ctx context.Context) {
	applied := r.applied.Load() // before the read: every message at or below it was in the stream
	c, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	in, err := r.stream.Info(c)
	r.observeStream(applied, in, err)
}

// observeStream judges one read of the stream's state made after applied was read. A
// stream reported missing counts as deleted from the second read in a row (a server that
// is still loading its streams may answer "not found" once).
func (r *replica) observeStream(applied uint64, in *jetstream.StreamInfo, err error) {
	missing := errors.Is(err, jetstream.ErrStreamNotFound)
	wasMissing := r.streamMissing.Swap(missing)
	switch {
	case missing && wasMissing:
		r.streamTop.Store(0)
		r.noteStreamReset("the stream " + streamName + " was deleted")
	case err != nil:
		return // the server is unreachable or slow: nothing is known
	case in.Created.UnixNano() != r.streamCreated:
		r.streamTop.Store(in.State.LastSeq)
		r.noteStreamReset(fmt.Sprintf("the stream %s was recreated (created at %s; this replica followed the one created at %s)",
			streamName, in.Created.UTC().Format(time.RFC3339Nano), time.Unix(0, r.streamCreated).UTC().Format(time.RFC3339Nano)))
	case in.State.LastSeq < applied:
		r.streamTop.Store(in.State.LastSeq)
		r.noteStreamReset(fmt.Sprintf("the last sequence of %s went back to %d, below the %d this replica applied: the stream was recreated",
			streamName, in.State.LastSeq, applied))
	default:
		r.streamTop.Store(in.State.LastSeq)
		if in.State.LastSeq <= applied {
			r.noteCaughtUp() // an empty stream at start included
		}
	}
}

// noteStreamReset records (once) that the stream this replica follows is gone: the replica
// stops applying messages and answers /route with 503 until it is restarted.
func (r *replica) noteStreamReset(reason string) {
	if r.streamReset.CompareAndSwap(nil, &reason) {
		slog.Error(fmt.Sprintf("replica: %s: no longer routing or applying; restart this replica to rebuild its index from the new stream", reason))
	}
}

// resetReason is why the stream this replica follows is gone ("" while it is there).
func (r *replica) resetReason() string {
	if p := r.streamReset.Load(); p != nil {
		return *p
	}
	return ""
}

// routeGate says whether /route may be answered now, setting the response headers that go
// with the answer: when not, a Retry-After and the reason (503); when serving from an index
// that has not caught up yet (--serve-while-behind), the header Kvidx-Replica-Behind with
// the lag in messages.
func (r *replica) routeGate(h http.Header) (string, bool) {
	if reason := r.resetReason(); reason != "" {
		h.Set("Retry-After", "30")
		return "this replica stopped routing: " + reason + "; restart it to rebuild from the new stream", false
	}
	if r.isCaughtUp() {
		return "", true
	}
	applied, top := r.applied.Load(), r.streamTop.Load()
	if r.o.serveBehind {
		h.Set("Kvidx-Replica-Behind", strconv.FormatUint(top-min(applied, top), 10))
		return "", true
	}
	h.Set("Retry-After", "1")
	return fmt.Sprintf("this replica is catching up with the stream %s (applied %d of %d): it routes once caught up (--serve-while-behind routes meanwhile)",
		streamName, applied, top), false
}

// isCaughtUp says whether the consumer has reached the end of the stream once.
func (r *replica) isCaughtUp() bool {
	r.catchMu.Lock()
	defer r.catchMu.Unlock()
	return r.caughtUp != nil
}
