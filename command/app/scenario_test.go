package app_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/samla/samla/command/app"
	"github.com/samla/samla/command/commandtest"
	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/command/eventstore/memstore"
	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/company/companytest"
	"github.com/samla/samla/domain/user"
	"github.com/samla/samla/eventschema"
)

// Command-level scenarios: given the events of a collection, when a command runs on the
// service, then what it appends.

func scenarioService(t *testing.T) (*commandtest.Scenario, *app.CollectionService) {
	sc := commandtest.New(t, testNow)
	return sc, app.NewCollectionService(companytest.Catalog(), commandtest.Repository(sc, collection.Kind),
		commandtest.Repository(sc, user.Kind), sc.Clock())
}

func startedWithKey(key string) collection.Started {
	created := testNow.Truncate(time.Millisecond)
	return collection.Started{CollectionID: app.CollectionIDForKey("acme", key), ClientID: "acme", Company: "se-demo-insurer",
		Product: collection.ProductInsurance, LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK", APIVersion: "2026-04-01",
		StartedAt: created,
		Personal:  &collection.StartedPerson{PersonalNumber: "199001010017", AccountOwnerName: "Tolvan Tolvansson", RequestHash: "hash-1"}}
}

func TestScenarioStart(t *testing.T) {
	cmd := startCmd()
	cmd.IdempotencyKey = "key-1"
	start := func(svc *app.CollectionService, cmd app.StartCollection) func(context.Context) error {
		return func(ctx context.Context) error { _, err := svc.Start(ctx, cmd); return err }
	}
	t.Run("a keyed start records the collection at the key's id", func(t *testing.T) {
		sc, svc := scenarioService(t)
		envs := sc.When(start(svc, cmd)).Then(startedWithKey("key-1"))
		if envs[0].Stream != collection.StreamName(app.CollectionIDForKey("acme", "key-1")) || envs[0].CausationID != "req-1" {
			t.Fatalf("envelope %+v", envs[0])
		}
	})
	t.Run("a retry appends nothing", func(t *testing.T) {
		sc, svc := scenarioService(t)
		sc.Given(collection.StreamName(app.CollectionIDForKey("acme", "key-1")), startedWithKey("key-1")).
			When(start(svc, cmd)).Then()
	})
	t.Run("the key with another request is refused", func(t *testing.T) {
		sc, svc := scenarioService(t)
		other := cmd
		other.RequestHash = "hash-2"
		sc.Given(collection.StreamName(app.CollectionIDForKey("acme", "key-1")), startedWithKey("key-1")).
			When(start(svc, other)).ThenError(app.ErrIdempotencyKeyReused)
	})
	t.Run("an unavailable company is refused", func(t *testing.T) {
		sc, svc := scenarioService(t)
		down := cmd
		down.Company = "se-demo-maintenance"
		err := sc.When(start(svc, down)).ThenError(collection.ErrCompanyUnavailable)
		var unavailable *app.CompanyUnavailableError
		if !errors.As(err, &unavailable) {
			t.Fatalf("err %v", err)
		}
	})
}

func TestScenarioSupplyInfo(t *testing.T) {
	id := app.CollectionIDForKey("acme", "key-1")
	atLogin := []domain.Event{startedWithKey("key-1"),
		collection.StatusChanged{From: collection.StatusRunning, To: collection.StatusLogin, ChangedAt: testNow}}
	given := func(sc *commandtest.Scenario, to collection.Status) *commandtest.Scenario {
		return sc.Given(collection.StreamName(id), append(atLogin,
			collection.StatusChanged{From: collection.StatusLogin, To: to, ChangedAt: testNow})...)
	}
	supply := func(svc *app.CollectionService, key string) func(context.Context) error {
		return func(ctx context.Context) error {
			cmd := supplyCmd(id)
			cmd.IdempotencyKey = key
			_, err := svc.SupplyInfo(ctx, cmd)
			return err
		}
	}
	t.Run("a contact form takes the input, stamped with its request", func(t *testing.T) {
		sc, svc := scenarioService(t)
		given(sc, collection.StatusContactFormPending).When(supply(svc, "sup-1")).Then(collection.InputSupplied{
			Kind: collection.InputKindCollectionInput, InputTypes: []string{"EMAIL", "MOBILE_PHONE_NUMBER"},
			SuppliedAt: testNow.Truncate(time.Millisecond),
			Personal:   &collection.SuppliedValues{Inputs: contactForm(), IdempotencyKey: "sup-1", RequestHash: "h1"}})
	})
	t.Run("nothing is taken while collecting", func(t *testing.T) {
		sc, svc := scenarioService(t)
		given(sc, collection.StatusCollecting).When(supply(svc, "")).ThenError(collection.ErrNotAwaitingInput)
	})
	t.Run("another client's collection is not found", func(t *testing.T) {
		sc, svc := scenarioService(t)
		given(sc, collection.StatusContactFormPending).When(func(ctx context.Context) error {
			cmd := supplyCmd(id)
			cmd.Tenant = "globex"
			_, err := svc.SupplyInfo(ctx, cmd)
			return err
		}).ThenError(app.ErrCollectionNotFound)
	})
}

// disconnectingStore is the client going away while the append runs: the request's context is
// cancelled before the store takes the events.
type disconnectingStore struct {
	*memstore.Store
	disconnect context.CancelFunc
}

func (s disconnectingStore) Append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events []eventschema.Envelope) (eventstore.AppendResult, error) {
	s.disconnect()
	return s.Store.Append(ctx, stream, expected, events)
}

func TestStartOutlivesAClientThatDisconnects(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	svc := f.serviceOn(disconnectingStore{Store: f.store, disconnect: cancel}, func() time.Time { return testNow })
	created, err := svc.Start(ctx, startCmd())
	if err != nil {
		t.Fatalf("an append that became durable is reported as %v", err)
	}
	if ctx.Err() == nil {
		t.Fatal("test setup: the request was not cancelled")
	}
	agg, err := f.repo.Load(context.Background(), created.CollectionID)
	if err != nil || !agg.Exists() {
		t.Fatalf("stored collection %+v, %v", agg, err)
	}
}
