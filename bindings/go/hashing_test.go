package kvidx

import (
	"slices"
	"testing"
)

// Golden values of the hashing contract (block size 4).
var (
	goldenLocal = []uint64{14643705804678351452, 16777012769546811212, 483935686894639516}
	goldenSeq   = []uint64{14643705804678351452, 4945711292740353085, 12583592247330656132}
)

func TestHashTokensGolden(t *testing.T) {
	tokens := []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14} // 3 full blocks + 2
	local, err := HashTokens(tokens, 4)
	if err != nil || !slices.Equal(local, goldenLocal) {
		t.Fatalf("HashTokens = %v, %v; want %v", local, err, goldenLocal)
	}
	seq, err := SeqHashes(local)
	if err != nil || !slices.Equal(seq, goldenSeq) {
		t.Fatalf("SeqHashes = %v, %v; want %v", seq, err, goldenSeq)
	}
}

func TestHashTokensEdgeCases(t *testing.T) {
	if got, err := HashTokens([]uint32{1, 2, 3}, 4); err != nil || len(got) != 0 {
		t.Fatalf("partial block: %v, %v", got, err)
	}
	if got, err := HashTokens(nil, 4); err != nil || len(got) != 0 {
		t.Fatalf("no tokens: %v, %v", got, err)
	}
	_, err := HashTokens([]uint32{1}, 0)
	wantErr(t, err, ErrInvalidArgument)
	if got, err := SeqHashes(nil); err != nil || len(got) != 0 {
		t.Fatalf("SeqHashes(nil): %v, %v", got, err)
	}
}
