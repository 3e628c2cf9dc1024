package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	kvidx "github.com/kvidx/kvidx/bindings/go"
)

// kvEvent is one KV event in the Dynamo-style JSON shape the router accepts on POST /events:
//
//	{"worker_id": 3, "dp_rank": 0, "event_id": 7,
//	 "stored": {"parent_hash": null, "blocks": [{"block_hash": 907, "tokens_hash": 12}]}}
//	{"worker_id": 3, "dp_rank": 0, "event_id": 8, "removed": {"block_hashes": [907]}}
//	{"worker_id": 3, "dp_rank": 0, "event_id": 9, "cleared": {}}
//
// block_hash is the engine's sequence hash, tokens_hash the local hash of the block's tokens.
// Exactly one of stored, removed and cleared must be present.
type kvEvent struct {
	WorkerID uint64       `json:"worker_id"`
	DpRank   uint32       `json:"dp_rank"`
	EventID  uint64       `json:"event_id"`
	Stored   *storedData  `json:"stored,omitempty"`
	Removed  *removedData `json:"removed,omitempty"`
	Cleared  *struct{}    `json:"cleared,omitempty"`
}

// storedData is the payload of a stored event.
type storedData struct {
	ParentHash *uint64       `json:"parent_hash"`
	Blocks     []storedBlock `json:"blocks"`
}

// storedBlock is one stored block: the engine's name and the hash of its tokens.
type storedBlock struct {
	BlockHash  uint64 `json:"block_hash"`
	TokensHash uint64 `json:"tokens_hash"`
}

// removedData is the payload of a removed event.
type removedData struct {
	BlockHashes []uint64 `json:"block_hashes"`
}

// errBadEvent reports an event that is not exactly one of stored, removed, cleared.
var errBadEvent = errors.New("an event needs exactly one of stored, removed, cleared")

// decodeEvents reads one event object or an array of them.
func decodeEvents(body []byte) ([]kvEvent, error) {
	body = bytes.TrimSpace(body)
	var evs []kvEvent
	if len(body) > 0 && body[0] == '[' {
		if err := strictUnmarshal(body, &evs); err != nil {
			return nil, err
		}
	} else {
		var ev kvEvent
		if err := strictUnmarshal(body, &ev); err != nil {
			return nil, err
		}
		evs = []kvEvent{ev}
	}
	return evs, nil
}

// strictUnmarshal decodes JSON, rejecting unknown fields and trailing data.
func strictUnmarshal(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// toIndexEvent converts a JSON event into the binding's event.
func (e *kvEvent) toIndexEvent() (kvidx.Event, error) {
	kinds := 0
	for _, present := range []bool{e.Stored != nil, e.Removed != nil, e.Cleared != nil} {
		if present {
			kinds++
		}
	}
	if kinds != 1 {
		return kvidx.Event{}, fmt.Errorf("worker %d event %d: %w", e.WorkerID, e.EventID, errBadEvent)
	}
	switch {
	case e.Stored != nil:
		blocks := make([]kvidx.Block, len(e.Stored.Blocks))
		for i, b := range e.Stored.Blocks {
			blocks[i] = kvidx.Block{LocalHash: b.TokensHash, SeqHash: b.BlockHash}
		}
		ev := kvidx.StoredEvent(e.WorkerID, e.DpRank, e.EventID, blocks)
		if e.Stored.ParentHash != nil {
			ev = ev.WithParent(*e.Stored.ParentHash)
		}
		return ev, nil
	case e.Removed != nil:
		return kvidx.RemovedEvent(e.WorkerID, e.DpRank, e.EventID, e.Removed.BlockHashes), nil
	default:
		return kvidx.ClearedEvent(e.WorkerID, e.DpRank, e.EventID), nil
	}
}
