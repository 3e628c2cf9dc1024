package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	kvidx "github.com/kvidx/kvidx/bindings/go"
	"github.com/nats-io/nats.go"
)

// streamMsg is one message of the KVIDX_EVENTS stream: its stream sequence, subject,
// headers and payload (one engine batch).
type streamMsg struct {
	seq     uint64
	subject string
	header  nats.Header
	data    []byte
}

// errIndexUnusable wraps a library error after which the index cannot take more batches.
var errIndexUnusable = errors.New("the index is unusable")

// streamApplier applies stream messages to the index through one engine feed per wire
// format, and saves and restores everything a replica needs besides the index to continue
// exactly where it stood: the position, the publishers and the feeds' per-publisher
// tracking state. It knows nothing of NATS beyond the message's fields, so tests drive it
// with any message source.
type streamApplier struct {
	ix *kvidx.Indexer
	// register makes a publisher a routing candidate (called once per publisher).
	register func(workerKey)
	// hashCheck turns the feeds' hash check on (hashcheck.go).
	hashCheck hashCheckOptions

	// mu is held while one message is applied and while the state is saved, so a save sees
	// the feeds after exactly the messages at or below applied.
	mu    sync.Mutex
	feeds map[kvidx.EngineFormat]*kvidx.EngineFeed

	pubsMu sync.Mutex
	pubs   map[workerKey]kvidx.EngineFormat

	// applied is the stream sequence of the last message handled (applied, skipped or
	// refused); everything at or below it was submitted to the index.
	applied atomic.Uint64
	// events counts the engine events decoded.
	events atomic.Uint64
}

func newStreamApplier(ix *kvidx.Indexer, register func(workerKey)) streamApplier {
	return streamApplier{ix: ix, register: register, feeds: map[kvidx.EngineFormat]*kvidx.EngineFeed{},
		pubs: map[workerKey]kvidx.EngineFormat{}}
}

// handleMsg applies one message at its stream sequence (it must be above applied) and
// advances applied. A message refused (bad headers, malformed or oversized payload) is
// returned as an error, and counts as handled; an error wrapping errIndexUnusable means the
// index cannot go on.
func (a *streamApplier) handleMsg(m streamMsg) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	err := a.apply(m)
	a.applied.Store(m.seq)
	return err
}

// apply decodes a message's headers and applies its payload through the feed of its format,
// in its engine epoch when the header names one. A Kvidx-Dp-Rank of 4294967295 takes the
// rank from the batch: the publisher is the resolved (worker, rank).
func (a *streamApplier) apply(m streamMsg) error {
	h, err := parseHeaders(m.subject, m.header)
	if err != nil {
		return err
	}
	fd, err := a.feed(h.format)
	if err != nil {
		return fmt.Errorf("%w: %v", errIndexUnusable, err)
	}
	var res kvidx.EngineBatchResult
	if h.epoch != nil {
		res, err = fd.ApplyInEpochAt(a.ix, h.key.ID, h.key.DpRank, *h.epoch, h.seqFrame, m.data, m.seq)
	} else {
		res, err = fd.ApplyAt(a.ix, h.key.ID, h.key.DpRank, h.seqFrame, m.data, m.seq)
	}
	if err != nil {
		if errors.Is(err, kvidx.ErrMalformed) || errors.Is(err, kvidx.ErrTooLarge) {
			return err
		}
		return fmt.Errorf("%w: applying message %d: %v", errIndexUnusable, m.seq, err)
	}
	a.notePublisher(workerKey{ID: h.key.ID, DpRank: res.DpRank}, h.format)
	a.events.Add(res.EventsDecoded)
	return nil
}

// notePublisher registers a publisher on first sight.
func (a *streamApplier) notePublisher(k workerKey, f kvidx.EngineFormat) {
	a.pubsMu.Lock()
	_, known := a.pubs[k]
	if !known {
		a.pubs[k] = f
	}
	a.pubsMu.Unlock()
	if !known && a.register != nil {
		a.register(k)
	}
}

// publishers returns the known publishers, ordered by key.
func (a *streamApplier) publishers() []publisher {
	a.pubsMu.Lock()
	out := make([]publisher, 0, len(a.pubs))
	for k, f := range a.pubs {
		out = append(out, publisher{key: k, format: f})
	}
	a.pubsMu.Unlock()
	slices.SortFunc(out, func(x, y publisher) int { return x.key.compare(y.key) })
	return out
}

// watermarks returns every known publisher's watermark.
func (a *streamApplier) watermarks() []watermarkReport {
	pubs := a.publishers()
	out := make([]watermarkReport, len(pubs))
	for i, p := range pubs {
		out[i] = watermarkReport{WorkerID: p.key.ID, DpRank: p.key.DpRank, Watermark: a.ix.Watermark(p.key.ID, p.key.DpRank)}
	}
	return out
}

