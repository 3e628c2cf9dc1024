package main

import (
	"bufio"
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	kvidx "github.com/kvidx/kvidx/bindings/go"
)

func TestSnapshotNames(t *testing.T) {
	if got := snapName(42); got != "snap-00000000000000000042" {
		t.Fatalf("snapName(42) = %q", got)
	}
	for _, s := range []uint64{0, 1, 99, 1 << 40, ^uint64(0)} {
		if got, ok := parseSnapName(snapName(s)); !ok || got != s {
			t.Fatalf("parseSnapName(snapName(%d)) = %d, %v", s, got, ok)
		}
	}
	for _, bad := range []string{"", "snap-", "snap-42", "snap-0000000000000000004x", "snap-000000000000000000042",
		"snap-99999999999999999999", "SNAP-00000000000000000042", "x-00000000000000000042"} {
		if _, ok := parseSnapName(bad); ok {
			t.Errorf("parseSnapName(%q) accepted", bad)
		}
	}
	got := newestFirst([]string{snapName(9), "other", snapName(100), snapName(10), "snap-1"})
	want := []string{snapName(100), snapName(10), snapName(9)}
	if !slices.Equal(got, want) {
		t.Fatalf("newestFirst = %v, want %v", got, want)
	}
}

func TestSnapshotEnvelope(t *testing.T) {
	e := envelope{seq: 123456789, streamCreated: 1700000000123456789, publishers: []publisher{
		{key: workerKey{1, 0}, format: kvidx.EngineVLLM},
		{key: workerKey{^uint64(0), 7}, format: kvidx.EngineSGLang},
	}, feeds: []feedState{{format: kvidx.EngineVLLM, state: []byte("vllm state")}, {format: kvidx.EngineSGLang, state: []byte{}}}}
	var b bytes.Buffer
	if err := e.write(&b); err != nil {
		t.Fatal(err)
	}
	b.WriteString("LIBRARY")
	raw := b.Bytes()
	r := bufio.NewReader(bytes.NewReader(raw))
	got, err := readEnvelope(r)
	sameFeeds := slices.EqualFunc(got.feeds, e.feeds, func(a, b feedState) bool {
		return a.format == b.format && bytes.Equal(a.state, b.state)
	})
	if err != nil || got.seq != e.seq || got.streamCreated != e.streamCreated || !slices.Equal(got.publishers, e.publishers) || !sameFeeds {
		t.Fatalf("readEnvelope = %+v, %v; want %+v", got, err, e)
	}
	if rest, _ := r.ReadString(0); rest != "LIBRARY" {
		t.Fatalf("the library's part starts with %q", rest)
	}
	envLen := len(raw) - len("LIBRARY")
	// Every truncation and every single flipped byte of the envelope is refused.
	for n := range envLen {
		if _, err := readEnvelope(bufio.NewReader(bytes.NewReader(raw[:n]))); !errors.Is(err, errBadEnvelope) {
			t.Fatalf("truncated to %d bytes: %v", n, err)
		}
	}
	for i := range envLen {
		c := slices.Clone(raw)
		c[i] ^= 0x10
		if _, err := readEnvelope(bufio.NewReader(bytes.NewReader(c))); !errors.Is(err, errBadEnvelope) {
			t.Fatalf("byte %d flipped: %v", i, err)
		}
	}
}

func TestParseStreamHeaders(t *testing.T) {
	h := nats.Header{}
	h.Set(hdrWorkerID, "7")
	h.Set(hdrDpRank, "2")
	h.Set(hdrFormat, "sglang")
	h.Set(hdrEngineSeq, "258")
	h.Set(hdrEngineEpoch, "1700000000000001")
	got, err := parseHeaders("kvidx.events.7.2", h)
	if err != nil || got.key != (workerKey{7, 2}) || got.format != kvidx.EngineSGLang ||
		!bytes.Equal(got.seqFrame, []byte{0, 0, 0, 0, 0, 0, 1, 2}) || got.epoch == nil || *got.epoch != 1700000000000001 {
		t.Fatalf("parseHeaders = %+v %v", got, err)
	}
	h.Del(hdrEngineSeq)
	h.Del(hdrFormat)
	h.Del(hdrEngineEpoch)
	if got, err := parseHeaders("kvidx.events.7.2", h); err != nil || got.format != kvidx.EngineVLLM || got.seqFrame != nil || got.epoch != nil {
		t.Fatalf("without format, engine seq and epoch: %+v %v", got, err)
	}
	for _, c := range []struct{ subject, key, value, want string }{
		{"kvidx.events.7.3", "", "", "does not match"},
		{"kvidx.events.7.2", hdrWorkerID, "x", hdrWorkerID},
		{"kvidx.events.7.2", hdrDpRank, "4294967296", hdrDpRank},
		{"kvidx.events.7.2", hdrFormat, "tgi", "unknown format"},
		{"kvidx.events.7.2", hdrEngineSeq, "-1", hdrEngineSeq},
		{"kvidx.events.7.2", hdrEngineEpoch, "e1", hdrEngineEpoch},
	} {
		h2 := nats.Header{}
		for k, v := range h {
			h2[k] = v
		}
		if c.key != "" {
			h2.Set(c.key, c.value)
		}
		if _, err := parseHeaders(c.subject, h2); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s=%q: %v, want an error naming %q", c.subject, c.key, c.value, err, c.want)
		}
	}
}
