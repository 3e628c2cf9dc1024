package zmqfeed

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	kvidx "github.com/kvidx/kvidx/bindings/go"
)

// A stand-in engine for the tests: a PUB and a ROUTER replay socket of go-zeromq (the peer
// side of the wire, independent of this package's client), publishing one chain of one-block
// vLLM batches with vLLM's framing and replay protocol. The end-to-end test of
// examples/go-router runs the same against vLLM's own publisher class.

const testBlockSize = 16

// chainTokens returns the tokens of blocks 0..n-1 of the chain starting at token base.
func chainTokens(base uint32, n int) []uint32 {
	out := make([]uint32, 0, n*testBlockSize)
	for i := range uint32(n * testBlockSize) {
		out = append(out, base+i+1)
	}
	return out
}

// vllmBatch encodes a vLLM (map form) batch of one BlockStored: block seq of the chain at
// token base, engine hash hashBase+seq, its parent the previous block.
func vllmBatch(base uint32, hashBase, seq uint64) []byte {
	b := []byte{0x93, 0xcb}
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(float64(seq)))
	b = append(b, 0x91, 0x88)
	str := func(s string) { b = append(append(b, 0xa0|byte(len(s))), s...) }
	u64 := func(v uint64) { b = binary.BigEndian.AppendUint64(append(b, 0xcf), v) }
	str("type")
	str("BlockStored")
	str("block_hashes")
	b = append(b, 0x91)
	u64(hashBase + seq)
	str("parent_block_hash")
	if seq == 0 {
		b = append(b, 0xc0)
	} else {
		u64(hashBase + seq - 1)
	}
	str("token_ids")
	b = append(b, 0xdc, 0, testBlockSize)
	for _, tok := range chainTokens(base, int(seq)+1)[seq*testBlockSize:] {
		b = binary.BigEndian.AppendUint32(append(b, 0xce), tok)
	}
	str("block_size")
	b = append(b, testBlockSize)
	str("lora_id")
	b = append(b, 0xc0)
	str("medium")
	str("GPU")
	str("lora_name")
	b = append(b, 0xc0)
	return append(b, 0) // dp rank 0
}

// fakeEngine publishes one chain; every batch is kept for replay.
type fakeEngine struct {
	t        *testing.T
	base     uint32
	hashBase uint64
	pub      zmq4.Socket
	router   zmq4.Socket
	cancel   context.CancelFunc
	done     chan struct{}

	mu       sync.Mutex
	next     uint64
	buffer   [][]byte
	requests []uint64 // the replay requests' start sequences
	noReply  bool     // the replay socket reads requests and never answers
}

// startEngine binds a PUB on pubAddr and a ROUTER on replayAddr ("127.0.0.1:0" for any port).
func startEngine(t *testing.T, pubAddr, replayAddr string, base uint32, hashBase uint64) *fakeEngine {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	e := &fakeEngine{t: t, base: base, hashBase: hashBase, cancel: cancel, done: make(chan struct{}),
		pub: zmq4.NewPub(ctx), router: zmq4.NewRouter(ctx, zmq4.WithID(zmq4.SocketIdentity("engine")))}
	if err := e.pub.Listen("tcp://" + pubAddr); err != nil {
		t.Fatal(err)
	}
	if err := e.router.Listen("tcp://" + replayAddr); err != nil {
		t.Fatal(err)
	}
	go e.serveReplay()
	t.Cleanup(e.stop)
	return e
}

func (e *fakeEngine) pubEndpoint() string    { return "tcp://" + e.pub.Addr().String() }
func (e *fakeEngine) replayEndpoint() string { return "tcp://" + e.router.Addr().String() }

