package zmqfeed

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"
	kvidx "github.com/kvidx/kvidx/bindings/go"
)

// Options are a [Subscriber]'s settings; the zero value of each field takes its default.
type Options struct {
	// Format is the engine's wire format (default [kvidx.EngineVLLM], the zero value).
	Format kvidx.EngineFormat
	// Topic is the topic prefix subscribed to (default "": every message; engines publish
	// "kv@<pod>@<model>" or "" ).
	Topic string
	// ConnectTimeout bounds one connection attempt, TCP and ZMTP handshake (default 2 s).
	ConnectTimeout time.Duration
	// MaxBackoff is the longest wait between two connection attempts; the wait starts at
	// 50 ms and doubles after each failed or lost connection (default 2 s).
	MaxBackoff time.Duration
	// MaxMessageBytes bounds one message, all its frames (default 64 MiB): a peer announcing
	// more is disconnected before the frame is allocated.
	MaxMessageBytes uint64
	// ReplayMaxBatches, ReplayMaxBytes and ReplayTimeout bound one replay reply (defaults
	// 10,000 batches, vLLM's buffer; 64 MiB; 10 s); beyond, the replay fails and the gap stays.
	ReplayMaxBatches int
	ReplayMaxBytes   uint64
	ReplayTimeout    time.Duration
	// Logger receives connection and gap reports (default slog.Default()).
	Logger *slog.Logger
}

