//go:build cgo

package kvidx

import (
	"slices"
	"testing"
	"unsafe"
)

// On the cgo back end the offsets can be read from the header itself (sizes are also checked
// at compile time in lib_cgo.go).
func TestLayoutMatchesTheHeader(t *testing.T) {
	goOffsets := cEventOffsets()
	if c := cOffsets(); !slices.Equal(goOffsets, c) {
		t.Fatalf("cEvent offsets %v, header %v", goOffsets, c)
	}
	var r cBatchResult
	rOffsets := []uintptr{
		unsafe.Offsetof(r.eventsDecoded), unsafe.Offsetof(r.eventsSubmitted),
		unsafe.Offsetof(r.eventsRejected), unsafe.Offsetof(r.skippedUnknownTag),
		unsafe.Offsetof(r.skippedFiltered), unsafe.Offsetof(r.skippedUnhashable),
		unsafe.Offsetof(r.seqExpected), unsafe.Offsetof(r.batchesMissed),
		unsafe.Offsetof(r.dpRank), unsafe.Offsetof(r.seqStatus), unsafe.Offsetof(r.workerCleared),
	}
	var tmt TieredMatch
	tOffsets := []uintptr{
		unsafe.Offsetof(tmt.WorkerID), unsafe.Offsetof(tmt.DpRank), unsafe.Offsetof(tmt.Depth),
		unsafe.Offsetof(tmt.TierDepths), unsafe.Sizeof(tmt),
	}
	if c := cTieredMatchOffsets(); !slices.Equal(tOffsets, c) {
		t.Fatalf("TieredMatch offsets and size %v, header %v", tOffsets, c)
	}
	if c := cBatchResultOffsets(); !slices.Equal(rOffsets, c) {
		t.Fatalf("cBatchResult offsets %v, header %v", rOffsets, c)
	}
}
