package httpcmd_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/samla/samla/command/app"
	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/command/eventstore/memstore"
	"github.com/samla/samla/command/httpcmd"
	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/cancellation"
	"github.com/samla/samla/domain/client"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/platform/httpapi/httpapitest"
	"github.com/samla/samla/platform/keystore"
)

const (
	cancelColl = "0197c0a1-2222-7e5f-8a9b-000000000002"
	callbackOK = "good-signature"
)

// cancellationEnv serves the cancellation commands over one in-memory event store holding
// acme's completed insurance collection cancelColl (insurances i1, i2) and acme's signing
// configuration; globex has none.
type cancellationEnv struct {
	*sessionEnv
	store *memstore.Store
	reg   *eventschema.Registry
}

// fakeVerifier accepts a callback whose Signing-Signature header is callbackOK under the key
// acme's configuration holds: the real check is the provider adapter's, tested there.
type fakeVerifier struct{}

func (fakeVerifier) VerifyCallback(key string, h http.Header, body []byte, _ time.Time) (app.ProviderCallback, error) {
	if key != "provider-key-0123456789" || h.Get("Signing-Signature") != callbackOK {
		return app.ProviderCallback{}, errors.New("bad signature")
	}
	var cb struct{ EventID, Reference string }
	if err := json.Unmarshal(body, &cb); err != nil {
		return app.ProviderCallback{}, err
	}
	return app.ProviderCallback{EventID: cb.EventID, Reference: cb.Reference}, nil
}

func newCancellationEnv(t *testing.T) *cancellationEnv {
	t.Helper()
	reg, err := eventschema.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	store := memstore.New()
	clock := func() time.Time { return testNow }
	env := &cancellationEnv{store: store, reg: reg}
	env.given(t, client.StreamName("acme"), client.Registered{ClientID: "acme", Name: "Acme", RegisteredAt: testNow},
		client.SigningConfigured{TemplateVersion: 1, Template: "T", TemplateHash: "sha256:t", ConfiguredAt: testNow,
			Personal: &client.SigningSecret{ProviderKey: "provider-key-0123456789"}})
	env.given(t, client.StreamName("globex"), client.Registered{ClientID: "globex", Name: "Globex", RegisteredAt: testNow})
	env.given(t, collection.StreamName(cancelColl),
		collection.Started{CollectionID: cancelColl, ClientID: "acme", Company: "se-demo-insurer", Product: collection.ProductInsurance,
			LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK", APIVersion: "2026-04-01", UserUUID: aliceUUID, StartedAt: testNow,
			Personal: &collection.StartedPerson{PersonalNumber: "191212121212", RequestHash: "h"}},
		collection.StatusChanged{From: collection.StatusRunning, To: collection.StatusCollecting, ChangedAt: testNow},
		collection.InsurancesCollected{InsuranceCount: 2, CollectedAt: testNow, Personal: &collection.InsuranceRecords{
			Insurances: []collection.Insurance{{ID: "i1"}, {ID: "i2"}}}},
		collection.StatusChanged{From: collection.StatusCollecting, To: collection.StatusCompleted, ChangedAt: testNow})
	svc := app.NewCancellationService(repository.New(store, reg, cancellation.Kind, repository.WithClock(clock)),
		repository.New(store, reg, collection.Kind, repository.WithClock(clock)), repository.New(store, reg, client.Kind, repository.WithClock(clock)),
		keystore.Erasures{Keys: keystore.NewMemory()}, clock)
	base := newSessionEnv(t)
	e := httpapi.NewEngine(httpapi.Options{Keys: httpapitest.Keys{acmeKey: "acme", globexKey: "globex"},
		Sessions: base.tokens, SessionUsers: base.users})
	httpcmd.RegisterRoutes(e, httpcmd.Deps{Collections: &recordingCommands{}, FingerprintKey: fingerprintKey, Now: clock,
		Cancellations: svc, CallbackVerifier: fakeVerifier{}})
	httpcmd.RegisterSessionRoutes(e, httpcmd.SessionDeps{Issuer: base.tokens, Users: base.users})
	env.sessionEnv = &sessionEnv{engine: e, tokens: base.tokens, users: base.users}
	return env
}

func (e *cancellationEnv) given(t *testing.T, stream string, events ...domain.Event) {
	t.Helper()
	envs := make([]eventschema.Envelope, len(events))
	for i, ev := range events {
		typ, version, payload, err := e.reg.Encode(ev)
		if err != nil {
			t.Fatal(err)
		}
		envs[i] = eventschema.Envelope{EventID: uuid.NewString(), Type: typ, SchemaVersion: version, OccurredAt: testNow, Payload: payload}
	}
	if _, err := e.store.Append(context.Background(), stream, eventstore.Any(), envs); err != nil {
		t.Fatal(err)
	}
}

