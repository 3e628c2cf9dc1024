package zmqfeed

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Source is one engine publisher (one DP rank of one engine) and the worker its batches
// belong to.
type Source struct {
	// Endpoint is the engine's PUB endpoint: tcp://HOST:PORT or ipc://PATH.
	Endpoint string
	// Replay is the engine's ROUTER replay endpoint ("" for none).
	Replay string
	// WorkerID and DpRank are the worker the batches are applied to.
	WorkerID uint64
	DpRank   uint32
}

// String formats the source as [ParseSource] reads it.
func (s Source) String() string {
	out := fmt.Sprintf("%s=%d:%d", s.Endpoint, s.WorkerID, s.DpRank)
	if s.Replay != "" {
		out += ",replay=" + s.Replay
	}
	return out
}

// ParseSource reads URL=WORKER[:RANK][,replay=REPLAY_URL]: the PUB endpoint, the worker id,
// the DP rank (0 when left out) and the replay endpoint, for example
// tcp://10.0.0.7:5557=7:1,replay=tcp://10.0.0.7:5567. Endpoints are tcp://HOST:PORT or
// ipc://PATH.
func ParseSource(s string) (Source, error) {
	var out Source
	head, opts, hasOpts := strings.Cut(s, ",")
	url, who, ok := cutLast(head, "=")
	if !ok {
		return out, fmt.Errorf("%q: expected URL=WORKER[:RANK][,replay=URL]", s)
	}
	worker, rank, hasRank := strings.Cut(who, ":")
	id, err := strconv.ParseUint(worker, 10, 64)
	if err != nil {
		return out, fmt.Errorf("%q: worker id %q is not an integer in [0, 2^64)", s, worker)
	}
	out.WorkerID = id
	if hasRank {
		r, err := strconv.ParseUint(rank, 10, 32)
		if err != nil {
			return out, fmt.Errorf("%q: dp rank %q is not an integer in [0, 2^32)", s, rank)
		}
		out.DpRank = uint32(r)
	}
	if err := checkEndpoint(url); err != nil {
		return out, fmt.Errorf("%q: %w", s, err)
	}
	out.Endpoint = url
	if !hasOpts {
		return out, nil
	}
	for _, opt := range strings.Split(opts, ",") {
		key, value, _ := strings.Cut(opt, "=")
		switch {
		case key != "replay":
			return out, fmt.Errorf("%q: unknown option %q (want replay=URL)", s, opt)
		case out.Replay != "":
			return out, fmt.Errorf("%q: replay given twice", s)
		}
		if err := checkEndpoint(value); err != nil {
			return out, fmt.Errorf("%q: replay: %w", s, err)
		}
		out.Replay = value
	}
	return out, nil
}

// cutLast splits s around the last sep.
func cutLast(s, sep string) (before, after string, found bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// checkEndpoint accepts tcp://HOST:PORT (a numeric port above 0) and ipc://PATH.
func checkEndpoint(url string) error {
	switch {
	case strings.HasPrefix(url, "tcp://"):
		host, port, err := net.SplitHostPort(strings.TrimPrefix(url, "tcp://"))
		if err != nil || host == "" || host == "*" {
			return fmt.Errorf("endpoint %q: want tcp://HOST:PORT", url)
		}
		if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
			return fmt.Errorf("endpoint %q: port %q is not in [1, 65535]", url, port)
		}
		return nil
	case strings.HasPrefix(url, "ipc://") && len(url) > len("ipc://"):
		return nil
	default:
		return fmt.Errorf("endpoint %q: want tcp://HOST:PORT or ipc://PATH", url)
	}
}

// network returns the net.Dial network and address of a checked endpoint.
func network(url string) (string, string) {
	if rest, ok := strings.CutPrefix(url, "ipc://"); ok {
		return "unix", rest
	}
	return "tcp", strings.TrimPrefix(url, "tcp://")
}
