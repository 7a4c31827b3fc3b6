package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/samla/samla/command/app"
	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/command/eventstore/memstore"
	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/personnummer"
	"github.com/samla/samla/eventschema"
)

// moveTo starts a collection and moves it through LOGIN to status with details, as the
// connector would, returning its id.
func moveTo(t *testing.T, f *fixture, status collection.Status, details collection.StatusDetails) string {
	t.Helper()
	ctx := context.Background()
	created, err := f.svc.Start(ctx, startCmd())
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		to collection.Status
		d  collection.StatusDetails
	}{{collection.StatusLogin, collection.StatusDetails{}}, {status, details}} {
		changeStatus(t, f, created.CollectionID, step.to, step.d)
	}
	return created.CollectionID
}

func changeStatus(t *testing.T, f *fixture, id string, to collection.Status, d collection.StatusDetails) {
	t.Helper()
	if _, _, err := f.repo.Update(context.Background(), id, repository.Meta{Tenant: "acme", Actor: "connector"}, func(c *collection.Collection) error {
		return c.ChangeStatusWith(to, d, testNow)
	}); err != nil {
		t.Fatal(err)
	}
}

func contactForm() []collection.Input {
	return []collection.Input{{Type: "EMAIL", Value: "a@b.se"}, {Type: "MOBILE_PHONE_NUMBER", Value: "46701234567"}}
}

func supplyCmd(id string) app.SupplyInfo {
	return app.SupplyInfo{Tenant: "acme", CollectionID: id, Kind: collection.InputKindCollectionInput,
		Inputs: contactForm(), RequestHash: "h1", CorrelationID: "corr-2", RequestID: "req-2"}
}

func streamLen(f *fixture, id string) int { return len(f.store.Events(collection.StreamName(id))) }

