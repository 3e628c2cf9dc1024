package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	kvidx "github.com/kvidx/kvidx/bindings/go"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The end-to-end replica test: a real nats-server, the router binary started three times
// in --nats mode, a bench workload published as vLLM engine batches exactly as the bridge
// publishes them, and faults (kill -9 of a replica, a nats-server restart, a corrupted
// snapshot). It takes ~20-40 s, so it runs from scripts/test-replicas.sh (which sets
// KVIDX_REPLICA_E2E=1 and KVIDX_REPLICA_WORKLOAD), not in the plain go test run.

// e2eBlockSize is the tokens per block of the synthesized engine batches.
const e2eBlockSize = 16

// tokensFor returns the e2eBlockSize tokens standing for a workload block of local hash l:
// a deterministic function of l, so the same workload block is the same tokens everywhere.
func tokensFor(l uint64) []uint32 {
	out := make([]uint32, e2eBlockSize)
	x := l
	for i := range out {
		x += 0x9E3779B97F4A7C15 // splitmix64
		z := x
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
		z = (z ^ (z >> 27)) * 0x94D049BB133111EB
		out[i] = uint32(z ^ (z >> 31))
	}
	return out
}

// localHashCache maps a workload local hash to the kvidx local hash of its tokens.
type localHashCache map[uint64]uint64

func (c localHashCache) get(t *testing.T, l uint64) uint64 {
	if h, ok := c[l]; ok {
		return h
	}
	hs, err := kvidx.HashTokens(tokensFor(l), e2eBlockSize)
	if err != nil || len(hs) != 1 {
		t.Fatalf("hashing the tokens of %d: %v %v", l, hs, err)
	}
	c[l] = hs[0]
	return hs[0]
}

// engineMsg is one engine batch of one worker, as the bridge publishes it, with the same
// events as the reference index takes them.
type engineMsg struct {
	key       workerKey
	engineSeq uint64
	payload   []byte
	events    []kvidx.Event
	nevents   int
	streamSeq uint64 // set once published
}

// msgpack writes the few msgpack shapes of a vLLM KVEventBatch.
type msgpack struct{ b []byte }

func (m *msgpack) uint(v uint64) {
	switch {
	case v < 128:
		m.b = append(m.b, byte(v))
	case v <= math.MaxUint8:
		m.b = append(m.b, 0xcc, byte(v))
	case v <= math.MaxUint16:
		m.b = binary.BigEndian.AppendUint16(append(m.b, 0xcd), uint16(v))
	case v <= math.MaxUint32:
		m.b = binary.BigEndian.AppendUint32(append(m.b, 0xce), uint32(v))
	default:
		m.b = binary.BigEndian.AppendUint64(append(m.b, 0xcf), v)
	}
}

func (m *msgpack) str(s string) {
	if len(s) < 32 {
		m.b = append(m.b, 0xa0|byte(len(s)))
	} else {
		m.b = append(m.b, 0xd9, byte(len(s)))
	}
	m.b = append(m.b, s...)
}

func (m *msgpack) array(n int) {
	if n < 16 {
		m.b = append(m.b, 0x90|byte(n))
	} else {
		m.b = binary.BigEndian.AppendUint32(append(m.b, 0xdd), uint32(n))
	}
}

func (m *msgpack) mapHeader(n int) { m.b = append(m.b, 0x80|byte(n)) }
func (m *msgpack) nil()            { m.b = append(m.b, 0xc0) }
func (m *msgpack) float(f float64) {
	m.b = binary.BigEndian.AppendUint64(append(m.b, 0xcb), math.Float64bits(f))
}

// vllmPayload encodes workload events of one worker as a vLLM (0.26+, map form) batch.
func vllmPayload(t *testing.T, ops []workloadOp, rank uint32, ts float64) []byte {
	var m msgpack
	m.array(3)
	m.float(ts)
	m.array(len(ops))
	for _, op := range ops {
		switch op.Op {
		case "stored":
			m.mapHeader(8)
			m.str("type")
			m.str("BlockStored")
			m.str("block_hashes")
			m.array(len(op.Blocks))
			for _, b := range op.Blocks {
				m.uint(b[1])
			}
			m.str("parent_block_hash")
			if op.Parent != nil {
				m.uint(*op.Parent)
			} else {
				m.nil()
			}
			m.str("token_ids")
			m.array(len(op.Blocks) * e2eBlockSize)
			for _, b := range op.Blocks {
				for _, tok := range tokensFor(b[0]) {
					m.uint(uint64(tok))
				}
			}
			m.str("block_size")
			m.uint(e2eBlockSize)
			m.str("lora_id")
			m.nil()
			m.str("medium")
			m.str("GPU")
			m.str("lora_name")
			m.nil()
		case "removed":
			m.mapHeader(3)
			m.str("type")
			m.str("BlockRemoved")
			m.str("block_hashes")
			m.array(len(op.SeqHashes))
			for _, h := range op.SeqHashes {
				m.uint(h)
			}
			m.str("medium")
			m.str("GPU")
		case "cleared":
			m.mapHeader(1)
			m.str("type")
			m.str("AllBlocksCleared")
		default:
			t.Fatalf("op %q in an engine batch", op.Op)
		}
	}
	m.uint(uint64(rank))
	return m.b
}

// e2eWorkload is a workload converted: engine batches in publishing order, the queries
// (kvidx local hashes) and every worker.
type e2eWorkload struct {
	msgs    []*engineMsg
	queries [][]uint64
	workers []workerKey
	events  int
}

