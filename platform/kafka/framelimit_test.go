package kafka

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/semaphore"
)

// chunkConn serves src a few bytes per Read, as a TCP connection may.
type chunkConn struct {
	net.Conn
	src    *bytes.Reader
	chunk  int
	closed bool
}

func (c *chunkConn) Read(p []byte) (int, error) {
	if len(p) > c.chunk {
		p = p[:c.chunk]
	}
	return c.src.Read(p)
}

func (c *chunkConn) Close() error { c.closed = true; return nil }

// SetReadDeadline is a no-op: the stream is all there.
func (c *chunkConn) SetReadDeadline(time.Time) error { return nil }

func frame(body string) []byte {
	out := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	return append(out, body...)
}

// readFrames reads the stream the way kfake does: a 4-byte size, then the body.
func readFrames(r io.Reader) ([]string, error) {
	var out []string
	size := make([]byte, 4)
	for {
		if _, err := io.ReadFull(r, size); err != nil {
			return out, err
		}
		body := make([]byte, binary.BigEndian.Uint32(size))
		if _, err := io.ReadFull(r, body); err != nil {
			return out, err
		}
		out = append(out, string(body))
	}
}

func TestFrameLimitPassesFramesWithinTheLimit(t *testing.T) {
	stream := append(append(append(frame("first request"), frame("")...), frame("x")...), frame("0123456789")...)
	for _, chunk := range []int{1, 3, 4, 5, 64} {
		conn := &chunkConn{src: bytes.NewReader(stream), chunk: chunk}
		got, err := readFrames(&frameLimitConn{Conn: conn, max: 13})
		if !errors.Is(err, io.EOF) {
			t.Fatalf("chunks of %d: ended with %v, want EOF", chunk, err)
		}
		want := []string{"first request", "", "x", "0123456789"}
		if len(got) != len(want) {
			t.Fatalf("chunks of %d: read %q, want %q", chunk, got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("chunks of %d: frame %d is %q, want %q", chunk, i, got[i], want[i])
			}
		}
		if conn.closed {
			t.Fatalf("chunks of %d: a connection within the limit was closed", chunk)
		}
	}
}

func TestFrameLimitClosesOnAnOversizedFrame(t *testing.T) {
	stream := append(frame("ok"), frame("eleven byte")...)
	conn := &chunkConn{src: bytes.NewReader(stream), chunk: 2}
	got, err := readFrames(&frameLimitConn{Conn: conn, max: 10})
	var tooLarge errFrameTooLarge
	if !errors.As(err, &tooLarge) || tooLarge.size != 11 || tooLarge.max != 10 {
		t.Fatalf("ended with %v, want errFrameTooLarge{11, 10}", err)
	}
	if len(got) != 1 || got[0] != "ok" {
		t.Fatalf("read %q before the oversized frame, want [ok]", got)
	}
	if !conn.closed {
		t.Fatal("the connection of an oversized frame was left open")
	}
}

// TestEmbeddedDropsNonKafkaTraffic speaks HTTP to the broker's port: "GET " read as a size
// would have kfake allocate 1.19 GB. The connection is closed instead, without a big
// allocation, and the broker goes on serving Kafka clients.
func TestEmbeddedDropsNonKafkaTraffic(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	conn, err := net.Dial("tcp", e.Brokers()[0])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if n, err := conn.Read(make([]byte, 1)); err == nil {
		t.Fatalf("the broker answered %d bytes of an HTTP request instead of closing", n)
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the broker kept the connection of an HTTP request open")
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grown := after.TotalAlloc - before.TotalAlloc; grown > maxRequestBytes {
		t.Fatalf("the broker allocated %d bytes for an HTTP request (limit %d)", grown, maxRequestBytes)
	}
	publish(t, e.Conn(), toKafka(t, envelope("collection-after", 0, 1)))
	c := consumeInBackground(t, e.Conn(), "after-http", nil)
	c.waitFor(t, "the event published after the HTTP request", func() bool { return len(c.handled()) >= 1 })
}

// scriptListener hands out what its script says, then reports itself closed.
type scriptListener struct {
	mu     sync.Mutex
	script []any // net.Conn or error
}

func (l *scriptListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.script) == 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: net.ErrClosed}
	}
	next := l.script[0]
	l.script = l.script[1:]
	if err, ok := next.(error); ok {
		return nil, err
	}
	return next.(net.Conn), nil
}

