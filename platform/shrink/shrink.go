// Package shrink gives in-memory maps their memory back after a burst (the sandbox's stores, the
// connector's scheduler, the key cache).
package shrink

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
