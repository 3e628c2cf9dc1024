package kvidx

import (
	"fmt"
	"runtime"
	"strconv"
	"structs"
	"unsafe"
)

// HashAlgorithm names how an engine hashes its blocks, for [EngineFeed.SetHashCheck] (the C
// enum kvidx_hash_algorithm).
type HashAlgorithm uint32

const (
	// HashVllmSha256Cbor is vLLM's --prefix-caching-hash-algo sha256_cbor.
	HashVllmSha256Cbor HashAlgorithm = 0
	// HashVllmXxhashCbor is vLLM's --prefix-caching-hash-algo xxhash_cbor.
	HashVllmXxhashCbor HashAlgorithm = 1
	// HashSglangSha256 is SGLang 0.5.23's per-page SHA-256 chain.
	HashSglangSha256 HashAlgorithm = 2
)

// String names the algorithm as go-router's -hash-check flag does: "vllm-sha256-cbor",
// "vllm-xxhash-cbor", "sglang-sha256", or HashAlgorithm(N) for another value.
func (a HashAlgorithm) String() string {
	switch a {
	case HashVllmSha256Cbor:
		return "vllm-sha256-cbor"
	case HashVllmXxhashCbor:
		return "vllm-xxhash-cbor"
	case HashSglangSha256:
		return "sglang-sha256"
	default:
		return "HashAlgorithm(" + strconv.FormatUint(uint64(a), 10) + ")"
	}
}

// VllmDefaultSeed is the seed vLLM 0.33 derives NONE_HASH from for the sha256 algorithms
// when PYTHONHASHSEED is unset.
const VllmDefaultSeed = "vllm-none-hash"

// HashCheckStats counts the blocks an [EngineFeed]'s hash check looked at, by outcome. Its
// layout is that of the C struct kvidx_hash_check_stats.
type HashCheckStats struct {
	_ structs.HostLayout
	// Matched counts blocks whose published name the check reproduced.
	Matched uint64
	// Mismatched counts blocks whose published name differs from the one recomputed (the
	// engine hashes with another algorithm, seed or block size than the check was given).
	Mismatched uint64
	// Unverifiable counts blocks the check could not recompute (no tokens, a parent it never
	// saw, a LoRA adapter, lookahead tokens).
	Unverifiable uint64
}

// String prints the counts by name.
func (s HashCheckStats) String() string { return fieldsString(s) }

// bytesOf returns a pointer to s's bytes (nil when empty) for a C (pointer, length) pair;
// the caller keeps s alive across the call.
func bytesOf(s string) *byte {
	if s == "" {
		return nil
	}
	return unsafe.StringData(s)
}

// feedCall runs fn on the feed's handle under the read lock, after the closed and
// library-feature checks.
func (f *EngineFeed) feedCall(op string, has func() bool, missing string, fn func(feedHandle) Status) error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.h == nilFeed {
		return closedError(op)
	}
	if !has() {
		return &opError{op: op, err: fmt.Errorf("%w: the library has no %s", ErrLibraryUnavailable, missing)}
	}
	return check(op, fn(f.h))
}

const noHashCheck = "hash check (KVIDX_HAS_HASH_CHECK)"

// SetHashCheck turns the feed's hash check on (it is off by default), replacing any earlier
// check and its counts: every store is recomputed with algorithm and compared with the
// engine's published names. seed is vLLM's NONE_HASH seed: the engine's PYTHONHASHSEED, or
// [VllmDefaultSeed] for the sha256 algorithms when it is unset (SGLang ignores it);
// blockSize is the router's block size (0: each store's own). The check changes nothing in
// what the feed indexes. An unknown algorithm fails with [ErrInvalidArgument].
func (f *EngineFeed) SetHashCheck(algorithm HashAlgorithm, seed string, blockSize uint32) error {
	err := f.feedCall("EngineFeed.SetHashCheck", libHasHashCheck, noHashCheck, func(h feedHandle) Status {
		return libFeedSetHashCheck(h, uint32(algorithm), bytesOf(seed), len(seed), blockSize)
	})
	runtime.KeepAlive(seed)
	return err
}

