package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	kvidx "github.com/kvidx/kvidx/bindings/go"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The bus layout shared with the bridge (docs/replicas.md): one stream of engine batches,
// one object-store bucket of snapshots.
const (
	streamName     = "KVIDX_EVENTS"
	streamSubjects = "kvidx.events.>"
	snapshotBucket = "KVIDX_SNAPSHOTS"
	// The headers of a stream message (one engine batch, the payload exactly as the engine
	// sent it).
	hdrWorkerID    = "Kvidx-Worker-Id"
	hdrDpRank      = "Kvidx-Dp-Rank"
	hdrFormat      = "Kvidx-Format"
	hdrEngineSeq   = "Kvidx-Engine-Seq"
	hdrEngineEpoch = "Kvidx-Engine-Epoch"
)

// natsOptions are the settings of --nats mode.
type natsOptions struct {
	// url is the NATS server URL; empty means --nats mode is off.
	url string
	// snapshotMsgs and snapshotEvery: a snapshot is saved once that many messages were
	// applied since the last one, or that much time passed with anything new applied.
	snapshotMsgs  uint64
	snapshotEvery time.Duration
	// snapshotKeep is the number of newest snapshots kept in the bucket (older ones are
	// deleted after each save).
	snapshotKeep int
	// saveSnapshots turns saving off (the replica still loads them).
	saveSnapshots bool
	// serveBehind answers /route before the replica has caught up with the stream (the
	// answers then come from a partial index; they carry Kvidx-Replica-Behind).
	serveBehind bool
	// allowGap starts even when the stream no longer holds every message after the restored
	// snapshot (retention removed them): the index then misses those batches.
	allowGap bool
	// hashCheck turns the engine feeds' hash check on (-hash-check, -hash-seed).
	hashCheck hashCheckOptions
	// shareRoutes announces each route and each DELETE on routeSubject and counts the other
	// replicas' routes as load (routeshare.go).
	shareRoutes bool
}

// defaultNATSOptions are the command-line defaults of --nats mode.
func defaultNATSOptions() natsOptions {
	return natsOptions{snapshotMsgs: 10000, snapshotEvery: 30 * time.Second, snapshotKeep: 3, saveSnapshots: true,
		shareRoutes: true, hashCheck: hashCheckOptions{seed: kvidx.VllmDefaultSeed}}
}

// replica feeds the router's index from the KVIDX_EVENTS stream, exactly once per message:
// message m is applied as the offset batch at m's stream sequence, so every worker's
// watermark is the sequence of its last message applied, and a message at or below its
// worker's watermark (already in a restored snapshot) is skipped by the library.
type replica struct {
	// streamApplier holds the index, the engine feeds, the publishers and the position
	// (applied: the stream sequence of the last message handled).
	streamApplier
	o      natsOptions
	router *Router
	nc     *nats.Conn
	stream jetstream.Stream
	store  jetstream.ObjectStore
	// streamCreated is the creation time (Unix ns) of the stream this replica follows.
	streamCreated int64

	streamTop atomic.Uint64 // the stream's last sequence, polled
	// streamReset is why the stream this replica follows was deleted or recreated (nil
	// while it is there): then nothing more is applied and /route answers 503.
	streamReset atomic.Pointer[string]
	// streamMissing: the last read of the stream's state found no stream.
	streamMissing atomic.Bool
	// consumed counts messages handled since start; badMessages those refused (bad
	// headers, malformed or oversized payloads).
	consumed, badMessages atomic.Uint64
	sinceSnapshot         atomic.Int64
	// skippedSeqs counts stream sequences never delivered (deleted from the stream).
	skippedSeqs atomic.Uint64
	reconnects  atomic.Uint64
	// applyNanos is the time spent handling messages (applying them) since start.
	applyNanos atomic.Int64

	// boot is what the start-up did; fixed once the consumer runs.
	boot bootReport

	snapMu   sync.Mutex // held while a snapshot is saved
	lastSnap snapshotReport
	saved    atomic.Uint64
	failed   atomic.Uint64
	deleted  atomic.Uint64

	catchMu     sync.Mutex
	consumeFrom time.Time
	caughtUp    *catchUpReport

	cc jetstream.ConsumeContext
	// share is the route sharing with the other replicas (nil with -share-routes=false).
	share *routeShare
}

