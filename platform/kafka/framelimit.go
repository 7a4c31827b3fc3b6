package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
)

// maxRequestBytes is the largest request the embedded broker accepts, its
// socket.request.max.bytes: one record batch of maxMessageBytes (the most a produce request of
// the relay's writer carries, NewWriter's BatchBytes) and room for the request's headers.
const maxRequestBytes = maxMessageBytes + 1<<20

// Bounds of the embedded broker's port. kfake itself has none: it accepts every connection,
// allocates whatever body a frame announces, waits for it forever, and stops accepting for
// good at the first failed Accept. The service's own clients hold a few dozen connections and
// send whole frames at once; anything else on the port (a port scanner, a confused client, a
// local attacker) must not be able to take the process's memory or file descriptors, nor to
// end the broker.
const (
	// brokerMaxConnections is how many connections the broker holds at once; more are closed
	// as they are accepted, so that they cannot use up the process's file descriptors (the
	// service's own clients hold about 35; this stays well inside the 1,024 descriptors the
	// listeners leave to the stores and the broker, cmd/samla's fdReserve).
	brokerMaxConnections = 256
	// largeFrameBytes: a frame whose body is larger takes its size from the broker's budget of
	// large frames in flight before its body is read (and allocated by kfake).
	largeFrameBytes = 64 << 10
	// largeFrameBudget bounds the bytes of large frame bodies being received at once, across
	// connections: without it every connection could hold a body of maxRequestBytes.
	largeFrameBudget = 2 * maxRequestBytes
	// largeFrameWait is how long a large frame waits for room in the budget before its
	// connection is closed.
	largeFrameWait = 10 * time.Second
	// frameBodyTimeout is how long the body of a frame may take to arrive once its size is
	// read; a frame's budget is not held longer than this by a client that sends slowly.
	frameBodyTimeout = 30 * time.Second
	// brokerIdleTimeout closes a connection that starts no request for this long, as a real
	// broker's connections.max.idle.ms (10 minutes by default); clients reconnect.
	brokerIdleTimeout = 10 * time.Minute
	// brokerAuthTimeout closes a connection that has not sent a request other than ApiVersions,
	// SaslHandshake and SaslAuthenticate this long after it was accepted. kfake answers any
	// other request only on an authenticated connection and drops the connection otherwise, so
	// a connection past that point has authenticated; one that has not would otherwise keep
	// one of the brokerMaxConnections for brokerIdleTimeout, and 256 of them, from any local
	// process and without the credential, would leave samla's own clients none. Those send
	// their first request right after authenticating.
	brokerAuthTimeout = 10 * time.Second
)

// The API keys a connection may send before it has authenticated (kfake's handleSASL).
const (
	apiKeySASLHandshake    = 17
	apiKeyAPIVersions      = 18
	apiKeySASLAuthenticate = 36
)

// frameLimitListener hands out connections that refuse a Kafka request frame longer than max.
// kfake allocates the body a frame's 4-byte size prefix announces before it reads a byte of it,
// so anything else that talks to the broker's port (an HTTP probe's "GET " reads as 1.19 GB, a
// port scanner, a confused client) would otherwise make the whole service allocate gigabytes.
// A real broker closes such a connection (socket.request.max.bytes); so does this one.
//
// It also bounds what many connections can do together (see the constants above): the
// connections held at once, the bytes of large frames received at once, how long a frame's
// body and an idle connection may take, and how long a connection may go without
// authenticating (the broker requires SASL). And it retries a failed Accept (too many open files,
// an aborted connection) instead of returning the error: kfake's accept loop ends at the first
// error, and the broker would listen no more for the rest of the process's life.
type frameLimitListener struct {
	net.Listener
	max      uint32
	maxConns int64               // 0: no bound
	budget   *semaphore.Weighted // nil: no budget
	wait     time.Duration       // for budget room
	body     time.Duration       // 0: no deadline
	idle     time.Duration       // 0: no deadline
	auth     time.Duration       // 0: no deadline
	open     atomic.Int64        // connections handed out and not closed
	logger   *slog.Logger        // never nil
	lastLog  atomic.Int64        // unix nanos of the last refused-connection warning
	sleep    func(time.Duration) // time.Sleep; tests replace it
}

func newFrameLimitListener(ln net.Listener, logger *slog.Logger) *frameLimitListener {
	if logger == nil {
		logger = slog.Default()
	}
	return &frameLimitListener{Listener: ln, max: maxRequestBytes, maxConns: brokerMaxConnections,
		budget: semaphore.NewWeighted(largeFrameBudget), wait: largeFrameWait,
		body: frameBodyTimeout, idle: brokerIdleTimeout, auth: brokerAuthTimeout, logger: logger, sleep: time.Sleep}
}

