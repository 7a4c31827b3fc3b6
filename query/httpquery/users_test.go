package httpquery_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/samla/samla/domain/company/companytest"
	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/platform/httpapi/httpapitest"
	"github.com/samla/samla/platform/sessiontoken"
	"github.com/samla/samla/query"
	"github.com/samla/samla/query/httpquery"
)

const (
	liveUser    = "0196a1b2-0000-7e5f-8a9b-0c1d2e3f4a5b"
	deletedUser = "0196a1b2-1111-7e5f-8a9b-0c1d2e3f4a5b"
	globexUser  = "0196a1b2-2222-7e5f-8a9b-0c1d2e3f4a5b"
)

var userCreatedAt = time.Date(2026, 5, 1, 12, 0, 0, 123_000_000, time.UTC)

// fakeUsers is a tenant-scoped users read model.
type fakeUsers struct {
	users map[string]query.UserView
	err   error
}

func (f *fakeUsers) Get(_ context.Context, tenant, id string) (query.UserView, error) {
	if f.err != nil {
		return query.UserView{}, f.err
	}
	u, ok := f.users[id]
	if !ok || u.Tenant != tenant {
		return query.UserView{}, query.ErrNotFound
	}
	return u, nil
}

func (f *fakeUsers) FindByExternalID(_ context.Context, tenant, externalID string) (query.UserView, error) {
	if f.err != nil {
		return query.UserView{}, f.err
	}
	for _, u := range f.users {
		if u.Tenant == tenant && u.DeletedAt == nil && u.ExternalID != nil && *u.ExternalID == externalID {
			return u, nil
		}
	}
	return query.UserView{}, query.ErrNotFound
}

// userCollection is one collection of the fake list, with its owner.
type userCollection struct {
	tenant, user string
	query.CollectionSummary
}

// fakeUserCollections lists its collections newest first, as the status read model does, and
// records the limits it was asked for.
type fakeUserCollections struct {
	all    []userCollection
	limits []int
}

func (f *fakeUserCollections) ListByUser(_ context.Context, tenant, userUUID string, after *query.CollectionCursor, limit int) ([]query.CollectionSummary, error) {
	f.limits = append(f.limits, limit)
	var mine []query.CollectionSummary
	for _, c := range f.all {
		if c.tenant == tenant && c.user == userUUID {
			mine = append(mine, c.CollectionSummary)
		}
	}
	slices.SortFunc(mine, func(a, b query.CollectionSummary) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.CollectionID, a.CollectionID)
	})
	var out []query.CollectionSummary
	for _, c := range mine {
		if after != nil && !(c.CreatedAt.Before(after.CreatedAt) || (c.CreatedAt.Equal(after.CreatedAt) && c.CollectionID < after.CollectionID)) {
			continue
		}
		if len(out) == limit {
			break
		}
		out = append(out, c)
	}
	return out, nil
}

type usersEnv struct {
	engine      *gin.Engine
	users       *fakeUsers
	collections *fakeUserCollections
	token       string // a session of liveUser, of acme
}

