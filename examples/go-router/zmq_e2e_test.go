package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The --zmq end-to-end test: vLLM's own ZmqEventPublisher class (the vllm wheel, loaded by
// examples/zmq-subscriber/vllm_engine.py with its heavy imports stood in for) publishes KV
// events on two DP ranks with their replay sockets, and the router, started from its command
// line, subscribes to both and answers /route. scripts/test-go.sh points KVIDX_VLLM_PYTHON at
// the venv of scripts/vllm-venv.sh.

// zmqRankTokens separates the ranks' chains: rank r's block s holds tokens
// r*zmqRankTokens + 16*s + 1 .. + 16 (vllm_engine.py --rank-token-offset).
const zmqRankTokens = 1_000_000

// vllmPython returns the Python that can load vLLM's publisher (KVIDX_VLLM_PYTHON, else the
// venv scripts/vllm-venv.sh makes); without one the test fails under CI=true and is skipped
// loudly otherwise.
func vllmPython(t *testing.T) string {
	t.Helper()
	py := os.Getenv("KVIDX_VLLM_PYTHON")
	if py == "" {
		py, _ = filepath.Abs("../../target/vllm-venv/bin/python")
	}
	if _, err := os.Stat(py); err == nil {
		return py
	}
	msg := fmt.Sprintf("no Python with the vllm wheel at %s: run `bash scripts/vllm-venv.sh` and set KVIDX_VLLM_PYTHON to the path it prints", py)
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: this is a failure)", msg)
	}
	t.Skipf("SKIPPED LOUDLY: %s", msg)
	return ""
}

// basePort returns a free port whose next port is free too (vLLM binds rank r on base + r),
// not in avoid.
func basePort(t *testing.T, avoid ...int) int {
	t.Helper()
	for range 100 {
		p := freePort(t)
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+1))
		if err != nil {
			continue
		}
		ln.Close()
		clash := false
		for _, a := range avoid {
			clash = clash || (p >= a-1 && p <= a+1)
		}
		if !clash {
			return p
		}
	}
	t.Fatal("no two consecutive free ports")
	return 0
}

// vllmEngine is vllm_engine.py running: vLLM's publishers, driven over stdin.
type vllmEngine struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines *bufio.Scanner
	sent  []int // batches published per rank
}

func startVLLMEngine(t *testing.T, py string, pubPort, replayPort, ranks int) *vllmEngine {
	t.Helper()
	cmd := exec.Command(py, "../zmq-subscriber/vllm_engine.py",
		"--endpoint", fmt.Sprintf("tcp://*:%d", pubPort), "--replay", fmt.Sprintf("tcp://*:%d", replayPort), // "*": vLLM binds
		"--ranks", fmt.Sprint(ranks), "--rank-token-offset", fmt.Sprint(zmqRankTokens))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	e := &vllmEngine{t: t, cmd: cmd, stdin: stdin, lines: bufio.NewScanner(stdout), sent: make([]int, ranks)}
	if !e.lines.Scan() || e.lines.Text() != "ready" {
		t.Fatalf("vllm_engine.py did not start: %q", e.lines.Text())
	}
	return e
}

// publish has rank's publisher send its chain's next block; it returns once vLLM's
// publisher thread has sent it.
func (e *vllmEngine) publish(rank int) {
	e.t.Helper()
	fmt.Fprintf(e.stdin, "publish %d\n", rank)
	if !e.lines.Scan() || !strings.HasPrefix(e.lines.Text(), fmt.Sprintf("sent %d %d ", rank, e.sent[rank])) {
		e.t.Fatalf("vllm_engine.py: %q after publish %d", e.lines.Text(), rank)
	}
	e.sent[rank]++
}

// tcpGate forwards connections to a port while open; closed, it cuts the connections it
// carries and drops new ones at once.
type tcpGate struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	open   bool
	conns  []net.Conn
}

func startGate(t *testing.T, target string) *tcpGate {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &tcpGate{ln: ln, target: target, open: true}
	t.Cleanup(func() { ln.Close(); g.setOpen(false) })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			g.mu.Lock()
			open := g.open
			g.mu.Unlock()
			up, err := net.Dial("tcp", target)
			if !open || err != nil {
				c.Close()
				if up != nil {
					up.Close()
				}
				continue
			}
			g.mu.Lock()
			g.conns = append(g.conns, c, up)
			g.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
	return g
}

// setOpen opens or closes the gate (closing cuts every connection it carries).
func (g *tcpGate) setOpen(open bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open = open
	if !open {
		for _, c := range g.conns {
			c.Close()
		}
		g.conns = nil
	}
}

// routeDepth asks /route for rank's chain of n blocks and returns the chosen worker's rank
// and overlap (with -load-weight 0 the deepest holder wins, ties to the lower rank).
func routeDepth(s *testServer, rank, n int) (uint32, uint32) {
	s.t.Helper()
	tokens := make([]uint32, 16*n)
	for i := range tokens {
		tokens[i] = uint32(rank*zmqRankTokens + i + 1)
	}
	var d Decision
	if err := json.Unmarshal(s.mustDo("POST", "/route", map[string]any{"token_ids": tokens}, http.StatusOK), &d); err != nil {
		s.t.Fatal(err)
	}
	return d.DpRank, d.OverlapBlocks
}

