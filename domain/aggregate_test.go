package domain_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/samla/samla/domain"
)

type added struct{ N int }

func (added) EventType() string { return "test.added" }

type other struct{}

func (other) EventType() string { return "test.other" }

// sum is the smallest aggregate: it adds what its events say.
type sum struct {
	domain.Root
	total int
}

func (s *sum) Apply(e domain.Event) error {
	a, ok := e.(added)
	if !ok {
		return errors.New("sum cannot apply " + e.EventType())
	}
	s.total += a.N
	return nil
}

func (s *sum) Add(n int) error { return domain.Record(s, added{n}) }

func TestRootCountsStoredAndRecordedEvents(t *testing.T) {
	s := &sum{}
	if err := domain.Rehydrate(s, added{1}, added{2}); err != nil {
		t.Fatal(err)
	}
	if s.Version() != 2 || s.StoredVersion() != 2 || len(s.Recorded()) != 0 || s.total != 3 {
		t.Fatalf("after rehydrate: version %d, stored %d, recorded %v, total %d", s.Version(), s.StoredVersion(), s.Recorded(), s.total)
	}
	if err := s.Add(4); err != nil {
		t.Fatal(err)
	}
	if s.Version() != 3 || s.StoredVersion() != 2 || !slices.Equal(s.Recorded(), []domain.Event{added{4}}) || s.total != 7 {
		t.Fatalf("after a command: version %d, stored %d, recorded %v, total %d", s.Version(), s.StoredVersion(), s.Recorded(), s.total)
	}
	if err := domain.Rehydrate(s, added{8}); err == nil {
		t.Fatal("stored events folded after recorded ones")
	}
	domain.MarkStored(s)
	if s.Version() != 3 || s.StoredVersion() != 3 || len(s.Recorded()) != 0 || s.total != 7 {
		t.Fatalf("after stored: version %d, stored %d, recorded %v", s.Version(), s.StoredVersion(), s.Recorded())
	}
	if err := domain.Record(s, other{}); err == nil || s.Version() != 3 || len(s.Recorded()) != 0 {
		t.Fatalf("an event the aggregate refuses: %v, version %d", err, s.Version())
	}
}

func TestFieldErrors(t *testing.T) {
	one := error(&domain.FieldError{Field: "loginMethod", Reason: "is required"})
	many := error(&domain.InvalidFieldsError{Fields: []domain.FieldError{
		{Field: "inputs[0].value", Reason: "must be <address>@<domain>"}, {Field: "inputs[1].type", Reason: "is required"}}})
	for _, err := range []error{one, many} {
		if !errors.Is(err, domain.ErrInvalid) {
			t.Errorf("%v is not ErrInvalid", err)
		}
		var fe *domain.FieldError
		if !errors.As(err, &fe) || fe.Reason == "" {
			t.Errorf("%v has no *FieldError", err)
		}
	}
	if got := domain.FieldErrors(wrap(one)); len(got) != 1 || got[0].Field != "loginMethod" {
		t.Errorf("FieldErrors(one) = %v", got)
	}
	if got := domain.FieldErrors(wrap(many)); len(got) != 2 || got[1].Field != "inputs[1].type" {
		t.Errorf("FieldErrors(many) = %v", got)
	}
	if got := domain.FieldErrors(domain.ErrInvalid); got != nil {
		t.Errorf("FieldErrors(ErrInvalid) = %v", got)
	}
}

func wrap(err error) error { return errors.Join(errors.New("context"), err) }

// TestSameRequest: a stored request hash matches the request's hash in the current scheme or in
// the one before (stored by an older build); an erased or absent one matches nothing.
func TestSameRequest(t *testing.T) {
	for _, tc := range []struct {
		stored, hash, legacy string
		same                 bool
	}{
		{"h", "h", "", true},
		{"old", "h", "old", true},
		{"other", "h", "old", false},
		{"", "", "", false},
		{"", "h", "", false},
	} {
		if got := domain.SameRequest(tc.stored, tc.hash, tc.legacy); got != tc.same {
			t.Errorf("SameRequest(%q, %q, %q) = %v", tc.stored, tc.hash, tc.legacy, got)
		}
	}
}
