package readdb

// Written is the keys a SQLite store has inserted into a table that was created empty for it and
// that nothing else writes (a rebuild's): a key it never wrote has no row, so its reads of the
// rows a batch folds onto need ask the table only for the keys it wrote (most keys of a
// rebuild's batch are new: those reads were a twentieth of a rebuild's CPU). It is a Memo of
// the keys alone: past MemoLimit keys it gives up and every key is asked for again, so that a
// very large rebuild is slower, never out of memory. A nil Written knows nothing and filters
// nothing.
type Written struct{ keys *Memo[string, string] }

// NewWritten returns the Written of a new, empty table.
func NewWritten() *Written { return &Written{keys: NewMemo[string, string]()} }

// Filter returns the keys among keys that may have a row: those written, or all of them when w
// is nil or has given up.
func (w *Written) Filter(keys []string) []string {
	if w == nil {
		return keys
	}
	written, ok := w.keys.Get(keys)
	if !ok {
		return keys
	}
	var out []string
	for _, k := range keys {
		if _, ok := written[k]; ok {
			out = append(out, k)
		}
	}
	return out
}

// Add notes keys written.
func (w *Written) Add(keys ...string) {
	if w != nil {
		w.keys.Put(keys, func(k string) string { return k })
	}
}

// Reset notes that the table was emptied.
func (w *Written) Reset() {
	if w != nil {
		w.keys.Reset()
	}
}
