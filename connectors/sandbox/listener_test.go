package sandbox

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// dialSandbox starts a sandbox with opts and connects to it; both end with the test.
func dialSandbox(t *testing.T, opts ...Option) net.Conn {
	t.Helper()
	sb, err := Start(context.Background(), append([]Option{WithLatency(0, 0)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close() })
	conn, err := net.Dial("tcp", strings.TrimPrefix(sb.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// A keep-alive connection that starts no next request is closed after the idle timeout; it
// used to be held for the life of the process.
func TestListenerClosesIdleConnections(t *testing.T) {
	conn := dialSandbox(t, func(o *options) { o.idleTimeout = 100 * time.Millisecond })
	if _, err := conn.Write([]byte("GET /sandbox/companies HTTP/1.1\r\nHost: sandbox\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	// The answer, then EOF once the idle timeout has passed.
	_, err := io.ReadAll(conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the sandbox kept an idle keep-alive connection open")
	}
}

func TestListenerRefusesOversizeHeaders(t *testing.T) {
	conn := dialSandbox(t)
	req := "GET /sandbox/companies HTTP/1.1\r\nHost: sandbox\r\nX-Big: " + strings.Repeat("a", maxHeaderBytes+8192) + "\r\n\r\n"
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 12)
	if _, err := io.ReadFull(conn, got); err != nil || string(got) != "HTTP/1.1 431" {
		t.Fatalf("answer to a header of %d bytes: %q, %v; want 431", len(req), got, err)
	}
}

// The read timeout outlasts the login-result's wait for the user: net/http cancels a
// request's context once its connection's read deadline passes.
func TestListenerReadTimeoutOutlastsTheClientWait(t *testing.T) {
	for _, wait := range []time.Duration{DefaultClientWait, 5 * time.Minute} {
		sb, err := New(WithClientWait(wait))
		if err != nil {
			t.Fatal(err)
		}
		read, idle := sb.serverTimeouts()
		if read < defaultReadTimeout || read <= wait+DefaultLatencyMax+DefaultProductTimeout {
			t.Fatalf("client wait %v: read timeout %v", wait, read)
		}
		if idle != defaultIdleTimeout {
			t.Fatalf("idle timeout %v, want %v", idle, defaultIdleTimeout)
		}
	}
}
