package zmqfeed

import (
	"strings"
	"testing"
)

func TestParseSource(t *testing.T) {
	good := []struct {
		in   string
		want Source
	}{
		{"tcp://10.0.0.7:5557=7", Source{Endpoint: "tcp://10.0.0.7:5557", WorkerID: 7}},
		{"tcp://10.0.0.7:5558=7:1", Source{Endpoint: "tcp://10.0.0.7:5558", WorkerID: 7, DpRank: 1}},
		{"tcp://10.0.0.7:5558=7:1,replay=tcp://10.0.0.7:5568",
			Source{Endpoint: "tcp://10.0.0.7:5558", Replay: "tcp://10.0.0.7:5568", WorkerID: 7, DpRank: 1}},
		{"tcp://[::1]:5557=18446744073709551615:4294967295",
			Source{Endpoint: "tcp://[::1]:5557", WorkerID: 1<<64 - 1, DpRank: 1<<32 - 1}},
		{"ipc:///tmp/kv.sock=3,replay=ipc:///tmp/kv-replay.sock",
			Source{Endpoint: "ipc:///tmp/kv.sock", Replay: "ipc:///tmp/kv-replay.sock", WorkerID: 3}},
	}
	for _, c := range good {
		got, err := ParseSource(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseSource(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
			continue
		}
		if again, err := ParseSource(got.String()); err != nil || again != got {
			t.Errorf("ParseSource(%q.String() = %q) = %+v, %v", c.in, got.String(), again, err)
		}
	}
	bad := map[string]string{
		"tcp://10.0.0.7:5557":              "expected URL=WORKER",
		"tcp://10.0.0.7:5557=":             "worker id",
		"tcp://10.0.0.7:5557=x":            "worker id",
		"tcp://10.0.0.7:5557=-1":           "worker id",
		"tcp://10.0.0.7:5557=7:":           "dp rank",
		"tcp://10.0.0.7:5557=7:4294967296": "dp rank",
		"tcp://10.0.0.7=7":                 "want tcp://HOST:PORT",
		"tcp://*:5557=7":                   "want tcp://HOST:PORT",
		"tcp://h:0=7":                      "port",
		"tcp://h:70000=7":                  "port",
		"udp://h:5557=7":                   "want tcp://HOST:PORT or ipc://PATH",
		"h:5557=7":                         "want tcp://HOST:PORT or ipc://PATH",
		"tcp://h:5557=7,":                  "unknown option",
		"tcp://h:5557=7,replay":            "replay: endpoint",
		"tcp://h:5557=7,hwm=5":             "unknown option",
		"tcp://h:5557=7,replay=tcp://h:1,replay=tcp://h:2": "replay given twice",
		"tcp://h:5557=7,replay=h:5567":                     "replay: endpoint",
	}
	for in, want := range bad {
		_, err := ParseSource(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSource(%q) = %v; want an error containing %q", in, err, want)
		}
	}
}
