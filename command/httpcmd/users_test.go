package httpcmd_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

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
)

const v2 = "2026-04-01"

// noCollections is a status read model that lists no user's collections.
type noCollections struct{}

func (noCollections) UserNonFinalCollectionIDs(context.Context, string, string) ([]string, error) {
	return nil, nil
}

type noConsents struct{}

func (noConsents) UserConsentIDs(context.Context, string, string) ([]string, error) { return nil, nil }

// newUsersEngine serves the command routes, users included, over one in-memory event store;
// adjust changes the dependencies before they are mounted.
func newUsersEngine(t *testing.T, adjust ...func(*httpcmd.Deps)) (*gin.Engine, *memstore.Store) {
	t.Helper()
	reg, err := eventschema.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	store := memstore.New()
	clock := func() time.Time { return testNow }
	users := repository.New(store, reg, user.Kind, repository.WithClock(clock))
	collections := app.NewCollectionService(companytest.Catalog(), repository.New(store, reg, collection.Kind, repository.WithClock(clock)),
		users, clock)
	userService := app.NewUserService(users, repository.New(store, reg, user.ReservationKind, repository.WithClock(clock)),
		fingerprintKey, app.Erasure{Keys: keystore.NewMemory(), Collections: noCollections{},
			Ends:     repository.New(store, reg, collection.Kind, repository.WithClock(clock)),
			Consents: noConsents{}, Revokes: repository.New(store, reg, consent.Kind, repository.WithClock(clock))}, clock)
	e := httpapi.NewEngine(httpapi.Options{Keys: httpapitest.Keys{acmeKey: "acme", globexKey: "globex"}})
	deps := httpcmd.Deps{Collections: collections, Users: userService, FingerprintKey: fingerprintKey, Now: clock}
	for _, a := range adjust {
		a(&deps)
	}
	httpcmd.RegisterRoutes(e, deps)
	return e, store
}

type userReq struct {
	method, path, body string
	key                string // "" acme
	version            string // "" 2026-04-01; "-" none
	idem               string
}

func serve(e http.Handler, r userReq) *httptest.ResponseRecorder {
	var body *strings.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	} else {
		body = strings.NewReader("")
	}
	hr := httptest.NewRequest(r.method, r.path, body)
	if r.body != "" {
		hr.Header.Set("Content-Type", "application/json")
	}
	key := r.key
	if key == "" {
		key = acmeKey
	}
	hr.Header.Set(httpapi.HeaderAPIKey, key)
	switch r.version {
	case "":
		hr.Header.Set(httpapi.HeaderServiceVersion, v2)
	case "-":
	default:
		hr.Header.Set(httpapi.HeaderServiceVersion, r.version)
	}
	if r.idem != "" {
		hr.Header.Set(httpapi.HeaderIdempotencyKey, r.idem)
	}
	w := httptest.NewRecorder()
	e.ServeHTTP(w, hr)
	return w
}

type userBody struct {
	UserUUID   string  `json:"userUuid"`
	ExternalID *string `json:"externalId"`
	CreatedAt  string  `json:"createdAt"`
}

func createdUser(t *testing.T, w *httptest.ResponseRecorder) userBody {
	t.Helper()
	if w.Code != http.StatusCreated {
		t.Fatalf("POST /users = %d %s", w.Code, w.Body)
	}
	var u userBody
	if err := json.Unmarshal(w.Body.Bytes(), &u); err != nil {
		t.Fatal(err)
	}
	if u.UserUUID == "" || u.ExternalID == nil || w.Header().Get("Location") != "/users/"+u.UserUUID {
		t.Fatalf("created %s, Location %q", w.Body, w.Header().Get("Location"))
	}
	return u
}

