package kafka

import (
	"encoding/binary"
	"fmt"
	"net"
)

// maxRequestBytes is the largest request the embedded broker accepts, its
// socket.request.max.bytes: one record batch of maxMessageBytes (the most a produce request of
// the relay's writer carries, NewWriter's BatchBytes) and room for the request's headers.
const maxRequestBytes = maxMessageBytes + 1<<20

// frameLimitListener hands out connections that refuse a Kafka request frame longer than max.
// kfake allocates the body a frame's 4-byte size prefix announces before it reads a byte of it,
// so anything else that talks to the broker's port (an HTTP probe's "GET " reads as 1.19 GB, a
// port scanner, a confused client) would otherwise make the whole service allocate gigabytes.
// A real broker closes such a connection (socket.request.max.bytes); so does this one.
type frameLimitListener struct {
	net.Listener
	max uint32
}

func (l frameLimitListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &frameLimitConn{Conn: conn, max: l.max}, nil
}

// frameLimitConn follows the request frames read from the client: the 4-byte size prefix,
// then that many bytes of body. It reads each prefix whole before handing any of it out, and
// closes the connection instead when the size exceeds max.
type frameLimitConn struct {
	net.Conn
	max    uint32
	prefix [4]byte
	read   int    // bytes of prefix read from the connection
	given  int    // bytes of prefix handed to the reader
	body   uint32 // bytes of the current frame's body not yet handed to the reader
}

// errFrameTooLarge is what the broker's reader sees for an oversized frame; kfake then drops
// the connection.
type errFrameTooLarge struct{ size, max uint32 }

func (e errFrameTooLarge) Error() string {
	return fmt.Sprintf("kafka request of %d bytes exceeds the embedded broker's limit of %d", e.size, e.max)
}

func (c *frameLimitConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if c.given == len(c.prefix) && c.body == 0 {
		c.read, c.given = 0, 0 // the previous frame is done; the next begins with its prefix
	}
	if c.given < len(c.prefix) {
		for c.read < len(c.prefix) {
			n, err := c.Conn.Read(c.prefix[c.read:])
			c.read += n
			if err != nil && c.read < len(c.prefix) {
				return 0, err
			}
		}
		if c.given == 0 {
			size := binary.BigEndian.Uint32(c.prefix[:])
			if size > c.max {
				_ = c.Conn.Close()
				return 0, errFrameTooLarge{size: size, max: c.max}
			}
			c.body = size
		}
		n := copy(p, c.prefix[c.given:])
		c.given += n
		return n, nil
	}
	if uint32(len(p)) > c.body {
		p = p[:c.body]
	}
	n, err := c.Conn.Read(p)
	c.body -= uint32(n)
	return n, err
}
