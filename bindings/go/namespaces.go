package kvidx

import (
	"fmt"
	"runtime"
	"structs"
	"unsafe"
)

// Namespace is a request's namespace (docs/contract.md section 3.1): the LoRA adapter's name
// seeds every block, the cache salt folds into the first block. Empty fields mean none, so
// the zero Namespace hashes exactly like [HashTokens].
type Namespace struct {
	LoRAName  []byte
	CacheSalt []byte
}

// MultimodalSpan is a multimodal item of a request: its identifier (the engine's mm_hash)
// and the token span [Start, End) of its placeholder tokens. It folds into every block the
// span overlaps; a span with End <= Start overlaps none.
type MultimodalSpan struct {
	Identifier []byte
	Start, End uint64
}

// String formats the namespace as {LoRAName:"..." CacheSalt:"..."}.
func (ns Namespace) String() string {
	return fmt.Sprintf("{LoRAName:%q CacheSalt:%q}", ns.LoRAName, ns.CacheSalt)
}

// String formats the span as {Identifier:"..." Start:N End:N}.
func (s MultimodalSpan) String() string {
	return fmt.Sprintf("{Identifier:%q Start:%d End:%d}", s.Identifier, s.Start, s.End)
}

// cNamespace and cSpan have the layouts of kvidx_namespace and kvidx_mm_span.
type cNamespace struct {
	_            structs.HostLayout
	loraName     *byte
	loraNameLen  uintptr
	cacheSalt    *byte
	cacheSaltLen uintptr
}

type cSpan struct {
	_             structs.HostLayout
	identifier    *byte
	identifierLen uintptr
	start, end    uint64
}

// HashRequest returns the local hash of each full block of blockSize tokens of a request
// under its namespace and multimodal spans (docs/contract.md section 3.1): the hashes a
// router queries with to reach exactly the blocks engines stored for the same adapter, salt
// and inputs. With the zero Namespace and no spans it equals [HashTokens]. blockSize 0 fails
// with [ErrInvalidArgument]; a library without KVIDX_HAS_NAMESPACES with
// [ErrLibraryUnavailable].
func HashRequest(tokens []uint32, blockSize uint32, ns Namespace, spans []MultimodalSpan) ([]uint64, error) {
	const op = "HashRequest"
	if err := load(); err != nil {
		return nil, err
	}
	if !libHasNamespaces() {
		return nil, &opError{op: op, err: fmt.Errorf("%w: the library has no kvidx_hash_request (KVIDX_HAS_NAMESPACES)",
			ErrLibraryUnavailable)}
	}
	if blockSize == 0 {
		return nil, check(op, StatusInvalidArgument)
	}
	// The C structs point into Go memory: pin it for the call.
	var pins runtime.Pinner
	defer pins.Unpin()
	bytesOf := func(b []byte) (*byte, uintptr) {
		if len(b) == 0 {
			return nil, 0
		}
		pins.Pin(&b[0])
		return &b[0], uintptr(len(b))
	}
	var cns cNamespace
	cns.loraName, cns.loraNameLen = bytesOf(ns.LoRAName)
	cns.cacheSalt, cns.cacheSaltLen = bytesOf(ns.CacheSalt)
	cspans := make([]cSpan, len(spans)+1) // +1: never pass a zero-length array
	for i, s := range spans {
		cspans[i].identifier, cspans[i].identifierLen = bytesOf(s.Identifier)
		cspans[i].start, cspans[i].end = s.Start, s.End
	}
	pins.Pin(&cspans[0])
	pins.Pin(&cns)
	n := len(tokens) / int(blockSize)
	out := make([]uint64, n+1)
	var t *uint32
	if len(tokens) > 0 {
		t = &tokens[0]
	}
	st, got := libHashRequest(t, len(tokens), blockSize, unsafe.Pointer(&cns),
		unsafe.Pointer(&cspans[0]), len(spans), &out[0], len(out))
	runtime.KeepAlive(tokens)
	runtime.KeepAlive(spans)
	if err := check(op, st); err != nil {
		return nil, err
	}
	return out[:got], nil
}
