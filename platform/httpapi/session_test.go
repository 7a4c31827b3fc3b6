package httpapi

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/samla/samla/platform/sessiontoken"
)

const (
	sessUser  = "3f2b8c1e-5d4a-4b6f-9e7d-2a1c0b9f8e7d"
	otherUser = "9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d"
	otherKey  = "other-key-0123456789abcdef0123456789abcdef"
)

// fakeUsers is a SessionUsers over a set of live (client, user) pairs that counts its lookups.
type fakeUsers struct {
	mu    sync.Mutex
	live  map[[2]string]bool
	err   error
	calls int
}

func (f *fakeUsers) IsLiveUser(_ context.Context, clientID, userUUID string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return f.live[[2]string{clientID, userUUID}], f.err
}

func (f *fakeUsers) set(clientID, userUUID string, live bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.live[[2]string{clientID, userUUID}] = live
}

func (f *fakeUsers) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

type sessionEnv struct {
	*testEnv
	tokens *sessiontoken.Tokens
	users  *fakeUsers
	log    *bytes.Buffer
}

// newSessionEnv is an engine with sessions on and a route of each kind: /users/:userUuid
// (AllowSessionsOfPathUser), /things/:owner (AllowSessionsCheckedByHandler; the path names the
// thing's owner, "none" for none), and /whoami, which does not serve sessions.
func newSessionEnv(t *testing.T, more ...func(*Options)) *sessionEnv {
	t.Helper()
	keys, err := sessiontoken.GenerateKeySet()
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	tokens, err := sessiontoken.New(keys, sessiontoken.Config{Issuer: "samla-test", Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	users := &fakeUsers{live: map[[2]string]bool{{"acme", sessUser}: true, {"acme", otherUser}: true, {"other", sessUser}: true}}
	logs := &bytes.Buffer{}
	env := newEnv(t, func(o *Options) {
		o.Sessions, o.SessionUsers, o.JWKS = tokens, users, keys.JWKSJSON()
		o.Logger = slog.New(slog.NewJSONHandler(logs, nil))
		for _, m := range more {
			m(o)
		}
	})
	env.clock = clk
	env.keys.byKey[otherKey] = "other"
	principal := func(c *gin.Context) {
		user, ok := SessionUser(c)
		c.JSON(http.StatusOK, gin.H{"client": ClientID(c), "user": user, "session": ok})
	}
	env.engine.GET("/users/:userUuid", AllowSessionsOfPathUser, principal)
	env.engine.GET("/things/:owner", AllowSessionsCheckedByHandler, func(c *gin.Context) {
		owner := c.Param("owner")
		if owner == "none" {
			owner = ""
		}
		if !RequireSessionUser(c, owner) {
			return
		}
		principal(c)
	})
	group := env.engine.Group("/grouped", AllowSessionsCheckedByHandler)
	group.GET("/x", principal)
	return &sessionEnv{testEnv: env, tokens: tokens, users: users, log: logs}
}

func (e *sessionEnv) token(t *testing.T, clientID, userUUID string) string {
	t.Helper()
	issued, err := e.tokens.Issue(clientID, userUUID, "")
	if err != nil {
		t.Fatal(err)
	}
	return issued.Token
}

func bearer(token string, extra ...string) map[string]string {
	h := map[string]string{HeaderAuthorization: "Bearer " + token, HeaderServiceVersion: string(V20260401)}
	for i := 0; i+1 < len(extra); i += 2 {
		h[extra[i]] = extra[i+1]
	}
	return h
}

func principalOf(t *testing.T, w *httptest.ResponseRecorder) (client, user string, session bool) {
	t.Helper()
	if w.Code != http.StatusOK {
		t.Fatalf("status = %d: %s", w.Code, w.Body)
	}
	var got struct {
		Client, User string
		Session      bool
	}
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	return got.Client, got.User, got.Session
}

func TestSessionTokenAuthenticatesItsUser(t *testing.T) {
	env := newSessionEnv(t)
	tok := env.token(t, "acme", sessUser)
	for _, path := range []string{"/users/" + sessUser, "/things/" + sessUser, "/grouped/x"} {
		client, user, session := principalOf(t, env.do(t, http.MethodGet, path, "", bearer(tok)))
		if client != "acme" || user != sessUser || !session {
			t.Errorf("%s: principal = %s/%s/%v, want the token's user of acme", path, client, user, session)
		}
	}
	// The scheme is case-insensitive (RFC 9110 §11.1).
	w := env.do(t, http.MethodGet, "/users/"+sessUser, "", map[string]string{HeaderAuthorization: "bearer " + tok, HeaderServiceVersion: string(V20260401)})
	if w.Code != http.StatusOK {
		t.Errorf("lowercase scheme: %d %s", w.Code, w.Body)
	}
	// An API-key request on the same routes is no session, and reaches any user.
	client, user, session := principalOf(t, env.do(t, http.MethodGet, "/things/"+otherUser, "", authed(HeaderServiceVersion, string(V20260401))))
	if client != "acme" || user != "" || session {
		t.Errorf("API key: principal = %s/%s/%v", client, user, session)
	}
	// The log ties the session's requests together by token id, and never names the user.
	if !strings.Contains(env.log.String(), `"session_id"`) || strings.Contains(env.log.String(), sessUser) {
		t.Errorf("access log: %s", env.log)
	}
}

func TestSessionScope(t *testing.T) {
	env := newSessionEnv(t)
	tok := env.token(t, "acme", sessUser)
	forbidden := []struct{ method, path string }{
		{http.MethodGet, "/whoami"},                // a route that does not serve sessions
		{http.MethodPost, "/echo"},                 // nor does this one, whatever the body
		{http.MethodGet, "/users/" + otherUser},    // another user in the path
		{http.MethodGet, "/things/" + otherUser},   // another user's resource
		{http.MethodGet, "/things/none"},           // a resource of no user
		{http.MethodGet, "/users/" + "not-a-uuid"}, // not its user either
	}
	for _, tc := range forbidden {
		w := env.do(t, tc.method, tc.path, `{"name":"x"}`, bearer(tok, "Content-Type", "application/json"))
		decodeProblem(t, w, http.StatusForbidden, CodeForbiddenForSession)
	}
	// Unknown paths and methods stay what they are.
	decodeProblem(t, env.do(t, http.MethodGet, "/nope", "", bearer(tok)), http.StatusNotFound, CodeNotFound)
	decodeProblem(t, env.do(t, http.MethodDelete, "/users/"+sessUser, "", bearer(tok)), http.StatusMethodNotAllowed, CodeMethodNotAllowed)
}

func TestSessionTokenFailures(t *testing.T) {
	env := newSessionEnv(t)
	valid := env.token(t, "acme", sessUser)
	parts := strings.Split(valid, ".")
	otherKeys, err := sessiontoken.GenerateKeySet()
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := sessiontoken.New(otherKeys, sessiontoken.Config{Issuer: "samla-test", Now: env.clock.now})
	if err != nil {
		t.Fatal(err)
	}
	foreignToken, err := foreign.Issue("acme", sessUser, "")
	if err != nil {
		t.Fatal(err)
	}
	// The same claims under a header that says "none" and no signature.
	noneHeader := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`))
	// A known kid with another key's signature.
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	forged := parts[0] + "." + parts[1] + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(priv, []byte(parts[0]+"."+parts[1])))
	wrongIssuer, err := sessiontoken.New(env.tokens.Keys(), sessiontoken.Config{Issuer: "elsewhere", Now: env.clock.now})
	if err != nil {
		t.Fatal(err)
	}
	wrongIssuerToken, err := wrongIssuer.Issue("acme", sessUser, "")
	if err != nil {
		t.Fatal(err)
	}
	early, err := sessiontoken.New(env.tokens.Keys(), sessiontoken.Config{Issuer: "samla-test",
		Now: func() time.Time { return env.clock.now().Add(time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	earlyToken, err := early.Issue("acme", sessUser, "")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		token string
		code  string
	}{
		{"garbage", "garbage", CodeTokenMalformed},
		{"alg none", noneHeader + "." + parts[1] + ".", CodeTokenUnsupportedAlgorithm},
		{"unknown key", foreignToken.Token, CodeTokenUnknownKey},
		{"forged signature", forged, CodeTokenInvalidSignature},
		{"tampered payload", parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"x"}`)) + "." + parts[2], CodeTokenInvalidSignature},
		{"wrong issuer", wrongIssuerToken.Token, CodeTokenWrongIssuer},
		{"not yet valid", earlyToken.Token, CodeTokenNotYetValid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := env.do(t, http.MethodGet, "/users/"+sessUser, "", bearer(tc.token))
			decodeProblem(t, w, http.StatusUnauthorized, tc.code)
			if got := w.Header().Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer ") || !strings.Contains(got, "invalid_token") {
				t.Errorf("WWW-Authenticate = %q", got)
			}
		})
	}
	t.Run("expired", func(t *testing.T) {
		env.clock.advance(sessiontoken.DefaultTTL + sessiontoken.ClockSkew)
		decodeProblem(t, env.do(t, http.MethodGet, "/users/"+sessUser, "", bearer(valid)), http.StatusUnauthorized, CodeTokenExpired)
	})
}