// bootReport says how a replica started.
type bootReport struct {
	// RestoredFrom is the snapshot loaded ("" for a full replay); RestoredSeq its S.
	RestoredFrom string `json:"restored_from"`
	RestoredSeq  uint64 `json:"restored_seq"`
	// Failed lists the snapshots tried and refused, newest first, with the reason.
	Failed []string `json:"failed"`
	// BootstrapMs is the time to load the snapshot (0 without one).
	BootstrapMs float64            `json:"bootstrap_ms"`
	Info        kvidx.SnapshotInfo `json:"info"`
	// Watermarks are every restored publisher's watermark right after the restore.
	Watermarks []watermarkReport `json:"watermarks"`
	// FeedPublishers counts the publishers whose engine feed state (next sequence, epoch)
	// the snapshot restored.
	FeedPublishers uint64 `json:"feed_publishers"`
	// Gap counts the messages missed at start (--allow-stream-gap only).
	Gap uint64 `json:"gap"`
}

// watermarkReport is one publisher's watermark.
type watermarkReport struct {
	WorkerID  uint64 `json:"worker_id"`
	DpRank    uint32 `json:"dp_rank"`
	Watermark uint64 `json:"watermark"`
}

// snapshotReport describes the last snapshot this replica saved.
type snapshotReport struct {
	Name  string             `json:"name"`
	Seq   uint64             `json:"seq"`
	At    time.Time          `json:"at"`
	Ms    float64            `json:"ms"`
	Info  kvidx.SnapshotInfo `json:"info"`
	Start time.Time          `json:"-"`
}

// catchUpReport is the first time the consumer reached the end of the stream.
type catchUpReport struct {
	// Ms is the time from the consumer's start to the end of the stream, idle time included
	// (waiting for a stream that was empty, or for messages published later).
	Ms       float64 `json:"ms"`
	Messages uint64  `json:"messages"`
	Events   uint64  `json:"events"`
	// ApplyMs is the part of Ms spent handling the messages.
	ApplyMs float64 `json:"apply_ms"`
	// EventsPerSec is Events / ApplyMs: the rate of applying (0 when nothing was applied).
	EventsPerSec float64 `json:"events_per_sec"`
}

// newCatchUpReport is the report of a catch-up that took wall in all, apply of it handling
// messages.
func newCatchUpReport(wall, apply time.Duration, messages, events uint64) *catchUpReport {
	c := &catchUpReport{Ms: float64(wall.Microseconds()) / 1e3, ApplyMs: float64(apply.Microseconds()) / 1e3,
		Messages: messages, Events: events}
	if apply > 0 {
		c.EventsPerSec = float64(events) / apply.Seconds()
	}
	return c
}

// catchUpMessage is the log line of a catch-up that ended at stream sequence seq: the rate
// is over the time spent applying only, and the time waited for messages is said apart.
func catchUpMessage(seq uint64, c *catchUpReport) string {
	if c.Messages == 0 {
		return fmt.Sprintf("replica: caught up with the stream at %d: nothing to apply (%.1f ms after the consumer started)", seq, c.Ms)
	}
	msg := fmt.Sprintf("replica: caught up with the stream at %d: %d messages, %d events applied in %.1f ms (%.0f events/s)",
		seq, c.Messages, c.Events, c.ApplyMs, c.EventsPerSec)
	if idle := c.Ms - c.ApplyMs; idle >= 1 {
		msg += fmt.Sprintf("; idle %.1f ms of the %.1f ms since the consumer started (waiting for messages)", idle, c.Ms)
	}
	return msg
}

