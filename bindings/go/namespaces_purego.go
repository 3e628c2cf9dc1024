//go:build !cgo

package kvidx

import (
	"unsafe"

	"github.com/ebitengine/purego"
)

// libHasNamespaces says whether the loaded library has kvidx_hash_request
// (KVIDX_HAS_NAMESPACES).
func libHasNamespaces() bool { return lib.hashRequest != 0 }

func libHashRequest(t *uint32, n int, bs uint32, ns, spans unsafe.Pointer, numSpans int, out *uint64,
	outCap int) (Status, int) {
	cell := new(lenCell)
	st := status(purego.SyscallN(lib.hashRequest, uintptr(unsafe.Pointer(t)), uintptr(n), uintptr(bs),
		uintptr(ns), uintptr(spans), uintptr(numSpans), uintptr(unsafe.Pointer(out)), uintptr(outCap),
		uintptr(unsafe.Pointer(&cell.n))))
	return st, int(cell.n)
}