func TestSessionAuthorizationHeaderShape(t *testing.T) {
	env := newSessionEnv(t)
	tok := env.token(t, "acme", sessUser)
	for _, value := range []string{"Basic dXNlcjpwYXNz", "Bearer", "Bearer ", tok} {
		w := env.do(t, http.MethodGet, "/users/"+sessUser, "", map[string]string{HeaderAuthorization: value, HeaderServiceVersion: string(V20260401)})
		decodeProblem(t, w, http.StatusUnauthorized, CodeTokenMalformed)
	}
	r := httptest.NewRequest(http.MethodGet, "/users/"+sessUser, nil)
	r.Header.Add(HeaderAuthorization, "Bearer "+tok)
	r.Header.Add(HeaderAuthorization, "Bearer "+tok)
	r.Header.Set(HeaderServiceVersion, string(V20260401))
	w := httptest.NewRecorder()
	env.engine.ServeHTTP(w, r)
	decodeProblem(t, w, http.StatusBadRequest, CodeValidationFailed)
	// Without any credentials the 401 names both.
	p := decodeProblem(t, env.do(t, http.MethodGet, "/users/"+sessUser, "", map[string]string{HeaderServiceVersion: string(V20260401)}),
		http.StatusUnauthorized, CodeUnauthorized)
	if !strings.Contains(p.Detail, HeaderAPIKey) || !strings.Contains(p.Detail, "Bearer") {
		t.Errorf("detail %q does not name both credentials", p.Detail)
	}
}

