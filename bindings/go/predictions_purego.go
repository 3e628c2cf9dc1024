//go:build !cgo

package kvidx

import (
	"unsafe"

	"github.com/ebitengine/purego"
)

// libHasPredictions says whether the loaded library has the predictions functions
// (KVIDX_HAS_PREDICTIONS).
func libHasPredictions() bool {
	return lib.newWithPredictions != 0 && lib.predict != 0 && lib.findMatchesPredicted != 0 &&
		lib.now != 0 && lib.setTime != 0 && lib.advanceTime != 0 && lib.getPredictionStats != 0
}

func libNewWithPredictions(c *cConfig, l *cQueueLimits, p *cPredictionConfig) (handle, Status) {
	out := new(handle)
	st := status(purego.SyscallN(lib.newWithPredictions, uintptr(unsafe.Pointer(c)),
		uintptr(unsafe.Pointer(l)), uintptr(unsafe.Pointer(p)), uintptr(unsafe.Pointer(out))))
	return *out, st
}

func libPredict(h handle, worker uint64, rank uint32, q *uint64, n int, ttl uint64) Status {
	return status(purego.SyscallN(lib.predict, h, uintptr(worker), uintptr(rank),
		uintptr(unsafe.Pointer(q)), uintptr(n), uintptr(ttl)))
}

func libFindMatchesPredicted(h handle, q *uint64, n int, out *PredictedMatch, outCap int) (Status, int) {
	cell := lenPool.Get().(*lenCell)
	st := status(purego.SyscallN(lib.findMatchesPredicted, h, uintptr(unsafe.Pointer(q)), uintptr(n),
		uintptr(unsafe.Pointer(out)), uintptr(outCap), uintptr(unsafe.Pointer(&cell.n))))
	got := int(cell.n)
	lenPool.Put(cell)
	return st, got
}

func libNow(h handle) (uint64, Status) {
	out := new(uint64)
	st := status(purego.SyscallN(lib.now, h, uintptr(unsafe.Pointer(out))))
	return *out, st
}

func libSetTime(h handle, ns uint64) Status {
	return status(purego.SyscallN(lib.setTime, h, uintptr(ns)))
}

func libAdvanceTime(h handle, ns uint64) Status {
	return status(purego.SyscallN(lib.advanceTime, h, uintptr(ns)))
}

func libPredictionStats(h handle, out *PredictionStats) Status {
	return status(purego.SyscallN(lib.getPredictionStats, h, uintptr(unsafe.Pointer(out))))
}
