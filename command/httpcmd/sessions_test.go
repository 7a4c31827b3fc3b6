package httpcmd_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/samla/samla/command/app"
	"github.com/samla/samla/command/httpcmd"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/platform/httpapi/httpapitest"
	"github.com/samla/samla/platform/sessiontoken"
)

const (
	aliceUUID = "3f2b8c1e-5d4a-4b6f-9e7d-2a1c0b9f8e7d"
	bobUUID   = "9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d"
	aliceColl = "0e6a3c8f-1b2d-4e5f-8a9b-0c1d2e3f4a5b"
	bobColl   = "1f7b4d90-2c3e-4f60-9bac-1d2e3f4a5b6c"
	noneColl  = "2a8c5e01-3d4f-4071-8cbd-2e3f4a5b6c7d"
)

// liveUsers is a LiveUsers (and httpapi.SessionUsers) over a set of (client, user) pairs.
type liveUsers struct {
	mu   sync.Mutex
	live map[[2]string]bool
	err  error
}

func (l *liveUsers) IsLiveUser(_ context.Context, client, user string) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.live[[2]string{client, user}], l.err
}

// collectionUsers is a CollectionUsers over acme's collections.
type collectionUsers map[string]string

func (c collectionUsers) CollectionUser(_ context.Context, tenant, id string) (string, bool, error) {
	if tenant != "acme" {
		return "", false, nil
	}
	owner, ok := c[id]
	return owner, ok, nil
}

// recordingCommands is a CollectionCommands that accepts everything and remembers what it got.
type recordingCommands struct {
	mu       sync.Mutex
	started  []app.StartCollection
	supplied []app.SupplyInfo
}

func (r *recordingCommands) Start(_ context.Context, cmd app.StartCollection) (app.Created, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started = append(r.started, cmd)
	return app.Created{CollectionID: aliceColl, Company: cmd.Company, LoginMethod: cmd.LoginMethod,
		Status: collection.StatusRunning, CreatedAt: testNow}, nil
}

func (r *recordingCommands) SupplyInfo(_ context.Context, cmd app.SupplyInfo) (app.Supplied, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.supplied = append(r.supplied, cmd)
	return app.Supplied{}, nil
}

type sessionEnv struct {
	engine   *gin.Engine
	tokens   *sessiontoken.Tokens
	users    *liveUsers
	commands *recordingCommands
}

func newSessionEnv(t *testing.T) *sessionEnv {
	t.Helper()
	keys, err := sessiontoken.GenerateKeySet()
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := sessiontoken.New(keys, sessiontoken.Config{Issuer: "samla-test", Now: func() time.Time { return testNow }})
	if err != nil {
		t.Fatal(err)
	}
	users := &liveUsers{live: map[[2]string]bool{{"acme", aliceUUID}: true, {"acme", bobUUID}: true}}
	e := httpapi.NewEngine(httpapi.Options{Keys: httpapitest.Keys{acmeKey: "acme", globexKey: "globex"},
		Sessions: tokens, SessionUsers: users})
	commands := &recordingCommands{}
	httpcmd.RegisterRoutes(e, httpcmd.Deps{Collections: commands, FingerprintKey: fingerprintKey,
		Now:             func() time.Time { return testNow },
		CollectionUsers: collectionUsers{aliceColl: aliceUUID, bobColl: bobUUID, noneColl: ""}})
	httpcmd.RegisterSessionRoutes(e, httpcmd.SessionDeps{Issuer: tokens, Users: users})
	return &sessionEnv{engine: e, tokens: tokens, users: users, commands: commands}
}

// do serves a request with the API key key ("" for none) and, unless it is empty, the session
// token token, in 2026-04-01 unless headers say otherwise.
func (e *sessionEnv) do(method, path, body, key, token string, headers ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		r.Header.Set(httpapi.HeaderAPIKey, key)
	}
	if token != "" {
		r.Header.Set(httpapi.HeaderAuthorization, "Bearer "+token)
	}
	r.Header.Set(httpapi.HeaderServiceVersion, string(httpapi.V20260401))
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	w := httptest.NewRecorder()
	e.engine.ServeHTTP(w, r)
	return w
}

func (e *sessionEnv) createSession(t *testing.T, user string) (token string, expiresAt time.Time) {
	t.Helper()
	w := e.do(http.MethodPost, "/users/"+user+"/sessions", "", acmeKey, "")
	if w.Code != http.StatusCreated {
		t.Fatalf("POST sessions = %d: %s", w.Code, w.Body)
	}
	var body map[string]string
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if len(body) != 2 {
		t.Errorf("body %s has other members than token and expiresAt", w.Body)
	}
	exp, err := time.Parse(time.RFC3339, body["expiresAt"])
	if err != nil {
		t.Fatalf("expiresAt %q: %v", body["expiresAt"], err)
	}
	return body["token"], exp
}

