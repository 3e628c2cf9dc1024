package zmqfeed

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
)

// ErrMessageTooLarge is returned (wrapped) when a peer announces a frame that would make its
// message larger than [Options.MaxMessageBytes]; the connection is then dropped.
var ErrMessageTooLarge = errors.New("zmqfeed: message larger than the limit")

// greetingLen is the size of a ZMTP 3 greeting, which precedes the frames.
const greetingLen = 64

// ZMTP frame flags.
const (
	flagMore = 0x01
	flagLong = 0x02
)

// guardedConn reads a ZMTP stream through a parser of its frame headers, so that a frame
// whose announced size would take its message (all its frames, headers included) above
// limit fails the read that completes its header: the ZMTP library, which allocates a
// frame's announced size before reading it, never sees that header.
type guardedConn struct {
	net.Conn
	limit uint64

	greeting int     // greeting bytes still to pass
	header   [9]byte // the frame header being read
	have     int     // bytes of header read
	body     uint64  // body bytes of the current frame still to pass
	message  uint64  // bytes of the current message so far
	err      error   // the first limit error, returned by every later read
}

func newGuardedConn(c net.Conn, limit uint64) *guardedConn {
	return &guardedConn{Conn: c, limit: limit, greeting: greetingLen}
}

// Read reads from the connection and checks every frame header the bytes complete.
func (g *guardedConn) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	n, err := g.Conn.Read(p)
	if checkErr := g.scan(p[:n]); checkErr != nil {
		g.err = checkErr
		return 0, checkErr
	}
	return n, err
}

// scan advances the parser over b.
func (g *guardedConn) scan(b []byte) error {
	for len(b) > 0 {
		switch {
		case g.greeting > 0:
			k := min(g.greeting, len(b))
			g.greeting -= k
			b = b[k:]
		case g.body > 0:
			k := uint64(len(b))
			if k > g.body {
				k = g.body
			}
			g.body -= k
			b = b[k:]
		default:
			g.header[g.have] = b[0]
			g.have++
			b = b[1:]
			want := 2
			if g.header[0]&flagLong != 0 {
				want = 9
			}
			if g.have < want {
				continue
			}
			size := uint64(g.header[1])
			if want == 9 {
				size = binary.BigEndian.Uint64(g.header[1:9])
			}
			g.have = 0
			if size > g.limit || g.message+uint64(want)+size > g.limit {
				return fmt.Errorf("%w: a frame of %d bytes after %d bytes of its message (limit %d)",
					ErrMessageTooLarge, size, g.message, g.limit)
			}
			g.message += uint64(want) + size
			if g.header[0]&flagMore == 0 {
				g.message = 0
			}
			g.body = size
		}
	}
	return nil
}
