package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"

	kvidx "github.com/kvidx/kvidx/bindings/go"
)

// onMedium returns the event with an engine medium.
func onMedium(e kvEvent, medium string) kvEvent { e.Medium = &medium; return e }

// onTier returns the event with a kvidx tier.
func onTier(e kvEvent, tier string) kvEvent { e.Tier = &tier; return e }

// A prefix held only in host memory is a partial hit: its worker costs more than one holding
// the prefix on the device and less than one on disk, in an external store or holding nothing.
func TestRouteWeighsTiers(t *testing.T) {
	s := startServer(t, testOptions())
	prompt := []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	stored := func(w uint64) kvEvent { return storedFromTokens(t, w, prompt) }
	var names []uint64
	for _, b := range stored(0).Stored.Blocks {
		names = append(names, b.BlockHash)
	}
	evict := kvEvent{WorkerID: 2, EventID: 3, Removed: &removedData{BlockHashes: names}}
	s.mustDo("POST", "/events", []kvEvent{
		stored(1),                           // device (no medium)
		onMedium(stored(2), "gpu"),          // device, then offloaded to pinned host memory
		onMedium(stored(2), "CPU_PINNED"),   // ...
		onTier(evict, "DEVICE"),             // ...and evicted from the device: host only
		onMedium(stored(3), "Storage"),      // disk
		onMedium(stored(5), "NVME_POOL"),    // unknown medium: external (the default)
		{WorkerID: 4, Cleared: &struct{}{}}, // holds nothing
		onMedium(stored(6), "CPU"),          // host, then removed from every tier
		{WorkerID: 6, EventID: 1, Removed: &removedData{BlockHashes: names}},
	}, http.StatusOK)

	// The raw answer names the tiers.
	out := string(s.mustDo("POST", "/route", routeRequest{TokenIDs: prompt}, http.StatusOK))
	if !strings.Contains(out, `"tier_depths":{"device":4,"host":4,"disk":4,"external":4}`) ||
		!strings.Contains(out, `"hit_blocks":4`) || !strings.Contains(out, `"worker_id":1`) {
		t.Fatalf("route answer %s", out)
	}
	var first Decision
	if err := json.Unmarshal([]byte(out), &first); err != nil {
		t.Fatal(err)
	}
	s.mustDo("DELETE", fmt.Sprintf("/requests/%d", first.RequestID), nil, http.StatusNoContent)
	want := []struct {
		worker uint64
		depths TierDepths
		hit    float64
	}{
		{1, TierDepths{4, 4, 4, 4}, 4},
		{2, TierDepths{0, 4, 4, 4}, 4 * 0.8},
		{3, TierDepths{0, 0, 4, 4}, 4 * 0.5},
		{5, TierDepths{0, 0, 0, 4}, 4 * 0.2},
		{4, TierDepths{}, 0},
		{6, TierDepths{}, 0},
	}
	for i, w := range want {
		d := s.route(routeRequest{TokenIDs: prompt})
		if d.WorkerID != w.worker || d.TierDepths != w.depths || math.Abs(d.HitBlocks-w.hit) > 1e-9 ||
			d.OverlapBlocks != w.depths.External || math.Abs(d.Cost-(4-w.hit)) > 1e-9 {
			t.Fatalf("route %d: decision %+v, want worker %d with depths %+v and %v hit blocks",
				i, d, w.worker, w.depths, w.hit)
		}
		// The chosen worker leaves: the next one is the next best.
		s.mustDo("DELETE", fmt.Sprintf("/workers/%d", d.WorkerID), nil, http.StatusNoContent)
	}
}

func TestUnknownMediumTierFromOptions(t *testing.T) {
	o := testOptions()
	o.unknownMedium = "Host"
	s := startServer(t, o)
	prompt := []uint32{1, 2, 3, 4, 5, 6, 7, 8}
	s.mustDo("POST", "/events", onMedium(storedFromTokens(t, 1, prompt), "NVME_POOL"), http.StatusOK)
	if d := s.route(routeRequest{TokenIDs: prompt}); d.TierDepths != (TierDepths{0, 2, 2, 2}) {
		t.Fatalf("decision %+v: want the unknown medium in host memory", d)
	}
}

