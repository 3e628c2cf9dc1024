package kvidx

import (
	"strconv"
	"structs"
)

// ABIVersion is the C ABI version this binding is written against. [New] refuses a library
// that reports another one.
const ABIVersion = 1

// Backend selects the index structure of an [Indexer].
type Backend uint32

const (
	// BackendPositional is the positional index: per-position tables with exact jump search.
	BackendPositional Backend = 0
	// BackendRadix is the concurrent radix tree.
	BackendRadix Backend = 1
	// BackendRuns is the tree of runs: consecutive blocks stored once for all the workers
	// holding them (the backend of [DefaultConfig]).
	BackendRuns Backend = 2
)

// String returns the backend's name ("positional", "radix", "runs") or "Backend(N)".
func (b Backend) String() string {
	switch b {
	case BackendPositional:
		return "positional"
	case BackendRadix:
		return "radix"
	case BackendRuns:
		return "runs"
	default:
		return "Backend(" + strconv.FormatUint(uint64(b), 10) + ")"
	}
}

// Config says how to build an [Indexer]. The zero value is a synchronous positional index.
type Config struct {
	// Backend is the index structure; any value other than the Backend constants makes
	// [New] fail with [ErrInvalidArgument].
	Backend Backend
	// EventThreads is the number of event threads. 0 applies events synchronously on the
	// calling goroutine (a missing parent then fails with [ErrParentNotFound]); with more,
	// events are queued (a worker's events stay in order) and their outcome shows in
	// [Indexer.Stats] after [Indexer.Flush].
	EventThreads uint32
	// JumpSize is the jump size of the positional backend; 0 means the library's default.
	JumpSize uint32
	// QueueCapacity is the number of events each event thread may have queued before apply
	// calls block; 0 means the library's default (4096), more than 1048576 makes [New] fail
	// with [ErrInvalidArgument].
	QueueCapacity uint64
	// QueueBytes is the budget of queued work, in bytes, each event thread may hold before
	// apply calls block; 0 means the library's default (32 MiB). An event larger than the
	// budget is still accepted on its own. A value the library cannot accept makes [New] fail
	// with [ErrInvalidArgument].
	QueueBytes uint64
	// Predictions says how the indexer keeps predicted blocks ([Indexer.Predict]); the zero
	// value is the library's defaults (64 MiB, no per-worker bound, the monotonic clock).
	Predictions PredictionConfig
}

// DefaultConfig returns the library's defaults: runs backend, one event thread, the
// default jump size and queue limits (the same values as kvidx_config_default and
// kvidx_queue_limits_default).
func DefaultConfig() Config {
	return Config{Backend: BackendRuns, EventThreads: 1, JumpSize: 0}
}

// EventKind says what an [Event] does.
type EventKind uint32

const (
	// EventStored adds blocks to a worker, from position 0 or after a parent block.
	EventStored EventKind = 0
	// EventRemoved drops named blocks from a worker.
	EventRemoved EventKind = 1
	// EventCleared drops every block of a worker; the worker stays known.
	EventCleared EventKind = 2
)

// String returns "stored", "removed", "cleared" or "EventKind(N)".
func (k EventKind) String() string {
	switch k {
	case EventStored:
		return "stored"
	case EventRemoved:
		return "removed"
	case EventCleared:
		return "cleared"
	default:
		return "EventKind(" + strconv.FormatUint(uint64(k), 10) + ")"
	}
}

// Block is one stored KV block: the library's local hash of its tokens and the engine's
// sequence hash that names it. Its layout is that of the C struct kvidx_block.
type Block struct {
	_ structs.HostLayout
	// LocalHash is the hash of the block's own tokens (see [HashTokens]).
	LocalHash uint64
	// SeqHash is the engine's name for the block (opaque; any algorithm).
	SeqHash uint64
}

// Event is one KV event of one worker, as an engine publishes it.
type Event struct {
	// Kind is what the event does; a value other than the EventKind constants is rejected
	// with [ErrInvalidArgument].
	Kind EventKind
	// WorkerID and DpRank name the worker.
	WorkerID uint64
	// DpRank is the worker's data-parallel rank.
	DpRank uint32
	// EventID increases per (WorkerID, DpRank).
	EventID uint64
	// HasParent says that a stored event continues after the block named ParentSeqHash,
	// which the worker must hold; otherwise its blocks start at position 0.
	HasParent bool
	// ParentSeqHash is the parent block's sequence hash when HasParent is set.
	ParentSeqHash uint64
	// Blocks are the blocks of a stored event, in chain order.
	Blocks []Block
	// SeqHashes are the names a removed event drops.
	SeqHashes []uint64
}

// StoredEvent returns an event storing blocks from position 0 for a worker.
func StoredEvent(workerID uint64, dpRank uint32, eventID uint64, blocks []Block) Event {
	return Event{Kind: EventStored, WorkerID: workerID, DpRank: dpRank, EventID: eventID, Blocks: blocks}
}

// WithParent returns a copy of a stored event that continues after the block named parent.
func (e Event) WithParent(parent uint64) Event {
	e.HasParent = true
	e.ParentSeqHash = parent
	return e
}

// RemovedEvent returns an event dropping the named blocks from a worker.
func RemovedEvent(workerID uint64, dpRank uint32, eventID uint64, seqHashes []uint64) Event {
	return Event{Kind: EventRemoved, WorkerID: workerID, DpRank: dpRank, EventID: eventID, SeqHashes: seqHashes}
}

// ClearedEvent returns an event dropping every block of a worker.
func ClearedEvent(workerID uint64, dpRank uint32, eventID uint64) Event {
	return Event{Kind: EventCleared, WorkerID: workerID, DpRank: dpRank, EventID: eventID}
}

// Match is one worker's answer to a query: the number of leading query blocks it holds.
// Its layout is that of the C struct kvidx_match (uint64, uint32, uint32).
type Match struct {
	_ structs.HostLayout
	// WorkerID and DpRank name the worker.
	WorkerID uint64
	// DpRank is the worker's data-parallel rank.
	DpRank uint32
	// Depth is the length of the longest query prefix the worker holds (at least 1).
	Depth uint32
}

// Stats are the indexer's counters. Its layout is that of the C struct kvidx_stats.
type Stats struct {
	_ structs.HostLayout
	// EventsApplied counts events fully applied.
	EventsApplied uint64
	// EventsRejected counts stored events rejected for a missing parent.
	EventsRejected uint64
	// UnknownRemovals counts removed names the worker did not hold.
	UnknownRemovals uint64
	// Workers counts known (worker_id, dp_rank) pairs.
	Workers uint64
	// WorkerBlocks is the sum over workers of the blocks they hold.
	WorkerBlocks uint64
}
