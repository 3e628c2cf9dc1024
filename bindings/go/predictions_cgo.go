//go:build cgo

package kvidx

/*
#include <string.h>

#include <kvidx.h>

typedef struct kvidx_go_new_p { uint32_t status; kvidx_indexer *ix; } kvidx_go_new_p;

static kvidx_go_new_p kvidx_go_new_with_predictions(kvidx_config cfg, kvidx_queue_limits limits,
                                                    kvidx_prediction_config p) {
	kvidx_go_new_p r = {0, NULL};
	r.status = (uint32_t)kvidx_new_with_predictions(&cfg, &limits, &p, &r.ix);
	return r;
}

typedef struct kvidx_go_plen { uint32_t status; size_t len; } kvidx_go_plen;

static kvidx_go_plen kvidx_go_find_matches_predicted(const kvidx_indexer *ix, const uint64_t *q,
                                                     size_t n, kvidx_predicted_match *out,
                                                     size_t cap) {
	kvidx_go_plen r = {0, 0};
	r.status = (uint32_t)kvidx_find_matches_predicted(ix, q, n, out, cap, &r.len);
	return r;
}

typedef struct kvidx_go_now { uint32_t status; uint64_t ns; } kvidx_go_now;

static kvidx_go_now kvidx_go_now_ns(const kvidx_indexer *ix) {
	kvidx_go_now r = {0, 0};
	r.status = (uint32_t)kvidx_now(ix, &r.ns);
	return r;
}

typedef struct kvidx_go_pstats { uint32_t status; kvidx_prediction_stats stats; } kvidx_go_pstats;

static kvidx_go_pstats kvidx_go_prediction_stats(const kvidx_indexer *ix) {
	kvidx_go_pstats r;
	memset(&r, 0, sizeof r);
	r.status = (uint32_t)kvidx_get_prediction_stats(ix, &r.stats);
	return r;
}
*/
import "C"

import "unsafe"

// Compile-time layout checks (see lib_cgo.go).
const (
	_ = uint(unsafe.Sizeof(PredictedMatch{}) - C.sizeof_kvidx_predicted_match)
	_ = uint(C.sizeof_kvidx_predicted_match - unsafe.Sizeof(PredictedMatch{}))
	_ = uint(unsafe.Sizeof(PredictionStats{}) - C.sizeof_kvidx_prediction_stats)
	_ = uint(C.sizeof_kvidx_prediction_stats - unsafe.Sizeof(PredictionStats{}))
	_ = uint(unsafe.Sizeof(cPredictionConfig{}) - C.sizeof_kvidx_prediction_config)
	_ = uint(C.sizeof_kvidx_prediction_config - unsafe.Sizeof(cPredictionConfig{}))
)

// libHasPredictions says whether the library has the predictions functions: always with
// cgo, where the header's KVIDX_HAS_PREDICTIONS functions are linked at build time.
func libHasPredictions() bool { return true }

func libNewWithPredictions(c *cConfig, l *cQueueLimits, p *cPredictionConfig) (handle, Status) {
	r := C.kvidx_go_new_with_predictions(*(*C.kvidx_config)(unsafe.Pointer(c)),
		*(*C.kvidx_queue_limits)(unsafe.Pointer(l)), *(*C.kvidx_prediction_config)(unsafe.Pointer(p)))
	return r.ix, Status(r.status)
}

func libPredict(h handle, worker uint64, rank uint32, q *uint64, n int, ttl uint64) Status {
	return Status(C.kvidx_predict(h, C.uint64_t(worker), C.uint32_t(rank),
		(*C.uint64_t)(unsafe.Pointer(q)), C.size_t(n), C.uint64_t(ttl)))
}

func libFindMatchesPredicted(h handle, q *uint64, n int, out *PredictedMatch, outCap int) (Status, int) {
	r := C.kvidx_go_find_matches_predicted(h, (*C.uint64_t)(unsafe.Pointer(q)), C.size_t(n),
		(*C.kvidx_predicted_match)(unsafe.Pointer(out)), C.size_t(outCap))
	return Status(r.status), int(r.len)
}

func libNow(h handle) (uint64, Status) {
	r := C.kvidx_go_now_ns(h)
	return uint64(r.ns), Status(r.status)
}

func libSetTime(h handle, ns uint64) Status { return Status(C.kvidx_set_time(h, C.uint64_t(ns))) }

func libAdvanceTime(h handle, ns uint64) Status {
	return Status(C.kvidx_advance_time(h, C.uint64_t(ns)))
}

func libPredictionStats(h handle, out *PredictionStats) Status {
	r := C.kvidx_go_prediction_stats(h)
	if r.status == C.uint32_t(StatusOK) {
		*out = *(*PredictionStats)(unsafe.Pointer(&r.stats))
	}
	return Status(r.status)
}
