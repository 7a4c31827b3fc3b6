package eidsim

import (
	"errors"
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

// A released final order is forgotten at once; a pending order is not released, and an
// unreleased final one stays until keep.
func TestReleasedOrdersAreForgotten(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	s := New(30*time.Second, 2*time.Minute, nil)
	start := func(ref string) Order {
		t.Helper()
		o, err := s.Auth(AuthRequest{PersonalNumber: "199001010017", Reference: ref, Mock: true}, t0)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	signed, kept, pending := start("col-signed"), start("col-kept"), start("col-pending")
	for _, ref := range []string{"col-signed", "col-kept"} {
		if _, err := s.SignByReference(ref, t0.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	s.Release(signed.OrderRef, t0.Add(2*time.Second))
	s.Release(pending.OrderRef, t0.Add(2*time.Second)) // pending: not released

	if _, err := s.Collect(signed.OrderRef, t0.Add(2*time.Second)); !errors.Is(err, ErrNoSuchOrder) {
		t.Fatalf("released order: %v, want ErrNoSuchOrder", err)
	}
	if _, ok := s.pendingByReference["col-signed"]; ok {
		t.Fatal("the released order's reference is still indexed")
	}
	for _, o := range []Order{kept, pending} {
		if _, err := s.Collect(o.OrderRef, t0.Add(2*time.Second)); err != nil {
			t.Fatalf("order %s forgotten with the released one: %v", o.OrderRef, err)
		}
	}
	if _, err := s.SignByReference("col-pending", t0.Add(3*time.Second)); err != nil {
		t.Fatalf("the pending order after a release of it was refused: %v", err)
	}
	s.Purge(t0.Add(2*time.Minute + time.Second))
	if len(s.orders) != 0 {
		t.Fatalf("%d orders left after keep, want none", len(s.orders))
	}
}
