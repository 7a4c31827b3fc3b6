package readdb

import "sync"

// Written is the keys a SQLite store has inserted into a table that was created empty for it and
// that nothing else writes (a rebuild's): a key it never wrote has no row, so its reads of the
// rows a batch folds onto need ask the table only for the keys it wrote (most keys of a
// rebuild's batch are new: those reads were a twentieth of a rebuild's CPU). Past MemoLimit keys
// it gives up and every key is asked for again, so that a very large rebuild is slower, never
// out of memory. A nil Written knows nothing and filters nothing.
type Written struct {
	mu    sync.Mutex
	keys  map[string]struct{}
	given bool
}

// NewWritten returns the Written of a new, empty table.
func NewWritten() *Written { return &Written{keys: map[string]struct{}{}} }

// Filter returns the keys among keys that may have a row: those written, or all of them when w
// is nil or has given up.
func (w *Written) Filter(keys []string) []string {
	if w == nil {
		return keys
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.given {
		return keys
	}
	var out []string
	for _, k := range keys {
		if _, ok := w.keys[k]; ok {
			out = append(out, k)
		}
	}
	return out
}

// Add notes keys written.
func (w *Written) Add(keys ...string) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.given {
		return
	}
	for _, k := range keys {
		w.keys[k] = struct{}{}
	}
	if len(w.keys) > MemoLimit {
		w.keys, w.given = nil, true
	}
}

// Reset notes that the table was emptied.
func (w *Written) Reset() {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.given {
		clear(w.keys)
	}
}
