package zmqfeed

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// replayEndSeq is the sequence of the replay socket's end marker (0xFF x 8).
const replayEndSeq = ^uint64(0)

// replayed is one batch from the replay socket.
type replayed struct {
	seq     uint64
	payload []byte
}

// replayLimits bound one replay reply.
type replayLimits struct {
	maxBatches int
	maxBytes   uint64
	timeout    time.Duration
}

// errReplay marks a reply that is not one (a wrong frame count or sequence frame).
var errReplay = errors.New("not a replay reply")

// fetch asks the DEALER connection d for every buffered batch from start on and returns them
// in the order received, once the end marker came. The reply may start later than asked (the
// engine's buffer no longer holds start) or lack batches: the caller looks at the sequences.
// It fails, keeping nothing, when the reply exceeds a limit, does not end within the timeout
// or holds a message that is not a replay reply; the caller then drops d (the rest of the
// reply may still come).
func fetch(d *conn, start uint64, lim replayLimits) ([]replayed, error) {
	if err := d.raw.SetDeadline(time.Now().Add(lim.timeout)); err != nil {
		return nil, err
	}
	if err := d.send([]byte{}, binary.BigEndian.AppendUint64(nil, start)); err != nil {
		return nil, fmt.Errorf("replay request: %w", err)
	}
	var out []replayed
	var bytes uint64
	for {
		frames, err := d.recv()
		if err != nil {
			return nil, fmt.Errorf("replay from %d: %w", start, err)
		}
		for _, f := range frames {
			bytes += uint64(len(f))
		}
		if bytes > lim.maxBytes {
			return nil, fmt.Errorf("replay from %d: reply larger than %d bytes", start, lim.maxBytes)
		}
		seq, payload, err := replyBatch(frames)
		if err != nil {
			return nil, fmt.Errorf("replay from %d: %w", start, err)
		}
		if seq == replayEndSeq {
			return out, nil
		}
		if len(out) == lim.maxBatches {
			return nil, fmt.Errorf("replay from %d: more than %d batches", start, lim.maxBatches)
		}
		out = append(out, replayed{seq: seq, payload: payload})
	}
}

// replyBatch reads one reply message: ["", topic, seq, payload] (vLLM >= 0.26, SGLang) or
// ["", seq, payload] (older vLLM); the empty delimiter frame may be absent.
func replyBatch(frames [][]byte) (uint64, []byte, error) {
	if len(frames) > 0 && len(frames[0]) == 0 {
		frames = frames[1:]
	}
	var seq, payload []byte
	switch len(frames) {
	case 3:
		seq, payload = frames[1], frames[2]
	case 2:
		seq, payload = frames[0], frames[1]
	default:
		return 0, nil, fmt.Errorf("%w: %d frames", errReplay, len(frames))
	}
	if len(seq) != 8 {
		return 0, nil, fmt.Errorf("%w: a sequence frame of %d bytes", errReplay, len(seq))
	}
	return binary.BigEndian.Uint64(seq), payload, nil
}