func TestCreateUser(t *testing.T) {
	e, _ := newUsersEngine(t)
	u := createdUser(t, serve(e, userReq{method: "POST", path: "/users", body: `{"externalId":"customer-42"}`}))
	if *u.ExternalID != "customer-42" || u.CreatedAt != "2026-05-01T12:00:00.000Z" {
		t.Fatalf("created %+v", u)
	}
	p := problemOf(t, serve(e, userReq{method: "POST", path: "/users", body: `{"externalId":"customer-42"}`}),
		http.StatusConflict, httpcmd.CodeUserExists)
	if strings.Contains(p.Detail, "customer-42") {
		t.Fatalf("the problem repeats the externalId: %s", p.Detail)
	}
	// Another client's externalIds are its own.
	createdUser(t, serve(e, userReq{method: "POST", path: "/users", body: `{"externalId":"customer-42"}`, key: globexKey}))
}

func TestCreateUserValidation(t *testing.T) {
	e, store := newUsersEngine(t)
	for _, tc := range []struct{ name, body, field string }{
		{"missing", `{}`, "externalId"},
		{"null", `{"externalId":null}`, "externalId"},
		{"empty", `{"externalId":""}`, "externalId"},
		{"too long", `{"externalId":"` + strings.Repeat("x", 257) + `"}`, "externalId"},
		{"a control character", `{"externalId":"a\nb"}`, "externalId"},
		{"not a string", `{"externalId":42}`, "externalId"},
		{"an unknown member", `{"externalId":"a","name":"b"}`, "name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := serve(e, userReq{method: "POST", path: "/users", body: tc.body})
			p := httpapitest.Problem(t, w, http.StatusBadRequest)
			if !hasField(p, tc.field) {
				t.Fatalf("problem %s names no %s", w.Body, tc.field)
			}
		})
	}
	if n := len(store.Events(user.ReservationStreamName(user.ExternalIDKey(fingerprintKey, "acme", "a")))); n != 0 {
		t.Fatalf("an invalid request reserved its externalId: %d events", n)
	}
	w := serve(e, userReq{method: "POST", path: "/users", body: `{"externalId":"` + strings.Repeat("å", 256) + `"}`})
	createdUser(t, w)
}

func TestCreateUserIdempotency(t *testing.T) {
	e, _ := newUsersEngine(t)
	first := serve(e, userReq{method: "POST", path: "/users", body: `{"externalId":"customer-42"}`, idem: "k-1"})
	u := createdUser(t, first)
	again := serve(e, userReq{method: "POST", path: "/users", body: "{ \"externalId\" : \"customer-42\" }", idem: "k-1"})
	if r := createdUser(t, again); r.UserUUID != u.UserUUID || *r.ExternalID != *u.ExternalID || r.CreatedAt != u.CreatedAt ||
		again.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry %s, first %s", again.Body, first.Body)
	}
	problemOf(t, serve(e, userReq{method: "POST", path: "/users", body: `{"externalId":"customer-43"}`, idem: "k-1"}),
		http.StatusUnprocessableEntity, httpcmd.CodeIdempotencyKeyReused)
	// The refused request took nothing: customer-43 is free.
	createdUser(t, serve(e, userReq{method: "POST", path: "/users", body: `{"externalId":"customer-43"}`}))
	// The key is the client's own.
	if other := createdUser(t, serve(e, userReq{method: "POST", path: "/users", body: `{"externalId":"customer-42"}`,
		idem: "k-1", key: globexKey})); other.UserUUID == u.UserUUID {
		t.Fatal("two clients' keys named one user")
	}
	httpapitest.Problem(t, serve(e, userReq{method: "POST", path: "/users", body: `{"externalId":"x"}`, idem: "k\x01"}),
		http.StatusBadRequest)
}

func TestDeleteUser(t *testing.T) {
	e, _ := newUsersEngine(t)
	u := createdUser(t, serve(e, userReq{method: "POST", path: "/users", body: `{"externalId":"customer-42"}`}))
	problemOf(t, serve(e, userReq{method: "DELETE", path: "/users/" + u.UserUUID, key: globexKey}),
		http.StatusNotFound, httpcmd.CodeUserNotFound)
	for _, id := range []string{"0190f4a2-1111-7b3a-9a51-2f1e3d4c5b6a", "not-a-uuid", "urn:uuid:" + u.UserUUID} {
		problemOf(t, serve(e, userReq{method: "DELETE", path: "/users/" + id}), http.StatusNotFound, httpcmd.CodeUserNotFound)
	}
	// A retry is answered like the first; the id in uppercase is the same user.
	for _, id := range []string{u.UserUUID, strings.ToUpper(u.UserUUID)} {
		if w := serve(e, userReq{method: "DELETE", path: "/users/" + id}); w.Code != http.StatusNoContent || w.Body.Len() != 0 {
			t.Fatalf("DELETE = %d %s", w.Code, w.Body)
		}
	}
	// The externalId may be used again, by a new user.
	if again := createdUser(t, serve(e, userReq{method: "POST", path: "/users", body: `{"externalId":"customer-42"}`})); again.UserUUID == u.UserUUID {
		t.Fatal("the deleted user came back")
	}
}

