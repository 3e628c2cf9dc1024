package kvidx

import (
	"cmp"
	"slices"
)

// refModel is a small, obvious Go copy of the reference model of docs/contract.md section 1, used as
// the oracle of the randomized tests. Identities use their own mix: only equality matters.
type refModel struct {
	workers                          map[refWorker]map[uint64]uint64 // seq hash -> identity
	applied, rejected, unknownRemove uint64
}

type refWorker struct {
	id   uint64
	rank uint32
}

const refSeed = 0x9e3779b97f4a7c15

func refMix(prev, local uint64) uint64 {
	x := prev*0xbf58476d1ce4e5b9 ^ (local + 0x94d049bb133111eb)
	x ^= x >> 31
	x *= 0xd6e8feb86659fd93
	return x ^ x>>29
}

func newRefModel() *refModel { return &refModel{workers: map[refWorker]map[uint64]uint64{}} }

func (m *refModel) worker(w refWorker) map[uint64]uint64 {
	if m.workers[w] == nil {
		m.workers[w] = map[uint64]uint64{}
	}
	return m.workers[w]
}

// apply applies one event and reports whether a stored event was rejected.
func (m *refModel) apply(e Event) (rejected bool) {
	w := refWorker{e.WorkerID, e.DpRank}
	switch e.Kind {
	case EventStored:
		id := uint64(refSeed)
		if e.HasParent {
			pid, ok := m.workers[w][e.ParentSeqHash]
			if !ok {
				m.rejected++
				return true
			}
			id = pid
		}
		blocks := m.worker(w)
		for _, b := range e.Blocks {
			id = refMix(id, b.LocalHash)
			blocks[b.SeqHash] = id
		}
	case EventRemoved:
		blocks := m.worker(w)
		for _, s := range e.SeqHashes {
			if _, ok := blocks[s]; ok {
				delete(blocks, s)
			} else {
				m.unknownRemove++
			}
		}
	case EventCleared:
		m.workers[w] = map[uint64]uint64{}
	}
	m.applied++
	return false
}

func (m *refModel) removeWorker(id uint64) {
	for w := range m.workers {
		if w.id == id {
			delete(m.workers, w)
		}
	}
}

func (m *refModel) removeWorkerDpRank(id uint64, rank uint32) {
	delete(m.workers, refWorker{id, rank})
}

func (m *refModel) find(locals []uint64) []Match {
	q := make([]uint64, len(locals))
	id := uint64(refSeed)
	for i, l := range locals {
		id = refMix(id, l)
		q[i] = id
	}
	var out []Match
	for w, blocks := range m.workers {
		held := map[uint64]bool{}
		for _, bid := range blocks {
			held[bid] = true
		}
		d := 0
		for d < len(q) && held[q[d]] {
			d++
		}
		if d > 0 {
			out = append(out, Match{WorkerID: w.id, DpRank: w.rank, Depth: uint32(d)})
		}
	}
	slices.SortFunc(out, func(a, b Match) int {
		return cmp.Or(cmp.Compare(b.Depth, a.Depth), cmp.Compare(a.WorkerID, b.WorkerID),
			cmp.Compare(a.DpRank, b.DpRank))
	})
	return out
}

func (m *refModel) stats() Stats {
	s := Stats{EventsApplied: m.applied, EventsRejected: m.rejected, UnknownRemovals: m.unknownRemove}
	for _, blocks := range m.workers {
		s.Workers++
		s.WorkerBlocks += uint64(len(blocks))
	}
	return s
}
