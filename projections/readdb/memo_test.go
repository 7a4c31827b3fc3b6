package readdb_test

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/samla/samla/projections/readdb"
)

type memoRow struct {
	key string
	rev uint64
}

// TestMemo: the last version put per key is what Get and Revisions answer, a key never put is
// absent (the table is new) and after a Reset, a nil memo and one past MemoLimit cannot answer.
func TestMemo(t *testing.T) {
	key := func(r memoRow) string { return r.key }
	rev := func(r memoRow) uint64 { return r.rev }
	var none *readdb.Memo[string, memoRow]
	if _, ok := none.Get([]string{"a"}); ok {
		t.Fatal("a nil memo answered")
	}
	none.Put([]memoRow{{"a", 1}}, key)

	m := readdb.NewMemo[string, memoRow]()
	m.Put([]memoRow{{"a", 1}, {"b", 2}, {"a", 3}}, key)
	m.Put([]memoRow{{"b", 2}}, key) // an erasure's copy at the same revision
	got, ok := m.Get([]string{"a", "b", "c"})
	if !ok || !reflect.DeepEqual(got, map[string]memoRow{"a": {"a", 3}, "b": {"b", 2}}) {
		t.Fatalf("Get = %v, %v", got, ok)
	}
	revs, ok := m.Revisions([]string{"a", "c"}, rev)
	if !ok || !reflect.DeepEqual(revs, map[string]uint64{"a": 3}) {
		t.Fatalf("Revisions = %v, %v", revs, ok)
	}

	m.Reset() // the table was emptied
	if got, ok := m.Get([]string{"a", "b"}); !ok || len(got) != 0 {
		t.Fatalf("Get after Reset = %v, %v; want none, answered", got, ok)
	}
	none.Reset()

	rows := make([]memoRow, readdb.MemoLimit+1)
	for i := range rows {
		rows[i] = memoRow{fmt.Sprint(i), 1}
	}
	m.Put(rows, key)
	if _, ok := m.Get([]string{"a"}); ok {
		t.Fatal("a memo past its limit still answers")
	}
	if m.Reset(); func() bool { _, ok := m.Get([]string{"a"}); return ok }() {
		t.Fatal("a memo past its limit answers again after a reset")
	}
}