func newUsersEnv(t *testing.T) *usersEnv {
	t.Helper()
	ext := func(s string) *string { return &s }
	deletedAt := userCreatedAt.Add(time.Hour)
	e := &usersEnv{
		users: &fakeUsers{users: map[string]query.UserView{
			liveUser:    {UserUUID: liveUser, Tenant: "acme", ExternalID: ext("customer-42"), CreatedAt: userCreatedAt},
			deletedUser: {UserUUID: deletedUser, Tenant: "acme", CreatedAt: userCreatedAt, DeletedAt: &deletedAt},
			globexUser:  {UserUUID: globexUser, Tenant: "globex", ExternalID: ext("customer-7"), CreatedAt: userCreatedAt},
		}},
		collections: &fakeUserCollections{},
	}
	// Five collections of liveUser, two of them created in one millisecond; one of the deleted
	// user; one of globex's user.
	for i, id := range []string{"0196a1b2-c3d4-7e5f-8a9b-000000000001", "0196a1b2-c3d4-7e5f-8a9b-000000000002",
		"0196a1b2-c3d4-7e5f-8a9b-000000000003", "0196a1b2-c3d4-7e5f-8a9b-000000000004", "0196a1b2-c3d4-7e5f-8a9b-000000000005"} {
		at := userCreatedAt.Add(time.Duration(min(i, 3)) * time.Minute)
		e.collections.all = append(e.collections.all, userCollection{"acme", liveUser, query.CollectionSummary{
			CollectionID: id, Company: "se-demo-insurer", Product: "INSURANCE", LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK",
			Status: "COMPLETED", CreatedAt: at, UpdatedAt: at.Add(time.Second)}})
	}
	e.collections.all = append(e.collections.all,
		userCollection{"acme", deletedUser, query.CollectionSummary{CollectionID: "0196a1b2-c3d4-7e5f-8a9b-00000000000d",
			Company: "se-demo-pension", Product: "WEALTH", LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK",
			Status: "COLLECTION_INPUT_PENDING", CreatedAt: userCreatedAt, UpdatedAt: userCreatedAt}},
		userCollection{"globex", globexUser, query.CollectionSummary{CollectionID: "0196a1b2-c3d4-7e5f-8a9b-00000000000e",
			Company: "se-demo-insurer", Product: "INSURANCE", LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK",
			Status: "RUNNING", CreatedAt: userCreatedAt, UpdatedAt: userCreatedAt}})

	keys, err := sessiontoken.GenerateKeySet()
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := sessiontoken.New(keys, sessiontoken.Config{Issuer: "samla-test"})
	if err != nil {
		t.Fatal(err)
	}
	eng := httpapi.NewEngine(httpapi.Options{Keys: httpapitest.Keys{acmeKey: "acme", globexKey: "globex"},
		RateLimit: httpapi.RateLimit{Disabled: true}, Sessions: tokens, SessionUsers: allLive{}})
	httpquery.RegisterRoutes(eng, httpquery.Deps{Status: &fakeStatus{}, History: &fakeHistory{}, Companies: companytest.Catalog(),
		Users: e.users, UserCollections: e.collections})
	e.engine = eng
	issued, err := tokens.Issue("acme", liveUser, "")
	if err != nil {
		t.Fatal(err)
	}
	e.token = issued.Token
	return e
}

func (e *usersEnv) get(path, key, version string) *httptest.ResponseRecorder {
	return httpapitest.Get(e.engine, path, key, version)
}

func (e *usersEnv) sessionGet(path string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	r.Header.Set(httpapi.HeaderAuthorization, "Bearer "+e.token)
	r.Header.Set(httpapi.HeaderServiceVersion, string(httpapi.V20260401))
	w := httptest.NewRecorder()
	e.engine.ServeHTTP(w, r)
	return w
}

const preview = string(httpapi.V20260401)

