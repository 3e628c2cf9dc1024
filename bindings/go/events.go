package kvidx

import (
	"runtime"
	"structs"
	"sync"
)

// cEvent mirrors the C struct kvidx_event field for field (layout checked in tests and, on
// the cgo back end, at compile time). Its pointers only ever point into a pinned eventBatch
// arena, never at a caller's slice.
type cEvent struct {
	_             structs.HostLayout
	kind          uint32
	workerID      uint64
	dpRank        uint32
	eventID       uint64
	hasParent     uint8
	parentSeqHash uint64
	blocks        *Block
	numBlocks     uintptr
	seqHashes     *uint64
	numSeqHashes  uintptr
}

// cConfig mirrors the C struct kvidx_config.
type cConfig struct {
	_            structs.HostLayout
	backend      uint32
	eventThreads uint32
	jumpSize     uint32
}

// cQueueLimits mirrors the C struct kvidx_queue_limits.
type cQueueLimits struct {
	_             structs.HostLayout
	queueCapacity uint64
	queueBytes    uint64
}

// eventBatch holds the C-layout copy of one ApplyEvent(s) call: the events and two arenas
// with every block and removed name of the call. Batches are pooled, so a steady stream of
// calls allocates nothing.
type eventBatch struct {
	events []cEvent
	blocks []Block
	hashes []uint64
	pinner runtime.Pinner
}

var batchPool = sync.Pool{New: func() any { return new(eventBatch) }}

// newBatch converts events into a pooled batch whose arenas are pinned until release.
func newBatch(events []Event) *eventBatch {
	b := batchPool.Get().(*eventBatch)
	nBlocks, nHashes := 0, 0
	for i := range events {
		nBlocks += len(events[i].Blocks)
		nHashes += len(events[i].SeqHashes)
	}
	b.events = grow(b.events, len(events))
	b.blocks = grow(b.blocks, nBlocks)
	b.hashes = grow(b.hashes, nHashes)
	if nBlocks > 0 {
		b.pinner.Pin(&b.blocks[0])
	}
	if nHashes > 0 {
		b.pinner.Pin(&b.hashes[0])
	}
	bo, ho := 0, 0
	for i := range events {
		e := &events[i]
		c := cEvent{
			kind:          uint32(e.Kind),
			workerID:      e.WorkerID,
			dpRank:        e.DpRank,
			eventID:       e.EventID,
			parentSeqHash: e.ParentSeqHash,
		}
		if e.HasParent {
			c.hasParent = 1
		}
		if n := len(e.Blocks); n > 0 {
			copy(b.blocks[bo:bo+n], e.Blocks)
			c.blocks, c.numBlocks = &b.blocks[bo], uintptr(n)
			bo += n
		}
		if n := len(e.SeqHashes); n > 0 {
			copy(b.hashes[ho:ho+n], e.SeqHashes)
			c.seqHashes, c.numSeqHashes = &b.hashes[ho], uintptr(n)
			ho += n
		}
		b.events[i] = c
	}
	return b
}

// first returns the address of the first C event (nil for an empty batch).
func (b *eventBatch) first() *cEvent {
	if len(b.events) == 0 {
		return nil
	}
	return &b.events[0]
}

// release unpins the arenas and returns the batch to the pool. It clears the whole event
// array first: cgo checks the entire backing array of a slice handed to C, and stale events
// would point at arenas that are no longer pinned.
func (b *eventBatch) release() {
	clear(b.events[:cap(b.events)])
	b.pinner.Unpin()
	batchPool.Put(b)
}

// grow returns s resliced to n elements, reallocating only when its capacity is too small.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, n+n/4)
	}
	return s[:n]
}