// startReplica connects to NATS, loads the newest valid snapshot (older ones, then a full
// replay, when one cannot be restored) and starts consuming the stream after it. ix must
// be empty.
func startReplica(ctx context.Context, o natsOptions, ix *kvidx.Indexer, router *Router) (*replica, error) {
	if o.snapshotKeep < 1 {
		return nil, errors.New("--snapshot-keep must be at least 1")
	}
	if o.snapshotMsgs == 0 || o.snapshotEvery <= 0 {
		return nil, errors.New("--snapshot-msgs and --snapshot-every must be positive")
	}
	r := &replica{o: o, router: router}
	r.streamApplier = newStreamApplier(ix, func(k workerKey) {
		if _, err := router.Register([]workerKey{k}); err != nil {
			slog.Warn(fmt.Sprintf("replica: worker %d rank %d is not a routing candidate: %v", k.ID, k.DpRank, err))
		}
	})
	r.streamApplier.hashCheck = o.hashCheck
	nc, err := nats.Connect(o.url, nats.Name("kvidx-go-router"), nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond), nats.RetryOnFailedConnect(true),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { slog.Warn(fmt.Sprintf("nats: disconnected: %v", err)) }),
		nats.ReconnectHandler(func(c *nats.Conn) {
			r.reconnects.Add(1)
			slog.Info(fmt.Sprintf("nats: reconnected to %s", c.ConnectedUrl()))
		}))
	if err != nil {
		return nil, fmt.Errorf("nats connect %s: %w", o.url, err)
	}
	r.nc = nc
	fail := func(err error) (*replica, error) { nc.Close(); return nil, err }
	js, err := jetstream.New(nc)
	if err != nil {
		return fail(err)
	}
	if r.stream, err = ensureStream(ctx, js); err != nil {
		return fail(err)
	}
	r.streamCreated = r.stream.CachedInfo().Created.UnixNano()
	if r.store, err = ensureBucket(ctx, js); err != nil {
		return fail(err)
	}
	if o.shareRoutes {
		if r.share, err = startRouteShare(nc, router); err != nil {
			return fail(err)
		}
	}
	if err := r.bootstrap(ctx); err != nil {
		return fail(err)
	}
	if err := r.checkRetention(ctx); err != nil {
		return fail(err)
	}
	if err := r.consume(ctx); err != nil {
		return fail(err)
	}
	r.pollOnce(ctx)
	go r.pollStream(ctx)
	if o.saveSnapshots {
		go r.snapshotLoop(ctx)
	}
	return r, nil
}

// errStreamGap reports a stream that no longer holds the messages right after the
// replica's starting point.
var errStreamGap = errors.New("the stream no longer holds every message after the starting point")

// checkRetention refuses to start when the stream's first message is beyond the one the
// consumer needs next (S+1, or 1 for a full replay): retention removed messages that the
// restored index has not seen, and it would never see them (--allow-stream-gap starts anyway,
// logging what is missed).
func (r *replica) checkRetention(ctx context.Context) error {
	in, err := retry(ctx, "reading the stream's state", func(ctx context.Context) (*jetstream.StreamInfo, error) {
		return r.stream.Info(ctx)
	})
	if err != nil {
		return err
	}
	next := r.applied.Load() + 1
	first := in.State.FirstSeq
	if in.State.Msgs == 0 || first <= next {
		return nil
	}
	from := "a full replay"
	if r.boot.RestoredFrom != "" {
		from = "after " + r.boot.RestoredFrom
	}
	err = fmt.Errorf("%w: %s starts at sequence %d, the replica needs %d (%s): messages %d..%d are gone; keep the stream longer than the snapshots (--snapshot-every x --snapshot-keep), or pass --allow-stream-gap",
		errStreamGap, streamName, first, next, from, next, first-1)
	if !r.o.allowGap {
		return err
	}
	slog.Warn(fmt.Sprintf("replica: %v (starting anyway: --allow-stream-gap)", err))
	r.boot.Gap = first - next
	return nil
}