func TestCustomTierWeights(t *testing.T) {
	o := testOptions()
	o.tierWeights = tierWeights{1, 1, 0, 0} // host as good as the device, disk worthless
	o.loadWeight = 0
	s := startServer(t, o)
	prompt := []uint32{1, 2, 3, 4, 5, 6, 7, 8}
	s.mustDo("POST", "/events", []kvEvent{
		onMedium(storedFromTokens(t, 1, prompt), "DISK"),
		onMedium(storedFromTokens(t, 2, prompt[:4]), "cpu"),
	}, http.StatusOK)
	// Worker 1's two disk blocks are worth nothing, worker 2's host block a full one.
	if d := s.route(routeRequest{TokenIDs: prompt}); d.WorkerID != 2 || d.HitBlocks != 1 || d.Cost != 1 {
		t.Fatalf("decision %+v: want worker 2", d)
	}
}

func TestBadMediumOrTierIs400(t *testing.T) {
	s := startServer(t, testOptions())
	good := `{"worker_id": 1, "stored": {"parent_hash": null, "blocks": [{"block_hash": 7, "tokens_hash": 8}]}`
	for _, c := range []struct{ body, want string }{
		{good + `, "medium": 5}`, "medium: expected a string"},
		{good + `, "medium": ""}`, `medium "": want a name of 1 to 64`},
		{good + `, "medium": "G P U"}`, `medium "G P U": want letters, digits`},
		{good + `, "medium": "` + strings.Repeat("X", 65) + `"}`, "want a name of 1 to 64"},
		{good + `, "tier": "fast"}`, `tier "fast": want device, host, disk, external or all`},
		{good + `, "tier": 1}`, "tier: expected a string"},
		{good + `, "tier": "all"}`, `tier "all" is for removed and cleared events only`},
		{good + `, "tier": "host", "medium": "CPU"}`, "give medium or tier, not both"},
		{`[` + good + `}, ` + good + `, "medium": ""}]`, "event 1: worker 1 event 0: medium"},
	} {
		s.wantError("POST", "/events", c.body, http.StatusBadRequest, c.want)
	}
	// Nothing of the refused requests was applied or registered.
	s.wantError("POST", "/route", `{"local_hashes": [8]}`, http.StatusServiceUnavailable, "no worker known yet")
	// The same events with valid names are accepted; a removal or clear may name every tier.
	s.mustDo("POST", "/events", "["+good+`, "medium": "cpu"}, `+
		`{"worker_id": 1, "event_id": 1, "tier": "All", "removed": {"block_hashes": [7]}},`+
		`{"worker_id": 1, "event_id": 2, "medium": "GPU", "cleared": {}}]`, http.StatusOK)
}

func TestTierFlags(t *testing.T) {
	fs := flag.NewFlagSet("go-router", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o := defaultOptions()
	fs.Var(tierWeightsFlag{&o.tierWeights}, "tier-weights", "")
	if got := fs.Lookup("tier-weights").DefValue; got != "1,0.8,0.5,0.2" {
		t.Fatalf("default -tier-weights %q", got)
	}
	if err := fs.Parse([]string{"-tier-weights", " 1, 0.9,0.9 ,0"}); err != nil || o.tierWeights != (tierWeights{1, 0.9, 0.9, 0}) {
		t.Fatalf("-tier-weights: %v, %v", o.tierWeights, err)
	}
	for _, bad := range []string{"", "1,0.8,0.5", "1,0.8,0.5,0.2,0", "1,0.8,0.9,0.2", "1.5,1,1,1",
		"1,0.8,0.5,-0.2", "a,b,c,d", "NaN,0,0,0", "1,,0,0", "Inf,1,1,1"} {
		before := o.tierWeights
		if err := fs.Parse([]string{"-tier-weights=" + bad}); err == nil {
			t.Errorf("-tier-weights %q accepted: %v", bad, o.tierWeights)
		}
		if o.tierWeights != before {
			t.Errorf("-tier-weights %q changed the weights to %v", bad, o.tierWeights)
		}
	}
	for _, c := range []struct {
		name string
		ok   bool
	}{{"external", true}, {"device", true}, {"HOST", true}, {"disk", true}, {"all", false}, {"gpu", false}, {"", false}} {
		o := defaultOptions()
		o.unknownMedium = c.name
		srv, ix, err := newServer(o)
		if (err == nil) != c.ok {
			t.Errorf("-unknown-medium %q: %v", c.name, err)
		}
		if err == nil {
			_ = ix.Close()
			_ = srv.Close()
		}
	}
	o = defaultOptions()
	o.tierWeights = tierWeights{0.5, 1, 0, 0}
	if _, _, err := newServer(o); err == nil {
		t.Error("increasing tier weights accepted")
	}
	ix, err := kvidx.New(kvidx.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if _, err := NewTieredRouter(ix, 1, [kvidx.NumTiers]float64{1, 0.5, 0.6, 0}, DefaultLimits()); err == nil {
		t.Error("NewTieredRouter accepted increasing weights")
	}
}
