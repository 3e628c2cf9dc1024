package main

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	kvidx "github.com/kvidx/kvidx/bindings/go"
	"github.com/nats-io/nats.go"
)

// TestReplicasShareTheIndexNotTheLoad pins down what docs/replicas.md says is identical
// across replicas without route sharing (-share-routes=false) and what is not: two routers
// over indexes with the same content give the same overlap for every worker, but each adds
// its own in-flight requests (-load-weight), so a request in flight on one replica only can
// make the replicas pick different workers; with nothing in flight they pick the same.
func TestReplicasShareTheIndexNotTheLoad(t *testing.T) {
	r0, r1, _ := twoReplicas(t, false)
	routers := []*Router{r0, r1}
	route := func(r *Router) Decision { t.Helper(); return mustRoute(t, r, chainQuery) }
	a, b := route(routers[0]), route(routers[1])
	routers[0].Done(a.RequestID)
	routers[1].Done(b.RequestID)
	if a.WorkerID != b.WorkerID || a.OverlapBlocks != 4 || b.OverlapBlocks != 4 {
		t.Fatalf("nothing in flight: %+v and %+v; want the same worker, overlap 4", a, b)
	}
	// One request stays in flight on replica 0 only: the replicas now differ in the worker,
	// never in the overlap the index gives.
	first := route(routers[0])
	a, b = route(routers[0]), route(routers[1])
	if a.WorkerID == b.WorkerID || a.OverlapBlocks != b.OverlapBlocks || first.WorkerID != b.WorkerID {
		t.Fatalf("one request in flight on replica 0: %+v and %+v; want other workers, the same overlap", a, b)
	}
}

// chainQuery is a query whose first 4 blocks are twoReplicas's chain.
var chainQuery = []uint64{11, 12, 13, 14, 15, 16}

// mustRoute routes q on r, failing the test when it cannot.
func mustRoute(t *testing.T, r *Router, q []uint64) Decision {
	t.Helper()
	d, ok, err := r.Route(q)
	if err != nil || !ok {
		t.Fatalf("route: %v %v", ok, err)
	}
	return d
}

// directShare connects routers in one process as route sharing over NATS does: each route
// and done of one is counted on the others at once.
type directShare struct {
	id    string
	peers []*Router
}

func (s directShare) routed(d Decision, localHashes []uint64) {
	for _, p := range s.peers {
		p.AddRemote(s.id, d.RequestID, workerKey{d.WorkerID, d.DpRank}, localHashes)
	}
}

func (s directShare) done(id uint64) {
	for _, p := range s.peers {
		p.DoneRemote(s.id, id)
	}
}

// twoReplicas returns two routers over indexes where workers 1 and 2 hold the same 4-block
// chain (and one router alone over the same, the reference), sharing their routes when share.
func twoReplicas(t *testing.T, share bool) (a, b, alone *Router) {
	t.Helper()
	routers := make([]*Router, 3)
	for i := range routers {
		ix, err := kvidx.New(kvidx.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ix.Close() })
		for _, w := range []uint64{1, 2} {
			blocks := []kvidx.Block{{LocalHash: 11, SeqHash: 11}, {LocalHash: 12, SeqHash: 12},
				{LocalHash: 13, SeqHash: 13}, {LocalHash: 14, SeqHash: 14}}
			if err := ix.ApplyEvent(kvidx.Event{Kind: kvidx.EventStored, WorkerID: w, Blocks: blocks}); err != nil {
				t.Fatal(err)
			}
		}
		if routers[i], err = NewRouter(ix, defaultOptions().loadWeight, DefaultLimits()); err != nil {
			t.Fatal(err)
		}
		if _, err := routers[i].Register([]workerKey{{1, 0}, {2, 0}, {3, 0}}); err != nil {
			t.Fatal(err)
		}
	}
	if share {
		routers[0].share = directShare{"a", []*Router{routers[1]}}
		routers[1].share = directShare{"b", []*Router{routers[0]}}
	}
	return routers[0], routers[1], routers[2]
}

