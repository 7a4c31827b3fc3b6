package httpcmd_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/samla/samla/command/app"
	"github.com/samla/samla/command/eventstore/memstore"
	"github.com/samla/samla/command/httpcmd"
	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/company/companytest"
	"github.com/samla/samla/domain/consent"
	"github.com/samla/samla/domain/user"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/platform/httpapi/httpapitest"
	"github.com/samla/samla/platform/keystore"
	"github.com/samla/samla/platform/sessiontoken"
)

// consentEnv serves the command routes, consents included, over one in-memory event store, with
// users' sessions: the real services, as the command role runs them.
type consentEnv struct {
	*sessionEnv
	store *memstore.Store
	reg   *eventschema.Registry
}

func newConsentEnv(t *testing.T) *consentEnv {
	t.Helper()
	reg, err := eventschema.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	store := memstore.New()
	clock := func() time.Time { return testNow }
	users := repository.New(store, reg, user.Kind, repository.WithClock(clock))
	userService := app.NewUserService(users, repository.New(store, reg, user.ReservationKind, repository.WithClock(clock)),
		fingerprintKey, app.Erasure{Keys: keystore.NewMemory(), Collections: noCollections{},
			Ends:     repository.New(store, reg, collection.Kind, repository.WithClock(clock)),
			Consents: noConsents{}, Revokes: repository.New(store, reg, consent.Kind, repository.WithClock(clock))}, clock)
	consents := app.NewConsentService(companytest.Catalog(), repository.New(store, reg, consent.Kind, repository.WithClock(clock)), users, clock)
	keys, err := sessiontoken.GenerateKeySet()
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := sessiontoken.New(keys, sessiontoken.Config{Issuer: "samla-test", Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	e := httpapi.NewEngine(httpapi.Options{Keys: httpapitest.Keys{acmeKey: "acme", globexKey: "globex"},
		Sessions: tokens, SessionUsers: userService})
	httpcmd.RegisterRoutes(e, httpcmd.Deps{Collections: &recordingCommands{}, Users: userService, Consents: consents,
		FingerprintKey: fingerprintKey, Now: clock})
	httpcmd.RegisterSessionRoutes(e, httpcmd.SessionDeps{Issuer: tokens, Users: userService})
	return &consentEnv{sessionEnv: &sessionEnv{engine: e, tokens: tokens}, store: store, reg: reg}
}

// user creates a user of the client of key and returns its id.
func (e *consentEnv) user(t *testing.T, key, externalID string) string {
	t.Helper()
	w := e.do(http.MethodPost, "/users", `{"externalId":"`+externalID+`"}`, key, "")
	if w.Code != http.StatusCreated {
		t.Fatalf("POST /users = %d %s", w.Code, w.Body)
	}
	var u struct {
		UserUUID string `json:"userUuid"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &u); err != nil {
		t.Fatal(err)
	}
	return u.UserUUID
}

func consentBody(userUUID, company, method, personalNumber string, extra ...string) string {
	b := `{"userUuid":"` + userUUID + `","company":"` + company + `","loginMethod":"` + method + `",` +
		`"parameters":[{"type":"SwedishEidParameter","personalNumber":"` + personalNumber + `"}]`
	for _, x := range extra {
		b += "," + x
	}
	return b + "}"
}

const (
	bankOtherDevice = "SWEDISH_MOBILE_EID_OTHER_DEVICE"
	tolvan          = "199001010017"
)

// createdConsent checks a 201 of POST /consents and returns the consent's id.
func createdConsent(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	if w.Code != http.StatusCreated {
		t.Fatalf("POST /consents = %d %s", w.Code, w.Body)
	}
	var body map[string]string
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if len(body) != 2 || body["status"] != "INITIATED" || body["consentId"] == "" ||
		w.Header().Get("Location") != "/consents/"+body["consentId"] {
		t.Fatalf("created %s, Location %q", w.Body, w.Header().Get("Location"))
	}
	return body["consentId"]
}

// load reads a consent from the event store.
func (e *consentEnv) load(t *testing.T, id string) *consent.Consent {
	t.Helper()
	c, err := repository.New(e.store, e.reg, consent.Kind).Load(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCreateConsent(t *testing.T) {
	e := newConsentEnv(t)
	u := e.user(t, acmeKey, "customer-1")
	id := createdConsent(t, e.do(http.MethodPost, "/consents", consentBody(u, "se-demo-bank", bankOtherDevice, tolvan,
		`"scope":["SAVINGS_ACCOUNTS","CHECKING_ACCOUNTS"]`), acmeKey, ""))
	c := e.load(t, id)
	if pn := c.PersonalNumber(); c.Status() != consent.StatusInitiated || c.UserUUID() != u || c.ClientID() != "acme" ||
		c.Company() != "se-demo-bank" || c.LoginMethod() != bankOtherDevice || pn == nil || *pn != tolvan ||
		!reflect.DeepEqual(c.Scope(), []consent.Scope{consent.ScopeCheckingAccounts, consent.ScopeSavingsAccounts}) ||
		!strings.HasPrefix(c.RequestHash(), httpcmd.FingerprintScheme) {
		t.Fatalf("stored consent %+v", c)
	}
	// Without a scope: all three.
	all := e.load(t, createdConsent(t, e.do(http.MethodPost, "/consents", consentBody(u, "se-demo-bank", bankOtherDevice, tolvan), acmeKey, "")))
	if !reflect.DeepEqual(all.Scope(), consent.AllScopes()) {
		t.Fatalf("default scope %v", all.Scope())
	}
}

func TestCreateConsentIdempotency(t *testing.T) {
	e := newConsentEnv(t)
	u := e.user(t, acmeKey, "customer-1")
	body := consentBody(u, "se-demo-bank", bankOtherDevice, tolvan, `"scope":["CREDIT_CARDS","SAVINGS_ACCOUNTS"]`)
	first := createdConsent(t, e.do(http.MethodPost, "/consents", body, acmeKey, "", httpapi.HeaderIdempotencyKey, "key-1"))
	// The same request in another spelling (personal number, scope order, userUuid case) is a retry.
	again := consentBody(strings.ToUpper(u), "se-demo-bank", bankOtherDevice, "19900101-0017", `"scope":["SAVINGS_ACCOUNTS","CREDIT_CARDS"]`)
	w := e.do(http.MethodPost, "/consents", again, acmeKey, "", httpapi.HeaderIdempotencyKey, "key-1")
	if createdConsent(t, w) != first || w.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry = %s, replayed %q", w.Body, w.Header().Get("Idempotent-Replayed"))
	}
	other := consentBody(u, "se-demo-bank", bankOtherDevice, "199001010025")
	p := problemOf(t, e.do(http.MethodPost, "/consents", other, acmeKey, "", httpapi.HeaderIdempotencyKey, "key-1"),
		http.StatusUnprocessableEntity, httpcmd.CodeIdempotencyKeyReused)
	if strings.Contains(p.Detail, "19900101") {
		t.Fatalf("the problem names the person: %s", p.Detail)
	}
	// Another client's same key is its own.
	g := e.user(t, globexKey, "customer-1")
	if id := createdConsent(t, e.do(http.MethodPost, "/consents", consentBody(g, "se-demo-bank", bankOtherDevice, tolvan), globexKey, "",
		httpapi.HeaderIdempotencyKey, "key-1")); id == first {
		t.Fatal("two clients' keys named one consent")
	}
}

func TestCreateConsentRefusals(t *testing.T) {
	e := newConsentEnv(t)
	u := e.user(t, acmeKey, "customer-1")
	deleted := e.user(t, acmeKey, "customer-2")
	if w := e.do(http.MethodDelete, "/users/"+deleted, "", acmeKey, ""); w.Code != http.StatusNoContent {
		t.Fatalf("DELETE user = %d %s", w.Code, w.Body)
	}
	globexUser := e.user(t, globexKey, "customer-1")
	eid := func(pn string) string { return `{"type":"SwedishEidParameter","personalNumber":"` + pn + `"}` }
	for _, tc := range []struct {
		name, body, field string
	}{
		{"a personal number with a wrong check digit", consentBody(u, "se-demo-bank", bankOtherDevice, "199001010018"), "parameters[0].personalNumber"},
		{"a personal number that is no number", consentBody(u, "se-demo-bank", bankOtherDevice, "tolvan"), "parameters[0].personalNumber"},
		{"an empty personal number", consentBody(u, "se-demo-bank", bankOtherDevice, ""), "parameters[0].personalNumber"},
		{"no personal number", `{"userUuid":"` + u + `","company":"se-demo-bank","loginMethod":"` + bankOtherDevice +
			`","parameters":[{"type":"SwedishEidParameter"}]}`, "parameters[0].personalNumber"},
		{"no parameters", `{"userUuid":"` + u + `","company":"se-demo-bank","loginMethod":"` + bankOtherDevice + `"}`, "parameters"},
		{"another parameter type", `{"userUuid":"` + u + `","company":"se-demo-bank","loginMethod":"` + bankOtherDevice +
			`","parameters":[{"type":"SwedishPersonalNumberParameter","personalNumber":"` + tolvan + `"}]}`, "parameters[0].type"},
		{"the EID parameter twice", `{"userUuid":"` + u + `","company":"se-demo-bank","loginMethod":"` + bankOtherDevice +
			`","parameters":[` + eid(tolvan) + `,` + eid(tolvan) + `]}`, "parameters[1].type"},
		{"an unknown member of the parameter", `{"userUuid":"` + u + `","company":"se-demo-bank","loginMethod":"` + bankOtherDevice +
			`","parameters":[{"type":"SwedishEidParameter","personalNumber":"` + tolvan + `","name":"x"}]}`, "parameters[0].name"},
		{"an unknown scope", consentBody(u, "se-demo-bank", bankOtherDevice, tolvan, `"scope":["CHECKING_ACCOUNTS","LOANS"]`), "scope[1]"},
		{"an empty scope", consentBody(u, "se-demo-bank", bankOtherDevice, tolvan, `"scope":[]`), "scope"},
		{"no userUuid", `{"company":"se-demo-bank","loginMethod":"` + bankOtherDevice + `","parameters":[` + eid(tolvan) + `]}`, "userUuid"},
		{"a userUuid that is no UUID", consentBody("customer-1", "se-demo-bank", bankOtherDevice, tolvan), "userUuid"},
		{"no company", consentBody(u, "", bankOtherDevice, tolvan), "company"},
		{"an unknown company", consentBody(u, "se-nowhere", bankOtherDevice, tolvan), "company"},
		{"no login method", consentBody(u, "se-demo-bank", "", tolvan), "loginMethod"},
		{"an unknown login method", consentBody(u, "se-demo-bank", "BANKID", tolvan), "loginMethod"},
		{"an unknown member", consentBody(u, "se-demo-bank", bankOtherDevice, tolvan, `"validity":"180d"`), "validity"},
	} {
		t.Run(tc.name+" is 400", func(t *testing.T) {
			w := e.do(http.MethodPost, "/consents", tc.body, acmeKey, "")
			p := problemOf(t, w, http.StatusBadRequest, httpapi.CodeValidationFailed)
			if !hasField(p, tc.field) {
				t.Fatalf("errors %+v do not name %s", p.Errors, tc.field)
			}
			if strings.Contains(w.Body.String(), "19900101001") {
				t.Fatalf("the problem quotes the personal number: %s", w.Body)
			}
		})
	}
	t.Run("a body that is no JSON is 400", func(t *testing.T) {
		problemOf(t, e.do(http.MethodPost, "/consents", `{"userUuid":`, acmeKey, ""), http.StatusBadRequest, httpapi.CodeMalformedJSON)
	})
	for _, tc := range []struct {
		name, body, code string
	}{
		{"a company without consents", consentBody(u, "se-demo-insurer", bankOtherDevice, tolvan), httpcmd.CodeConsentNotSupported},
		{"a login method the company lacks", consentBody(u, "se-demo-bank", "SWEDISH_MOBILE_EID_SAME_DEVICE_CLIENT_SIDE_AUTHENTICATION", tolvan),
			httpcmd.CodeLoginMethodNotApplicable},
		{"an unknown user", consentBody("0190f4a2-0000-7b3a-9a51-2f1e3d4c5b6a", "se-demo-bank", bankOtherDevice, tolvan), httpcmd.CodeUnknownUser},
		{"another client's user", consentBody(globexUser, "se-demo-bank", bankOtherDevice, tolvan), httpcmd.CodeUnknownUser},
		{"a deleted user", consentBody(deleted, "se-demo-bank", bankOtherDevice, tolvan), httpcmd.CodeUnknownUser},
	} {
		t.Run(tc.name+" is 422 "+tc.code, func(t *testing.T) {
			problemOf(t, e.do(http.MethodPost, "/consents", tc.body, acmeKey, ""), http.StatusUnprocessableEntity, tc.code)
		})
	}
	t.Run("nothing refused was recorded", func(t *testing.T) {
		envs, err := e.store.ReadAll(t.Context(), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, env := range envs {
			if eventschema.Category(env.Stream) == "consent" {
				t.Fatalf("a refused request recorded %s on %s", env.Type, env.Stream)
			}
		}
	})
	t.Run("2025-01-01 has no consents", func(t *testing.T) {
		problemOf(t, e.do(http.MethodPost, "/consents", consentBody(u, "se-demo-bank", bankOtherDevice, tolvan), acmeKey, "",
			httpapi.HeaderServiceVersion, string(httpapi.V20250101)), http.StatusNotFound, httpapi.CodeNotFound)
		problemOf(t, e.do(http.MethodDelete, "/consents/0190f4a2-0000-7b3a-9a51-2f1e3d4c5b6a", "", acmeKey, "",
			httpapi.HeaderServiceVersion, string(httpapi.V20250101)), http.StatusNotFound, httpapi.CodeNotFound)
	})
}

func TestRevokeConsent(t *testing.T) {
	e := newConsentEnv(t)
	u := e.user(t, acmeKey, "customer-1")
	id := createdConsent(t, e.do(http.MethodPost, "/consents", consentBody(u, "se-demo-bank", bankOtherDevice, tolvan,
		`"scope":["CREDIT_CARDS"]`), acmeKey, ""))

	problemOf(t, e.do(http.MethodDelete, "/consents/"+id, "", globexKey, ""), http.StatusNotFound, httpcmd.CodeConsentNotFound)
	problemOf(t, e.do(http.MethodDelete, "/consents/0190f4a2-0000-7b3a-9a51-2f1e3d4c5b6a", "", acmeKey, ""),
		http.StatusNotFound, httpcmd.CodeConsentNotFound)
	problemOf(t, e.do(http.MethodDelete, "/consents/not-a-consent", "", acmeKey, ""), http.StatusNotFound, httpcmd.CodeConsentNotFound)

	w := e.do(http.MethodDelete, "/consents/"+strings.ToUpper(id), "", acmeKey, "")
	if w.Code != http.StatusOK {
		t.Fatalf("DELETE = %d %s", w.Code, w.Body)
	}
	var got map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"consentId": id, "userUuid": u, "company": "se-demo-bank", "status": "REVOKED",
		"scope": []any{"CREDIT_CARDS"}, "createdAt": "2026-05-01T12:00:00.000Z"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("DELETE answered %v, want %v", got, want)
	}
	if c := e.load(t, id); c.Status() != consent.StatusRevoked || c.RevokeReason() != consent.RevokedByClient {
		t.Fatalf("stored %s %s", c.Status(), c.RevokeReason())
	}
	problemOf(t, e.do(http.MethodDelete, "/consents/"+id, "", acmeKey, ""), http.StatusConflict, httpcmd.CodeConsentFinal)
}

func TestConsentsWithASession(t *testing.T) {
	e := newConsentEnv(t)
	alice, bob := e.user(t, acmeKey, "alice"), e.user(t, acmeKey, "bob")
	aliceToken, _ := e.createSession(t, alice)
	bobConsent := createdConsent(t, e.do(http.MethodPost, "/consents", consentBody(bob, "se-demo-bank", bankOtherDevice, tolvan), acmeKey, ""))

	// Its own user's consent: created and revoked with the session alone.
	own := createdConsent(t, e.do(http.MethodPost, "/consents", consentBody(alice, "se-demo-bank", bankOtherDevice, tolvan), "", aliceToken))
	if w := e.do(http.MethodDelete, "/consents/"+own, "", "", aliceToken); w.Code != http.StatusOK {
		t.Fatalf("DELETE own consent with the session = %d %s", w.Code, w.Body)
	}
	// Another user's: 403, nothing recorded.
	problemOf(t, e.do(http.MethodPost, "/consents", consentBody(bob, "se-demo-bank", bankOtherDevice, tolvan), "", aliceToken),
		http.StatusForbidden, httpapi.CodeForbiddenForSession)
	problemOf(t, e.do(http.MethodDelete, "/consents/"+bobConsent, "", "", aliceToken), http.StatusForbidden, httpapi.CodeForbiddenForSession)
	if c := e.load(t, bobConsent); c.Status() != consent.StatusInitiated {
		t.Fatalf("bob's consent is %s after alice's session tried", c.Status())
	}
	// An unknown consent stays a 404 for a session.
	problemOf(t, e.do(http.MethodDelete, "/consents/0190f4a2-0000-7b3a-9a51-2f1e3d4c5b6a", "", "", aliceToken),
		http.StatusNotFound, httpcmd.CodeConsentNotFound)
}