func (l *scriptListener) Close() error   { return nil }
func (l *scriptListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

func testListener(ln net.Listener) (*frameLimitListener, *[]time.Duration) {
	l := newFrameLimitListener(ln, slog.New(slog.DiscardHandler))
	slept := &[]time.Duration{}
	l.sleep = func(d time.Duration) { *slept = append(*slept, d) }
	return l, slept
}

func pipe(t *testing.T) (server, client net.Conn) {
	server, client = net.Pipe()
	t.Cleanup(func() { server.Close(); client.Close() })
	return server, client
}

// TestFrameLimitAcceptRetriesFailedAccepts: kfake stops accepting for good at the first error
// its listener returns, so a moment without file descriptors (20000 idle connections to any
// port of the process did it) used to end the broker while the rest of the service went on.
func TestFrameLimitAcceptRetriesFailedAccepts(t *testing.T) {
	server, _ := pipe(t)
	emfile := &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	l, slept := testListener(&scriptListener{script: []any{emfile, emfile, syscall.ECONNABORTED, server}})
	conn, err := l.Accept()
	if err != nil {
		t.Fatalf("Accept after transient errors: %v, want the connection", err)
	}
	if fc, ok := conn.(*frameLimitConn); !ok || fc.Conn != server {
		t.Fatalf("Accept returned %v, want the scripted connection", conn)
	}
	if want := []time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond}; !slices.Equal(*slept, want) {
		t.Fatalf("backoff %v, want %v", *slept, want)
	}
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept of a closed listener: %v, want net.ErrClosed", err)
	}
}

func TestFrameLimitClosesConnectionsBeyondTheCap(t *testing.T) {
	a, _ := pipe(t)
	b, _ := pipe(t)
	c, cPeer := pipe(t)
	d, _ := pipe(t)
	l, _ := testListener(&scriptListener{script: []any{a, b, c}})
	l.maxConns = 2
	first, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Accept(); err != nil {
		t.Fatal(err)
	}
	// The third is closed as it is accepted; Accept goes on to the next, here the end.
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept beyond the cap: %v, want the listener's end", err)
	}
	if _, err := cPeer.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("the connection beyond the cap reads %v, want EOF (closed)", err)
	}
	// A closed connection frees its place, once however often it is closed.
	first.Close()
	first.Close()
	l.Listener = &scriptListener{script: []any{d}}
	if conn, err := l.Accept(); err != nil || conn.(*frameLimitConn).Conn != d {
		t.Fatalf("Accept after a close: %v, %v; want the next connection", conn, err)
	}
	if got := l.open.Load(); got != 2 {
		t.Fatalf("%d connections counted open, want 2", got)
	}
}