// loadE2EWorkload reads a workload file and groups each worker's consecutive events into
// engine batches of at most perBatch events (a worker's events stay in order; batches are
// published in the order of their last event).
func loadE2EWorkload(t *testing.T, path string, perBatch int) *e2eWorkload {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := &e2eWorkload{}
	hashes := localHashCache{}
	pending := map[workerKey][]workloadOp{}
	seqs := map[workerKey]uint64{}
	flush := func(k workerKey) {
		ops := pending[k]
		if len(ops) == 0 {
			return
		}
		m := &engineMsg{key: k, engineSeq: seqs[k], payload: vllmPayload(t, ops, k.DpRank, float64(len(w.msgs))), nevents: len(ops)}
		seqs[k]++
		for _, op := range ops {
			ev := op.toEvent(t)
			if ev.Stored != nil {
				for i := range ev.Stored.Blocks {
					ev.Stored.Blocks[i].TokensHash = hashes.get(t, ev.Stored.Blocks[i].TokensHash)
				}
			}
			ie, err := ev.toIndexEvent()
			if err != nil {
				t.Fatal(err)
			}
			m.events = append(m.events, ie)
		}
		w.msgs = append(w.msgs, m)
		pending[k] = pending[k][:0]
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var op workloadOp
		if err := json.Unmarshal(sc.Bytes(), &op); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if op.Op == "match" {
			q := make([]uint64, len(op.LocalHashes))
			for i, l := range op.LocalHashes {
				q[i] = hashes.get(t, l)
			}
			w.queries = append(w.queries, q)
			continue
		}
		k := workerKey{op.Worker, op.DpRank}
		if _, ok := seqs[k]; !ok {
			seqs[k] = 0
			w.workers = append(w.workers, k)
		}
		pending[k] = append(pending[k], op)
		w.events++
		if len(pending[k]) >= perBatch {
			flush(k)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, k := range w.workers {
		flush(k)
	}
	return w
}

// natsServer is a nats-server child process with JetStream on a temp directory.
type natsServer struct {
	t        *testing.T
	bin, dir string
	port     int
	cmd      *exec.Cmd
	log      *os.File
	// exited is closed once the running process has exited (its Wait returned).
	exited chan struct{}
}

// natsServerBinary finds nats-server; without it the test fails under CI=true and is
// skipped (with the reason) otherwise.
func natsServerBinary(t *testing.T) string {
	for _, p := range []string{os.Getenv("NATS_SERVER"), "nats-server", "/usr/sbin/nats-server", "/usr/bin/nats-server"} {
		if p == "" {
			continue
		}
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("nats-server is not installed (CI=true: this is a failure; scripts/setup.sh installs Debian's nats-server)")
	}
	t.Skip("SKIPPED LOUDLY: nats-server is not installed (apt-get install nats-server, or run scripts/setup.sh)")
	return ""
}

// freePort returns a loopback TCP port free at the time of the call.
func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func (s *natsServer) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.port) }

// start runs the server and waits until it listens.
func (s *natsServer) start() {
	s.t.Helper()
	if !s.tryStart() {
		s.t.Fatalf("nats-server exited instead of listening on %d (log %s)", s.port, s.log.Name())
	}
}

// tryStart is start, false if the server exited instead (its port taken by another process
// meanwhile). A port that answers is not enough: it may be another process's, so the
// server's own log, from this start on, must say it listens there, and it must be running.
func (s *natsServer) tryStart() bool {
	s.t.Helper()
	logged, err := s.log.Seek(0, io.SeekEnd)
	if err != nil {
		s.t.Fatal(err)
	}
	s.cmd = exec.Command(s.bin, "-js", "-a", "127.0.0.1", "-p", strconv.Itoa(s.port), "-sd", s.dir)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	exited := make(chan struct{})
	s.exited = exited
	go func(cmd *exec.Cmd) { _ = cmd.Wait(); close(exited) }(s.cmd)
	listening := fmt.Sprintf("Listening for client connections on 127.0.0.1:%d", s.port)
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-exited:
			s.cmd = nil
			return false
		default:
		}
		text, _ := os.ReadFile(s.log.Name())
		if int64(len(text)) > logged && strings.Contains(string(text[logged:]), listening) {
			c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", s.port), 200*time.Millisecond)
			if err == nil {
				c.Close()
				return true
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("nats-server did not start (log %s)", s.log.Name())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop ends the server gracefully (SIGTERM: JetStream flushes its files) and waits.
func (s *natsServer) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	s.cmd = nil
}

// routerProc is one router replica process.
type routerProc struct {
	t       *testing.T
	name    string
	bin     string
	args    []string
	addr    string
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has exited
	client  *http.Client
}

// start runs the router and waits until GET /replica answers (bootstrap done).
func (p *routerProc) start() {
	p.t.Helper()
	lf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		p.t.Fatal(err)
	}
	fmt.Fprintf(lf, "==== start %s\n", time.Now().Format(time.RFC3339Nano))
	p.cmd = exec.Command(p.bin, append([]string{"-addr", p.addr}, p.args...)...)
	p.cmd.Stdout, p.cmd.Stderr = lf, lf
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	lf.Close()
	p.exited = make(chan struct{})
	go func(c *exec.Cmd, exited chan struct{}) { _ = c.Wait(); close(exited) }(p.cmd, p.exited)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if resp, err := p.client.Get("http://" + p.addr + "/replica"); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s did not start; log:\n%s", p.name, p.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill9 kills the process with SIGKILL and waits until it has exited (its port is free).
func (p *routerProc) kill9() {
	if p.cmd != nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			p.t.Errorf("%s did not exit 10 s after SIGKILL", p.name)
		}
	}
	p.cmd = nil
}

func (p *routerProc) logTail() string {
	b, _ := os.ReadFile(p.logPath)
	if len(b) > 6000 {
		b = b[len(b)-6000:]
	}
	return string(b)
}

// report returns GET /replica.
func (p *routerProc) report() replicaReport {
	p.t.Helper()
	resp, err := p.client.Get("http://" + p.addr + "/replica")
	if err != nil {
		p.t.Fatalf("%s: %v", p.name, err)
	}
	defer resp.Body.Close()
	var r replicaReport
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		p.t.Fatalf("%s: /replica: %v", p.name, err)
	}
	return r
}

// route posts one query, ends the routed request (DELETE) and returns the decision.
func (p *routerProc) route(q []uint64) Decision {
	p.t.Helper()
	d := p.routeKeep(q)
	p.done(d.RequestID)
	return d
}

