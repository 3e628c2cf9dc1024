package zmqfeed

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
)

// connectedTo starts a subscriber of worker 7 rank 0 on e and waits for its subscription.
func connectedTo(t *testing.T, e *fakeEngine, withReplay bool, o Options) *running {
	t.Helper()
	src := Source{Endpoint: e.pubEndpoint(), WorkerID: 7}
	if withReplay {
		src.Replay = e.replayEndpoint()
	}
	r := run(t, src, o)
	eventually(t, "the subscription reached the engine", e.subscribed)
	return r
}

// A gap within an epoch (the PUB dropped batches 2 and 3) is filled from the replay socket,
// asked from the first missing sequence: the worker keeps its whole chain.
func TestAGapIsFilledFromTheReplaySocket(t *testing.T) {
	e := startEngine(t, "127.0.0.1:0", "127.0.0.1:0", 0, 1000)
	r := connectedTo(t, e, true, Options{})
	e.send(".")
	r.applied(t, 0)
	e.send(".xx.")
	r.applied(t, 4)
	st := r.sub.Stats()
	if got := r.depth(t, 0, 5); got != 5 {
		t.Fatalf("depth %d, want 5; %+v", got, st)
	}
	if !slices.Equal(e.replayRequests(), []uint64{2}) {
		t.Fatalf("replay requests %v, want [2]", e.replayRequests())
	}
	if st.Gaps != 1 || st.Replayed != 2 || st.Feed.Gaps != 0 || st.Feed.WorkersCleared != 0 || st.Epochs != 1 {
		t.Fatalf("%+v", st)
	}
}

// The engine published before the subscriber connected: the epoch's first batch is above 0,
// so the subscriber asks the replay socket from 0 and applies the whole chain.
func TestALateSubscriberIsReplayedFrom0(t *testing.T) {
	e := startEngine(t, "127.0.0.1:0", "127.0.0.1:0", 0, 1000)
	e.send("...") // no subscriber yet: the PUB drops them
	r := connectedTo(t, e, true, Options{})
	e.send(".")
	r.applied(t, 3)
	if got := r.depth(t, 0, 4); got != 4 {
		t.Fatalf("depth %d, want 4; %+v", got, r.sub.Stats())
	}
	if st := r.sub.Stats(); !slices.Equal(e.replayRequests(), []uint64{0}) || st.Replayed != 3 || st.Gaps != 1 {
		t.Fatalf("replay requests %v; %+v", e.replayRequests(), st)
	}
}

// Without a replay socket a gap stays: the feed clears the worker (under-report rather than
// keep blocks whose removal may be lost), and the batch after the gap, whose parent is gone,
// is rejected by the index.
func TestAGapWithoutReplayClearsTheWorker(t *testing.T) {
	e := startEngine(t, "127.0.0.1:0", "127.0.0.1:0", 0, 1000)
	r := connectedTo(t, e, false, Options{})
	e.send("..")
	r.applied(t, 1)
	if got := r.depth(t, 0, 2); got != 2 {
		t.Fatalf("depth %d before the gap, want 2", got)
	}
	e.send("x.")
	r.applied(t, 3)
	st := r.sub.Stats()
	if got := r.depth(t, 0, 4); got != 0 {
		t.Fatalf("depth %d after the gap, want 0 (cleared); %+v", got, st)
	}
	if st.Gaps != 1 || st.Feed.Gaps != 1 || st.Feed.WorkersCleared != 1 || len(e.replayRequests()) != 0 {
		t.Fatalf("%+v", st)
	}
}

// A replay socket that never answers: the replay fails at ReplayTimeout, the gap stays (the
// worker is cleared), and the subscriber goes on with the live batches.
func TestAFailedReplayLeavesTheGapToTheFeed(t *testing.T) {
	e := startEngine(t, "127.0.0.1:0", "127.0.0.1:0", 0, 1000)
	e.mu.Lock()
	e.noReply = true
	e.mu.Unlock()
	r := connectedTo(t, e, true, Options{ReplayTimeout: 200 * time.Millisecond})
	e.send(".")
	r.applied(t, 0)
	e.send("x.")
	r.applied(t, 2)
	e.send(".")
	r.applied(t, 3)
	st := r.sub.Stats()
	if st.ReplayFailures != 1 || st.Replayed != 0 || st.Feed.WorkersCleared != 1 {
		t.Fatalf("%+v", st)
	}
}

