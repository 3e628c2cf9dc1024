package kvidx

import (
	"slices"
	"testing"
	"unsafe"
)

// The Go mirrors must have the C ABI's LP64 layout, so slices of them can be handed to C
// as they are.
func TestLayoutMatchesTheCABI(t *testing.T) {
	goOffsets := cEventOffsets()
	lp64 := []uintptr{0, 8, 16, 24, 32, 40, 48, 56, 64, 72}
	if !slices.Equal(goOffsets, lp64) || unsafe.Sizeof(cEvent{}) != 80 {
		t.Fatalf("cEvent offsets %v size %d, want %v size 80", goOffsets, unsafe.Sizeof(cEvent{}), lp64)
	}
	var mt Match
	if unsafe.Sizeof(mt) != 16 || unsafe.Offsetof(mt.DpRank) != 8 || unsafe.Offsetof(mt.Depth) != 12 {
		t.Fatalf("Match layout: size %d", unsafe.Sizeof(mt))
	}
	if unsafe.Sizeof(Block{}) != 16 || unsafe.Sizeof(Stats{}) != 40 || unsafe.Sizeof(cConfig{}) != 12 {
		t.Fatal("Block, Stats or cConfig layout")
	}
	var r cBatchResult
	rOffsets := []uintptr{
		unsafe.Offsetof(r.eventsDecoded), unsafe.Offsetof(r.eventsSubmitted),
		unsafe.Offsetof(r.eventsRejected), unsafe.Offsetof(r.skippedUnknownTag),
		unsafe.Offsetof(r.skippedFiltered), unsafe.Offsetof(r.skippedUnhashable),
		unsafe.Offsetof(r.seqExpected), unsafe.Offsetof(r.batchesMissed),
		unsafe.Offsetof(r.dpRank), unsafe.Offsetof(r.seqStatus), unsafe.Offsetof(r.workerCleared),
	}
	rLP64 := []uintptr{0, 8, 16, 24, 32, 40, 48, 56, 64, 68, 72}
	if !slices.Equal(rOffsets, rLP64) || unsafe.Sizeof(r) != 80 {
		t.Fatalf("cBatchResult offsets %v size %d, want %v size 80", rOffsets, unsafe.Sizeof(r), rLP64)
	}
	var tmt TieredMatch
	if unsafe.Sizeof(tmt) != 32 || unsafe.Offsetof(tmt.DpRank) != 8 || unsafe.Offsetof(tmt.Depth) != 12 ||
		unsafe.Offsetof(tmt.TierDepths) != 16 {
		t.Fatalf("TieredMatch layout: size %d", unsafe.Sizeof(tmt))
	}
	if unsafe.Sizeof(EngineStats{}) != 80 || unsafe.Offsetof(EngineStats{}.WorkersCleared) != 72 {
		t.Fatal("EngineStats layout")
	}
}

// cEventOffsets returns the offsets of the Go mirror of kvidx_event's fields, in C order.
func cEventOffsets() []uintptr {
	var e cEvent
	return []uintptr{
		unsafe.Offsetof(e.kind), unsafe.Offsetof(e.workerID), unsafe.Offsetof(e.dpRank),
		unsafe.Offsetof(e.eventID), unsafe.Offsetof(e.hasParent),
		unsafe.Offsetof(e.parentSeqHash), unsafe.Offsetof(e.blocks),
		unsafe.Offsetof(e.numBlocks), unsafe.Offsetof(e.seqHashes),
		unsafe.Offsetof(e.numSeqHashes),
	}
}
