package eidsim

import (
	"fmt"
	"testing"
	"time"
)

// A purge forgets a burst's orders and their index entries for good: every reference is a key
// of its own in pendingByReference, so an emptied set left behind would pile up forever.
func TestPurgeForgetsOrdersAndTheirIndexEntries(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	s := New(30*time.Second, time.Minute, nil)
	for i := range 500 {
		// Non-mock orders for 500 people, each pending in both indexes.
		pn := fmt.Sprintf("1990%08d", i)
		if _, err := s.Auth(AuthRequest{PersonalNumber: pn, Reference: fmt.Sprintf("col-%d", i)}, t0); err != nil {
			t.Fatal(err)
		}
	}
	if len(s.pendingByPerson) != 500 || len(s.pendingByReference) != 500 {
		t.Fatalf("indexes before the purge: %d by person, %d by reference", len(s.pendingByPerson), len(s.pendingByReference))
	}
	late, err := s.Auth(AuthRequest{PersonalNumber: "199101010000", Reference: "col-late", Mock: true}, t0.Add(50*time.Second))
	if err != nil {
		t.Fatal(err)
	}

	s.Purge(t0.Add(61 * time.Second))

	if len(s.orders) != 1 || s.orders[late.OrderRef] == nil {
		t.Fatalf("orders after the purge: %d, want only the late one", len(s.orders))
	}
	if len(s.pendingByPerson) != 0 {
		t.Fatalf("%d people still indexed, want none (the late order is a mock one)", len(s.pendingByPerson))
	}
	if len(s.pendingByReference) != 1 || len(s.pendingByReference["col-late"]) != 1 {
		t.Fatalf("references still indexed: %d, want only col-late", len(s.pendingByReference))
	}
	// The late order still works after the maps were copied.
	if _, err := s.SignByReference("col-late", t0.Add(62*time.Second)); err != nil {
		t.Fatalf("the order left after the purge: %v", err)
	}
}