func TestCreateSession(t *testing.T) {
	e := newSessionEnv(t)
	token, exp := e.createSession(t, aliceUUID)
	if want := testNow.Add(sessiontoken.DefaultTTL); !exp.Equal(want) {
		t.Errorf("expiresAt = %s, want %s", exp, want)
	}
	claims, err := e.tokens.Verify(token, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if claims.UserUUID != aliceUUID || claims.ClientID != "acme" || !claims.ExpiresAt.Equal(exp) {
		t.Errorf("claims = %+v", claims)
	}
	// The token names the API key it was minted with, by its id, so that revoking the key ends it.
	if want := httpapitest.KeyID(acmeKey); claims.APIKeyID != want {
		t.Errorf("the token names API key %q, want %q", claims.APIKeyID, want)
	}
	w := e.do(http.MethodPost, "/users/"+aliceUUID+"/sessions", "", acmeKey, "")
	if w.Header().Get("Cache-Control") != "no-store" {
		t.Errorf("Cache-Control = %q, want no-store", w.Header().Get("Cache-Control"))
	}
	// An empty object is a body too; an Idempotency-Key is accepted.
	if w := e.do(http.MethodPost, "/users/"+aliceUUID+"/sessions", "{}", acmeKey, "", httpapi.HeaderIdempotencyKey, "k1"); w.Code != http.StatusCreated {
		t.Errorf("with {} and an Idempotency-Key: %d %s", w.Code, w.Body)
	}
}

// unnamedKeys is an httpapi.KeyLookup that does not name the keys it finds.
type unnamedKeys map[string]string

func (k unnamedKeys) Lookup(_ context.Context, apiKey string) (string, error) {
	if id, ok := k[apiKey]; ok {
		return id, nil
	}
	return "", httpapi.ErrKeyNotFound
}

// TestCreateSessionNeedsTheKeysID: behind a key lookup that does not name keys, no session is
// issued: no revocation could end it.
func TestCreateSessionNeedsTheKeysID(t *testing.T) {
	e := newSessionEnv(t)
	engine := httpapi.NewEngine(httpapi.Options{Keys: unnamedKeys{acmeKey: "acme"}, Sessions: e.tokens, SessionUsers: e.users})
	httpcmd.RegisterSessionRoutes(engine, httpcmd.SessionDeps{Issuer: e.tokens, Users: e.users})
	e.engine = engine
	w := e.do(http.MethodPost, "/users/"+aliceUUID+"/sessions", "", acmeKey, "")
	if w.Code != http.StatusInternalServerError || strings.Contains(w.Body.String(), "token") {
		t.Fatalf("a session minted with an unnamed key = %d %s, want a 500 without a token", w.Code, w.Body)
	}
}

func TestCreateSessionRefusals(t *testing.T) {
	e := newSessionEnv(t)
	path := "/users/" + aliceUUID + "/sessions"
	// Unknown, malformed, deleted and another client's users have no sessions: 404.
	for _, tc := range []struct{ user, key string }{
		{"00000000-0000-4000-8000-000000000000", acmeKey},
		{"not-a-uuid", acmeKey},
		{"{" + aliceUUID + "}", acmeKey},
		{aliceUUID, globexKey},
	} {
		problemOf(t, e.do(http.MethodPost, "/users/"+tc.user+"/sessions", "", tc.key, ""), http.StatusNotFound, httpcmd.CodeUserNotFound)
	}
	// A user's id in uppercase is that user (uuids.Canonical): the session is its own.
	if w := e.do(http.MethodPost, "/users/"+strings.ToUpper(aliceUUID)+"/sessions", "", acmeKey, ""); w.Code != http.StatusCreated {
		t.Errorf("a session of the user's id in uppercase = %d %s", w.Code, w.Body)
	} else {
		var body struct{ Token string }
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
			t.Fatal(err)
		}
		if claims, err := e.tokens.Verify(body.Token, "acme"); err != nil || claims.UserUUID != aliceUUID {
			t.Errorf("the session's user = %+v, %v; want %s", claims, err, aliceUUID)
		}
	}
	// Only from 2026-04-01 on.
	problemOf(t, e.do(http.MethodPost, path, "", acmeKey, "", httpapi.HeaderServiceVersion, string(httpapi.V20250101)),
		http.StatusNotFound, httpapi.CodeNotFound)
	// A body with something in it is a mistake worth telling.
	w := e.do(http.MethodPost, path, `{"ttl":3600}`, acmeKey, "")
	if w.Code != http.StatusBadRequest {
		t.Errorf("a body with members: %d %s", w.Code, w.Body)
	}
	// API key only: a session cannot make sessions, not even its own.
	token, _ := e.createSession(t, aliceUUID)
	problemOf(t, e.do(http.MethodPost, path, "", "", token), http.StatusForbidden, httpapi.CodeForbiddenForSession)
	problemOf(t, e.do(http.MethodPost, path, "", acmeKey, token), http.StatusForbidden, httpapi.CodeForbiddenForSession)
	// A fault of the user lookup is no answer.
	e.users.err = errors.New("read model down")
	httpapitest.Problem(t, e.do(http.MethodPost, path, "", acmeKey, ""), http.StatusInternalServerError)
}

