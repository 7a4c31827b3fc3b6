package httpquery_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/samla/samla/domain/company/companytest"
	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/platform/httpapi/httpapitest"
	"github.com/samla/samla/platform/sessiontoken"
	"github.com/samla/samla/query/httpquery"
	"github.com/samla/samla/query/presenter"
)

const (
	aliceUUID = "3f2b8c1e-5d4a-4b6f-9e7d-2a1c0b9f8e7d"
	bobUUID   = "9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d"
)

// allLive is a SessionUsers to which every user is live.
type allLive struct{}

func (allLive) IsLiveUser(context.Context, string, string) (bool, error) { return true, nil }

// newSessionDataEnv is newDataEnv's read models behind an engine that takes sessions: insID,
// wealthID and frID are alice's, runningID is bob's, emptyID is of no user. It returns a token
// of alice's session.
func newSessionDataEnv(t *testing.T) (*dataEnv, string) {
	t.Helper()
	e := newDataEnv(t)
	for id, user := range map[string]string{insID: aliceUUID, wealthID: aliceUUID, frID: aliceUUID, runningID: bobUUID} {
		row := e.status.rows[id]
		row.UserUUID = user
		e.status.rows[id] = row
	}
	keys, err := sessiontoken.GenerateKeySet()
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := sessiontoken.New(keys, sessiontoken.Config{Issuer: "samla-test"})
	if err != nil {
		t.Fatal(err)
	}
	eng := httpapi.NewEngine(httpapi.Options{
		Keys:      httpapitest.Keys{dataAcmeKey: "acme", dataGlobexKey: "globex"},
		RateLimit: httpapi.RateLimit{Disabled: true},
		Sessions:  tokens, SessionUsers: allLive{},
	})
	httpquery.RegisterRoutes(eng, httpquery.Deps{Status: e.status, History: &fakeHistory{},
		Companies: companytest.Catalog(), Data: e.data})
	e.engine = eng
	issued, err := tokens.Issue("acme", aliceUUID, "")
	if err != nil {
		t.Fatal(err)
	}
	return e, issued.Token
}

func sessionGet(e *dataEnv, path, token string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	r.Header.Set(httpapi.HeaderAuthorization, "Bearer "+token)
	r.Header.Set(httpapi.HeaderServiceVersion, string(httpapi.V20260401))
	w := httptest.NewRecorder()
	e.engine.ServeHTTP(w, r)
	return w
}

func TestSessionReadsItsOwnUsersCollections(t *testing.T) {
	e, token := newSessionDataEnv(t)
	for _, path := range []string{
		"/collections/" + insID + "/status",
		"/collections/" + insID + "/insurance/data",
		"/collections/" + wealthID + "/wealth/data",
		"/collections/" + frID + "/wealth/career-statement",
	} {
		if w := sessionGet(e, path, token); w.Code != http.StatusOK {
			t.Errorf("%s: %d %s", path, w.Code, w.Body)
		}
	}
	// Its own collection's answers are the API key's: a 404 of the other product stays one.
	if code := problemCode(t, sessionGet(e, "/collections/"+insID+"/wealth/data", token), http.StatusNotFound); code != httpquery.CodeProductMismatch {
		t.Errorf("own collection, other product: %s", code)
	}
	// Unknown collections are not found, as for the API key.
	for _, path := range []string{"/collections/" + unknownID + "/status", "/collections/" + unknownID + "/insurance/data", "/collections/x/status"} {
		if code := problemCode(t, sessionGet(e, path, token), http.StatusNotFound); code != httpquery.CodeCollectionNotFound {
			t.Errorf("%s: %s", path, code)
		}
	}
}

func TestSessionIsRefusedOtherUsersCollections(t *testing.T) {
	e, token := newSessionDataEnv(t)
	for _, id := range []string{runningID, emptyID} { // bob's, and one of no user
		for _, path := range []string{
			"/collections/" + id + "/status",
			"/collections/" + id + "/insurance/data",
			"/collections/" + id + "/wealth/data",
			"/collections/" + id + "/wealth/career-statement",
		} {
			if code := problemCode(t, sessionGet(e, path, token), http.StatusForbidden); code != httpapi.CodeForbiddenForSession {
				t.Errorf("%s: %s", path, code)
			}
		}
	}
}

// sessionRoutes are the query routes a session reaches (with a collection of its own user).
var sessionRoutes = map[string]bool{
	"GET /collections/:collectionId/status":                 true,
	"GET /collections/:collectionId/insurance/data":         true,
	"GET /collections/:collectionId/wealth/data":            true,
	"GET " + presenter.CareerStatementPath(":collectionId"): true,
}

func TestEveryOtherQueryRouteRefusesSessions(t *testing.T) {
	e, token := newSessionDataEnv(t)
	routes := e.engine.Routes()
	if len(routes) < 10 {
		t.Fatalf("only %d routes", len(routes))
	}
	for _, r := range routes {
		name := r.Method + " " + r.Path
		path := strings.NewReplacer(":collectionId", insID, ":companyId", "se-demo-insurer").Replace(r.Path)
		if r.Method != http.MethodGet || strings.Contains(path, ":") || strings.Contains(path, "*") {
			t.Fatalf("route %s has a method or a parameter this test does not fill", name)
		}
		w := sessionGet(e, path+"?collectionId="+insID, token)
		switch {
		case r.Path == "/health" || r.Path == httpapi.JWKSPath:
			if w.Code != http.StatusOK {
				t.Errorf("%s: %d", name, w.Code)
			}
		case sessionRoutes[name]:
			if w.Code == http.StatusForbidden {
				t.Errorf("%s refused the session its own collection: %s", name, w.Body)
			}
		default:
			if code := problemCode(t, w, http.StatusForbidden); code != httpapi.CodeForbiddenForSession {
				t.Errorf("%s: %s", name, code)
			}
		}
	}
}
