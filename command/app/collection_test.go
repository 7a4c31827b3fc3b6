package app_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/samla/samla/command/app"
	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/command/eventstore/memstore"
	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/company"
	"github.com/samla/samla/domain/company/companytest"
	"github.com/samla/samla/domain/personnummer"
	"github.com/samla/samla/domain/user"
	"github.com/samla/samla/eventschema"
)

var testNow = time.Date(2026, 5, 1, 12, 0, 0, 123456789, time.UTC)

type fixture struct {
	store *memstore.Store
	reg   *eventschema.Registry
	repo  *repository.Repository[*collection.Collection]
	users *repository.Repository[*user.User]
	svc   *app.CollectionService
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	reg, err := eventschema.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	store := memstore.New()
	repo := repository.New(store, reg, collection.Kind, repository.WithClock(func() time.Time { return testNow }))
	users := repository.New(store, reg, user.Kind)
	return &fixture{store: store, reg: reg, repo: repo, users: users,
		svc: app.NewCollectionService(companytest.Catalog(), repo, users, func() time.Time { return testNow })}
}

// serviceOn builds the service of f on another view of f's store.
func (f *fixture) serviceOn(store repository.Store, now func() time.Time) *app.CollectionService {
	repo := repository.New(store, f.reg, collection.Kind, repository.WithClock(now))
	return app.NewCollectionService(companytest.Catalog(), repo, repository.New(store, f.reg, user.Kind), now)
}

// personalNumber parses a test persona's number, which is valid.
func personalNumber(s string) personnummer.Number {
	n, err := personnummer.Parse(s, testNow)
	if err != nil {
		panic(err)
	}
	return n
}

func startCmd() app.StartCollection {
	return app.StartCollection{
		Tenant: "acme", APIVersion: "2026-04-01", Company: "se-demo-insurer",
		LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK", PersonalNumber: personalNumber("19900101-0017"),
		AccountOwnerName: "Tolvan Tolvansson", RequestHash: "hash-1", CorrelationID: "corr-1", RequestID: "req-1",
	}
}

func TestStartRecordsTheCollection(t *testing.T) {
	f := newFixture(t)
	created, err := f.svc.Start(context.Background(), startCmd())
	if err != nil {
		t.Fatal(err)
	}
	id, err := uuid.Parse(created.CollectionID)
	if err != nil || id.Version() != 7 {
		t.Fatalf("id %q is not a UUIDv7 (%v)", created.CollectionID, err)
	}
	if created.Status != collection.StatusRunning || !created.CreatedAt.Equal(testNow.Truncate(time.Millisecond)) || created.Replayed {
		t.Fatalf("created = %+v", created)
	}
	agg, err := f.repo.Load(context.Background(), created.CollectionID)
	if err != nil {
		t.Fatal(err)
	}
	if agg.ClientID() != "acme" || agg.Company() != "se-demo-insurer" || agg.Product() != collection.ProductInsurance ||
		agg.Person().PersonalNumber != "199001010017" || agg.RequestHash() != "hash-1" || agg.APIVersion() != "2026-04-01" {
		t.Fatalf("stored collection = %+v", agg)
	}
	env := f.store.Events(collection.StreamName(created.CollectionID))[0]
	if env.Tenant != "acme" || env.CorrelationID != "corr-1" || env.CausationID != "req-1" || env.Actor != "client:acme" {
		t.Fatalf("envelope meta = %+v", env)
	}
}

func TestStartWithoutKeyCreatesDistinctCollections(t *testing.T) {
	f := newFixture(t)
	a, err := f.svc.Start(context.Background(), startCmd())
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.svc.Start(context.Background(), startCmd())
	if err != nil {
		t.Fatal(err)
	}
	if a.CollectionID == b.CollectionID {
		t.Fatal("two requests without a key got one collection")
	}
}

func TestIdempotentRetry(t *testing.T) {
	f := newFixture(t)
	cmd := startCmd()
	cmd.IdempotencyKey = "key-1"
	first, err := f.svc.Start(context.Background(), cmd)
	if err != nil {
		t.Fatal(err)
	}
	if first.CollectionID != app.CollectionIDForKey("acme", "key-1") {
		t.Fatalf("id %s is not derived from the key", first.CollectionID)
	}
	again, err := f.svc.Start(context.Background(), cmd)
	if err != nil {
		t.Fatal(err)
	}
	if again.CollectionID != first.CollectionID || !again.CreatedAt.Equal(first.CreatedAt) || !again.Replayed {
		t.Fatalf("retry = %+v, first %+v", again, first)
	}
	if f.store.Appends() != 1 {
		t.Fatalf("appends = %d, want 1", f.store.Appends())
	}

	other := cmd
	other.RequestHash = "hash-2"
	if _, err := f.svc.Start(context.Background(), other); !errors.Is(err, app.ErrIdempotencyKeyReused) || !errors.Is(err, domain.ErrRefused) {
		t.Fatalf("same key, other request: %v", err)
	}

	// Another client with the same key is a different collection.
	otherTenant := cmd
	otherTenant.Tenant = "globex"
	created, err := f.svc.Start(context.Background(), otherTenant)
	if err != nil || created.CollectionID == first.CollectionID || created.Replayed {
		t.Fatalf("other tenant, same key: %+v %v", created, err)
	}
}

