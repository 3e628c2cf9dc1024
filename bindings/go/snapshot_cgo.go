//go:build cgo

package kvidx

/*
#include <stddef.h>
#include <stdint.h>
*/
import "C"

import "unsafe"

// kvidxGoSnapshotSink is the C sink of kvidx_snapshot_write (through kvidx_go_sink): it hands
// the chunk (C memory, valid during the call) to the Go stream registered under id.
//
//export kvidxGoSnapshotSink
func kvidxGoSnapshotSink(id C.uintptr_t, data *C.uint8_t, n C.size_t) C.int32_t {
	var b []byte
	if n > 0 {
		b = unsafe.Slice((*byte)(unsafe.Pointer(data)), int(n))
	}
	return C.int32_t(snapshotSink(uintptr(id), b))
}

// kvidxGoSnapshotSource is the C source of kvidx_snapshot_restore (through kvidx_go_source):
// it fills buf (C memory) from the Go stream registered under id.
//
//export kvidxGoSnapshotSource
func kvidxGoSnapshotSource(id C.uintptr_t, buf *C.uint8_t, capacity C.size_t, got *C.size_t) C.int32_t {
	var b []byte
	if capacity > 0 {
		b = unsafe.Slice((*byte)(unsafe.Pointer(buf)), int(capacity))
	}
	n, st := snapshotSource(uintptr(id), b)
	*got = C.size_t(n)
	return C.int32_t(st)
}