// Accept returns the next connection within the bounds. It returns an error only once the
// listener is closed: any other error (EMFILE, ENFILE, ECONNABORTED, ...) is logged and
// retried with a backoff of up to a second, as net/http does.
func (l *frameLimitListener) Accept() (net.Conn, error) {
	var delay time.Duration
	for {
		conn, err := l.Listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil, err
			}
			delay = max(5*time.Millisecond, min(2*delay, time.Second))
			l.logger.Warn("embedded kafka: accept failed; retrying", "error", err, "retry_in", delay)
			l.sleep(delay)
			continue
		}
		delay = 0
		if l.maxConns > 0 && l.open.Add(1) > l.maxConns {
			l.open.Add(-1)
			_ = conn.Close()
			if now := time.Now().UnixNano(); now-l.lastLog.Load() > int64(time.Second) {
				l.lastLog.Store(now)
				l.logger.Warn("embedded kafka: too many connections; closing new ones",
					"max", l.maxConns, "remote", conn.RemoteAddr().String())
			}
			continue
		}
		c := &frameLimitConn{Conn: conn, max: l.max, listener: l}
		if l.auth > 0 {
			c.authBy = time.Now().Add(l.auth)
		}
		c.deadline(l.idle)
		return c, nil
	}
}

// frameLimitConn follows the request frames read from the client: the 4-byte size prefix,
// then that many bytes of body. It reads each prefix whole before handing any of it out, and
// closes the connection instead when the size exceeds max.
type frameLimitConn struct {
	net.Conn
	max      uint32
	listener *frameLimitListener // nil: no shared bounds (tests)
	prefix   [4]byte
	read     int    // bytes of prefix read from the connection
	given    int    // bytes of prefix handed to the reader
	body     uint32 // bytes of the current frame's body not yet handed to the reader
	frame    uint32 // the current frame's body size
	apiKey   [2]byte
	// authBy is when the connection must have sent a request other than ApiVersions and the
	// SASL ones (brokerAuthTimeout); zero once it has, or without the bound. Only the reader's
	// goroutine uses it (Read and the deadlines it sets).
	authBy time.Time

	mu     sync.Mutex
	held   int64 // bytes of the listener's budget this connection holds
	closed bool
	once   sync.Once
}

// errFrameTooLarge is what the broker's reader sees for an oversized frame; kfake then drops
// the connection.
type errFrameTooLarge struct{ size, max uint32 }

func (e errFrameTooLarge) Error() string {
	return fmt.Sprintf("kafka request of %d bytes exceeds the embedded broker's limit of %d", e.size, e.max)
}

// errBrokerBusy is what the broker's reader sees for a large frame that found no room in the
// budget in time.
var errBrokerBusy = errors.New("embedded kafka: too many large requests in flight")

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
				_ = c.Close()
				return 0, errFrameTooLarge{size: size, max: c.max}
			}
			if err := c.reserve(size); err != nil {
				_ = c.Close()
				return 0, err
			}
			c.body, c.frame = size, size
			if size > 0 && c.listener != nil {
				c.deadline(c.listener.body)
			}
		}
		n := copy(p, c.prefix[c.given:])
		c.given += n
		if c.given == len(c.prefix) && c.body == 0 {
			c.frameDone()
		}
		return n, nil
	}
	if uint32(len(p)) > c.body {
		p = p[:c.body]
	}
	off := c.frame - c.body
	n, err := c.Conn.Read(p)
	c.body -= uint32(n)
	if off < uint32(len(c.apiKey)) && !c.authBy.IsZero() {
		// The request header begins with its API key: one past the SASL exchange means the
		// connection authenticated (or kfake drops it for the request).
		copy(c.apiKey[off:], p[:n])
		if off+uint32(n) >= uint32(len(c.apiKey)) {
			switch binary.BigEndian.Uint16(c.apiKey[:]) {
			case apiKeySASLHandshake, apiKeyAPIVersions, apiKeySASLAuthenticate:
			default:
				c.authBy = time.Time{}
			}
		}
	}
	if c.body == 0 {
		c.frameDone()
	}
	return n, err
}

// reserve takes a large frame's size from the listener's budget, waiting up to its wait.
func (c *frameLimitConn) reserve(size uint32) error {
	l := c.listener
	if l == nil || l.budget == nil || size <= largeFrameBytes {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.wait)
	defer cancel()
	if err := l.budget.Acquire(ctx, int64(size)); err != nil {
		return errBrokerBusy
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		l.budget.Release(int64(size))
		return net.ErrClosed
	}
	c.held = int64(size)
	return nil
}

// frameDone gives back the frame's budget and lets the connection idle until its next frame.
func (c *frameLimitConn) frameDone() {
	c.release()
	if c.listener != nil {
		c.deadline(c.listener.idle)
	}
}

func (c *frameLimitConn) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held > 0 {
		c.listener.budget.Release(c.held)
		c.held = 0
	}
}

// deadline gives the connection d to read its next bytes (d <= 0: no bound), and no more than
// until authBy while it has not authenticated.
func (c *frameLimitConn) deadline(d time.Duration) {
	switch at := time.Now().Add(d); {
	case !c.authBy.IsZero() && (d <= 0 || c.authBy.Before(at)):
		_ = c.Conn.SetReadDeadline(c.authBy)
	case d > 0:
		_ = c.Conn.SetReadDeadline(at)
	}
}

// Close closes the connection once, giving back its budget and its place among the
// listener's connections.
func (c *frameLimitConn) Close() error {
	err := net.ErrClosed
	c.once.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		c.release()
		if c.listener != nil && c.listener.maxConns > 0 {
			c.listener.open.Add(-1)
		}
		err = c.Conn.Close()
	})
	return err
}