// TestFrameLimitBudgetBoundsLargeFramesInFlight: before, each connection could make kfake
// hold a body of up to 17 MiB (40 connections sending 17 MiB - 2 bytes each: +680 MB RSS).
func TestFrameLimitBudgetBoundsLargeFramesInFlight(t *testing.T) {
	const size = largeFrameBytes + 1
	l, _ := testListener(nil)
	l.budget = semaphore.NewWeighted(size + size/2) // room for one large frame
	l.wait = 50 * time.Millisecond
	conn := func(script ...[]byte) *frameLimitConn {
		server, client := pipe(t)
		go func() {
			for _, b := range script {
				if _, err := client.Write(b); err != nil {
					return
				}
			}
		}()
		return &frameLimitConn{Conn: server, max: l.max, listener: l}
	}
	prefix := binary.BigEndian.AppendUint32(nil, size)
	body := bytes.Repeat([]byte{'x'}, size)

	first := conn(prefix, body[:10]) // announces a large frame and sends a little of it
	buf := make([]byte, 4)
	if _, err := io.ReadFull(first, buf); err != nil {
		t.Fatalf("the first large frame: %v", err)
	}
	second := conn(prefix)
	if _, err := io.ReadFull(second, buf); !errors.Is(err, errBrokerBusy) {
		t.Fatalf("a large frame beyond the budget: %v, want errBrokerBusy", err)
	}
	// Small frames never wait for the budget.
	small := conn(frame("small"))
	if got, err := readFrames(io.LimitReader(small, 9)); err != io.EOF || len(got) != 1 || got[0] != "small" {
		t.Fatalf("a small frame while the budget is spent: %q, %v", got, err)
	}
	// A connection closed in the middle of a large frame gives its budget back.
	if _, err := io.ReadFull(first, make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	first.Close()
	third := conn(prefix, body)
	got := make([]byte, 4+size)
	if _, err := io.ReadFull(third, got); err != nil {
		t.Fatalf("a large frame once the budget is free: %v", err)
	}
	// So does a frame whose body has been read whole, with its connection still open.
	if !l.budget.TryAcquire(size + size/2) {
		t.Fatal("the budget was not given back whole once the frame was read")
	}
}

// TestFrameLimitBodyMustArriveInTime: a client that announces a frame and sends its body
// slowly (or never) holds the frame's budget only until the body deadline.
func TestFrameLimitBodyMustArriveInTime(t *testing.T) {
	l, _ := testListener(nil)
	l.body = 50 * time.Millisecond
	server, client := pipe(t)
	go func() { _, _ = client.Write(append(binary.BigEndian.AppendUint32(nil, 10), "abc"...)) }()
	c := &frameLimitConn{Conn: server, max: l.max, listener: l}
	start := time.Now()
	_, err := readFrames(c)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("a body that never completes: %v, want a timeout", err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("waited %v for the body", waited)
	}
}

// request is a frame whose body begins with a request header of apiKey.
func request(apiKey uint16) []byte {
	return frame(string(binary.BigEndian.AppendUint16(nil, apiKey)) + "\x00\x00rest of the request")
}

// TestFrameLimitClosesConnectionsThatDoNotAuthenticate: the broker requires SASL, and kfake
// serves nothing but ApiVersions and the SASL exchange to a connection that has not
// authenticated. A connection that never gets past them (a client without the credential, or
// one that opens connections and sends nothing) is dropped after the auth timeout instead of
// holding one of the broker's connections for the idle timeout; one that has sent another
// request (so authenticated: kfake drops it otherwise) is held to the idle timeout only.
func TestFrameLimitClosesConnectionsThatDoNotAuthenticate(t *testing.T) {
	const auth = 100 * time.Millisecond
	serve := func(t *testing.T, stream []byte, idle time.Duration) (frames int, err error) {
		l, _ := testListener(&scriptListener{})
		l.auth, l.idle = auth, idle
		server, client := pipe(t)
		l.Listener = &scriptListener{script: []any{server}}
		c, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		go func() { _, _ = client.Write(stream) }()
		type result struct {
			n   int
			err error
		}
		done := make(chan result, 1)
		go func() {
			got, err := readFrames(c)
			done <- result{len(got), err}
		}()
		select {
		case r := <-done:
			return r.n, r.err
		case <-time.After(5 * auth):
			return -1, nil // still open
		}
	}
	timedOut := func(err error) bool {
		var ne net.Error
		return errors.As(err, &ne) && ne.Timeout()
	}

	if n, err := serve(t, nil, time.Minute); !timedOut(err) {
		t.Fatalf("a connection that sends nothing: %d frames, %v; want a timeout after %s", n, err, auth)
	}
	sasl := append(append(request(apiKeyAPIVersions), request(apiKeySASLHandshake)...), request(apiKeySASLAuthenticate)...)
	if n, err := serve(t, sasl, time.Minute); n != 3 || !timedOut(err) {
		t.Fatalf("a connection that stops after the SASL exchange: %d frames, %v; want 3 and a timeout", n, err)
	}
	// Metadata (3) after the exchange: the connection is past authentication and may idle.
	if n, err := serve(t, append(sasl, request(3)...), time.Minute); n != -1 {
		t.Fatalf("an authenticated connection was closed before its idle timeout: %d frames, %v", n, err)
	}
	// Its API key split across reads counts too.
	l, _ := testListener(&scriptListener{})
	l.auth, l.idle = auth, time.Minute
	c := &frameLimitConn{Conn: &chunkConn{src: bytes.NewReader(append(sasl, request(3)...)), chunk: 1}, max: l.max, listener: l,
		authBy: time.Now().Add(auth)}
	if got, err := readFrames(c); len(got) != 4 || !errors.Is(err, io.EOF) || !c.authBy.IsZero() {
		t.Fatalf("read a byte at a time: %d frames, %v, authBy %v; want 4, EOF and the connection authenticated", len(got), err, c.authBy)
	}
}