// holdsAll publishes one more batch on each rank until every rank's whole chain is what
// /route finds on it: the first batches after a connection may reach the PUB before the
// subscription did (the next one reveals them as a gap). At most 20 rounds.
func holdsAll(t *testing.T, e *vllmEngine, s *testServer, ranks ...int) {
	t.Helper()
	for range 20 {
		for _, r := range ranks {
			e.publish(r)
		}
		done := pollUntil(2*time.Second, 10*time.Millisecond, func() bool {
			for _, r := range ranks {
				if got, depth := routeDepth(s, r, e.sent[r]); got != uint32(r) || depth != uint32(e.sent[r]) {
					return false
				}
			}
			return true
		})
		if done {
			return
		}
	}
	for _, r := range ranks {
		got, depth := routeDepth(s, r, e.sent[r])
		t.Errorf("rank %d: /route answers rank %d at depth %d, want rank %d at depth %d", r, got, depth, r, e.sent[r])
	}
	t.Fatalf("metrics:\n%s", s.mustDo("GET", "/metrics", nil, http.StatusOK))
}

// TestZMQFromVLLMsPublisher: vLLM's publisher sends 3 batches on each rank before the router
// starts (the router's first batch of each is above 0: a gap from the start, filled from the
// replay socket asked from 0), then rank 1's connection is cut and 3 of its batches go out
// while the router is away (when it is back, the new epoch is rebuilt from the replay socket).
// Each time /route must find every rank's whole chain, which without the replay socket it
// cannot (the batches after a gap continue chains the index never got, and are rejected).
func TestZMQFromVLLMsPublisher(t *testing.T) {
	py := vllmPython(t)
	pubPort := basePort(t)
	replayPort := basePort(t, pubPort)
	e := startVLLMEngine(t, py, pubPort, replayPort, 2)
	for range 3 {
		e.publish(0)
		e.publish(1)
	}
	gate := startGate(t, fmt.Sprintf("127.0.0.1:%d", pubPort+1))
	args := []string{"-event-threads", "0", "-load-weight", "0",
		"--zmq", fmt.Sprintf("tcp://127.0.0.1:%d=7,replay=tcp://127.0.0.1:%d", pubPort, replayPort),
		"--zmq", fmt.Sprintf("tcp://%s=7:1,replay=tcp://127.0.0.1:%d", gate.ln.Addr(), replayPort+1)}
	o, exit, done := parseCommandLine(args, io.Discard, os.Stderr)
	if done {
		t.Fatalf("parseCommandLine(%q): exit %d", args, exit)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, ix, stop, err := newFedServer(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); cancel(); stop(); _ = ix.Close() })
	s := &testServer{t: t, base: "http://" + ln.Addr().String(), client: &http.Client{Timeout: 10 * time.Second}}
	metric := func(name string, rank int) int64 {
		return s.metricInt(fmt.Sprintf("%s{worker_id=\"7\",dp_rank=\"%d\"}", name, rank))
	}

	holdsAll(t, e, s, 0, 1)
	for r := range 2 {
		if n := metric("router_zmq_replayed_batches_total", r); n < 3 {
			t.Errorf("rank %d: %d batches replayed, want at least the 3 sent before the router", r, n)
		}
	}
	t.Logf("zmq e2e: late start: ranks at %v batches of vLLM's publisher, replayed %d and %d",
		e.sent, metric("router_zmq_replayed_batches_total", 0), metric("router_zmq_replayed_batches_total", 1))

	gate.setOpen(false)
	if !pollUntil(20*time.Second, 10*time.Millisecond, func() bool { return metric("router_zmq_disconnects_total", 1) > 0 }) {
		t.Fatal("the router never saw rank 1's connection cut")
	}
	replayedBefore := metric("router_zmq_replayed_batches_total", 1)
	for range 3 {
		e.publish(1) // no subscriber on rank 1's PUB: dropped
	}
	gate.setOpen(true)
	holdsAll(t, e, s, 1)
	if n := metric("router_zmq_epochs_total", 1); n < 2 {
		t.Errorf("rank 1: %d epochs, want a new one after the cut", n)
	}
	if n := metric("router_zmq_replayed_batches_total", 1) - replayedBefore; n < 3 {
		t.Errorf("rank 1: %d batches replayed after the cut, want at least the 3 sent meanwhile", n)
	}
	if got, depth := routeDepth(s, 0, e.sent[0]); got != 0 || depth != uint32(e.sent[0]) {
		t.Errorf("rank 0 after rank 1's cut: rank %d depth %d, want rank 0 depth %d", got, depth, e.sent[0])
	}
	if code, body := s.do("POST", "/events", []kvEvent{}); code != http.StatusConflict {
		t.Errorf("POST /events in --zmq mode: %d %s, want 409", code, body)
	}
	t.Logf("zmq e2e: after a cut: rank 1 at %d batches, epochs %d, replayed %d",
		e.sent[1], metric("router_zmq_epochs_total", 1), metric("router_zmq_replayed_batches_total", 1))
}