func decodeBody[T any](t *testing.T, w *httptest.ResponseRecorder) T {
	t.Helper()
	if w.Code != http.StatusOK {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	var out T
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestGetUser(t *testing.T) {
	e := newUsersEnv(t)
	w := e.get("/users/"+liveUser, acmeKey, preview)
	if got := decodeBody[map[string]any](t, w); len(got) != 3 || got["userUuid"] != liveUser || got["externalId"] != "customer-42" ||
		got["createdAt"] != "2026-05-01T12:00:00.123Z" {
		t.Fatalf("live user %s", w.Body)
	}
	if w.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("Cache-Control %q", w.Header().Get("Cache-Control"))
	}
	w = e.get("/users/"+deletedUser, acmeKey, preview)
	got := decodeBody[map[string]any](t, w)
	if v, ok := got["externalId"]; !ok || v != nil || got["deletedAt"] != "2026-05-01T13:00:00.123Z" || got["userUuid"] != deletedUser {
		t.Fatalf("deleted user %s", w.Body)
	}
	// An uppercase spelling is the same user, answered in its canonical form.
	if got := decodeBody[map[string]any](t, e.get("/users/"+strings.ToUpper(liveUser), acmeKey, preview)); got["userUuid"] != liveUser {
		t.Fatalf("uppercase id: %v", got)
	}
	for _, id := range []string{globexUser, strings.ToUpper(globexUser), "0196a1b2-9999-7e5f-8a9b-0c1d2e3f4a5b", "not-a-uuid"} {
		if code := problemCode(t, e.get("/users/"+id, acmeKey, preview), http.StatusNotFound); code != httpquery.CodeUserNotFound {
			t.Errorf("%s: %s", id, code)
		}
	}
}

func TestFindUserByExternalID(t *testing.T) {
	e := newUsersEnv(t)
	w := e.get("/users?externalId=customer-42", acmeKey, preview)
	if got := decodeBody[map[string]any](t, w); got["userUuid"] != liveUser || got["externalId"] != "customer-42" {
		t.Fatalf("found %s", w.Body)
	}
	if w.Header().Get("Cache-Control") != "no-store" {
		t.Fatal("the answer may be cached")
	}
	// Another client's externalId, and an unknown one, name nobody.
	for _, ext := range []string{"customer-7", "customer-43"} {
		if code := problemCode(t, e.get("/users?externalId="+ext, acmeKey, preview), http.StatusNotFound); code != httpquery.CodeUserNotFound {
			t.Errorf("%s: %s", ext, code)
		}
	}
	// Any printable text is an externalId, escaped in the query as usual.
	e.users.users[liveUser] = query.UserView{UserUUID: liveUser, Tenant: "acme", ExternalID: ptr("a&b=c d/é"), CreatedAt: userCreatedAt}
	if got := decodeBody[map[string]any](t, e.get("/users?externalId="+url.QueryEscape("a&b=c d/é"), acmeKey, preview)); got["userUuid"] != liveUser {
		t.Fatalf("found %v", got)
	}
	for _, q := range []string{"", "?externalId=", "?externalId=a&externalId=b", "?externalId=" + strings.Repeat("x", 257), "?externalId=a%0Ab", "?other=a"} {
		p := httpapitest.Problem(t, e.get("/users"+q, acmeKey, preview), http.StatusBadRequest)
		if len(p.Errors) != 1 || p.Errors[0].Field != "externalId" {
			t.Errorf("%q: %+v", q, p)
		}
	}
}

type collectionsPage struct {
	Items []struct {
		CollectionID string `json:"collectionId"`
		Company      string `json:"company"`
		LoginMethod  string `json:"loginMethod"`
		Status       string `json:"status"`
		CreatedAt    string `json:"createdAt"`
		UpdatedAt    string `json:"updatedAt"`
	} `json:"items"`
	NextCursor *string `json:"nextCursor"`
}

func TestUserCollectionsPages(t *testing.T) {
	e := newUsersEnv(t)
	var ids []string
	path := "/users/" + liveUser + "/collections?limit=2"
	for pages := 0; ; pages++ {
		page := decodeBody[collectionsPage](t, e.get(path, acmeKey, preview))
		for _, it := range page.Items {
			ids = append(ids, it.CollectionID)
		}
		if page.NextCursor == nil {
			if pages != 2 || len(page.Items) != 1 {
				t.Fatalf("last page %d has %d items", pages, len(page.Items))
			}
			break
		}
		if len(page.Items) != 2 || pages > 3 {
			t.Fatalf("page %d: %+v", pages, page)
		}
		path = "/users/" + liveUser + "/collections?limit=2&cursor=" + url.QueryEscape(*page.NextCursor)
	}
	want := []string{"0196a1b2-c3d4-7e5f-8a9b-000000000005", "0196a1b2-c3d4-7e5f-8a9b-000000000004",
		"0196a1b2-c3d4-7e5f-8a9b-000000000003", "0196a1b2-c3d4-7e5f-8a9b-000000000002", "0196a1b2-c3d4-7e5f-8a9b-000000000001"}
	if !slices.Equal(ids, want) {
		t.Fatalf("listed %v, want %v", ids, want)
	}

	// A page that holds exactly the rest has no next cursor.
	if page := decodeBody[collectionsPage](t, e.get("/users/"+liveUser+"/collections?limit=5", acmeKey, preview)); page.NextCursor != nil || len(page.Items) != 5 {
		t.Fatalf("page of 5: %+v", page)
	}
	// The default page is 50, the largest 500; the reader is asked for one more.
	e.collections.limits = nil
	decodeBody[collectionsPage](t, e.get("/users/"+liveUser+"/collections", acmeKey, preview))
	decodeBody[collectionsPage](t, e.get("/users/"+liveUser+"/collections?limit=500", acmeKey, preview))
	if !slices.Equal(e.collections.limits, []int{51, 501}) {
		t.Fatalf("limits asked for %v", e.collections.limits)
	}
}

func TestUserCollectionsItems(t *testing.T) {
	e := newUsersEnv(t)
	w := e.get("/users/"+deletedUser+"/collections", acmeKey, preview)
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(w.Body.Bytes(), &raw); err != nil || w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if _, ok := raw["nextCursor"]; ok {
		t.Fatalf("a single page has a next cursor: %s", w.Body)
	}
	// A deleted user's collections keep their statuses; the status is the request version's.
	want := `[{"collectionId":"0196a1b2-c3d4-7e5f-8a9b-00000000000d","company":"se-demo-pension",` +
		`"loginMethod":"SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK","status":"CONTACT_FORM_PENDING",` +
		`"createdAt":"2026-05-01T12:00:00.123Z","updatedAt":"2026-05-01T12:00:00.123Z"}]`
	if string(raw["items"]) != want {
		t.Fatalf("items %s\nwant %s", raw["items"], want)
	}
	// A user without collections has an empty list.
	e.collections.all = nil
	if w := e.get("/users/"+liveUser+"/collections", acmeKey, preview); w.Code != http.StatusOK || w.Body.String() != `{"items":[]}` {
		t.Fatalf("empty list: %d %s", w.Code, w.Body)
	}
}

func TestUserCollectionsRefusals(t *testing.T) {
	e := newUsersEnv(t)
	for _, q := range []string{"limit=0", "limit=501", "limit=x", "cursor=", "cursor=c1.!!", "cursor=abc",
		"cursor=c1." + "MTIzLm5vdC1hLXV1aWQ"} { // "123.not-a-uuid"
		p := httpapitest.Problem(t, e.get("/users/"+liveUser+"/collections?"+q, acmeKey, preview), http.StatusBadRequest)
		if len(p.Errors) != 1 {
			t.Errorf("%s: %+v", q, p)
		}
	}
	// Another client's user, an unknown one: not found, never an empty list.
	for _, id := range []string{globexUser, "0196a1b2-9999-7e5f-8a9b-0c1d2e3f4a5b", "x"} {
		if code := problemCode(t, e.get("/users/"+id+"/collections", acmeKey, preview), http.StatusNotFound); code != httpquery.CodeUserNotFound {
			t.Errorf("%s: %s", id, code)
		}
	}
	e.users.err = errors.New("read model down")
	httpapitest.Problem(t, e.get("/users/"+liveUser+"/collections", acmeKey, preview), http.StatusInternalServerError)
	httpapitest.Problem(t, e.get("/users/"+liveUser, acmeKey, preview), http.StatusInternalServerError)
	httpapitest.Problem(t, e.get("/users?externalId=a", acmeKey, preview), http.StatusInternalServerError)
}

// TestUserQueriesAreNotInOlderVersions: older versions have no such resources.
func TestUserQueriesAreNotInOlderVersions(t *testing.T) {
	e := newUsersEnv(t)
	for _, path := range []string{"/users/" + liveUser, "/users/" + liveUser + "/collections", "/users?externalId=customer-42"} {
		for _, version := range []string{"2025-01-01", ""} {
			if code := problemCode(t, e.get(path, acmeKey, version), http.StatusNotFound); code != httpapi.CodeNotFound {
				t.Errorf("%s in %q: %s", path, version, code)
			}
		}
	}
}

// TestUserQueriesOfASession: a user's session reads its own user and collections, nothing of
// another user, and cannot look users up.
func TestUserQueriesOfASession(t *testing.T) {
	e := newUsersEnv(t)
	if w := e.sessionGet("/users/" + liveUser); w.Code != http.StatusOK {
		t.Fatalf("own user: %d %s", w.Code, w.Body)
	}
	if w := e.sessionGet("/users/" + liveUser + "/collections"); w.Code != http.StatusOK {
		t.Fatalf("own collections: %d %s", w.Code, w.Body)
	}
	for _, path := range []string{"/users/" + deletedUser, "/users/" + deletedUser + "/collections", "/users/" + globexUser,
		"/users?externalId=customer-42"} {
		if code := problemCode(t, e.sessionGet(path), http.StatusForbidden); code != httpapi.CodeForbiddenForSession {
			t.Errorf("%s: %s", path, code)
		}
	}
}

func ptr[T any](v T) *T { return &v }
