package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	kvidx "github.com/kvidx/kvidx/bindings/go"
)

// kvEvent is one KV event in the Dynamo-style JSON shape the router accepts on POST /events:
//
//	{"worker_id": 3, "dp_rank": 0, "event_id": 7,
//	 "stored": {"parent_hash": null, "blocks": [{"block_hash": 907, "tokens_hash": 12}]}}
//	{"worker_id": 3, "dp_rank": 0, "event_id": 8, "removed": {"block_hashes": [907]}}
//	{"worker_id": 3, "dp_rank": 0, "event_id": 9, "cleared": {}}
//
// block_hash is the engine's sequence hash, tokens_hash the local hash of the block's tokens;
// a block needs both. Exactly one of stored, removed and cleared must be present.
//
// A stored or cleared event makes its worker known (a routing candidate). A removed event
// about a worker the router does not know is ignored: it is neither applied nor registers the
// worker (a worker that was never seen storing anything has nothing to remove, and must not
// become a candidate that way); the response counts it in "ignored".
//
// An event may name the storage tier it is about, as the engine's medium or as a kvidx tier
// (not both; names are case-insensitive):
//
//	{"worker_id": 3, "event_id": 10, "medium": "CPU", "stored": {...}}    offloaded to host memory
//	{"worker_id": 3, "event_id": 11, "tier": "device", "removed": {...}}  evicted from the GPU only
//
// Media: GPU (device), CPU and CPU_PINNED (host), DISK and STORAGE (disk), EXTERNAL; any other
// medium goes to the router's -unknown-medium tier (default external). Tiers: device, host,
// disk, external, and all (removed and cleared only). A stored event without either is on the
// device; a removed one without either leaves every tier; a cleared one always does.
type kvEvent struct {
	WorkerID uint64       `json:"worker_id"`
	DpRank   uint32       `json:"dp_rank"`
	EventID  uint64       `json:"event_id"`
	Medium   *string      `json:"medium,omitempty"`
	Tier     *string      `json:"tier,omitempty"`
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

// wireEvent is kvEvent as decoded, to tell a missing worker_id from worker 0 (and a missing
// block hash from hash 0).
type wireEvent struct {
	WorkerID *uint64      `json:"worker_id"`
	DpRank   uint32       `json:"dp_rank"`
	EventID  uint64       `json:"event_id"`
	Medium   *string      `json:"medium"`
	Tier     *string      `json:"tier"`
	Stored   *wireStored  `json:"stored"`
	Removed  *removedData `json:"removed"`
	Cleared  *struct{}    `json:"cleared"`
}

// wireStored is storedData as decoded.
type wireStored struct {
	ParentHash *uint64     `json:"parent_hash"`
	Blocks     []wireBlock `json:"blocks"`
}

// wireBlock is storedBlock as decoded: both hashes are required.
type wireBlock struct {
	BlockHash  *uint64 `json:"block_hash"`
	TokensHash *uint64 `json:"tokens_hash"`
}

// stored checks a decoded stored payload (every block names both hashes) and converts it.
func (w *wireStored) stored() (*storedData, error) {
	if w == nil {
		return nil, nil
	}
	out := &storedData{ParentHash: w.ParentHash, Blocks: make([]storedBlock, len(w.Blocks))}
	for i, b := range w.Blocks {
		switch {
		case b.BlockHash == nil:
			return nil, fmt.Errorf("stored block %d: block_hash is missing", i)
		case b.TokensHash == nil:
			return nil, fmt.Errorf("stored block %d: tokens_hash is missing", i)
		}
		out.Blocks[i] = storedBlock{BlockHash: *b.BlockHash, TokensHash: *b.TokensHash}
	}
	return out, nil
}

// decodeEvents reads one event object or a non-empty array of them; every event needs a
// worker_id and every stored block both of its hashes (null, {} and [] are refused).
func decodeEvents(body []byte) ([]kvEvent, error) {
	body = bytes.TrimSpace(body)
	var wire []*wireEvent
	if len(body) > 0 && body[0] == '[' {
		if err := strictUnmarshal(body, &wire); err != nil {
			return nil, err
		}
		if len(wire) == 0 {
			return nil, errors.New("no events: the array is empty")
		}
	} else {
		var ev *wireEvent
		if err := strictUnmarshal(body, &ev); err != nil {
			return nil, err
		}
		wire = []*wireEvent{ev}
	}
	evs := make([]kvEvent, len(wire))
	for i, w := range wire {
		if w == nil {
			return nil, fmt.Errorf("event %d: null is not an event", i)
		}
		if w.WorkerID == nil {
			return nil, fmt.Errorf("event %d: worker_id is missing", i)
		}
		stored, err := w.Stored.stored()
		if err != nil {
			return nil, fmt.Errorf("event %d: worker %d event %d: %w", i, *w.WorkerID, w.EventID, err)
		}
		evs[i] = kvEvent{WorkerID: *w.WorkerID, DpRank: w.DpRank, EventID: w.EventID,
			Medium: w.Medium, Tier: w.Tier, Stored: stored, Removed: w.Removed, Cleared: w.Cleared}
	}
	return evs, nil
}

// strictUnmarshal decodes JSON, rejecting unknown fields and trailing data. Its errors are
// meant for clients (see describeJSONError).
func strictUnmarshal(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return describeJSONError(err)
	}
	if dec.More() {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// describeJSONError rewrites a decoder error in the API's terms (field names and JSON
// types, not Go types).
func describeJSONError(err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return errors.New("the body is empty")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("the body ends in the middle of a JSON value")
	case errors.As(err, &syntax):
		return fmt.Errorf("invalid JSON at byte %d: %s", syntax.Offset, strings.TrimPrefix(syntax.Error(), "json: "))
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "the body"
		}
		return fmt.Errorf("%s: expected %s, got %s", field, jsonKind(typ.Type), typ.Value)
	default:
		return errors.New(strings.TrimPrefix(err.Error(), "json: "))
	}
}

