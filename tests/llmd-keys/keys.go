// Package llmdkeys is an independent implementation of llm-d's request keys, written from
// llm-d's description of its token processor: FNV-64a (hash/fnv) over the canonical CBOR
// (fxamacker/cbor's canonical mode) of [parent, token chunk, extra], the chain started from
// FNV-64a of the hash seed, the model or LoRA name as the root's extra. The project's own
// implementation (core/src/llmd.rs, through the C ABI and the bindings) is checked against
// the keys this one writes to tests/fixtures/llmd_keys.txt.
package llmdkeys

import (
	"hash/fnv"

	"github.com/fxamacker/cbor/v2"
)

var canonical, _ = cbor.CanonicalEncOptions().EncMode()

func fnv64a(b []byte) uint64 {
	h := fnv.New64a()
	_, _ = h.Write(b)
	return h.Sum64()
}

func hash(parent uint64, tokens []uint32, extra interface{}) uint64 {
	b, err := canonical.Marshal([]interface{}{parent, tokens, extra})
	if err != nil {
		panic(err)
	}
	return fnv64a(b)
}

// RequestKeys returns the keys of every full block of tokens.
func RequestKeys(tokens []uint32, blockSize int, seed, model string) []uint64 {
	parent := hash(fnv64a([]byte(seed)), nil, model)
	var keys []uint64
	for i := 0; i+blockSize <= len(tokens); i += blockSize {
		parent = hash(parent, tokens[i:i+blockSize], nil)
		keys = append(keys, parent)
	}
	return keys
}