func (e *cancellationEnv) count(t *testing.T) int {
	t.Helper()
	all, err := e.store.ReadAll(context.Background(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return len(all)
}

func cancelBody(insurances string, extra string) string {
	return `{"collectionId":"` + cancelColl + `","insuranceIds":[` + insurances + `],"deliveryMethod":"EMAIL","email":"tolvan@example.se"` + extra + `}`
}

func TestRequestCancellationsOverHTTP(t *testing.T) {
	e := newCancellationEnv(t)
	w := e.do(http.MethodPost, "/cancellations", cancelBody(`"i1","i2"`, ""), acmeKey, "", httpapi.HeaderIdempotencyKey, "k1")
	if w.Code != http.StatusCreated {
		t.Fatalf("POST = %d %s", w.Code, w.Body)
	}
	var out struct {
		Cancellations []struct{ DocumentID, InsuranceID, Status string }
	}
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || len(out.Cancellations) != 2 ||
		out.Cancellations[0].InsuranceID != "i1" || out.Cancellations[0].Status != "PREPARATION" {
		t.Fatalf("body %s", w.Body)
	}
	retry := e.do(http.MethodPost, "/cancellations", cancelBody(`"i1","i2"`, ""), acmeKey, "", httpapi.HeaderIdempotencyKey, "k1")
	if retry.Code != http.StatusCreated || retry.Body.String() != w.Body.String() || retry.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry = %d %s", retry.Code, retry.Body)
	}
	before := e.count(t)
	for _, tc := range []struct {
		name, body, key string
		status          int
		code            string
	}{
		{"a live cancellation", cancelBody(`"i2"`, ""), acmeKey, http.StatusConflict, httpcmd.CodeCancellationExists},
		{"duplicate ids", cancelBody(`"i1","i1"`, ""), acmeKey, http.StatusBadRequest, httpapi.CodeValidationFailed},
		{"no address", `{"collectionId":"` + cancelColl + `","insuranceIds":["i1"],"deliveryMethod":"SMS"}`, acmeKey,
			http.StatusBadRequest, httpapi.CodeValidationFailed},
		{"a malformed e-mail", strings.Replace(cancelBody(`"i1"`, ""), "tolvan@example.se", "tolvan", 1), acmeKey,
			http.StatusBadRequest, httpapi.CodeValidationFailed},
		{"no collection id", `{"insuranceIds":["i1"],"deliveryMethod":"EMAIL","email":"a@b.se"}`, acmeKey, http.StatusBadRequest, httpapi.CodeValidationFailed},
		{"an unknown member", cancelBody(`"i1"`, `,"fax":"1"`), acmeKey, http.StatusBadRequest, ""},
		{"an insurance it lacks", cancelBody(`"i9"`, ""), acmeKey, http.StatusUnprocessableEntity, httpcmd.CodeUnknownInsurance},
		{"a client without signing configuration", cancelBody(`"i1"`, ""), globexKey, http.StatusUnprocessableEntity, httpcmd.CodeSigningNotConfigured},
		{"the key with another body", cancelBody(`"i1"`, ""), acmeKey, http.StatusUnprocessableEntity, httpcmd.CodeIdempotencyKeyReused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			headers := []string{}
			if tc.name == "the key with another body" {
				headers = []string{httpapi.HeaderIdempotencyKey, "k1"}
			}
			w := e.do(http.MethodPost, "/cancellations", tc.body, tc.key, "", headers...)
			if tc.code == "" {
				if w.Code != tc.status {
					t.Fatalf("= %d %s", w.Code, w.Body)
				}
				return
			}
			problemOf(t, w, tc.status, tc.code)
		})
	}
	if after := e.count(t); after != before {
		t.Fatalf("refused requests appended %d events", after-before)
	}

	t.Run("DELETE withdraws, then 409; another client's is 404", func(t *testing.T) {
		doc := out.Cancellations[0].DocumentID
		problemOf(t, e.do(http.MethodDelete, "/cancellations/"+doc, "", globexKey, ""), http.StatusNotFound, httpcmd.CodeCancellationNotFound)
		w := e.do(http.MethodDelete, "/cancellations/"+doc, "", acmeKey, "")
		var got map[string]any
		if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &got) != nil || got["status"] != "CANCELED" ||
			got["collectionId"] != cancelColl || got["isSignedAndSealed"] != false || got["company"] != "se-demo-insurer" {
			t.Fatalf("DELETE = %d %s", w.Code, w.Body)
		}
		problemOf(t, e.do(http.MethodDelete, "/cancellations/"+doc, "", acmeKey, ""), http.StatusConflict, httpcmd.CodeCancellationFinal)
		problemOf(t, e.do(http.MethodDelete, "/cancellations/not-a-uuid", "", acmeKey, ""), http.StatusNotFound, httpcmd.CodeCancellationNotFound)
	})
	t.Run("a session cancels from its own user's collection only", func(t *testing.T) {
		alice, _ := e.createSession(t, aliceUUID)
		bob, _ := e.createSession(t, bobUUID)
		problemOf(t, e.do(http.MethodPost, "/cancellations", cancelBody(`"i1"`, ""), "", bob), http.StatusForbidden, httpapi.CodeForbiddenForSession)
		if w := e.do(http.MethodPost, "/cancellations", cancelBody(`"i1"`, ""), "", alice); w.Code != http.StatusCreated {
			t.Fatalf("alice's session = %d %s", w.Code, w.Body)
		}
	})
	t.Run("the provider's callback: signed, once, for the client's own cancellation", func(t *testing.T) {
		doc := out.Cancellations[1].DocumentID
		call := func(client, signature, eventID string) int {
			body := `{"eventId":"` + eventID + `","reference":"` + doc + `"}`
			return e.do(http.MethodPost, "/callbacks/signing/"+client, body, "", "", "Signing-Signature", signature).Code
		}
		n := e.count(t)
		if got := call("acme", "forged", "e1"); got != http.StatusUnauthorized {
			t.Fatalf("forged = %d", got)
		}
		if got := call("globex", callbackOK, "e1"); got != http.StatusUnauthorized {
			t.Fatalf("a client without configuration = %d", got)
		}
		if got := call("acme", callbackOK, "e1"); got != http.StatusNoContent {
			t.Fatalf("signed = %d", got)
		}
		if got := call("acme", callbackOK, "e1"); got != http.StatusNoContent {
			t.Fatalf("replayed = %d", got)
		}
		if after := e.count(t); after != n+1 {
			t.Fatalf("callbacks appended %d events, want 1", after-n)
		}
	})
}