// withDefaults fills the zero fields.
func (o Options) withDefaults() Options {
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 2 * time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 2 * time.Second
	}
	if o.MaxMessageBytes == 0 {
		o.MaxMessageBytes = 64 << 20
	}
	if o.ReplayMaxBatches <= 0 {
		o.ReplayMaxBatches = 10_000
	}
	if o.ReplayMaxBytes == 0 {
		o.ReplayMaxBytes = 64 << 20
	}
	if o.ReplayTimeout <= 0 {
		o.ReplayTimeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// initialBackoff is the first wait before connecting again.
const initialBackoff = 50 * time.Millisecond

// Stats are a [Subscriber]'s counters.
type Stats struct {
	// Connects counts the connections made to the PUB endpoint; ConnectFailures the
	// attempts that failed (refused, timed out, not ZMTP); Disconnects the connections lost.
	Connects, ConnectFailures, Disconnects uint64
	// Epochs counts the epochs begun (at a connection's first batch, or a sequence going
	// back): each cleared the worker before its batches were applied.
	Epochs uint64
	// Received counts the live batches received; BadMessages the live messages that were
	// not [topic, 8-byte sequence, payload].
	Received, BadMessages uint64
	// Gaps counts the live batches that followed missing ones (an epoch's first batch above
	// 0 included); Restarts the sequences that went back within a connection.
	Gaps, Restarts uint64
	// Replayed counts the batches obtained from the replay socket and applied;
	// ReplayFailures the replay requests that failed.
	Replayed, ReplayFailures uint64
	// Refused counts the batches the feed refused as malformed or too large.
	Refused uint64
	// LastSeq is the sequence of the last batch applied.
	LastSeq uint64
	// Feed is the engine feed's own counters (batches, events, gaps it saw, workers cleared).
	Feed kvidx.EngineStats
}

// counters are Stats' live fields.
type counters struct {
	connects, connectFailures, disconnects, epochs, received, badMessages atomic.Uint64
	gaps, restarts, replayed, replayFailures, refused, lastSeq            atomic.Uint64
}

// Subscriber feeds an index from one engine publisher; see the package documentation.
type Subscriber struct {
	src  Source
	ix   *kvidx.Indexer
	feed *kvidx.EngineFeed
	o    Options
	log  *slog.Logger
	c    counters

	running sync.Mutex // held by Run
	tracker epochTracker
	dealer  *conn // the replay connection of the current epoch, if any
}

// New makes a subscriber that applies src's batches to (src.WorkerID, src.DpRank) of ix
// through an engine feed of its own (flags 0: a gap that stays is answered by clearing the
// worker). It connects nothing until [Subscriber.Run]; release the feed with
// [Subscriber.Close].
func New(ix *kvidx.Indexer, src Source, o Options) (*Subscriber, error) {
	if err := checkEndpoint(src.Endpoint); err != nil {
		return nil, err
	}
	if src.Replay != "" {
		if err := checkEndpoint(src.Replay); err != nil {
			return nil, err
		}
	}
	o = o.withDefaults()
	feed, err := kvidx.NewEngineFeed(o.Format, 0)
	if err != nil {
		return nil, err
	}
	log := o.Logger.With("zmq", src.Endpoint, "worker_id", src.WorkerID, "dp_rank", src.DpRank)
	return &Subscriber{src: src, ix: ix, feed: feed, o: o, log: log}, nil
}

// Source returns the publisher the subscriber follows.
func (s *Subscriber) Source() Source { return s.src }

// Close releases the engine feed; call it once Run has returned.
func (s *Subscriber) Close() error { return s.feed.Close() }

// Stats returns the counters.
func (s *Subscriber) Stats() Stats {
	st := Stats{
		Connects: s.c.connects.Load(), ConnectFailures: s.c.connectFailures.Load(),
		Disconnects: s.c.disconnects.Load(), Epochs: s.c.epochs.Load(),
		Received: s.c.received.Load(), BadMessages: s.c.badMessages.Load(),
		Gaps: s.c.gaps.Load(), Restarts: s.c.restarts.Load(),
		Replayed: s.c.replayed.Load(), ReplayFailures: s.c.replayFailures.Load(),
		Refused: s.c.refused.Load(), LastSeq: s.c.lastSeq.Load(),
	}
	st.Feed, _ = s.feed.Stats()
	return st
}

// errIndex wraps an index or feed failure after which Run cannot go on.
var errIndex = errors.New("zmqfeed: the index refused a change")

// Run connects to the publisher and applies its batches until ctx ends, connecting again
// (with a backoff) after a failed or lost connection. It returns nil once ctx has ended, or
// an error wrapping the index's when the index or feed fails (closed, poisoned). Run may not
// be called twice at once.
func (s *Subscriber) Run(ctx context.Context) error {
	if !s.running.TryLock() {
		return errors.New("zmqfeed: Run is already running")
	}
	defer s.running.Unlock()
	defer s.dropDealer()
	backoff := initialBackoff
	for ctx.Err() == nil {
		sub, err := s.connect(ctx)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			s.c.connectFailures.Add(1)
			s.log.Warn("zmq: connecting again", "error", err, "in", backoff)
			backoff = pause(ctx, backoff, s.o.MaxBackoff)
			continue
		}
		s.c.connects.Add(1)
		s.log.Info("zmq: connected")
		s.tracker.connected()
		err = s.read(ctx, sub, &backoff)
		sub.close()
		if errors.Is(err, errIndex) {
			return err
		}
		if ctx.Err() != nil {
			break
		}
		s.c.disconnects.Add(1)
		s.log.Warn("zmq: connection lost; connecting again", "error", err, "in", backoff)
		backoff = pause(ctx, backoff, s.o.MaxBackoff)
	}
	return nil
}

// connect dials the PUB endpoint and subscribes to the topic.
func (s *Subscriber) connect(ctx context.Context) (*conn, error) {
	sub, err := dial(ctx, s.src.Endpoint, zmq4.Sub, s.o.ConnectTimeout, s.o.MaxMessageBytes)
	if err != nil {
		return nil, err
	}
	if err := sub.send(append([]byte{1}, s.o.Topic...)); err != nil {
		sub.close()
		return nil, fmt.Errorf("%s: subscribe: %w", s.src.Endpoint, err)
	}
	return sub, nil
}

// read applies the connection's batches until it fails or ctx ends.
func (s *Subscriber) read(ctx context.Context, sub *conn, backoff *time.Duration) error {
	for {
		frames, err := sub.recv()
		if err != nil {
			return err
		}
		*backoff = initialBackoff // the connection works
		if len(frames) == 0 || !bytes.HasPrefix(frames[0], []byte(s.o.Topic)) {
			continue // a publisher need not filter
		}
		if len(frames) != 3 || len(frames[1]) != 8 {
			s.c.badMessages.Add(1)
			continue
		}
		s.c.received.Add(1)
		if err := s.take(ctx, binary.BigEndian.Uint64(frames[1]), frames[2]); err != nil {
			return err
		}
	}
}

