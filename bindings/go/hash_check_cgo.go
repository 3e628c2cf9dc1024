//go:build cgo

package kvidx

/*
#include <kvidx.h>

typedef struct kvidx_go_llmd_keys { uint32_t status; size_t len; } kvidx_go_llmd_keys;

static kvidx_go_llmd_keys kvidx_go_llmd_request_keys(const uint32_t *t, size_t n, uint32_t bs,
		const uint8_t *seed, size_t seed_len, const uint8_t *model, size_t model_len,
		uint64_t *out, size_t cap) {
	kvidx_go_llmd_keys r = {0, 0};
	r.status = (uint32_t)kvidx_llmd_request_keys(t, n, bs, seed, seed_len, model, model_len, out,
		cap, &r.len);
	return r;
}
*/
import "C"

import "unsafe"

// Compile-time layout check (see lib_cgo.go).
const (
	_ = uint(unsafe.Sizeof(HashCheckStats{}) - C.sizeof_kvidx_hash_check_stats)
	_ = uint(C.sizeof_kvidx_hash_check_stats - unsafe.Sizeof(HashCheckStats{}))
)

// libHasHashCheck and libHasLlmdKeys say whether the library has those functions: always
// with cgo, where the header's functions are linked at build time.
func libHasHashCheck() bool { return true }
func libHasLlmdKeys() bool  { return true }

func libFeedSetHashCheck(f feedHandle, alg uint32, seed *byte, n int, bs uint32) Status {
	return Status(C.kvidx_engine_feed_set_hash_check(f, C.uint32_t(alg), (*C.uint8_t)(unsafe.Pointer(seed)),
		C.size_t(n), C.uint32_t(bs)))
}

func libFeedClearHashCheck(f feedHandle) Status {
	return Status(C.kvidx_engine_feed_clear_hash_check(f))
}

func libFeedHashCheckStats(f feedHandle, worker uint64, rank uint32, out *HashCheckStats) Status {
	return Status(C.kvidx_engine_feed_hash_check_stats(f, C.uint64_t(worker), C.uint32_t(rank),
		(*C.kvidx_hash_check_stats)(unsafe.Pointer(out))))
}

func libFeedHashCheckTotals(f feedHandle, out *HashCheckStats) Status {
	return Status(C.kvidx_engine_feed_hash_check_totals(f, (*C.kvidx_hash_check_stats)(unsafe.Pointer(out))))
}

func libFeedSetLlmdKeys(f feedHandle, seed *byte, seedLen int, model *byte, modelLen int) Status {
	return Status(C.kvidx_engine_feed_set_llmd_keys(f, (*C.uint8_t)(unsafe.Pointer(seed)), C.size_t(seedLen),
		(*C.uint8_t)(unsafe.Pointer(model)), C.size_t(modelLen)))
}

func libLlmdRequestKeys(t *uint32, n int, bs uint32, seed *byte, seedLen int, model *byte, modelLen int,
	out *uint64, outCap int) (Status, int) {
	r := C.kvidx_go_llmd_request_keys((*C.uint32_t)(unsafe.Pointer(t)), C.size_t(n), C.uint32_t(bs),
		(*C.uint8_t)(unsafe.Pointer(seed)), C.size_t(seedLen), (*C.uint8_t)(unsafe.Pointer(model)),
		C.size_t(modelLen), (*C.uint64_t)(unsafe.Pointer(out)), C.size_t(outCap))
	return Status(r.status), int(r.len)
}
