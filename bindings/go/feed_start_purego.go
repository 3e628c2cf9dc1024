//go:build !cgo

package kvidx

import (
	"unsafe"

	"github.com/ebitengine/purego"
)

// libHasFeedStart says whether the loaded library has the missed-from-the-start functions
// (KVIDX_HAS_FEED_START).
func libHasFeedStart() bool { return lib.feedNextSeq != 0 && lib.feedStartStats != 0 }

func libFeedNextSeq(f feedHandle, worker uint64, rank uint32) (uint64, Status) {
	out := new(uint64)
	st := status(purego.SyscallN(lib.feedNextSeq, f, uintptr(worker), uintptr(rank),
		uintptr(unsafe.Pointer(out))))
	return *out, st
}

func libFeedStartStats(f feedHandle, out *EngineStartStats) Status {
	return status(purego.SyscallN(lib.feedStartStats, f, uintptr(unsafe.Pointer(out))))
}