// retry runs f until it succeeds or ctx ends, waiting between attempts (the server may be
// starting or restarting).
func retry[T any](ctx context.Context, what string, f func(context.Context) (T, error)) (T, error) {
	for attempt := 0; ; attempt++ {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		v, err := f(c)
		cancel()
		if err == nil {
			return v, nil
		}
		if attempt%20 == 0 {
			slog.Warn(fmt.Sprintf("nats: %s: %v (retrying)", what, err))
		}
		select {
		case <-ctx.Done():
			return v, fmt.Errorf("%s: %w", what, err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// ensureStream opens KVIDX_EVENTS, creating it when missing (file storage, subjects
// kvidx.events.>, a two-minute de-duplication window for Nats-Msg-Id). Only features of
// nats-server 2.9 are used.
func ensureStream(ctx context.Context, js jetstream.JetStream) (jetstream.Stream, error) {
	return retry(ctx, "opening stream "+streamName, func(ctx context.Context) (jetstream.Stream, error) {
		s, err := js.Stream(ctx, streamName)
		if !errors.Is(err, jetstream.ErrStreamNotFound) {
			return s, err
		}
		s, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: streamName, Subjects: []string{streamSubjects},
			Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute})
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return js.Stream(ctx, streamName)
		}
		return s, err
	})
}

// ensureBucket opens the KVIDX_SNAPSHOTS object store, creating it when missing.
func ensureBucket(ctx context.Context, js jetstream.JetStream) (jetstream.ObjectStore, error) {
	return retry(ctx, "opening bucket "+snapshotBucket, func(ctx context.Context) (jetstream.ObjectStore, error) {
		s, err := js.ObjectStore(ctx, snapshotBucket)
		if !errors.Is(err, jetstream.ErrBucketNotFound) {
			return s, err
		}
		s, err = js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: snapshotBucket, Storage: jetstream.FileStorage})
		if err != nil {
			if s2, err2 := js.ObjectStore(ctx, snapshotBucket); err2 == nil {
				return s2, nil
			}
		}
		return s, err
	})
}

// bootstrap loads the newest snapshot that restores, newest first; a snapshot that fails
// (the library's malformed error for a corrupted or truncated one, a bad envelope, a read
// error) is logged and the next older one tried; without any, the stream is replayed from
// its start.
func (r *replica) bootstrap(ctx context.Context) error {
	infos, err := retry(ctx, "listing "+snapshotBucket, func(ctx context.Context) ([]*jetstream.ObjectInfo, error) {
		l, err := r.store.List(ctx)
		if errors.Is(err, jetstream.ErrNoObjectsFound) {
			return nil, nil
		}
		return l, err
	})
	if err != nil {
		return err
	}
	var names []string
	for _, in := range infos {
		if !in.Deleted {
			names = append(names, in.Name)
		}
	}
	for _, name := range newestFirst(names) {
		start := time.Now()
		env, info, err := r.restore(ctx, name)
		if err == nil {
			r.boot.RestoredFrom, r.boot.RestoredSeq, r.boot.Info = name, env.seq, info
			r.boot.BootstrapMs = float64(time.Since(start).Microseconds()) / 1e3
			r.adopt(env)
			r.boot.Watermarks = r.watermarks()
			r.boot.FeedPublishers = r.feedPublishers()
			slog.Info(fmt.Sprintf("replica: restored %s in %.1f ms: %d workers, %d blocks, %d bytes, watermarks %d..%d; consuming from %d",
				name, r.boot.BootstrapMs, info.Workers, info.Blocks, info.Bytes, info.MinWatermark, info.MaxWatermark, env.seq+1))
			return nil
		}
		r.resetFeeds()
		kind := "cannot be restored"
		switch {
		case errors.Is(err, errOtherStream):
			kind = "belongs to a deleted stream"
			r.deleteStale(ctx, name)
		case errors.Is(err, kvidx.ErrMalformed) || errors.Is(err, errBadEnvelope):
			kind = "is malformed"
		}
		slog.Warn(fmt.Sprintf("replica: snapshot %s %s (%v); falling back to an older one", name, kind, err))
		r.boot.Failed = append(r.boot.Failed, name+": "+err.Error())
		if st, err := r.ix.Stats(); err != nil || st.Workers != 0 || st.WorkerBlocks != 0 {
			return fmt.Errorf("the index is not empty after a failed restore of %s (%+v, %v)", name, st, err)
		}
	}
	slog.Info(fmt.Sprintf("replica: no usable snapshot in %s (%d tried): full replay of %s", snapshotBucket, len(r.boot.Failed), streamName))
	return nil
}

