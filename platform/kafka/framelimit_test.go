package kafka

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"runtime"
	"testing"
	"time"
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
	publish(t, e.Brokers(), toKafka(t, envelope("collection-after", 0, 1)))
	c := consumeInBackground(t, e.Brokers(), "after-http", nil)
	c.waitFor(t, "the event published after the HTTP request", func() bool { return len(c.handled()) >= 1 })
}