// done ends a routed request (DELETE /requests/{id}), which must be in flight.
func (p *routerProc) done(id uint64) {
	p.t.Helper()
	req, _ := http.NewRequest("DELETE", fmt.Sprintf("http://%s/requests/%d", p.addr, id), nil)
	resp, err := p.client.Do(req)
	if err != nil {
		p.t.Fatalf("%s: DELETE: %v", p.name, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		p.t.Fatalf("%s: DELETE /requests/%d: %d", p.name, id, resp.StatusCode)
	}
}

// routeKeep posts one query and returns the decision; the request stays in flight.
func (p *routerProc) routeKeep(q []uint64) Decision {
	p.t.Helper()
	body, _ := json.Marshal(routeRequest{LocalHashes: q})
	resp, err := p.client.Post("http://"+p.addr+"/route", "application/json", bytes.NewReader(body))
	if err != nil {
		p.t.Fatalf("%s: %v", p.name, err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		p.t.Fatalf("%s: /route: %d %s", p.name, resp.StatusCode, out)
	}
	var d Decision
	if err := json.Unmarshal(out, &d); err != nil {
		p.t.Fatal(err)
	}
	return d
}

// shareWatch follows the route sharing of a set of replicas (routeshare.go): it counts the
// messages each one announced since the watch began and waits until every other one has
// received them, so that the next route is made with the load views agreeing.
type shareWatch struct {
	t     *testing.T
	procs []*routerProc
	// heard is each replica's count of the others' routes and dones when the watch began.
	heard []uint64
	// sent is each replica's announcements since the watch began.
	sent []uint64
}

func newShareWatch(t *testing.T, procs ...*routerProc) *shareWatch {
	t.Helper()
	w := &shareWatch{t: t, procs: procs, heard: make([]uint64, len(procs)), sent: make([]uint64, len(procs))}
	for i, p := range procs {
		w.heard[i] = p.heard()
	}
	return w
}

// load returns GET /load.
func (p *routerProc) load() loadReport {
	p.t.Helper()
	resp, err := p.client.Get("http://" + p.addr + "/load")
	if err != nil {
		p.t.Fatalf("%s: %v", p.name, err)
	}
	defer resp.Body.Close()
	var r loadReport
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		p.t.Fatalf("%s: /load: %v", p.name, err)
	}
	return r
}

// heard is a replica's count of the other replicas' routes and dones received.
func (p *routerProc) heard() uint64 {
	p.t.Helper()
	r := p.load()
	if r.Sharing == nil {
		p.t.Fatalf("%s: no sharing in /load: route sharing is off", p.name)
	}
	return r.Sharing.Routes + r.Sharing.Dones
}

// route routes q on replica i, ends the request (DELETE) and waits until the others heard
// of both.
func (w *shareWatch) route(i int, q []uint64) Decision {
	w.t.Helper()
	d := w.procs[i].route(q)
	w.sent[i] += 2
	w.settle()
	return d
}

// routeKeep routes q on replica i, keeps the request in flight and waits until the others
// heard of it.
func (w *shareWatch) routeKeep(i int, q []uint64) Decision {
	w.t.Helper()
	d := w.procs[i].routeKeep(q)
	w.sent[i]++
	w.settle()
	return d
}

// done ends a request routed on replica i and waits until the others heard of it.
func (w *shareWatch) done(i int, id uint64) {
	w.t.Helper()
	w.procs[i].done(id)
	w.sent[i]++
	w.settle()
}

// settle waits until every replica received every announcement the others made since the
// watch began (and fails the test after 10 s).
func (w *shareWatch) settle() {
	w.t.Helper()
	var total uint64
	for _, n := range w.sent {
		total += n
	}
	for i, p := range w.procs {
		want := w.heard[i] + total - w.sent[i]
		var got uint64
		if !pollUntil(10*time.Second, time.Millisecond, func() bool { got = p.heard(); return got >= want }) {
			w.t.Fatalf("%s heard %d routes and dones of the other replicas, want %d", p.name, got, want)
		}
		if got != want {
			w.t.Fatalf("%s heard %d routes and dones of the other replicas, want exactly %d", p.name, got, want)
		}
	}
}

// pollUntil calls done every interval until it returns true (then true) or timeout has
// passed since the first call (then false, after a last call).
func pollUntil(timeout, interval time.Duration, done func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !done() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(interval)
	}
	return true
}

// waitApplied waits until the replica handled every message up to seq.
func (p *routerProc) waitApplied(seq uint64, timeout time.Duration) replicaReport {
	p.t.Helper()
	var r replicaReport
	if !pollUntil(timeout, 20*time.Millisecond, func() bool { r = p.report(); return r.AppliedSeq >= seq }) {
		p.t.Fatalf("%s: applied %d, want %d after %v; log:\n%s", p.name, r.AppliedSeq, seq, timeout, p.logTail())
	}
	return r
}

// bridgePublisher publishes engine batches as the bridge does, retrying through server restarts
// (the Nats-Msg-Id makes a retried publish land once).
type bridgePublisher struct {
	t     *testing.T
	js    jetstream.JetStream
	epoch uint64 // the bridge's id of one engine connection (decimal in the header)
}