// TestUsersAreNotInOlderVersions: the user routes are 2026-04-01's; older versions have no such
// resource.
func TestUsersAreNotInOlderVersions(t *testing.T) {
	e, store := newUsersEngine(t)
	u := createdUser(t, serve(e, userReq{method: "POST", path: "/users", body: `{"externalId":"customer-42"}`}))
	for _, version := range []string{"2025-01-01", "-"} {
		problemOf(t, serve(e, userReq{method: "POST", path: "/users", body: `{"externalId":"customer-7"}`, version: version}),
			http.StatusNotFound, httpapi.CodeNotFound)
		problemOf(t, serve(e, userReq{method: "DELETE", path: "/users/" + u.UserUUID, version: version}),
			http.StatusNotFound, httpapi.CodeNotFound)
	}
	if n := len(store.Events(user.StreamName(u.UserUUID))); n != 1 {
		t.Fatalf("the user's stream has %d events after requests in an older version", n)
	}
}

func TestStartCollectionForAUser(t *testing.T) {
	e, store := newUsersEngine(t)
	u := createdUser(t, serve(e, userReq{method: "POST", path: "/users", body: `{"externalId":"customer-42"}`}))
	other := createdUser(t, serve(e, userReq{method: "POST", path: "/users", body: `{"externalId":"customer-42"}`, key: globexKey}))
	body := func(userUUID string) string {
		return `{"company":"se-demo-insurer","loginMethod":"SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK","parameters":[],"userUuid":"` + userUUID + `"}`
	}
	if w := serve(e, userReq{method: "POST", path: "/collections", body: body(u.UserUUID)}); w.Code != http.StatusCreated {
		t.Fatalf("a collection of a live user = %d %s", w.Code, w.Body)
	}
	before := store.Appends()
	for name, id := range map[string]string{"unknown": "0190f4a2-1111-7b3a-9a51-2f1e3d4c5b6a", "another client's": other.UserUUID} {
		w := serve(e, userReq{method: "POST", path: "/collections", body: body(id)})
		if p := problemOf(t, w, http.StatusUnprocessableEntity, httpcmd.CodeUnknownUser); strings.Contains(p.Detail, id) {
			t.Fatalf("%s: problem %s", name, w.Body)
		}
	}
	if store.Appends() != before {
		t.Fatal("a refused collection was recorded")
	}
	if w := serve(e, userReq{method: "DELETE", path: "/users/" + u.UserUUID}); w.Code != http.StatusNoContent {
		t.Fatalf("DELETE = %d", w.Code)
	}
	before = store.Appends()
	problemOf(t, serve(e, userReq{method: "POST", path: "/collections", body: body(u.UserUUID)}),
		http.StatusUnprocessableEntity, httpcmd.CodeUnknownUser)
	if store.Appends() != before {
		t.Fatal("a refused collection was recorded")
	}
}

// lagging is a users read model that shows a deletion only after it was asked behind times (-1:
// never), or fails.
type lagging struct {
	behind int
	asked  int
	err    error
}

func (l *lagging) IsDeletedUser(context.Context, string, string) (bool, error) {
	l.asked++
	if l.err != nil {
		return false, l.err
	}
	return l.behind >= 0 && l.asked > l.behind, nil
}

