package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// rawConn is one keep-alive HTTP/1.1 connection of the load generator: it writes a request
// serialized beforehand and reads the answer's status code, skipping its headers and body, with
// no allocation per request (see load for why not net/http's client).
type rawConn struct {
	conn net.Conn
	br   *bufio.Reader
	stop func() bool // unregisters the close on the context's end
}

// dialRaw connects to addr; the connection is closed when ctx ends, which ends an exchange
// waiting on it.
func dialRaw(ctx context.Context, addr string) (*rawConn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return &rawConn{
		conn: conn,
		br:   bufio.NewReaderSize(conn, 16<<10),
		stop: context.AfterFunc(ctx, func() { conn.Close() }),
	}, nil
}

func (c *rawConn) Close() {
	c.stop()
	c.conn.Close()
}

var errMalformed = errors.New("malformed HTTP response")

// exchange sends req (a whole HTTP/1.1 request) and reads the answer through its body, within
// exchangeTimeout. keep tells whether the connection can carry another request.
func (c *rawConn) exchange(req []byte) (code int, keep bool, err error) {
	if err := c.conn.SetDeadline(time.Now().Add(exchangeTimeout)); err != nil {
		return 0, false, fmt.Errorf("set deadline: %w", err)
	}
	if _, err := c.conn.Write(req); err != nil {
		return 0, false, fmt.Errorf("write request: %w", err)
	}
	for {
		code, keep, err = c.readResponse()
		// An interim answer (100 Continue, 103 Early Hints) is followed by the final one.
		if err != nil || code < 100 || code >= 200 {
			return code, keep, err
		}
		if code == http.StatusSwitchingProtocols {
			return 0, false, fmt.Errorf("101 Switching Protocols: %w", errMalformed)
		}
	}
}

// exchangeTimeout bounds one request and its answer, as net/http's client's Timeout did: a
// request past it counts as an error.
const exchangeTimeout = 10 * time.Second

// readResponse reads one answer: status line, headers and body.
func (c *rawConn) readResponse() (code int, keep bool, err error) {
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		return 0, false, fmt.Errorf("read status line: %w", err)
	}
	// "HTTP/1.1 200 OK\r\n"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return 0, false, fmt.Errorf("status line %q: %w", line, errMalformed)
	}
	code, err = strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, false, fmt.Errorf("status line %q: %w", line, errMalformed)
	}
	keep = line[7] == '1' // HTTP/1.1 keeps the connection unless told otherwise
	length, chunked := int64(-1), false
	for {
		h, err := c.br.ReadSlice('\n')
		if err != nil {
			return 0, false, fmt.Errorf("read header: %w", err)
		}
		h = bytes.TrimRight(h, "\r\n")
		if len(h) == 0 {
			break
		}
		name, value, ok := bytes.Cut(h, []byte(":"))
		if !ok {
			return 0, false, fmt.Errorf("header %q: %w", h, errMalformed)
		}
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			value = bytes.TrimSpace(value)
			if length, err = strconv.ParseInt(string(value), 10, 64); err != nil || length < 0 {
				return 0, false, fmt.Errorf("Content-Length %q: %w", value, errMalformed)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			// The last coding frames the body: "gzip, chunked" is chunked.
			codings := bytes.Split(value, []byte(","))
			chunked = bytes.EqualFold(bytes.TrimSpace(codings[len(codings)-1]), []byte("chunked"))
		case bytes.EqualFold(name, []byte("Connection")):
			for _, token := range bytes.Split(value, []byte(",")) {
				switch token = bytes.TrimSpace(token); {
				case bytes.EqualFold(token, []byte("close")):
					keep = false
				case bytes.EqualFold(token, []byte("keep-alive")):
					keep = true
				}
			}
		}
	}
	switch {
	case code < 200 || code == http.StatusNoContent || code == http.StatusNotModified:
		return code, keep, nil
	case chunked:
		return code, keep, c.skipChunks()
	case length >= 0:
		if _, err := c.br.Discard(int(length)); err != nil {
			return 0, false, fmt.Errorf("read body: %w", err)
		}
		return code, keep, nil
	default: // the body runs to the connection's end
		if _, err := io.Copy(io.Discard, c.br); err != nil {
			return 0, false, fmt.Errorf("read body: %w", err)
		}
		return code, false, nil
	}
}

// skipChunks reads a chunked body and its trailers.
func (c *rawConn) skipChunks() error {
	for {
		line, err := c.br.ReadSlice('\n')
		if err != nil {
			return fmt.Errorf("read chunk size: %w", err)
		}
		hex, _, _ := bytes.Cut(bytes.TrimRight(line, "\r\n"), []byte(";"))
		size, err := strconv.ParseInt(string(bytes.TrimSpace(hex)), 16, 64)
		if err != nil || size < 0 {
			return fmt.Errorf("chunk size %q: %w", line, errMalformed)
		}
		if size == 0 {
			for { // trailers, up to the empty line
				t, err := c.br.ReadSlice('\n')
				if err != nil {
					return fmt.Errorf("read trailer: %w", err)
				}
				if len(bytes.TrimRight(t, "\r\n")) == 0 {
					return nil
				}
			}
		}
		if _, err := c.br.Discard(int(size)); err != nil {
			return fmt.Errorf("read chunk: %w", err)
		}
		if crlf, err := c.br.Peek(2); err != nil || crlf[0] != '\r' || crlf[1] != '\n' {
			return fmt.Errorf("end of chunk: %w", errors.Join(errMalformed, err))
		}
		_, _ = c.br.Discard(2)
	}
}
