package main

import (
	"fmt"
	"io"
	"strings"

	kvidx "github.com/kvidx/kvidx/bindings/go"
)

// hashCheckOptions turn on the engine feeds' hash check in --nats mode (-hash-check,
// -hash-seed; the check recomputes with -block-size): each feed whose engine one of the
// algorithms belongs to recomputes the engines' block hashes and counts, per publisher, the
// blocks that match, mismatch and cannot be recomputed (GET /metrics).
type hashCheckOptions struct {
	// algorithms maps each wire format to the algorithm its engines hash with (absent: off).
	algorithms map[kvidx.EngineFormat]kvidx.HashAlgorithm
	// seed is vLLM's NONE_HASH seed (the engines' PYTHONHASHSEED, or vllm-none-hash).
	seed string
	// blockSize is the router's block size (0: each store's own).
	blockSize uint32
}

// hashCheckFlag parses -hash-check: a comma-separated list of vllm-sha256-cbor,
// vllm-xxhash-cbor (vLLM and TensorRT-LLM feeds) and sglang-sha256 (SGLang feeds).
type hashCheckFlag struct{ o *hashCheckOptions }

func (f hashCheckFlag) String() string {
	if f.o == nil {
		return ""
	}
	var names []string
	for _, name := range []string{"vllm-sha256-cbor", "vllm-xxhash-cbor", "sglang-sha256"} {
		alg, formats := hashAlgorithmNamed(name)
		if got, ok := f.o.algorithms[formats[0]]; ok && got == alg {
			names = append(names, name)
		}
	}
	return strings.Join(names, ",")
}

func (f hashCheckFlag) Set(value string) error {
	f.o.algorithms = map[kvidx.EngineFormat]kvidx.HashAlgorithm{}
	for _, name := range strings.Split(value, ",") {
		alg, formats := hashAlgorithmNamed(strings.TrimSpace(name))
		if formats == nil {
			return fmt.Errorf("unknown hash algorithm %q (vllm-sha256-cbor, vllm-xxhash-cbor, sglang-sha256)", name)
		}
		for _, format := range formats {
			if _, dup := f.o.algorithms[format]; dup {
				return fmt.Errorf("two hash algorithms for the same engine in %q", value)
			}
			f.o.algorithms[format] = alg
		}
	}
	return nil
}

// hashAlgorithmNamed returns the algorithm of a -hash-check name and the wire formats of the
// engines that use it (nil: unknown name).
func hashAlgorithmNamed(name string) (kvidx.HashAlgorithm, []kvidx.EngineFormat) {
	switch name {
	case "vllm-sha256-cbor":
		return kvidx.HashVllmSha256Cbor, []kvidx.EngineFormat{kvidx.EngineVLLM, kvidx.EngineTRTLLM}
	case "vllm-xxhash-cbor":
		return kvidx.HashVllmXxhashCbor, []kvidx.EngineFormat{kvidx.EngineVLLM, kvidx.EngineTRTLLM}
	case "sglang-sha256":
		return kvidx.HashSglangSha256, []kvidx.EngineFormat{kvidx.EngineSGLang}
	}
	return 0, nil
}

// configure turns the check on in a new feed of format, if an algorithm was given for it.
func (o hashCheckOptions) configure(fd *kvidx.EngineFeed, format kvidx.EngineFormat) error {
	alg, ok := o.algorithms[format]
	if !ok {
		return nil
	}
	return fd.SetHashCheck(alg, o.seed, o.blockSize)
}

// writeHashCheckMetrics prints each publisher's hash check counts (publishers whose feed
// has no check are left out).
func (a *streamApplier) writeHashCheckMetrics(w io.Writer) {
	pubs := a.publishers()
	a.mu.Lock()
	defer a.mu.Unlock()
	const name = "kvidx_hash_check_blocks_total"
	header := false
	for _, p := range pubs {
		fd, ok := a.feeds[p.format]
		if !ok {
			continue
		}
		s, err := fd.HashCheckStats(p.key.ID, p.key.DpRank)
		if err != nil {
			continue // no check on this feed
		}
		if !header {
			fmt.Fprintf(w, "# HELP %s Stored blocks the engine feed's hash check recomputed, by outcome: matched, mismatched (the engine hashes with another algorithm, seed or block size than -hash-check, -hash-seed and -block-size say), unverifiable.\n# TYPE %s counter\n", name, name)
			header = true
		}
		for _, c := range []struct {
			outcome string
			n       uint64
		}{{"matched", s.Matched}, {"mismatched", s.Mismatched}, {"unverifiable", s.Unverifiable}} {
			fmt.Fprintf(w, "%s{worker_id=\"%d\",dp_rank=\"%d\",outcome=\"%s\"} %d\n", name, p.key.ID, p.key.DpRank, c.outcome, c.n)
		}
	}
}
