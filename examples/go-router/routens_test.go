package main

import (
	"fmt"
	"net/http"
	"testing"

	kvidx "github.com/kvidx/kvidx/bindings/go"
)

// storedUnder builds a stored event for a worker caching tokens under a namespace and
// multimodal spans, with local hashes as an engine feed would index them.
func storedUnder(t *testing.T, worker uint64, tokens []uint32, ns kvidx.Namespace, spans []kvidx.MultimodalSpan) kvEvent {
	t.Helper()
	local, err := kvidx.HashRequest(tokens, 4, ns, spans)
	if err != nil {
		t.Fatal(err)
	}
	st := &storedData{}
	for i, h := range local {
		st.Blocks = append(st.Blocks, storedBlock{BlockHash: 1000*worker + uint64(i), TokensHash: h})
	}
	return kvEvent{WorkerID: worker, Stored: st}
}

// POST /route hashes token_ids under lora_name, cache_salt and mm_spans: a request reaches
// the worker holding its tenant's, adapter's and image's blocks to their depth, and another
// salt, adapter or image reaches nothing past the first block that differs.
func TestRouteUnderANamespaceAndMultimodalSpans(t *testing.T) {
	s := startServer(t, testOptions())
	prompt := []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	ns := kvidx.Namespace{LoRAName: []byte("lora-l"), CacheSalt: []byte("salt-a")}
	img := []kvidx.MultimodalSpan{{Identifier: []byte("image-i"), Start: 5, End: 8}}
	s.mustDo("POST", "/events", []kvEvent{
		storedUnder(t, 1, prompt, ns, img),
		storedFromTokens(t, 2, prompt), // the same tokens, unsalted, no image
	}, http.StatusOK)
	spanI := []mmSpan{{Identifier: "image-i", Start: 5, End: 8}}
	spanJ := []mmSpan{{Identifier: "image-j", Start: 5, End: 8}}
	for _, c := range []struct {
		name          string
		req           routeRequest
		worker        uint64
		overlapBlocks uint32
	}{
		{"same namespace and image", routeRequest{LoRAName: "lora-l", CacheSalt: "salt-a", MMSpans: spanI}, 1, 3},
		{"plain tokens", routeRequest{}, 2, 3},
		{"another salt", routeRequest{LoRAName: "lora-l", CacheSalt: "salt-b", MMSpans: spanI}, 1, 0},
		{"another adapter", routeRequest{LoRAName: "lora-m", CacheSalt: "salt-a", MMSpans: spanI}, 1, 0},
		{"another image", routeRequest{LoRAName: "lora-l", CacheSalt: "salt-a", MMSpans: spanJ}, 1, 1},
	} {
		c.req.TokenIDs = prompt
		d := s.route(c.req)
		if d.OverlapBlocks != c.overlapBlocks || (c.overlapBlocks > 0 && d.WorkerID != c.worker) {
			t.Errorf("%s: decision %+v, want overlap %d (on worker %d)", c.name, d, c.overlapBlocks, c.worker)
		}
		s.mustDo("DELETE", fmt.Sprintf("/requests/%d", d.RequestID), nil, http.StatusNoContent)
	}
	for _, c := range []struct{ body, want string }{
		{`{"local_hashes": [1], "cache_salt": "a"}`, "go with token_ids"},
		{`{"token_ids": [1, 2, 3, 4], "mm_spans": [{"identifier": "", "start": 0, "end": 1}]}`, "identifier is empty"},
		{`{"token_ids": [1, 2, 3, 4], "mm_spans": [{"identifier": "i", "start": 2, "end": 2}]}`, "not above start"},
		{`{"token_ids": [1, 2, 3, 4], "mm_spans": [{"identifier": "i", "bogus": 1}]}`, `unknown field "bogus"`},
	} {
		s.wantError("POST", "/route", c.body, http.StatusBadRequest, c.want)
	}
}