func TestSessionWithAPIKey(t *testing.T) {
	env := newSessionEnv(t)
	tok := env.token(t, "acme", sessUser)
	// The key decides the client, the token is its user's: the request is that session.
	client, user, session := principalOf(t, env.do(t, http.MethodGet, "/users/"+sessUser, "", bearer(tok, HeaderAPIKey, testKey)))
	if client != "acme" || user != sessUser || !session {
		t.Errorf("principal = %s/%s/%v", client, user, session)
	}
	decodeProblem(t, env.do(t, http.MethodGet, "/whoami", "", bearer(tok, HeaderAPIKey, testKey)), http.StatusForbidden, CodeForbiddenForSession)
	// Another client's key with acme's token: the token is not for that client.
	decodeProblem(t, env.do(t, http.MethodGet, "/users/"+sessUser, "", bearer(tok, HeaderAPIKey, otherKey)),
		http.StatusUnauthorized, CodeTokenWrongAudience)
	// A bad key is refused whatever the token.
	decodeProblem(t, env.do(t, http.MethodGet, "/users/"+sessUser, "", bearer(tok, HeaderAPIKey, "wrong")),
		http.StatusUnauthorized, CodeUnauthorized)
}

func TestSessionUserMustBeLive(t *testing.T) {
	env := newSessionEnv(t)
	tok := env.token(t, "acme", sessUser)
	path := "/users/" + sessUser
	for range 3 {
		if w := env.do(t, http.MethodGet, path, "", bearer(tok)); w.Code != http.StatusOK {
			t.Fatalf("live user: %d %s", w.Code, w.Body)
		}
	}
	if got := env.users.callCount(); got != 3 {
		t.Errorf("%d lookups for 3 requests, want one each: nothing may cache a live user", got)
	}
	env.users.set("acme", sessUser, false) // deleted
	decodeProblem(t, env.do(t, http.MethodGet, path, "", bearer(tok)), http.StatusUnauthorized, CodeTokenRevoked)
	// The same user uuid at another client is another user: its liveness is asked of acme.
	env.users.set("other", sessUser, true)
	decodeProblem(t, env.do(t, http.MethodGet, path, "", bearer(tok)), http.StatusUnauthorized, CodeTokenRevoked)

	env.users.set("acme", sessUser, true)
	env.users.err = errors.New("read model down")
	decodeProblem(t, env.do(t, http.MethodGet, path, "", bearer(tok)), http.StatusServiceUnavailable, CodeServiceUnavailable)
}

