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
	var e cEvent
	goOffsets := []uintptr{
		unsafe.Offsetof(e.kind), unsafe.Offsetof(e.workerID), unsafe.Offsetof(e.dpRank),
		unsafe.Offsetof(e.eventID), unsafe.Offsetof(e.hasParent),
		unsafe.Offsetof(e.parentSeqHash), unsafe.Offsetof(e.blocks),
		unsafe.Offsetof(e.numBlocks), unsafe.Offsetof(e.seqHashes),
		unsafe.Offsetof(e.numSeqHashes),
	}
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
	if c := cBatchResultOffsets(); !slices.Equal(rOffsets, c) {
		t.Fatalf("cBatchResult offsets %v, header %v", rOffsets, c)
	}
}