func TestSupplyInfoAcceptsContactForm(t *testing.T) {
	f := newFixture(t)
	id := moveTo(t, f, collection.StatusContactFormPending, collection.StatusDetails{})
	cmd := supplyCmd(id)
	cmd.IdempotencyKey = "sup-1"
	got, err := f.svc.SupplyInfo(context.Background(), cmd)
	if err != nil || got.Replayed {
		t.Fatalf("SupplyInfo = %+v, %v", got, err)
	}
	agg, err := f.repo.Load(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	s := agg.SuppliedInput()
	if s == nil || s.Kind != collection.InputKindCollectionInput || s.Personal.IdempotencyKey != "sup-1" || s.Personal.RequestHash != "h1" ||
		len(s.Personal.Inputs) != 2 || s.Personal.Inputs[0].Value != "a@b.se" {
		t.Fatalf("supplied = %+v", s)
	}
	stream := f.store.Events(collection.StreamName(id))
	env := stream[len(stream)-1]
	if env.Type != collection.EventInputSupplied || env.Tenant != "acme" || env.CorrelationID != "corr-2" ||
		env.CausationID != "req-2" || env.Actor != "client:acme" {
		t.Fatalf("envelope = %+v", env)
	}
	// The key and the fingerprint identify the request in the personal part only.
	var payload struct {
		IdempotencyKey *string `json:"idempotencyKey"`
		RequestHash    *string `json:"requestHash"`
		Personal       struct {
			IdempotencyKey string `json:"idempotencyKey"`
			RequestHash    string `json:"requestHash"`
		} `json:"personal"`
	}
	if err := json.Unmarshal(env.Payload, &payload); err != nil || payload.Personal.IdempotencyKey != "sup-1" ||
		payload.Personal.RequestHash != "h1" || payload.IdempotencyKey != nil || payload.RequestHash != nil {
		t.Fatalf("payload = %s (%v)", env.Payload, err)
	}
}

func TestSupplyInfoRejectedInputRecordsNothing(t *testing.T) {
	f := newFixture(t)
	id := moveTo(t, f, collection.StatusContactFormPending, collection.StatusDetails{})
	before := streamLen(f, id)
	cmd := supplyCmd(id)
	cmd.Inputs = []collection.Input{{Type: "EMAIL", Value: "not-an-address"}, {Type: "MOBILE_PHONE_NUMBER", Value: "+46 70"}}
	_, err := f.svc.SupplyInfo(context.Background(), cmd)
	var rejected *domain.InvalidFieldsError
	if !errors.As(err, &rejected) || !errors.Is(err, domain.ErrInvalid) || len(rejected.Fields) != 2 ||
		rejected.Fields[0].Field != "inputs[0].value" || rejected.Fields[1].Field != "inputs[1].value" {
		t.Fatalf("err = %v", err)
	}
	if streamLen(f, id) != before {
		t.Fatal("a rejected input was recorded")
	}
}

func TestSupplyInfoNotAwaiting(t *testing.T) {
	f := newFixture(t)
	id := moveTo(t, f, collection.StatusCollecting, collection.StatusDetails{})
	before := streamLen(f, id)
	if _, err := f.svc.SupplyInfo(context.Background(), supplyCmd(id)); !errors.Is(err, collection.ErrNotAwaitingInput) {
		t.Fatalf("err = %v", err)
	}
	cmd := supplyCmd(id)
	cmd.Kind, cmd.Inputs, cmd.Responses = collection.InputKindClientResponses, nil, []collection.ClientResponse{{RequestID: "r1", Status: 200}}
	if _, err := f.svc.SupplyInfo(context.Background(), cmd); !errors.Is(err, collection.ErrNotAwaitingInput) {
		t.Fatalf("responses: err = %v", err)
	}
	if streamLen(f, id) != before {
		t.Fatal("a refused input was recorded")
	}
}

func TestSupplyInfoNotFound(t *testing.T) {
	f := newFixture(t)
	id := moveTo(t, f, collection.StatusContactFormPending, collection.StatusDetails{})
	other := supplyCmd(id)
	other.Tenant = "globex"
	if _, err := f.svc.SupplyInfo(context.Background(), other); !errors.Is(err, app.ErrCollectionNotFound) {
		t.Fatalf("another client's collection: %v", err)
	}
	if _, err := f.svc.SupplyInfo(context.Background(), supplyCmd(uuid.NewString())); !errors.Is(err, app.ErrCollectionNotFound) {
		t.Fatalf("unknown collection: %v", err)
	}
}

func TestSupplyInfoClientResponses(t *testing.T) {
	f := newFixture(t)
	id := moveTo(t, f, collection.StatusWaitingForUserAction, collection.StatusDetails{Instructions: []collection.Instruction{
		{RequestID: "r1", Method: "POST", URL: "https://company.example/eid/start"}}})
	cmd := supplyCmd(id)
	cmd.Kind, cmd.Inputs = collection.InputKindClientResponses, nil
	cmd.Responses = []collection.ClientResponse{{RequestID: "r1", Status: 200, Headers: map[string]string{"Content-Type": "application/json"}, Body: `{"ok":true}`}}
	if _, err := f.svc.SupplyInfo(context.Background(), cmd); err != nil {
		t.Fatal(err)
	}
	agg, _ := f.repo.Load(context.Background(), id)
	if s := agg.SuppliedInput(); s == nil || s.Kind != collection.InputKindClientResponses || s.RequestIDs[0] != "r1" {
		t.Fatalf("supplied = %+v", s)
	}
}

func TestSupplyInfoIdempotentRetry(t *testing.T) {
	f := newFixture(t)
	id := moveTo(t, f, collection.StatusContactFormPending, collection.StatusDetails{})
	cmd := supplyCmd(id)
	cmd.IdempotencyKey = "sup-1"
	if _, err := f.svc.SupplyInfo(context.Background(), cmd); err != nil {
		t.Fatal(err)
	}
	appends := f.store.Appends()
	again, err := f.svc.SupplyInfo(context.Background(), cmd)
	if err != nil || !again.Replayed || f.store.Appends() != appends {
		t.Fatalf("retry = %+v, %v (appends %d → %d)", again, err, appends, f.store.Appends())
	}
	other := cmd
	other.RequestHash = "h2"
	if _, err := f.svc.SupplyInfo(context.Background(), other); !errors.Is(err, app.ErrIdempotencyKeyReused) || !errors.Is(err, domain.ErrRefused) {
		t.Fatalf("same key, other body: %v", err)
	}
	// Without a key, a second input is a conflict: the status took its input already.
	noKey := cmd
	noKey.IdempotencyKey = ""
	if _, err := f.svc.SupplyInfo(context.Background(), noKey); !errors.Is(err, collection.ErrNotAwaitingInput) {
		t.Fatalf("second input without a key: %v", err)
	}

	// The connector moves on; the first answer is still what a retry gets.
	changeStatus(t, f, id, collection.StatusCollecting, collection.StatusDetails{})
	again, err = f.svc.SupplyInfo(context.Background(), cmd)
	if err != nil || !again.Replayed {
		t.Fatalf("retry after the status moved on = %+v, %v", again, err)
	}
	if _, err := f.svc.SupplyInfo(context.Background(), other); !errors.Is(err, app.ErrIdempotencyKeyReused) {
		t.Fatalf("same key, other body, after the status moved on: %v", err)
	}
	if f.store.Appends() != appends+1 { // only the status change
		t.Fatalf("appends = %d, want %d", f.store.Appends(), appends+1)
	}
}

// racingStore lets the connector append to the stream between the service's load and its
// append, on the first appends, as a real race would.
type racingStore struct {
	*memstore.Store
	connector *repository.Repository[*collection.Collection] // appends to the store underneath
	races     atomic.Int32                                   // appends still to be raced
	saves     atomic.Int32
}

func (r *racingStore) Append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events []eventschema.Envelope) (eventstore.AppendResult, error) {
	r.saves.Add(1)
	if r.races.Add(-1) >= 0 {
		// The connector re-claims the collection in between: a legal append that moves the revision.
		id := strings.TrimPrefix(stream, collection.StreamPrefix)
		if _, _, err := r.connector.Update(ctx, id, repository.Meta{Tenant: "acme", Actor: "connector"}, func(c *collection.Collection) error {
			return c.Claim("w1", testNow, time.Minute)
		}); err != nil {
			return eventstore.AppendResult{}, err
		}
	}
	return r.Store.Append(ctx, stream, expected, events)
}