// TestDeleteUserWaitsUntilSessionsEnd: the 204 comes only once the users read model, which the
// liveness check of sessions asks, shows the user deleted; a local projection that never shows
// it is a 503 (retry), a remote one's lag a 204; a failing check a 500. The user is deleted and
// erased in every case.
func TestDeleteUserWaitsUntilSessionsEnd(t *testing.T) {
	for _, tc := range []struct {
		name  string
		watch httpcmd.DeletionWatch
		want  int
	}{
		{"shown after a few looks", httpcmd.DeletionWatch{Users: &lagging{behind: 3}, Local: true}, http.StatusNoContent},
		{"never shown by a local projection", httpcmd.DeletionWatch{Users: &lagging{behind: -1}, Local: true, Timeout: time.Millisecond},
			http.StatusServiceUnavailable},
		{"not yet shown by a remote projection", httpcmd.DeletionWatch{Users: &lagging{behind: -1}, Timeout: time.Millisecond},
			http.StatusNoContent},
		{"a failing check", httpcmd.DeletionWatch{Users: &lagging{err: errors.New("read model down")}, Local: true},
			http.StatusInternalServerError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			watch := tc.watch
			e, store := newUsersEngine(t, func(d *httpcmd.Deps) { d.UserDeletions = &watch })
			u := createdUser(t, serve(e, userReq{method: "POST", path: "/users", body: `{"externalId":"customer-42"}`}))
			w := serve(e, userReq{method: "DELETE", path: "/users/" + u.UserUUID})
			if w.Code != tc.want {
				t.Fatalf("DELETE = %d %s, want %d", w.Code, w.Body, tc.want)
			}
			if l := watch.Users.(*lagging); l.behind > 0 && l.asked != l.behind+1 {
				t.Fatalf("the check was asked %d times; it shows the deletion at the %d", l.asked, l.behind+1)
			}
			if w.Code == http.StatusServiceUnavailable && w.Header().Get("Retry-After") == "" {
				t.Fatal("a 503 without Retry-After")
			}
			if n := len(store.Events(user.StreamName(u.UserUUID))); n != 2 {
				t.Fatalf("the user's stream has %d events, want created and deleted", n)
			}
		})
	}
}

// TestSupplementInfoForADeletedUsersCollection: once its user is deleted, a collection takes no
// more input: 409 USER_DELETED, nothing recorded.
func TestSupplementInfoForADeletedUsersCollection(t *testing.T) {
	e, store := newUsersEngine(t)
	u := createdUser(t, serve(e, userReq{method: "POST", path: "/users", body: `{"externalId":"customer-42"}`}))
	w := serve(e, userReq{method: "POST", path: "/collections", body: `{"company":"se-demo-insurer",` +
		`"loginMethod":"SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK","parameters":[],"userUuid":"` + u.UserUUID + `"}`})
	var started struct{ CollectionID string }
	if err := json.Unmarshal(w.Body.Bytes(), &started); err != nil || w.Code != http.StatusCreated {
		t.Fatalf("POST /collections = %d %s", w.Code, w.Body)
	}
	reg, err := eventschema.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	repo := repository.New(store, reg, collection.Kind)
	for _, to := range []collection.Status{collection.StatusLogin, collection.StatusContactFormPending} {
		if _, _, err := repo.Update(context.Background(), started.CollectionID, repository.Meta{Tenant: "acme", Actor: "connector"},
			func(c *collection.Collection) error {
				return c.ChangeStatusWith(to, collection.StatusDetails{}, testNow)
			}); err != nil {
			t.Fatal(err)
		}
	}
	if w := serve(e, userReq{method: "DELETE", path: "/users/" + u.UserUUID}); w.Code != http.StatusNoContent {
		t.Fatalf("DELETE = %d %s", w.Code, w.Body)
	}
	before := len(store.Events(collection.StreamName(started.CollectionID)))
	problemOf(t, serve(e, userReq{method: "POST", path: "/collections/" + started.CollectionID + "/supplement-info", body: contactBody}),
		http.StatusConflict, httpcmd.CodeUserDeleted)
	if n := len(store.Events(collection.StreamName(started.CollectionID))); n != before {
		t.Fatalf("%d events recorded for refused input", n-before)
	}
}