// restore loads one snapshot object into the (empty) index.
func (r *replica) restore(ctx context.Context, name string) (envelope, kvidx.SnapshotInfo, error) {
	want, _ := parseSnapName(name)
	obj, err := r.store.Get(ctx, name)
	if err != nil {
		return envelope{}, kvidx.SnapshotInfo{}, err
	}
	defer obj.Close()
	br := bufio.NewReaderSize(obj, 256<<10)
	env, err := readEnvelope(br)
	if err != nil {
		return env, kvidx.SnapshotInfo{}, err
	}
	if env.seq != want {
		return env, kvidx.SnapshotInfo{}, fmt.Errorf("%w: sequence %d in an object named for %d", errBadEnvelope, env.seq, want)
	}
	if env.streamCreated != r.streamCreated {
		return env, kvidx.SnapshotInfo{}, fmt.Errorf("%w: the snapshot's stream was created at %s, %s at %s",
			errOtherStream, time.Unix(0, env.streamCreated).UTC().Format(time.RFC3339Nano), streamName,
			time.Unix(0, r.streamCreated).UTC().Format(time.RFC3339Nano))
	}
	if err := r.restoreFeeds(env); err != nil {
		return env, kvidx.SnapshotInfo{}, err
	}
	info, err := r.ix.RestoreSnapshot(br)
	return env, info, err
}

// errOtherStream reports a snapshot of a stream that was deleted (and maybe recreated)
// since: its sequences name other messages.
var errOtherStream = errors.New("the snapshot belongs to another stream")

// deleteStale deletes a snapshot of a deleted stream (when this replica saves snapshots):
// no replica can use it, and its S would sort it before the new stream's snapshots.
func (r *replica) deleteStale(ctx context.Context, name string) {
	if !r.o.saveSnapshots {
		return
	}
	c, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := r.store.Delete(c, name); err == nil {
		r.deleted.Add(1)
	} else if !errors.Is(err, jetstream.ErrObjectNotFound) {
		slog.Warn(fmt.Sprintf("replica: deleting snapshot %s of a deleted stream: %v", name, err))
	}
}

// feedPublishers counts the publishers the engine feeds hold state for.
func (r *replica) feedPublishers() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var n uint64
	for _, fd := range r.feeds {
		if p, err := fd.Publishers(); err == nil {
			n += p
		}
	}
	return n
}

// consume starts the ordered consumer after r.applied. An ordered consumer is recreated by
// the client at the next expected sequence after a server restart or a missed heartbeat,
// so nothing is lost or delivered twice across reconnections.
func (r *replica) consume(ctx context.Context) error {
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy}
	if a := r.applied.Load(); a > 0 {
		cfg = jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: a + 1}
	}
	cons, err := retry(ctx, "creating the ordered consumer", func(ctx context.Context) (jetstream.Consumer, error) {
		return r.stream.OrderedConsumer(ctx, cfg)
	})
	if err != nil {
		return err
	}
	r.catchMu.Lock()
	r.consumeFrom = time.Now()
	r.catchMu.Unlock()
	// Short pull expiries and heartbeats: a restarted server is noticed within seconds.
	r.cc, err = cons.Consume(r.handle, jetstream.PullExpiry(4*time.Second), jetstream.PullHeartbeat(time.Second),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			slog.Error(fmt.Sprintf("replica: consumer: %v", err))
		}))
	return err
}

// handle applies one stream message as the offset batch at its stream sequence.
func (r *replica) handle(m jetstream.Msg) {
	md, err := m.Metadata()
	if err != nil {
		slog.Error(fmt.Sprintf("replica: message without metadata: %v", err))
		return
	}
	if r.streamReset.Load() != nil {
		return // the stream was recreated: its sequences name other messages
	}
	seq := md.Sequence.Stream
	prev := r.applied.Load()
	if seq <= prev {
		return // delivered again after a consumer reset: already handled
	}
	if seq != prev+1 {
		// Sequences the stream no longer has (deleted messages, retention while this replica
		// was behind): nothing to apply for them here, and nothing the others applied either
		// unless they read them before the deletion.
		r.skippedSeqs.Add(seq - prev - 1)
	}
	r.consumed.Add(1)
	start := time.Now()
	err = r.handleMsg(streamMsg{seq: seq, subject: m.Subject(), header: m.Headers(), data: m.Data()})
	r.applyNanos.Add(int64(time.Since(start)))
	if errors.Is(err, errIndexUnusable) {
		slog.Error(fmt.Sprintf("replica: %v", err))
		os.Exit(1)
	}
	if err != nil {
		r.badMessages.Add(1)
		if n := r.badMessages.Load(); n <= 10 || n%1000 == 0 {
			slog.Warn(fmt.Sprintf("replica: message %d (%s) refused: %v (%d so far)", seq, m.Subject(), err, n))
		}
	}
	r.sinceSnapshot.Add(1)
	if md.NumPending == 0 {
		r.noteCaughtUp()
	}
}

