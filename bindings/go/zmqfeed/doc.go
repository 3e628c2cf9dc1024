// Package zmqfeed subscribes a kvidx index directly to engines' ZMQ KV-event publishers
// (vLLM, SGLang, TensorRT-LLM), with no bus in between: one [Subscriber] per publisher (one
// engine's DP rank) connects a SUB to its PUB endpoint, applies every batch through a
// [kvidx.EngineFeed], and fills gaps from the engine's replay socket.
//
// The wire is the engines': each PUB message is three frames, [topic, sequence (8 bytes,
// big-endian), payload (a msgpack KVEventBatch)]; the replay socket is a ROUTER that a DEALER
// asks with ["", start sequence (8 bytes)] and that answers one message per buffered batch
// from that sequence on, ["", topic, sequence, payload] (vLLM before 0.26: ["", sequence,
// payload]), then the end marker, a sequence of 0xFF x 8.
//
// Sequences and epochs. Every connection to the PUB begins an epoch, and so does a sequence
// going back within one (an engine restarted behind a proxy): the subscriber cannot tell a
// reconnection to the same engine process from a restarted engine, whose sequence began again
// at 0 and whose replay socket holds only its own batches. So at an epoch's first batch the
// worker's blocks are removed from the index and rebuilt from the epoch's batches: with a
// replay socket, every batch the engine still buffers before that first one (asked from 0),
// then the live ones. Within an epoch a sequence jump (the PUB dropped batches at its
// high-water mark) is asked from the replay socket from the first missing sequence. What the
// replay cannot give (no replay socket, a buffer that no longer holds the range, a failed
// replay) stays a gap, and the feed reacts to it as [kvidx.NewEngineFeed] with flags 0 does:
// it clears the worker, so the index under-reports the worker rather than keep blocks whose
// removal was lost.
//
// The ZMTP implementation is github.com/go-zeromq/zmq4 (pure Go: no libzmq, so a purego build
// with CGO_ENABLED=0 stays free of C), used one connection at a time on a net.Conn this
// package dials, bounds and closes itself: a connection attempt (TCP and handshake) is bounded
// by [Options.ConnectTimeout], a message by [Options.MaxMessageBytes] (checked on the frame
// headers before a frame is allocated), a replay reply by [Options.ReplayMaxBatches],
// [Options.ReplayMaxBytes] and [Options.ReplayTimeout], and cancelling the context of
// [Subscriber.Run] closes whatever connection is open, so Run returns promptly.
package zmqfeed