// take applies one live batch, after what its arrival needs: the replayed batches of a gap,
// and at an epoch's start the worker's removal.
func (s *Subscriber) take(ctx context.Context, seq uint64, payload []byte) error {
	a := s.tracker.arrive(seq)
	if a.newEpoch {
		s.dropDealer() // a replay always comes from the engine of its epoch
	}
	if a.wentBack {
		s.c.restarts.Add(1)
		s.log.Warn("zmq: the sequence went back: the engine restarted", "seq", seq)
	}
	var fill []replayed
	if a.missing {
		s.c.gaps.Add(1)
		if s.src.Replay != "" {
			fill = s.replay(ctx, a.from, seq)
		}
		if n := uint64(len(fill)); n < seq-a.from {
			s.log.Warn("zmq: batches missed", "from", a.from, "to", seq-1, "replayed", n)
		}
	}
	if a.newEpoch {
		s.c.epochs.Add(1)
		if err := s.feed.RemoveWorkerDpRank(s.ix, s.src.WorkerID, s.src.DpRank); err != nil {
			return fmt.Errorf("%w: clearing the worker for a new epoch: %w", errIndex, err)
		}
	}
	for _, b := range fill {
		if err := s.apply(b.seq, b.payload); err != nil {
			return err
		}
		s.c.replayed.Add(1)
	}
	return s.apply(seq, payload)
}

// replay asks the replay socket for [from, seq) and returns what of it came, in order; a
// failed request returns nothing and drops the replay connection.
func (s *Subscriber) replay(ctx context.Context, from, seq uint64) []replayed {
	if s.dealer == nil {
		d, err := dial(ctx, s.src.Replay, zmq4.Dealer, s.o.ConnectTimeout, s.o.MaxMessageBytes)
		if err != nil {
			s.c.replayFailures.Add(1)
			s.log.Warn("zmq: replay", "error", err)
			return nil
		}
		s.dealer = d
	}
	lim := replayLimits{maxBatches: s.o.ReplayMaxBatches, maxBytes: s.o.ReplayMaxBytes, timeout: s.o.ReplayTimeout}
	batches, err := fetch(s.dealer, from, lim)
	if err != nil {
		s.c.replayFailures.Add(1)
		s.log.Warn("zmq: replay", "error", err)
		s.dropDealer() // the rest of a failed reply may still come
		return nil
	}
	return fillable(batches, from, seq)
}

// dropDealer closes the replay connection, if any.
func (s *Subscriber) dropDealer() {
	if s.dealer != nil {
		s.dealer.close()
		s.dealer = nil
	}
}

// apply applies one batch through the feed. A batch the feed refuses (malformed, too large)
// is counted and skipped (the feed then sees a gap at the next one); any other failure ends
// Run.
func (s *Subscriber) apply(seq uint64, payload []byte) error {
	frame := binary.BigEndian.AppendUint64(make([]byte, 0, 8), seq)
	r, err := s.feed.Apply(s.ix, s.src.WorkerID, s.src.DpRank, frame, payload)
	s.tracker.applied(seq)
	s.c.lastSeq.Store(seq)
	switch {
	case errors.Is(err, kvidx.ErrMalformed), errors.Is(err, kvidx.ErrTooLarge):
		s.c.refused.Add(1)
		s.log.Warn("zmq: batch refused", "seq", seq, "error", err)
		return nil
	case err != nil:
		return fmt.Errorf("%w: batch %d: %w", errIndex, seq, err)
	}
	if r.WorkerCleared {
		s.log.Warn("zmq: worker cleared", "seq", seq, "status", r.Seq.String(), "expected", r.SeqExpected)
	}
	return nil
}

// pause waits backoff (or until ctx ends) and returns the next backoff.
func pause(ctx context.Context, backoff, maxBackoff time.Duration) time.Duration {
	t := time.NewTimer(backoff)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return min(2*backoff, maxBackoff)
}