func TestSupplyInfoRetriesOnConflict(t *testing.T) {
	f := newFixture(t)
	id := moveTo(t, f, collection.StatusContactFormPending, collection.StatusDetails{})
	racer := &racingStore{Store: f.store, connector: f.repo}
	racer.races.Store(2)
	svc := f.serviceOn(racer, func() time.Time { return testNow })
	if _, err := svc.SupplyInfo(context.Background(), supplyCmd(id)); err != nil {
		t.Fatalf("SupplyInfo after two conflicts: %v", err)
	}
	if racer.saves.Load() != 3 {
		t.Fatalf("saves = %d, want 3", racer.saves.Load())
	}
	agg, _ := f.repo.Load(context.Background(), id)
	if agg.SuppliedInput() == nil {
		t.Fatal("the input was not recorded")
	}

	// A stream that never stops moving ends in an error, not a hang.
	id = moveTo(t, f, collection.StatusContactFormPending, collection.StatusDetails{})
	racer.races.Store(1000)
	racer.saves.Store(0)
	_, err := svc.SupplyInfo(context.Background(), supplyCmd(id))
	if !errors.Is(err, eventstore.ErrWrongExpectedRevision) || racer.saves.Load() != repository.DefaultMaxAttempts {
		t.Fatalf("endless conflicts: %v after %d saves", err, racer.saves.Load())
	}
}

func TestStartWithPDFRecordsTheDocument(t *testing.T) {
	f := newFixture(t)
	cmd := startCmd()
	cmd.LoginMethod, cmd.PersonalNumber, cmd.AccountOwnerName = "PDF_UPLOAD", personnummer.Number{}, ""
	content := []byte("%PDF-1.7\nletter")
	cmd.PDF = &app.PDFUpload{FileName: "letter.pdf", Content: content}
	created, err := f.svc.Start(context.Background(), cmd)
	if err != nil {
		t.Fatal(err)
	}
	if f.store.Appends() != 1 {
		t.Fatalf("appends = %d, want 1: the document belongs to the start", f.store.Appends())
	}
	stream := f.store.Events(collection.StreamName(created.CollectionID))
	if len(stream) != 2 || stream[0].Type != collection.EventStarted || stream[1].Type != collection.EventDocumentUploaded {
		t.Fatalf("stream = %+v", stream)
	}
	agg, err := f.repo.Load(context.Background(), created.CollectionID)
	if err != nil {
		t.Fatal(err)
	}
	docs := agg.Documents()
	if len(docs) != 1 || docs[0].Personal == nil || docs[0].Personal.FileName != "letter.pdf" || !bytes.Equal(docs[0].Personal.Content, content) {
		t.Fatalf("documents = %+v", docs)
	}
	if _, err := uuid.Parse(docs[0].DocumentID); err != nil {
		t.Fatalf("document id %q: %v", docs[0].DocumentID, err)
	}
}