// noteCaughtUp records the first time the consumer reached the end of the stream.
func (r *replica) noteCaughtUp() {
	r.catchMu.Lock()
	defer r.catchMu.Unlock()
	if r.caughtUp != nil {
		return
	}
	r.caughtUp = newCatchUpReport(time.Since(r.consumeFrom), time.Duration(r.applyNanos.Load()), r.consumed.Load(), r.events.Load())
	slog.Info(catchUpMessage(r.applied.Load(), r.caughtUp))
}

// pollStream keeps the stream's state fresh (see pollOnce).
func (r *replica) pollStream(ctx context.Context) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.pollOnce(ctx)
	}
}

// snapshotLoop saves a snapshot every snapshotMsgs messages or snapshotEvery, whichever
// comes first, when anything new was applied.
func (r *replica) snapshotLoop(ctx context.Context) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.snapMu.Lock()
		prev := r.lastSnap.Seq
		r.snapMu.Unlock()
		if prev == 0 {
			prev = r.boot.RestoredSeq
		}
		if r.applied.Load() == prev || r.streamReset.Load() != nil {
			continue
		}
		if uint64(r.sinceSnapshot.Load()) < r.o.snapshotMsgs && time.Since(last) < r.o.snapshotEvery {
			continue
		}
		last = time.Now()
		if err := r.saveSnapshot(ctx); err != nil {
			r.failed.Add(1)
			slog.Error(fmt.Sprintf("replica: saving a snapshot: %v", err))
		}
	}
}

