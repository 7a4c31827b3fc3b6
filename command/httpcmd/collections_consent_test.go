package httpcmd_test

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/samla/samla/command/app"
	"github.com/samla/samla/command/commandtest"
	"github.com/samla/samla/command/httpcmd"
	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/company/companytest"
	"github.com/samla/samla/domain/consent"
	"github.com/samla/samla/domain/user"
	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/platform/httpapi/httpapitest"
)

// POST /collections with a Psd2AisConsentParameter: the consent must be usable, else 422
// CONSENT_INVALID with its reason, NO_STORED_CONSENT or CONSENT_NOT_SUPPORTED, and nothing is
// recorded; the one used is recorded on collection.started.

const (
	alice        = "6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4b"
	bob          = "6f1c2a9e-9999-4e5f-8a7b-9c0d1e2f3a4b"
	aliceConsent = "0197c0a1-1111-7e5f-8a9b-000000000001"
)

// listedConsents lists users' consents, newest first, as the consents read model does.
type listedConsents map[string][]string

func (l listedConsents) UserConsentIDs(_ context.Context, tenant, userUUID string) ([]string, error) {
	if tenant != "acme" {
		return nil, nil
	}
	return l[userUUID], nil
}

type consentStartEnv struct {
	*env
	sc *commandtest.Scenario
}

func newConsentStartEnv(t *testing.T, listed listedConsents) *consentStartEnv {
	t.Helper()
	sc := commandtest.New(t, testNow)
	sc.Given(user.StreamName(alice), user.Created{UserUUID: alice, ClientID: "acme", CreatedAt: testNow,
		Personal: &user.CreatedPerson{ExternalID: "alice", RequestHash: "h"}})
	sc.Given(user.StreamName(bob), user.Created{UserUUID: bob, ClientID: "acme", CreatedAt: testNow,
		Personal: &user.CreatedPerson{ExternalID: "bob", RequestHash: "h"}})
	repo := commandtest.Repository(sc, collection.Kind)
	svc := app.NewCollectionService(companytest.Catalog(), repo, commandtest.Repository(sc, user.Kind), sc.Clock()).
		WithConsents(commandtest.Repository(sc, consent.Kind), listed)
	e := httpapi.NewEngine(httpapi.Options{Keys: httpapitest.Keys{acmeKey: "acme", globexKey: "globex"}})
	httpcmd.RegisterRoutes(e, httpcmd.Deps{Collections: svc, FingerprintKey: fingerprintKey, Now: func() time.Time { return testNow }})
	return &consentStartEnv{env: &env{engine: e, store: sc.Store(), repo: repo}, sc: sc}
}

// aliceAuthorized are the events of an authorized consent of alice at the bank.
func aliceAuthorized(id, owner, company string, scope ...consent.Scope) []domain.Event {
	if len(scope) == 0 {
		scope = consent.AllScopes()
	}
	return []domain.Event{
		consent.Created{ConsentID: id, ClientID: "acme", UserUUID: owner, Company: company, LoginMethod: mock, Scope: scope,
			CreatedAt: testNow, Personal: &consent.CreatedPerson{PersonalNumber: "199001010017", RequestHash: "h"}},
		consent.AuthorizationStarted{At: testNow, Deadline: testNow.Add(time.Minute), BankConsentID: "bank-" + id},
		consent.Authorized{AuthorizedAt: testNow, ExpiresAt: testNow.Add(time.Hour)},
	}
}

func bankBody(userUUID string, consentParam string) string {
	b := `{"company":"se-demo-bank","loginMethod":"` + mock + `","parameters":[` + consentParam + `]`
	if userUUID != "" {
		b += `,"userUuid":"` + userUUID + `"`
	}
	return b + "}"
}

func consentParam(id string) string {
	return `{"type":"Psd2AisConsentParameter","consentId":"` + id + `","reuseStoredConsent":false}`
}

const reuseParam = `{"type":"Psd2AisConsentParameter","reuseStoredConsent":true}`

