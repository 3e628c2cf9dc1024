//go:build cgo

package kvidx

/*
#include <kvidx.h>

typedef struct kvidx_go_len2 { uint32_t status; size_t len; } kvidx_go_len2;

static kvidx_go_len2 kvidx_go_hash_request(const uint32_t *t, size_t n, uint32_t bs,
                                           const void *ns, const void *spans, size_t num_spans,
                                           uint64_t *out, size_t cap) {
	kvidx_go_len2 r = {0, 0};
	r.status = (uint32_t)kvidx_hash_request(t, n, bs, (const kvidx_namespace *)ns,
	                                        (const kvidx_mm_span *)spans, num_spans, out, cap,
	                                        &r.len);
	return r;
}
*/
import "C"

import "unsafe"

// Compile-time layout checks (see lib_cgo.go).
const (
	_ = uint(unsafe.Sizeof(cNamespace{}) - C.sizeof_kvidx_namespace)
	_ = uint(C.sizeof_kvidx_namespace - unsafe.Sizeof(cNamespace{}))
	_ = uint(unsafe.Sizeof(cSpan{}) - C.sizeof_kvidx_mm_span)
	_ = uint(C.sizeof_kvidx_mm_span - unsafe.Sizeof(cSpan{}))
	_ = uint(FeedSkipExtras - C.KVIDX_FEED_SKIP_EXTRAS)
	_ = uint(C.KVIDX_FEED_SKIP_EXTRAS - FeedSkipExtras)
)

// libHasNamespaces: always with cgo, where KVIDX_HAS_NAMESPACES functions are linked at build
// time.
func libHasNamespaces() bool { return true }

func libHashRequest(t *uint32, n int, bs uint32, ns, spans unsafe.Pointer, numSpans int, out *uint64,
	outCap int) (Status, int) {
	r := C.kvidx_go_hash_request((*C.uint32_t)(unsafe.Pointer(t)), C.size_t(n), C.uint32_t(bs), ns,
		spans, C.size_t(numSpans), (*C.uint64_t)(unsafe.Pointer(out)), C.size_t(outCap))
	return Status(r.status), int(r.len)
}
