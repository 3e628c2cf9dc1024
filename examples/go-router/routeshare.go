package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/nats-io/nats.go"
)

// routeSubject is the NATS core subject on which --nats replicas share their routing
// decisions (outside the KVIDX_EVENTS stream's subjects: nothing of it is stored).
const routeSubject = "kvidx.routes"

// Operations of a routeMsg.
const (
	opRoute = "route"
	opDone  = "done"
)

// routeMsg is one message on routeSubject: a replica routed a request to a worker, or a
// request it routed is done (DELETE /requests/{id}). Routes that expire are never announced:
// each replica expires the others' routes after its own -route-ttl.
type routeMsg struct {
	// Replica is the sender's id, new at each start of the process.
	Replica   string `json:"replica"`
	Op        string `json:"op"`
	RequestID uint64 `json:"request_id"`
	// WorkerID and DpRank name the worker of a route.
	WorkerID uint64 `json:"worker_id,omitempty"`
	DpRank   uint32 `json:"dp_rank,omitempty"`
	// LocalHashes are a route's blocks, sent when the sender predicts (-predict-ttl,
	// -event-free): a receiver that predicts credits them to the worker too.
	LocalHashes []uint64 `json:"local_hashes,omitempty"`
}

// routeShare publishes this replica's routing decisions on routeSubject and counts the other
// replicas' as load on this replica's router (and their blocks as predicted, when both
// predict), so that every replica's load view and predictions are the fleet's, up to the
// subject's delay.
type routeShare struct {
	id     string
	nc     *nats.Conn
	router *Router
	sub    *nats.Subscription
	// published counts messages sent, publishFailures those the client refused;
	// routes and dones count the other replicas' messages received, refused the malformed.
	published, publishFailures, routes, dones, refused atomic.Uint64
}

// newReplicaID returns a random id for this process's messages.
func newReplicaID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// startRouteShare subscribes to routeSubject and makes router announce its decisions there.
// Call it before the router routes anything.
func startRouteShare(nc *nats.Conn, router *Router) (*routeShare, error) {
	s := &routeShare{id: newReplicaID(), nc: nc, router: router}
	sub, err := nc.Subscribe(routeSubject, s.receive)
	if err != nil {
		return nil, fmt.Errorf("subscribing to %s: %w", routeSubject, err)
	}
	// Route messages come in bursts as fast as requests are routed: no limit but memory.
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		_ = sub.Unsubscribe()
		return nil, err
	}
	s.sub = sub
	router.share = s
	return s, nil
}

// routed announces a route this router made (with its blocks when the router predicts).
func (s *routeShare) routed(d Decision, localHashes []uint64) {
	m := routeMsg{Replica: s.id, Op: opRoute, RequestID: d.RequestID, WorkerID: d.WorkerID, DpRank: d.DpRank}
	if s.router.predictTTL > 0 {
		m.LocalHashes = localHashes
	}
	s.publish(m)
}

// done announces that a route this router made is done.
func (s *routeShare) done(requestID uint64) {
	s.publish(routeMsg{Replica: s.id, Op: opDone, RequestID: requestID})
}

func (s *routeShare) publish(m routeMsg) {
	b, err := json.Marshal(m)
	if err == nil {
		err = s.nc.Publish(routeSubject, b)
	}
	if err != nil {
		if s.publishFailures.Add(1) == 1 {
			slog.Warn(fmt.Sprintf("replica: sharing a routing decision on %s: %v (counting, logged once)", routeSubject, err))
		}
		return
	}
	s.published.Add(1)
}

// receive applies another replica's message to the router (its own are ignored).
func (s *routeShare) receive(msg *nats.Msg) {
	var m routeMsg
	if err := json.Unmarshal(msg.Data, &m); err != nil || m.Replica == "" {
		s.refused.Add(1)
		return
	}
	if m.Replica == s.id {
		return
	}
	switch m.Op {
	case opRoute:
		s.routes.Add(1)
		s.router.AddRemote(m.Replica, m.RequestID, workerKey{m.WorkerID, m.DpRank}, m.LocalHashes)
	case opDone:
		s.dones.Add(1)
		s.router.DoneRemote(m.Replica, m.RequestID)
	default:
		s.refused.Add(1)
	}
}

// stop ends the subscription; the router stops announcing.
func (s *routeShare) stop() {
	_ = s.sub.Unsubscribe()
}

// shareReport is the route-sharing part of GET /load.
type shareReport struct {
	// Replica is this process's id on routeSubject.
	Replica string `json:"replica"`
	// Published counts the routes and dones this replica announced; PublishFailures those
	// the NATS client refused.
	Published       uint64 `json:"published"`
	PublishFailures uint64 `json:"publish_failures"`
	// Routes and Dones count the other replicas' announcements received; Refused the
	// malformed messages.
	Routes  uint64 `json:"routes"`
	Dones   uint64 `json:"dones"`
	Refused uint64 `json:"refused"`
}

// report returns the route sharing's counters.
func (s *routeShare) report() shareReport {
	return shareReport{Replica: s.id, Published: s.published.Load(), PublishFailures: s.publishFailures.Load(),
		Routes: s.routes.Load(), Dones: s.dones.Load(), Refused: s.refused.Load()}
}
