package worker_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/samla/samla/connectors/worker"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/eventschema"
)

// The fairness rule of issue 11: a session waiting for the user holds no worker slot, and
// clients share the slots in turn. The tests use short deadlines and assert orderings, never
// speeds.

// lastEnvelope is the collection's last event, as the Kafka consumer would hand it over.
func (e *env) lastEnvelope(id string) eventschema.Envelope {
	e.t.Helper()
	envs := e.envelopes(id)
	return envs[len(envs)-1]
}

func TestWaitingSessionsOfOneClientDoNotDelayAnothersNewCollection(t *testing.T) {
	e := newEnv(t, fastSandbox())
	cfg := e.config("w1")
	cfg.MaxSessions = 2
	// Long enough that client A's collections still wait when B's has long completed, even on
	// a slow machine; the worker's Stop ends them with the test.
	cfg.ContactFormTimeout = time.Minute
	w := e.worker(cfg)

	var aIDs []string
	var aBatch []eventschema.Envelope
	for range 3 * cfg.MaxSessions {
		id, started := e.startWith(startOpts{company: insurer, loginMethod: mock, personalNumber: pnContactForm, client: "client-a"})
		aIDs = append(aIDs, id)
		aBatch = append(aBatch, started)
	}
	// A worker that held a slot per waiting session would block here until a contact form timed
	// out; the batch is handed over beside the test so that such a worker fails below instead.
	handled := make(chan error, 1)
	go func() { handled <- w.HandleBatch(context.Background(), aBatch) }()
	for _, id := range aIDs {
		e.waitFor(id, "CONTACT_FORM_PENDING", func(c *collection.Collection) bool { return c.Status() == sOther.ContactFormPending })
	}
	// Every one of A's sessions waits at once, three times more than there are slots.
	if err := <-handled; err != nil {
		t.Fatal(err)
	}

	bID, bStarted := e.startWith(startOpts{company: insurer, loginMethod: mock, personalNumber: tolvan, client: "client-b"})
	e.handle(w, bStarted)
	if c := e.waitFinal(bID); c.Status() != collection.StatusCompleted {
		t.Fatalf("B's collection: %s (%v)", c.Status(), e.statuses(bID))
	}
	for _, id := range aIDs {
		if c := e.load(id); c.Status() != sOther.ContactFormPending {
			t.Fatalf("A's collection %s is %s when B's completed; it should still wait for its contact form", id, c.Status())
		}
	}
	if got := w.Running(); got > cfg.MaxSessions {
		t.Errorf("%d steps run, MaxSessions is %d", got, cfg.MaxSessions)
	}
	if got := w.Parked(); got > len(aIDs) {
		t.Errorf("%d parked, only A's %d wait", got, len(aIDs))
	}
}

func TestParkedSessionWakesOnItsInputEvent(t *testing.T) {
	e := newEnv(t, fastSandbox())
	cfg := e.config("w1")
	cfg.InputTimeout = time.Minute
	// Nothing but the input's event (or the deadline, a minute away) wakes the waiting session.
	cfg.InputPollInterval = time.Hour
	w := e.worker(cfg)
	id, started := e.start(insurer, mock, pnInput)
	e.handle(w, started)
	e.waitFor(id, "COLLECTION_INPUT_PENDING", func(c *collection.Collection) bool { return c.Status() == sOther.InputPending })
	waitUntil(t, "the session to park", func() bool { return w.Parked() == 1 && w.Running() == 0 })

	e.supply(id, email)
	supplied := e.lastEnvelope(id)
	if supplied.Type != collection.EventInputSupplied {
		t.Fatalf("last event %s", supplied.Type)
	}
	e.handle(w, supplied)
	if c := e.waitFinal(id); c.Status() != collection.StatusCompleted {
		t.Fatalf("status %s (%v)", c.Status(), e.statuses(id))
	}
	want := []collection.Status{S.Login, sOther.InputPending, S.Collecting, S.Completed}
	if got := e.statuses(id); !slices.Equal(got, want) {
		t.Fatalf("statuses %v, want %v", got, want)
	}
	waitUntil(t, "nothing parked", func() bool { return w.Parked() == 0 })
	noPersonalData(t, e, email.Value, pnInput)
}

