package readdb_test

import (
	"slices"
	"testing"

	"github.com/samla/samla/projections/readdb"
)

// TestWrittenFiltersToTheKeysWritten: a fresh table's reads ask only for the keys written,
// nothing after a reset, and every key from a nil Written.
func TestWrittenFiltersToTheKeysWritten(t *testing.T) {
	w := readdb.NewWritten()
	if got := w.Filter([]string{"a", "b"}); len(got) != 0 {
		t.Fatalf("fresh: %v, want none", got)
	}
	w.Add("b", "c")
	if got := w.Filter([]string{"a", "b", "c", "d"}); !slices.Equal(got, []string{"b", "c"}) {
		t.Fatalf("after writing b, c: %v", got)
	}
	w.Reset()
	if got := w.Filter([]string{"b", "c"}); len(got) != 0 {
		t.Fatalf("after a reset: %v, want none", got)
	}
	var none *readdb.Written
	none.Add("x")
	none.Reset()
	if got := none.Filter([]string{"a", "b"}); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("nil: %v, want every key", got)
	}
}
