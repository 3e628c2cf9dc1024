package kvidx

import (
	"errors"
	"slices"
	"testing"
)

// TestHashRequestGolden checks the golden values of docs/contract.md section 3.1.
func TestHashRequestGolden(t *testing.T) {
	tokens := []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	image := []MultimodalSpan{{Identifier: []byte("image-1"), Start: 2, End: 6}}
	salt := Namespace{CacheSalt: []byte("tenant-a")}
	lora := Namespace{LoRAName: []byte("adapter-a")}
	both := Namespace{LoRAName: []byte("adapter-a"), CacheSalt: []byte("tenant-a")}
	cases := []struct {
		ns    Namespace
		spans []MultimodalSpan
		want  []uint64
	}{
		{Namespace{}, nil, goldenLocal},
		{salt, nil, []uint64{1461199381953589153, 16777012769546811212, 483935686894639516}},
		{lora, nil, []uint64{11381080598872079209, 5698110331184095209, 10923852707342720619}},
		{Namespace{}, image, []uint64{1978177322621556195, 10355098053434598600, 483935686894639516}},
		{both, image, []uint64{7859937575092783861, 15422904220237451310, 10923852707342720619}},
	}
	for _, c := range cases {
		got, err := HashRequest(tokens, 4, c.ns, c.spans)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("HashRequest(%q, %q, %v) = %v, %v; want %v", c.ns.LoRAName, c.ns.CacheSalt, c.spans, got, err, c.want)
		}
	}
	if got, err := HashRequest(tokens[:3], 4, salt, image); err != nil || len(got) != 0 {
		t.Errorf("partial block: %v, %v", got, err)
	}
	if _, err := HashRequest(tokens, 0, salt, nil); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("block size 0: %v", err)
	}
}

// TestHashRequestReachesItsOwnNamespaceOnly stores a salted, LoRA, multimodal chain and
// queries it with the same and with another salt, adapter and image.
func TestHashRequestReachesItsOwnNamespaceOnly(t *testing.T) {
	ix := mustNew(t, Config{Backend: BackendPositional})
	tokens := make([]uint32, 16)
	for i := range tokens {
		tokens[i] = uint32(i + 1)
	}
	ns := Namespace{LoRAName: []byte("lora-l"), CacheSalt: []byte("salt-a")}
	img := []MultimodalSpan{{Identifier: []byte("image-i"), Start: 5, End: 9}}
	local, err := HashRequest(tokens, 4, ns, img)
	if err != nil {
		t.Fatal(err)
	}
	mustApply(t, ix, StoredEvent(1, 0, 1, chain(local, 100)))
	depth := func(ns Namespace, spans []MultimodalSpan) uint32 {
		q, err := HashRequest(tokens, 4, ns, spans)
		if err != nil {
			t.Fatal(err)
		}
		m, err := ix.FindMatches(q)
		if err != nil || len(m) > 1 {
			t.Fatalf("FindMatches: %v, %v", m, err)
		}
		if len(m) == 0 {
			return 0
		}
		return m[0].Depth
	}
	otherImg := []MultimodalSpan{{Identifier: []byte("image-j"), Start: 5, End: 9}}
	for _, c := range []struct {
		name  string
		ns    Namespace
		spans []MultimodalSpan
		want  uint32
	}{
		{"same", ns, img, 4},
		{"another salt", Namespace{LoRAName: ns.LoRAName, CacheSalt: []byte("salt-b")}, img, 0},
		{"another LoRA", Namespace{LoRAName: []byte("lora-m"), CacheSalt: ns.CacheSalt}, img, 0},
		{"another image", ns, otherImg, 1}, // the image starts in block 1
		{"no namespace", Namespace{}, img, 0},
	} {
		if got := depth(c.ns, c.spans); got != c.want {
			t.Errorf("%s: depth %d, want %d", c.name, got, c.want)
		}
	}
}

func TestFeedSkipExtrasExcludesHashTokensOnly(t *testing.T) {
	mustFeed(t, EngineVLLM, FeedSkipExtras)
	_, err := NewEngineFeed(EngineVLLM, FeedSkipExtras|FeedHashTokensOnly)
	if !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("FeedSkipExtras|FeedHashTokensOnly: %v", err)
	}
}