func (e *consentStartEnv) nothingRecorded(t *testing.T) {
	t.Helper()
	all, err := e.store.ReadAll(context.Background(), 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	for _, env := range all {
		if strings.HasPrefix(env.Stream, collection.StreamPrefix) {
			t.Fatalf("recorded %s on %s", env.Type, env.Stream)
		}
	}
}

func TestCollectionWithConsent(t *testing.T) {
	v2 := "2026-04-01"
	t.Run("a usable consent is recorded on the collection", func(t *testing.T) {
		e := newConsentStartEnv(t, nil)
		e.sc.Given(consent.StreamName(aliceConsent), aliceAuthorized(aliceConsent, alice, "se-demo-bank", consent.ScopeCheckingAccounts)...)
		body := created(t, e.post(t, req{version: v2, body: bankBody(alice, consentParam(strings.ToUpper(aliceConsent)))}))
		agg, err := e.repo.Load(context.Background(), body["collectionId"].(string))
		if err != nil {
			t.Fatal(err)
		}
		want := &collection.UsedConsent{ConsentID: aliceConsent, BankConsentID: "bank-" + aliceConsent,
			Scope: []consent.Scope{consent.ScopeCheckingAccounts}}
		if !reflect.DeepEqual(agg.Consent(), want) {
			t.Fatalf("consent %+v, want %+v", agg.Consent(), want)
		}
	})

	revoked := append(aliceAuthorized(aliceConsent, alice, "se-demo-bank"), consent.Revoked{At: testNow, Reason: consent.RevokedByClient})
	expired := append(aliceAuthorized(aliceConsent, alice, "se-demo-bank"), consent.Expired{At: testNow})
	for _, tc := range []struct {
		name   string
		given  []domain.Event
		reason string
	}{
		{"unknown", nil, "NOT_AUTHORIZED"},
		{"awaiting authorization", aliceAuthorized(aliceConsent, alice, "se-demo-bank")[:2], "NOT_AUTHORIZED"},
		{"revoked", revoked, "REVOKED"},
		{"expired", expired, "EXPIRED"},
		{"another user's", aliceAuthorized(aliceConsent, bob, "se-demo-bank"), "OTHER_USER"},
		{"another company's", aliceAuthorized(aliceConsent, alice, "se-demo-pension"), "OTHER_COMPANY"},
	} {
		t.Run("a consent "+tc.name+" is 422 CONSENT_INVALID "+tc.reason, func(t *testing.T) {
			e := newConsentStartEnv(t, nil)
			if len(tc.given) > 0 {
				e.sc.Given(consent.StreamName(aliceConsent), tc.given...)
			}
			w := e.post(t, req{version: v2, body: bankBody(alice, consentParam(aliceConsent))})
			p := problemOf(t, w, http.StatusUnprocessableEntity, httpcmd.CodeConsentInvalid)
			if p.Reason != tc.reason || p.Detail == "" {
				t.Fatalf("reason %q, want %s: %s", p.Reason, tc.reason, w.Body)
			}
			e.nothingRecorded(t)
		})
	}
	t.Run("another client with this client's user and consent: UNKNOWN_USER is said first", func(t *testing.T) {
		e := newConsentStartEnv(t, nil)
		e.sc.Given(consent.StreamName(aliceConsent), aliceAuthorized(aliceConsent, alice, "se-demo-bank")...)
		w := e.post(t, req{version: v2, key: globexKey, body: bankBody(alice, consentParam(aliceConsent))})
		problemOf(t, w, http.StatusUnprocessableEntity, httpcmd.CodeUnknownUser)
		e.nothingRecorded(t)
	})
	t.Run("reuse takes the user's newest usable consent", func(t *testing.T) {
		newer := "0197c0a1-1111-7e5f-8a9b-000000000002"
		e := newConsentStartEnv(t, listedConsents{alice: {newer, aliceConsent}})
		e.sc.Given(consent.StreamName(newer), aliceAuthorized(newer, alice, "se-demo-bank", consent.ScopeCreditCards)...).
			Given(consent.StreamName(aliceConsent), aliceAuthorized(aliceConsent, alice, "se-demo-bank")...)
		body := created(t, e.post(t, req{version: v2, body: bankBody(alice, reuseParam)}))
		agg, err := e.repo.Load(context.Background(), body["collectionId"].(string))
		if err != nil {
			t.Fatal(err)
		}
		if u := agg.Consent(); u == nil || u.ConsentID != newer {
			t.Fatalf("consent %+v, want %s", u, newer)
		}
	})
	t.Run("reuse without a usable consent is 422 NO_STORED_CONSENT", func(t *testing.T) {
		e := newConsentStartEnv(t, listedConsents{alice: {aliceConsent}})
		e.sc.Given(consent.StreamName(aliceConsent), revoked...)
		problemOf(t, e.post(t, req{version: v2, body: bankBody(alice, reuseParam)}), http.StatusUnprocessableEntity, httpcmd.CodeNoStoredConsent)
		e.nothingRecorded(t)
	})
	t.Run("a consent at a company without consents is 422 CONSENT_NOT_SUPPORTED", func(t *testing.T) {
		e := newConsentStartEnv(t, nil)
		e.sc.Given(consent.StreamName(aliceConsent), aliceAuthorized(aliceConsent, alice, "se-demo-bank")...)
		for _, param := range []string{consentParam(aliceConsent), reuseParam} {
			body := strings.Replace(bankBody(alice, param), "se-demo-bank", "se-demo-pension", 1)
			problemOf(t, e.post(t, req{version: v2, body: body}), http.StatusUnprocessableEntity, httpcmd.CodeConsentNotSupported)
		}
		e.nothingRecorded(t)
	})
	t.Run("a consent without the collection's userUuid is 400", func(t *testing.T) {
		e := newConsentStartEnv(t, nil)
		for _, param := range []string{consentParam(aliceConsent), reuseParam} {
			p := problemOf(t, e.post(t, req{version: v2, body: bankBody("", param)}), http.StatusBadRequest, httpapi.CodeValidationFailed)
			if !hasField(p, "userUuid") {
				t.Fatalf("errors = %+v", p.Errors)
			}
		}
	})
	t.Run("a consentId that is no UUID is 400", func(t *testing.T) {
		e := newConsentStartEnv(t, nil)
		for _, id := range []string{"does-not-exist", ""} {
			p := problemOf(t, e.post(t, req{version: v2, body: bankBody(alice, `{"type":"Psd2AisConsentParameter","consentId":"`+id+`","reuseStoredConsent":true}`)}),
				http.StatusBadRequest, httpapi.CodeValidationFailed)
			if !hasField(p, "parameters[0].consentId") {
				t.Fatalf("errors = %+v", p.Errors)
			}
		}
	})
	t.Run("reuseStoredConsent false without an id asks for no consent", func(t *testing.T) {
		e := newConsentStartEnv(t, nil)
		body := created(t, e.post(t, req{version: v2, body: bankBody("", `{"type":"Psd2AisConsentParameter","reuseStoredConsent":false}`)}))
		agg, err := e.repo.Load(context.Background(), body["collectionId"].(string))
		if err != nil {
			t.Fatal(err)
		}
		if agg.Consent() != nil {
			t.Fatalf("consent %+v", agg.Consent())
		}
	})
	t.Run("consentId without reuseStoredConsent names the consent, the flag read as false", func(t *testing.T) {
		e := newConsentStartEnv(t, nil)
		e.sc.Given(consent.StreamName(aliceConsent), aliceAuthorized(aliceConsent, alice, "se-demo-bank")...)
		alone := `{"type":"Psd2AisConsentParameter","consentId":"` + aliceConsent + `"}`
		first := created(t, e.post(t, req{version: v2, idem: "k-alone", body: bankBody(alice, alone)}))
		agg, err := e.repo.Load(context.Background(), first["collectionId"].(string))
		if err != nil {
			t.Fatal(err)
		}
		if u := agg.Consent(); u == nil || u.ConsentID != aliceConsent {
			t.Fatalf("consent %+v, want %s", u, aliceConsent)
		}
		// The same request spelled with the flag false is the same request, not a reused key.
		w := e.post(t, req{version: v2, idem: "k-alone", body: bankBody(alice, consentParam(aliceConsent))})
		if again := created(t, w); again["collectionId"] != first["collectionId"] || w.Header().Get("Idempotent-Replayed") != "true" {
			t.Fatalf("retry %v, first %v", again, first)
		}
	})
	for _, tc := range []struct{ name, param string }{
		{"neither consentId nor reuseStoredConsent", `{"type":"Psd2AisConsentParameter"}`},
		{"a reuseStoredConsent that is no bool", `{"type":"Psd2AisConsentParameter","consentId":"` + aliceConsent + `","reuseStoredConsent":"yes"}`},
		{"a null reuseStoredConsent without a consentId", `{"type":"Psd2AisConsentParameter","consentId":null,"reuseStoredConsent":null}`},
	} {
		t.Run(tc.name+" is 400 at reuseStoredConsent", func(t *testing.T) {
			e := newConsentStartEnv(t, nil)
			e.sc.Given(consent.StreamName(aliceConsent), aliceAuthorized(aliceConsent, alice, "se-demo-bank")...)
			p := problemOf(t, e.post(t, req{version: v2, body: bankBody(alice, tc.param)}), http.StatusBadRequest, httpapi.CodeValidationFailed)
			if !hasField(p, "parameters[0].reuseStoredConsent") {
				t.Fatalf("errors = %+v", p.Errors)
			}
			e.nothingRecorded(t)
		})
	}
	t.Run("a consent signed for another person than the collection names is 422 CONSENT_INVALID OTHER_USER", func(t *testing.T) {
		e := newConsentStartEnv(t, listedConsents{alice: {aliceConsent}})
		e.sc.Given(consent.StreamName(aliceConsent), aliceAuthorized(aliceConsent, alice, "se-demo-bank")...) // for 199001010017
		for _, person := range []string{
			`{"type":"SwedishPersonalNumberParameter","personalNumber":"19850709-9805"}`,
			`{"type":"SwedishEidParameter","personalNumber":"198507099805"}`,
		} {
			w := e.post(t, req{version: v2, body: bankBody(alice, person+","+consentParam(aliceConsent))})
			p := problemOf(t, w, http.StatusUnprocessableEntity, httpcmd.CodeConsentInvalid)
			if p.Reason != "OTHER_USER" {
				t.Fatalf("reason %q, want OTHER_USER: %s", p.Reason, w.Body)
			}
			// Nor is it picked for reuse.
			problemOf(t, e.post(t, req{version: v2, body: bankBody(alice, person+","+reuseParam)}),
				http.StatusUnprocessableEntity, httpcmd.CodeNoStoredConsent)
		}
		e.nothingRecorded(t)
		// The same person, in another spelling, may use it.
		created(t, e.post(t, req{version: v2, body: bankBody(alice,
			`{"type":"SwedishPersonalNumberParameter","personalNumber":"900101-0017"},`+consentParam(aliceConsent))}))
	})
	t.Run("a retry is answered as it was after the consent was revoked", func(t *testing.T) {
		e := newConsentStartEnv(t, nil)
		e.sc.Given(consent.StreamName(aliceConsent), aliceAuthorized(aliceConsent, alice, "se-demo-bank")...)
		r := req{version: v2, idem: "k-1", body: bankBody(alice, consentParam(aliceConsent))}
		first := created(t, e.post(t, r))
		e.sc.Given(consent.StreamName(aliceConsent), consent.Revoked{At: testNow, Reason: consent.RevokedByClient})
		w := e.post(t, r)
		if again := created(t, w); again["collectionId"] != first["collectionId"] || w.Header().Get("Idempotent-Replayed") != "true" {
			t.Fatalf("retry %v, first %v", again, first)
		}
	})
}
