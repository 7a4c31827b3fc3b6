// Package shrink gives memory back after a burst: in-memory maps (the sandbox's stores, the
// connector's scheduler, the key cache, the status view) and SQLite connection pools.
package shrink

import "time"

// IdleConnTimeout is how long a SQLite pool (the event store's readers, the key store, each
// read model) keeps a connection nobody uses (database/sql's SetConnMaxIdleTime). Each
// connection holds memory outside the Go heap for good while open: its schema, its prepared
// statements, its lookaside and page cache slots. Under load every pool opens all its
// connections, and after a 30 s POST load the ~30 more than at start still held ~3.5 MB three
// minutes later. Under load no connection idles this long, so none is reopened; after a quiet
// minute a reopen costs a schema parse and its statements' preparation, well under a
// millisecond.
const IdleConnTimeout = time.Minute

// Map copies m into a map sized for what it holds now. Go maps keep their buckets after
// deletes (maps.Clone keeps the capacity too), so a store that held a load run's logins keeps
// their memory until it is copied.
func Map[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Peak tracks the most entries a store held since it was last shrunk.
type Peak struct {
	n int
	// Floor is the peak below which a store is never due: a small map costs nothing worth a copy.
	Floor int
}

// Saw records that the store held n entries.
func (p *Peak) Saw(n int) { p.n = max(p.n, n) }

// Due reports whether a store of n entries is down to a quarter of its peak or less, when a
// copy is worth its cost; the caller then shrinks the store and calls Reset.
func (p *Peak) Due(n int) bool {
	p.Saw(n)
	return p.n > 0 && p.n >= p.Floor && n <= p.n/4
}

// Max is the most entries seen since the last Reset.
func (p *Peak) Max() int { return p.n }

// Reset starts tracking again from the store's size n after a shrink.
func (p *Peak) Reset(n int) { p.n = n }