// serveReplay answers replay requests as vLLM does: every buffered batch from the start
// sequence on as ["", topic, seq, payload], then the end marker ["", "", 0xFF x 8, ""].
func (e *fakeEngine) serveReplay() {
	defer close(e.done)
	for {
		m, err := e.router.Recv()
		if err != nil {
			return
		}
		if len(m.Frames) != 3 || len(m.Frames[2]) != 8 {
			e.t.Errorf("replay request of %d frames", len(m.Frames))
			continue
		}
		id, start := m.Frames[0], binary.BigEndian.Uint64(m.Frames[2])
		e.mu.Lock()
		e.requests = append(e.requests, start)
		batches := slices.Clone(e.buffer)
		silent := e.noReply
		e.mu.Unlock()
		if silent {
			continue
		}
		for seq := start; seq < uint64(len(batches)); seq++ {
			_ = e.router.Send(zmq4.NewMsgFrom(id, nil, []byte("kv@pod@model"),
				binary.BigEndian.AppendUint64(nil, seq), batches[seq]))
		}
		_ = e.router.Send(zmq4.NewMsgFrom(id, nil, nil, binary.BigEndian.AppendUint64(nil, replayEndSeq), nil))
	}
}

// publish makes the chain's next batch; it goes out on the PUB unless drop (the PUB dropped
// it: only the replay socket has it).
func (e *fakeEngine) publish(drop bool) uint64 {
	e.mu.Lock()
	seq := e.next
	e.next++
	payload := vllmBatch(e.base, e.hashBase, seq)
	e.buffer = append(e.buffer, payload)
	e.mu.Unlock()
	if !drop {
		msg := zmq4.NewMsgFrom([]byte("kv@pod@model"), binary.BigEndian.AppendUint64(nil, seq), payload)
		if err := e.pub.Send(msg); err != nil {
			e.t.Fatal(err)
		}
	}
	return seq
}

// send publishes one batch per character of pattern: '.' goes out on the PUB, 'x' is dropped
// by it (only the replay socket has it).
func (e *fakeEngine) send(pattern string) {
	for _, c := range pattern {
		e.publish(c == 'x')
	}
}

// replayRequests returns the start sequences asked so far.
func (e *fakeEngine) replayRequests() []uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.requests)
}

// subscribed says whether some subscriber's subscription reached the PUB.
func (e *fakeEngine) subscribed() bool {
	return len(e.pub.(zmq4.Topics).Topics()) > 0
}

func (e *fakeEngine) stop() {
	e.cancel()
	_ = e.pub.Close()
	_ = e.router.Close()
}

// eventually polls cond until it holds, failing the test after 20 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// running is a Subscriber in its goroutine over a synchronous index.
type running struct {
	ix     *kvidx.Indexer
	sub    *Subscriber
	cancel context.CancelFunc
	done   chan error
}

func run(t *testing.T, src Source, o Options) *running {
	t.Helper()
	ix, err := kvidx.New(kvidx.Config{Backend: kvidx.BackendPositional})
	if err != nil {
		t.Fatal(err)
	}
	if o.Topic == "" {
		o.Topic = "kv@"
	}
	sub, err := New(ix, src, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{ix: ix, sub: sub, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- sub.Run(ctx) }()
	t.Cleanup(func() {
		r.stop(t)
		_ = sub.Close()
		_ = ix.Close()
	})
	return r
}

// stop cancels Run and waits for it.
func (r *running) stop(t *testing.T) {
	t.Helper()
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after its context was cancelled")
	}
}

// depth is worker 7's depth on the chain at token base (n blocks asked).
func (r *running) depth(t *testing.T, base uint32, n int) uint32 {
	t.Helper()
	local, err := kvidx.HashTokens(chainTokens(base, n), testBlockSize)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := r.ix.FindMatches(local)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.WorkerID == 7 && m.DpRank == 0 {
			return m.Depth
		}
	}
	return 0
}

// applied waits until the subscriber has applied seq.
func (r *running) applied(t *testing.T, seq uint64) {
	t.Helper()
	eventually(t, fmt.Sprintf("batch %d applied", seq), func() bool {
		st := r.sub.Stats()
		return st.Feed.Batches > 0 && st.LastSeq == seq
	})
}