// TestSharedRoutesMakeReplicasRouteAsOneRouter: with route sharing, requests routed on two
// replicas in turn go where one router alone sends them (the load each replica sees is
// both's); without it each replica sees only its own load and they pile onto one worker.
func TestSharedRoutesMakeReplicasRouteAsOneRouter(t *testing.T) {
	route := func(r *Router) Decision { t.Helper(); return mustRoute(t, r, chainQuery) }
	a, b, alone := twoReplicas(t, true)
	var ids [2][]uint64
	for i := range 6 {
		want := route(alone)
		r := []*Router{a, b}[i%2]
		got := route(r)
		ids[i%2] = append(ids[i%2], got.RequestID)
		want.RequestID, got.RequestID = 0, 0
		if got != want {
			t.Fatalf("request %d: %+v; one router alone: %+v", i, got, want)
		}
	}
	if a.InFlight() != 3 || a.RemoteInFlight() != 3 || b.InFlight() != 3 || b.RemoteInFlight() != 3 {
		t.Fatalf("in flight: a %d+%d, b %d+%d; want 3+3 each", a.InFlight(), a.RemoteInFlight(), b.InFlight(), b.RemoteInFlight())
	}
	if la, lb, l := a.Loads(), b.Loads(), alone.Loads(); !slices.Equal(la, l) || !slices.Equal(lb, l) {
		t.Fatalf("loads: a %v, b %v; one router alone %v", la, lb, l)
	}
	for _, id := range ids[0] {
		a.Done(id)
	}
	if b.RemoteInFlight() != 0 || len(a.Loads()) == 0 {
		t.Fatalf("after a's requests are done: b counts %d of a's; loads %v", b.RemoteInFlight(), a.Loads())
	}
	for _, id := range ids[1] {
		b.Done(id)
	}
	if la, lb := a.Loads(), b.Loads(); len(la) != 0 || len(lb) != 0 {
		t.Fatalf("every request done: loads %v and %v, want none", la, lb)
	}

	// Without sharing, replica b does not see a's 3 requests on the best worker.
	a, b, _ = twoReplicas(t, false)
	first := route(a)
	route(a)
	route(a)
	if d := route(b); d.WorkerID != first.WorkerID {
		t.Fatalf("unshared: b sent to %d, want %d (it sees no load)", d.WorkerID, first.WorkerID)
	}
}

// TestRemoteRoutesExpireAndGoWithTheirWorker: another replica's route counts until its done,
// RouteTTL after it arrived, or its worker's removal, whichever comes first; a done for a
// route never heard of, or a route heard twice, changes nothing.
func TestRemoteRoutesExpireAndGoWithTheirWorker(t *testing.T) {
	_, r, _ := twoReplicas(t, false)
	now := time.Unix(1000, 0)
	r.now = func() time.Time { return now }
	if !r.AddRemote("x", 1, workerKey{1, 0}, nil) || r.AddRemote("x", 1, workerKey{1, 0}, nil) {
		t.Fatal("a route is counted once")
	}
	if r.DoneRemote("x", 2) || r.DoneRemote("y", 1) {
		t.Fatal("a done for an unknown route counted")
	}
	if !r.AddRemote("y", 1, workerKey{9, 2}, nil) {
		t.Fatal("a route to a worker this replica does not know yet registers it")
	}
	if got := r.Loads(); !slices.Equal(got, []workerLoad{{1, 0, 1}, {9, 2, 1}}) {
		t.Fatalf("loads %v", got)
	}
	now = now.Add(DefaultLimits().RouteTTL)
	if r.RemoteInFlight() != 2 {
		t.Fatal("expired at its TTL, not after it")
	}
	now = now.Add(time.Nanosecond)
	if n := r.RemoteInFlight(); n != 0 || len(r.Loads()) != 0 || r.remote.expired != 2 {
		t.Fatalf("after the TTL: %d in flight, loads %v, %d expired", n, r.Loads(), r.remote.expired)
	}
	r.AddRemote("x", 3, workerKey{2, 0}, nil)
	if err := r.RemoveWorker(2); err != nil {
		t.Fatal(err)
	}
	if r.RemoteInFlight() != 0 || r.DoneRemote("x", 3) {
		t.Fatal("a removed worker's remote routes are forgotten")
	}
}

// TestRouteShareAppliesOtherReplicasMessagesOnly: the subscriber counts the other replicas'
// routes and dones, ignores its own and refuses malformed messages.
func TestRouteShareAppliesOtherReplicasMessagesOnly(t *testing.T) {
	_, r, _ := twoReplicas(t, false)
	s := &routeShare{id: "me", router: r}
	msg := func(m routeMsg) *nats.Msg {
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return &nats.Msg{Data: b}
	}
	s.receive(msg(routeMsg{Replica: "me", Op: opRoute, RequestID: 1, WorkerID: 1}))
	s.receive(msg(routeMsg{Replica: "other", Op: opRoute, RequestID: 1, WorkerID: 2}))
	s.receive(msg(routeMsg{Replica: "other", Op: opRoute, RequestID: 2, WorkerID: 2}))
	s.receive(&nats.Msg{Data: []byte("{")})
	s.receive(msg(routeMsg{Replica: "other", Op: "nonsense"}))
	if got := r.Loads(); !slices.Equal(got, []workerLoad{{2, 0, 2}}) {
		t.Fatalf("loads %v: want worker 2's two routes only", got)
	}
	s.receive(msg(routeMsg{Replica: "other", Op: opDone, RequestID: 1}))
	rep, load := s.report(), r.loadReport()
	if rep.Routes != 2 || rep.Dones != 1 || rep.Refused != 2 || load.RemoteInFlight != 1 || load.LocalInFlight != 0 {
		t.Fatalf("report %+v, load %+v", rep, load)
	}
}