func TestSessionStartsCollectionsOfItsOwnUserOnly(t *testing.T) {
	e := newSessionEnv(t)
	token, _ := e.createSession(t, aliceUUID)
	body := func(user string) string {
		b := `{"company":"se-demo-insurer","loginMethod":"` + mock + `","parameters":[` + pnParam("199001010066") + `]`
		if user != "" {
			b += `,"userUuid":"` + user + `"`
		}
		return b + "}"
	}
	if w := e.do(http.MethodPost, "/collections", body(aliceUUID), "", token); w.Code != http.StatusCreated {
		t.Fatalf("own user: %d %s", w.Code, w.Body)
	}
	problemOf(t, e.do(http.MethodPost, "/collections", body(bobUUID), "", token), http.StatusForbidden, httpapi.CodeForbiddenForSession)
	problemOf(t, e.do(http.MethodPost, "/collections", body(""), "", token), http.StatusForbidden, httpapi.CodeForbiddenForSession)
	if len(e.commands.started) != 1 || e.commands.started[0].UserUUID != aliceUUID || e.commands.started[0].Tenant != "acme" {
		t.Errorf("started %+v, want alice's collection only", e.commands.started)
	}
	// The API key starts collections of any user, or none.
	for _, user := range []string{bobUUID, ""} {
		if w := e.do(http.MethodPost, "/collections", body(user), acmeKey, ""); w.Code != http.StatusCreated {
			t.Errorf("API key, user %q: %d %s", user, w.Code, w.Body)
		}
	}
}

func TestSessionSuppliesInfoToItsOwnCollectionsOnly(t *testing.T) {
	e := newSessionEnv(t)
	token, _ := e.createSession(t, aliceUUID)
	supply := func(id, key, token string) *httptest.ResponseRecorder {
		return e.do(http.MethodPost, "/collections/"+id+"/supplement-info", contactBody, key, token)
	}
	accepted(t, supply(aliceColl, "", token))
	problemOf(t, supply(bobColl, "", token), http.StatusForbidden, httpapi.CodeForbiddenForSession)
	problemOf(t, supply(noneColl, "", token), http.StatusForbidden, httpapi.CodeForbiddenForSession)
	problemOf(t, supply("3b9d6f12-4e50-4182-9dce-3f4a5b6c7d8e", "", token), http.StatusNotFound, httpcmd.CodeCollectionNotFound)
	if len(e.commands.supplied) != 1 || e.commands.supplied[0].CollectionID != aliceColl {
		t.Errorf("supplied %+v, want alice's collection only", e.commands.supplied)
	}
	accepted(t, supply(bobColl, acmeKey, ""))
	// Not a cancellation either.
	w := e.do(http.MethodDelete, "/collections/"+aliceColl, "", "", token)
	problemOf(t, w, http.StatusForbidden, httpapi.CodeForbiddenForSession)
}

func TestSupplementInfoRefusesSessionsWithoutCollectionUsers(t *testing.T) {
	e := newSessionEnv(t)
	token, _ := e.createSession(t, aliceUUID)
	engine := httpapi.NewEngine(httpapi.Options{Keys: httpapitest.Keys{acmeKey: "acme"}, Sessions: e.tokens, SessionUsers: e.users})
	httpcmd.RegisterRoutes(engine, httpcmd.Deps{Collections: e.commands, FingerprintKey: fingerprintKey})
	e.engine = engine
	problemOf(t, e.do(http.MethodPost, "/collections/"+aliceColl+"/supplement-info", contactBody, "", token),
		http.StatusForbidden, httpapi.CodeForbiddenForSession)
}