// jsonKind names the JSON shape a Go type decodes from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer:
		return jsonKind(t.Elem())
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uint:
		return fmt.Sprintf("an integer in [0, %d]", ^uint64(0)>>(64-t.Bits()))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	default:
		return "an object"
	}
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

// maxMediumLen is the longest medium name accepted.
const maxMediumLen = 64

// mediumTier maps an engine's medium name (case-insensitive) to its storage tier; a medium
// kvidx does not know is on unknown. Empty names, names longer than maxMediumLen and names
// with characters other than letters, digits and "_-.:" are refused.
func mediumTier(name string, unknown kvidx.Tier) (kvidx.Tier, error) {
	if name == "" || len(name) > maxMediumLen {
		return 0, fmt.Errorf("medium %q: want a name of 1 to %d characters", name, maxMediumLen)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("_-.:", c)) {
			return 0, fmt.Errorf("medium %q: want letters, digits and _-.: only", name)
		}
	}
	switch strings.ToUpper(name) {
	case "GPU":
		return kvidx.TierDevice, nil
	case "CPU", "CPU_PINNED":
		return kvidx.TierHost, nil
	case "DISK", "STORAGE":
		return kvidx.TierDisk, nil
	case "EXTERNAL":
		return kvidx.TierExternal, nil
	default:
		return unknown, nil
	}
}

// parseTier reads a kvidx tier name (case-insensitive): device, host, disk, external or all.
func parseTier(name string) (kvidx.Tier, error) {
	for _, t := range []kvidx.Tier{kvidx.TierDevice, kvidx.TierHost, kvidx.TierDisk, kvidx.TierExternal, kvidx.TierAll} {
		if strings.EqualFold(name, t.String()) {
			return t, nil
		}
	}
	return 0, fmt.Errorf("tier %q: want device, host, disk, external or all", name)
}

// tier returns the storage tier the event applies on and whether the event named one (with
// medium or tier); unknown is the tier of a medium kvidx does not know. Without a name a
// stored event is on the device and a removed one leaves every tier; a cleared event always
// leaves every tier.
func (e *kvEvent) tier(unknown kvidx.Tier) (kvidx.Tier, bool, error) {
	var t kvidx.Tier
	var err error
	switch {
	case e.Medium != nil && e.Tier != nil:
		return 0, false, errors.New("give medium or tier, not both")
	case e.Medium != nil:
		t, err = mediumTier(*e.Medium, unknown)
	case e.Tier != nil:
		t, err = parseTier(*e.Tier)
	case e.Stored != nil:
		return kvidx.TierDevice, false, nil
	default:
		return kvidx.TierAll, false, nil
	}
	switch {
	case err != nil:
		return 0, false, err
	case e.Cleared != nil:
		return kvidx.TierAll, true, nil
	case e.Stored != nil && t == kvidx.TierAll:
		return 0, false, errors.New(`tier "all" is for removed and cleared events only`)
	}
	return t, true, nil
}
