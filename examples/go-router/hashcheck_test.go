package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	kvidx "github.com/kvidx/kvidx/bindings/go"
	"github.com/nats-io/nats.go"
)

// hashCheckMsg is stream message seq carrying batch i of tests/fixtures/hash_check's
// vllm_sha256_cbor_default scenario (made by vLLM 0.33.0's own block hasher) for worker 3.
func hashCheckMsg(t *testing.T, seq uint64, i int) streamMsg {
	t.Helper()
	path := filepath.Join("..", "..", "tests", "fixtures", "hash_check", "vllm_sha256_cbor_default_"+strconv.Itoa(i)+".msgpack")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h := nats.Header{}
	h.Set(hdrWorkerID, "3")
	h.Set(hdrDpRank, "0")
	h.Set(hdrFormat, "vllm")
	return streamMsg{seq: seq, subject: "kvidx.events.3.0", header: h, data: data}
}

func hashCheckMetrics(t *testing.T, check string, blockSize uint32, batches int) string {
	t.Helper()
	o := defaultNATSOptions().hashCheck
	if check != "" {
		if err := (hashCheckFlag{&o}).Set(check); err != nil {
			t.Fatal(err)
		}
	}
	o.blockSize = blockSize
	ix, err := kvidx.New(kvidx.Config{EventThreads: 0})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ix.Close() })
	a := newStreamApplier(ix, nil)
	a.hashCheck = o
	for i := 0; i < batches; i++ {
		if err := a.handleMsg(hashCheckMsg(t, uint64(i+1), i)); err != nil {
			t.Fatal(err)
		}
	}
	var out strings.Builder
	a.writeHashCheckMetrics(&out)
	return out.String()
}

func sample(outcome string, n int) string {
	return fmt.Sprintf("kvidx_hash_check_blocks_total{worker_id=\"3\",dp_rank=\"0\",outcome=\"%s\"} %d\n", outcome, n)
}

func TestHashCheckMetricsCountThePublishersBlocks(t *testing.T) {
	m := hashCheckMetrics(t, "vllm-sha256-cbor,sglang-sha256", 16, 4)
	for _, want := range []string{sample("matched", 16), sample("mismatched", 0), sample("unverifiable", 4)} {
		if !strings.Contains(m, want) {
			t.Fatalf("metrics lack %q:\n%s", want, m)
		}
	}
	// A router whose -block-size is not the engines': every block of the first batch.
	m = hashCheckMetrics(t, "vllm-sha256-cbor", 32, 1)
	if !strings.Contains(m, sample("mismatched", 5)) || !strings.Contains(m, sample("matched", 0)) {
		t.Fatalf("block size 32:\n%s", m)
	}
	// Without -hash-check there is nothing to report.
	if m = hashCheckMetrics(t, "", 16, 1); m != "" {
		t.Fatalf("without -hash-check:\n%s", m)
	}
}

func TestHashCheckFlag(t *testing.T) {
	o := hashCheckOptions{}
	if err := (hashCheckFlag{&o}).Set("vllm-xxhash-cbor,sglang-sha256"); err != nil {
		t.Fatal(err)
	}
	if o.algorithms[kvidx.EngineTRTLLM] != kvidx.HashVllmXxhashCbor || o.algorithms[kvidx.EngineSGLang] != kvidx.HashSglangSha256 {
		t.Fatalf("algorithms %v", o.algorithms)
	}
	if got := (hashCheckFlag{&o}).String(); got != "vllm-xxhash-cbor,sglang-sha256" {
		t.Fatalf("String() %q", got)
	}
	for _, bad := range []string{"sha256", "vllm-sha256-cbor,vllm-xxhash-cbor", ""} {
		if err := (hashCheckFlag{&hashCheckOptions{}}).Set(bad); err == nil {
			t.Fatalf("%q accepted", bad)
		}
	}
}
