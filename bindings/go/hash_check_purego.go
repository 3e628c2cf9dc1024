//go:build !cgo

package kvidx

import (
	"unsafe"

	"github.com/ebitengine/purego"
)

// libHasHashCheck says whether the loaded library has the hash check (KVIDX_HAS_HASH_CHECK).
func libHasHashCheck() bool {
	return lib.feedSetHashCheck != 0 && lib.feedClearHashCheck != 0 &&
		lib.feedHashCheckStats != 0 && lib.feedHashCheckTotals != 0
}

// libHasLlmdKeys says whether the loaded library has llm-d's keys (KVIDX_HAS_LLMD_KEYS).
func libHasLlmdKeys() bool { return lib.llmdRequestKeys != 0 && lib.feedSetLlmdKeys != 0 }

func libFeedSetHashCheck(f feedHandle, alg uint32, seed *byte, n int, bs uint32) Status {
	return status(purego.SyscallN(lib.feedSetHashCheck, f, uintptr(alg), uintptr(unsafe.Pointer(seed)),
		uintptr(n), uintptr(bs)))
}

func libFeedClearHashCheck(f feedHandle) Status {
	return status(purego.SyscallN(lib.feedClearHashCheck, f))
}

func libFeedHashCheckStats(f feedHandle, worker uint64, rank uint32, out *HashCheckStats) Status {
	return status(purego.SyscallN(lib.feedHashCheckStats, f, uintptr(worker), uintptr(rank),
		uintptr(unsafe.Pointer(out))))
}

func libFeedHashCheckTotals(f feedHandle, out *HashCheckStats) Status {
	return status(purego.SyscallN(lib.feedHashCheckTotals, f, uintptr(unsafe.Pointer(out))))
}

func libFeedSetLlmdKeys(f feedHandle, seed *byte, seedLen int, model *byte, modelLen int) Status {
	return status(purego.SyscallN(lib.feedSetLlmdKeys, f, uintptr(unsafe.Pointer(seed)), uintptr(seedLen),
		uintptr(unsafe.Pointer(model)), uintptr(modelLen)))
}

func libLlmdRequestKeys(t *uint32, n int, bs uint32, seed *byte, seedLen int, model *byte, modelLen int,
	out *uint64, outCap int) (Status, int) {
	cell := new(lenCell)
	st := status(purego.SyscallN(lib.llmdRequestKeys, uintptr(unsafe.Pointer(t)), uintptr(n), uintptr(bs),
		uintptr(unsafe.Pointer(seed)), uintptr(seedLen), uintptr(unsafe.Pointer(model)), uintptr(modelLen),
		uintptr(unsafe.Pointer(out)), uintptr(outCap), uintptr(unsafe.Pointer(&cell.n))))
	return st, int(cell.n)
}
