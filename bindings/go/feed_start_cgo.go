//go:build cgo

package kvidx

/*
#include <kvidx.h>

typedef struct kvidx_go_next_seq { uint32_t status; uint64_t next; } kvidx_go_next_seq;

static kvidx_go_next_seq kvidx_go_feed_next_seq(const kvidx_engine_feed *feed, uint64_t worker,
                                                uint32_t rank) {
	kvidx_go_next_seq r = {0, 0};
	r.status = (uint32_t)kvidx_engine_feed_next_seq(feed, worker, rank, &r.next);
	return r;
}

typedef struct kvidx_go_start_stats { uint32_t status; kvidx_engine_start_stats stats; } kvidx_go_start_stats;

static kvidx_go_start_stats kvidx_go_feed_start_stats(const kvidx_engine_feed *feed) {
	kvidx_go_start_stats r = {0, {0, 0}};
	r.status = (uint32_t)kvidx_engine_feed_start_stats(feed, &r.stats);
	return r;
}
*/
import "C"

import "unsafe"

// Compile-time layout check (see lib_cgo.go).
const (
	_ = uint(unsafe.Sizeof(EngineStartStats{}) - C.sizeof_kvidx_engine_start_stats)
	_ = uint(C.sizeof_kvidx_engine_start_stats - unsafe.Sizeof(EngineStartStats{}))
)

// libHasFeedStart says whether the library has the missed-from-the-start functions: always
// with cgo, where the header's KVIDX_HAS_FEED_START functions are linked at build time.
func libHasFeedStart() bool { return true }

func libFeedNextSeq(f feedHandle, worker uint64, rank uint32) (uint64, Status) {
	r := C.kvidx_go_feed_next_seq(f, C.uint64_t(worker), C.uint32_t(rank))
	return uint64(r.next), Status(r.status)
}

func libFeedStartStats(f feedHandle, out *EngineStartStats) Status {
	r := C.kvidx_go_feed_start_stats(f)
	if r.status == C.uint32_t(StatusOK) {
		*out = *(*EngineStartStats)(unsafe.Pointer(&r.stats))
	}
	return Status(r.status)
}
