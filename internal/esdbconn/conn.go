// Package esdbconn is the connection to EventStoreDB (or KurrentDB) that Samla's adapters share
// (the event store, the key store): the official gRPC client, github.com/EventStore/
// EventStore-Client-Go/v4, with the workarounds a long-running service needs.
package esdbconn

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"

	esdbclient "github.com/EventStore/EventStore-Client-Go/v4/esdb"
)

// The library's client has two flaws a long-running service must work around:
//
//   - Every call first asks the client's connection goroutine for a connection, over an
//     unbuffered channel, ignoring the call's context. When that goroutine has to (re)discover
//     the node and the discovery fails, it closes the client for good and exits, and every
//     call queued behind the discovery waits forever.
//   - A closed client stays closed: all later calls fail with ErrorCodeConnectionClosed.
//
// So a Client lets one call at a time acquire the connection (conn.gate, waited on with the
// call's context), replaces a client whose discovery failed before anyone else gets to it, and
// repeats a call once on the new client.

// ErrClosed is returned by every call on a closed Client.
var ErrClosed = errors.New("esdb: closed")

// Client is a connection to one EventStoreDB. It is safe for concurrent use.
type Client struct {
	config esdbclient.Configuration

	mu     sync.Mutex
	conn   *conn
	closed bool
}

// Open parses a connection string such as "esdb://127.0.0.1:2113?tls=false" and returns a
// client on it. It does not connect: the client discovers the node on first use, so a
// service can start before its database is reachable.
func Open(connectionString string) (*Client, error) {
	config, err := esdbclient.ParseConnectionString(connectionString)
	if err != nil {
		return nil, fmt.Errorf("esdb: parse connection string: %w", err)
	}
	// The client logs every failed call, including a subscription ended by its context, at
	// error level; callers get the same errors returned and decide what to log.
	config.Logger = esdbclient.NoopLogging()
	c := &Client{config: *config}
	if c.conn, err = c.newConn(); err != nil {
		return nil, err
	}
	return c, nil
}

// Close closes the client; calls in flight fail and later calls return ErrClosed.
func (s *Client) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if err := s.conn.client.Close(); err != nil {
		return fmt.Errorf("esdb: close client: %w", err)
	}
	return nil
}

// conn is one client with the gate its callers pass to acquire a connection.
type conn struct {
	client *esdbclient.Client
	gate   chan struct{} // holds a token while one caller acquires the connection
}

func (s *Client) newConn() (*conn, error) {
	config := s.config // NewClient keeps a pointer to its configuration: give each its own.
	c, err := esdbclient.NewClient(&config)
	if err != nil {
		return nil, fmt.Errorf("esdb: create client: %w", err)
	}
	return &conn{client: c, gate: make(chan struct{}, 1)}, nil
}

func (s *Client) current() (*conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	return s.conn, nil
}

// renew replaces old with a new client, unless another caller already did.
func (s *Client) renew(old *conn) (*conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if s.conn != old {
		return s.conn, nil
	}
	c, err := s.newConn()
	if err != nil {
		return nil, err
	}
	// It is dead already; closing it also fails any call still queued on it (see runOn).
	_ = old.client.Close()
	s.conn = c
	return c, nil
}

// acquire makes sure cn's client has a connection, running any discovery that needs while
// holding the gate, so that no other caller queues behind a discovery that may fail.
func (s *Client) acquire(ctx context.Context, cn *conn) error {
	select {
	case cn.gate <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-cn.gate }()
	err := runOn(cn.client, func(c *esdbclient.Client) error {
		_, err := c.GetServerVersion() // Only asks for the connection, discovering if needed.
		return err
	})
	if discoveryFailed(err) {
		// Replace the dead client before the next caller passes the gate.
		_, _ = s.renew(cn)
	}
	return err
}

// Do runs op on the current client, and once more on a new client when the current one
// turned out to be closed for good. That is known before op sent anything, or after an error,
// so the repeat is safe: appends are idempotent on event ids, and ops restart their reads.
func (s *Client) Do(ctx context.Context, op func(*esdbclient.Client) error) error {
	cn, err := s.current()
	if err != nil {
		return err
	}
	for repeated := false; ; repeated = true {
		err = s.acquire(ctx, cn)
		if err == nil {
			err = runOn(cn.client, op)
			if discoveryFailed(err) {
				// The connection was lost between acquire and op, and op rediscovered in
				// vain: other callers may be queued on the dead client.
				_, _ = s.renew(cn)
			}
		}
		if !clientGone(err) || repeated {
			if clientGone(err) {
				if _, closedErr := s.current(); closedErr != nil {
					return closedErr // Closed while the call ran.
				}
			}
			return err
		}
		if cn, err = s.renew(cn); err != nil {
			return err
		}
	}
}

// errClientClosedUnderUs is a call that was queued on a client when it was closed.
var errClientClosedUnderUs = errors.New("esdb: client closed during the call")

// runOn runs op on c. A call that checked the client's closed flag just before the client was
// closed (by Close or by renew) then sends on the closed channel and panics. That panic means
// only "this client is gone": it becomes an error. The gate makes this rare: it needs a call
// racing Close, or a connection lost between acquire and the call.
func runOn(c *esdbclient.Client, op func(*esdbclient.Client) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if re, ok := r.(runtime.Error); ok && strings.Contains(re.Error(), "send on closed channel") {
				err = errClientClosedUnderUs
				return
			}
			panic(r)
		}
	}()
	return op(c)
}

func clientGone(err error) bool {
	return errors.Is(err, errClientClosedUnderUs) || HasCode(err, esdbclient.ErrorCodeConnectionClosed)
}

// discoveryFailed recognises the error of a failed node discovery, after which the library has
// closed the client; it has no code of its own, only this text.
func discoveryFailed(err error) bool {
	return err != nil && strings.Contains(err.Error(), "maximum discovery attempt count reached")
}

// HasCode reports whether err is the client's error with code.
func HasCode(err error, code esdbclient.ErrorCode) bool {
	var e *esdbclient.Error
	return errors.As(err, &e) && e.Code() == code
}
