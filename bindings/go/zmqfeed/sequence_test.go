package zmqfeed

import (
	"slices"
	"testing"
)

// TestEpochTracker walks one publisher's sequences through two connections and a restart.
func TestEpochTracker(t *testing.T) {
	var tr epochTracker
	step := func(seq uint64, want arrival) {
		t.Helper()
		if got := tr.arrive(seq); got != want {
			t.Fatalf("arrive(%d) = %+v, want %+v", seq, got, want)
		}
		tr.applied(seq)
	}
	tr.connected()
	step(0, arrival{newEpoch: true})                                // the engine's first batch
	step(1, arrival{from: 1})                                       // in order
	step(5, arrival{from: 2, missing: true})                        // 2-4 dropped by the PUB
	step(6, arrival{from: 6})                                       // in order again
	tr.connected()                                                  // connected again
	step(9, arrival{newEpoch: true, from: 0, missing: true})        // ask from 0, not from 7
	step(10, arrival{from: 10})                                     // in order in the new epoch
	step(3, arrival{newEpoch: true, wentBack: true, missing: true}) // restarted behind a proxy
	step(4, arrival{from: 4})
	step(4, arrival{newEpoch: true, wentBack: true, missing: true}) // a repeated sequence too
}

func seqs(b []replayed) []uint64 {
	out := make([]uint64, len(b))
	for i := range b {
		out[i] = b[i].seq
	}
	return out
}

func TestFillableKeepsTheGapInOrder(t *testing.T) {
	reply := func(s ...uint64) []replayed {
		out := make([]replayed, len(s))
		for i, q := range s {
			out[i] = replayed{seq: q}
		}
		return out
	}
	cases := []struct {
		reply     []replayed
		from, seq uint64
		want      []uint64
	}{
		{reply(0, 1, 2, 3, 4, 5, 6), 2, 5, []uint64{2, 3, 4}}, // beyond the live batch: dropped
		{reply(3, 4), 0, 5, []uint64{3, 4}},                   // starts late: 0-2 stay a gap
		{reply(2, 2, 4, 3), 2, 5, []uint64{2, 4}},             // repeats and going back: dropped
		{reply(), 0, 9, []uint64{}},                           // nothing buffered
		{reply(7, 8), 0, 5, []uint64{}},                       // all after the live batch
	}
	for _, c := range cases {
		got := seqs(fillable(c.reply, c.from, c.seq))
		if !slices.Equal(got, c.want) {
			t.Errorf("fillable(%v, %d, %d) = %v, want %v", seqs(c.reply), c.from, c.seq, got, c.want)
		}
	}
}
