package readdbtest

import (
	"slices"
	"testing"
)

// CheckPagedRound checks a list that pages by position, as the connectors' sweeps read a round:
// for every page size from 1 to len(want)+1, paging from no position (nil) to the first short
// page meets exactly want, in its order; no position starts at the oldest; limit 0 is every
// row. list returns a page's ids and the position after its last row (nil after none).
func CheckPagedRound[P any](t *testing.T, want []string, list func(after *P, limit int) ([]string, *P)) {
	t.Helper()
	for limit := 1; limit <= len(want)+1; limit++ {
		var (
			got   []string
			after *P
		)
		for pages := 0; ; pages++ {
			if pages > len(want)+1 {
				t.Fatalf("limit %d: no short page after %d pages (%v)", limit, pages, got)
			}
			page, last := list(after, limit)
			if len(page) > limit {
				t.Fatalf("limit %d: a page of %d", limit, len(page))
			}
			got = append(got, page...)
			if len(page) < limit {
				break
			}
			after = last
		}
		if !slices.Equal(got, want) {
			t.Fatalf("limit %d: a round of pages met %v, want %v", limit, got, want)
		}
	}
	if page, _ := list(nil, 1); len(want) > 0 && !slices.Equal(page, want[:1]) {
		t.Fatalf("the first page of one: %v, want the oldest %v", page, want[0])
	}
	if page, _ := list(nil, 0); !slices.Equal(page, want) {
		t.Fatalf("limit 0: %v, want every one %v", page, want)
	}
}
