package worker_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/command/eventstore/memstore"
	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/connectors/company"
	"github.com/samla/samla/connectors/sandbox"
	"github.com/samla/samla/connectors/worker"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/personnummer"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/metrics"
)

// outageStore is the in-memory event store with an outage switch: while failAppends is set,
// every append fails as if the store were down.
type outageStore struct {
	*memstore.Store
	failAppends atomic.Bool
	appends     atomic.Int32 // append calls that reached the store
}

func (s *outageStore) Append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events []eventschema.Envelope) (eventstore.AppendResult, error) {
	if err := ctx.Err(); err != nil {
		return eventstore.AppendResult{}, err
	}
	if s.failAppends.Load() {
		return eventstore.AppendResult{}, errors.New("store down")
	}
	s.appends.Add(1)
	return s.Store.Append(ctx, stream, expected, events)
}

func (s *outageStore) setFailAppends(v bool) { s.failAppends.Store(v) }

// syncBuffer collects log output from many goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// env is one test's world: an event store, the sandbox over real HTTP, the HTTP company
// adapter and the sandbox catalog.
type env struct {
	t         *testing.T
	store     *outageStore
	reg       *eventschema.Registry
	repo      *repository.Repository[*collection.Collection]
	sb        *sandbox.Sandbox
	companies *company.Client
	catalog   worker.Catalog
	metrics   *metrics.Metrics
	logs      *syncBuffer
	logger    *slog.Logger
}

