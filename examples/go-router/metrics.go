package main

import (
	"fmt"
	"io"
	"sync/atomic"
	"time"

	kvidx "github.com/kvidx/kvidx/bindings/go"
)

// latencyBuckets are the upper bounds, in seconds, of the route latency histogram.
var latencyBuckets = []float64{5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 1e-2}

// histogram is a lock-free Prometheus-style histogram of durations.
type histogram struct {
	counts []atomic.Uint64 // one per bucket, plus +Inf
	sumNs  atomic.Uint64
}

func newHistogram() *histogram {
	return &histogram{counts: make([]atomic.Uint64, len(latencyBuckets)+1)}
}

// observe records one duration.
func (h *histogram) observe(d time.Duration) {
	s := d.Seconds()
	i := 0
	for i < len(latencyBuckets) && s > latencyBuckets[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sumNs.Add(uint64(d.Nanoseconds()))
}

// write prints the histogram in the Prometheus text format (cumulative buckets).
func (h *histogram) write(w io.Writer, name, help string) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name)
	var cum uint64
	for i, le := range latencyBuckets {
		cum += h.counts[i].Load()
		fmt.Fprintf(w, "%s_bucket{le=\"%g\"} %d\n", name, le, cum)
	}
	cum += h.counts[len(latencyBuckets)].Load()
	fmt.Fprintf(w, "%s_bucket{le=\"+Inf\"} %d\n", name, cum)
	fmt.Fprintf(w, "%s_sum %g\n%s_count %d\n", name, float64(h.sumNs.Load())/1e9, name, cum)
}

// metrics are the router's own counters; the index's come from Indexer.Stats at scrape time.
type metrics struct {
	eventsReceived atomic.Uint64
	badRequests    atomic.Uint64 // every 4xx answer
	tooLarge       atomic.Uint64 // 413 answers
	routed         atomic.Uint64
	routeLatency   *histogram
}

func newMetrics() *metrics { return &metrics{routeLatency: newHistogram()} }

// write prints every metric in the Prometheus text exposition format.
func (m *metrics) write(w io.Writer, s kvidx.Stats, r *Router, b *byteBudget) {
	inflight := r.InFlight() // expires old routes first
	counter := func(name, help string, v uint64) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n%s %d\n", name, help, name, name, v)
	}
	gauge := func(name, help string, v uint64) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n%s %d\n", name, help, name, name, v)
	}
	counter("kvidx_events_applied_total", "KV events fully applied by the index.", s.EventsApplied)
	counter("kvidx_events_rejected_total", "Stored events rejected for a missing parent.", s.EventsRejected)
	counter("kvidx_unknown_removals_total", "Removed block names the worker did not hold.", s.UnknownRemovals)
	gauge("kvidx_workers", "Known (worker_id, dp_rank) pairs.", s.Workers)
	gauge("kvidx_worker_blocks", "Blocks held, summed over workers.", s.WorkerBlocks)
	counter("router_events_received_total", "KV events received on POST /events.", m.eventsReceived.Load())
	counter("router_bad_requests_total", "Requests refused with a 4xx status.", m.badRequests.Load())
	counter("router_too_large_requests_total", "Requests refused with status 413 (body too large).", m.tooLarge.Load())
	counter("router_routed_total", "Requests routed to a worker.", m.routed.Load())
	gauge("router_workers", "Workers known as routing candidates.", uint64(r.Workers()))
	gauge("router_in_flight_requests", "Requests routed and not yet done.", uint64(inflight))
	counter("router_routes_expired_total", "Routed requests forgotten after the route TTL without DELETE.", r.expired.Load())
	counter("router_routes_evicted_total", "Routed requests forgotten to stay within the tracked-route limit.", r.evicted.Load())
	gauge("router_inflight_bytes", "Request bytes held now: bodies being read and ids decoded from them.", uint64(b.inUse.Load()))
	gauge("router_inflight_bytes_peak", "The most request bytes ever held at once (at most router_inflight_bytes_limit).", uint64(b.peak.Load()))
	gauge("router_inflight_bytes_limit", "The bound on request bytes held at once (-max-inflight-bytes).", uint64(b.limit))
	counter("router_overloaded_requests_total", "Requests refused with status 503 because the in-flight byte bound was reached.", b.refused.Load())
	m.routeLatency.write(w, "router_route_latency_seconds", "Time to pick a worker for a request.")
	if r.predictTTL > 0 {
		if ps, err := r.ix.PredictionStats(); err == nil {
			gauge("kvidx_predicted_blocks", "Predicted blocks held (one per worker and block), expired ones not yet dropped included.", ps.Blocks)
			gauge("kvidx_prediction_bytes", "Bytes the predictions take.", ps.Bytes)
			counter("kvidx_predictions_confirmed_total", "Predicted blocks confirmed by a Stored event.", ps.Confirmed)
			counter("kvidx_predictions_expired_total", "Expired predicted blocks dropped.", ps.Expired)
			counter("kvidx_predictions_dropped_total", "Predicted blocks dropped for the byte bound, a worker's capacity, or by events.",
				ps.DroppedForBytes+ps.DroppedForCapacity+ps.DroppedByEvents)
		}
		counter("router_predict_failures_total", "Routes whose prediction the library refused.", r.predictFailures.Load())
	}
}
