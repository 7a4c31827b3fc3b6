package collection_test

import (
	"errors"
	"testing"
	"time"

	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/domaintest"
	"github.com/samla/samla/domain/personnummer"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func scenario(t *testing.T) *domaintest.Scenario[*collection.Collection] {
	return domaintest.For(t, collection.Kind)
}

var insurer = collection.Company{ID: "se-demo-insurer", Products: []collection.Product{collection.ProductInsurance}, Available: true}

func started() collection.Started {
	return collection.Started{CollectionID: "c1", ClientID: "acme", Company: "se-demo-insurer",
		Product: collection.ProductInsurance, LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK",
		APIVersion: "2026-04-01", StartedAt: t0,
		Personal: &collection.StartedPerson{PersonalNumber: "199001010017", RequestHash: "h"}}
}

// personalNumber parses a test persona's number, which is valid.
func personalNumber(t *testing.T, s string) personnummer.Number {
	t.Helper()
	n, err := personnummer.Parse(s, t0)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// rehydrate folds stored events into a new collection, as the repository loads one.
func rehydrate(t *testing.T, events ...domain.Event) *collection.Collection {
	t.Helper()
	c := collection.Kind.New()
	if err := domain.Rehydrate(c, events...); err != nil {
		t.Fatal(err)
	}
	return c
}

func changed(from, to collection.Status) collection.StatusChanged {
	return collection.StatusChanged{From: from, To: to, ChangedAt: t0}
}

func TestStart(t *testing.T) {
	req := collection.StartRequest{CollectionID: "c1", ClientID: "acme", Company: insurer,
		LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK", APIVersion: "2026-04-01",
		PersonalNumber: personalNumber(t, "900101-0017"), RequestHash: "h"}
	t.Run("a new collection starts RUNNING with the number in 12 digits", func(t *testing.T) {
		scenario(t).When(func(c *collection.Collection) error {
			return c.Start(req, t0)
		}).Then(started())
	})
	t.Run("a started collection cannot start again", func(t *testing.T) {
		scenario(t).Given(started()).When(func(c *collection.Collection) error {
			return c.Start(req, t0)
		}).ThenError(domain.ErrConflict)
	})
	t.Run("an unavailable company is refused", func(t *testing.T) {
		r := req
		r.Company.Available = false
		scenario(t).When(func(c *collection.Collection) error {
			return c.Start(r, t0)
		}).ThenError(collection.ErrCompanyUnavailable)
	})
	t.Run("a personal number with a wrong check digit is invalid", func(t *testing.T) {
		// The number is parsed where it enters, so no StartRequest can carry this one.
		_, err := personnummer.Parse("199001010018", t0)
		var fe *domain.FieldError
		if !errors.As(err, &fe) || fe.Field != "personalNumber" || !errors.Is(err, domain.ErrInvalid) {
			t.Fatalf("Parse = %v, want a field error at personalNumber", err)
		}
	})
	t.Run("a login method is required", func(t *testing.T) {
		r := req
		r.LoginMethod = " "
		scenario(t).When(func(c *collection.Collection) error {
			return c.Start(r, t0)
		}).ThenFieldError(collection.FieldLoginMethod)
	})
	t.Run("a collection without a person keeps only its request's fingerprint personal", func(t *testing.T) {
		r := req
		r.PersonalNumber = personnummer.Number{}
		want := started()
		want.Personal = &collection.StartedPerson{RequestHash: "h"}
		scenario(t).When(func(c *collection.Collection) error { return c.Start(r, t0) }).Then(want)
		r.RequestHash = ""
		want.Personal = nil
		scenario(t).When(func(c *collection.Collection) error { return c.Start(r, t0) }).Then(want)
	})
}

func TestClaim(t *testing.T) {
	claim := func(worker string, at time.Time) func(c *collection.Collection) error {
		return func(c *collection.Collection) error { return c.Claim(worker, at, time.Minute) }
	}
	t.Run("an unclaimed collection is claimed", func(t *testing.T) {
		scenario(t).Given(started()).When(claim("w1", t0)).Then(collection.Claimed{WorkerID: "w1", ClaimedAt: t0})
	})
	t.Run("another live worker's claim blocks", func(t *testing.T) {
		scenario(t).Given(started(), collection.Claimed{WorkerID: "w1", ClaimedAt: t0}).
			When(claim("w2", t0.Add(time.Second))).ThenError(collection.ErrAlreadyClaimed)
	})
	t.Run("the same worker resumes after a restart", func(t *testing.T) {
		scenario(t).Given(started(), collection.Claimed{WorkerID: "w1", ClaimedAt: t0}).
			When(claim("w1", t0.Add(time.Second))).Then(collection.Claimed{WorkerID: "w1", ClaimedAt: t0.Add(time.Second)})
	})
	t.Run("a stale claim is taken over", func(t *testing.T) {
		scenario(t).Given(started(), collection.Claimed{WorkerID: "w1", ClaimedAt: t0}).
			When(claim("w2", t0.Add(2*time.Minute))).Then(collection.Claimed{WorkerID: "w2", ClaimedAt: t0.Add(2 * time.Minute)})
	})
	t.Run("a final collection cannot be claimed", func(t *testing.T) {
		scenario(t).Given(started(), changed(collection.StatusRunning, collection.StatusFailed)).
			When(claim("w1", t0)).ThenError(domain.ErrConflict)
	})
	t.Run("a collection that does not exist cannot be claimed", func(t *testing.T) {
		scenario(t).When(claim("w1", t0)).ThenError(domain.ErrConflict)
	})
}

func TestChangeStatus(t *testing.T) {
	to := func(s collection.Status) func(c *collection.Collection) error {
		return func(c *collection.Collection) error { return c.ChangeStatus(s, nil, t0) }
	}
	t.Run("the happy path of an electronic-ID login", func(t *testing.T) {
		given := []domain.Event{started()}
		path := []collection.Status{collection.StatusLogin, collection.StatusWaitingForUserAction,
			collection.StatusCollecting, collection.StatusCompleted}
		from := collection.StatusRunning
		for _, next := range path {
			scenario(t).Given(given...).When(to(next)).Then(changed(from, next))
			given = append(given, changed(from, next))
			from = next
		}
	})
	t.Run("a final status has no way out", func(t *testing.T) {
		scenario(t).Given(started(), changed(collection.StatusRunning, collection.StatusLogin),
			changed(collection.StatusLogin, collection.StatusIncorrectCredentials)).
			When(to(collection.StatusCollecting)).ThenError(collection.ErrIllegalTransition)
	})
	t.Run("collecting cannot go back to login", func(t *testing.T) {
		scenario(t).Given(started(), changed(collection.StatusRunning, collection.StatusCollecting)).
			When(to(collection.StatusLogin)).ThenError(collection.ErrIllegalTransition)
	})
	t.Run("the contact form times out into CONTACT_FORM", func(t *testing.T) {
		scenario(t).Given(started(), changed(collection.StatusRunning, collection.StatusLogin),
			changed(collection.StatusLogin, collection.StatusContactFormPending)).
			When(to(collection.StatusContactForm)).
			Then(changed(collection.StatusContactFormPending, collection.StatusContactForm))
	})
	t.Run("presentation-only statuses are never entered", func(t *testing.T) {
		scenario(t).Given(started(), changed(collection.StatusRunning, collection.StatusLogin)).
			When(to(collection.StatusWaitingForAuthentication)).ThenError(collection.ErrIllegalTransition)
	})
	t.Run("repeating the current non-final status records nothing", func(t *testing.T) {
		scenario(t).Given(started(), changed(collection.StatusRunning, collection.StatusLogin)).
			When(to(collection.StatusLogin)).Then()
	})
}

func TestStateMachine(t *testing.T) {
	for _, s := range collection.AllStatuses() {
		for _, to := range collection.AllStatuses() {
			if s.IsFinal() && collection.CanTransition(s, to) {
				t.Errorf("final %s may move to %s", s, to)
			}
			if to.IsPresentationOnly() && collection.CanTransition(s, to) {
				t.Errorf("%s may move to presentation-only %s", s, to)
			}
		}
		if !s.IsFinal() && !s.IsPresentationOnly() {
			reachesFinal := false
			for _, to := range collection.AllStatuses() {
				if collection.CanTransition(s, to) && to.IsFinal() {
					reachesFinal = true
				}
			}
			if !reachesFinal {
				t.Errorf("non-final %s can never end", s)
			}
		}
	}
	finals := 0
	for _, s := range collection.AllStatuses() {
		if s.IsFinal() {
			finals++
		}
	}
	// COMPLETED and the 20 rows below it, plus the two timeouts above it.
	if finals != 23 {
		t.Errorf("%d final statuses, want 23", finals)
	}
	// Every status but the presentation-only ones is reachable from RUNNING.
	reached := map[collection.Status]bool{collection.StatusRunning: true}
	queue := []collection.Status{collection.StatusRunning}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		for _, to := range collection.AllStatuses() {
			if collection.CanTransition(s, to) && !reached[to] {
				reached[to] = true
				queue = append(queue, to)
			}
		}
	}
	for _, s := range collection.AllStatuses() {
		if !reached[s] && !s.IsPresentationOnly() {
			t.Errorf("%s is unreachable", s)
		}
	}
}

func TestRecordInsurances(t *testing.T) {
	home := collection.Insurance{ID: "i1", InsuranceType: "HOME"}
	collecting := []domain.Event{started(), changed(collection.StatusRunning, collection.StatusCollecting)}
	t.Run("insurances are recorded while collecting, names apart", func(t *testing.T) {
		scenario(t).Given(collecting...).When(func(c *collection.Collection) error {
			return c.RecordInsurances([]collection.Insurance{home}, map[string]string{"i1": "Tolvan"}, t0)
		}).Then(collection.InsurancesCollected{InsuranceCount: 1, CollectedAt: t0,
			Personal: &collection.InsuranceRecords{Insurances: []collection.Insurance{home}, HolderNames: map[string]string{"i1": "Tolvan"}}})
	})
	t.Run("not before collecting", func(t *testing.T) {
		scenario(t).Given(started()).When(func(c *collection.Collection) error {
			return c.RecordInsurances([]collection.Insurance{home}, nil, t0)
		}).ThenError(domain.ErrConflict)
	})
	t.Run("duplicate ids are invalid", func(t *testing.T) {
		scenario(t).Given(collecting...).When(func(c *collection.Collection) error {
			return c.RecordInsurances([]collection.Insurance{home, home}, nil, t0)
		}).ThenError(domain.ErrInvalid)
	})
}

func TestDataSubject(t *testing.T) {
	withUser, withoutUser := collection.Kind.New(), collection.Kind.New()
	company := collection.Company{ID: "se-demo-insurer", Available: true}
	if err := withUser.Start(collection.StartRequest{CollectionID: "c1", ClientID: "acme", Company: company,
		LoginMethod: "M", UserUUID: "u1"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := withoutUser.Start(collection.StartRequest{CollectionID: "c2", ClientID: "acme", Company: company,
		LoginMethod: "M"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if withUser.DataSubject() != "user-u1" || withoutUser.DataSubject() != "collection-c2" {
		t.Fatalf("subjects %q, %q", withUser.DataSubject(), withoutUser.DataSubject())
	}
}

// TestStartedAfterErasure: the request hash is personal data of the started event; an event
// whose personal part was erased folds into a collection without person and without request
// hash, so that no retry is recognised as the request that started it.
func TestStartedAfterErasure(t *testing.T) {
	c := rehydrate(t, started())
	if c.RequestHash() != "h" || c.Person() != (collection.StartedPerson{PersonalNumber: "199001010017"}) {
		t.Fatalf("started: hash %q person %+v", c.RequestHash(), c.Person())
	}
	erased := started()
	erased.Personal = nil
	c = rehydrate(t, erased)
	if c.RequestHash() != "" || c.Person() != (collection.StartedPerson{}) || !c.Exists() {
		t.Fatalf("erased: hash %q person %+v", c.RequestHash(), c.Person())
	}
}