// feed returns the engine feed of a wire format (one per format, created on first use).
// The caller holds mu.
func (a *streamApplier) feed(f kvidx.EngineFormat) (*kvidx.EngineFeed, error) {
	if fd, ok := a.feeds[f]; ok {
		return fd, nil
	}
	fd, err := kvidx.NewEngineFeed(f, 0)
	if err != nil {
		return nil, err
	}
	if err := a.hashCheck.configure(fd, f); err != nil {
		_ = fd.Close()
		return nil, err
	}
	a.feeds[f] = fd
	return fd, nil
}

// checkpoint returns the envelope of a snapshot taken now: S = applied, the publishers and
// every feed's state after exactly the messages at or below S. The index's sections,
// written after it, hold each worker at a watermark of at least its last message at or
// below S (docs/replicas.md).
func (a *streamApplier) checkpoint(streamCreated int64) (envelope, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	env := envelope{seq: a.applied.Load(), streamCreated: streamCreated, publishers: a.publishers()}
	formats := make([]kvidx.EngineFormat, 0, len(a.feeds))
	for f := range a.feeds {
		formats = append(formats, f)
	}
	slices.Sort(formats)
	for _, f := range formats {
		state, err := a.feeds[f].SaveState()
		if err != nil {
			return env, err
		}
		env.feeds = append(env.feeds, feedState{format: f, state: state})
	}
	return env, nil
}

// writeSnapshot writes a snapshot object: the envelope of checkpoint, then the library's
// snapshot of the index (flushed first, so every message at or below S is applied).
func (a *streamApplier) writeSnapshot(w io.Writer, streamCreated int64) (envelope, kvidx.SnapshotInfo, error) {
	env, err := a.checkpoint(streamCreated)
	if err != nil {
		return env, kvidx.SnapshotInfo{}, err
	}
	if err := a.ix.Flush(); err != nil {
		return env, kvidx.SnapshotInfo{}, err
	}
	if err := env.write(w); err != nil {
		return env, kvidx.SnapshotInfo{}, err
	}
	info, err := a.ix.WriteSnapshot(w)
	return env, info, err
}

// restoreFeeds loads the feeds' saved states of env (before the index is restored). A state
// the library refuses is a bad envelope; the feeds are then reset.
func (a *streamApplier) restoreFeeds(env envelope) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, fs := range env.feeds {
		fd, err := a.feed(fs.format)
		if err == nil {
			err = fd.RestoreState(fs.state)
		}
		if err != nil {
			a.resetFeedsLocked()
			return fmt.Errorf("%w: engine feed state of format %d: %v", errBadEnvelope, fs.format, err)
		}
	}
	return nil
}

// adopt takes a restored snapshot's position and publishers (routing candidates at once).
func (a *streamApplier) adopt(env envelope) {
	for _, p := range env.publishers {
		a.notePublisher(p.key, p.format)
	}
	a.applied.Store(env.seq)
}

// resetFeeds closes every feed (after a failed restore: the next snapshot starts afresh).
func (a *streamApplier) resetFeeds() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.resetFeedsLocked()
}

func (a *streamApplier) resetFeedsLocked() {
	for f, fd := range a.feeds {
		_ = fd.Close()
		delete(a.feeds, f)
	}
}

// msgHeaders are a stream message's publisher, format, engine sequence frame (8 bytes
// big-endian, nil when the engine sent none) and engine epoch (nil when absent).
type msgHeaders struct {
	key      workerKey
	format   kvidx.EngineFormat
	seqFrame []byte
	epoch    *uint64
}

// parseHeaders reads a message's headers. The subject must agree with them.
func parseHeaders(subject string, h nats.Header) (msgHeaders, error) {
	var out msgHeaders
	id, err := strconv.ParseUint(h.Get(hdrWorkerID), 10, 64)
	if err != nil {
		return out, fmt.Errorf("header %s: %v", hdrWorkerID, err)
	}
	rank, err := strconv.ParseUint(h.Get(hdrDpRank), 10, 32)
	if err != nil {
		return out, fmt.Errorf("header %s: %v", hdrDpRank, err)
	}
	out.key = workerKey{ID: id, DpRank: uint32(rank)}
	if want := fmt.Sprintf("kvidx.events.%d.%d", id, rank); subject != want {
		return out, fmt.Errorf("subject %q does not match the headers (%s)", subject, want)
	}
	switch f := strings.ToLower(h.Get(hdrFormat)); f {
	case "vllm", "":
		out.format = kvidx.EngineVLLM
	case "sglang":
		out.format = kvidx.EngineSGLang
	case "trtllm":
		out.format = kvidx.EngineTRTLLM
	default:
		return out, fmt.Errorf("header %s: unknown format %q", hdrFormat, f)
	}
	if s := h.Get(hdrEngineSeq); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return out, fmt.Errorf("header %s: %v", hdrEngineSeq, err)
		}
		out.seqFrame = binary.BigEndian.AppendUint64(nil, n)
	}
	if s := h.Get(hdrEngineEpoch); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return out, fmt.Errorf("header %s: %v", hdrEngineEpoch, err)
		}
		out.epoch = &n
	}
	return out, nil
}
