package httpquery_test

import (
	"context"

	"github.com/samla/samla/query"
)

// The read-model fakes that the status, history and data tests share; each test file keeps its
// own fixtures.

// fakeStatus is a tenant-scoped status read model.
type fakeStatus struct {
	rows      map[string]query.StatusView
	err       error
	leakyRead bool // ignores the tenant, as a buggy reader would
}

func (f *fakeStatus) Get(_ context.Context, tenant, id string) (query.StatusView, error) {
	if f.err != nil {
		return query.StatusView{}, f.err
	}
	row, ok := f.rows[id]
	if !ok || (!f.leakyRead && row.Tenant != tenant) {
		return query.StatusView{}, query.ErrNotFound
	}
	return row, nil
}

type listCall struct {
	tenant, stream string
	after          *uint64
	limit          int
}

// fakeHistory is a tenant-scoped history read model that records its calls.
type fakeHistory struct {
	events []query.HistoryEvent
	calls  []listCall
}

func (f *fakeHistory) List(_ context.Context, tenant, stream string, after *uint64, limit int) ([]query.HistoryEvent, error) {
	f.calls = append(f.calls, listCall{tenant, stream, after, limit})
	var out []query.HistoryEvent
	for _, e := range f.events {
		if e.Tenant == tenant && e.Stream == stream && (after == nil || e.Revision > *after) && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, nil
}