func TestSessionsNeedTheVersion(t *testing.T) {
	env := newSessionEnv(t)
	tok := env.token(t, "acme", sessUser)
	old := map[string]string{HeaderAuthorization: "Bearer " + tok, HeaderServiceVersion: string(V20250101)}
	// 2025-01-01 knows no sessions: a token alone is no credential.
	decodeProblem(t, env.do(t, http.MethodGet, "/users/"+sessUser, "", old), http.StatusUnauthorized, CodeUnauthorized)
	// Beside an API key, the Authorization header is not looked at, as before sessions existed.
	old[HeaderAPIKey] = testKey
	old[HeaderAuthorization] = "Basic whatever"
	client, _, session := principalOf(t, env.do(t, http.MethodGet, "/whoami", "", old))
	if client != "acme" || session {
		t.Errorf("principal = %s, session %v", client, session)
	}
}

func TestSessionsOff(t *testing.T) {
	env := newEnv(t, nil)
	env.engine.GET("/users/:userUuid", AllowSessionsOfPathUser, func(c *gin.Context) { c.Status(http.StatusNoContent) })
	decodeProblem(t, env.do(t, http.MethodGet, "/users/"+sessUser, "", bearer("anything")), http.StatusUnauthorized, CodeUnauthorized)
	if w := env.do(t, http.MethodGet, "/users/"+sessUser, "", bearer("anything", HeaderAPIKey, testKey)); w.Code != http.StatusNoContent {
		t.Errorf("API key beside an unused Authorization header: %d %s", w.Code, w.Body)
	}
	decodeProblem(t, env.do(t, http.MethodGet, JWKSPath, "", nil), http.StatusUnauthorized, CodeUnauthorized)
}

func TestJWKSIsPublic(t *testing.T) {
	env := newSessionEnv(t)
	w := env.do(t, http.MethodGet, JWKSPath, "", nil)
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/jwk-set+json" {
		t.Fatalf("JWKS = %d %q %s", w.Code, w.Header().Get("Content-Type"), w.Body)
	}
	var set sessiontoken.JWKSet
	if err := json.Unmarshal(w.Body.Bytes(), &set); err != nil {
		t.Fatal(err)
	}
	if len(set.Keys) != 1 || set.Keys[0].KeyID != env.tokens.Keys().SigningKeyID() {
		t.Errorf("JWKS = %s", w.Body)
	}
	if env.keys.callCount() != 0 {
		t.Error("the JWKS looked up a key")
	}
}

func TestSinceVersion(t *testing.T) {
	env := newEnv(t, nil)
	env.engine.GET("/new", SinceVersion(V20260401), func(c *gin.Context) { c.Status(http.StatusNoContent) })
	decodeProblem(t, env.do(t, http.MethodGet, "/new", "", authed()), http.StatusNotFound, CodeNotFound)
	if w := env.do(t, http.MethodGet, "/new", "", authed(HeaderServiceVersion, string(V20260401))); w.Code != http.StatusNoContent {
		t.Errorf("2026-04-01: %d %s", w.Code, w.Body)
	}
}

func TestNewEngineWantsBothSessionPorts(t *testing.T) {
	keys, err := sessiontoken.GenerateKeySet()
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := sessiontoken.New(keys, sessiontoken.Config{Issuer: "x"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if recover() == nil {
			t.Error("NewEngine accepted a verifier without a user lookup")
		}
	}()
	NewEngine(Options{Keys: newFakeKeys(), Sessions: tokens})
}
