package kvidx

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"testing"
	"time"
)

// hangDeadline is how long a call may take before the test reports a hang. It is only the
// failure signal of a deadlock: a passing run never waits for it.
const hangDeadline = 2 * time.Minute

// withinDeadline runs f and, if it has not returned by hangDeadline, prints the failure and
// every goroutine's stack and exits: a deadlocked indexer would also hang the test's cleanup
// (which a panic or t.Fatal would run).
func withinDeadline(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(hangDeadline):
		stacks := make([]byte, 1<<20)
		stacks = stacks[:runtime.Stack(stacks, true)]
		fmt.Fprintf(os.Stderr, "--- FAIL: %s: %s: still blocked after %v (deadlock)\n%s\n", t.Name(), what, hangDeadline, stacks)
		os.Exit(1)
	}
}

// callbackWriter is an io.Writer that runs hook (once) on its first write, then keeps the
// bytes.
type callbackWriter struct {
	buf  bytes.Buffer
	hook func()
}

func (w *callbackWriter) Write(p []byte) (int, error) {
	if h := w.hook; h != nil {
		w.hook = nil
		h()
	}
	return w.buf.Write(p)
}

// statsUntilClosed calls ix.Stats until it reports ErrClosed; any other error fails.
func statsUntilClosed(t *testing.T, ix *Indexer) {
	for {
		_, err := ix.Stats()
		if errors.Is(err, ErrClosed) {
			return
		}
		if err != nil {
			t.Errorf("Stats from the snapshot's writer: %v", err)
			return
		}
	}
}

// A snapshot's writer calls back into the indexer while another goroutine closes it: the
// nested calls work until Close has begun, then return ErrClosed; the snapshot completes and
// Close returns once it has.
func TestSnapshotWriterCallsBackWhileClosing(t *testing.T) {
	for _, cfg := range configs {
		t.Run(configName(cfg), func(t *testing.T) {
			ix := mustNew(t, cfg)
			applyAt(t, ix, randomBatches(3, 50))
			mustFlush(t, ix)
			closed := make(chan error, 1)
			w := &callbackWriter{hook: func() {
				if _, err := ix.Stats(); err != nil {
					t.Errorf("Stats from the writer before Close: %v", err)
				}
				go func() { closed <- ix.Close() }()
				statsUntilClosed(t, ix)
			}}
			withinDeadline(t, "WriteSnapshot whose writer calls Stats while Close runs", func() {
				info, err := ix.WriteSnapshot(w)
				if err != nil || info.Bytes != uint64(w.buf.Len()) {
					t.Errorf("WriteSnapshot: %+v, %v (wrote %d bytes)", info, err, w.buf.Len())
				}
				if err := <-closed; err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			if _, err := ix.Stats(); !errors.Is(err, ErrClosed) {
				t.Fatalf("Stats after Close: %v", err)
			}
			// The snapshot is whole: it restores.
			r := mustNew(t, Config{Backend: cfg.Backend})
			if _, err := r.RestoreSnapshot(&w.buf); err != nil {
				t.Fatalf("restoring the snapshot written while closing: %v", err)
			}
		})
	}
}

// Close called by the snapshot's own writer returns (it cannot wait for the call it is
// part of); later calls get ErrClosed and the handle is freed once the snapshot returns.
func TestSnapshotWriterClosesItsIndexer(t *testing.T) {
	ix := mustNew(t, Config{EventThreads: 2})
	applyAt(t, ix, randomBatches(5, 20))
	mustFlush(t, ix)
	freed := handlesFreed.Load()
	w := &callbackWriter{hook: func() {
		if err := ix.Close(); err != nil {
			t.Errorf("Close from the writer: %v", err)
		}
		if _, err := ix.Stats(); !errors.Is(err, ErrClosed) {
			t.Errorf("Stats after Close, from the writer: %v", err)
		}
		if handlesFreed.Load() != freed {
			t.Error("the handle was freed while the snapshot was using it")
		}
	}}
	withinDeadline(t, "WriteSnapshot whose writer closes the indexer", func() {
		if _, err := ix.WriteSnapshot(w); err != nil {
			t.Errorf("WriteSnapshot: %v", err)
		}
	})
	if got := handlesFreed.Load(); got != freed+1 {
		t.Fatalf("handles freed %d, want %d once the snapshot returned", got, freed+1)
	}
}

// callbackReader reads from r and runs hook (once) on its first read.
type callbackReader struct {
	r    io.Reader
	hook func()
}

func (c *callbackReader) Read(p []byte) (int, error) {
	if h := c.hook; h != nil {
		c.hook = nil
		h()
	}
	return c.r.Read(p)
}

// The same for a restore's reader.
func TestSnapshotReaderCallsBackWhileClosing(t *testing.T) {
	src := mustNew(t, Config{})
	applyAt(t, src, randomBatches(7, 30))
	var snap bytes.Buffer
	if _, err := src.WriteSnapshot(&snap); err != nil {
		t.Fatal(err)
	}
	ix := mustNew(t, Config{EventThreads: 2})
	closed := make(chan error, 1)
	r := &callbackReader{r: &snap, hook: func() {
		go func() { closed <- ix.Close() }()
		statsUntilClosed(t, ix)
	}}
	withinDeadline(t, "RestoreSnapshot whose reader calls Stats while Close runs", func() {
		if _, err := ix.RestoreSnapshot(r); err != nil {
			t.Errorf("RestoreSnapshot: %v", err)
		}
		if err := <-closed; err != nil {
			t.Errorf("Close: %v", err)
		}
	})
}
