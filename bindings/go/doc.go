// Package kvidx is the Go binding of kvidx, a global and exact index of the KV-cache blocks held
// by LLM inference workers. A router feeds it the KV events its engines publish (blocks stored,
// removed, cleared) and asks, for each incoming request, which workers already hold the longest
// prefix of the request's blocks.
//
// The binding wraps the library's C ABI (header kvidx.h, ABI version 1) with one foreign call
// per operation. It has two interchangeable back ends with the same API and tests:
//
//   - cgo (the default when CGO_ENABLED=1): links libkvidx dynamically through pkg-config
//     (PKG_CONFIG_PATH=PREFIX/lib/pkgconfig), or statically with the build tag kvidx_static
//     (libkvidx.a; the binary then needs no libkvidx.so at run time).
//   - purego (selected automatically when CGO_ENABLED=0): loads libkvidx.so at run time with
//     github.com/ebitengine/purego. The library is found through the KVIDX_LIBRARY_PATH
//     environment variable (a file path) or else the dynamic loader's usual search
//     (LD_LIBRARY_PATH, the loader cache) for libkvidx.so.0 and libkvidx.so.
//
// Hot path: [Indexer.FindMatchesInto] appends into a caller's slice and allocates nothing on
// the cgo back end, and may be called from any number of goroutines at once, also while events
// are applied.
//
// Engine events: [Indexer.ApplyEngineBatch] takes the msgpack KVEventBatch payload that
// vLLM, SGLang or TensorRT-LLM publish over ZMQ ([EngineFormat]) and decodes and applies it in
// the library; bytes that are not a batch fail with [ErrMalformed] and change nothing. An
// [EngineFeed] also tracks each publisher's 8-byte big-endian batch sequence, reports gaps and
// restarts ([SeqStatus]) and by default clears the worker before applying such a batch
// ([FeedFlags] change that).
//
// Errors returned by the library are [*StatusError] values that wrap a [Status]; test them with
// errors.Is against the sentinels ([ErrParentNotFound], [ErrInvalidArgument], [ErrMalformed],
// ...). Calls on a closed [Indexer] or [EngineFeed] return [ErrClosed].
//
// Events whose blocks live in Go memory cannot be handed to C as they are (an array of C event
// structs pointing at Go slices is a Go pointer to Go pointers). The binding copies the blocks
// and names of one call into two reusable arenas, pins those arenas with a [runtime.Pinner]
// for the duration of the call and points the C events into them: one pin per arena per call,
// no C allocation, and (on the cgo back end) no Go allocation in steady state.
package kvidx