// saveSnapshot writes a snapshot tagged with S = the last message submitted: it flushes the
// index (everything at or below S applied), then streams the envelope and the library's
// snapshot into the bucket while messages keep being applied. Sections of workers that
// moved past S meanwhile carry higher watermarks; a replica restoring it consumes from S+1
// and the library skips what those sections already hold.
func (r *replica) saveSnapshot(ctx context.Context) error {
	r.snapMu.Lock()
	defer r.snapMu.Unlock()
	start := time.Now()
	sinceBefore := r.sinceSnapshot.Load()
	// The envelope (S, feed states) is taken under the applier's lock; S names the object.
	env, err := r.checkpoint(r.streamCreated)
	if err != nil {
		return err
	}
	s := env.seq
	if err := r.ix.Flush(); err != nil {
		return err
	}
	pr, pw := io.Pipe()
	var info kvidx.SnapshotInfo
	done := make(chan error, 1)
	go func() {
		err := env.write(pw)
		if err == nil {
			info, err = r.ix.WriteSnapshot(pw)
		}
		pw.CloseWithError(err)
		done <- err
	}()
	c, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	name := snapName(s)
	_, err = r.store.Put(c, jetstream.ObjectMeta{Name: name, Description: "kvidx router snapshot"}, pr)
	pr.CloseWithError(fmt.Errorf("upload ended: %v", err))
	if werr := <-done; err == nil && werr != nil {
		err = werr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	r.sinceSnapshot.Add(-sinceBefore)
	r.lastSnap = snapshotReport{Name: name, Seq: s, At: time.Now(), Start: start,
		Ms: float64(time.Since(start).Microseconds()) / 1e3, Info: info}
	r.saved.Add(1)
	slog.Info(fmt.Sprintf("replica: saved %s in %.1f ms: %d workers, %d blocks, %d bytes, watermarks %d..%d",
		name, r.lastSnap.Ms, info.Workers, info.Blocks, info.Bytes, info.MinWatermark, info.MaxWatermark))
	r.prune(ctx)
	return nil
}

// prune deletes all but the newest snapshotKeep snapshots (other replicas may be deleting
// the same ones: a missing object is not an error).
func (r *replica) prune(ctx context.Context) {
	c, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	infos, err := r.store.List(c)
	if err != nil {
		return
	}
	var names []string
	for _, in := range infos {
		if !in.Deleted {
			names = append(names, in.Name)
		}
	}
	old := newestFirst(names)
	if len(old) <= r.o.snapshotKeep {
		return
	}
	for _, name := range old[r.o.snapshotKeep:] {
		if err := r.store.Delete(c, name); err == nil {
			r.deleted.Add(1)
		} else if !errors.Is(err, jetstream.ErrObjectNotFound) {
			slog.Warn(fmt.Sprintf("replica: deleting old snapshot %s: %v", name, err))
		}
	}
}

// close stops consuming and closes the connection and the feeds.
func (r *replica) close() {
	if r.cc != nil {
		r.cc.Stop()
	}
	if r.share != nil {
		r.share.stop()
	}
	r.nc.Close()
	r.resetFeeds()
}

// replicaReport is the body of GET /replica.
type replicaReport struct {
	AppliedSeq    uint64 `json:"applied_seq"`
	StreamLastSeq uint64 `json:"stream_last_seq"`
	// Lag is the stream's last sequence minus the applied one; after a reset of the stream,
	// its last sequence (none of its messages is applied).
	Lag uint64 `json:"lag"`
	// StreamReset says why the stream this replica followed is gone ("" while it is there).
	StreamReset string `json:"stream_reset"`
	// Routing says whether /route answers now; RouteRefusal why not.
	Routing        bool               `json:"routing"`
	RouteRefusal   string             `json:"route_refusal,omitempty"`
	Consumed       uint64             `json:"consumed"`
	BadMessages    uint64             `json:"bad_messages"`
	MissingSeqs    uint64             `json:"missing_seqs"`
	EventsDecoded  uint64             `json:"events_decoded"`
	Reconnects     uint64             `json:"reconnects"`
	Connected      bool               `json:"connected"`
	Stats          kvidx.ReplicaStats `json:"stats"`
	Boot           bootReport         `json:"boot"`
	CaughtUp       *catchUpReport     `json:"caught_up"`
	LastSnapshot   *snapshotReport    `json:"last_snapshot"`
	SnapshotsSaved uint64             `json:"snapshots_saved"`
	Watermarks     []watermarkReport  `json:"watermarks"`
}

// report gathers the replica's state (flushing the index first, so the library's counters
// are final for everything handled).
func (r *replica) report() (replicaReport, error) {
	applied := r.applied.Load()
	if err := r.ix.Flush(); err != nil {
		return replicaReport{}, err
	}
	st, err := r.ix.ReplicaStats()
	if err != nil {
		return replicaReport{}, err
	}
	rep := replicaReport{AppliedSeq: applied, StreamLastSeq: r.streamTop.Load(), Consumed: r.consumed.Load(),
		BadMessages: r.badMessages.Load(), MissingSeqs: r.skippedSeqs.Load(), EventsDecoded: r.events.Load(), Reconnects: r.reconnects.Load(),
		Connected: r.nc != nil && r.nc.IsConnected(), Stats: st, Boot: r.boot, SnapshotsSaved: r.saved.Load(),
		Watermarks: r.watermarks()}
	rep.StreamReset = r.resetReason()
	switch {
	case rep.StreamReset != "":
		rep.Lag = rep.StreamLastSeq
	case rep.StreamLastSeq > applied:
		rep.Lag = rep.StreamLastSeq - applied
	}
	rep.RouteRefusal, rep.Routing = r.routeGate(http.Header{})
	r.catchMu.Lock()
	rep.CaughtUp = r.caughtUp
	r.catchMu.Unlock()
	r.snapMu.Lock()
	if r.lastSnap.Name != "" {
		s := r.lastSnap
		rep.LastSnapshot = &s
	}
	r.snapMu.Unlock()
	return rep, nil
}

// writeMetrics prints the replica's metrics in the Prometheus text format.
func (r *replica) writeMetrics(w io.Writer) {
	rep, err := r.report()
	if err != nil {
		slog.Error(fmt.Sprintf("replica metrics: %v", err))
		return
	}
	counter := func(name, help string, v uint64) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n%s %d\n", name, help, name, name, v)
	}
	gauge := func(name, help string, v float64) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n%s %g\n", name, help, name, name, v)
	}
	gauge("router_stream_last_seq", "Last sequence of the KVIDX_EVENTS stream (polled).", float64(rep.StreamLastSeq))
	gauge("router_stream_applied_seq", "Stream sequence of the last message applied or skipped.", float64(rep.AppliedSeq))
	gauge("router_stream_lag_messages", "Stream last sequence minus the applied one (after a reset of the stream: its last sequence).", float64(rep.Lag))
	flag := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	gauge("router_stream_reset", "1 once the stream this replica follows was deleted or recreated (it then stops routing).", flag(rep.StreamReset != ""))
	gauge("router_replica_caught_up", "1 once the replica has caught up with the stream.", flag(rep.CaughtUp != nil))
	gauge("router_replica_routing", "1 while /route answers (caught up, or --serve-while-behind; never after a reset of the stream).", flag(rep.Routing))
	counter("router_stream_messages_total", "Stream messages handled since start.", rep.Consumed)
	counter("router_stream_bad_messages_total", "Stream messages refused (bad headers, malformed or oversized payload).", rep.BadMessages)
	counter("router_stream_missing_seqs_total", "Stream sequences never delivered (messages deleted from the stream).", rep.MissingSeqs)
	counter("router_nats_reconnects_total", "Reconnections to the NATS server.", rep.Reconnects)
	gauge("router_nats_connected", "1 while connected to the NATS server.", flag(rep.Connected))
	counter("kvidx_replica_batches_applied_total", "Offset batches applied.", rep.Stats.BatchesApplied)
	counter("kvidx_replica_batches_skipped_total", "Offset batches skipped (at or below the worker's watermark).", rep.Stats.BatchesSkipped)
	counter("kvidx_replica_events_skipped_total", "Events in skipped batches.", rep.Stats.EventsSkipped)
	var lo, hi uint64
	for i, wm := range rep.Watermarks {
		if i == 0 || wm.Watermark < lo {
			lo = wm.Watermark
		}
		hi = max(hi, wm.Watermark)
	}
	gauge("router_watermark_workers", "Publishers (worker id, dp rank) with a watermark.", float64(len(rep.Watermarks)))
	gauge("router_watermark_min", "Lowest publisher watermark (stream sequence).", float64(lo))
	gauge("router_watermark_max", "Highest publisher watermark (stream sequence).", float64(hi))
	age := -1.0
	if rep.LastSnapshot != nil {
		age = time.Since(rep.LastSnapshot.Start).Seconds()
	}
	gauge("router_snapshot_age_seconds", "Age of the last snapshot this replica saved (-1: none yet).", age)
	counter("router_snapshots_saved_total", "Snapshots saved to the KVIDX_SNAPSHOTS bucket.", rep.SnapshotsSaved)
	counter("router_snapshot_failures_total", "Snapshot saves that failed.", r.failed.Load())
	counter("router_snapshot_restore_failures_total", "Snapshots refused at start-up (then an older one was tried).", uint64(len(rep.Boot.Failed)))
	gauge("router_bootstrap_seconds", "Time to load the start-up snapshot (0 without one).", rep.Boot.BootstrapMs/1e3)
	r.writeHashCheckMetrics(w)
	if r.share != nil {
		l := r.share.report()
		counter("router_shared_published_total", "Routes and dones this replica announced on "+routeSubject+".", l.Published)
		counter("router_shared_routes_total", "Other replicas' routes received on "+routeSubject+".", l.Routes)
		counter("router_shared_dones_total", "Other replicas' dones received on "+routeSubject+".", l.Dones)
		gauge("router_shared_remote_in_flight", "Other replicas' routes counted in flight here.", float64(r.router.RemoteInFlight()))
	}
}