func TestParkedSessionEndsAtItsDeadline(t *testing.T) {
	e := newEnv(t, fastSandbox())
	cfg := e.config("w1")
	cfg.ContactFormTimeout = 300 * time.Millisecond
	cfg.InputPollInterval = time.Hour // only the deadline wakes it
	w := e.worker(cfg)
	id, started := e.start(insurer, mock, pnContactForm)
	e.handle(w, started)
	e.waitFor(id, "CONTACT_FORM_PENDING", func(c *collection.Collection) bool { return c.Status() == sOther.ContactFormPending })
	c := e.waitFinal(id)
	want := []collection.Status{S.Login, sOther.ContactFormPending, collection.StatusContactForm}
	if got := e.statuses(id); !slices.Equal(got, want) || c.Status() != collection.StatusContactForm {
		t.Fatalf("statuses %v, want %v", got, want)
	}
	pending, final := e.changes(id)[1], e.changes(id)[2]
	if final.ChangedAt.Before(pending.Deadline.DueAt) {
		t.Fatalf("ended at %s, before the deadline %s", final.ChangedAt, pending.Deadline.DueAt)
	}
	if got := value(t, e.metrics.ConnectorOutcomes.WithLabelValues(insurer, "CONTACT_FORM")); got != 1 {
		t.Errorf("outcome counter %v", got)
	}
	waitUntil(t, "nothing parked or running", func() bool { return w.Parked() == 0 && w.Running() == 0 })
}

// gated holds the logins of chosen collections at the company until released, and records the
// order in which the logins were started.
type gated struct {
	worker.Companies
	mu      sync.Mutex
	hold    map[string]chan struct{} // by collection id
	entered chan string
	order   []string
}

func (g *gated) StartLogin(ctx context.Context, companyID string, req worker.LoginRequest) (worker.CompanySession, error) {
	g.mu.Lock()
	g.order = append(g.order, req.Reference)
	hold := g.hold[req.Reference]
	g.mu.Unlock()
	if hold != nil {
		g.entered <- req.Reference
		select {
		case <-hold:
		case <-ctx.Done():
			return worker.CompanySession{}, ctx.Err()
		}
	}
	return g.Companies.StartLogin(ctx, companyID, req)
}

func (g *gated) started() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.order)
}

func TestClientsShareScarceSlotsInTurn(t *testing.T) {
	e := newEnv(t, fastSandbox())
	g := &gated{Companies: e.companies, hold: map[string]chan struct{}{}, entered: make(chan string, 1)}
	cfg := e.config("w1")
	cfg.Companies = g
	cfg.MaxSessions = 1
	w := e.worker(cfg)

	// Client C's collection takes the only slot and keeps it until A's backlog and B's new
	// collection are queued behind it.
	cID, cStarted := e.startWith(startOpts{company: insurer, loginMethod: mock, personalNumber: tolvan, client: "client-c"})
	release := make(chan struct{})
	g.hold[cID] = release
	e.handle(w, cStarted)
	<-g.entered

	var batch []eventschema.Envelope
	var aIDs []string
	for range 8 {
		id, started := e.startWith(startOpts{company: insurer, loginMethod: mock, personalNumber: tolvan, client: "client-a"})
		aIDs = append(aIDs, id)
		batch = append(batch, started)
	}
	bID, bStarted := e.startWith(startOpts{company: insurer, loginMethod: mock, personalNumber: tolvan, client: "client-b"})
	batch = append(batch, bStarted)
	handled := make(chan error, 1)
	go func() { handled <- w.HandleBatch(context.Background(), batch) }()
	select {
	case err := <-handled:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("HandleBatch waits for a slot: the consumer stalls every client behind the busy one")
	}
	close(release)

	if c := e.waitFinal(bID); c.Status() != collection.StatusCompleted {
		t.Fatalf("B's collection: %s", c.Status())
	}
	order := g.started()
	b := slices.Index(order, bID)
	aBefore := 0
	for _, id := range order[:b] {
		if slices.Contains(aIDs, id) {
			aBefore++
		}
	}
	// One slot: once C's step gives it up, A and B take turns, so at most one of A's eight
	// logins starts before B's.
	if aBefore > cfg.MaxSessions {
		t.Fatalf("%d of A's logins started before B's (order %v); B waited for A's backlog", aBefore, order)
	}
	for _, id := range append(aIDs, cID) {
		if c := e.waitFinal(id); c.Status() != collection.StatusCompleted {
			t.Fatalf("collection %s: %s", id, c.Status())
		}
	}
}