func (p *bridgePublisher) publish(m *engineMsg) {
	p.t.Helper()
	msg := nats.NewMsg(fmt.Sprintf("kvidx.events.%d.%d", m.key.ID, m.key.DpRank))
	msg.Data = m.payload
	msg.Header.Set(hdrWorkerID, strconv.FormatUint(m.key.ID, 10))
	msg.Header.Set(hdrDpRank, strconv.FormatUint(uint64(m.key.DpRank), 10))
	msg.Header.Set(hdrFormat, "vllm")
	msg.Header.Set(hdrEngineSeq, strconv.FormatUint(m.engineSeq, 10))
	msg.Header.Set(hdrEngineEpoch, strconv.FormatUint(p.epoch, 10))
	msg.Header.Set(nats.MsgIdHdr, fmt.Sprintf("%d.%d.%d.%d", m.key.ID, m.key.DpRank, p.epoch, m.engineSeq))
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		ack, err := p.js.PublishMsg(ctx, msg)
		cancel()
		if err == nil {
			m.streamSeq = ack.Sequence
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("publishing: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// e2eEnv is the running set-up of the end-to-end test.
type e2eEnv struct {
	t        *testing.T
	wl       *e2eWorkload
	nats     *natsServer
	pub      *bridgePublisher
	store    jetstream.ObjectStore
	replicas []*routerProc
	next     int // next message of wl.msgs to publish
}

// publishTo publishes the workload's messages up to the fraction frac of them.
func (e *e2eEnv) publishTo(frac float64) {
	end := int(frac * float64(len(e.wl.msgs)))
	for ; e.next < end; e.next++ {
		e.pub.publish(e.wl.msgs[e.next])
	}
}

// lastSeq is the stream sequence of the last message published.
func (e *e2eEnv) lastSeq() uint64 { return e.wl.msgs[e.next-1].streamSeq }

// snapshots lists the snapshot objects in the bucket, newest first.
func (e *e2eEnv) snapshots() []string {
	e.t.Helper()
	infos, err := e.store.List(context.Background())
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	var names []string
	for _, in := range infos {
		if !in.Deleted {
			names = append(names, in.Name)
		}
	}
	return newestFirst(names)
}

// checkAccounting proves a replica applied every published message once: per worker, the
// final watermark is the worker's last message; the batches applied plus skipped are the
// messages after the restored snapshot's S, and the skipped ones are exactly those at or
// below their worker's restored watermark (already in the snapshot).
func (e *e2eEnv) checkAccounting(p *routerProc, r replicaReport) {
	e.t.Helper()
	last := map[workerKey]uint64{}
	for _, m := range e.wl.msgs[:e.next] {
		last[m.key] = max(last[m.key], m.streamSeq)
	}
	for _, wm := range r.Watermarks {
		if want := last[workerKey{wm.WorkerID, wm.DpRank}]; wm.Watermark != want {
			e.t.Errorf("%s: worker %d rank %d watermark %d, want %d (its last message)", p.name, wm.WorkerID, wm.DpRank, wm.Watermark, want)
		}
	}
	if len(r.Watermarks) != len(last) {
		e.t.Errorf("%s: %d publishers known, want %d", p.name, len(r.Watermarks), len(last))
	}
	restored := map[workerKey]uint64{}
	for _, wm := range r.Boot.Watermarks {
		restored[workerKey{wm.WorkerID, wm.DpRank}] = wm.Watermark
	}
	var after, skipped, skippedEvents uint64
	for _, m := range e.wl.msgs[:e.next] {
		if m.streamSeq <= r.Boot.RestoredSeq {
			continue
		}
		after++
		if m.streamSeq <= restored[m.key] {
			skipped++
			skippedEvents += uint64(m.nevents)
		}
	}
	st := r.Stats
	if st.BatchesApplied != after-skipped || st.BatchesSkipped != skipped || st.EventsSkipped != skippedEvents {
		e.t.Errorf("%s: replica stats %+v, want %d applied, %d skipped (%d events): messages after S=%d: %d",
			p.name, st, after-skipped, skipped, skippedEvents, r.Boot.RestoredSeq, after)
	}
	if r.Boot.RestoredFrom != "" {
		if r.Boot.RestoredSeq > 0 && r.Boot.FeedPublishers == 0 {
			e.t.Errorf("%s: restored S=%d without any engine feed state", p.name, r.Boot.RestoredSeq)
		}
		e.t.Logf("%s: restored S=%d with the feed state of %d publishers; %d messages after it: %d skipped as already in the snapshot, %d applied",
			p.name, r.Boot.RestoredSeq, r.Boot.FeedPublishers, after, skipped, st.BatchesApplied)
	}
	if r.Consumed != after || r.BadMessages != 0 {
		e.t.Errorf("%s: consumed %d messages (%d refused), want %d", p.name, r.Consumed, r.BadMessages, after)
	}
}

// reference is a router over a plain kvidx indexer fed the events published so far, with
// the replicas' default load weight (closed when the test ends).
func (e *e2eEnv) reference() *Router {
	e.t.Helper()
	ref, err := kvidx.New(kvidx.Config{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = ref.Close() })
	seen := map[workerKey]bool{}
	var keys []workerKey
	for _, m := range e.wl.msgs[:e.next] {
		if err := ref.ApplyEvents(m.events); err != nil && !errors.Is(err, kvidx.ErrParentNotFound) {
			e.t.Fatal(err)
		}
		if !seen[m.key] {
			seen[m.key] = true
			keys = append(keys, m.key)
		}
	}
	rr, err := NewRouter(ref, defaultOptions().loadWeight, DefaultLimits())
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := rr.Register(keys); err != nil {
		e.t.Fatal(err)
	}
	return rr
}

// checkSharedLoad routes the first n queries on the replicas in turn with load on (every
// request stays in flight), waiting after each route until the other replicas heard of it,
// beside a reference router that routes the same queries alone: with the replicas' load
// views agreeing, every decision must be the reference's, the in-flight count of the chosen
// worker included, and every replica must count the reference's load on every worker. Then
// each request ends on its replica, and every load view must be empty again.
func (e *e2eEnv) checkSharedLoad(n int) {
	e.t.Helper()
	rr := e.reference()
	if len(e.wl.queries) < n {
		e.t.Fatalf("the workload has %d queries, want at least %d", len(e.wl.queries), n)
	}
	watch := newShareWatch(e.t, e.replicas...)
	type kept struct {
		replica int
		id      uint64
	}
	var inflight []kept
	workers, loaded := map[workerKey]bool{}, 0
	for i, q := range e.wl.queries[:n] {
		want, ok, err := rr.Route(q)
		if err != nil || !ok {
			e.t.Fatalf("reference route: %v %v", ok, err)
		}
		j := i % len(e.replicas)
		got := watch.routeKeep(j, q)
		inflight = append(inflight, kept{j, got.RequestID})
		got.RequestID, want.RequestID = 0, 0
		if got != want {
			e.t.Fatalf("load on, query %d on %s: %+v, reference %+v", i, e.replicas[j].name, got, want)
		}
		workers[workerKey{got.WorkerID, got.DpRank}] = true
		if got.InFlight > 0 {
			loaded++
		}
	}
	want := rr.Loads()
	for _, p := range e.replicas {
		l := p.load()
		if !slices.Equal(l.Workers, want) || l.LocalInFlight+l.RemoteInFlight != n {
			e.t.Fatalf("%s with %d requests in flight: local %d + remote %d, workers %v; the reference counts %v",
				p.name, n, l.LocalInFlight, l.RemoteInFlight, l.Workers, want)
		}
	}
	for _, k := range inflight {
		watch.done(k.replica, k.id)
	}
	for _, p := range e.replicas {
		if l := p.load(); l.LocalInFlight != 0 || l.RemoteInFlight != 0 || len(l.Workers) != 0 {
			e.t.Fatalf("%s after every request ended: local %d, remote %d in flight, workers %v", p.name, l.LocalInFlight, l.RemoteInFlight, l.Workers)
		}
	}
	e.t.Logf("load on: %d requests routed over %d replicas in turn went to %d workers (%d onto a worker with requests in flight), as one router alone routes them; every replica counted the same load",
		n, len(e.replicas), len(workers), loaded)
}

// checkAnswers routes every query on every replica and on a reference router over a plain
// kvidx indexer fed the same events, each routed request done (DELETE) before the next:
// every answer must be the same, the chosen worker included.
func (e *e2eEnv) checkAnswers(label string, minQueries int) {
	e.t.Helper()
	// The router's default load weight, as the replicas run: with every routed request done
	// (and its done heard by the other replicas) before the next, no replica counts one in
	// flight, and the load term is 0 everywhere.
	rr := e.reference()
	queries := e.wl.queries
	if len(queries) < minQueries {
		e.t.Fatalf("the workload has %d queries, want at least %d", len(queries), minQueries)
	}
	hits := 0
	watch := newShareWatch(e.t, e.replicas...)
	for i, q := range queries {
		want, ok, err := rr.Route(q)
		if err != nil || !ok {
			e.t.Fatalf("reference route: %v %v", ok, err)
		}
		rr.Done(want.RequestID)
		if want.OverlapBlocks > 0 {
			hits++
		}
		for j, p := range e.replicas {
			got := watch.route(j, q)
			got.RequestID, got.InFlight, want.InFlight = 0, 0, 0
			w := want
			w.RequestID = 0
			if got != w {
				e.t.Fatalf("%s: query %d on %s: %+v, reference %+v", label, i, p.name, got, w)
			}
		}
	}
	e.t.Logf("%s: %d queries (%d with a cached prefix) answered identically by %d replicas and the reference",
		label, len(queries), hits, len(e.replicas))
}

// buildRouter builds the router binary into dir (with -race when KVIDX_REPLICA_RACE is set).
func buildRouter(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "go-router")
	args := []string{"build", "-o", bin}
	if os.Getenv("KVIDX_REPLICA_RACE") != "" {
		args = append(args, "-race") // the replicas under the race detector (checked in their logs)
	}
	build := exec.Command("go", append(args, ".")...)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// startNATS starts nats-server with JetStream in dir/js, stopped when the test ends.
func startNATS(t *testing.T, natsBin, dir string) *natsServer {
	t.Helper()
	nlog, err := os.Create(filepath.Join(dir, "nats-server.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nlog.Close() })
	for range 5 {
		ns := &natsServer{t: t, bin: natsBin, dir: filepath.Join(dir, "js"), port: freePort(t), log: nlog}
		if ns.tryStart() {
			t.Cleanup(ns.stop)
			return ns
		}
	}
	t.Fatalf("nats-server exited instead of listening, on five free ports in a row (log %s)", nlog.Name())
	return nil
}

// jetStreamClient connects to the test's nats-server (with opts) and returns a JetStream
// context on the connection, which is closed when the test ends.
func jetStreamClient(t *testing.T, url string, opts ...nats.Option) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// smallReplicaSetup is the start of the small end-to-end replica tests (skipped unless
// KVIDX_REPLICA_E2E is set): a temporary directory, the default workload in batches of 4,
// the router binary, nats-server and a JetStream client.
func smallReplicaSetup(t *testing.T) (string, *e2eWorkload, string, *natsServer, jetstream.JetStream) {
	t.Helper()
	if os.Getenv("KVIDX_REPLICA_E2E") == "" {
		t.Skip("end-to-end replica test against nats-server: run scripts/test-replicas.sh (or set KVIDX_REPLICA_E2E=1)")
	}
	natsBin := natsServerBinary(t)
	dir := t.TempDir()
	wl := loadE2EWorkload(t, "testdata/workload.jsonl", 4)
	bin := buildRouter(t, dir)
	ns := startNATS(t, natsBin, dir)
	return dir, wl, bin, ns, jetStreamClient(t, ns.url())
}

// TestReplicaRefusesAStreamGap: when retention dropped messages the replica would need (here
// a full replay of a stream whose first message is 21), it refuses to start and says why;
// with --allow-stream-gap it starts, reports the gap and applies what is there.
func TestReplicaRefusesAStreamGap(t *testing.T) {
	dir, wl, bin, ns, js := smallReplicaSetup(t)
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: streamName,
		Subjects: []string{streamSubjects}, Storage: jetstream.FileStorage, MaxMsgs: 10}); err != nil {
		t.Fatal(err)
	}
	pub := &bridgePublisher{t: t, js: js, epoch: 1}
	for _, m := range wl.msgs[:30] {
		pub.publish(m)
	}
	logPath := filepath.Join(dir, "refused.log")
	lf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-addr", fmt.Sprintf("127.0.0.1:%d", freePort(t)), "-nats", ns.url())
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the replica did not refuse to start")
	}
	lf.Close()
	logs, _ := os.ReadFile(logPath)
	if err == nil || !bytes.Contains(logs, []byte("KVIDX_EVENTS starts at sequence 21, the replica needs 1")) {
		t.Fatalf("exit %v; log:\n%s", err, logs)
	}

	p := &routerProc{t: t, name: "gap-replica", bin: bin, addr: fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		logPath: filepath.Join(dir, "allowed.log"), client: &http.Client{Timeout: 10 * time.Second},
		args: []string{"-nats", ns.url(), "-allow-stream-gap"}}
	p.start()
	defer p.kill9()
	r := p.waitApplied(30, 30*time.Second)
	if r.Boot.Gap != 20 || r.Consumed != 10 || r.Stats.BatchesApplied != 10 {
		t.Fatalf("with --allow-stream-gap: gap %d, consumed %d, stats %+v; want 20, 10, 10 applied", r.Boot.Gap, r.Consumed, r.Stats)
	}
	t.Logf("refused with %q; with --allow-stream-gap: gap of %d messages reported, %d applied",
		strings.TrimSpace(string(logs[bytes.LastIndex(logs, []byte("replica")):])), r.Boot.Gap, r.Stats.BatchesApplied)
}

// TestReplicasOnJetStream is the end-to-end replica test (see the top of this file).
func TestReplicasOnJetStream(t *testing.T) {
	if os.Getenv("KVIDX_REPLICA_E2E") == "" {
		t.Skip("end-to-end replica test against nats-server: run scripts/test-replicas.sh (or set KVIDX_REPLICA_E2E=1)")
	}
	natsBin := natsServerBinary(t)
	path := os.Getenv("KVIDX_REPLICA_WORKLOAD")
	if path == "" {
		path = "testdata/workload.jsonl"
	}
	dir := t.TempDir()
	start := time.Now()
	wl := loadE2EWorkload(t, path, 8)
	t.Logf("workload %s: %d events of %d workers in %d engine batches, %d queries", path, wl.events, len(wl.workers), len(wl.msgs), len(wl.queries))

	bin := buildRouter(t, dir)
	ns := startNATS(t, natsBin, dir)

	js := jetStreamClient(t, ns.url(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	ctx := context.Background()
	// The bridge's stream and the replicas' bucket (the replicas would create them too).
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: streamName, Subjects: []string{streamSubjects},
		Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	store, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: snapshotBucket, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	e := &e2eEnv{t: t, wl: wl, nats: ns, store: store, pub: &bridgePublisher{t: t, js: js, epoch: 1}}
	snapMsgs := max(len(wl.msgs)/12, 50)
	// Replica 3 alone saves snapshots (one writer, every replica loads): killed, it comes
	// back to a snapshot older than the stream's end and must catch up.
	for i := range 3 {
		save := strconv.FormatBool(i == 2)
		p := &routerProc{t: t, name: fmt.Sprintf("replica-%d", i+1), bin: bin, addr: fmt.Sprintf("127.0.0.1:%d", freePort(t)),
			logPath: filepath.Join(dir, fmt.Sprintf("replica-%d.log", i+1)), client: &http.Client{Timeout: 10 * time.Second},
			// The documented command (docs/replicas.md: the defaults, -load-weight 4
			// included), plus the snapshot schedule of this test.
			args: []string{"-nats", ns.url(), "-block-size", strconv.Itoa(e2eBlockSize),
				"-snapshot-msgs", strconv.Itoa(snapMsgs), "-snapshot-every", "500ms", "-snapshot-keep", "3", "-save-snapshots=" + save}}
		p.start()
		e.replicas = append(e.replicas, p)
		defer p.kill9()
	}
	r1, r2, r3 := e.replicas[0], e.replicas[1], e.replicas[2]
	defer func() {
		if t.Failed() {
			for _, p := range e.replicas {
				t.Logf("%s log tail:\n%s", p.name, p.logTail())
			}
		}
	}()

	// Phase 1: a third of the stream, then kill -9 of replica 3 once a snapshot exists.
	e.publishTo(0.35)
	if !pollUntil(20*time.Second, 50*time.Millisecond, func() bool { return len(e.snapshots()) > 0 }) {
		t.Fatal("no snapshot saved")
	}
	r3.kill9()
	t.Logf("killed %s (kill -9) at stream sequence %d", r3.name, e.lastSeq())

	// Phase 2: more messages, then a nats-server restart mid-stream.
	e.publishTo(0.55)
	before := r1.report().Reconnects
	ns.stop()
	t.Logf("nats-server stopped at stream sequence %d", e.lastSeq())
	time.Sleep(300 * time.Millisecond)
	ns.start()
	e.publishTo(0.75)
	// The replica reconnects on its own clock (every 250 ms plus jitter), which may be after
	// the publisher's: wait for it rather than sample once.
	var reconnects uint64
	if !pollUntil(15*time.Second, 50*time.Millisecond, func() bool { reconnects = r1.report().Reconnects; return reconnects > before }) {
		t.Errorf("%s: %d reconnections 15 s after the nats-server restart, want more than %d", r1.name, reconnects, before)
	}

	// Phase 3: replica 3 comes back: bootstrap from the newest snapshot, catch up.
	snaps := e.snapshots()
	restartAt := time.Now()
	r3.start()
	boot := r3.report().Boot
	if boot.RestoredFrom == "" || boot.RestoredFrom != snaps[0] || len(boot.Failed) != 0 {
		t.Errorf("%s: boot %+v, want the newest snapshot of %v", r3.name, boot, snaps)
	}
	// Nothing is published until it caught up: the catch-up rate is the replica's alone.
	rep3 := r3.waitApplied(e.lastSeq(), 60*time.Second)
	caught := time.Since(restartAt)
	if rep3.CaughtUp == nil {
		t.Fatalf("%s did not report catching up", r3.name)
	}
	t.Logf("%s: bootstrap from %s (S=%d, %d workers, %d blocks, %d bytes, %.1f bytes per block) in %.1f ms; caught up %d messages / %d events in %.1f ms (%.0f events/s); process start to the stream's end %v",
		r3.name, boot.RestoredFrom, boot.RestoredSeq, boot.Info.Workers, boot.Info.Blocks, boot.Info.Bytes,
		float64(boot.Info.Bytes)/max(float64(boot.Info.Blocks), 1), boot.BootstrapMs,
		rep3.CaughtUp.Messages, rep3.CaughtUp.Events, rep3.CaughtUp.Ms, rep3.CaughtUp.EventsPerSec, caught.Round(time.Millisecond))
	e.publishTo(0.9)
	last := e.lastSeq()
	for _, p := range e.replicas {
		p.waitApplied(last, 60*time.Second)
	}
	e.checkAnswers("after kill -9 and nats-server restart", 1000)
	for _, p := range e.replicas {
		e.checkAccounting(p, p.report())
	}
	if st := r1.report().Stats; st.BatchesSkipped != 0 {
		t.Errorf("%s never restarted but skipped %d batches", r1.name, st.BatchesSkipped)
	}

	// Phase 4: the newest snapshot is corrupted in the bucket; replica 2 restarts, says so,
	// loads the previous one and converges.
	for stable, prev := 0, ""; stable < 5; time.Sleep(300 * time.Millisecond) {
		names := e.snapshots()
		if len(names) >= 2 && names[0] == prev {
			stable++
		} else {
			stable = 0
		}
		if len(names) > 0 {
			prev = names[0]
		}
	}
	snaps = e.snapshots()
	newest := snaps[0]
	obj, err := store.GetBytes(ctx, newest)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(obj) / 2; i < len(obj)/2+16 && i < len(obj); i++ {
		obj[i] ^= 0x5a
	}
	if _, err := store.PutBytes(ctx, newest, obj); err != nil {
		t.Fatal(err)
	}
	t.Logf("corrupted %s (16 bytes flipped in the middle of %d); snapshots %v", newest, len(obj), snaps)
	r2.kill9()
	r2.start()
	boot2 := r2.report().Boot
	if len(boot2.Failed) == 0 || !strings.HasPrefix(boot2.Failed[0], newest) || boot2.RestoredFrom != snaps[1] {
		t.Errorf("%s: boot %+v, want %s refused and %s restored", r2.name, boot2, newest, snaps[1])
	}
	if logs, _ := os.ReadFile(r2.logPath); !bytes.Contains(logs, []byte("snapshot "+newest+" is malformed")) {
		t.Errorf("%s did not log the malformed snapshot %s", r2.name, newest)
	}
	e.publishTo(1)
	last = e.lastSeq()
	for _, p := range e.replicas {
		p.waitApplied(last, 60*time.Second)
	}
	e.checkAnswers("after the corrupted snapshot", 1000)
	for _, p := range e.replicas {
		e.checkAccounting(p, p.report())
	}
	e.checkSharedLoad(300)
	t.Logf("%s: refused %q, restored %s (S=%d, %d blocks, %d bytes) in %.1f ms", r2.name, boot2.Failed, boot2.RestoredFrom,
		boot2.RestoredSeq, boot2.Info.Blocks, boot2.Info.Bytes, boot2.BootstrapMs)
	for _, p := range e.replicas {
		if logs, _ := os.ReadFile(p.logPath); bytes.Contains(logs, []byte("DATA RACE")) {
			t.Errorf("%s: the race detector reported a data race:\n%s", p.name, p.logTail())
		}
	}
	t.Logf("end-to-end replica test done in %v: %d messages, stream last sequence %d", time.Since(start).Round(time.Millisecond), e.next, last)
}

// TestReplicaFollowsItsOwnStreamOnly runs against nats-server: a replica started on an
// empty stream is caught up at once (and routes); after the stream is deleted and
// recreated it stops routing and applying and says why, with the lag showing the new
// stream's messages; restarted, it refuses (and deletes) the snapshot of the old stream and
// rebuilds from the new one.
func TestReplicaFollowsItsOwnStreamOnly(t *testing.T) {
	dir, wl, bin, ns, js := smallReplicaSetup(t)
	ctx := context.Background()
	cfg := jetstream.StreamConfig{Name: streamName, Subjects: []string{streamSubjects}, Storage: jetstream.FileStorage}
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	p := &routerProc{t: t, name: "replica", bin: bin, addr: fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		logPath: filepath.Join(dir, "replica.log"), client: &http.Client{Timeout: 10 * time.Second},
		args: []string{"-nats", ns.url(), "-block-size", strconv.Itoa(e2eBlockSize), "-snapshot-msgs", "5"}}
	p.start()
	defer p.kill9()
	if r := p.report(); r.CaughtUp == nil || !r.Routing {
		t.Fatalf("on an empty stream: caught_up %v, routing %v; want caught up and routing", r.CaughtUp, r.Routing)
	}
	pub := &bridgePublisher{t: t, js: js, epoch: 1}
	for _, m := range wl.msgs[:10] {
		pub.publish(m)
	}
	p.waitApplied(10, 30*time.Second)
	p.route(wl.queries[0])
	store, err := js.ObjectStore(ctx, snapshotBucket)
	if err != nil {
		t.Fatal(err)
	}
	if !pollUntil(20*time.Second, 50*time.Millisecond, func() bool {
		l, _ := store.List(ctx)
		return len(l) > 0
	}) {
		t.Fatal("no snapshot saved")
	}

	if err := js.DeleteStream(ctx, streamName); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	for _, m := range wl.msgs[10:15] {
		pub.publish(m)
	}
	var r replicaReport
	if !pollUntil(20*time.Second, 50*time.Millisecond, func() bool {
		r = p.report()
		return r.StreamReset != "" && r.Lag == 5
	}) {
		t.Fatalf("the recreated stream went unnoticed: reset %q, applied %d, stream last %d, lag %d; log:\n%s",
			r.StreamReset, r.AppliedSeq, r.StreamLastSeq, r.Lag, p.logTail())
	}
	if r.Routing || r.AppliedSeq != 10 {
		t.Fatalf("after the reset: routing %v, applied %d; want not routing, 10", r.Routing, r.AppliedSeq)
	}
	body, _ := json.Marshal(routeRequest{LocalHashes: wl.queries[0]})
	resp, err := p.client.Post("http://"+p.addr+"/route", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !bytes.Contains(out, []byte("was recreated")) {
		t.Fatalf("/route after the reset: %d, Retry-After %q, %s", resp.StatusCode, resp.Header.Get("Retry-After"), out)
	}

	reason := r.StreamReset
	p.kill9()
	p.start()
	r = p.waitApplied(5, 30*time.Second)
	if r.Boot.RestoredFrom != "" || len(r.Boot.Failed) == 0 || !strings.Contains(r.Boot.Failed[0], "another stream") ||
		r.StreamReset != "" || !r.Routing || r.Stats.BatchesApplied != 5 {
		t.Fatalf("restarted: restored %q, failed %v, reset %q, routing %v, stats %+v; want a full replay of the 5 new messages",
			r.Boot.RestoredFrom, r.Boot.Failed, r.StreamReset, r.Routing, r.Stats)
	}
	l, _ := store.List(ctx)
	for _, in := range l {
		if in.Name == r.Boot.Failed[0][:len(snapName(0))] {
			t.Fatalf("the old stream's snapshot %s is still in the bucket", in.Name)
		}
	}
	t.Logf("reset reported as %q; restarted: %s", reason, r.Boot.Failed[0])
}

// TestARestoredReplicaClassifiesTheNextBatchLikeANeverStoppedOne runs against nats-server:
// replica A never stops; replica B saves a snapshot at the end of a first part, is killed,
// and restarts from it. The first part leaves at each publisher's watermark what priming by
// re-feeding used to get wrong: (a) worker 7 publishing with Kvidx-Dp-Rank 4294967295 and
// rank 2 in its batches, (b) worker 8 whose last message says Kvidx-Format: sglang among
// vllm ones, (c) worker 9 whose last message has no Kvidx-Engine-Seq; and worker 10, whose
// next batch comes in a new epoch. The second part continues each after an engine sequence
// gap (worker 10: in order, in the new epoch), so a replica that tracks the engines exactly
// clears each worker. Both replicas must then give the same answers, watermarks and block
// counts, and neither may hold the first part's chains.
func TestARestoredReplicaClassifiesTheNextBatchLikeANeverStoppedOne(t *testing.T) {
	dir, _, bin, ns, js := smallReplicaSetup(t)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: streamName, Subjects: []string{streamSubjects},
		Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	start := func(name string, args ...string) *routerProc {
		p := &routerProc{t: t, name: name, bin: bin, addr: fmt.Sprintf("127.0.0.1:%d", freePort(t)),
			logPath: filepath.Join(dir, name+".log"), client: &http.Client{Timeout: 10 * time.Second},
			args: append([]string{"-nats", ns.url(), "-block-size", strconv.Itoa(e2eBlockSize)}, args...)}
		p.start()
		t.Cleanup(p.kill9)
		return p
	}
	a := start("never-stopped", "-save-snapshots=false")
	restartedArgs := []string{"-snapshot-msgs", "1", "-snapshot-every", "100ms"}
	b := start("restarted", restartedArgs...)
	var last uint64
	publish := func(m streamMsg) {
		t.Helper()
		msg := nats.NewMsg(m.subject)
		msg.Header, msg.Data = m.header, m.data
		ack, err := js.PublishMsg(ctx, msg)
		if err != nil {
			t.Fatal(err)
		}
		last = ack.Sequence
	}
	type worker struct {
		id                    uint64
		headerRank, batchRank uint32
		first                 uint64 // chain first..first+2 in part one
		lastFormat            string // of the third batch
		lastSeq               string // of the third batch ("": no header)
		nextSeq, nextEpoch    string // of the batch in part two
	}
	workers := []worker{
		{7, rankFromBatch, 2, 1, "vllm", "2", "7", "1"},
		{8, 0, 0, 11, "sglang", "2", "7", "1"},
		{9, 0, 0, 21, "vllm", "", "7", "1"},
		{10, 0, 0, 31, "vllm", "2", "3", "2"},
	}
	var partTwo []streamMsg
	for _, w := range workers {
		for i := range uint64(3) {
			engineSeq, parent := strconv.FormatUint(i, 10), uint64(0)
			if i > 0 {
				parent = w.first + i - 1
			}
			if i == 2 {
				engineSeq = w.lastSeq
			}
			m := engineBatchMsg(t, 0, w.id, w.headerRank, w.batchRank, "1", engineSeq, parent, w.first+i)
			if i == 2 {
				m.header.Set(hdrFormat, w.lastFormat)
			}
			publish(m)
		}
		partTwo = append(partTwo, engineBatchMsg(t, 0, w.id, w.headerRank, w.batchRank, w.nextEpoch, w.nextSeq, 0, w.first+50))
	}
	partOne := last
	a.waitApplied(partOne, 30*time.Second)
	b.waitApplied(partOne, 30*time.Second)
	store, err := js.ObjectStore(ctx, snapshotBucket)
	if err != nil {
		t.Fatal(err)
	}
	e := &e2eEnv{t: t, store: store}
	if !pollUntil(20*time.Second, 50*time.Millisecond, func() bool {
		s := e.snapshots()
		return len(s) > 0 && s[0] == snapName(partOne)
	}) {
		t.Fatalf("no snapshot at %d: %v", partOne, e.snapshots())
	}
	b.kill9()
	for _, m := range partTwo {
		publish(m)
	}
	b.args = append(b.args, "-save-snapshots=false")
	b.start()
	ra, rb := a.waitApplied(last, 30*time.Second), b.waitApplied(last, 30*time.Second)
	if rb.Boot.RestoredFrom != snapName(partOne) || ra.BadMessages != 0 || rb.BadMessages != 0 {
		t.Fatalf("restored %q (want %s); bad messages %d and %d", rb.Boot.RestoredFrom, snapName(partOne), ra.BadMessages, rb.BadMessages)
	}
	if !slices.Equal(ra.Watermarks, rb.Watermarks) {
		t.Fatalf("watermarks:\n never stopped %v\n restarted     %v", ra.Watermarks, rb.Watermarks)
	}
	for _, wm := range ra.Watermarks {
		if wm.DpRank == rankFromBatch {
			t.Fatalf("a publisher registered with rank 4294967295: %v", ra.Watermarks)
		}
	}
	if ra.Stats.BatchesApplied != last || len(ra.Watermarks) != len(workers) {
		t.Fatalf("never stopped: %+v, %d publishers; want %d applied, %d publishers", ra.Stats, len(ra.Watermarks), last, len(workers))
	}
	hashes := localHashCache{}
	watch := newShareWatch(t, a, b)
	for _, w := range workers {
		for _, chain := range [][]uint64{{w.first, w.first + 1, w.first + 2}, {w.first + 50}} {
			q := make([]uint64, len(chain))
			for i, l := range chain {
				q[i] = hashes.get(t, l)
			}
			da, db := watch.route(0, q), watch.route(1, q)
			da.RequestID, db.RequestID = 0, 0
			if da != db {
				t.Fatalf("worker %d, chain %v:\n never stopped %+v\n restarted     %+v", w.id, chain, da, db)
			}
			if want := uint32(len(chain)) * uint32(chain[0]-w.first) / 50; da.OverlapBlocks != want {
				t.Fatalf("worker %d, chain %v: overlap %d, want %d (the first part's chain cleared, the new one held)", w.id, chain, da.OverlapBlocks, want)
			}
		}
	}
	t.Logf("snapshot at %d, %d messages in all: both replicas cleared all 4 workers and agree", partOne, last)
}

// TestReplicasSharePredictions runs against nats-server: two replicas with -predict-ttl on
// the same stream. A prompt no worker holds, routed on the first replica and kept in flight,
// is predicted for its worker on both: once the second replica has heard the route, the same
// prompt routed there goes to that worker with the whole prompt predicted and the first
// replica's request counted in flight, before any event of it exists.
func TestReplicasSharePredictions(t *testing.T) {
	dir, wl, bin, ns, js := smallReplicaSetup(t)
	cfg := jetstream.StreamConfig{Name: streamName, Subjects: []string{streamSubjects}, Storage: jetstream.FileStorage}
	if _, err := js.CreateStream(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	var procs []*routerProc
	for i := range 2 {
		p := &routerProc{t: t, name: fmt.Sprintf("replica-%d", i+1), bin: bin, addr: fmt.Sprintf("127.0.0.1:%d", freePort(t)),
			logPath: filepath.Join(dir, fmt.Sprintf("replica-%d.log", i+1)), client: &http.Client{Timeout: 10 * time.Second},
			args: []string{"-nats", ns.url(), "-block-size", strconv.Itoa(e2eBlockSize), "-predict-ttl", "10m", "-save-snapshots=false"}}
		p.start()
		defer p.kill9()
		procs = append(procs, p)
	}
	pub := &bridgePublisher{t: t, js: js, epoch: 1}
	for _, m := range wl.msgs[:10] {
		pub.publish(m)
	}
	for _, p := range procs {
		p.waitApplied(10, 30*time.Second)
	}
	// 40 blocks no event names: far more to prefill than one request of load weighs.
	q := make([]uint64, 40)
	for i := range q {
		q[i] = 1<<63 + uint64(i)
	}
	watch := newShareWatch(t, procs...)
	first := watch.routeKeep(0, q)
	if first.OverlapBlocks != 0 || first.PredictedBlocks != 0 {
		t.Fatalf("first route %+v: nothing held or predicted yet", first)
	}
	second := watch.routeKeep(1, q)
	if second.WorkerID != first.WorkerID || second.DpRank != first.DpRank || second.PredictedBlocks != 40 ||
		second.OverlapBlocks != 0 || second.InFlight != 1 {
		t.Fatalf("on %s: %+v; want worker %d with 40 predicted blocks, none confirmed, 1 in flight", procs[1].name, second, first.WorkerID)
	}
	third := watch.routeKeep(0, q)
	if third.WorkerID != first.WorkerID || third.PredictedBlocks != 40 || third.InFlight != 2 {
		t.Fatalf("back on %s: %+v; want worker %d, 40 predicted, 2 in flight", procs[0].name, third, first.WorkerID)
	}
	watch.done(0, first.RequestID)
	watch.done(1, second.RequestID)
	watch.done(0, third.RequestID)
	for _, p := range procs {
		if l := p.load(); l.LocalInFlight != 0 || l.RemoteInFlight != 0 {
			t.Fatalf("%s after every request ended: %+v", p.name, l)
		}
	}
	t.Logf("a 40-block prompt routed on %s went to worker %d; %s and then %s again sent it there too, 40 blocks predicted, the others' requests in flight counted",
		procs[0].name, first.WorkerID, procs[1].name, procs[0].name)
}
