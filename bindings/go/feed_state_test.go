package kvidx

import (
	"bytes"
	"testing"
)

func TestEngineFeedEpochsAndSavedState(t *testing.T) {
	ix := mustNew(t, Config{EventThreads: 0})
	saved := mustFeed(t, EngineVLLM, 0)
	payload := fixture(t, fixOneBlock)
	marker := []uint64{1000, 1001}
	apply := func(f *EngineFeed, epoch, seq, offset uint64) EngineBatchResult {
		t.Helper()
		r, err := f.ApplyInEpochAt(ix, 5, 0, epoch, seqFrame(seq), payload, offset)
		if err != nil {
			t.Fatalf("ApplyInEpochAt(epoch %d, seq %d): %v", epoch, seq, err)
		}
		return r
	}
	if r := apply(saved, 10, 0, 1); r.Seq != SeqFirst {
		t.Fatalf("first batch: %+v", r)
	}
	state, err := saved.SaveState()
	if err != nil || len(state) != 20+40 {
		t.Fatalf("SaveState: %d bytes, %v", len(state), err)
	}
	restored := mustFeed(t, EngineVLLM, 0)
	wantErr(t, restored.RestoreState(state[:len(state)-1]), ErrMalformed)
	wantErr(t, mustFeed(t, EngineSGLang, 0).RestoreState(state), ErrInvalidArgument)
	if err := restored.RestoreState(state); err != nil {
		t.Fatal(err)
	}
	if again, _ := restored.SaveState(); !bytes.Equal(again, state) {
		t.Fatalf("restored state %x, saved %x", again, state)
	}
	// Sequence 1 of a new epoch: in order for the old one, a restart in truth; both feeds
	// clear the worker alike.
	markWorker(t, ix, 5, 0)
	for _, f := range []*EngineFeed{saved, restored} {
		if r := apply(f, 11, 1, 2); r.Seq != SeqRestart || !r.WorkerCleared {
			t.Fatalf("new epoch: %+v", r)
		}
		if r := apply(f, 11, 2, 3); r.Seq != SeqInOrder || r.WorkerCleared {
			t.Fatalf("next batch of the new epoch: %+v", r)
		}
	}
	wantMatches(t, mustFind(t, ix, marker))
	_ = restored.Close()
	_, err = restored.SaveState()
	wantErr(t, err, ErrClosed)
}
