package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"

	kvidx "github.com/kvidx/kvidx/bindings/go"
	"github.com/kvidx/kvidx/bindings/go/zmqfeed"
)

// zmqOptions are the settings of --zmq mode: the router subscribes to the engines' ZMQ
// publishers itself (package zmqfeed), with no bus in between.
type zmqOptions struct {
	// sources are the publishers, one per --zmq; none means --zmq mode is off.
	sources []zmqfeed.Source
	// format is the engines' wire format (--zmq-format).
	format kvidx.EngineFormat
	// topic is the topic prefix subscribed to (--zmq-topic).
	topic string
}

// parseEngineFormat reads vllm, sglang or trtllm.
func parseEngineFormat(s string) (kvidx.EngineFormat, error) {
	for _, f := range []kvidx.EngineFormat{kvidx.EngineVLLM, kvidx.EngineSGLang, kvidx.EngineTRTLLM} {
		if strings.EqualFold(s, f.String()) {
			return f, nil
		}
	}
	return 0, fmt.Errorf("engine format %q: want vllm, sglang or trtllm", s)
}

// zmqInput feeds the index from the engines' publishers: one subscriber per --zmq source,
// each in its goroutine until the context of startZMQ ends.
type zmqInput struct {
	subs   []*zmqfeed.Subscriber
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startZMQ registers every source's worker as a routing candidate and starts its subscriber.
// Each (worker id, dp rank) may have one source.
func startZMQ(ctx context.Context, o zmqOptions, ix *kvidx.Indexer, router *Router) (*zmqInput, error) {
	seen := map[workerKey]string{}
	for _, src := range o.sources {
		k := workerKey{ID: src.WorkerID, DpRank: src.DpRank}
		if other, dup := seen[k]; dup {
			return nil, fmt.Errorf("--zmq: worker %d rank %d has two publishers (%s and %s)", k.ID, k.DpRank, other, src.Endpoint)
		}
		seen[k] = src.Endpoint
	}
	ctx, cancel := context.WithCancel(ctx)
	z := &zmqInput{cancel: cancel}
	opts := zmqfeed.Options{Format: o.format, Topic: o.topic}
	for _, src := range o.sources {
		if _, err := router.Register([]workerKey{{ID: src.WorkerID, DpRank: src.DpRank}}); err != nil {
			z.close()
			return nil, fmt.Errorf("--zmq %s: %w", src, err)
		}
		sub, err := zmqfeed.New(ix, src, opts)
		if err != nil {
			z.close()
			return nil, fmt.Errorf("--zmq %s: %w", src, err)
		}
		z.subs = append(z.subs, sub)
	}
	for _, sub := range z.subs {
		z.wg.Go(func() {
			if err := sub.Run(ctx); err != nil {
				slog.Error("zmq: the publisher's batches can no longer be applied", "zmq", sub.Source().String(), "error", err)
			}
		})
	}
	return z, nil
}

// close stops the subscribers, waits for them and releases their feeds.
func (z *zmqInput) close() {
	z.cancel()
	z.wg.Wait()
	for _, sub := range z.subs {
		_ = sub.Close()
	}
}

// writeMetrics prints each publisher's counters, labelled by worker and rank.
func (z *zmqInput) writeMetrics(w io.Writer) {
	stats := make([]zmqfeed.Stats, len(z.subs))
	for i, sub := range z.subs {
		stats[i] = sub.Stats()
	}
	series := []struct {
		name, help, kind string
		value            func(zmqfeed.Stats) uint64
	}{
		{"router_zmq_batches_total", "Engine batches applied from the publisher (live and replayed).", "counter", func(s zmqfeed.Stats) uint64 { return s.Feed.Batches }},
		{"router_zmq_replayed_batches_total", "Batches obtained from the replay socket and applied.", "counter", func(s zmqfeed.Stats) uint64 { return s.Replayed }},
		{"router_zmq_gaps_total", "Live batches that followed missing ones (an epoch's first batch above 0 included).", "counter", func(s zmqfeed.Stats) uint64 { return s.Gaps }},
		{"router_zmq_replay_failures_total", "Replay requests that failed.", "counter", func(s zmqfeed.Stats) uint64 { return s.ReplayFailures }},
		{"router_zmq_missed_batches_total", "Batches missing after replay (the worker was cleared for them).", "counter", func(s zmqfeed.Stats) uint64 { return s.Feed.BatchesMissed }},
		{"router_zmq_workers_cleared_total", "Times the worker was cleared for a gap or restart the replay did not fill.", "counter", func(s zmqfeed.Stats) uint64 { return s.Feed.WorkersCleared }},
		{"router_zmq_epochs_total", "Epochs begun (connections, restarts): each rebuilt the worker from the engine's batches.", "counter", func(s zmqfeed.Stats) uint64 { return s.Epochs }},
		{"router_zmq_connects_total", "Connections made to the publisher.", "counter", func(s zmqfeed.Stats) uint64 { return s.Connects }},
		{"router_zmq_disconnects_total", "Connections to the publisher lost.", "counter", func(s zmqfeed.Stats) uint64 { return s.Disconnects }},
		{"router_zmq_refused_batches_total", "Batches refused as malformed or too large, and messages that were not [topic, seq, payload].", "counter", func(s zmqfeed.Stats) uint64 { return s.Refused + s.BadMessages }},
		{"router_zmq_last_seq", "Sequence of the last batch applied.", "gauge", func(s zmqfeed.Stats) uint64 { return s.LastSeq }},
	}
	for _, m := range series {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", m.name, m.help, m.name, m.kind)
		for i, sub := range z.subs {
			src := sub.Source()
			fmt.Fprintf(w, "%s{worker_id=\"%d\",dp_rank=\"%d\"} %d\n", m.name, src.WorkerID, src.DpRank, m.value(stats[i]))
		}
	}
}