// staleStore answers the first read as if the stream did not exist yet, as a request racing with
// another one for the same key would see it.
type staleStore struct {
	*memstore.Store
	once sync.Once
}

func (s *staleStore) ReadStream(ctx context.Context, stream string, from uint64, limit int) ([]eventschema.Envelope, error) {
	stale := false
	s.once.Do(func() { stale = true })
	if stale {
		return nil, fmt.Errorf("read stream %s: %w", stream, eventstore.ErrStreamNotFound)
	}
	return s.Store.ReadStream(ctx, stream, from, limit)
}

func TestIdempotentRaceLandsOnTheWinner(t *testing.T) {
	f := newFixture(t)
	cmd := startCmd()
	cmd.IdempotencyKey = "key-race"
	first, err := f.svc.Start(context.Background(), cmd)
	if err != nil {
		t.Fatal(err)
	}
	racer := f.serviceOn(&staleStore{Store: f.store}, func() time.Time { return testNow.Add(time.Second) })
	got, err := racer.Start(context.Background(), cmd)
	if err != nil {
		t.Fatal(err)
	}
	if got.CollectionID != first.CollectionID || !got.CreatedAt.Equal(first.CreatedAt) || !got.Replayed {
		t.Fatalf("racer = %+v, winner %+v", got, first)
	}
	cmd.RequestHash = "different"
	racer = f.serviceOn(&staleStore{Store: f.store}, time.Now)
	if _, err := racer.Start(context.Background(), cmd); !errors.Is(err, app.ErrIdempotencyKeyReused) {
		t.Fatalf("racer with other request: %v", err)
	}
}

// A personal number that breaks a rule cannot reach Start: StartCollection carries a parsed
// personnummer.Number, and the HTTP decoder reports a bad one at its request path
// (httpcmd's TestBadPersonalNumber, personnummer's tests).
func TestStartRefusals(t *testing.T) {
	cases := []struct {
		name      string
		mutate    func(*app.StartCollection)
		wantInput string
		wantIs    error
	}{
		{"unknown company", func(c *app.StartCollection) { c.Company = "nope" }, collection.FieldCompany, domain.ErrInvalid},
		{"user uuid", func(c *app.StartCollection) { c.UserUUID = "not-a-uuid" }, app.FieldUserUUID, domain.ErrInvalid},
		{"no login method", func(c *app.StartCollection) { c.LoginMethod = "" }, collection.FieldLoginMethod, domain.ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			cmd := startCmd()
			tc.mutate(&cmd)
			_, err := f.svc.Start(context.Background(), cmd)
			var invalid *domain.FieldError
			if !errors.As(err, &invalid) || invalid.Field != tc.wantInput || !errors.Is(err, tc.wantIs) {
				t.Fatalf("err = %v, want invalid %s", err, tc.wantInput)
			}
			if invalid.Reason == "" || containsDigits(invalid.Reason, "19900101") {
				t.Fatalf("reason %q is empty or echoes the input", invalid.Reason)
			}
			if f.store.Appends() != 0 {
				t.Fatal("a refused start appended")
			}
		})
	}
}

func containsDigits(s, digits string) bool {
	for i := 0; i+len(digits) <= len(s); i++ {
		if s[i:i+len(digits)] == digits {
			return true
		}
	}
	return false
}

func TestStartAtUnavailableCompany(t *testing.T) {
	f := newFixture(t)
	cmd := startCmd()
	cmd.Company = "se-demo-maintenance"
	_, err := f.svc.Start(context.Background(), cmd)
	var unavailable *app.CompanyUnavailableError
	if !errors.As(err, &unavailable) || !errors.Is(err, collection.ErrCompanyUnavailable) || unavailable.Message == "" {
		t.Fatalf("err = %v", err)
	}
}

func TestUnsupportedLoginMethodIsAccepted(t *testing.T) {
	f := newFixture(t)
	cmd := startCmd()
	cmd.Company, cmd.LoginMethod = "ee-demo-insurer", "SWEDISH_MOBILE_EID_OTHER_DEVICE"
	created, err := f.svc.Start(context.Background(), cmd)
	if err != nil {
		t.Fatalf("the connector, not the start, refuses an unsupported method: %v", err)
	}
	agg, err := f.repo.Load(context.Background(), created.CollectionID)
	if err != nil || !agg.Exists() || agg.LoginMethod() != cmd.LoginMethod || agg.Status() != collection.StatusRunning {
		t.Fatalf("recorded collection: %+v, %v", agg, err)
	}
}

// brokenCatalog is a catalog whose backend is down.
type brokenCatalog struct{}

func (brokenCatalog) Get(string) (company.Company, error) {
	return company.Company{}, errors.New("catalog backend down")
}

func TestCatalogFaultIsNotAValidationError(t *testing.T) {
	f := newFixture(t)
	svc := app.NewCollectionService(brokenCatalog{}, f.repo, f.users, nil)
	_, err := svc.Start(context.Background(), startCmd())
	var invalid *domain.FieldError
	if err == nil || errors.As(err, &invalid) || errors.Is(err, domain.ErrInvalid) {
		t.Fatalf("err = %v", err)
	}
}