type envOptions struct {
	sandbox     []sandbox.Option
	maxAttempts int
}

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	logs := &syncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	reg, err := eventschema.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	sbOpts := append([]sandbox.Option{
		sandbox.WithLatency(0, 0), sandbox.WithMockSignDelay(50 * time.Millisecond),
		sandbox.WithSeed(7), sandbox.WithLogger(logger),
	}, o.sandbox...)
	sb, err := sandbox.Start(ctx, sbOpts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close() })
	m := metrics.New(prometheus.NewRegistry())
	if o.maxAttempts == 0 {
		o.maxAttempts = 4
	}
	cl, err := company.New(company.Config{
		BaseURL: sb.BaseURL, RequestTimeout: 2 * time.Second, MaxAttempts: o.maxAttempts,
		BackoffBase: 2 * time.Millisecond, BackoffMax: 10 * time.Millisecond, Metrics: m, Logger: logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	store := &outageStore{Store: memstore.New()}
	return &env{
		t: t, store: store, reg: reg, repo: repository.New(store, reg, collection.Kind), sb: sb, companies: cl,
		catalog: sandbox.Catalog(), metrics: m, logs: logs, logger: logger,
	}
}

func (e *env) config(workerID string) worker.Config {
	return worker.Config{
		WorkerID: workerID, Repo: e.repo, Catalog: e.catalog, Companies: e.companies,
		Metrics: e.metrics, Logger: e.logger, PollInterval: 10 * time.Millisecond,
		StaleClaimAfter: time.Minute, SweepInterval: 50 * time.Millisecond,
	}
}

// worker builds a worker and stops it when the test ends.
func (e *env) worker(cfg worker.Config) *worker.Worker {
	w := worker.New(cfg)
	e.t.Cleanup(w.Stop)
	return w
}

const clientID = "client-test"

// start records a collection.started and returns the collection id and the envelope a Kafka
// consumer would hand to HandleBatch.
func (e *env) start(companyID, loginMethod, personalNumber string) (string, eventschema.Envelope) {
	e.t.Helper()
	return e.startAt(companyID, loginMethod, personalNumber, time.Now())
}

func (e *env) startAt(companyID, loginMethod, personalNumber string, now time.Time) (string, eventschema.Envelope) {
	e.t.Helper()
	return e.startWith(startOpts{company: companyID, loginMethod: loginMethod, personalNumber: personalNumber, at: now})
}

// startOpts is a collection request as the command side would accept it.
type startOpts struct {
	company, loginMethod, personalNumber, accountOwnerName string
	// pdf is the letter of a PDF_UPLOAD collection.
	pdf []byte
	at  time.Time
	// client is the collection's client; "" is clientID.
	client string
}

func (e *env) startWith(o startOpts) (string, eventschema.Envelope) {
	e.t.Helper()
	ctx := context.Background()
	if o.at.IsZero() {
		o.at = time.Now()
	}
	co, err := sandbox.Catalog().Get(o.company)
	if err != nil {
		e.t.Fatal(err)
	}
	id := uuid.NewString()
	if o.client == "" {
		o.client = clientID
	}
	req := collection.StartRequest{
		CollectionID: id, ClientID: o.client, Company: co.ForCollection(), LoginMethod: o.loginMethod,
		APIVersion: "2026-04-01", AccountOwnerName: o.accountOwnerName, RequestHash: "h",
	}
	if o.personalNumber != "" {
		n, err := personnummer.Parse(o.personalNumber, o.at)
		if err != nil {
			e.t.Fatal(err)
		}
		req.PersonalNumber = n
	}
	if o.pdf != nil {
		req.PDF = &collection.UploadedPDF{DocumentID: uuid.NewString(), FileName: "letter.pdf", Content: o.pdf}
	}
	meta := repository.Meta{Tenant: o.client, CorrelationID: "req-" + id, Actor: "client:" + o.client}
	if _, _, err := e.repo.Update(ctx, id, meta, func(c *collection.Collection) error { return c.Start(req, o.at) }, repository.NewID()); err != nil {
		e.t.Fatal(err)
	}
	envs, err := e.store.ReadStream(ctx, collection.StreamName(id), 0, 1)
	if err != nil {
		e.t.Fatal(err)
	}
	return id, envs[0]
}

func (e *env) load(id string) *collection.Collection {
	e.t.Helper()
	c, err := e.repo.Load(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// update changes the collection as another writer would (the command side, a dead worker).
func (e *env) update(id string, decide func(*collection.Collection) error) {
	e.t.Helper()
	meta := repository.Meta{Tenant: clientID, CorrelationID: id, Actor: "test"}
	if _, _, err := e.repo.Update(context.Background(), id, meta, decide); err != nil {
		e.t.Fatal(err)
	}
}

// waitFor polls the collection until cond holds.
func (e *env) waitFor(id, what string, cond func(*collection.Collection) bool) *collection.Collection {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c := e.load(id)
		if cond(c) {
			return c
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("collection %s: timed out waiting for %s; status %s, events %v", id, what, c.Status(), e.types(id))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (e *env) waitFinal(id string) *collection.Collection {
	e.t.Helper()
	return e.waitFor(id, "a final status", func(c *collection.Collection) bool { return c.Status().IsFinal() })
}

func (e *env) envelopes(id string) []eventschema.Envelope {
	e.t.Helper()
	envs, err := e.store.ReadStream(context.Background(), collection.StreamName(id), 0, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	return envs
}

func (e *env) types(id string) []string {
	var out []string
	for _, env := range e.envelopes(id) {
		out = append(out, env.Type)
	}
	return out
}

// statuses lists the statuses the collection moved to, in order.
func (e *env) statuses(id string) []collection.Status {
	e.t.Helper()
	var out []collection.Status
	for _, env := range e.envelopes(id) {
		if env.Type != collection.EventStatusChanged {
			continue
		}
		ev, err := e.reg.Decode(env)
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, ev.(collection.StatusChanged).To)
	}
	return out
}

// claims lists the worker ids of the collection's claims, in order.
func (e *env) claims(id string) []string {
	e.t.Helper()
	var out []string
	for _, env := range e.envelopes(id) {
		if env.Type != collection.EventClaimed {
			continue
		}
		ev, err := e.reg.Decode(env)
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, ev.(collection.Claimed).WorkerID)
	}
	return out
}

// nonFinal is the ActiveCollections a status read model would give, read from the store.
func (e *env) nonFinal() worker.ActiveCollections { return storeNonFinal{e} }

// storeNonFinal lists the non-final collections of an env's store.
type storeNonFinal struct{ e *env }

func (n storeNonFinal) ListNonFinal(ctx context.Context, afterCreatedAt time.Time, afterID string, limit int) ([]string, time.Time, error) {
	var open []openRow
	for _, s := range n.e.store.Streams() {
		id := s[len(collection.StreamPrefix):]
		c, err := n.e.repo.Load(ctx, id)
		if err != nil {
			return nil, time.Time{}, err
		}
		if !c.Status().IsFinal() {
			open = append(open, openRow{createdAt: c.StartedAt(), id: id})
		}
	}
	ids, last := pageAfter(open, afterCreatedAt, afterID, limit)
	return ids, last, nil
}

// openRow is a non-final id of a fake read model, with its creation time.
type openRow struct {
	createdAt time.Time
	id        string
}

// pageAfter is a read model's page of non-final ids: up to limit (<= 0: all) of rows after the
// position, oldest first, then by id, and the creation time of the last.
func pageAfter(rows []openRow, afterCreatedAt time.Time, afterID string, limit int) ([]string, time.Time) {
	slices.SortFunc(rows, func(a, b openRow) int {
		if c := a.createdAt.Compare(b.createdAt); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	var (
		ids  []string
		last time.Time
	)
	for _, r := range rows {
		if afterID != "" && (r.createdAt.Before(afterCreatedAt) || r.createdAt.Equal(afterCreatedAt) && r.id <= afterID) {
			continue
		}
		if limit > 0 && len(ids) == limit {
			break
		}
		ids, last = append(ids, r.id), r.createdAt
	}
	return ids, last
}

// changes decodes the collection's status changes, in order.
func (e *env) changes(id string) []collection.StatusChanged {
	e.t.Helper()
	var out []collection.StatusChanged
	for _, env := range e.envelopes(id) {
		if env.Type != collection.EventStatusChanged {
			continue
		}
		ev, err := e.reg.Decode(env)
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, ev.(collection.StatusChanged))
	}
	return out
}

// supply appends CollectionInput as the command side's supplement-info does.
func (e *env) supply(id string, inputs ...collection.Input) {
	e.t.Helper()
	e.update(id, func(c *collection.Collection) error {
		if err := c.SupplyInput(inputs, time.Now()); err != nil {
			return fmt.Errorf("supply input (status %s): %w", c.Status(), err)
		}
		return nil
	})
}

// supplyResponses appends a ResponseObject as the command side's supplement-info does.
func (e *env) supplyResponses(id string, responses ...collection.ClientResponse) {
	e.t.Helper()
	e.update(id, func(c *collection.Collection) error {
		if err := c.SupplyClientResponses(responses, time.Now()); err != nil {
			return fmt.Errorf("supply responses (status %s): %w", c.Status(), err)
		}
		return nil
	})
}

// handle hands the started envelopes to the worker as the Kafka consumer would.
func (e *env) handle(w *worker.Worker, started ...eventschema.Envelope) {
	e.t.Helper()
	if err := w.HandleBatch(context.Background(), started); err != nil {
		e.t.Fatal(err)
	}
}
