package zmqfeed

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/security/null"
)

// conn is one ZMTP connection (go-zeromq's) over a net.Conn this package dialed, closed when
// its context ends.
type conn struct {
	z    *zmq4.Conn
	raw  net.Conn
	stop func() bool // stops the close-on-cancel hook
}

// dial connects to endpoint as a socket of type typ and completes the ZMTP handshake, all
// within timeout; every message it then reads is bounded by maxMessage bytes. The connection
// is closed when ctx ends.
func dial(ctx context.Context, endpoint string, typ zmq4.SocketType, timeout time.Duration, maxMessage uint64) (*conn, error) {
	netw, addr := network(endpoint)
	d := net.Dialer{Timeout: timeout}
	raw, err := d.DialContext(ctx, netw, addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", endpoint, err)
	}
	stop := context.AfterFunc(ctx, func() { _ = raw.Close() })
	if err := raw.SetDeadline(time.Now().Add(timeout)); err != nil {
		stop()
		_ = raw.Close()
		return nil, fmt.Errorf("%s: %w", endpoint, err)
	}
	z, err := zmq4.Open(newGuardedConn(raw, maxMessage), null.Security(), typ, nil, false, nil)
	if err == nil {
		err = raw.SetDeadline(time.Time{})
	}
	if err != nil {
		stop()
		_ = raw.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%s: ZMTP handshake: %w", endpoint, err)
	}
	return &conn{z: z, raw: raw, stop: stop}, nil
}

// recv reads one message (its frames). A ZMTP command (a heartbeat) is answered by the
// library and skipped.
func (c *conn) recv() ([][]byte, error) {
	for {
		m, err := c.z.RecvMsg()
		if err != nil {
			return nil, err
		}
		if m.Type != zmq4.CmdMsg {
			return m.Frames, nil
		}
	}
}

// send writes one message.
func (c *conn) send(frames ...[]byte) error {
	return c.z.SendMsg(zmq4.NewMsgFrom(frames...))
}

// close closes the connection.
func (c *conn) close() {
	c.stop()
	_ = c.raw.Close()
}