// The engine restarts on the same ports with a new chain and, before the subscriber is back,
// publishes as many batches as the old one did: its next batch continues the old sequence.
// Only the connection tells the engines apart: it begins an epoch, which removes the old
// chain and rebuilds the worker from the new engine's replay socket, asked from 0 (without
// one, the new chain's first blocks stay unknown: its next block is rejected).
func TestAReconnectionBeginsAnEpoch(t *testing.T) {
	for _, withReplay := range []bool{true, false} {
		t.Run(fmt.Sprintf("replay=%v", withReplay), func(t *testing.T) {
			old := startEngine(t, "127.0.0.1:0", "127.0.0.1:0", 0, 1000)
			pubAddr, replayAddr := old.pub.Addr().String(), old.router.Addr().String()
			r := connectedTo(t, old, withReplay, Options{MaxBackoff: 100 * time.Millisecond})
			old.send("...")
			r.applied(t, 2)
			if got := r.depth(t, 0, 3); got != 3 {
				t.Fatalf("depth %d on the old chain, want 3", got)
			}
			old.stop()
			<-old.done
			fresh := startEngine(t, pubAddr, replayAddr, 50_000, 9000)
			fresh.send("xxx") // before the subscriber is back: only the replay socket has them
			eventually(t, "the subscriber connected again", fresh.subscribed)
			fresh.send(".")
			r.applied(t, 3)
			st := r.sub.Stats()
			if got := r.depth(t, 0, 3); got != 0 {
				t.Fatalf("depth %d on the old chain after the restart, want 0; %+v", got, st)
			}
			want, requests := uint32(0), []uint64(nil)
			if withReplay {
				want, requests = 4, []uint64{0}
			}
			if got := r.depth(t, 50_000, 4); got != want {
				t.Fatalf("depth %d on the new chain, want %d; %+v", got, want, st)
			}
			if reqs := fresh.replayRequests(); !slices.Equal(reqs, requests) {
				t.Fatalf("replay requests to the new engine %v, want %v", reqs, requests)
			}
			if st.Epochs != 2 || st.Connects < 2 || st.Disconnects < 1 || st.Feed.WorkersCleared != 0 {
				t.Fatalf("%+v", st)
			}
		})
	}
}

// An endpoint that accepts TCP and never completes the handshake: Run keeps trying, and
// returns once its context is cancelled, also in the middle of a handshake.
func TestRunStopsWhenCancelled(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c // held open, silent
		}
	}()
	r := run(t, Source{Endpoint: "tcp://" + ln.Addr().String(), WorkerID: 7}, Options{ConnectTimeout: time.Hour})
	c := <-accepted
	defer c.Close()
	r.stop(t)
	if st := r.sub.Stats(); st.Connects != 0 {
		t.Fatalf("%+v", st)
	}
}

// A publisher announcing a frame above MaxMessageBytes is disconnected before the frame is
// read (its size is never allocated); the subscriber connects again.
func TestAnOversizedMessageIsRefused(t *testing.T) {
	e := startEngine(t, "127.0.0.1:0", "127.0.0.1:0", 0, 1000)
	r := connectedTo(t, e, false, Options{MaxMessageBytes: 256, MaxBackoff: 50 * time.Millisecond})
	e.send(".") // about 200 bytes: passes
	r.applied(t, 0)
	big := make([]byte, 4096)
	if err := e.pub.Send(zmq4.NewMsgFrom([]byte("kv@x"), make([]byte, 8), big)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the oversized message dropped the connection", func() bool { return r.sub.Stats().Disconnects > 0 })
}

func TestGuardRefusesAnAnnouncedSizeBeforeItIsRead(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	g := newGuardedConn(a, 1<<20)
	go func() {
		stream := make([]byte, greetingLen)
		stream = append(stream, 0x01, 3, 'k', 'v', '@')       // a 3-byte frame, more follows
		stream = append(stream, 0x02, 0, 0, 1, 0, 0, 0, 0, 0) // a long frame of 1 TiB
		_, _ = b.Write(stream)
	}()
	buf := make([]byte, 4096)
	total := 0
	var err error
	for err == nil {
		var n int
		n, err = g.Read(buf)
		total += n
	}
	if !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("read error %v, want ErrMessageTooLarge", err)
	}
	if _, again := g.Read(buf); !errors.Is(again, ErrMessageTooLarge) {
		t.Fatalf("a later read: %v", again)
	}
	if total > greetingLen+5 {
		t.Fatalf("%d bytes passed, the oversized header among them", total)
	}
}

func TestGuardCountsEveryFrameOfAMessage(t *testing.T) {
	var g guardedConn
	g.limit = 100
	frame := func(more bool, n int) []byte {
		f := byte(0)
		if more {
			f = 1
		}
		return append([]byte{f, byte(n)}, make([]byte, n)...)
	}
	// 3 frames of 30 bytes: 96 bytes with headers, under 100; a message ends, the count too.
	for range 3 {
		if err := g.scan(append(append(frame(true, 30), frame(true, 30)...), frame(false, 30)...)); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.scan(append(frame(true, 60), frame(false, 60)...)); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("two 60-byte frames in one message: %v", err)
	}
}
