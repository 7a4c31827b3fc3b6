package main

import (
	"net"
	"sync"
	"syscall"

	"github.com/samla/samla/platform/metrics"
)

// Connection budgets. Each accepted connection is a file descriptor, and the process has a
// fixed number (RLIMIT_NOFILE, which Go raises to its hard limit at start): with 20,000,
// connections held open on the API and ops listeners took every descriptor, /livez and /health
// timed out, and the event store, the read models and the broker could open nothing. So the
// public listeners (API and mutual TLS) draw from one budget, the ops listener has a small one
// of its own that they cannot take (the probes and the scraper still get through), the
// sandbox another, and together they stay below the process's limit minus fdReserve.
const (
	// fdReserve is what the listeners leave of the descriptor limit to everything else: the
	// database files, the broker and its clients, the connector's connections out.
	fdReserve = 1024
	// opsConnections is the ops listener's budget: a scraper, probes, an operator's pprof.
	opsConnections = 64
	// sandboxConnections bounds the embedded sandbox's listener: the connector reaches it over
	// at most 64 connections.
	sandboxConnections = 1024
)

// connBudgets are the budgets of the process's listeners.
type connBudgets struct {
	public, ops, sandbox *connBudget // nil: no bound
}

// newConnBudgets sizes the budgets: the public listeners share maxConnections (0: no bound of
// their own), cut to what the descriptor limit leaves once the others have theirs.
func newConnBudgets(maxConnections int) (connBudgets, int) {
	limit, ok := fileLimit()
	public := publicConnections(maxConnections, limit, ok)
	b := connBudgets{ops: newConnBudget(opsConnections), sandbox: newConnBudget(sandboxConnections)}
	if public > 0 {
		b.public = newConnBudget(public)
	}
	return b, public
}

// publicConnections is the public listeners' budget for --max-connections asked (0: no bound
// of their own) under a descriptor limit (finite: limit is one): what was asked, cut to what
// the limit leaves once the others have theirs, but never below 64 (a limit too small for the
// reserve still serves some clients) nor above what was asked.
func publicConnections(asked, limit int, finite bool) int {
	if !finite {
		return asked
	}
	room := max(limit-fdReserve-opsConnections-sandboxConnections, 64)
	if asked <= 0 {
		return room
	}
	return min(asked, room)
}

// fileLimit is the process's soft RLIMIT_NOFILE, if it has a finite one.
func fileLimit() (int, bool) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > 1<<30 { // RLIM_INFINITY included
		return 0, false
	}
	return int(rl.Cur), true
}

// connBudget is a count of connections that listeners may hold at once, shared by every
// listener it wraps. A listener at the budget accepts nothing until a connection closes, so
// more clients wait in the kernel's backlog (as netutil.LimitListener, which bounds one
// listener only).
type connBudget struct{ slots chan struct{} }

func newConnBudget(n int) *connBudget { return &connBudget{slots: make(chan struct{}, n)} }

// held is how many connections the budget's listeners hold (and Accepts wait with a slot).
func (b *connBudget) held() int { return len(b.slots) }

// report registers the budgets' gauges.
func (b connBudgets) report(m *metrics.Metrics) {
	for name, budget := range map[string]*connBudget{"public": b.public, "ops": b.ops, "sandbox": b.sandbox} {
		if budget != nil {
			m.ListenerConnections(name, cap(budget.slots), budget.held)
		}
	}
}

// wrap returns ln drawing from the budget; a nil budget leaves ln as it is.
func (b *connBudget) wrap(ln net.Listener) net.Listener {
	if b == nil {
		return ln
	}
	return &budgetListener{Listener: ln, budget: b, done: make(chan struct{})}
}

type budgetListener struct {
	net.Listener
	budget    *connBudget
	closeOnce sync.Once
	done      chan struct{}
}

func (l *budgetListener) Accept() (net.Conn, error) {
	select {
	case l.budget.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.budget.slots
		return nil, err
	}
	return &budgetConn{Conn: c, budget: l.budget}, nil
}

func (l *budgetListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.done) })
	return err
}

type budgetConn struct {
	net.Conn
	budget *connBudget
	once   sync.Once
}

// Close gives the connection's slot back, once.
func (c *budgetConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { <-c.budget.slots })
	return err
}
