package zmqfeed

// epochTracker follows one publisher's sequence within the current epoch (a connection, or
// the stretch since its sequence last went back) and says, for each live batch, what must
// happen before it is applied.
type epochTracker struct {
	// last is the last sequence applied in this epoch; started says there is one.
	last    uint64
	started bool
}

// arrival is what a live batch needs before it is applied.
type arrival struct {
	// newEpoch: the batch begins an epoch (the first of a connection, or its sequence went
	// back): the worker is cleared and rebuilt from the epoch's batches.
	newEpoch bool
	// wentBack: the sequence went back within a connection (an engine restart).
	wentBack bool
	// from is the first sequence missing before the batch (0 at an epoch's start); missing
	// says there is a gap [from, seq) to ask the replay socket for.
	from    uint64
	missing bool
}

// connected begins an epoch: the next batch is its first.
func (t *epochTracker) connected() { t.started = false }

// arrive classifies a live batch's sequence seq.
func (t *epochTracker) arrive(seq uint64) arrival {
	var a arrival
	if t.started && seq <= t.last {
		a.wentBack = true
		t.started = false
	}
	if !t.started {
		a.newEpoch = true
		a.from = 0
	} else {
		a.from = t.last + 1
	}
	a.missing = seq > a.from
	return a
}

// applied records that seq was applied (replayed or live) in this epoch.
func (t *epochTracker) applied(seq uint64) {
	t.last = seq
	t.started = true
}

// fillable returns, from a replay reply, the batches that fill [from, seq) in order: each
// one's sequence above the previous one kept, the first at or above from, all below seq.
// A reply that starts later than from, or skips sequences, leaves those gaps to the feed.
func fillable(batches []replayed, from, seq uint64) []replayed {
	out := batches[:0:0]
	next := from
	for _, b := range batches {
		if b.seq < next || b.seq >= seq {
			continue
		}
		out = append(out, b)
		next = b.seq + 1
	}
	return out
}
