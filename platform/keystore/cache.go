package keystore

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/shrink"
)

const (
	// DefaultCacheTTL bounds how long a cached key outlives its erasure in a process that did
	// not destroy it (another replica): after an erasure elsewhere, this process may open the
	// subject's data for at most this long. The process that destroys a key drops it at once.
	DefaultCacheTTL = 30 * time.Second
	// DefaultCacheSize bounds how many subjects the cache holds: a few MiB at most.
	DefaultCacheSize = 10000
)

// Cache is a bounded in-memory cache in front of a key store, so that a status poll or a
// projection does not ask the store for the same key every time. Keys expire after the TTL;
// erasures are cached for good (an erased subject never comes back), and Destroy through the
// cache drops the key at once. When full, an arbitrary entry gives way. Lost keys
// (eventschema.ErrKeyNotFound) and errors are never cached.
type Cache struct {
	inner eventschema.Keys
	ttl   time.Duration
	size  int
	now   func() time.Time

	mu      sync.RWMutex
	entries map[string]cacheEntry
	// peak is the most entries held since the map was last made anew (Sweep).
	peak shrink.Peak
}

type cacheEntry struct {
	key     eventschema.Key
	erased  bool
	expires time.Time
}

var _ eventschema.Keys = (*Cache)(nil)

// CacheOption adjusts a Cache.
type CacheOption func(*Cache)

// WithCacheClock sets the clock the TTL is measured on (time.Now by default).
func WithCacheClock(now func() time.Time) CacheOption { return func(c *Cache) { c.now = now } }

// NewCache caches inner's keys for ttl (DefaultCacheTTL when <= 0), at most size subjects
// (DefaultCacheSize when <= 0).
func NewCache(inner eventschema.Keys, ttl time.Duration, size int, opts ...CacheOption) *Cache {
	if ttl <= 0 {
		ttl = DefaultCacheTTL
	}
	if size <= 0 {
		size = DefaultCacheSize
	}
	c := &Cache{inner: inner, ttl: ttl, size: size, now: time.Now, entries: map[string]cacheEntry{}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// GetOrCreate implements eventschema.Keys.
func (c *Cache) GetOrCreate(ctx context.Context, subject string) (eventschema.Key, error) {
	if k, err, ok := c.cached(subject); ok {
		return k, err
	}
	k, err := c.inner.GetOrCreate(ctx, subject)
	c.remember(subject, k, err)
	return k, err
}

// Get implements eventschema.Keys.
func (c *Cache) Get(ctx context.Context, subject string) (eventschema.Key, error) {
	if k, err, ok := c.cached(subject); ok {
		return k, err
	}
	k, err := c.inner.Get(ctx, subject)
	c.remember(subject, k, err)
	return k, err
}

// ManyGetter is a key store that looks up many subjects at once (sqlitekeys.Store): the key of
// each subject it has, the zero Key for an erased one; a subject it never had is left out.
type ManyGetter interface {
	GetMany(ctx context.Context, subjects []string) (map[string]eventschema.Key, error)
}

// GetMany implements ManyGetter: the cached subjects from the cache, the others from the inner
// store in one call when it is a ManyGetter (and cached as Get caches them). Without one, the
// subjects not cached are left out, for Get to answer one by one.
func (c *Cache) GetMany(ctx context.Context, subjects []string) (map[string]eventschema.Key, error) {
	out := make(map[string]eventschema.Key, len(subjects))
	var missing []string
	for _, subject := range subjects {
		k, err, ok := c.cached(subject)
		switch {
		case !ok:
			missing = append(missing, subject)
		case err != nil:
			out[subject] = eventschema.Key{}
		default:
			out[subject] = k
		}
	}
	inner, ok := c.inner.(ManyGetter)
	if len(missing) == 0 || !ok {
		return out, nil
	}
	got, err := inner.GetMany(ctx, missing)
	if err != nil {
		return nil, err
	}
	for subject, k := range got {
		if k.IsZero() {
			c.remember(subject, k, eventschema.ErrSubjectErased)
		} else {
			c.remember(subject, k, nil)
		}
		out[subject] = k
	}
	return out, nil
}

// Destroy implements eventschema.Keys: the key leaves the cache before the store destroys it,
// and the erasure is cached once the store has.
func (c *Cache) Destroy(ctx context.Context, subject string) error {
	c.mu.Lock()
	delete(c.entries, subject)
	c.mu.Unlock()
	if err := c.inner.Destroy(ctx, subject); err != nil {
		return err
	}
	c.remember(subject, eventschema.Key{}, eventschema.ErrSubjectErased)
	return nil
}

func (c *Cache) cached(subject string) (eventschema.Key, error, bool) {
	c.mu.RLock()
	e, ok := c.entries[subject]
	c.mu.RUnlock()
	switch {
	case !ok:
		return eventschema.Key{}, nil, false
	case e.erased:
		return eventschema.Key{}, erasedError(subject), true
	case c.now().Before(e.expires):
		return e.key, nil, true
	}
	return eventschema.Key{}, nil, false
}

func erasedError(subject string) error {
	return &subjectError{subject: subject, err: eventschema.ErrSubjectErased}
}

type subjectError struct {
	subject string
	err     error
}

func (e *subjectError) Error() string { return e.subject + ": " + e.err.Error() }
func (e *subjectError) Unwrap() error { return e.err }

func (c *Cache) remember(subject string, k eventschema.Key, err error) {
	var e cacheEntry
	switch {
	case errors.Is(err, eventschema.ErrSubjectErased):
		e.erased = true
	case err != nil:
		return
	default:
		e.key, e.expires = k, c.now().Add(c.ttl)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old, ok := c.entries[subject]
	if ok && old.erased {
		// An erasure is for good: a read that raced Destroy must not bring the key back.
		return
	}
	if !ok && len(c.entries) >= c.size {
		for s := range c.entries { // map order is random: an arbitrary entry gives way
			delete(c.entries, s)
			break
		}
	}
	c.entries[subject] = e
	c.peak.Saw(len(c.entries))
}

// Sweep forgets the keys whose TTL is over (a read would go to the store for them anyway;
// erasures stay), and makes the map anew once it holds at most a quarter of its peak, since a Go
// map keeps the room of its largest size. Without it a burst of new subjects left its keys, the
// subjects' names and a map sized for DefaultCacheSize in memory until new subjects pushed them
// out, which an idle service never does (three minutes after a 30 s POST load: 2 MB of a 15 MB
// live heap, scattered over the heap the burst had filled). Call it every TTL or so.
func (c *Cache) Sweep() {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for subject, e := range c.entries {
		if !e.erased && !now.Before(e.expires) {
			delete(c.entries, subject)
		}
	}
	if c.peak.Due(len(c.entries)) {
		c.entries = shrink.Map(c.entries)
		c.peak.Reset(len(c.entries))
	}
}

// Len is the number of subjects the cache holds.
func (c *Cache) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.entries)
}