// ClearHashCheck turns the feed's hash check off and drops its state and counts.
func (f *EngineFeed) ClearHashCheck() error {
	return f.feedCall("EngineFeed.ClearHashCheck", libHasHashCheck, noHashCheck, libFeedClearHashCheck)
}

// HashCheckStats returns the hash check's counts for the publisher (workerID, dpRank), zeros
// for one it saw no store of; with the check off it fails with [ErrInvalidArgument].
func (f *EngineFeed) HashCheckStats(workerID uint64, dpRank uint32) (HashCheckStats, error) {
	var s HashCheckStats
	err := f.feedCall("EngineFeed.HashCheckStats", libHasHashCheck, noHashCheck, func(h feedHandle) Status {
		return libFeedHashCheckStats(h, workerID, dpRank, &s)
	})
	return s, err
}

// HashCheckTotals returns the hash check's counts summed over every publisher (those
// forgotten or removed through the feed included); with the check off it fails with
// [ErrInvalidArgument].
func (f *EngineFeed) HashCheckTotals() (HashCheckStats, error) {
	var s HashCheckStats
	err := f.feedCall("EngineFeed.HashCheckTotals", libHasHashCheck, noHashCheck, func(h feedHandle) Status {
		return libFeedHashCheckTotals(h, &s)
	})
	return s, err
}

const noLlmdKeys = "llm-d keys (KVIDX_HAS_LLMD_KEYS)"

// SetLlmdKeys makes the feed index stores under llm-d's request keys (see [LlmdRequestKeys])
// with llm-d's hash seed and the model name (a store with a LoRA adapter roots at the
// adapter's name) instead of kvidx's local hashes. A store those keys cannot express (a cache
// salt, multimodal items, prompt embeddings, lookahead tokens) or whose parent the feed never
// saw is skipped and counted unhashable. Set it before the feed's first batch.
func (f *EngineFeed) SetLlmdKeys(seed, model string) error {
	err := f.feedCall("EngineFeed.SetLlmdKeys", libHasLlmdKeys, noLlmdKeys, func(h feedHandle) Status {
		return libFeedSetLlmdKeys(h, bytesOf(seed), len(seed), bytesOf(model), len(model))
	})
	runtime.KeepAlive(seed)
	runtime.KeepAlive(model)
	return err
}

// LlmdRequestKeys returns llm-d's request keys of each full block of blockSize tokens, as
// llm-d's token processor computes them: FNV-64a over the canonical CBOR of [parent, block
// tokens, nil], chained from the root key FNV-64a(CBOR [FNV-64a(seed), nil, model]). seed is
// llm-d's HashSeed (its default is ""), model the model or LoRA adapter name. A trailing
// partial block is ignored; blockSize 0 fails with [ErrInvalidArgument]. Query an index fed
// by a feed set with [EngineFeed.SetLlmdKeys] with these keys.
func LlmdRequestKeys(tokens []uint32, blockSize uint32, seed, model string) ([]uint64, error) {
	const op = "LlmdRequestKeys"
	if err := load(); err != nil {
		return nil, err
	}
	if !libHasLlmdKeys() {
		return nil, &opError{op: op, err: fmt.Errorf("%w: the library has no %s", ErrLibraryUnavailable, noLlmdKeys)}
	}
	if blockSize == 0 {
		return nil, check(op, StatusInvalidArgument)
	}
	out := make([]uint64, len(tokens)/int(blockSize)+1) // +1: never pass a zero-length buffer
	var t *uint32
	if len(tokens) > 0 {
		t = &tokens[0]
	}
	st, got := libLlmdRequestKeys(t, len(tokens), blockSize, bytesOf(seed), len(seed),
		bytesOf(model), len(model), &out[0], len(out))
	runtime.KeepAlive(tokens)
	runtime.KeepAlive(seed)
	runtime.KeepAlive(model)
	if err := check(op, st); err != nil {
		return nil, err
	}
	return out[:got], nil
}
