package main

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// runBinary runs the router binary with args and returns its stdout, stderr and exit code. A
// binary that starts serving instead of exiting is killed after a minute (exit -1).
func runBinary(t *testing.T, bin string, args ...string) (stdout, stderr string, exit int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"-addr", "127.0.0.1:0"}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr):
		exit = exitErr.ExitCode()
	default:
		t.Fatalf("%s %v: %v", bin, args, err)
	}
	return out.String(), errOut.String(), exit
}

// The binary answers --help (and -h, -help) with its usage on stdout and exit status 0; a
// bad flag or argument gets the error and the usage on stderr, exit status 2.
func TestHelpOnStdout(t *testing.T) {
	bin := buildRouter(t, t.TempDir())
	for _, arg := range []string{"--help", "-help", "-h"} {
		stdout, stderr, exit := runBinary(t, bin, arg)
		if exit != 0 || stderr != "" || !strings.HasPrefix(stdout, "Usage: go-router") ||
			!strings.Contains(stdout, "-max-body") || !strings.Contains(stdout, "-nats") ||
			!strings.Contains(stdout, "-zmq URL=WORKER[:RANK][,replay=URL]") {
			t.Errorf("go-router %s: exit %d, stdout %q, stderr %q; want the usage on stdout, exit 0",
				arg, exit, stdout, stderr)
		}
	}
	for _, args := range [][]string{{"--no-such-flag"}, {"-block-size", "x"}, {"serve"},
		{"--zmq", "tcp://h:5557"}, {"--zmq-format", "tgi"},
		{"--zmq", "tcp://h:5557=7", "--nats", "nats://127.0.0.1:4222"}} {
		stdout, stderr, exit := runBinary(t, bin, args...)
		if exit != 2 || stdout != "" || !strings.Contains(stderr, "Usage: go-router") {
			t.Errorf("go-router %v: exit %d, stdout %q, stderr %q; want the usage on stderr, exit 2",
				args, exit, stdout, stderr)
		}
	}
}
